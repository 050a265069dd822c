"""The compute service of one host.

``ComputeManager`` is the RPC endpoint for topic ``compute``, server = its
host (see rpcapi.py for the methods and docs/architecture.md for the
contract). Many managers can live in one process: everything per host (name,
driver, tracker, databases) is held by the object, never read from CONF.

Each operation is a plain function of its own module, taking the manager as
``compute`` (build.py, resize.py, cross_cell.py, live_migrate.py,
evacuate.py, shelve.py, guest_actions.py, volume_ops.py, interface_ops.py,
recovery.py, consoles.py); the class binds them, in one
table, as the endpoint's methods. What those modules share is in guest.py
(the server's row, what the driver is told of it) and connections.py (its
ports and volumes on this host), imported by name.

Periodic work is plain methods the service runner calls at the intervals in
``periodic_tasks``: ``heartbeat`` (the services row) and
``update_available_resource`` (the compute_nodes row and the placement
provider), ``sync_power_states``, ``reclaim_queued_deletes`` (soft-deleted
servers, novella/compute/guest_actions.py).
"""
import collections
import contextlib
import logging
import threading
import uuid as uuid_mod

import sqlalchemy as sa

from novella import service
from novella.compute import SERVICE_VERSION
from novella.compute import build
from novella.compute import consoles
from novella.compute import cross_cell
from novella.compute import evacuate
from novella.compute import guest_actions
from novella.compute import interface_ops
from novella.compute import live_migrate
from novella.compute import recovery
from novella.compute import resize
from novella.compute import resource_tracker
from novella.compute import shelve
from novella.compute import teardown
from novella.compute import volume_ops
from novella.context import get_admin_context
from novella.db import cell_models as m
from novella.db import records
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)

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


class ComputeManager:
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
        # volume_ops: {server: when this service froze it}, and the periodic
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
        evacuate.clean_evacuated(self, ctxt)
        evacuate.finish_taken_over(self, ctxt)
        shelve.finish_unshelved(self, ctxt or get_admin_context())
        recovery.adopt_notes(self)
        recovery.recover_interrupted(self, ctxt or get_admin_context())
        recovery.recover_host_operations(self, ctxt or get_admin_context())
        recovery.reconcile_moves(self, ctxt or get_admin_context())
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
            teardown.give_back(self, ctxt, uuid, guest=(teardown.GUEST,))

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

    def cache_images(self, ctxt, image_ids):
        """An aggregate's image cache request: each image fetched into the driver's
        cache, with the reference's result for it (``cached`` now, ``existing``,
        ``unsupported`` by the driver, ``error``)."""
        results = {}
        for image_id in image_ids:
            try:
                results[image_id] = "cached" if self.driver.cache_image(ctxt, image_id) \
                    else "existing"
            except NotImplementedError:
                results[image_id] = "unsupported"
            except Exception:  # noqa: BLE001 - one image failing leaves the others cached
                LOG.exception("caching image %s failed", image_id)
                results[image_id] = "error"
        return results

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

    # -- the operations of the modules beside this one, as this endpoint's methods
    # (each a plain function of the host's ComputeManager; rpcapi.py calls them) ----

    build_and_run_instance = build.build_and_run_instance

    prep_resize = resize.prep_resize
    resize_instance = resize.resize_instance
    finish_resize = resize.finish_resize
    confirm_resize = resize.confirm_resize
    revert_resize = resize.revert_resize
    finish_revert_resize = resize.finish_revert_resize
    poll_unconfirmed_resizes = resize.poll_unconfirmed_resizes

    prep_snapshot_based_resize_at_dest = cross_cell.prep_snapshot_based_resize_at_dest
    finish_snapshot_based_resize_at_dest = cross_cell.finish_snapshot_based_resize_at_dest
    revert_snapshot_based_resize_at_dest = cross_cell.revert_snapshot_based_resize_at_dest
    prep_snapshot_based_resize_at_source = cross_cell.prep_snapshot_based_resize_at_source
    confirm_snapshot_based_resize_at_source = cross_cell.confirm_snapshot_based_resize_at_source
    finish_revert_snapshot_based_resize_at_source = (
        cross_cell.finish_revert_snapshot_based_resize_at_source)

    prepare_live_migration_at_destination = live_migrate.prepare_live_migration_at_destination
    rollback_live_migration_at_destination = live_migrate.rollback_live_migration_at_destination
    post_live_migration_at_destination = live_migrate.post_live_migration_at_destination
    live_migration = live_migrate.live_migration
    post_live_migration_at_source = live_migrate.post_live_migration_at_source
    rollback_live_migration_at_source = live_migrate.rollback_live_migration_at_source
    live_migration_abort = live_migrate.live_migration_abort
    live_migration_force_complete = live_migrate.live_migration_force_complete

    rebuild_instance = evacuate.rebuild_instance
    abandon_rebuild = evacuate.abandon_rebuild

    shelve_instance = shelve.shelve_instance
    poll_shelved_instances = shelve.poll_shelved_instances
    shelve_offload_instance = shelve.shelve_offload_instance
    unshelve_instance = shelve.unshelve_instance

    stop_instance = guest_actions.stop_instance
    start_instance = guest_actions.start_instance
    reboot_instance = guest_actions.reboot_instance
    terminate_instance = guest_actions.terminate_instance
    pause_instance = guest_actions.pause_instance
    unpause_instance = guest_actions.unpause_instance
    suspend_instance = guest_actions.suspend_instance
    resume_instance = guest_actions.resume_instance
    rescue_instance = guest_actions.rescue_instance
    unrescue_instance = guest_actions.unrescue_instance
    rebuild_in_place = guest_actions.rebuild_in_place
    snapshot_instance = guest_actions.snapshot_instance
    backup_instance = guest_actions.backup_instance
    set_admin_password = guest_actions.set_admin_password
    trigger_crash_dump = guest_actions.trigger_crash_dump
    inject_network_info = guest_actions.inject_network_info
    get_console_output = guest_actions.get_console_output
    soft_delete_instance = guest_actions.soft_delete_instance
    restore_instance = guest_actions.restore_instance
    reclaim_queued_deletes = guest_actions.reclaim_queued_deletes

    get_vnc_console = consoles.get_vnc_console
    get_serial_console = consoles.get_serial_console

    attach_volume = volume_ops.attach_volume
    detach_volume = volume_ops.detach_volume
    swap_volume = volume_ops.swap_volume
    volume_snapshot_create = volume_ops.volume_snapshot_create
    volume_snapshot_delete = volume_ops.volume_snapshot_delete
    quiesce_instance = volume_ops.quiesce_instance
    unquiesce_instance = volume_ops.unquiesce_instance
    thaw_forgotten_guests = volume_ops.thaw_forgotten_guests

    attach_interface = interface_ops.attach_interface
    detach_interface = interface_ops.detach_interface

    clean_up_deleted = recovery.clean_up_deleted
