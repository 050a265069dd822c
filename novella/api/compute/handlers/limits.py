"""/limits: absolute limits of the caller's project.

Novella enforces no quotas, so every maximum is -1 (unlimited, as the
reference shows an unlimited quota); the used figures are counted from the
cells and the API database.
"""
import sqlalchemy as sa

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
    project_id = req.GET.get("tenant_id") if req.is_admin() and req.GET.get("tenant_id") \
        else req.context.project_id
    instances, cores, ram, groups = _usage(req.api, project_id)
    absolute = {"maxTotalInstances": -1, "maxTotalCores": -1, "maxTotalRAMSize": -1,
                "maxServerMeta": -1, "maxTotalKeypairs": -1, "maxServerGroups": -1,
                "maxServerGroupMembers": -1, "totalInstancesUsed": instances,
                "totalCoresUsed": cores, "totalRAMUsed": ram, "totalServerGroupsUsed": groups}
    if not req.at_least("2.36"):
        absolute.update({"maxTotalFloatingIps": -1, "maxSecurityGroups": -1,
                         "maxSecurityGroupRules": -1, "totalFloatingIpsUsed": 0,
                         "totalSecurityGroupsUsed": 0})
    if not req.at_least("2.57"):
        absolute.update({"maxImageMeta": -1, "maxPersonality": -1, "maxPersonalitySize": -1})
    return 200, {"limits": {"rate": [], "absolute": absolute}}


ROUTES = [("GET", "/limits", index)]
