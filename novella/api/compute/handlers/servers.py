"""/servers: create, list (merged across cells), show, update, delete."""
import datetime
import json
import re
import secrets
import uuid as uuid_mod

from novella.api.compute import (actions, common, errors, hosts, instances, quotas, rpcclients,
                                 validation, views)
from novella.api.compute.schemas import servers as schemas
from novella.compute import states
from novella.compute.states import task_states
from novella.db import build_requests as build_requests_db, cells as cells_mod
from novella.db import flavors as flavors_db, records
from novella.db import server_groups as server_groups_db

P = "os_compute_api:servers:"


# --- list ---------------------------------------------------------------------------
# Query parameters a list understands (2.75 refuses any other).
_NON_ADMIN_FILTERS = {"reservation_id", "name", "status", "image", "flavor", "ip", "ip6",
                      "changes-since", "changes-before", "tags", "tags-any", "not-tags",
                      "not-tags-any", "all_tenants", "limit", "marker", "sort_key",
                      "sort_dir", "availability_zone", "config_drive", "key_name",
                      "created_at", "description", "locked", "display_description",
                      "launched_at", "terminated_at", "progress", "task_state",
                      "vm_state", "power_state", "user_id", "project_id", "tenant_id",
                      "uuid", "hostname", "host", "node", "deleted", "access_ip_v4",
                      "access_ip_v6", "launch_index", "updated_at", "kernel_id",
                      "ramdisk_id", "root_device_name", "auto_disk_config",
                      "display_name", "compute_host", "image_ref", "flavorid",
                      "instance_type_id", "locked_by", "block_device_mapping",
                      "security_groups", "metadata", "system_metadata", "cell_name",
                      "default_ephemeral_device", "default_swap_device", "os_type",
                      "terminated_at", "vm_mode", "info_cache", "pci_devices", "services",
                      "flavor_id", "soft_deleted", "tenant", "architecture", "hidden",
                      "pinned_availability_zone"}
_USER_FILTERS = {"reservation_id", "name", "status", "image", "flavor", "ip", "ip6",
                 "changes-since", "changes-before", "tags", "tags-any", "not-tags",
                 "not-tags-any", "all_tenants", "limit", "marker", "sort_key", "sort_dir",
                 "locked", "description", "availability_zone", "config_drive",
                 "key_name", "created_at", "launched_at", "terminated_at", "power_state",
                 "task_state", "vm_state", "progress", "user_id", "updated_at"}
_TIME_FILTERS = ("created_at", "launched_at", "terminated_at", "updated_at")


def _sort(req, admin):
    keys = req.GET.getall("sort_key")
    dirs = req.GET.getall("sort_dir")
    for d in dirs:
        if d not in ("asc", "desc"):
            raise errors.BadRequest(f"Invalid input for query parameters sort_dir. Value: {d}. "
                                    "'%s' is not one of ['asc', 'desc']" % d)
    sort = []
    for i, key in enumerate(keys):
        if key in instances.BAD_SORT_KEYS or key not in instances.SORT_KEYS:
            raise errors.BadRequest(f"Invalid input for query parameters sort_key. Value: {key}.")
        if key in instances.ADMIN_SORT_KEYS and not admin:
            continue
        sort.append((key, dirs[i] if i < len(dirs) else (dirs[-1] if dirs else "desc")))
    return sort or [("created_at", "desc")]


def _split(value):
    return [t.strip() for t in value.split(",") if t.strip()]


def _filters(req):
    ctxt = req.context
    admin = req.can(P + "allow_all_filters")
    params = {k: v for k, v in req.GET.items()}
    if req.at_least("2.75"):
        unknown = sorted(set(params) - _NON_ADMIN_FILTERS)
        if unknown:
            raise errors.BadRequest("Invalid input for query parameters. "
                                    f"Additional properties are not allowed ('{unknown[0]}' was unexpected)")
    if not admin:
        params = {k: v for k, v in params.items() if k in _USER_FILTERS}
    filters = {}
    all_tenants = "all_tenants" in params and validation.to_bool(params["all_tenants"] or "true")
    if all_tenants:
        req.authorize(P + ("detail:get_all_tenants" if req.path_info.endswith("detail")
                           else "index:get_all_tenants"))
        project = params.get("project_id") or params.get("tenant_id")
        if project:
            filters["project_id"] = project
    else:
        filters["project_id"] = ctxt.project_id
    if params.get("name"):
        try:
            re.compile(params["name"])
        except re.error:
            raise errors.BadRequest("Invalid input for query parameters name.")
        filters["name"] = params["name"]
    for key in ("ip", "ip6"):  # regular expressions, as name
        if params.get(key):
            try:
                re.compile(params[key])
            except re.error:
                raise errors.BadRequest(f"Invalid input for query parameters {key}.")
            filters[key] = params[key]
    if "status" in params:
        # One or more statuses (status=active&status=error): any of them.
        statuses = [st.upper() for st in req.GET.getall("status")]
        known = [st for st in statuses if st in instances.STATUS_MAP]
        if len(known) < len(statuses) and req.at_least("2.38"):
            raise errors.BadRequest("Invalid status value")
        if not known:
            return None
        if "DELETED" in known:
            if not admin:
                raise errors.Forbidden("Only administrators may list deleted instances")
            filters["deleted"] = True
        vm, task = [], []
        for st in known:
            st_vm, st_task = instances.STATUS_MAP[st]
            vm += [x for x in st_vm if x not in vm]
            task = None if task is None or st_task is None else task + st_task
        filters["vm_states"] = vm
        if task is not None:
            filters["task_states"] = task
    if params.get("image"):
        filters["image_ref"] = common.last_segment(params["image"])
    if params.get("flavor"):
        fl = flavors_db.get(req.api.api_db, common.last_segment(params["flavor"]))
        if fl is None:
            return None
        filters["instance_type_id"] = fl.id
    since, before = common.changes_window(req)
    if since:
        filters["changes-since"] = since
    if before:
        filters["changes-before"] = before
    for key in ("tags", "tags-any", "not-tags", "not-tags-any"):
        if params.get(key) and req.at_least("2.26"):
            filters[key] = _split(params[key])
    for key in ("reservation_id", "availability_zone", "key_name", "user_id", "uuid",
                "hostname", "task_state", "vm_state"):
        if params.get(key):
            filters[key] = params[key]
    if admin:
        for key, col in (("host", "host"), ("node", "node"), ("compute_host", "host")):
            if params.get(key):
                filters[col] = params[key]
        if "deleted" in params:
            filters["deleted"] = validation.to_bool(params["deleted"])
    if "locked" in params and req.at_least("2.73"):
        filters["locked"] = validation.to_bool(params["locked"])
    if "power_state" in params:
        try:
            filters["power_state"] = int(params["power_state"])
        except ValueError:
            raise errors.BadRequest("Invalid input for query parameters power_state.")
    return filters


def _list(req, detail):
    req.authorize(P + ("detail" if detail else "index"))
    limit, marker = common.limit_and_marker(req)
    filters = _filters(req)
    sort = _sort(req, req.is_admin())
    recs = [] if filters is None else instances.list_records(req.api, filters, sort, limit, marker)
    if detail and req.at_least("2.96"):
        views.add_pinned_zones(req.api, recs)
    if detail:
        views.add_network_details(req, recs)
    if detail and req.at_least("2.16") and views.host_status_shown(req):
        views.add_host_statuses(req, recs)  # the page's hosts only
    render = (lambda r: views.detail(req, r)) if detail else (lambda r: views.basic(req, r))
    body = {"servers": [render(r) for r in recs]}
    nxt = common.next_link(req, ["servers"] + (["detail"] if detail else []),
                           [{"id": r["uuid"]} for r in recs], limit)
    if nxt:
        body["servers_links"] = nxt
    return 200, body


def index(req):
    return _list(req, detail=False)


def detail(req):
    return _list(req, detail=True)


def show(req, server_id, update=False):
    rec = instances.get(req, server_id, rule=P + "show")
    return 200, views.show(req, rec, update=update)


# --- create -------------------------------------------------------------------------
def _boot_volume_image(req, bdms, flavor):
    """The image a boot volume is made of (a boot mapping with an image source), as
    the image of a server booted from it; else no image."""
    boot = next((b for b in bdms if b["boot_index"] == 0 and b["image_id"]), None)
    if boot is None:
        return {"id": None, "properties": {}}
    return common.image(req, boot["image_id"], flavor, is_bfv=True)


def merge_image_bdms(req, image_ref, bdms, is_bfv):
    """The requested mappings with those the image defines (an image of a
    volume-backed server), a requested one winning over the image's of the same
    device; returns (mappings, whether the server is volume-backed)."""
    api = req.api.image_api
    if not image_ref or api is None:
        return bdms, is_bfv
    image_id = image_ref.rstrip("/").rsplit("/", 1)[-1]
    try:
        image = api.get(req.context, image_id)
    except Exception:  # noqa: BLE001 - an unknown image is refused where it is read
        return bdms, is_bfv
    # Kept for the request: the create checks the same image next (common.image).
    req.environ.setdefault("novella.images", {})[image_id] = image
    props = image.get("properties") or {}
    defined = props.get("block_device_mapping") or []
    if isinstance(defined, str):  # as Glance keeps it: JSON text
        try:
            defined = json.loads(defined)
        except ValueError:
            return bdms, is_bfv
    if not defined or str(props.get("bdm_v2", "")).lower() not in ("true", "1"):
        return bdms, is_bfv
    if any(d.get("boot_index") == 0 for d in defined):  # the image's root wins
        bdms = [b for b in bdms if not (b["boot_index"] == 0 and b["source_type"] == "image")]
    taken = {b["device_name"] for b in bdms if b["device_name"]}
    for d in defined:
        if d.get("device_name") and d["device_name"] in taken:
            continue
        source = d.get("source_type")
        bdms.append({"uuid": str(uuid_mod.uuid4()), "source_type": source,
                     "destination_type": d.get("destination_type"),
                     "boot_index": d.get("boot_index"), "device_name": d.get("device_name"),
                     "device_type": d.get("device_type"), "disk_bus": d.get("disk_bus"),
                     "volume_size": d.get("volume_size"),
                     "delete_on_termination": bool(d.get("delete_on_termination")),
                     "tag": d.get("tag"), "volume_type": d.get("volume_type"),
                     "volume_id": d.get("volume_id") if source == "volume" else None,
                     "image_id": d.get("image_id") if source == "image" else None,
                     "snapshot_id": d.get("snapshot_id") if source == "snapshot" else None})
    boots = [b for b in bdms if b["boot_index"] == 0]
    return bdms, bool(boots) and boots[0]["destination_type"] == "volume"


_BOOT_SEQ = ("Block Device Mapping is Invalid: Boot sequence for the instance and "
             "image/block device mapping combination is not valid.")


def _strip_dev(name):
    return name[len("/dev/"):] if name and name.startswith("/dev/") else name


def _from_legacy(legacy):
    """The legacy (v1) mappings as v2 ones, as the reference converts them: a volume
    or snapshot on the root device (vda) is the boot device, every other is not;
    ``swap`` / ``ephemeralN`` are blank local disks; ``no_device`` ones are dropped."""
    out = []
    for old in legacy:
        if old.get("no_device"):
            continue
        new = {"device_name": old.get("device_name"), "volume_size": old.get("volume_size"),
               "delete_on_termination": old.get("delete_on_termination", False)}
        virtual = old.get("virtual_name") or ""
        if virtual == "swap" or virtual.startswith("ephemeral"):
            new.update(source_type="blank", destination_type="local",
                       delete_on_termination=True, boot_index=-1,
                       guest_format="swap" if virtual == "swap" else None)
        elif old.get("snapshot_id") or old.get("volume_id"):
            source = "snapshot" if old.get("snapshot_id") else "volume"
            root = _strip_dev(old.get("device_name")) == "vda"
            new.update(source_type=source, destination_type="volume",
                       uuid=old[source + "_id"], boot_index=0 if root else -1)
        else:
            raise errors.BadRequest("Block Device Mapping is Invalid: Unrecognized legacy format.")
        out.append(new)
    return out


def _bdms(req, server, image_ref):
    """Block device mappings as dicts; volumes checked with the volume service.
    Legacy (v1) mappings are converted to v2 ones first."""
    legacy = server.get("block_device_mapping") or []
    if legacy and server.get("block_device_mapping_v2"):
        raise errors.BadRequest("Using different block_device_mapping syntaxes is not "
                                "allowed in the same request.")
    out = []
    for bdm in _from_legacy(legacy) or server.get("block_device_mapping_v2") or []:
        source = bdm.get("source_type")
        dest = bdm.get("destination_type") or ("volume" if source in ("volume", "snapshot") else "local")
        boot_index = bdm.get("boot_index")
        boot_index = int(boot_index) if boot_index not in (None, "") else None
        ref = bdm.get("uuid")
        if source in ("volume", "image", "snapshot") and not ref:
            raise errors.BadRequest("Block Device Mapping is Invalid: Missing uuid for "
                                    f"{source} source.")
        if source == "image" and dest == "volume" and not bdm.get("volume_size"):
            raise errors.BadRequest("Block Device Mapping is Invalid: Images with "
                                    "destination_type 'volume' need to have a non-zero size specified")
        row = {"uuid": str(uuid_mod.uuid4()), "source_type": source, "destination_type": dest,
               "boot_index": boot_index, "device_name": bdm.get("device_name"),
               "device_type": bdm.get("device_type"), "disk_bus": bdm.get("disk_bus"),
               "volume_size": int(bdm["volume_size"]) if bdm.get("volume_size") else None,
               "delete_on_termination": validation.to_bool(bdm.get("delete_on_termination", False)),
               "tag": bdm.get("tag"), "volume_type": bdm.get("volume_type"),
               "volume_id": ref if source == "volume" else None,
               "image_id": ref if source == "image" else None,
               "snapshot_id": ref if source == "snapshot" else None}
        if source == "volume" and req.api.volume_api is not None:
            try:
                volume = req.api.volume_api.get(req.context, ref)
            except Exception as exc:  # noqa: BLE001 - the volume service's not-found error
                if common.not_found(exc):
                    raise errors.BadRequest(f"Block Device Mapping is Invalid: failed to get volume {ref}.")
                raise
            if boot_index == 0 and str(volume.get("bootable", True)).lower() in ("false", "0"):
                raise errors.BadRequest(f"Block Device {ref} is not bootable.")
        out.append(row)
    boots = [b for b in out if b["boot_index"] == 0]
    if len(boots) > 1:
        raise errors.BadRequest(_BOOT_SEQ)
    is_bfv = bool(boots) and boots[0]["destination_type"] == "volume"
    if not image_ref and not boots:
        raise errors.BadRequest(_BOOT_SEQ)
    if out:
        req.authorize(P + "create:attach_volume")
    return out, is_bfv


def _networks(req, server, max_count):
    """Requested networks in the conductor's format, checked with the network service."""
    nets = server.get("networks")
    if not nets:  # none asked for: the project's one usable network, if it has one
        _one_usable_network(req)
        return []
    if nets == "auto":
        _check_auto(req)
    if isinstance(nets, str):  # "auto" or "none", resolved by the network service
        return nets
    req.authorize(P + "create:attach_network")
    api = req.api.network_api
    out, seen = [], set()
    for n in nets:
        port, net_id = n.get("port"), n.get("uuid")
        if not port and not net_id:
            raise errors.BadRequest("Bad networks format: network uuid is not in proper format ()")
        if net_id and not port:
            try:
                uuid_mod.UUID(net_id)
            except ValueError:
                raise errors.BadRequest(f"Bad networks format: network uuid is not in proper format ({net_id})")
        if port:
            if max_count > 1:
                raise errors.BadRequest("Unable to launch multiple instances with a single "
                                        "configured port ID. Please launch your instance one by "
                                        "one with different ports.")
            if port in seen:
                raise errors.BadRequest(f"Port ID {port} is duplicated in the request.")
            seen.add(port)
        if api is not None:
            _check_network(req, api, net_id if not port else None, port)
        out.append({"network_id": None if port else net_id, "port_id": port,
                    "fixed_ip": n.get("fixed_ip"), "tag": n.get("tag")})
    return out


def _one_usable_network(req):
    """Whether the project has a usable network (its own or a shared one): 409 if it
    has several, which the server could not choose between; None if unknown."""
    api = req.api.network_api
    if api is None or not hasattr(api, "available_networks"):
        return None
    nets = api.available_networks(req.context, req.context.project_id)
    if len(nets) > 1:
        raise errors.Conflict("Multiple possible networks found, use a Network ID to be "
                              "more specific.")
    return bool(nets)


def _check_auto(req):
    """``networks: "auto"`` (2.37): the project's one usable network (its own or a shared
    one), or, if it has none, an auto-allocated one, made when the server's ports are:
    409 if several are usable, 400 if the network service cannot allocate one."""
    api = req.api.network_api
    if _one_usable_network(req) is not False:
        return
    project_id = req.context.project_id
    try:
        api.get_auto_allocated_topology(req.context, project_id, dry_run=True)
    except Exception as exc:  # noqa: BLE001 - the network service's refusal (a 409)
        if getattr(exc, "code", None) != 409:
            raise
        raise errors.BadRequest(f"Unable to automatically allocate a network for project "
                                f"{project_id}")


def _security_groups(req, server):
    """The names asked for (default: ``default``), each checked with the network service."""
    names = [g["name"] for g in server.get("security_groups") or []] or ["default"]
    api = req.api.network_api
    if api is None or not hasattr(api, "find_security_group"):
        return names
    for name in dict.fromkeys(names):
        if name == "default":  # every project has it; the network service makes it
            continue
        try:
            api.find_security_group(req.context, name)
        except Exception as exc:  # noqa: BLE001 - the network service's refusal
            if common.not_found(exc):
                raise errors.BadRequest(str(exc))
            if getattr(exc, "code", None) == 409:
                raise errors.Conflict(str(exc))
            raise
    return names


def _port_resource_groups(req, networks):
    """Placement request groups the requested ports ask for (minimum bandwidth, ...)."""
    api = req.api.network_api
    ports = [n["port_id"] for n in networks if isinstance(n, dict) and n.get("port_id")]
    if not ports or api is None or not hasattr(api, "get_requested_resource_groups"):
        return []
    return api.get_requested_resource_groups(req.context, port_ids=ports)


def _call_first(api, names, *args):
    for name in names:
        fn = getattr(api, name, None)
        if fn is not None:
            return fn(*args)
    return None


def _check_network(req, api, net_id, port_id):
    try:
        if port_id:
            port = _call_first(api, ("show_port", "get_port"), req.context, port_id)
            if isinstance(port, dict) and "port" in port:
                port = port["port"]
            if port and port.get("device_id"):
                raise errors.Conflict(f"Port {port_id} is still in use.")
        else:
            _call_first(api, ("get_network", "show_network"), req.context, net_id)
    except errors.APIError:
        raise
    except Exception as exc:  # noqa: BLE001 - the network service's not-found error
        if common.not_found(exc):
            if port_id:
                raise errors.NotFound(f"Port {port_id} could not be found.")
            raise errors.BadRequest(f"Network {net_id} could not be found.")
        raise


def _availability_zone(req, server):
    """(zone, forced host, forced node) from ``zone[:host[:node]]`` or host/hypervisor_hostname."""
    text = server.get("availability_zone")
    zone = host = node = None
    if text:
        zone, _sep, rest = text.partition(":")
        host, _sep, node = rest.partition(":")
        zone, host, node = zone or None, host or None, node or None
        if host or node:
            req.authorize(P + "create:forced_host")
    conf = req.api.conf
    if zone is None:
        zone = conf.default_schedule_zone
    if zone is not None:
        known = hosts.zone_names(req.api)
        if zone not in known and zone != conf.default_availability_zone:
            raise errors.BadRequest("The requested availability zone is not available")
    if server.get("host") or server.get("hypervisor_hostname"):
        req.authorize("compute:servers:create:requested_destination")
        _check_requested_destination(req, server.get("host"), server.get("hypervisor_hostname"))
    return zone, host, node


def _check_requested_destination(req, host, node):
    """2.74: the requested host and/or node must exist as a compute node."""
    where = {"host": host} if host else {}
    if node:
        where["hypervisor_hostname"] = node
    if not hosts.compute_nodes(req.api, **where):
        if host and node:
            raise errors.BadRequest(f"Compute host {host} or hypervisor {node} could not be found.")
        raise errors.BadRequest(f"Compute host {host} could not be found." if host else
                                f"Hypervisor {node} could not be found.")


def _server_group(req, hints):
    group_uuid = hints.get("group")
    if not group_uuid:
        return None
    g = server_groups_db.get(req.api.api_db, group_uuid)
    if g is None or (g.project_id != req.context.project_id and not req.is_admin()):
        raise errors.BadRequest(f"Instance group {group_uuid} could not be found.")
    return {"id": g.id, "uuid": g.uuid, "policy": g.policy,
            "rules": json.loads(g.rules or "{}"),
            "members": [m.instance_uuid for m in g.members], "hosts": []}


def _hostname(name):
    """The hostname a server's name gives, as the reference makes it: Latin-1 letters
    only, at most 63 characters, spaces, underscores and dots made dashes, nothing
    but letters, digits and dashes kept, lower case, no dash at either end ('' if
    nothing is left)."""
    host = name.encode("latin-1", "ignore").decode("latin-1")[:63]
    host = re.sub(r"[ _.]", "-", host)
    host = re.sub(r"[^\w.-]+", "", host)
    return host.lower().strip(".-")


# One request creates at most this many servers (docs/limits.md): as many as
# fit between min_count and max_count, else 403 as when over quota.
MAX_SERVERS_PER_REQUEST = 1000


def _bounded_count(min_count, max_count):
    if min_count > MAX_SERVERS_PER_REQUEST:
        raise errors.Forbidden(
            f"Quota exceeded for instances: Requested {min_count}, but one request may "
            f"create at most {MAX_SERVERS_PER_REQUEST} instances.")
    return min_count, min(max_count, MAX_SERVERS_PER_REQUEST)


def _own_mappings(bdms):
    """The request's block device mappings for one of its servers: a mapping's uuid
    names one row of one server, so each server of a multi-create gets its own."""
    return [dict(bdm, uuid=str(uuid_mod.uuid4())) for bdm in bdms]


def create(req):
    body = req.body_json(schemas.create)
    ctxt = req.context
    req.authorize(P + "create")
    server = body["server"]
    hints = body.get("os:scheduler_hints") or body.get("OS-SCH-HNT:scheduler_hints") or {}
    min_count = int(server.get("min_count", 1))
    max_count = int(server.get("max_count", min_count))
    if min_count > max_count:
        raise errors.BadRequest("min_count must be <= max_count")
    if server.get("hostname") and max_count > 1:
        raise errors.BadRequest("Unable to allocate a single hostname to multiple instances")
    min_count, max_count = _bounded_count(min_count, max_count)
    common.check_user_data(server.get("user_data"))
    flavor = common.flavor(req, server["flavorRef"])
    quota = quotas.Quota(req.api, ctxt.project_id, ctxt.user_id)
    max_count = quotas.servers_that_fit(quota, flavor, min_count, max_count)
    quotas.check_metadata(quota, server.get("metadata"))
    quotas.check_injected_files(quota, server.get("personality"))
    image_ref = server.get("imageRef") or None
    bdms, is_bfv = _bdms(req, server, image_ref)
    bdms, is_bfv = merge_image_bdms(req, image_ref, bdms, is_bfv)
    image = common.image(req, image_ref, flavor, is_bfv)
    boot_image = image if image["id"] else _boot_volume_image(req, bdms, flavor)
    auto_disk_config = common.disk_config(server.get("OS-DCF:diskConfig"), boot_image["id"],
                                          boot_image["properties"])
    if not is_bfv and flavor["root_gb"] == 0 and image_ref:
        if not req.can(P + "create:zero_disk_flavor"):
            raise errors.Forbidden("Only volume-backed servers are allowed for flavors with zero disk.")
    networks = _networks(req, server, max_count)
    port_groups = _port_resource_groups(req, networks)
    security_groups = _security_groups(req, server)
    key_pair = common.key_pair(req, server.get("key_name"))
    zone, force_host, force_node = _availability_zone(req, server)
    group = _server_group(req, hints)
    if group is not None:
        quotas.check_count(req.api, ctxt, "server_group_members", len(group["members"]),
                           adding=max_count, message="Quota exceeded, too many servers in group")
    tags = list(server.get("tags") or [])
    reservation_id = "r-" + secrets.token_hex(4)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    admin_pass = server.get("adminPass") or common.generate_password()
    requested_destination = None
    if server.get("host") or server.get("hypervisor_hostname"):
        requested_destination = {"host": server.get("host"),
                                 "node": server.get("hypervisor_hostname"), "cell_uuid": None}
    build_requests, specs = [], []
    for index in range(max_count):
        inst_uuid = str(uuid_mod.uuid4())
        name = server["name"] if max_count == 1 else f"{server['name']}-{index + 1}"
        hostname = server.get("hostname")
        if not hostname:
            hostname = _hostname(server["name"])
            if not hostname:
                hostname = f"Server-{inst_uuid}"
            elif max_count > 1:
                hostname = f"{hostname}-{index + 1}"
        inst = {
            "uuid": inst_uuid, "display_name": name,
            "display_description": server.get("description"), "hostname": hostname,
            "project_id": ctxt.project_id, "user_id": ctxt.user_id,
            "availability_zone": zone, "vm_state": states.BUILDING,
            "task_state": states.task_states.SCHEDULING, "power_state": 0,
            "memory_mb": flavor["memory_mb"], "vcpus": flavor["vcpus"],
            "root_gb": flavor["root_gb"], "ephemeral_gb": flavor["ephemeral_gb"],
            "instance_type_id": flavor["id"], "image_ref": image["id"] or "",
            "key_name": key_pair.name if key_pair else None,
            "key_data": key_pair.public_key if key_pair else None,
            "user_data": server.get("user_data"),
            "config_drive": "True" if validation.to_bool(server.get("config_drive", False)) else "",
            "access_ip_v4": common.access_ip(server.get("accessIPv4")),
            "access_ip_v6": common.access_ip(server.get("accessIPv6")),
            "reservation_id": reservation_id, "launch_index": index, "locked": False,
            "metadata": dict(server.get("metadata") or {}), "flavor": flavor,
            "security_groups": security_groups, "auto_disk_config": auto_disk_config,
            "created_at": now.isoformat(),
        }
        if server.get("personality"):  # kept with the build request until a host took it
            inst["injected_files"] = [{"path": f.get("path", ""), "contents": f.get("contents", "")}
                                      for f in server["personality"]]
        spec = {
            "instance_uuid": inst_uuid, "project_id": ctxt.project_id, "user_id": ctxt.user_id,
            "flavor": flavor, "image": image, "num_instances": max_count,
            "availability_zone": zone, "scheduler_hints": hints,
            "instance_group": group, "requested_destination": requested_destination,
            "ignore_hosts": [], "force_hosts": [force_host] if force_host else [],
            "force_nodes": [force_node] if force_node else [],
            "requested_resources": port_groups, "is_bfv": is_bfv,
            "security_groups": security_groups,
            "retry": {"num_attempts": 0, "hosts": []},
        }
        build_requests.append(inst)
        specs.append(spec)
    added = build_requests_db.add_within(
        req.api.api_db, lambda conn: quotas.instances_room(quota, conn, min_count),
        ctxt.project_id, ctxt.user_id, build_requests, specs,
        [_own_mappings(bdms) for _inst in build_requests], tags, now,
        None if group is None else group["id"])
    del build_requests[added:], specs[added:]
    uuids = [inst["uuid"] for inst in build_requests]
    try:
        quotas.recheck_servers(quota, flavor, len(uuids))
    except errors.Forbidden:
        build_requests_db.forget(req.api.api_db, uuids)
        raise
    try:
        rpcclients.schedule_and_build_instances(
            req.api.transport, ctxt,
            build_requests=[{"instance_uuid": i["uuid"], "instance": i} for i in build_requests],
            request_specs=specs,
            requested_networks=networks, block_device_mappings=bdms, tags=tags)
    except Exception:
        build_requests_db.forget(req.api.api_db, [i["uuid"] for i in build_requests])
        raise
    if validation.to_bool(server.get("return_reservation_id", False)):
        return 202, {"reservation_id": reservation_id}
    first = build_requests[0]["uuid"]
    out = {"id": first, "links": req.links("servers", first),
           "OS-DCF:diskConfig": "AUTO" if auto_disk_config else "MANUAL",
           "security_groups": [{"name": g} for g in build_requests[0]["security_groups"]]}
    if req.api.conf.api.enable_instance_password:
        out["adminPass"] = admin_pass
    return 202, {"server": out}, {"Location": req.self_link("servers", first)}


# --- update -------------------------------------------------------------------------
def update(req, server_id):
    body = req.body_json(schemas.update)
    rec = instances.get(req, server_id)
    req.authorize(P + "update", actions.target(rec))
    changes = {}
    s_body = body["server"]
    for field, column in (("name", "display_name"), ("description", "display_description"),
                          ("accessIPv4", "access_ip_v4"), ("accessIPv6", "access_ip_v6"),
                          ("hostname", "hostname")):
        if field in s_body:
            changes[column] = common.access_ip(s_body[field]) if column.startswith("access_ip") \
                else s_body[field]
    if "OS-DCF:diskConfig" in s_body:
        changes["auto_disk_config"] = s_body["OS-DCF:diskConfig"] == "AUTO"
    if "pinned_availability_zone" in s_body:  # 2.104
        _repin(req, rec, s_body["pinned_availability_zone"])
    if changes:
        if rec["cell"] is None:
            if not build_requests_db.update_instance(req.api.api_db, server_id, **changes):
                raise errors.instance_not_found(server_id)
        else:
            records.update_instance(cells_mod.cell_database(rec["cell"]), server_id, **changes)
    return show(req, server_id, update=True)


def _repin(req, rec, zone):
    """2.104: unpin the server's zone (null), or pin it to the zone it is in now;
    a pinned server must be unpinned before it is pinned to another zone."""
    from novella.db import request_specs
    pinned = request_specs.get(req.api.api_db, rec["uuid"]).get("availability_zone")
    if zone is None or zone == pinned:
        if zone != pinned:
            request_specs.update(req.api.api_db, rec["uuid"], availability_zone=None)
        return
    if pinned is not None:
        raise errors.Conflict("Cannot change pinned availability zone directly. Unpin first "
                              "by setting pinned_availability_zone to null.")
    current = rec.get("availability_zone")
    if zone != current:
        raise errors.Conflict(f"Server can only be pinned to its current availability zone "
                              f"'{current}', but '{zone}' was requested.")
    request_specs.update(req.api.api_db, rec["uuid"], availability_zone=zone)


# --- delete -------------------------------------------------------------------------
def delete(req, server_id):
    rec = instances.get(req, server_id, view=False)
    req.authorize(P + "delete", actions.target(rec))
    if rec["locked"] and not req.is_admin():
        raise errors.Conflict(f"Instance {server_id} is locked")
    api_db = req.api.api_db
    if rec["cell"] is None and build_requests_db.delete(api_db, server_id):
        return 204, None
    if rec["cell"] is None:  # the conductor placed it meanwhile
        rec = instances.get(req, server_id, view=False)
    if _soft_delete(req, rec):  # [DEFAULT] reclaim_instance_interval
        return 204, None
    actions.delete_instance(req.api, req.context, rec)
    return 204, None


# Servers a DELETE keeps (SOFT_DELETED) when [DEFAULT] reclaim_instance_interval is set.
_SOFT_DELETABLE = (states.ACTIVE, states.STOPPED, states.PAUSED, states.SUSPENDED,
                   states.RESCUED, states.ERROR, states.SHELVED)


def _soft_delete(req, rec):
    """DELETE with ``reclaim_instance_interval`` above 0: a launched server on a host
    that is up is powered off and kept (SOFT_DELETED) until restored or reclaimed.
    Returns False when the server is to be deleted at once instead."""
    cell = rec["cell"]
    if (req.api.conf.reclaim_instance_interval <= 0 or cell is None
            or cell.uuid == cells_mod.CELL0_UUID or not rec.get("host")
            or not rec.get("launched_at") or rec.get("task_state") is not None
            or rec["vm_state"] not in _SOFT_DELETABLE
            or common.host_down(req.api, cell, rec["host"])):
        return False
    cell_db = cells_mod.cell_database(cell)
    try:
        records.update_instance(cell_db, rec["uuid"], expected_task_state=None,
                                task_state=task_states.SOFT_DELETING,
                                deleted_at=records.utcnow(), reload=False)
    except records.UnexpectedTaskStateError:
        return False  # something began meanwhile: the delete wins
    except records.InstanceNotFound:
        raise errors.instance_not_found(rec["uuid"])
    records.start_action(cell_db, req.context, rec["uuid"], "delete")
    build_requests_db.queue_for_delete(req.api.api_db, rec["uuid"])
    actions.compute_client(rec).soft_delete_instance(req.context, rec["host"], rec["uuid"])
    return True


ROUTES = [
    ("GET", "/servers", index),
    ("POST", "/servers", create),
    ("GET", "/servers/detail", detail),
    ("GET", "/servers/{server_id}", show),
    ("PUT", "/servers/{server_id}", update),
    ("DELETE", "/servers/{server_id}", delete),
    # The older clients' boot from volume: the same servers under another name.
    ("GET", "/os-volumes_boot", common.volumes_boot(index)),
    ("POST", "/os-volumes_boot", common.volumes_boot(create)),
    ("GET", "/os-volumes_boot/detail", common.volumes_boot(detail)),
    ("GET", "/os-volumes_boot/{server_id}", common.volumes_boot(show)),
    ("PUT", "/os-volumes_boot/{server_id}", common.volumes_boot(update)),
    ("DELETE", "/os-volumes_boot/{server_id}", common.volumes_boot(delete)),
]
