"""What the Compute API's handlers share: paging, query values, timestamps, and
the server helpers more than one handler needs (flavor and image checks, the
notifications the API sends, a compute host's status)."""
import datetime
import logging
import secrets

from novella.api.compute import errors, hosts, validation

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
