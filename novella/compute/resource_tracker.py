"""The resource tracker: one compute node, its row, its provider, its claims.

Placement owns VCPU, MEMORY_MB and DISK_GB: the tracker reports the node's
inventory (totals, ``reserved_host_*``, allocation ratios) and traits, and
the scheduler claims allocations there. NUMA cells and PCI devices are not
modelled in placement, so the tracker claims them itself.

What a host has claimed is always recomputed from the cell database, never
kept only in memory, so a restarted service finds where things stand:

- an instance with ``host`` = this host counts its ``instance_extra``
  ``numa_topology`` and ``pci_devices``;
- an instance being moved carries ``instance_extra.migration_context``
  (written by ``resize_claim``): ``{"migration_uuid", "source_compute",
  "source_node", "dest_compute", "dest_node", "old_numa_topology",
  "old_pci_devices", "new_numa_topology", "new_pci_devices", "applied"}``,
  and ``instance_extra.move_claim_host``, the host counting it (indexed).
  Until ``apply_migration_context`` (the destination finishing the move) the
  destination also counts the ``new_*`` claim; afterwards the instance's
  current claim is the new one and the source also counts ``old_*`` until
  the move is confirmed (``drop_move_claim``) or reverted
  (``revert_migration_context``).

Claims run under one lock per tracker and inside one database transaction.
"""
import contextlib
import json
import logging
import math
import threading
import uuid as uuid_mod

import os_traits
import sqlalchemy as sa

from novella.compute import claims
from novella.compute import pci
from novella.db import cell_models as m
from novella.db import records
from novella.db.engine import insert_row, insert_rows
from novella.network import agent as network_agent
from novella.virt import pci as virt_pci

LOG = logging.getLogger(__name__)

SERVICE_BINARY = "nova-compute"


def _loads(text):
    return json.loads(text) if text else None


def _dumps(value):
    return json.dumps(value) if value else None


def _context_values(mc):
    """The instance_extra columns of migration context ``mc`` (None: no move): the
    context and the host whose node counts its claim (its destination until the
    claim is applied, then its source), by which ``_usages`` finds it."""
    if not mc:
        return {"migration_context": None, "move_claim_host": None}
    return {"migration_context": json.dumps(mc), "move_claim_host": mc.get(
        "source_compute" if mc.get("applied") else "dest_compute")}


def _flavor_value(flavors):
    """instance_extra.flavor to write with a claim's columns (None: left as it is)."""
    return {} if flavors is None else {"flavor": flavors}


def _row_flavor_size(row, which):
    """The ``which`` flavor of a row of (instance size columns, instance_extra.flavor);
    the instance's own columns stand in for a missing current flavor."""
    flavor = json.loads(row.flavor).get(which) if row.flavor else None
    if flavor is None and which == "cur":
        flavor = {"vcpus": row.vcpus, "memory_mb": row.memory_mb,
                  "root_gb": row.root_gb, "ephemeral_gb": row.ephemeral_gb}
    return flavor or {}


_SET_CLAIM = sa.update(m.InstanceExtra).where(
    m.InstanceExtra.instance_uuid == sa.bindparam("b_uuid")).values(
    numa_topology=sa.bindparam("b_numa"), pci_devices=sa.bindparam("b_pci"))


def _plus(column, param):
    return sa.func.coalesce(column, 0) + sa.bindparam(param)


_ADD_USAGE = sa.update(m.ComputeNode).where(m.ComputeNode.uuid == sa.bindparam("b_uuid")).values(
    vcpus_used=_plus(m.ComputeNode.vcpus_used, "b_vcpus"),
    memory_mb_used=_plus(m.ComputeNode.memory_mb_used, "b_memory_mb"),
    local_gb_used=_plus(m.ComputeNode.local_gb_used, "b_local_gb"),
    running_vms=_plus(m.ComputeNode.running_vms, "b_count"))


def _usage_rows(hosts):
    """What ``_usages`` sums, in one statement: the instances of ``hosts`` (without a
    migration_context column), then the instances being moved whose claim one of
    ``hosts`` counts (with it).

    Only the columns the sums need (no ORM objects): this runs on every claim
    and reads every instance of the host.
    """
    ix, i = m.InstanceExtra, m.Instance
    columns = (i.host, i.node, i.vcpus, i.memory_mb, i.root_gb, i.ephemeral_gb, ix.flavor,
               ix.numa_topology, ix.pci_devices)

    def of_hosts(column):
        return column == hosts[0] if len(hosts) == 1 else column.in_(hosts)

    here = sa.select(
        *columns, sa.cast(sa.null(), ix.migration_context.type).label("migration_context")
    ).outerjoin(ix, ix.instance_uuid == i.uuid).where(of_hosts(i.host), i.deleted == 0)
    moving = sa.select(*columns, ix.migration_context).join(i, ix.instance_uuid == i.uuid).where(
        of_hosts(ix.move_claim_host), i.deleted == 0, ix.migration_context.is_not(None))
    return sa.union_all(here, moving)


def _usages(s, trackers):
    """{host: what its node has given out (sizes, NUMA cells, PCI addresses)}
    for trackers of one cell, from the database, in one statement."""
    by_host = {rt.host: rt for rt in trackers}
    usages = {rt.host: {"vcpus": 0, "memory_mb": 0, "local_gb": 0, "running_vms": 0,
                        "numa": claims.empty_usage(rt.resources().get("numa_topology")),
                        "pci": set()} for rt in trackers}

    def add(usage, flavor, numa, pci):
        usage["vcpus"] += flavor.get("vcpus", 0)
        usage["memory_mb"] += flavor.get("memory_mb", 0)
        usage["local_gb"] += flavor.get("root_gb", 0) + flavor.get("ephemeral_gb", 0)
        claims.add_usage(usage["numa"], numa)
        usage["pci"].update(d["address"] for d in pci or [])

    for row in s.execute(_usage_rows(list(by_host))):
        if row.migration_context is None:  # an instance of the host
            if row.node != by_host[row.host].nodename:
                continue
            usage = usages[row.host]
            usage["running_vms"] += 1
            add(usage, _row_flavor_size(row, "cur"), _loads(row.numa_topology),
                _loads(row.pci_devices))
            continue
        mc = _loads(row.migration_context) or {}
        if not mc.get("applied") and mc.get("dest_compute") in usages:
            add(usages[mc["dest_compute"]], _row_flavor_size(row, "new"),
                mc.get("new_numa_topology"), mc.get("new_pci_devices"))
        elif mc.get("applied") and mc.get("source_compute") in usages:
            add(usages[mc["source_compute"]], _row_flavor_size(row, "old"),
                mc.get("old_numa_topology"), mc.get("old_pci_devices"))
    return usages


class Claim:
    """A NUMA/PCI claim for one instance; ``abort()`` gives it back.

    Used as a context manager it aborts when the block raises.
    """

    def __init__(self, tracker, instance_uuid, numa_topology, pci_devices, move=False):
        self.tracker = tracker
        self.instance_uuid = instance_uuid
        self.numa_topology = numa_topology
        self.pci_devices = pci_devices
        self.move = move

    def abort(self):
        if self.move:
            self.tracker.drop_move_claim(None, self.instance_uuid)
        else:
            self.tracker.abort_instance_claim(None, self.instance_uuid)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.abort()
        return False


class ResourceTracker:
    def __init__(self, host, driver, cell_db, placement, conf):
        self.host = host
        self.driver = driver
        self.cell_db = cell_db
        self.placement = placement
        self.conf = conf
        self.nodename = driver.get_available_nodes()[0]
        self.aliases = claims.parse_aliases(conf.pci.alias)
        self.device_specs = virt_pci.parse_device_specs(conf.pci.device_spec)
        self.lock = threading.RLock()
        self.compute_node = None   # the compute_nodes row as a dict
        self._resources = None     # the driver's last view of the node
        self._reported = {}        # what placement was last told (skip repeats)

    @property
    def provider_uuid(self):
        return self.compute_node["uuid"] if self.compute_node else None

    def resources(self):
        if self._resources is None:
            self._resources = self.driver.get_available_resource(self.nodename)
        return self._resources

    # -- periodic ---------------------------------------------------------------

    def update_available_resource(self, ctxt=None):
        """Refresh the node row from the driver and the database, then report it."""
        with self.lock:
            self._resources = self.driver.get_available_resource(self.nodename)
            with self.cell_db.session(write=True) as s:
                service_id, disabled = self._service(s)
                node = self._node_row(s, service_id)
                self._write_usage(s, node)
                self.compute_node = self._as_dict(node)
        self.report_to_placement(disabled)
        return self.compute_node

    def _service(self, s):
        """(id, disabled) of this host's services row, (None, False) without one."""
        row = s.execute(sa.select(m.Service.id, m.Service.disabled).where(
            m.Service.host == self.host, m.Service.binary == SERVICE_BINARY,
            m.Service.deleted == 0)).first()
        return (row.id, bool(row.disabled)) if row else (None, False)

    def _node_row(self, s, service_id):
        node = s.scalars(sa.select(m.ComputeNode).where(
            m.ComputeNode.host == self.host,
            m.ComputeNode.hypervisor_hostname == self.nodename,
            m.ComputeNode.deleted == 0)).first()
        if node is None:
            node = m.ComputeNode(uuid=str(uuid_mod.uuid4()), host=self.host,
                                 hypervisor_hostname=self.nodename)
            s.add(node)
        for column, value in self._node_values(service_id, node.id is not None).items():
            setattr(node, column, value)
        return node

    def _node_values(self, service_id, exists):
        """The node row's columns from the driver and the options (usage aside)."""
        res, conf = self._resources, self.conf
        values = {"service_id": service_id, "vcpus": res["vcpus"],
                  "memory_mb": res["memory_mb"], "local_gb": res["local_gb"],
                  "hypervisor_type": res.get("hypervisor_type", "fake"),
                  "hypervisor_version": res.get("hypervisor_version", 1),
                  "cpu_info": res.get("cpu_info"), "host_ip": res.get("host_ip")}
        for field in ("cpu", "ram", "disk"):
            # An unset option keeps what the node already has (set at creation
            # from initial_*_allocation_ratio).
            value = getattr(conf, f"{field}_allocation_ratio")
            if not exists:
                value = value or getattr(conf, f"initial_{field}_allocation_ratio")
            if value:
                values[f"{field}_allocation_ratio"] = value
        return values

    @staticmethod
    def _as_dict(node):
        return {c.name: getattr(node, c.name) for c in m.ComputeNode.__table__.columns}

    # -- usage, always from the database ---------------------------------------

    def _usage(self, s):
        """What this node has given out: sizes, NUMA cells, PCI addresses."""
        return _usages(s, [self])[self.host]

    def _write_usage(self, s, node=None):
        """Write this node's usage columns: on ``node`` (an ORM row) if given,
        else by one UPDATE (``s`` a session or a connection)."""
        if node is None and self.provider_uuid is None:
            return None
        usage = self._usage(s)
        values = self._usage_columns(usage)
        if node is not None:
            for column, value in values.items():
                setattr(node, column, value)
        else:
            s.execute(sa.update(m.ComputeNode)
                      .where(m.ComputeNode.uuid == self.provider_uuid).values(**values))
        return usage

    def _usage_columns(self, usage):
        """The node row's usage columns for ``usage`` (as ``_usage`` gives it)."""
        res = self.resources()
        values = {"vcpus_used": usage["vcpus"], "memory_mb_used": usage["memory_mb"],
                  "local_gb_used": usage["local_gb"], "running_vms": usage["running_vms"],
                  "pci_stats": json.dumps(claims.pci_pools(
                      res.get("pci_passthrough_devices") or [], usage["pci"]))}
        topo = res.get("numa_topology")
        if topo:
            cells = []
            for c in topo["cells"]:
                u = usage["numa"].get(c["id"], {"vcpus": 0, "memory_mb": 0, "pinned": set()})
                cells.append(dict(c, cpu_usage=u["vcpus"], memory_usage=u["memory_mb"],
                                  pinned_cpus=sorted(u["pinned"])))
            values["numa_topology"] = json.dumps({"cells": cells})
        return values

    def usage(self):
        """This node's current usage (tests, os-hypervisors)."""
        with self.cell_db.session() as s:
            u = self._usage(s)
        u["pci"] = sorted(u["pci"])
        for cell in u["numa"].values():
            cell["pinned"] = sorted(cell["pinned"])
        return u

    # -- placement -----------------------------------------------------------

    def inventory(self, node=None):
        """The VCPU / MEMORY_MB / DISK_GB inventory this node reports."""
        node = node or self.compute_node
        conf = self.conf
        inv = {}
        for rc, total, reserved, ratio in (
                ("VCPU", node["vcpus"], conf.reserved_host_cpus, node["cpu_allocation_ratio"]),
                ("MEMORY_MB", node["memory_mb"], conf.reserved_host_memory_mb,
                 node["ram_allocation_ratio"]),
                ("DISK_GB", node["local_gb"], math.ceil(conf.reserved_host_disk_mb / 1024),
                 node["disk_allocation_ratio"])):
            if total > 0:
                inv[rc] = {"total": total, "reserved": min(reserved, total), "min_unit": 1,
                           "max_unit": total, "step_size": 1, "allocation_ratio": ratio}
        return inv

    def report_to_placement(self, disabled=None):
        """Make the provider, its inventory and its traits match this node."""
        node = self.compute_node
        rp = node["uuid"]
        pc = self.placement
        # A provider just made (generation 0) has no inventory and no traits:
        # its generation is carried from write to write instead of re-read, and
        # its traits are not read first. A stale generation only costs a retry.
        generation = None
        if self._reported.get("provider") != rp:
            made = pc.ensure_resource_provider(rp, name=node["hypervisor_hostname"])
            self._reported = {"provider": rp}
            if isinstance(made, dict) and made.get("generation") == 0:
                generation = 0
        inv = self.inventory(node)
        if self._reported.get("inventory") != inv:
            generation = pc.set_inventory(rp, inv, generation=generation, retries=5)
            self._reported["inventory"] = inv
        if disabled is None:
            disabled = self._reported.get("disabled", False)
        self.set_traits(disabled, generation=generation)
        self._report_network_providers(rp)

    def _report_network_providers(self, node_rp):
        """The network agent's providers (novella/network/agent.py) and the driver's
        (its SR-IOV NICs) under the node's provider.

        Each child's uuid derives from the node's and its name, so a restart
        finds it again. (Providers the driver stops reporting are kept: they
        may hold allocations.)
        """
        wanted = (network_agent.providers(self.nodename, self.conf)
                  + self.driver.get_network_providers(self.nodename))
        if self._reported.get("network") == wanted:
            return
        def uuid_of(name):
            return str(uuid_mod.uuid5(uuid_mod.UUID(node_rp), name))

        for child in wanted:
            rp = uuid_of(child["name"])
            parent = uuid_of(child["parent"]) if child.get("parent") else node_rp
            self.placement.ensure_resource_provider(rp, name=child["name"],
                                                    parent_provider_uuid=parent)
            self.placement.set_inventory(rp, {
                rc: {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                     "step_size": 1, "allocation_ratio": 1.0}
                for rc, total in child["inventories"].items()}, retries=5)
            self.placement.set_traits(rp, child["traits"], retries=5)
        self._reported["network"] = wanted

    def _traits(self, disabled):
        """(the driver's traits, the traits the provider should have)."""
        driver_traits = set(self.driver.get_traits(self.nodename))
        return driver_traits, driver_traits | ({os_traits.COMPUTE_STATUS_DISABLED} if disabled else set())

    def set_traits(self, disabled, generation=None):
        """Report the driver's traits, plus COMPUTE_STATUS_DISABLED when disabled.

        CUSTOM_ traits someone else put on the provider are kept. ``generation``:
        that of a provider this tracker just made and wrote to (it has no
        traits yet), so they are written without being read first.
        """
        driver_traits, wanted = self._traits(disabled)
        if self._reported.get("traits") == wanted:
            return
        rp = self.provider_uuid
        if generation is not None:
            current = []
        else:
            _gen, current = self.placement.get_traits(rp)
        previous = self._reported.get("driver_traits", set())
        external = {t for t in current if t.startswith("CUSTOM_") and t not in previous}
        final = wanted | external
        if set(current) != final:
            self.placement.set_traits(rp, final, generation=generation, retries=5)
        self._reported.update(traits=wanted, driver_traits=driver_traits, disabled=disabled)

    # -- claims for a build ------------------------------------------------------

    def instance_claim(self, ctxt, instance, flavor, ports=(), port_profiles=None, **guarded):
        """Claim NUMA cells and PCI devices and place the instance on this node.

        ``instance``: the row as the caller read it (its recorded claim, if any).
        ``ports``: its SR-IOV ports (``NetworkAPI.sriov_ports``), each given a
        device, from the PF its ``port_profiles`` allocation names (novella/compute/pci.py).
        Sets the instance's host, node and launched_on, with ``guarded``
        (``records.guarded_update``'s expected states and further values, e.g.
        the build's next task state) in the same statement; raises
        ComputeResourcesUnavailable when the node cannot fit the flavor.
        """
        uuid = instance.uuid
        with self.lock, self.cell_db.connection(write=True) as conn:
            numa, pci = self._fit(conn, flavor, ports, port_profiles)
            records.guarded_update(conn, uuid, host=self.host, node=self.nodename,
                                   launched_on=self.host, **guarded)
            extra = instance.extra
            recorded = extra is not None and bool(extra.numa_topology or extra.pci_devices)
            if extra is None or numa or pci or recorded:
                claimed = {"numa_topology": _dumps(numa), "pci_devices": _dumps(pci)}
                if not conn.execute(_SET_CLAIM, {"b_uuid": uuid, "b_numa": claimed["numa_topology"],
                                                 "b_pci": claimed["pci_devices"]}).rowcount:
                    insert_row(conn, m.InstanceExtra, dict(claimed, instance_uuid=uuid))
            if numa or pci or recorded:
                self._write_usage(conn)
            else:
                self._add_usage(conn, flavor)
        return Claim(self, uuid, numa, pci)

    def _add_usage(self, conn, flavor, count=1, vms=None):
        """Count ``count`` more (or, negative, fewer) instances of ``flavor`` in
        the node row's usage columns (``vms``: the change of running_vms, when it
        is not ``count``: a move's claim counts its flavor, not an instance).

        For an instance that holds neither NUMA cells, PCI devices nor a move,
        coming or going changes only the sums: adding to them saves
        ``_write_usage``'s reads of every instance on the host. Every other
        change, and the periodic audit, still writes them from the instances.
        """
        if self.provider_uuid is not None:
            conn.execute(_ADD_USAGE, {
                "b_uuid": self.provider_uuid, "b_count": count if vms is None else vms,
                "b_vcpus": count * flavor.get("vcpus", 0),
                "b_memory_mb": count * flavor.get("memory_mb", 0),
                "b_local_gb": count * (flavor.get("root_gb", 0) + flavor.get("ephemeral_gb", 0))})

    def abort_instance_claim(self, ctxt, instance_uuid):
        """Give back a build's claim and take the instance off this node."""
        with self.lock, self.cell_db.session(write=True) as s:
            inst = s.scalars(sa.select(m.Instance).where(m.Instance.uuid == instance_uuid)).first()
            if inst is not None:
                if inst.extra is not None:
                    inst.extra.numa_topology = inst.extra.pci_devices = None
                if inst.host == self.host and inst.deleted == 0:
                    inst.host = inst.node = None
                s.flush()
            self._write_usage(s)

    def move_arrived(self, instance):
        """The server a move claimed for here now runs here (``instance``: its row as
        finish_resize left it, its migration context applied). The new flavor was
        counted here since the claim, so one more running instance is all that
        changes when it came from another host and the move holds no NUMA cells nor
        PCI devices; otherwise the usage is written again from the instances."""
        mc = _loads(instance.extra.migration_context) if instance.extra is not None else None
        if not mc or mc.get("source_compute") == self.host or any(mc.get(k) for k in (
                "old_numa_topology", "new_numa_topology", "old_pci_devices",
                "new_pci_devices")):
            return self.refresh_usage()
        with self.lock, self.cell_db.connection(write=True) as conn:
            self._add_usage(conn, {}, count=0, vms=1)

    def refresh_usage(self):
        """Rewrite the node row's usage (after an instance left this node)."""
        with self.lock, self.cell_db.session(write=True) as s:
            self._write_usage(s)

    def instance_removed(self, instance):
        """Rewrite the node row's usage after ``instance`` (the row as it was
        before it was deleted) left this node: by ``_add_usage`` when it held
        only its flavor's sums here, else by ``refresh_usage``."""
        extra = instance.extra
        if not (instance.host == self.host and instance.node == self.nodename
                and extra is not None and extra.flavor
                and not (extra.numa_topology or extra.pci_devices or extra.migration_context)):
            return self.refresh_usage()
        flavor = json.loads(extra.flavor).get("cur") or {
            "vcpus": instance.vcpus, "memory_mb": instance.memory_mb,
            "root_gb": instance.root_gb, "ephemeral_gb": instance.ephemeral_gb}
        with self.lock, self.cell_db.connection(write=True) as conn:
            self._add_usage(conn, flavor, count=-1)

    def _fit(self, s, flavor, ports=(), port_profiles=None):
        numa_request = claims.numa_request(flavor)
        pci_requests = claims.pci_requests(flavor, self.aliases)
        if numa_request is None and not pci_requests and not ports:
            return None, None  # nothing Placement does not already count
        res = self.resources()
        usage = self._usage(s)
        ratio = self.compute_node["cpu_allocation_ratio"] if self.compute_node else 1.0
        numa = claims.fit_numa(res.get("numa_topology"), usage["numa"], numa_request, ratio)
        devices = res.get("pci_passthrough_devices") or []
        pci_devices = claims.pick_pci(devices, usage["pci"], pci_requests, numa)
        if ports:
            pci_devices += pci.pick(
                virt_pci.port_devices(devices, self.device_specs),
                usage["pci"] | {d["address"] for d in pci_devices}, ports,
                pci.pf_of_ports(port_profiles, self.pf_providers()), numa, port_profiles)
        return numa, pci_devices or None

    def pf_providers(self):
        """``{provider uuid: pf}`` of the SR-IOV agent's providers of this node."""
        if self.provider_uuid is None:
            return {}
        return {virt_pci.provider_uuid(self.provider_uuid,
                                       virt_pci.provider_name(self.nodename, pf)): pf
                for pf in {d.get("devname") for d in self.resources().get(
                    "pci_passthrough_devices") or [] if d.get("dev_type") == "type-PF"}}

    def port_profiles(self, instance_uuid, port_profiles, claim="current", instance=None):
        """``port_profiles`` with the devices the instance's ports hold on this host
        merged in: its ``current`` claim, or the ``new`` or ``old`` one of its move
        (the current one when it has no move). ``instance``: the row as the caller
        read it under the instance's lock (and the tracker's claims since left it),
        else its claim is read here."""
        if instance is not None:
            row = instance.extra
        else:
            with self.cell_db.read_session() as s:
                row = s.execute(sa.select(m.InstanceExtra.pci_devices,
                                          m.InstanceExtra.migration_context).where(
                    m.InstanceExtra.instance_uuid == instance_uuid)).first()
        if row is None:
            return port_profiles
        devices = _loads(row.pci_devices)
        mc = _loads(row.migration_context)
        if mc and claim != "current":
            devices = mc.get(f"{claim}_pci_devices")
        return pci.with_devices(port_profiles, devices)

    @staticmethod
    def _extra(s, inst):
        if inst.extra is None:
            inst.extra = m.InstanceExtra(instance_uuid=inst.uuid)
            s.add(inst.extra)
        return inst.extra

    @staticmethod
    def _set_extra(s, instance_uuid, instance=None, **values):
        """Write ``values`` to the instance's instance_extra row by key, without
        reading it (the row made if missing). ``instance``: the caller's row (not
        one of ``s``), given the same values so that it says what the database holds."""
        table = m.InstanceExtra.__table__
        if not s.execute(sa.update(table).where(table.c.instance_uuid == instance_uuid)
                         .values(**values)).rowcount:
            insert_row(s, table, dict(values, instance_uuid=instance_uuid))
        if instance is not None:
            if instance.extra is None:
                instance.extra = m.InstanceExtra(instance_uuid=instance_uuid)
            for column, value in values.items():
                setattr(instance.extra, column, value)

    # -- claims for a move (resize / cold migrate) --------------------------------
    #
    # ``instance``: the row as the caller read it under the instance's lock (the
    # step's), whose claim and migration context nothing else writes meanwhile;
    # read again here when not given. It is given what is written.

    def resize_claim(self, ctxt, instance_uuid, new_flavor, migration, ports=(),
                     port_profiles=None, instance=None, flavors=None):
        """Claim NUMA/PCI for ``new_flavor`` (and ``ports`` as ``instance_claim``) on
        this (destination) node.

        ``migration``: ``{"uuid", "source_compute", "source_node"}``. Writes the
        instance's migration_context (with ``flavors``, ``records.flavor_doc``'s
        instance_extra.flavor, in the same statement when given); ``Claim.abort()``
        or ``drop_move_claim`` gives it back.
        """
        with self.lock, self.cell_db.session(write=True) as s:
            inst = instance if instance is not None else records.get_instance(s, instance_uuid)
            numa, pci = self._fit(s, new_flavor, ports, port_profiles)
            extra = inst.extra
            # A claim that holds only the flavor's sizes, where none was held before,
            # adds them to the node's usage without reading every instance here.
            adds = not (numa or pci or (extra is not None and extra.migration_context))
            self._set_extra(s, instance_uuid, instance, **_flavor_value(flavors), **_context_values({
                "migration_uuid": migration.get("uuid"),
                "source_compute": migration.get("source_compute", inst.host),
                "source_node": migration.get("source_node", inst.node),
                "dest_compute": self.host, "dest_node": self.nodename,
                "old_numa_topology": _loads(extra.numa_topology) if extra else None,
                "old_pci_devices": _loads(extra.pci_devices) if extra else None,
                "new_numa_topology": numa, "new_pci_devices": pci, "applied": False}))
            if adds:
                self._add_usage(s, new_flavor, vms=0)
            else:
                self._write_usage(s)
        return Claim(self, instance_uuid, numa, pci, move=True)

    def apply_migration_context(self, ctxt, instance_uuid, instance=None):
        """The destination took the instance: its current claim becomes the new one."""
        with self.lock, self.cell_db.session(write=True) as s:
            inst = instance if instance is not None else records.get_instance(s, instance_uuid)
            mc = _loads(inst.extra.migration_context) if inst.extra is not None else None
            if mc and not mc.get("applied"):
                self._set_extra(s, instance_uuid, instance,
                                numa_topology=_dumps(mc["new_numa_topology"]),
                                pci_devices=_dumps(mc["new_pci_devices"]),
                                **_context_values(dict(mc, applied=True)))

    def revert_migration_context(self, ctxt, instance_uuid):
        """A move was reverted: the old claim is current again; the new one goes."""
        with self.lock, self.cell_db.session(write=True) as s:
            extra = self._extra(s, records.get_instance(s, instance_uuid))
            mc = _loads(extra.migration_context)
            if mc and mc.get("applied"):
                extra.numa_topology = _dumps(mc["old_numa_topology"])
                extra.pci_devices = _dumps(mc["old_pci_devices"])
            for column, value in _context_values(None).items():
                setattr(extra, column, value)
            s.flush()
            self._write_usage(s)

    def drop_move_claim(self, ctxt, instance_uuid, migration_uuid=None, flavors=None):
        """Forget the move's claim (confirm on the source, failure on the destination);
        with ``migration_uuid``, only that migration's. ``flavors``: instance_extra.flavor
        to write with it (``records.flavor_doc``), in the same statement."""
        extra = m.InstanceExtra.__table__
        with self.lock, self.cell_db.connection(write=True) as conn:
            # Any move's claim goes without being read; only that migration's is read first.
            held = None if migration_uuid is None else (_loads(conn.execute(
                sa.select(extra.c.migration_context).where(
                    extra.c.instance_uuid == instance_uuid)).scalar()) or {}).get("migration_uuid")
            if held == migration_uuid:
                conn.execute(sa.update(extra).where(extra.c.instance_uuid == instance_uuid)
                             .values(**_flavor_value(flavors), **_context_values(None)))
            elif flavors is not None:
                conn.execute(sa.update(extra).where(extra.c.instance_uuid == instance_uuid)
                             .values(flavor=flavors))
            self._write_usage(conn)


def update_available_resources(trackers):
    """``update_available_resource`` of many trackers of one cell at once (a
    process running a fleet of simulated hosts): the services rows, node rows
    and usage of all of them read in four statements, a node row written only
    where it changed, and placement told only what changed — the providers
    this process has not reported yet registered together
    (``PlacementClient.register_providers``), the others' inventory and traits
    left alone unless they differ from what was last reported."""
    if not trackers:
        return
    trackers = sorted(trackers, key=lambda rt: rt.host)
    hosts = [rt.host for rt in trackers]
    nodes_table = m.ComputeNode.__table__
    with contextlib.ExitStack() as locks:
        for rt in trackers:  # one order everywhere: no claim runs meanwhile
            locks.enter_context(rt.lock)
        for rt in trackers:
            rt._resources = rt.driver.get_available_resource(rt.nodename)
        with trackers[0].cell_db.connection(write=True) as conn:
            services = {row.host: (row.id, bool(row.disabled)) for row in conn.execute(
                sa.select(m.Service.host, m.Service.id, m.Service.disabled).where(
                    m.Service.host.in_(hosts), m.Service.binary == SERVICE_BINARY,
                    m.Service.deleted == 0))}
            nodes = _node_rows(conn, hosts)
            usages = _usages(conn, trackers)
            new, changed = [], {}
            for rt in trackers:
                row = nodes.get((rt.host, rt.nodename))
                values = rt._node_values(services.get(rt.host, (None, False))[0], row is not None)
                values.update(rt._usage_columns(usages[rt.host]))
                if row is None:
                    new.append(dict(values, uuid=str(uuid_mod.uuid4()), host=rt.host,
                                    hypervisor_hostname=rt.nodename))
                elif any(row[k] != v for k, v in values.items()):
                    changed.setdefault(tuple(sorted(values)), []).append(dict(values, id=row["id"]))
                    row.update(values)
            for columns, rows in changed.items():
                conn.execute(sa.update(nodes_table).where(nodes_table.c.id == sa.bindparam("b_id"))
                             .values({c: sa.bindparam(f"b_{c}") for c in columns}),
                             [{f"b_{k}": v for k, v in r.items()} for r in rows])
            if new:
                insert_rows(conn, m.ComputeNode, new)
                nodes.update(_node_rows(conn, [r["host"] for r in new]))
            for rt in trackers:
                rt.compute_node = nodes[(rt.host, rt.nodename)]
    disabled = {rt.host: services.get(rt.host, (None, False))[1] for rt in trackers}
    unreported = [rt for rt in trackers if rt._reported.get("provider") != rt.provider_uuid]
    if unreported:
        wanted = {rt.host: (rt.inventory(),) + rt._traits(disabled[rt.host]) for rt in unreported}
        held = trackers[0].placement.register_providers([
            {"uuid": rt.provider_uuid, "name": rt.nodename, "inventories": wanted[rt.host][0],
             "traits": sorted(wanted[rt.host][2])} for rt in unreported])
        for rt in unreported:
            inventory, driver_traits, traits = wanted[rt.host]
            got = held.get(rt.provider_uuid)
            if got is None:
                continue
            # A provider found (a restart) counts as reported when it holds
            # what report_to_placement would write (CUSTOM_ traits of others kept).
            current = set(got["traits"])
            if not got["created"] and (got["inventories"] != inventory or current != traits | {
                    t for t in current if t.startswith("CUSTOM_")}):
                continue
            rt._reported = {"provider": rt.provider_uuid, "inventory": inventory,
                            "traits": traits, "driver_traits": driver_traits,
                            "disabled": disabled[rt.host]}
    for rt in trackers:
        # Nothing is sent for what placement was already told.
        rt.report_to_placement(disabled[rt.host])


def _node_rows(conn, hosts):
    """{(host, hypervisor_hostname): node row as a dict} of ``hosts``."""
    table = m.ComputeNode.__table__
    rows = conn.execute(sa.select(table).where(table.c.host.in_(hosts), table.c.deleted == 0))
    return {(r.host, r.hypervisor_hostname): dict(r._mapping) for r in rows}
