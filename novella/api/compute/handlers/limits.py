"""/limits: absolute limits of the caller's project: the maximums of its
quotas (novella/api/compute/quotas.py) and what it uses, counted as the
quotas count it.
"""
from novella.api.compute import quotas


def _usage(api, project_id):
    """(instances, cores, RAM, server groups) of the project, counted as its
    quotas count them (from the cells, or from placement: ``[quota]
    count_usage_from_placement``)."""
    used = quotas.usage(api, project_id)
    return used["instances"], used["cores"], used["ram"], used["server_groups"]


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
        absolute.update({"maxTotalFloatingIps": limits["floating_ips"],
                         "maxSecurityGroups": limits["security_groups"],
                         "maxSecurityGroupRules": limits["security_group_rules"],
                         "totalFloatingIpsUsed": 0,
                         "totalSecurityGroupsUsed": 0})
    if not req.at_least("2.39"):  # the image metadata proxy went at 2.39
        absolute.update({"maxImageMeta": limits["metadata_items"]})
    if req.at_least("2.57"):
        absolute.pop("maxPersonality")
        absolute.pop("maxPersonalitySize")
    return 200, {"limits": {"rate": [], "absolute": absolute}}


ROUTES = [("GET", "/limits", index)]
