"""`novella manage placement audit` and `placement heal_allocations` (docs/manage.md).

Both reach placement through its client, built as `[placement]` says (novella/clients.py)
and read the cell databases; heal_allocations also reads and updates the
servers' ports through the network service's client.
"""
import copy
import json

import sqlalchemy as sa

from novella.cmd import manage_cli
from novella.cmd.manage_cli import CommandError
from novella.compute.states import migration_status as ms
from novella.context import get_admin_context
from novella.db import api_models as am
from novella.db import cell_models as cm
from novella.db import cells as cells_mod
from novella.placement import client as placement_client
from novella.scheduler.utils import ResourceRequest, port_profiles

# A migration in one of these states holds no allocation any more.
FINAL_MIGRATION_STATES = (ms.CONFIRMED, ms.REVERTED, ms.ERROR, ms.FAILED, ms.COMPLETED,
                          "cancelled", ms.DONE)
# Allocations holding none of these classes are not the compute service's.
COMPUTE_CLASSES = {"VCPU", "PCPU", "MEMORY_MB", "DISK_GB", "VGPU", "MEM_ENCRYPTION_CONTEXT",
                   "NET_BW_EGR_KILOBIT_PER_SEC", "NET_BW_IGR_KILOBIT_PER_SEC",
                   "NET_PACKET_RATE_KILOPACKET_PER_SEC", "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
                   "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC"}


def clients(conf, api_url):
    """(placement client, network service client) as configured."""
    from novella.embedded import service_connections
    from novella.network.api import NetworkAPI
    from novella import clients as service_clients
    try:
        placement = service_clients.placement_client(conf)
    except service_clients.MissingOption as exc:
        raise CommandError(str(exc), manage_cli.CONFIG_ERROR) from None
    return placement, NetworkAPI(service_connections(conf, api_url)["network"])


def _clients(api_url):
    from novella.conf import CONF
    return clients(CONF, api_url)


def _say(verbose):
    return print if verbose else (lambda *_: None)


# --- audit ----------------------------------------------------------------------------------
def _known_consumers(api_db):
    """Uuids of the live instances and in-progress migrations of every cell."""
    def read(cell, db):
        with db.session() as s:
            out = set(s.scalars(sa.select(cm.Instance.uuid).where(cm.Instance.deleted == 0)))
            out.update(s.scalars(sa.select(cm.Migration.uuid).where(
                cm.Migration.deleted == 0, cm.Migration.status.not_in(FINAL_MIGRATION_STATES))))
            return out
    known = set()
    for cell_uuid, result in cells_mod.scatter(cells_mod.list_cells(api_db), read).items():
        if isinstance(result, Exception):
            raise CommandError(f"Unable to read cell {cell_uuid}: {result}", 1)
        known |= result
    return known


def _drop_provider(placement, consumer, provider):
    """Remove ``consumer``'s allocation against ``provider`` only."""
    current = placement.get_allocations(consumer)
    rest = {rp: a for rp, a in current["allocations"].items() if rp != provider}
    if not rest:
        placement.delete_allocations(consumer)
        return
    placement.put_allocations(consumer, rest, current["project_id"], current["user_id"],
                              consumer_generation=current.get("consumer_generation"),
                              consumer_type=current.get("consumer_type") or "INSTANCE")


def audit(args, api_url):
    """0 no orphan; 3 orphans found; 4 orphans deleted; 1 error; 127 unknown provider."""
    say = _say(args.verbose)
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    placement, _network = _clients(api_url)
    if args.resource_provider:
        providers = placement.list_resource_providers(uuid=args.resource_provider)
        if not providers:
            raise CommandError(f"Resource provider with UUID {args.resource_provider} "
                               "does not exist.", 127)
    else:
        providers = placement.list_resource_providers()
    known = _known_consumers(api_db)
    found = 0
    for rp in providers:
        for consumer, alloc in sorted(placement.get_provider_allocations(rp["uuid"]).items()):
            resources = alloc["resources"]
            if consumer in known or not COMPUTE_CLASSES & set(resources):
                continue
            found += 1
            say(f"Allocations were set against consumer UUID {consumer} but no existing "
                "instances or active migrations are related.")
            if not args.delete:
                say(f"Allocations for consumer UUID {consumer} on Resource Provider "
                    f"{rp['uuid']} can be deleted: {resources}")
                continue
            try:
                _drop_provider(placement, consumer, rp["uuid"])
            except placement_client.PlacementError as exc:
                print(f"Not able to delete allocations for consumer UUID {consumer}: {exc}")
                print(f"The Resource Provider {rp['uuid']} had problems when deleting "
                      "allocations. Stopping now. Please fix the problem by hand and run again.")
                return 1
            say(f"Deleted allocations for consumer UUID {consumer} on Resource Provider "
                f"{rp['uuid']}: {resources}")
    if not found:
        return 0
    say(f"Processed {found} allocation{'s' if found > 1 else ''}.")
    return 4 if args.delete else 3


# --- heal_allocations -----------------------------------------------------------------------
class HealError(CommandError):
    pass


def _merge(allocations, extra):
    for rp, alloc in extra.items():
        held = allocations.setdefault(rp, {"resources": {}})["resources"]
        for rc, n in alloc["resources"].items():
            held[rc] = held.get(rc, 0) + n
    return allocations


def _resources_only(allocations):
    return {rp: {"resources": dict(a["resources"])} for rp, a in allocations.items()}


class Healer:
    """Heals one server at a time; counts what it healed."""

    def __init__(self, api_db, placement, network, say, dry_run, heal_ports, force):
        self.api_db, self.placement, self.network = api_db, placement, network
        self.say, self.dry_run, self.heal_ports, self.force = say, dry_run, heal_ports, force
        self.ctxt = get_admin_context()
        self.nodes = {}

    def node_uuid(self, cell_db, inst):
        key = (inst.host, inst.node)
        if key not in self.nodes:
            with cell_db.session() as s:
                self.nodes[key] = s.scalar(sa.select(cm.ComputeNode.uuid).where(
                    cm.ComputeNode.host == inst.host,
                    cm.ComputeNode.hypervisor_hostname == inst.node,
                    cm.ComputeNode.deleted == 0))
        if self.nodes[key] is None:
            raise HealError(f"Compute host {inst.host} could not be found.", 2)
        return self.nodes[key]

    def flavor_request(self, inst):
        """The flavor's resource request, as the scheduler builds it."""
        extra = json.loads(inst.extra.flavor) if inst.extra and inst.extra.flavor else {}
        flavor = extra.get("cur") or {"vcpus": inst.vcpus, "memory_mb": inst.memory_mb,
                                      "root_gb": inst.root_gb, "ephemeral_gb": inst.ephemeral_gb}
        with self.api_db.session() as s:
            doc = s.scalar(sa.select(am.RequestSpec.spec).where(
                am.RequestSpec.instance_uuid == inst.uuid))
        is_bfv = bool(json.loads(doc).get("is_bfv")) if doc else False
        return ResourceRequest.from_request_spec({"flavor": flavor, "is_bfv": is_bfv})

    def ports(self, inst):
        """(request groups of the server's ports, {port id: binding profile})."""
        try:
            groups = self.network.get_requested_resource_groups(self.ctxt, inst.uuid)
            ports = self.network.list_ports(self.ctxt, device_id=inst.uuid)
        except Exception as exc:  # noqa: BLE001 - any failure of the network service
            raise HealError(f"Unable to query ports for instance {inst.uuid}: {exc}", 5) from exc
        return groups, {p["id"]: dict(p.get("binding:profile") or {}) for p in ports}

    @staticmethod
    def _provider_in(group, profile, allocations):
        """The provider the port's profile names for ``group`` if the allocation holds
        the group's resources there, else None."""
        named = profile.get("allocation")
        rp = named.get(group["suffix"]) if isinstance(named, dict) else named
        held = (allocations.get(rp) or {}).get("resources") or {}
        return rp if rp and all(held.get(rc, 0) >= n for rc, n in group["resources"].items()) \
            else None

    def heal(self, cell_db, inst):
        """True when the server's allocations were written."""
        if inst.task_state is not None:
            self.say(f"Instance {inst.uuid} is undergoing a task state transition: "
                     f"{inst.task_state}")
            return False
        if not inst.node:
            self.say(f"Instance {inst.uuid} is not on a host.")
            return False
        node = self.node_uuid(cell_db, inst)
        try:
            current = self.placement.get_allocations(inst.uuid)
        except placement_client.PlacementError as exc:
            raise HealError(f"Failed to update allocations for consumer {inst.uuid}. "
                            f"Error: Allocation retrieval failed: {exc}", 3) from exc
        held = _resources_only(current.get("allocations") or {})
        rr = self.flavor_request(inst)
        extra_groups = []   # numbered flavor groups, placed by placement with the ports'
        need = None
        if not held or self.force:
            if self.force:
                self.say(f"Force flag passed for instance {inst.uuid}")
            need = "create" if not held else "update"
            allocations = {node: {"resources": dict(rr.groups[""].resources)}}
            extra_groups = [{"suffix": s, "resources": dict(g.resources),
                             "required_traits": [t for t in g.required if not t.startswith("!")],
                             "forbidden_traits": [t[1:] for t in g.required if t.startswith("!")]}
                            for s, g in rr.groups.items() if s and g.resources]
        else:
            allocations = copy.deepcopy(held)
        if held and (current.get("project_id") != inst.project_id
                     or current.get("user_id") != inst.user_id):
            need = need or "update"
        profiles, changed_ports = {}, {}
        missing = list(extra_groups)
        if self.heal_ports:
            groups, profiles = self.ports(inst)
            for group in groups:
                profile = profiles.get(group["requester_id"], {})
                rp = self._provider_in(group, profile, held)
                if rp is None:
                    missing.append(group)
                elif self.force:  # carried into the rebuilt allocation
                    _merge(allocations, {rp: {"resources": group["resources"]}})
        if missing:
            found = self.place(inst, node, missing)
            _merge(allocations, found["allocations"])
            for port, profile in port_profiles(missing, mappings=found.get("mappings")).items():
                old = profiles.get(port, {})
                named = old.get("allocation") if isinstance(old.get("allocation"), dict) else {}
                changed_ports[port] = (old, dict(old, allocation=dict(named, **profile["allocation"])))
            need = need or "update"
        if need is None:
            self.say(f"The allocation of instance {inst.uuid} is up-to-date. "
                     "Nothing to be healed.")
            return False
        if self.dry_run:
            self.say(f"[dry-run] {need.capitalize()} allocations for instance {inst.uuid}: "
                     f"{json.dumps(allocations, sort_keys=True)}")
            for port, (_old, new) in changed_ports.items():
                self.say(f"[dry-run] Update port {port} binding profile: {json.dumps(new)}")
            return False    # nothing was healed: not counted (as the reference)
        self.update_ports(changed_ports)
        try:
            self.placement.put_allocations(
                inst.uuid, allocations, inst.project_id, inst.user_id,
                consumer_generation=current.get("consumer_generation"),
                consumer_type=current.get("consumer_type") or "INSTANCE")
        except placement_client.PlacementError as exc:
            self.rollback_ports(changed_ports)
            raise HealError(f"Failed to {need} allocations for consumer {inst.uuid}. "
                            f"Error: {exc.detail or exc}", 3) from exc
        self.say(f"Successfully {need}d allocations for instance {inst.uuid}.")
        return True

    def place(self, inst, node, groups):
        """An allocation request for ``groups`` inside the host's provider tree."""
        rr = ResourceRequest.from_request_spec({"flavor": {}, "requested_resources": groups},
                                               in_tree=node)
        try:
            candidates = self.placement.get_allocation_candidates(
                rr.query_groups(), limit=1, group_policy=rr.group_policy or "none",
                same_subtree=rr.same_subtree)
        except placement_client.PlacementError as exc:
            raise HealError(f"Failed to create allocations for consumer {inst.uuid}. "
                            f"Error: {exc.detail or exc}", 3) from exc
        if not len(candidates):
            raise HealError(f"Failed to create allocations for consumer {inst.uuid}. Error: no "
                            f"provider of the tree of compute node {node} can hold "
                            f"{[g['resources'] for g in groups]}", 3)
        return candidates.allocation_requests[0]

    def update_ports(self, changed):
        done = []
        for port, (_old, new) in changed.items():
            try:
                self.network.update_port(self.ctxt, port, {"binding:profile": new})
            except Exception as exc:  # noqa: BLE001 - any failure of the network service
                self.rollback_ports({p: changed[p] for p in done})
                raise HealError(f"Unable to update ports with allocations that are about to be "
                                f"created in placement: {port}: {exc}", 6) from exc
            done.append(port)
            self.say(f"Updated port {port} with allocation {new.get('allocation')}")

    def rollback_ports(self, changed):
        failed = []
        for port, (old, _new) in changed.items():
            try:
                self.network.update_port(self.ctxt, port, {"binding:profile": old})
            except Exception:  # noqa: BLE001 - reported below, with what to do by hand
                failed.append(port)
        if failed:
            raise HealError("Failed to roll back the port updates; remove the `allocation` key "
                            "of the binding profile of these ports by hand "
                            f"(`openstack port unset <port> --binding-profile allocation`): "
                            f"{', '.join(failed)}", 7)


def _instances(cell_db, instance_uuid=None):
    q = (sa.select(cm.Instance).where(cm.Instance.deleted == 0)
         .order_by(cm.Instance.created_at, cm.Instance.id))
    if instance_uuid:
        q = q.where(cm.Instance.uuid == instance_uuid)
    with cell_db.session() as s:
        return list(s.scalars(q))


def heal_allocations(args, api_url):
    """0 healed; 1 --max-count reached; 2 no compute node; 3 placement refused; 4 nothing
    to do; 5 ports unreadable; 6 ports not updated; 7 port rollback failed; 127 bad input.
    (The reference's 8, a vGPU or Cyborg request it cannot heal, cannot arise: Novella
    has neither.)"""
    say = _say(args.verbose)
    if args.instance and args.cell:
        raise CommandError("The --cell and --instance options are mutually exclusive.", 127)
    if args.force and not args.instance:
        raise CommandError("The --instance flag is required when using --force flag.", 127)
    unlimited = args.max_count is None and not args.instance
    if args.instance:
        max_count = 1
    elif args.max_count is not None:
        try:
            max_count = int(args.max_count)
        except ValueError:
            max_count = 0
        if max_count < 1:
            raise CommandError("Must supply a positive integer for --max-count.", 127)
    else:
        max_count = None
    api_db = cells_mod.database(manage_cli.require_api(api_url))
    if args.instance:
        cell = cells_mod.instance_cell(api_db, args.instance)
        if cell is None:
            raise CommandError(f"Unable to find cell for instance {args.instance}, is it mapped? "
                               "Try running `novella manage cell_v2 verify_instance`.", 127)
        cells = [cell]
    elif args.cell:
        try:
            cells = [cells_mod.cell_by_uuid(api_db, args.cell)]
        except LookupError:
            raise CommandError(f"Cell with uuid {args.cell} was not found.", 127) from None
    else:
        cells = cells_mod.list_cells(api_db, include_cell0=False)
        if not cells:
            say("No cells to process.")
            return 4
    placement, network = _clients(api_url)
    healer = Healer(api_db, placement, network, say, args.dry_run,
                    not args.skip_port_allocations, args.force)
    if unlimited:
        say("Running until every instance is processed")
    processed = 0
    try:
        for cell in cells:
            if cell.uuid == cells_mod.CELL0_UUID:
                continue  # servers that never got a host hold nothing
            say(f"Looking for instances in cell: {cell.name}({cell.uuid})")
            cell_db = cells_mod.cell_database(cell)
            instances = _instances(cell_db, args.instance)
            say(f"Found {len(instances)} candidate instances.")
            for inst in instances:
                if healer.heal(cell_db, inst):
                    processed += 1
                if not unlimited and not args.instance and processed == max_count:
                    say(f"Max count reached. Processed {processed} instances.")
                    return 1
    except HealError as exc:
        print(exc)
        return exc.code
    say(f"Processed {processed} instances.")
    return 0 if processed else 4


def add_commands(placement):
    p = manage_cli.command(
        placement, "audit", audit,
        "Find allocations of consumers that no cell knows as a live instance or a "
        "migration in progress (orphans), and delete them if asked. Exit 0: none found; "
        "1: a deletion failed; 3: orphans found; 4: orphans found and deleted; "
        "127: no such resource provider.")
    p.add_argument("--verbose", action="store_true",
                   help="Name each orphan, what it holds and what was done.")
    p.add_argument("--delete", action="store_true",
                   help="Delete the orphans' allocations against the providers audited.")
    p.add_argument("--resource_provider", "--resource-provider", dest="resource_provider",
                   metavar="UUID", help="Audit this resource provider only.")
    p = manage_cli.command(
        placement, "heal_allocations", heal_allocations,
        "Create the Placement allocations that instances on a host lack, and correct those "
        "that are wrong (project or user, port resource requests). Exit 0: healed; 1: "
        "--max-count reached (run again); 4: nothing to heal; 127: bad input; others: "
        "docs/manage.md.")
    p.add_argument("--max-count", "--max_count", dest="max_count", metavar="N",
                   help="Stop after healing this many instances (default: all of them).")
    p.add_argument("--verbose", action="store_true",
                   help="Say what is looked at and what is done.")
    p.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                   help="Say what would be healed (with --verbose), change nothing.")
    p.add_argument("--instance", metavar="UUID", help="Heal this instance only.")
    p.add_argument("--cell", metavar="UUID", help="Heal the instances of this cell only.")
    p.add_argument("--skip-port-allocations", "--skip_port_allocations",
                   dest="skip_port_allocations", action="store_true",
                   help="Leave the ports' resource requests (bandwidth, packet rate) alone.")
    p.add_argument("--force", action="store_true",
                   help="With --instance: rebuild the flavor's allocation even when one "
                        "exists.")
