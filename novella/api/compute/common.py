"""What the Compute API's handlers share: paging, query values, timestamps, and
the server helpers more than one handler needs (flavor and image checks, the
notifications the API sends, a compute host's status)."""
import base64
import datetime
import ipaddress
import logging
import secrets

from novella.api.compute import errors, hosts, validation
from novella.db import cells as cells_mod, flavors as flavors_db, keypairs as keypairs_db, records
from novella.rpc import notifier as notifier_mod

LOG = logging.getLogger(__name__)


def limit_and_marker(req, max_limit=None):
    """(limit, marker) from the query; limit capped at ``[api] max_limit``."""
    cap = req.api.conf.api.max_limit if max_limit is None else max_limit
    limit = req.GET.get("limit")
    if limit is None:
        limit = cap
    else:
        try:
            limit = int(limit)
        except ValueError:
            raise errors.BadRequest("limit param must be an integer")
        if limit < 0:
            raise errors.BadRequest("limit param must be positive")
        limit = min(limit, cap)
    return limit, req.GET.get("marker")


def volumes_boot(fn):
    """``fn`` served under /os-volumes_boot, the name older clients boot from a volume
    by: the same servers as /servers, until 2.102 (gone at 2.103)."""
    def handler(req, **kwargs):
        if req.at_least("2.103"):
            raise errors.NotFound("The resource could not be found.")
        return fn(req, **kwargs)
    return handler


def db_int(text):
    """``int(text)``; ValueError unless a 32-bit column can hold it."""
    value = int(text)
    if not -validation.MAX_INT - 1 <= value <= validation.MAX_INT:
        raise ValueError(text)
    return value


def next_link(req, collection_parts, items, limit, id_key="id", name=None):
    """``[{"rel": "next", "href": ...}]`` when a full page was returned."""
    if not items or len(items) < limit:
        return []
    # As the reference: the query's parameters sorted, the marker replaced
    # where it was or added last.
    query = dict(sorted(req.GET.items()))
    query["marker"] = items[-1][id_key]
    from urllib.parse import urlencode
    return [{"rel": "next", "href": req.self_link(*collection_parts) + "?" + urlencode(query)}]


def check_query(req, allowed=(), since="2.102"):
    """From microversion ``since`` a query may name only ``allowed`` parameters
    (2.102 closed every API's query string that took none or a fixed set)."""
    if not req.at_least(since):
        return
    unknown = [k for k in req.GET if k not in allowed]
    if unknown:
        raise errors.BadRequest(
            f"Additional properties are not allowed ('{unknown[0]}' was unexpected)")


def parse_time(value, param):
    """An ISO 8601 timestamp from the query, as naive UTC; 400 if malformed."""
    try:
        ts = datetime.datetime.fromisoformat(value.strip().replace(" ", "+"))
    except (ValueError, AttributeError):
        raise errors.BadRequest(f"Invalid input for query parameters {param}. "
                                f"Value: {value}. '{value}' is not a 'date-time'")
    if ts.tzinfo is not None:
        ts = ts.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return ts


def iso(ts):
    """Timestamps as the reference prints them (no fractional seconds, Z)."""
    if ts is None:
        return None
    if isinstance(ts, str):
        return ts
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_usec(ts):
    """Timestamps with microseconds (instance actions, migrations, services)."""
    if ts is None:
        return None
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f")


def flag(req, name, default=False):
    value = req.GET.get(name)
    if value is None:
        return default
    return validation.to_bool(value)


def changes_window(req):
    """(changes-since, changes-before) from the query, checked for order."""
    since = req.GET.get("changes-since")
    before = req.GET.get("changes-before") if req.at_least("2.66") else None
    since = parse_time(since, "changes-since") if since else None
    before = parse_time(before, "changes-before") if before else None
    if since and before and since > before:
        raise errors.BadRequest("The value of changes-since must be less than "
                                "or equal to changes-before.")
    return since, before


# The reference's generated passwords: 12 characters, digits and letters
# without the easily confused ones (0, 1, I, O, l), each group represented.
_PASSWORD_GROUPS = ("23456789", "ABCDEFGHJKLMNPQRSTUVWXYZ", "abcdefghijkmnopqrstuvwxyz")


def generate_password(length=12):
    chars = [secrets.choice(group) for group in _PASSWORD_GROUPS]
    alphabet = "".join(_PASSWORD_GROUPS)
    chars += [secrets.choice(alphabet) for _ in range(length - len(chars))]
    secrets.SystemRandom().shuffle(chars)
    return "".join(chars)


# --- compute hosts ----------------------------------------------------------------------
def tell_host(req, cell, svc):
    """Let an up compute host mirror its status as the COMPUTE_STATUS_DISABLED trait."""
    if svc.binary != hosts.COMPUTE or not hosts.is_up(req.api.conf, svc):
        return
    try:
        from novella.compute.rpcapi import ComputeAPI
        ComputeAPI(cell.transport_url).set_host_enabled(req.context, svc.host, not svc.disabled)
    except Exception:  # noqa: BLE001 - the periodic sync catches up; never fail the request
        LOG.warning("Could not tell %s it is now %s", svc.host,
                    "disabled" if svc.disabled else "enabled", exc_info=True)


def host_down(api, cell, host):
    """The host's compute service is forced down or not seen for service_down_time:
    nothing there will clean up after a deleted server, so the API does."""
    service = hosts.compute_service(cell, host)
    return service is not None and not hosts.is_up(api.conf, service)


# --- what a create, a rebuild or a resize checks ------------------------------------------
def last_segment(ref):
    """The id at the end of a reference (an id, or a link ending with one)."""
    return str(ref).rstrip("/").rsplit("/", 1)[-1]


def not_found(exc):
    """Whether another service's error says what was asked for is not there."""
    code = getattr(exc, "code", None)
    return code == 404 or type(exc).__name__.endswith("NotFound")


def flavor(req, flavor_ref):
    """The flavor document for a create or resize; 400 if unknown or not accessible."""
    flavorid = last_segment(flavor_ref)
    found = flavors_db.for_request(req.api.api_db, flavorid, req.context.project_id,
                                   req.is_admin())
    if found is None:
        raise errors.BadRequest(f"Flavor {flavorid} could not be found.")
    fl, extra = found
    if fl.disabled:
        raise errors.BadRequest("Flavor is disabled.")
    return flavors_db.as_dict(fl, extra)


def image(req, image_ref, flavor, is_bfv):
    """The image a server boots from, checked against its flavor; 400 if unknown,
    not active or too large."""
    if not image_ref:
        return {"id": None, "properties": {}}
    image_id = last_segment(image_ref)
    api = req.api.image_api
    if api is None:
        return {"id": image_id, "properties": {}}
    try:  # read once per request (servers.merge_image_bdms may have)
        found = (req.environ.get("novella.images", {}).get(image_id)
                 or api.get(req.context, image_id))
    except Exception as exc:  # noqa: BLE001 - the image service's not-found error
        if not_found(exc):
            raise errors.BadRequest(f"Image {image_id} could not be found.")
        raise
    found = dict(found)
    if found.get("status", "active") != "active":
        raise errors.BadRequest(f"Image {image_id} is not active.")
    if (found.get("min_ram") or 0) > flavor["memory_mb"]:
        raise errors.BadRequest("Flavor's memory is too small for requested image.")
    if not is_bfv and (found.get("min_disk") or 0) > flavor["root_gb"] and flavor["root_gb"]:
        raise errors.BadRequest("Flavor's disk is too small for requested image.")
    size_gb = (found.get("size") or 0) / float(1 << 30)
    if not is_bfv and flavor["root_gb"] and size_gb > flavor["root_gb"]:
        raise errors.BadRequest("Flavor's disk is too small for requested image.")
    return {"id": image_id, "name": found.get("name"), "status": found.get("status", "active"),
            "min_ram": found.get("min_ram") or 0, "min_disk": found.get("min_disk") or 0,
            "size": found.get("size") or 0, "properties": dict(found.get("properties") or {})}


def disk_config(requested, image_id, image_props, inherit=True):
    """``OS-DCF:diskConfig`` as the server keeps it: AUTO (True) or MANUAL (False).

    ``requested``: the request's value or None. An image whose
    ``auto_disk_config`` property is ``disabled`` refuses AUTO (400); with
    none requested the image's property decides (``inherit``), else MANUAL.
    """
    prop = (image_props or {}).get("auto_disk_config")
    if requested == "AUTO" and str(prop).strip().lower() == "disabled":
        raise errors.BadRequest(f"Requested image {image_id} has automatic disk resize disabled.")
    if requested is not None:
        return requested == "AUTO"
    return inherit and prop is not None and validation.to_bool(prop)


def access_ip(value):
    """An access address as the reference keeps it: an IPv6 one in its compressed form."""
    try:
        return str(ipaddress.ip_address(value)) if value else value
    except ValueError:
        return value


def key_pair(req, key_name):
    """The caller's key pair of that name (None for no name); 400 if there is none."""
    if not key_name:
        return None
    kp = keypairs_db.find(req.api.api_db, req.context.user_id, key_name)
    if kp is None:
        raise errors.BadRequest("Invalid key_name provided.")
    return kp


def check_user_data(value):
    if value is None:
        return
    try:
        base64.b64decode(value, validate=True)
    except ValueError:
        raise errors.BadRequest(f"Invalid input for field/attribute user_data. Value: {value}. "
                                f"'{value}' is not a 'base64'")


# --- what the API says about a server --------------------------------------------------
def notify(req, rec, event_type):
    """``event_type`` about the server, from the API (publisher nova-api:<host>)."""
    try:
        payload = notifier_mod.instance_payload_from_db(
            cells_mod.cell_database(rec["cell"]), req.context, rec["uuid"], event_type)
        notifier_mod.Notifier(req.api.transport, f"nova-api:{req.api.conf.host or 'api'}").notify(
            req.context, event_type, payload)
    except Exception:  # noqa: BLE001 - a notification never breaks a request
        LOG.exception("could not send %s", event_type)


def refresh_network_info(req, rec):
    """The server's info cache, as the network service has its ports now."""
    if req.api.network_api is None:
        return
    info = req.api.network_api.get_instance_nw_info(req.context, rec["uuid"])
    records.set_network_info(cells_mod.cell_database(rec["cell"]), rec["uuid"], info)


def locked_reason(rec):
    """The reason a locked server was locked with (2.73), or None."""
    if not rec.get("locked") or rec.get("cell") is None:
        return None
    return records.system_metadata(cells_mod.cell_database(rec["cell"]),
                                   rec["uuid"]).get("locked_reason")
