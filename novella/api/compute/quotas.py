"""Compute quotas, as the reference's database quota driver counts them.

Limits: ``[quota]`` gives the defaults; the ``default`` quota class
overrides them; a project's overrides replace the defaults for the
project, a user's overrides replace the project's for that user. -1 is
unlimited. ``[quota] driver = nova.quota.NoopQuotaDriver`` enforces none.

Usage is counted, never reserved: servers from the API database's instance
mappings (so servers still being built count), cores and RAM from the
cells' instance records and the build requests, key pairs per user, server
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

The overrides live in three tables of the API database (``quotas``,
``project_user_quotas``, ``quota_classes``, named and shaped as the
reference's; API migration 0003).
"""
import json

import sqlalchemy as sa

from novella.api.compute import errors
from novella.conf import quota as quota_conf
from novella.db import api_models as am, cell_models as cm, cells as cells_mod

RESOURCES = ["instances", "cores", "ram", "metadata_items", "injected_files",
             "injected_file_content_bytes", "injected_file_path_bytes", "key_pairs",
             "server_groups", "server_group_members"]
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

quotas_table = am.Quota.__table__
user_quotas_table = am.ProjectUserQuota.__table__
classes_table = am.QuotaClass.__table__


def _conf(api):
    quota_conf.register_opts(api.conf)
    return api.conf.quota


def enforced(api):
    return _conf(api).driver != "nova.quota.NoopQuotaDriver"


# --- limits ---------------------------------------------------------------------------
def class_limits(api, class_name="default"):
    conf = _conf(api)
    limits = {r: getattr(conf, _OPTION.get(r, r)) for r in RESOURCES}
    with api.api_db.connection() as conn:
        for resource, hard in conn.execute(sa.select(
                classes_table.c.resource, classes_table.c.hard_limit)
                .where(classes_table.c.class_name == class_name)):
            if resource in limits:
                limits[resource] = hard
    return limits


def project_limits(api, project_id, user_id=None):
    """{resource: limit} for the project, or for one of its users."""
    limits = class_limits(api)
    with api.api_db.connection() as conn:
        for resource, hard in conn.execute(sa.select(
                quotas_table.c.resource, quotas_table.c.hard_limit)
                .where(quotas_table.c.project_id == project_id)):
            if resource in limits:
                limits[resource] = hard
        if user_id is not None:
            for resource, hard in conn.execute(sa.select(
                    user_quotas_table.c.resource, user_quotas_table.c.hard_limit)
                    .where(user_quotas_table.c.project_id == project_id,
                           user_quotas_table.c.user_id == user_id)):
                if resource in limits:
                    limits[resource] = hard
    if not enforced(api):
        limits = {r: UNLIMITED for r in limits}
    return limits


def set_limits(api, table, keys, values):
    """Write overrides (``keys``: the row's identifying columns)."""
    with api.api_db.connection(write=True) as conn:
        for resource, hard in values.items():
            where = [table.c[k] == v for k, v in keys.items()] + [table.c.resource == resource]
            done = conn.execute(sa.update(table).where(*where).values(hard_limit=hard))
            if not done.rowcount:
                conn.execute(sa.insert(table).values(resource=resource, hard_limit=hard, **keys))


def delete_limits(api, project_id, user_id=None):
    with api.api_db.connection(write=True) as conn:
        conn.execute(sa.delete(user_quotas_table).where(
            user_quotas_table.c.project_id == project_id,
            *([user_quotas_table.c.user_id == user_id] if user_id else [])))
        if user_id is None:
            conn.execute(sa.delete(quotas_table).where(quotas_table.c.project_id == project_id))


# --- usage ----------------------------------------------------------------------------
def _instances(conn, project_id, user_id=None):
    q = sa.select(sa.func.count()).select_from(am.InstanceMapping).where(
        am.InstanceMapping.project_id == project_id,
        am.InstanceMapping.queued_for_delete.is_(False))
    if user_id is not None:
        q = q.where(am.InstanceMapping.user_id == user_id)
    return conn.execute(q).scalar() or 0


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


def _build_requests(api, project_id, user_id=None):
    """[(instance uuid, vcpus, memory_mb)] of the servers still waiting for a cell."""
    out = []
    with api.api_db.session() as s:
        for uuid, doc in s.execute(sa.select(am.BuildRequest.instance_uuid,
                                             am.BuildRequest.instance).where(
                am.BuildRequest.project_id == project_id)):
            inst = json.loads(doc)
            if user_id is None or inst.get("user_id") == user_id:
                out.append((uuid, int(inst.get("vcpus") or 0), int(inst.get("memory_mb") or 0)))
    return out


def _cores_ram(api, project_id, user_id=None):
    if from_placement(api):
        # Placement holds what the servers with a host use; a server still
        # being scheduled holds nothing there yet and is counted from its
        # build request (once the scheduler has claimed for it, from placement).
        cores, ram = _placement_cores_ram(api, project_id, user_id)
        for uuid, vcpus, memory_mb in _build_requests(api, project_id, user_id):
            held = (api.placement.get(f"/allocations/{uuid}") or {}).get("allocations")
            if not held:
                cores, ram = cores + vcpus, ram + memory_mb
        return cores, ram

    def count(cell, db):
        q = sa.select(sa.func.coalesce(sa.func.sum(cm.Instance.vcpus), 0),
                      sa.func.coalesce(sa.func.sum(cm.Instance.memory_mb), 0)).where(
            cm.Instance.project_id == project_id, cm.Instance.deleted == 0,
            cm.Instance.hidden.is_(False))
        if user_id is not None:
            q = q.where(cm.Instance.user_id == user_id)
        with db.session() as s:
            return tuple(s.execute(q).one())
    cores = ram = 0
    for result in cells_mod.scatter(cells_mod.list_cells(api.api_db), count).values():
        if not isinstance(result, Exception):
            cores, ram = cores + result[0], ram + result[1]
    for _uuid, vcpus, memory_mb in _build_requests(api, project_id, user_id):
        cores, ram = cores + vcpus, ram + memory_mb
    return cores, ram


def usage(api, project_id, user_id=None):
    """{resource: in use} for the resources counted per project (or user)."""
    with api.api_db.connection() as conn:
        instances = _instances(conn, project_id, user_id)
        groups = conn.execute(sa.select(sa.func.count()).select_from(am.InstanceGroup).where(
            am.InstanceGroup.project_id == project_id,
            *([am.InstanceGroup.user_id == user_id] if user_id else []))).scalar()
        keypair_user = user_id
        key_pairs = conn.execute(sa.select(sa.func.count()).select_from(am.KeyPair).where(
            am.KeyPair.user_id == keypair_user)).scalar() if keypair_user else 0
    cores, ram = _cores_ram(api, project_id, user_id)
    return {"instances": instances, "cores": cores, "ram": ram, "server_groups": groups or 0,
            "key_pairs": key_pairs or 0}


# --- checks ---------------------------------------------------------------------------
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


def servers_that_fit(api, ctxt, flavor, min_count, max_count, conn=None):
    """How many servers of ``flavor`` fit (at most ``max_count``); 403 below
    ``min_count``. ``conn``: the write transaction that will record them."""
    if not enforced(api):
        return max_count
    checks = []
    for user_id in (None, ctxt.user_id):
        limits = project_limits(api, ctxt.project_id, user_id)
        if conn is not None:
            used_instances = _instances(conn, ctxt.project_id, user_id)
        else:
            with api.api_db.connection() as c:
                used_instances = _instances(c, ctxt.project_id, user_id)
        cores, ram = _cores_ram(api, ctxt.project_id, user_id)
        used = {"instances": used_instances, "cores": cores, "ram": ram}
        each = {"instances": 1, "cores": flavor["vcpus"], "ram": flavor["memory_mb"]}
        checks.append((limits, used, each))
    fit = max_count
    for limits, used, each in checks:
        for resource in ("instances", "cores", "ram"):
            room = _room(limits[resource], used[resource], each[resource])
            if room is not None:
                fit = min(fit, room)
    if fit >= min_count:
        return fit
    for limits, used, each in checks:
        short = [r for r in ("instances", "cores", "ram")
                 if limits[r] >= 0 and used[r] + each[r] * min_count > limits[r]]
        if short:
            raise over_quota(short, {r: each[r] * min_count for r in short}, used, limits)
    raise over_quota(["instances"], {"instances": min_count}, checks[0][1], checks[0][0])


def instances_room(api, ctxt, conn, min_count):
    """How many more servers the instances quota allows (None: unlimited),
    counted in ``conn``, the write transaction that records them; 403 when
    fewer than ``min_count``."""
    if not enforced(api):
        return None
    room = None
    for user_id in (None, ctxt.user_id):
        limits = project_limits(api, ctxt.project_id, user_id)
        if limits["instances"] < 0:
            continue
        used = _instances(conn, ctxt.project_id, user_id)
        left = max(0, limits["instances"] - used)
        if left < min_count:
            raise over_quota(["instances"], {"instances": min_count}, {"instances": used},
                             limits)
        room = left if room is None else min(room, left)
    return room


def recheck_servers(api, ctxt, flavor, count):
    """After recording ``count`` servers of ``flavor``: 403 if the project (or
    the user) is now over its quota, worded with what this request asked for
    and what the others use."""
    if not enforced(api) or not _conf(api).recheck_quota:
        return
    own = {"instances": count, "cores": count * flavor["vcpus"],
           "ram": count * flavor["memory_mb"]}
    for user_id in (None, ctxt.user_id):
        limits = project_limits(api, ctxt.project_id, user_id)
        used = usage(api, ctxt.project_id, user_id)
        short = [r for r in ("instances", "cores", "ram") if 0 <= limits[r] < used[r]]
        if short:
            others = {r: max(0, used[r] - own[r]) for r in short}
            raise over_quota(short, own, others, limits)


def check_resize(api, ctxt, project_id, user_id, old_flavor, new_flavor):
    """403 when growing to ``new_flavor`` takes the project past cores or RAM."""
    if not enforced(api):
        return
    delta = {"cores": new_flavor["vcpus"] - old_flavor["vcpus"],
             "ram": new_flavor["memory_mb"] - old_flavor["memory_mb"]}
    if delta["cores"] <= 0 and delta["ram"] <= 0:
        return
    for uid in (None, user_id):
        limits = project_limits(api, project_id, uid)
        cores, ram = _cores_ram(api, project_id, uid)
        used = {"cores": cores, "ram": ram}
        short = [r for r in ("cores", "ram")
                 if delta[r] > 0 and limits[r] >= 0 and used[r] + delta[r] > limits[r]]
        if short:
            raise over_quota(short, delta, used, limits)


def check_unshelve_offloaded(api, project_id, user_id, flavor):
    """Unshelving a SHELVED_OFFLOADED server takes its flavor's cores and RAM
    again. Only counted from placement is the offloaded server's use gone
    (counted from the cells, it never stopped counting), so only then is
    there anything to check, as in the reference; 403 ``Quota exceeded for
    resources: [...]`` when the project or the user would pass a limit."""
    if not enforced(api) or not from_placement(api):
        return
    delta = {"cores": int(flavor.get("vcpus") or 0), "ram": int(flavor.get("memory_mb") or 0)}
    overs = set()
    for uid in (None, user_id):
        limits = project_limits(api, project_id, uid)
        cores, ram = _cores_ram(api, project_id, uid)
        used = {"cores": cores, "ram": ram}
        overs.update(r for r in ("cores", "ram")
                     if limits[r] >= 0 and used[r] + delta[r] > limits[r])
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


def count_rows(api, model, *where):
    with api.api_db.connection() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(model).where(*where)).scalar()


def check_metadata(api, ctxt, metadata):
    if not enforced(api) or metadata is None:
        return
    limit = project_limits(api, ctxt.project_id, ctxt.user_id)["metadata_items"]
    if 0 <= limit < len(metadata):
        raise errors.Forbidden("Quota exceeded for metadata_items: Requested "
                               f"{len(metadata)}, but already used 0 of {limit} metadata_items")


def check_injected_files(api, ctxt, files):
    """Personality files of a create or rebuild (before 2.57)."""
    if not enforced(api) or not files:
        return
    limits = project_limits(api, ctxt.project_id, ctxt.user_id)
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
