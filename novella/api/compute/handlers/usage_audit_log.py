"""/os-instance_usage_audit_log: the state of the instance usage audit of a period.

The period is the last whole month before now (or before the time given), as
the reference's default ``instance_usage_audit_period = month``. Novella's
compute hosts run no usage audit task, so every compute host is reported as
not having run it; the document keeps the reference's shape for clients that
read it.
"""
import datetime

from novella.api.compute import errors, hosts

P = "os_compute_api:os-instance-usage-audit-log:"


def _period(before):
    end = datetime.datetime(before.year, before.month, 1)
    last = end - datetime.timedelta(days=1)
    return datetime.datetime(last.year, last.month, 1), end


def _log(req, before):
    begin, end = _period(before)
    computes = sorted({svc.host for _c, svc in hosts.services(
        req.api, binary=hosts.COMPUTE)})
    return {"period_beginning": str(begin), "period_ending": str(end),
            "num_hosts": len(computes), "num_hosts_done": 0, "num_hosts_running": 0,
            "num_hosts_not_run": len(computes), "hosts_not_run": computes,
            "total_instances": 0, "total_errors": 0,
            "overall_status": f"{'ALL' if not computes else f'0 of {len(computes)}'} hosts "
                              "done. 0 errors.",
            "log": {}}


def index(req):
    req.authorize(P + "list", {})
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return 200, {"instance_usage_audit_logs": _log(req, now)}


def show(req, before_timestamp):
    req.authorize(P + "show", {})
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in before_timestamp else "%Y-%m-%d %H:%M:%S"
    try:
        before = datetime.datetime.strptime(before_timestamp, fmt)
    except ValueError:
        raise errors.BadRequest(f"Invalid timestamp for date {before_timestamp}")
    return 200, {"instance_usage_audit_log": _log(req, before)}


ROUTES = [
    ("GET", "/os-instance_usage_audit_log", index),
    ("GET", "/os-instance_usage_audit_log/{before_timestamp}", show),
]
