"""/limits: absolute limits of the caller's project: the maximums of its
quotas (novella/api/compute/quotas.py) and what it uses, counted from the
cells and the API database.
"""
import sqlalchemy as sa

from novella.api.compute import quotas
from novella.db import api_models as am, cell_models as cm, cells as cells_mod


def _usage(api, project_id):
    def count(cell, db):
        with db.session() as s:
            return s.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(cm.Instance.vcpus), 0),
                                       sa.func.coalesce(sa.func.sum(cm.Instance.memory_mb), 0))
                             .where(cm.Instance.project_id == project_id, cm.Instance.deleted == 0,
                                    cm.Instance.hidden.is_(False))).one()
    totals = [0, 0, 0]
    for result in cells_mod.scatter(cells_mod.list_cells(api.api_db), count).values():
        if not isinstance(result, Exception):
            totals = [a + b for a, b in zip(totals, result)]
    with api.api_db.session() as s:
        building = s.scalar(sa.select(sa.func.count()).select_from(am.BuildRequest)
                            .where(am.BuildRequest.project_id == project_id))
        groups = s.scalar(sa.select(sa.func.count()).select_from(am.InstanceGroup)
                          .where(am.InstanceGroup.project_id == project_id))
    return totals[0] + building, totals[1], totals[2], groups


def index(req):
    req.authorize("os_compute_api:limits", {})
    project_id = req.context.project_id
    if "tenant_id" in req.GET:
        project_id = req.GET["tenant_id"]
        req.authorize("os_compute_api:limits:other_project")
    instances, cores, ram, groups = _usage(req.api, project_id)
    user_id = req.context.user_id if project_id == req.context.project_id else None
    limits = quotas.project_limits(req.api, project_id, user_id)
    absolute = {name: limits[resource] for resource, name in quotas.LIMIT_NAMES.items()}
    absolute.update({"totalInstancesUsed": instances, "totalCoresUsed": cores,
                     "totalRAMUsed": ram, "totalServerGroupsUsed": groups})
    if not req.at_least("2.36"):
        absolute.update({"maxTotalFloatingIps": -1, "maxSecurityGroups": -1,
                         "maxSecurityGroupRules": -1, "totalFloatingIpsUsed": 0,
                         "totalSecurityGroupsUsed": 0})
    if not req.at_least("2.57"):
        absolute.update({"maxImageMeta": limits["metadata_items"]})
    else:
        absolute.pop("maxPersonality")
        absolute.pop("maxPersonalitySize")
    return 200, {"limits": {"rate": [], "absolute": absolute}}


ROUTES = [("GET", "/limits", index)]
