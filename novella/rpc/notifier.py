"""Versioned notifications, shaped as OpenStack consumers expect them.

    notifier = Notifier(transport, "nova-compute:host1")
    notifier.notify(ctxt, "instance.resize.start",
                    instance_payload(instance, flavor, event_type="instance.resize.start"))

A versioned payload is an object envelope::

    {"nova_object.name": "InstanceActionPayload", "nova_object.namespace": "nova",
     "nova_object.version": "1.9", "nova_object.data": {...}}

Event types, payload classes and versions come from one table
(novella/rpc/notifications.py).

``[notifications] notification_format`` chooses what goes out: ``versioned``
(the default), ``unversioned`` (the same data with the envelopes removed, on
the legacy ``notifications`` topic) or ``both``.
"""
import datetime
import threading
import traceback

from novella.rpc import notifications

POWER_STATE_NAMES = {0: "pending", 1: "running", 3: "paused", 4: "shutdown",
                     6: "crashed", 7: "suspended"}


def _conf():
    from novella.conf import CONF
    return CONF


class Notifier:
    def __init__(self, transport, publisher_id):
        self.transport = transport
        self.publisher_id = publisher_id

    def prepare(self, publisher_id):
        """The same notifier under another publisher id."""
        return Notifier(self.transport, publisher_id)

    def notify(self, ctxt, event_type, payload, priority=None):
        if priority is None:
            try:
                priority = notifications.priority_of(event_type)
            except KeyError:
                priority = "INFO"
        fmt = _conf().notifications.notification_format
        if fmt in ("versioned", "both"):
            self.transport.notify(ctxt, self.publisher_id, event_type,
                                  payload if is_versioned(payload) else versioned("EventPayload", payload),
                                  priority)
        if fmt in ("unversioned", "both"):
            self.transport.notify(ctxt, self.publisher_id, event_type, unwrap(payload), priority)

    def info(self, ctxt, event_type, payload):
        self.notify(ctxt, event_type, payload, "INFO")

    def error(self, ctxt, event_type, payload):
        self.notify(ctxt, event_type, payload, "ERROR")

    # Compatible with the plain ``notify(ctxt, publisher, event_type, payload)``
    # callables that services accept.
    def __call__(self, ctxt, publisher_id, event_type, payload, priority=None):
        (self.prepare(publisher_id) if publisher_id else self).notify(
            ctxt, event_type, payload, priority)


# --- payloads ------------------------------------------------------------------

def versioned(name, data, version="1.0", namespace="nova"):
    return {"nova_object.name": name, "nova_object.namespace": namespace,
            "nova_object.version": version, "nova_object.data": data}


def is_versioned(payload):
    return isinstance(payload, dict) and "nova_object.data" in payload


def unwrap(payload):
    """The legacy (unversioned) form: envelopes removed, recursively."""
    if is_versioned(payload):
        return unwrap(payload["nova_object.data"])
    if isinstance(payload, dict):
        return {k: unwrap(v) for k, v in payload.items()}
    if isinstance(payload, list):
        return [unwrap(v) for v in payload]
    return payload


def _get(row, key, default=None):
    if isinstance(row, dict):
        return row.get(key, default)
    return getattr(row, key, default)


def _time(value):
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    return value


def flavor_payload(flavor):
    flavor = flavor or {}
    return versioned(*_named(notifications.FLAVOR, {
        "flavorid": flavor.get("flavorid"), "name": flavor.get("name"),
        "memory_mb": flavor.get("memory_mb"), "vcpus": flavor.get("vcpus"),
        "root_gb": flavor.get("root_gb"), "ephemeral_gb": flavor.get("ephemeral_gb"),
        "swap": flavor.get("swap", 0), "rxtx_factor": flavor.get("rxtx_factor", 1.0),
        "vcpu_weight": flavor.get("vcpu_weight", 0), "disabled": flavor.get("disabled", False),
        "is_public": flavor.get("is_public", True),
        "extra_specs": dict(flavor.get("extra_specs") or {}),
        "projects": flavor.get("projects"), "description": flavor.get("description"),
    }))


def _named(kind, data):
    name, version = kind
    return name, data, version


def ip_payloads(network_info):
    """IpPayload objects from a network_info list (see NetworkAPI)."""
    out = []
    for vif in network_info or []:
        for subnet in vif.get("network", {}).get("subnets", []):
            for ip in subnet.get("ips", []):
                out.append(versioned(*_named(notifications.IP, {
                    "label": vif["network"].get("label"), "mac": vif.get("address"),
                    "meta": {}, "port_uuid": vif.get("id"),
                    "version": ip.get("version", 4), "address": ip.get("address"),
                    "device_name": vif.get("devname")})))
    return out


def block_device_payloads(bdms):
    """BlockDevicePayload objects of the volumes among ``bdms`` (rows or dicts);
    None unless ``[notifications] bdms_in_notifications``."""
    if bdms is None or not _conf().notifications.bdms_in_notifications:
        return None
    return [versioned(*_named(notifications.BLOCK_DEVICE, {
        "device_name": _get(b, "device_name"), "boot_index": _get(b, "boot_index"),
        "delete_on_termination": bool(_get(b, "delete_on_termination", False)),
        "volume_id": _get(b, "volume_id"), "tag": _get(b, "tag")}))
        for b in bdms if _get(b, "volume_id")]


def exception_payload(exc):
    """An ExceptionPayload: the module and function the exception was raised
    in (its traceback's last frame), its class and message, and its traceback
    (the formatted lines joined with commas, as the reference joins them)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame if tb is not None else None
    return versioned(*_named(notifications.EXCEPTION, {
        "module_name": frame.f_globals.get("__name__", "unknown") if frame else "unknown",
        "function_name": frame.f_code.co_name if frame else "unknown",
        "exception": type(exc).__name__,
        "exception_message": str(exc),
        "traceback": ",".join(traceback.format_exception(exc)),
    }))


# The fields a payload class adds to InstanceActionPayload's, with their
# values when the caller gives none.
_PAYLOAD_EXTRAS = {
    "InstanceActionResizePrepPayload": {"new_flavor": None},
    "InstanceActionRebuildPayload": {"trusted_image_certificates": None},
    "InstanceActionVolumePayload": {"volume_id": None},
    "InstanceActionVolumeSwapPayload": {"old_volume_id": None, "new_volume_id": None},
    "InstanceActionRescuePayload": {"rescue_image_ref": None},
    "InstanceActionSnapshotPayload": {"snapshot_image_id": None},
    "InstanceCreatePayload": {"keypairs": [], "tags": [], "trusted_image_certificates": None,
                              "instance_name": None},
}


def instance_payload(instance, flavor, name="InstanceActionPayload", version=None,
                     network_info=None, fault=None, ctxt=None, bdms=None, event_type=None,
                     **extra):
    """An instance payload from an instance row (ORM object or dict) and its flavor dict.

    ``event_type`` picks the payload class and version (novella/rpc/notifications.py);
    ``extra`` gives the fields particular to that class, e.g. ``new_flavor``
    (a flavor dict) for instance.resize_prep or ``volume_id``.
    """
    if event_type is not None:
        name, version = notifications.payload_of(event_type)
    version = version or notifications.INSTANCE_ACTION[1]
    power = _get(instance, "power_state", 0) or 0
    data = {
        "uuid": _get(instance, "uuid"),
        "user_id": _get(instance, "user_id"),
        "tenant_id": _get(instance, "project_id"),
        "reservation_id": _get(instance, "reservation_id"),
        "display_name": _get(instance, "display_name"),
        "display_description": _get(instance, "display_description"),
        "host_name": _get(instance, "hostname"),
        "host": _get(instance, "host"),
        "node": _get(instance, "node"),
        "os_type": _get(instance, "os_type"),
        "architecture": _get(instance, "architecture"),
        "availability_zone": _get(instance, "availability_zone"),
        "flavor": flavor_payload(flavor),
        "image_uuid": _get(instance, "image_ref"),
        "key_name": _get(instance, "key_name"),
        "kernel_id": _get(instance, "kernel_id") or "",
        "ramdisk_id": _get(instance, "ramdisk_id") or "",
        "created_at": _time(_get(instance, "created_at")),
        "launched_at": _time(_get(instance, "launched_at")),
        "terminated_at": _time(_get(instance, "terminated_at")),
        "deleted_at": _time(_get(instance, "deleted_at")),
        "updated_at": _time(_get(instance, "updated_at")),
        "state": _get(instance, "vm_state"),
        "power_state": POWER_STATE_NAMES.get(power, "pending"),
        "task_state": _get(instance, "task_state"),
        "progress": _get(instance, "progress") or 0,
        "ip_addresses": ip_payloads(network_info),
        "block_devices": block_device_payloads(bdms),
        "shares": [],
        "metadata": {},
        "locked": bool(_get(instance, "locked", False)),
        "locked_reason": _get(instance, "locked_reason"),
        "auto_disk_config": "AUTO" if _get(instance, "auto_disk_config") else "MANUAL",
        "action_initiator_user": ctxt.user_id if ctxt is not None else None,
        "action_initiator_project": ctxt.project_id if ctxt is not None else None,
        "request_id": ctxt.request_id if ctxt is not None else None,
        "fault": exception_payload(fault) if isinstance(fault, BaseException) else fault,
    }
    data.update(_PAYLOAD_EXTRAS.get(name, {}))
    extra = {k: v for k, v in extra.items() if k in _PAYLOAD_EXTRAS.get(name, {})}
    if "new_flavor" in extra and not is_versioned(extra["new_flavor"]):
        extra["new_flavor"] = flavor_payload(extra["new_flavor"])
    if name == "InstanceCreatePayload" and not extra.get("instance_name"):
        data["instance_name"] = _get(instance, "hostname") or _get(instance, "display_name")
    data.update(extra)
    return versioned(name, data, version=version)


def request_spec_payload(spec, instance_uuid=None):
    """A RequestSpecPayload from a request spec dict (or None)."""
    if spec is None:
        return None
    spec = unwrap(spec)
    if not isinstance(spec, dict):
        return None
    flavor = spec.get("flavor")
    image = spec.get("image") or {}
    image_payload = versioned(*_named(notifications.IMAGE_META, {
        key: image.get(key) for key in (
            "id", "name", "status", "visibility", "protected", "checksum", "owner", "size",
            "virtual_size", "container_format", "disk_format", "created_at", "updated_at",
            "tags", "direct_url", "min_ram", "min_disk")} | {
        "properties": image_props_payload(image.get("properties"))})) if image else None
    hints = spec.get("scheduler_hints") or {}
    return versioned(*_named(notifications.REQUEST_SPEC, {
        "instance_uuid": spec.get("instance_uuid") or instance_uuid,
        "project_id": spec.get("project_id"), "user_id": spec.get("user_id"),
        "availability_zone": spec.get("availability_zone"),
        "flavor": flavor_payload(flavor) if isinstance(flavor, dict) else None,
        # The first forced host and node, as the reference reports them.
        "force_hosts": (spec.get("force_hosts") or [None])[0],
        "force_nodes": (spec.get("force_nodes") or [None])[0],
        "ignore_hosts": spec.get("ignore_hosts"),
        "image_meta": image_payload, "image": image_payload,
        "instance_group": server_group_payload(spec.get("instance_group")),
        # Novella's request spec keeps no NUMA topology or PCI requests (the
        # flavor's extra specs say them; docs/conformance.md, "Notifications").
        "numa_topology": None, "pci_requests": None,
        "num_instances": spec.get("num_instances") or 1,
        "requested_destination": destination_payload(spec.get("requested_destination")),
        "retry": retries_payload(spec.get("retry")),
        "scheduler_hints": {k: [str(x) for x in (v if isinstance(v, list) else [v])]
                            for k, v in hints.items()},
        "security_groups": [g if isinstance(g, str) else g.get("name")
                            for g in spec.get("security_groups") or []],
    }))


# The families of image properties the reference's ImageMetaProps knows
# (hardware, guest OS, image signing); others it does not carry.
_IMAGE_PROPERTY_PREFIXES = ("hw_", "os_", "img_")


def image_props_payload(properties):
    """An ImageMetaPropsPayload: the image's properties that are set, as the
    reference leaves every other one out."""
    return versioned(*_named(notifications.IMAGE_META_PROPS, {
        key: value for key, value in (properties or {}).items()
        if key.startswith(_IMAGE_PROPERTY_PREFIXES)}))


def server_group_payload(group):
    """A ServerGroupPayload from a request spec's instance_group (or None)."""
    if not group:
        return None
    policy = group.get("policy")
    return versioned(*_named(notifications.SERVER_GROUP, {
        "uuid": group.get("uuid"), "name": group.get("name"),
        "user_id": group.get("user_id"), "project_id": group.get("project_id"),
        "policies": [policy] if policy else [], "policy": policy,
        "members": list(group.get("members") or []), "hosts": list(group.get("hosts") or []),
        "rules": {k: str(v) for k, v in (group.get("rules") or {}).items()}}))


def destination_payload(dest):
    """A DestinationPayload from a request spec's requested_destination (or
    None): the host (left out when none is asked for, as the reference leaves
    it unset), the node, and the cell (only its uuid is known here)."""
    if not dest:
        return None
    data = {"node": dest.get("node"), "aggregates": None,
            "cell": versioned(*_named(notifications.CELL_MAPPING, {
                "uuid": dest["cell_uuid"], "name": None, "disabled": False}))
            if dest.get("cell_uuid") else None}
    if dest.get("host"):
        data["host"] = dest["host"]
    return versioned(*_named(notifications.DESTINATION, data))


def retries_payload(retry):
    """A SchedulerRetriesPayload from a request spec's retry (or None): the
    attempts and the nodes tried."""
    if not retry:
        return None
    return versioned(*_named(notifications.SCHEDULER_RETRIES, {
        "num_attempts": retry.get("num_attempts") or 0,
        "hosts": [node for _host, node in retry.get("hosts") or []]}))


def compute_task_payload(instance_uuid, spec, state, exc):
    """The ComputeTaskPayload of a compute_task.*.error notification."""
    return versioned(*_named(notifications.COMPUTE_TASK_PAYLOAD, {
        "instance_uuid": instance_uuid,
        "request_spec": request_spec_payload(spec, instance_uuid),
        "state": state, "reason": exception_payload(exc)}))


def instance_payload_from_db(cell_db, ctxt, instance_uuid, event_type, fault=None, **extra):
    """The payload of ``event_type`` for an instance as its cell database has
    it (flavor, volumes, the ports of its network info cache)."""
    import json

    import sqlalchemy as sa

    from novella.db import cell_models as m
    from novella.db import records
    with cell_db.read_session() as s:
        inst = records.get_instance(s, instance_uuid, read_deleted=True)
        bdms = list(s.scalars(sa.select(m.BlockDeviceMapping).where(
            m.BlockDeviceMapping.instance_uuid == instance_uuid,
            m.BlockDeviceMapping.deleted == 0)))
        cache = inst.info_cache
        network_info = json.loads(cache.network_info) if cache is not None and \
            cache.network_info else []
        return instance_payload(inst, records.flavor_of(inst), network_info=network_info,
                                fault=fault, ctxt=ctxt, bdms=bdms, event_type=event_type,
                                **extra)


# --- recording (tests) -----------------------------------------------------------

class FakeNotifications:
    """Records every notification a transport carries; waits without polling.

        notes = FakeNotifications(transport)
        ...
        [msg] = notes.wait_for("instance.resize.end")
    """

    def __init__(self, transport=None):
        self.messages = []
        self._cond = threading.Condition()
        if transport is not None:
            transport.listen_notifications(self)

    def __call__(self, message):
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()

    def of_type(self, event_type):
        with self._cond:
            return [m for m in self.messages if m["event_type"] == event_type]

    @property
    def event_types(self):
        with self._cond:
            return [m["event_type"] for m in self.messages]

    def wait_for(self, event_type, count=1, timeout=10):
        """The first ``count`` notifications of a type; AssertionError on timeout."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: sum(m["event_type"] == event_type for m in self.messages) >= count,
                timeout)
            found = [m for m in self.messages if m["event_type"] == event_type]
        if not ok:
            raise AssertionError(f"expected {count} {event_type!r} notification(s), got "
                                 f"{len(found)}; seen: {self.event_types}")
        return found[:count]

    def clear(self):
        with self._cond:
            self.messages.clear()
