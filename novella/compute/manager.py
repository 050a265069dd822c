"""The compute service of one host.

``ComputeManager`` is the RPC endpoint for topic ``compute``, server = its
host (see rpcapi.py for the methods and docs/architecture.md for the
contract). Many managers can live in one process: everything per host (name,
driver, tracker, databases) is held by the object, never read from CONF.

Periodic work is plain methods the service runner calls at the intervals in
``periodic_tasks``: ``heartbeat`` (the services row) and
``update_available_resource`` (the compute_nodes row and the placement
provider), ``sync_power_states``, ``reclaim_queued_deletes`` (soft-deleted
servers, novella/compute/guest_actions.py).
"""
import collections
import contextlib
import json
import logging
import threading
import uuid as uuid_mod

import sqlalchemy as sa

from novella import service
from novella.compute import SERVICE_VERSION
from novella.compute import cleanup
from novella.compute import consoles
from novella.compute import exceptions as exc_mod
from novella.compute import pci
from novella.compute import resource_tracker
from novella.compute.cross_cell import ComputeCrossCell
from novella.compute.evacuate import ComputeEvacuate
from novella.compute.guest_actions import ComputeGuestActions, injected
from novella.compute.interface_ops import ComputeInterfaces
from novella.compute.resize import ComputeResize
from novella.compute.live_migrate import ComputeLiveMigration
from novella.compute.recovery import ComputeRecovery
from novella.compute.shelve import ComputeShelve
from novella.compute.volume_ops import ComputeVolumes
from novella.compute.states import power_state, task_states
from novella.compute import states as vm_states
from novella.compute import steps
from novella.compute import connections
from novella.compute import guest
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import records
from novella.placement import allocations
from novella.rpc import notifications
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)

_SOFT_DELETE = sa.update(m.Instance).where(
    m.Instance.uuid == sa.bindparam("b_uuid"), m.Instance.deleted == 0).values(
    {c: sa.bindparam(f"b_{c}") for c in ("vm_state", "task_state", "power_state",
                                          "terminated_at", "deleted_at", "deleted")})
_SOFT_DELETE_BDMS = sa.update(m.BlockDeviceMapping).where(
    m.BlockDeviceMapping.instance_uuid == sa.bindparam("b_uuid"),
    m.BlockDeviceMapping.deleted == 0).values(
    deleted=m.BlockDeviceMapping.id, deleted_at=sa.bindparam("b_deleted_at"))

BINARY = resource_tracker.SERVICE_BINARY
TOPIC = "compute"


# The statements of a fleet's periodic work, built once: each names its hosts
# in one expanding parameter (``hosts``), not in a clause made per run.
_svc = m.Service
_OF_HOSTS = (_svc.host.in_(sa.bindparam("hosts", expanding=True)), _svc.binary == BINARY,
             _svc.deleted == 0)
_HEARTBEAT = sa.update(_svc).where(*_OF_HOSTS).values(
    report_count=_svc.report_count + 1, last_seen_up=sa.bindparam("now"),
    updated_at=sa.bindparam("now"), version=SERVICE_VERSION)
_SERVICES_OF_HOSTS = sa.select(_svc.host).where(*_OF_HOSTS)
_GUESTS_NOT_IN_A_TASK = sa.select(m.Instance.uuid, m.Instance.host, m.Instance.power_state).where(
    m.Instance.host.in_(sa.bindparam("hosts", expanding=True)), m.Instance.deleted == 0,
    m.Instance.task_state.is_(None))


class ComputeManager(ComputeResize, ComputeCrossCell, ComputeLiveMigration, ComputeEvacuate,
                     ComputeShelve, ComputeVolumes, ComputeInterfaces, ComputeGuestActions,
                     ComputeRecovery):
    def __init__(self, conf, host, cell_db, placement, driver, network_api=None,
                 volume_api=None, image_api=None, notifier=None, transport=None):
        self.conf = conf
        self.host = host
        self.cell_db = cell_db
        self.placement = placement
        self.driver = driver
        self.network_api = network_api
        self.volume_api = volume_api
        self.image_api = image_api
        self.transport = transport
        if image_api is not None and getattr(driver, "image_api", False) is None:
            driver.image_api = image_api  # root disks come from, snapshots go to, the image service
        self.publisher_id = f"nova-compute:{host}"
        if notifier is None and transport is not None:
            notifier = notifier_mod.Notifier(transport, self.publisher_id)
        self.notifier = notifier
        self.rt = resource_tracker.ResourceTracker(host, driver, cell_db, placement, conf)
        self._instance_locks = collections.defaultdict(threading.Lock)
        # ComputeVolumes: {server: when this service froze it}, and the periodic
        # check for thaws that never came, run only while that is not empty.
        self._frozen_since, self._thaw_watch = {}, None
        self._locks_lock = threading.Lock()

    # -- service ------------------------------------------------------------------

    @property
    def periodic_tasks(self):
        """{method name: interval in seconds} for the service runner (0: not
        run): each task on its own option, read as the reference reads it."""
        conf = self.conf
        return {"heartbeat": conf.report_interval,
                "update_available_resource": service.spacing(conf.update_resources_interval),
                "sync_power_states": service.spacing(conf.sync_power_state_interval),
                # Both run at the default period and only when their option enables them.
                "poll_unconfirmed_resizes": (service.DEFAULT_INTERVAL
                                             if conf.resize_confirm_window > 0 else 0),
                "poll_shelved_instances": (max(conf.shelved_poll_interval, 0)
                                           if conf.shelved_offload_time > 0 else 0),
                # The reference's spacing of its reclaim task is the interval itself.
                "reclaim_queued_deletes": max(conf.reclaim_instance_interval, 0)}

    def init_host(self, ctxt=None):
        """Prepare the driver, the services row, the node and its provider; finish what
        this host was doing when its service stopped (novella/compute/recovery.py)."""
        self.driver.init_host(self.host)
        self._ensure_service()
        self._destroy_deleted_guests(ctxt)
        self._clean_evacuated(ctxt)
        self.adopt_notes()
        self.recover_interrupted(ctxt or get_admin_context())
        self.recover_host_operations(ctxt or get_admin_context())
        self.reconcile_moves(ctxt or get_admin_context())
        self.update_available_resource(ctxt)

    def _destroy_deleted_guests(self, ctxt):
        """Guests whose server was deleted while this service was down go now."""
        guests = self.driver.list_instances()
        if not guests:
            return
        with self.cell_db.session() as s:
            live = set(s.scalars(sa.select(m.Instance.uuid).where(
                m.Instance.uuid.in_(guests), m.Instance.deleted == 0)))
            deleted = set(s.scalars(sa.select(m.Instance.uuid).where(
                m.Instance.uuid.in_(guests), m.Instance.deleted != 0))) - live
        for uuid in deleted:
            with cleanup.step("destroy deleted guest"):
                self.driver.destroy(ctxt, {"uuid": uuid}, destroy_disks=True)

    def start_service(self):
        """init_host, then answer RPC on (compute, host)."""
        self.init_host()
        if self.transport is not None:
            self.transport.serve(TOPIC, self.host, self)

    def stop_service(self):
        if self.transport is not None:
            self.transport.unserve(TOPIC, self.host)
        self.driver.cleanup_host(self.host)

    def _service_query(self):
        return sa.select(m.Service).where(m.Service.host == self.host, m.Service.binary == BINARY,
                                          m.Service.deleted == 0)

    def _ensure_service(self):
        with self.cell_db.session(write=True) as s:
            svc = s.scalars(self._service_query()).first()
            if svc is None:
                svc = m.Service(uuid=str(uuid_mod.uuid4()), host=self.host, binary=BINARY,
                                topic=TOPIC, report_count=0, last_seen_up=records.utcnow())
                s.add(svc)
            svc.version = SERVICE_VERSION
        return svc

    def heartbeat(self, ctxt=None):
        """Tell the world this host is up (report_count, last_seen_up)."""
        with self.cell_db.session(write=True) as s:
            svc = s.scalars(self._service_query()).first()
            if svc is None:
                s.add(m.Service(uuid=str(uuid_mod.uuid4()), host=self.host, binary=BINARY,
                                topic=TOPIC, report_count=1, last_seen_up=records.utcnow(),
                                version=SERVICE_VERSION))
                return
            now = records.utcnow()
            svc.report_count += 1
            svc.last_seen_up = now
            svc.updated_at = now
            svc.version = SERVICE_VERSION

    @staticmethod
    def heartbeat_hosts(managers):
        """The heartbeat of many hosts of one cell in one UPDATE (a process that
        runs a whole fleet of simulated hosts); a host whose services row is
        missing gets its own ``heartbeat`` (which makes the row)."""
        if not managers:
            return
        by_host = {mgr.host: mgr for mgr in managers}
        params = {"hosts": sorted(by_host), "now": records.utcnow()}
        with managers[0].cell_db.connection(write=True) as conn:
            if conn.execute(_HEARTBEAT, params).rowcount == len(by_host):
                return  # a row per host (one live row per host and binary)
            present = set(conn.scalars(_SERVICES_OF_HOSTS, params))
        for host in sorted(set(by_host) - present):
            by_host[host].heartbeat()

    def update_available_resource(self, ctxt=None):
        return self.rt.update_available_resource(ctxt)

    def set_host_enabled(self, ctxt, enabled):
        """The services row was enabled or disabled: update the provider's traits."""
        self.rt.set_traits(disabled=not enabled)
        return "enabled" if enabled else "disabled"

    def sync_power_states(self, ctxt=None):
        """Record the hypervisor's power state for guests not in the middle of a task."""
        self.sync_power_states_hosts([self])

    @staticmethod
    def sync_power_states_hosts(managers):
        """``sync_power_states`` of many hosts of one cell, their guests read in one
        statement (a process that runs a whole fleet of simulated hosts)."""
        if not managers:
            return
        by_host = {mgr.host: mgr for mgr in managers}
        cell_db = managers[0].cell_db
        with cell_db.reader() as conn:
            rows = conn.execute(_GUESTS_NOT_IN_A_TASK, {"hosts": sorted(by_host)}).all()
        for uuid, host, recorded in rows:
            actual = by_host[host].driver.get_info({"uuid": uuid})["state"]
            if actual != recorded:
                with contextlib.suppress(records.UnexpectedTaskStateError, records.InstanceNotFound):
                    records.update_instance(cell_db, uuid, expected_task_state=None,
                                            power_state=actual)

    # -- helpers ------------------------------------------------------------------

    def _store_bdms(self, instance_uuid, block_device_mappings):
        """The instance's BDM rows, first adding those the caller passed if the cell has none.

        An empty list passed (not None) says the build has none: nothing to read.
        """
        if block_device_mappings == []:
            return []
        bdms = guest.bdms_of(self, instance_uuid)
        if not block_device_mappings or bdms:
            return bdms
        fields = {c.name for c in m.BlockDeviceMapping.__table__.columns} - {"id", "deleted"}
        with self.cell_db.session(write=True) as s:
            for bdm in block_device_mappings:
                row = {k: v for k, v in bdm.items() if k in fields}
                if "uuid" in bdm:
                    row["uuid"] = bdm["uuid"]
                else:
                    row["uuid"] = str(uuid_mod.uuid4())
                s.add(m.BlockDeviceMapping(instance_uuid=instance_uuid, **{
                    k: v for k, v in row.items() if k not in ("instance_uuid", "created_at",
                                                             "updated_at", "deleted_at")}))
        return guest.bdms_of(self, instance_uuid)

    # The shared helpers (novella/compute/guest.py) under the names the volume,
    # interface and recovery modules still call them by.
    _get, _update, _power, _bdms = guest.get, guest.update, guest.power, guest.bdms_of
    instance_dict = staticmethod(guest.instance_dict)
    network_info = staticmethod(guest.network_info_of)
    _is_volume = staticmethod(guest.is_volume)

    # -- build --------------------------------------------------------------------

    def build_and_run_instance(self, ctxt, instance_uuid, request_spec=None, node=None,
                               allocations=None, requested_networks=None,
                               block_device_mappings=None, port_profiles=None,
                               injected_files=None, **kwargs):
        """Claim, network, volumes, spawn; on failure clean up and ask for a reschedule.

        Raises RescheduledException (this host could not build it) or
        BuildAbortException (the server was deleted meanwhile).
        """
        request_spec = request_spec or {}
        with guest.locked(self, instance_uuid):
            try:
                inst = guest.get(self, instance_uuid)
            except records.InstanceNotFound as exc:
                raise exc_mod.BuildAbortException(instance_uuid=instance_uuid, reason=str(exc))
            flavor = records.flavor_of(inst) or request_spec.get("flavor")
            image_meta = request_spec.get("image") or {"id": inst.image_ref, "properties": {}}
            done = {"claim": None, "network": False, "attachments": [], "spawned": False}
            try:
                # The action is finished by the conductor when this call returns.
                with records.action_event(self.cell_db, ctxt, instance_uuid,
                                          records.BUILD_EVENT, host=self.host):
                    guest.notify(self, ctxt, inst, notifications.event_type(notifications.CREATE,
                                                                      "start"), flavor=flavor)
                    inst = self._build(ctxt, inst, flavor, image_meta, requested_networks,
                                       block_device_mappings, port_profiles, done,
                                       request_spec.get("security_groups"), injected_files)
            except Exception as exc:  # noqa: BLE001 - every failure is cleaned up here
                raise self._build_failed(ctxt, instance_uuid, flavor, exc, done,
                                         requested_networks) from exc
            guest.notify(self, ctxt, inst, notifications.event_type(notifications.CREATE, "end"),
                         flavor=flavor, network_info=guest.network_info_of(inst))
            return {"instance_uuid": instance_uuid, "host": self.host, "node": self.rt.nodename,
                    "vm_state": inst.vm_state}

    def _build(self, ctxt, inst, flavor, image_meta, requested_networks,
               block_device_mappings, port_profiles, done, security_groups=None,
               injected_files=None):
        uuid = inst.uuid
        done["claim"] = self.rt.instance_claim(
            ctxt, inst, flavor, ports=connections.sriov_ports(self, ctxt, requested_networks=requested_networks),
            port_profiles=port_profiles, expected_task_state=(task_states.SCHEDULING, None),
            expected_vm_state=vm_states.BUILDING, task_state=task_states.NETWORKING)
        # The ports' devices, in their bindings.
        port_profiles = pci.with_devices(port_profiles, done["claim"].pci_devices)
        # What the claim wrote, on the copy the driver is told about (the
        # task-state steps below change nothing it reads).
        inst.host, inst.node, inst.launched_on = self.host, self.rt.nodename, self.host
        inst.task_state = task_states.NETWORKING
        network_info = connections.allocate_network(self, ctxt, inst, requested_networks, port_profiles,
                                              security_groups)
        done["network"] = True
        bdms = self.create_volumes(ctxt, inst, self._store_bdms(uuid, block_device_mappings))
        # block_device_mapping only while there are volumes to attach.
        has_volumes = any(guest.is_volume(b) for b in bdms)
        records.update_instance(self.cell_db, uuid, expected_task_state=task_states.NETWORKING,
                                task_state=(task_states.BLOCK_DEVICE_MAPPING if has_volumes
                                            else task_states.SPAWNING),
                                network_info=network_info, reload=False)
        if has_volumes:
            connections.attach_volumes(self, ctxt, inst, done["attachments"], bdms)
            records.update_instance(self.cell_db, uuid,
                                    expected_task_state=task_states.BLOCK_DEVICE_MAPPING,
                                    task_state=task_states.SPAWNING, reload=False)
        done["spawned"] = True  # from here a half-made guest may exist
        self.driver.spawn(ctxt, guest.instance_dict(inst, flavor), image_meta,
                          network_info=network_info,
                          block_device_info=guest.block_device_info(self, uuid, bdms),
                          **injected(injected_files))
        now = records.utcnow()
        active = {"vm_state": vm_states.ACTIVE, "task_state": None, "launched_at": now,
                  "power_state": self.driver.get_info({"uuid": uuid})["state"],
                  "updated_at": now}
        records.update_instance(self.cell_db, uuid, expected_task_state=task_states.SPAWNING,
                                reload=False, **active)
        if inst.info_cache is None:  # no cache row read with it: read the instance back
            return guest.get(self, uuid)
        # The copy in hand, as the row now is (for the create.end notification).
        for column, value in active.items():
            setattr(inst, column, value)
        inst.info_cache.network_info = json.dumps(network_info or [])
        return inst

    def _build_failed(self, ctxt, instance_uuid, flavor, exc, done, requested_networks):
        """Undo what this host made for the build; return the exception to raise."""
        inst = None
        with contextlib.suppress(records.InstanceNotFound):
            inst = guest.get(self, instance_uuid)
        # Deleted meanwhile, or its task state says someone else owns it now.
        aborted = inst is None or isinstance(exc, (records.InstanceNotFound,
                                                   records.UnexpectedTaskStateError))
        stand_in = inst or _Gone(instance_uuid)
        if done["spawned"]:
            with cleanup.step("destroy"):
                self.driver.destroy(ctxt, guest.instance_dict(stand_in, flavor),
                                    destroy_disks=True)
        if done["attachments"] and self.volume_api is not None:
            for attachment_id in done["attachments"]:
                with cleanup.step("attachment_delete"):
                    self.volume_api.attachment_delete(ctxt, attachment_id)
        if done["network"]:
            with cleanup.step("deallocate_for_instance"):
                connections.deallocate_network(self, ctxt, stand_in, requested_networks)
        if done["claim"] is not None:
            with cleanup.step("abort claim"):
                done["claim"].abort()
        if inst is not None:
            guest.notify(self, ctxt, inst, notifications.event_type(notifications.CREATE, "error"),
                         fault=exc, flavor=flavor)
        reason = str(exc) or type(exc).__name__
        if aborted:
            return exc_mod.BuildAbortException(instance_uuid=instance_uuid, reason=reason)
        with cleanup.step("reset for reschedule"):
            records.add_fault(self.cell_db, instance_uuid, exc, host=self.host)
            with self.cell_db.session(write=True) as s:
                row = records.get_instance(s, instance_uuid)
                if row.vm_state == vm_states.BUILDING:
                    row.task_state = task_states.SCHEDULING
                    row.host = row.node = row.launched_on = None
                    row.power_state = power_state.NOSTATE
        return exc_mod.RescheduledException(instance_uuid=instance_uuid, reason=reason)

    # -- power ---------------------------------------------------------------------

    def stop_instance(self, ctxt, instance_uuid, clean_shutdown=True):
        with steps.step(self, ctxt, instance_uuid, "compute_stop_instance",
                             notifications.POWER_OFF, standalone=True) as st:
            inst = st.instance
            timeout = 60 if clean_shutdown else 0
            self.driver.power_off(guest.instance_dict(inst), timeout=timeout)
            st.instance = guest.update(self, instance_uuid,
                                  expected_task_state=(task_states.POWERING_OFF, None),
                                  vm_state=vm_states.STOPPED, task_state=None,
                                  power_state=self.driver.get_info({"uuid": instance_uuid})["state"])

    def start_instance(self, ctxt, instance_uuid):
        with steps.step(self, ctxt, instance_uuid, "compute_start_instance",
                             notifications.POWER_ON, standalone=True) as st:
            inst = st.instance
            self.driver.power_on(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                                 guest.block_device_info(self, instance_uuid))
            st.instance = guest.update(self, instance_uuid,
                                  expected_task_state=(task_states.POWERING_ON, None),
                                  vm_state=vm_states.ACTIVE, task_state=None,
                                  power_state=self.driver.get_info({"uuid": instance_uuid})["state"])

    def reboot_instance(self, ctxt, instance_uuid, reboot_type="SOFT"):
        soft = reboot_type.upper() == "SOFT"
        pending = ((task_states.REBOOTING, task_states.REBOOT_PENDING, None) if soft else
                   (task_states.REBOOTING_HARD, task_states.REBOOT_PENDING_HARD, None))
        started = task_states.REBOOT_STARTED if soft else task_states.REBOOT_STARTED_HARD
        with steps.step(self, ctxt, instance_uuid, "compute_reboot_instance", notifications.REBOOT,
                             error_vm_state=vm_states.ERROR, standalone=True) as st:
            inst = guest.update(self, instance_uuid, expected_task_state=pending, task_state=started)
            self.driver.reboot(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                               reboot_type="SOFT" if soft else "HARD",
                               block_device_info=guest.block_device_info(self, instance_uuid))
            st.instance = guest.update(self, instance_uuid, expected_task_state=started,
                                  vm_state=vm_states.ACTIVE, task_state=None,
                                  power_state=self.driver.get_info({"uuid": instance_uuid})["state"])

    # -- delete --------------------------------------------------------------------

    def terminate_instance(self, ctxt, instance_uuid, bdms=None, **kwargs):
        """Destroy the guest, free network, volumes and placement, soft-delete the row."""
        started = False
        try:
            with steps.step(self, ctxt, instance_uuid, "compute_terminate_instance",
                                 notifications.DELETE, error_vm_state=vm_states.ERROR, standalone=True) as st:
                started = True
                inst = st.instance
                bdms = guest.bdms_of(self, instance_uuid)
                guest.notify(self, ctxt, inst, notifications.event_type(notifications.SHUTDOWN, "start"))
                self.driver.destroy(ctxt, guest.instance_dict(inst), guest.network_info_of(inst),
                                    guest.block_device_info(self, instance_uuid, bdms),
                                    destroy_disks=True)
                connections.deallocate_network(self, ctxt, inst)
                guest.notify(self, ctxt, inst, notifications.event_type(notifications.SHUTDOWN, "end"))
                connections.detach_volumes(self, ctxt, inst, delete_volumes=True, bdms=bdms)
                allocations.give_back(self.placement, instance_uuid)
                st.instance = self._soft_delete(inst)
                self.rt.instance_removed(inst)
        except records.InstanceNotFound:
            if started:
                raise
            return  # already gone: deleting twice is not an error
        with self._locks_lock:
            self._instance_locks.pop(instance_uuid, None)

    def _soft_delete(self, inst):
        """Mark the instance and its BDMs deleted; return ``inst`` showing it."""
        now = records.utcnow()
        deleted = {"vm_state": vm_states.DELETED, "task_state": None,
                   "power_state": power_state.NOSTATE, "terminated_at": now,
                   "deleted_at": now, "deleted": inst.id}
        with self.cell_db.connection(write=True) as conn:
            if not conn.execute(_SOFT_DELETE, {"b_uuid": inst.uuid, **{
                    f"b_{k}": v for k, v in deleted.items()}}).rowcount:
                raise records.InstanceNotFound(f"Instance {inst.uuid} could not be found.")
            conn.execute(_SOFT_DELETE_BDMS, {"b_uuid": inst.uuid, "b_deleted_at": now})
        for column, value in deleted.items():  # for the notification, as the row now is
            setattr(inst, column, value)
        return inst

    get_vnc_console = consoles.get_vnc_console
    get_serial_console = consoles.get_serial_console


class _Gone:
    """Enough of an instance row to clean up after one that was deleted."""

    def __init__(self, uuid):
        self.uuid, self.id = uuid, 0
        self.display_name = self.project_id = self.user_id = self.host = self.node = None
        self.image_ref = self.vm_state = self.availability_zone = None
        self.vcpus = self.memory_mb = self.root_gb = self.ephemeral_gb = 0
        self.extra = self.info_cache = None
