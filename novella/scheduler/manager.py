"""The scheduler service: ``select_destinations`` on topic ``scheduler``.

One request spec becomes one allocation-candidates query; the hosts behind
the candidates are filtered and weighed, and for each instance the best host
whose allocation request placement accepts (PUT /allocations, the instance as
consumer) is chosen. Alternates from the same cell follow it, unclaimed, so
the conductor can reschedule without asking again.
"""
import copy
import itertools
import logging
import random

import os_traits
import sqlalchemy as sa

from novella import service
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.placement import client as placement_client
from novella.scheduler import filters as filters_mod
from novella.scheduler import weighers as weighers_mod
from novella.scheduler.errors import NoValidHost
from novella.scheduler.host_manager import HostManager
from novella.scheduler.utils import ResourceRequest, selection

LOG = logging.getLogger(__name__)
_NO_SUMMARY = placement_client.ProviderSummary()
_UNSEEN = object()


class SchedulerManager:
    def __init__(self, conf, api_db, placement):
        self.conf = conf
        self.api_db = api_db
        self.placement = placement
        self.host_manager = HostManager(conf, api_db)
        self.filters = filters_mod.load_filters(conf, conf.filter_scheduler.enabled_filters,
                                                api_db)
        self.weighers = weighers_mod.load_weighers(conf, conf.filter_scheduler.weight_classes)

    # -- periodic work -------------------------------------------------------------
    @property
    def periodic_tasks(self):
        """{method name: interval in seconds} for the service runner (0: not run)."""
        interval = self.conf.scheduler.discover_hosts_in_cells_interval
        return {"discover_hosts_in_cells": service.spacing(interval)}

    def discover_hosts_in_cells(self):
        """Map the compute hosts of every cell that no host mapping names yet,
        as `novella manage cell_v2 discover_hosts` does."""
        from novella.cmd import manage
        for cell_name, host in manage.discover_hosts(self.api_db.url):
            LOG.info("Mapped compute host %s to cell %s", host, cell_name)

    # -- RPC endpoint --------------------------------------------------------------
    def select_destinations(self, ctxt, request_spec, instance_uuids, return_alternates=True):
        spec = copy.deepcopy(request_spec)
        instance_uuids = list(instance_uuids or []) or [spec.get("instance_uuid")]
        self._refresh_instance_group(spec)
        rr = self.resource_request(spec)
        try:
            candidates = self.placement.get_allocation_candidates(
                rr.query_groups(), limit=rr.limit, group_policy=rr.group_policy,
                same_subtree=rr.same_subtree, root_required=rr.root_required)
        except placement_client.PlacementError as exc:
            raise NoValidHost(f"Placement rejected the request: {exc.detail}") from exc
        if not len(candidates):
            raise NoValidHost("There are not enough hosts available "
                              "(placement returned no allocation candidates).")
        hosts = self._candidate_hosts(candidates, spec)

        project_id = spec.get("project_id") or ctxt.project_id
        user_id = spec.get("user_id") or ctxt.user_id
        max_alternates = self.conf.scheduler.max_attempts - 1 if return_alternates else 0
        claimed, result = [], []
        try:
            for instance_uuid in instance_uuids:
                weighed = self._filter_and_weigh(hosts, spec, len(candidates))
                chosen, request = self._claim_first(weighed, instance_uuid, project_id, user_id)
                if chosen is None:
                    raise NoValidHost("There are not enough hosts available "
                                      "(every claim in placement was refused).")
                claimed.append(instance_uuid)
                chosen.consume(rr.total_resources())
                if spec.get("instance_group"):  # the next instance sees this one placed
                    spec["instance_group"].setdefault("hosts", []).append(chosen.host)
                version = self.placement.microversion
                alternates = list(itertools.islice(
                    (h for h in weighed if h is not chosen and h.cell_uuid == chosen.cell_uuid),
                    max_alternates))
                zone = self.host_manager.host_availability_zone
                result.append([selection(chosen, request, version,
                                         availability_zone=zone(chosen))] +
                              [selection(h, h.allocation_requests[0].decoded(), version,
                                         availability_zone=zone(h))
                               for h in alternates])
        except Exception:
            for consumer in claimed:  # all instances of a request or none
                self.placement.delete_allocations(consumer)
            raise
        return result

    # -- request building ------------------------------------------------------
    def resource_request(self, spec):
        """The allocation-candidates query for ``spec``, pre-filters applied."""
        in_tree = self._destination_node(spec)
        limit = self.conf.scheduler.max_placement_results
        forced = spec.get("force_hosts") or spec.get("force_nodes")
        if forced or in_tree:
            limit = None  # the forced host must not be cut out by the limit
        rr = ResourceRequest.from_request_spec(spec, limit=limit, in_tree=in_tree,
                                               member_of=self._member_of(spec))
        # Disabled hosts are left out by placement, not only by the ComputeFilter
        # after it answered: otherwise the first max_placement_results candidates
        # may all be disabled hosts while enabled ones are left unasked. As the
        # reference's compute_status_filter, for a forced host too (which bypasses
        # the filters, not this).
        rr.root_required.append("!" + os_traits.COMPUTE_STATUS_DISABLED)
        return rr

    def _destination_node(self, spec):
        """The compute node uuid when the destination names exactly one node."""
        dest = spec.get("requested_destination") or {}
        host, node = dest.get("host"), dest.get("node")
        if not host and not node:
            return None
        states = [h for h in self.host_manager.get_host_states(
                      hosts=[host] if host else None, cell_uuid=dest.get("cell_uuid"))
                  if not node or h.nodename == node]
        if not states:
            raise NoValidHost(f"Compute host {host or ''} node {node or ''} could not be found.")
        return states[0].uuid if len(states) == 1 else None

    def _member_of(self, spec):
        """Aggregate restrictions: tenant isolation, zone, requested aggregates."""
        member_of = []
        sched = self.conf.scheduler
        if sched.limit_tenants_to_placement_aggregate:
            project = spec.get("project_id")
            aggs = [uuid for uuid, md in self.host_manager.aggregates_with_metadata(
                        key_prefix="filter_tenant_id")
                    if any(k.startswith("filter_tenant_id") and project in v.split(",")
                           for k, v in md.items())]
            if aggs:
                member_of.append(aggs)
            elif sched.placement_aggregate_required_for_tenants:
                raise NoValidHost(f"No host aggregate is assigned to project {project}.")
        az = (spec.get("availability_zone") or "").split(":", 1)[0]
        if sched.query_placement_for_availability_zone and az:
            aggs = [uuid for uuid, _ in self.host_manager.aggregates_with_metadata(
                        key="availability_zone", value=az)]
            if aggs:
                member_of.append(aggs)
        for aggs in (spec.get("requested_destination") or {}).get("aggregates") or []:
            member_of.append(aggs.split(",") if isinstance(aggs, str) else list(aggs))
        return member_of

    def _refresh_instance_group(self, spec):
        """Fill the group's members and their hosts (one entry per member) from the databases."""
        group = spec.get("instance_group")
        if not group or not group.get("uuid"):
            return
        with self.api_db.session() as s:
            row = s.scalars(sa.select(am.InstanceGroup).where(
                am.InstanceGroup.uuid == group["uuid"])).first()
            if row is None:
                return
            members = [m.instance_uuid for m in row.members]
            group["policy"] = group.get("policy") or row.policy
            mappings = s.execute(
                sa.select(am.InstanceMapping.instance_uuid, am.InstanceMapping.cell_id)
                .where(am.InstanceMapping.instance_uuid.in_(members))).all()
        uuids = [uuid for uuid, cell_id in mappings if cell_id is not None]
        hosts = []
        # Every cell, not only the mapped ones: a member resized to another cell
        # keeps a hidden copy on its source host until the resize is confirmed.
        for cell in cells_mod.list_cells(self.api_db, include_cell0=False) if uuids else ():
            with cells_mod.cell_database(cell).session() as s:
                hosts.extend(s.scalars(sa.select(cm.Instance.host).where(
                    cm.Instance.uuid.in_(uuids), cm.Instance.deleted == 0,
                    cm.Instance.host.is_not(None))))
        group["members"] = members
        group["hosts"] = hosts

    # -- hosts -------------------------------------------------------------------
    def _candidate_hosts(self, candidates, spec):
        """HostStates of the compute nodes behind the candidates, destination rules applied,
        in placement's order (the tie-break between equal weights).

        One pass over the allocation requests: each goes to the first of its
        providers' roots that is a compute node (sharing providers are not),
        whose HostState is made with it when its first request is met.
        """
        get_summary = candidates.summaries.get
        dest = spec.get("requested_destination") or {}
        make = self.host_manager.host_state_maker(cell_uuid=dest.get("cell_uuid"))
        states, hosts = {}, []
        for ar in candidates.requests:
            for rp in ar.allocations:
                summary = get_summary(rp)
                root = (summary.root_provider_uuid or rp) if summary is not None else rp
                h = states.get(root, _UNSEEN)
                if h is _UNSEEN:
                    h = states[root] = make(
                        root, (summary if root == rp else get_summary(root)) or _NO_SUMMARY, ar)
                    if h is not None:
                        hosts.append(h)
                        break
                elif h is not None:
                    h.allocation_requests.append(ar)
                    break
        ignored = set(spec.get("ignore_hosts") or [])
        tried = {tuple(hn) for hn in (spec.get("retry") or {}).get("hosts") or []}
        if ignored or tried or dest.get("host") or dest.get("node"):
            hosts = [h for h in hosts
                     if h.host not in ignored and (h.host, h.nodename) not in tried
                     and (not dest.get("host") or h.host == dest["host"])
                     and (not dest.get("node") or h.nodename == dest["node"])]
        return hosts

    def _filter_and_weigh(self, hosts, spec, n_candidates):
        if not hosts:
            raise NoValidHost(
                f"There are not enough hosts available ({n_candidates} allocation candidates; "
                "none on a known compute node allowed by the requested destination, "
                "ignore_hosts and earlier attempts).")
        forced = self._forced(hosts, spec)
        if forced is not None:
            passing = forced  # forced hosts bypass the filters, as an admin asked
        else:
            passing = hosts
            for f in (f for f in self.filters if f.applies(spec)):
                passing = f.filter_all(passing, spec)
                if not passing:
                    raise NoValidHost(
                        f"There are not enough hosts available ({n_candidates} allocation "
                        f"candidates; filter {type(f).__name__} returned 0 hosts).")
        weighed = weighers_mod.weighed_hosts(self.weighers, passing, spec)
        subset = min(self.conf.filter_scheduler.host_subset_size, len(weighed))
        if subset > 1:
            weighed.insert(0, weighed.pop(random.randrange(subset)))
        return weighed

    @staticmethod
    def _forced(hosts, spec):
        force_hosts = set(spec.get("force_hosts") or [])
        force_nodes = set(spec.get("force_nodes") or [])
        if not force_hosts and not force_nodes:
            return None
        forced = [h for h in hosts if (not force_hosts or h.host in force_hosts)
                  and (not force_nodes or h.nodename in force_nodes)]
        if not forced:
            raise NoValidHost(f"The forced hosts {sorted(force_hosts | force_nodes)} "
                              "are not among the candidates.")
        return forced

    def _claim_first(self, weighed, consumer, project_id, user_id):
        """Claim on the best host whose allocation request placement accepts."""
        for host in weighed:
            for candidate in host.allocation_requests:
                request = candidate.decoded()
                try:
                    self.placement.put_allocations(
                        consumer, request["allocations"], project_id, user_id,
                        consumer_generation=None, mappings=request.get("mappings"))
                    return host, request
                except placement_client.Conflict as exc:
                    # Someone took the room since the query: try the next one.
                    LOG.info("claim for %s on %s refused: %s", consumer, host.host, exc)
        return None, None
