"""Compute quotas, as the reference's database quota driver counts them.

Limits: ``[quota]`` gives the defaults; the ``default`` quota class
overrides them; a project's overrides replace the defaults for the
project, a user's overrides replace the project's for that user. -1 is
unlimited. ``[quota] driver = nova.quota.NoopQuotaDriver`` enforces none.

Usage is counted, never reserved: servers from the API database's instance
mappings (so servers still being built count), cores and RAM from the
instance records of the cells where the mappings put the project's servers
and from the build requests (one API statement finds both), key pairs per user, server
groups per project, members per group. With ``[quota]
count_usage_from_placement``, cores and RAM are the VCPU + PCPU and
MEMORY_MB of the project's (or user's) placement usages, plus the build
requests of servers the scheduler has not claimed for yet; a
SHELVED_OFFLOADED server then holds none, and unshelving it is checked
(:func:`check_unshelve_offloaded`).

Creating servers counts and writes in one write transaction of the API
database, so concurrent requests cannot together pass the instances quota;
cores and RAM are counted again after the write (``[quota]
recheck_quota``) and the servers undone when a concurrent request took the
room meanwhile. The recheck runs before anything is cast to the conductor,
so a request it refuses has claimed nothing in placement.

The overrides live in three tables of the API database (API migration
0003); ``novella.db.quotas`` reads and writes them and counts the usage.
"""
from novella.api.compute import errors
from novella.conf import quota as quota_conf
from novella.db import cells as cells_mod, quotas as quotas_db

RESOURCES = ["instances", "cores", "ram", "metadata_items", "injected_files",
             "injected_file_content_bytes", "injected_file_path_bytes", "key_pairs",
             "server_groups", "server_group_members"]
# The reference's nova-network quotas: nothing counts or enforces them and no option
# gives them a default (-1), but a project or class keeps the limits set for them
# where the microversion still has them (before 2.36; classes before 2.50).
NETWORK_RESOURCES = ["floating_ips", "fixed_ips", "security_groups", "security_group_rules"]
# The option giving a resource's default, where it is not named as the resource.
_OPTION = {"injected_file_path_bytes": "injected_file_path_length"}
# What each resource is called in /limits.
LIMIT_NAMES = {"instances": "maxTotalInstances", "cores": "maxTotalCores",
               "ram": "maxTotalRAMSize", "metadata_items": "maxServerMeta",
               "key_pairs": "maxTotalKeypairs", "server_groups": "maxServerGroups",
               "server_group_members": "maxServerGroupMembers",
               "injected_files": "maxPersonality",
               "injected_file_content_bytes": "maxPersonalitySize"}
UNLIMITED = -1


def _conf(api):
    quota_conf.register_opts(api.conf)
    return api.conf.quota


def enforced(api):
    return _conf(api).driver != "nova.quota.NoopQuotaDriver"


# --- limits ---------------------------------------------------------------------------
def _defaults(api):
    conf = _conf(api)
    limits = {r: getattr(conf, _OPTION.get(r, r)) for r in RESOURCES}
    limits.update(dict.fromkeys(NETWORK_RESOURCES, UNLIMITED))
    return limits


def class_limits(api, class_name="default"):
    limits = _defaults(api)
    for resource, hard in quotas_db.class_limits(api.api_db, class_name):
        if resource in limits:
            limits[resource] = hard
    return limits


def _limits(api, project_id, user_id=None):
    """(the project's limits, its user's limits or None), from one statement: the
    ``default`` class's, the project's and the user's overrides together."""
    rows = quotas_db.limits_over_defaults(api.api_db, project_id, user_id)
    project = _defaults(api)
    for level, resource, hard in rows:
        if level < 2 and resource in project:
            project[resource] = hard
    user = None
    if user_id is not None:
        user = dict(project)
        for level, resource, hard in rows:
            if level == 2 and resource in user:
                user[resource] = hard
    if not enforced(api):
        project = {r: UNLIMITED for r in project}
        user = None if user is None else dict(project)
    return project, user


def project_limits(api, project_id, user_id=None):
    """{resource: limit} for the project, or for one of its users."""
    project, user = _limits(api, project_id, user_id)
    return project if user is None else user


# --- usage ----------------------------------------------------------------------------
def from_placement(api):
    """Whether cores and RAM are counted from placement (``[quota]
    count_usage_from_placement``; the API must have a placement client)."""
    return bool(_conf(api).count_usage_from_placement) and \
        getattr(api, "placement", None) is not None


def _placement_cores_ram(api, project_id, user_id=None):
    """VCPU + PCPU and MEMORY_MB the project's (or user's) consumers hold."""
    params = {"project_id": project_id}
    if user_id is not None:
        params["user_id"] = user_id
    usages = (api.placement.get("/usages", params=params, microversion="1.9")
              or {}).get("usages", {})
    return (int(usages.get("VCPU", 0)) + int(usages.get("PCPU", 0)),
            int(usages.get("MEMORY_MB", 0)))


def _cores_ram(api, project_id, user_id=None, where=None):
    """{None: (cores, ram) of the project, user_id: of the user}; ``where``:
    ``quotas_db.where_servers_are``'s answer, when the caller has it."""
    scopes = [None] + ([user_id] if user_id is not None else [])
    if from_placement(api):
        # Placement holds what the servers with a host use; a server still
        # being scheduled holds nothing there yet and is counted from its
        # build request (once the scheduler has claimed for it, from placement).
        out = {scope: _placement_cores_ram(api, project_id, scope) for scope in scopes}
        for uuid, owner, vcpus, memory_mb in quotas_db.build_requests(api.api_db, project_id):
            held = (api.placement.get(f"/allocations/{uuid}") or {}).get("allocations")
            if not held:
                _add(out, owner, vcpus, memory_mb)
        return out

    _counted, cells, builds = where or quotas_db.where_servers_are(api.api_db, project_id, user_id)
    out = {scope: (0, 0) for scope in scopes}
    counted = cells_mod.scatter(
        cells, lambda _cell, db: quotas_db.cores_ram_in(db, project_id, user_id))
    for result in counted.values():
        if isinstance(result, Exception):
            continue
        for scope, (cores, ram) in zip(scopes, (result[:2], result[2:])):
            out[scope] = (out[scope][0] + int(cores), out[scope][1] + int(ram))
    for _uuid, owner, vcpus, memory_mb in builds:
        _add(out, owner, vcpus, memory_mb)
    return out


def _add(out, owner, vcpus, memory_mb):
    """Count a server of ``owner`` for the project, and for the user if it is theirs."""
    for scope in {None, owner}:
        if scope in out:
            cores, ram = out[scope]
            out[scope] = (cores + int(vcpus), ram + int(memory_mb))


def usage(api, project_id, user_id=None):
    """{resource: in use} for the resources counted per project (or user)."""
    where = quotas_db.where_servers_are(api.api_db, project_id, user_id)
    groups, key_pairs = quotas_db.groups_and_key_pairs(api.api_db, project_id, user_id)
    cores, ram = _cores_ram(api, project_id, user_id, where)[user_id]
    return {"instances": where[0][user_id], "cores": cores, "ram": ram,
            "server_groups": groups, "key_pairs": key_pairs}


# --- checks ---------------------------------------------------------------------------
class Quota:
    """What one request checks against: the limits of a project and of one of
    its users (read once, in one statement), and their usage of the
    resources a server takes, counted for both at once and only for the
    resources that have a limit (an unlimited one cannot be passed)."""

    def __init__(self, api, project_id, user_id):
        self.api, self.project_id, self.user_id = api, project_id, user_id
        self._limits = None

    def limits(self, scope=None):
        """The project's limits (``scope`` None) or the user's (``scope`` the user id)."""
        if self._limits is None:
            self._limits = _limits(self.api, self.project_id, self.user_id)
        return self._limits[0 if scope is None else 1]

    def scopes(self):
        return (None, self.user_id)

    def limited(self, resources):
        """The ones of ``resources`` limited for the project or for the user."""
        return [r for r in resources if any(self.limits(s)[r] >= 0 for s in self.scopes())]

    def used(self, resources, conn=None):
        """{scope: {resource: in use}} for the limited ones of ``resources`` (among
        instances, cores, ram); ``conn``: the transaction to count servers in."""
        wanted = self.limited(resources)
        out = {scope: {} for scope in self.scopes()}
        where = None
        if "cores" in wanted or "ram" in wanted:
            where = quotas_db.where_servers_are(self.api.api_db, self.project_id, self.user_id)
            counted = _cores_ram(self.api, self.project_id, self.user_id, where)
            for scope in out:
                out[scope]["cores"], out[scope]["ram"] = counted[scope]
        if "instances" in wanted:
            if conn is not None:
                counted = quotas_db.count_servers(conn, self.project_id, self.user_id)
            elif where is not None:
                counted = where[0]
            else:
                counted = quotas_db.servers_of(self.api.api_db, self.project_id, self.user_id)
            for scope in out:
                out[scope]["instances"] = counted[scope]
        return out


def over_quota(resources, requested, used, limits):
    """403 worded as the reference words an exceeded quota."""
    names = ", ".join(resources)
    if len(resources) == 1:
        r = resources[0]
        return errors.Forbidden(
            f"Quota exceeded for {names}: Requested {requested[r]}, but already used "
            f"{used[r]} of {limits[r]} {names}")
    return errors.Forbidden(f"Quota exceeded for {names}: Requested "
                            + ", ".join(f"{requested[r]}" for r in resources)
                            + ", but already used " + ", ".join(str(used[r]) for r in resources)
                            + " of " + ", ".join(str(limits[r]) for r in resources)
                            + f" {names}")


def _room(limit, used, each):
    if limit < 0 or each <= 0:
        return None
    return max(0, (limit - used) // each)


SERVER_RESOURCES = ("instances", "cores", "ram")


def servers_that_fit(quota, flavor, min_count, max_count):
    """How many servers of ``flavor`` fit the ``quota`` (a Quota; at most
    ``max_count``); 403 below ``min_count``."""
    if not enforced(quota.api):
        return max_count
    used = quota.used(SERVER_RESOURCES)
    each = {"instances": 1, "cores": flavor["vcpus"], "ram": flavor["memory_mb"]}
    fit = max_count
    for scope in quota.scopes():
        limits = quota.limits(scope)
        for resource, n in used[scope].items():
            room = _room(limits[resource], n, each[resource])
            if room is not None:
                fit = min(fit, room)
    if fit >= min_count:
        return fit
    for scope in quota.scopes():
        limits, counted = quota.limits(scope), used[scope]
        short = [r for r in SERVER_RESOURCES if r in counted
                 and limits[r] >= 0 and counted[r] + each[r] * min_count > limits[r]]
        if short:
            raise over_quota(short, {r: each[r] * min_count for r in short}, counted, limits)
    raise over_quota(["instances"], {"instances": min_count},
                     {"instances": used[None].get("instances", 0)}, quota.limits())


def instances_room(quota, conn, min_count):
    """How many more servers the instances quota allows (None: unlimited),
    counted in ``conn``, the write transaction that records them; 403 when
    fewer than ``min_count``."""
    if not enforced(quota.api) or not quota.limited(["instances"]):
        return None
    used = quota.used(["instances"], conn)
    room = None
    for scope in quota.scopes():
        limits = quota.limits(scope)
        if limits["instances"] < 0:
            continue
        n = used[scope]["instances"]
        left = max(0, limits["instances"] - n)
        if left < min_count:
            raise over_quota(["instances"], {"instances": min_count}, {"instances": n}, limits)
        room = left if room is None else min(room, left)
    return room


def recheck_servers(quota, flavor, count):
    """After recording ``count`` servers of ``flavor``: 403 if the project (or
    the user) is now over its quota, worded with what this request asked for
    and what the others use."""
    if not enforced(quota.api) or not _conf(quota.api).recheck_quota:
        return
    own = {"instances": count, "cores": count * flavor["vcpus"],
           "ram": count * flavor["memory_mb"]}
    used = quota.used(SERVER_RESOURCES)
    for scope in quota.scopes():
        limits = quota.limits(scope)
        short = [r for r, n in used[scope].items() if 0 <= limits[r] < n]
        if short:
            others = {r: max(0, used[scope][r] - own[r]) for r in short}
            raise over_quota([r for r in SERVER_RESOURCES if r in short], own, others, limits)


def check_resize(api, ctxt, project_id, user_id, old_flavor, new_flavor):
    """403 when growing to ``new_flavor`` takes the project past cores or RAM."""
    if not enforced(api):
        return
    delta = {"cores": new_flavor["vcpus"] - old_flavor["vcpus"],
             "ram": new_flavor["memory_mb"] - old_flavor["memory_mb"]}
    grows = [r for r in ("cores", "ram") if delta[r] > 0]
    quota = Quota(api, project_id, user_id)
    if not grows or not quota.limited(grows):
        return
    used = quota.used(grows)
    for scope in quota.scopes():
        limits = quota.limits(scope)
        short = [r for r in grows if limits[r] >= 0 and used[scope][r] + delta[r] > limits[r]]
        if short:
            raise over_quota(short, delta, used[scope], limits)


def check_unshelve_offloaded(api, project_id, user_id, flavor):
    """Unshelving a SHELVED_OFFLOADED server takes its flavor's cores and RAM
    again. Only counted from placement is the offloaded server's use gone
    (counted from the cells, it never stopped counting), so only then is
    there anything to check, as in the reference; 403 ``Quota exceeded for
    resources: [...]`` when the project or the user would pass a limit."""
    if not enforced(api) or not from_placement(api):
        return
    delta = {"cores": int(flavor.get("vcpus") or 0), "ram": int(flavor.get("memory_mb") or 0)}
    quota = Quota(api, project_id, user_id)
    used = quota.used(("cores", "ram"))
    overs = set()
    for scope in quota.scopes():
        limits = quota.limits(scope)
        overs.update(r for r in used[scope]
                     if limits[r] >= 0 and used[scope][r] + delta[r] > limits[r])
    if overs:
        raise errors.Forbidden(f"Quota exceeded for resources: {sorted(overs)}")


def check_count(api, ctxt, resource, used, adding=1, user_id=None, message=None):
    """403 when ``used + adding`` passes ``resource``'s limit."""
    if not enforced(api):
        return
    limits = project_limits(api, ctxt.project_id, user_id)
    if 0 <= limits[resource] < used + adding:
        if message:
            raise errors.Forbidden(message)
        raise over_quota([resource], {resource: adding}, {resource: used}, limits)


def check_metadata(quota, metadata):
    if not enforced(quota.api) or metadata is None:
        return
    limit = quota.limits(quota.user_id)["metadata_items"]
    if 0 <= limit < len(metadata):
        raise errors.Forbidden("Quota exceeded for metadata_items: Requested "
                               f"{len(metadata)}, but already used 0 of {limit} metadata_items")


def check_injected_files(quota, files):
    """Personality files of a create or rebuild (before 2.57)."""
    if not enforced(quota.api) or not files:
        return
    limits = quota.limits(quota.user_id)
    if 0 <= limits["injected_files"] < len(files):
        raise errors.Forbidden("Personality file limit exceeded")
    for item in files:
        path = str((item or {}).get("path", "")) if isinstance(item, dict) else ""
        content = str((item or {}).get("contents", "")) if isinstance(item, dict) else ""
        if 0 <= limits["injected_file_path_bytes"] < len(path):
            raise errors.Forbidden("Personality file path exceeds maximum 255")
        if 0 <= limits["injected_file_content_bytes"] < len(content):
            raise errors.Forbidden("Personality file content exceeds maximum "
                                   f"{limits['injected_file_content_bytes']}")
