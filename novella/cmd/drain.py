"""`novella drain`: empty a cell, an aggregate, a zone or a host, as an operator
would with `openstack optimize` (docs/drain.md), in one command.

It creates the audit (strategy ``cell_drain``, or ``host_maintenance`` for
``--host``), waits for the plan, shows it, asks (``--yes`` does not), starts
it and follows it with a progress bar until it ends. Everything goes through
the Infrastructure Optimization API (catalog type ``infra-optim``); the
credentials are those of ``openstack``: ``--os-cloud`` / ``OS_CLOUD`` in the
``clouds.yaml`` ``OS_CLIENT_CONFIG_FILE`` names (which ``novella up`` writes),
else ``OS_AUTH_URL``, ``OS_USERNAME``, ``OS_PASSWORD``, ``OS_PROJECT_NAME``.
"""
import argparse
import collections
import json
import os
import sys
import time

VERSION = "infra-optim 1.5"
ENDED = {"SUCCEEDED", "FAILED", "CANCELLED", "SUPERSEDED"}


def add_parser(sub):
    p = sub.add_parser("drain", help="empty a cell, aggregate, zone or host into others "
                                     "(a planned, capacity-checked action plan)",
                       description="Empty a cell, a host aggregate, an availability zone or "
                                   "one host: an audit of the Infrastructure Optimization API "
                                   "plans where each server goes, the plan is shown, and once "
                                   "started (after a question, or at once with --yes) it is "
                                   "followed until it ends (docs/drain.md).")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--source-cell", help="the cell to empty (name or uuid)")
    source.add_argument("--source-aggregate", help="the host aggregate to empty")
    source.add_argument("--source-zone", help="the availability zone to empty")
    source.add_argument("--host", help="one compute host to empty (host_maintenance)")
    p.add_argument("--target-cell", action="append", default=[],
                   help="a cell that receives (repeatable; default: every other cell)")
    p.add_argument("--target-aggregate", action="append", default=[],
                   help="a host aggregate whose hosts receive (repeatable)")
    p.add_argument("--target-zone", action="append", default=[],
                   help="an availability zone whose hosts receive (repeatable)")
    p.add_argument("--backup-host", help="with --host: the one host that receives")
    p.add_argument("--flavor-map", action="append", default=[], metavar="OLD=NEW",
                   help="resize the servers of flavor OLD to NEW on the way (repeatable)")
    p.add_argument("--parallel-total", type=int, help="moves in flight at once (default 6)")
    p.add_argument("--parallel-per-node", type=int,
                   help="moves in flight from one source host (default 2)")
    p.add_argument("--on-failure", choices=["continue", "stop"],
                   help="after a move failed everywhere (default continue)")
    p.add_argument("--yes", action="store_true", help="start the plan without asking")
    p.add_argument("--os-cloud", default=os.environ.get("OS_CLOUD"),
                   help="the cloud of clouds.yaml to use (default: $OS_CLOUD)")
    p.add_argument("--endpoint", help="the optimize API's URL (default: from the catalog)")
    p.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    return p


def parameters(args):
    """(strategy, parameters) the arguments ask for."""
    params = {}
    for name in ("parallel_total", "parallel_per_node", "on_failure"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    if args.host:
        params["maintenance_node"] = args.host
        if args.backup_host:
            params["backup_node"] = args.backup_host
        return "host_maintenance", params
    for name in ("source_cell", "source_aggregate", "source_zone"):
        if getattr(args, name):
            params[name] = getattr(args, name)
    for flag, key in (("target_cell", "target_cells"), ("target_aggregate", "target_aggregates"),
                      ("target_zone", "target_zones")):
        if getattr(args, flag):
            params[key] = getattr(args, flag)
    if args.flavor_map:
        mapping = {}
        for item in args.flavor_map:
            old, sep, new = item.partition("=")
            if not sep or not old or not new:
                raise SystemExit(f"error: --flavor-map wants OLD=NEW, not {item!r}")
            mapping[old] = new
        params["flavor_map"] = mapping
    return "cell_drain", params


# -- the API, through keystoneauth ------------------------------------------------------

class APIError(Exception):
    pass


class Client:
    def __init__(self, session, endpoint):
        self.session, self.endpoint = session, endpoint.rstrip("/")

    def call(self, method, path, body=None):
        resp = self.session.request(self.endpoint + path, method, json=body,
                                    headers={"OpenStack-API-Version": VERSION},
                                    raise_exc=False)
        data = resp.json() if resp.content else {}
        if resp.status_code >= 400:
            message = resp.text
            if isinstance(data, dict) and "error_message" in data:
                try:
                    message = json.loads(data["error_message"])["faultstring"]
                except (ValueError, KeyError, TypeError):
                    message = data["error_message"]
            raise APIError(f"{method} {path}: {resp.status_code} {message}")
        return data


def session_and_endpoint(args):
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3
    cloud = _cloud(args.os_cloud) if args.os_cloud else {}
    auth = cloud.get("auth") or {}
    env = os.environ.get

    def pick(key, var):
        return auth.get(key) or env(var)
    plugin = v3.Password(
        auth_url=pick("auth_url", "OS_AUTH_URL"), username=pick("username", "OS_USERNAME"),
        password=pick("password", "OS_PASSWORD"),
        project_name=pick("project_name", "OS_PROJECT_NAME"),
        user_domain_name=pick("user_domain_name", "OS_USER_DOMAIN_NAME") or "Default",
        project_domain_name=pick("project_domain_name", "OS_PROJECT_DOMAIN_NAME") or "Default")
    if not plugin.auth_url:
        raise SystemExit("error: no credentials: give --os-cloud (or OS_CLOUD with "
                         "OS_CLIENT_CONFIG_FILE) or the OS_AUTH_URL, OS_USERNAME, "
                         "OS_PASSWORD and OS_PROJECT_NAME variables")
    session = ks_session.Session(auth=plugin)
    endpoint = args.endpoint or session.get_endpoint(
        service_type="infra-optim", interface="public",
        region_name=cloud.get("region_name") or env("OS_REGION_NAME"))
    return session, endpoint


def _cloud(name):
    import yaml
    paths = [os.environ.get("OS_CLIENT_CONFIG_FILE"), "clouds.yaml",
             os.path.expanduser("~/.config/openstack/clouds.yaml"),
             "/etc/openstack/clouds.yaml"]
    for path in filter(None, paths):
        if os.path.exists(path):
            with open(path) as f:
                clouds = (yaml.safe_load(f) or {}).get("clouds") or {}
            if name in clouds:
                return clouds[name]
    raise SystemExit(f"error: cloud {name} is in no clouds.yaml")


# -- the command ------------------------------------------------------------------------------

def main(args, client=None, out=None, ask=input):
    out = out or sys.stdout
    strategy, params = parameters(args)
    if client is None:
        session, endpoint = session_and_endpoint(args)
        client = Client(session, endpoint)
    say = lambda text="": print(text, file=out, flush=True)  # noqa: E731
    try:
        return _drain(client, strategy, params, args, say, out, ask)
    except APIError as exc:
        say(f"error: {exc}")
        return 1


def _drain(client, strategy, params, args, say, out, ask):
    audit = client.call("POST", "/v1/audits", {"audit_type": "ONESHOT", "strategy": strategy,
                                               "parameters": params})
    say(f"Audit {audit['uuid']} ({strategy}, {json.dumps(params, sort_keys=True)}): planning.")
    while audit["state"] in ("PENDING", "ONGOING"):
        time.sleep(min(args.poll, 0.2))
        audit = client.call("GET", f"/v1/audits/{audit['uuid']}")
    if audit["state"] != "SUCCEEDED":
        say(f"The plan does not fit; nothing was moved.\n{audit.get('status_message') or ''}")
        return 1
    [plan] = client.call("GET", f"/v1/action_plans?audit_uuid={audit['uuid']}")["action_plans"]
    actions = _actions(client, plan["uuid"])
    moves = [a for a in actions if a["action_type"] in ("migrate", "resize")]
    hosts = [a["input_parameters"]["resource_id"] for a in actions
             if a["action_type"] == "change_nova_service_state"]
    kinds = collections.Counter(a["input_parameters"].get("migration_type", "resize")
                                for a in moves)
    dests = collections.Counter(a["input_parameters"]["destination_node"] for a in moves)
    say(f"Action plan {plan['uuid']}: disable {len(hosts)} hosts ({', '.join(hosts)}), then "
        f"move {len(moves)} servers (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        + ").")
    say("Destinations (every server counted together in Placement): "
        + ", ".join(f"{h} {n}" for h, n in sorted(dests.items())))
    dashboard = client.endpoint + "/dashboard/#token=TOKEN"
    say(f"Watch it: {dashboard} (TOKEN: `openstack token issue -f value -c id`), or "
        f"`openstack optimize action list --action-plan {plan['uuid']}`.")
    if not args.yes:
        answer = ask("Start this plan? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            say(f"Not started. Start it later with `openstack optimize actionplan start "
                f"{plan['uuid']}`.")
            return 0
    client.call("POST", f"/v1/action_plans/{plan['uuid']}/start")
    say("Started.")
    from novella.cmd.progress import Progress
    bar = Progress(total=len(moves), stream=out)
    try:
        while True:
            plan = client.call("GET", f"/v1/action_plans/{plan['uuid']}")
            moves = [a for a in _actions(client, plan["uuid"])
                     if a["action_type"] in ("migrate", "resize")]
            done = sum(a["state"] == "SUCCEEDED" for a in moves)
            failed = [a for a in moves if a["state"] == "FAILED"]
            bar.update(done, len(failed))
            if plan["state"] in ENDED:
                break
            time.sleep(args.poll)
    except KeyboardInterrupt:
        bar.finish()
        say(f"The plan keeps running: `openstack optimize actionplan show {plan['uuid']}`; "
            f"cancel it with `openstack optimize actionplan cancel {plan['uuid']}`.")
        return 130
    bar.finish()
    say(f"Action plan {plan['uuid']} {plan['state']}."
        + (f" {plan['status_message']}" if plan.get("status_message") else ""))
    for a in failed:
        say(f"  {a['input_parameters']['resource_id']}: {a.get('status_message')}")
    return 0 if plan["state"] == "SUCCEEDED" else 1


def _actions(client, plan_uuid):
    """Every action of the plan (the API pages at 1000)."""
    out, path = [], f"/v1/actions?action_plan_uuid={plan_uuid}"
    while path:
        page = client.call("GET", path)
        out.extend(page["actions"])
        nxt = page.get("next")
        path = nxt[nxt.index("/v1/"):] if nxt else None
    return out
