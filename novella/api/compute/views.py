"""How a server record is shown, per microversion."""
import hashlib

from novella.api.compute.common import iso
from novella.compute import states


def host_id(rec):
    if not rec.get("host"):
        return ""
    return hashlib.sha224((rec["project_id"] + rec["host"]).encode()).hexdigest()


def status(rec):
    if rec.get("deleted"):
        return "DELETED" if rec.get("vm_state") != states.SOFT_DELETED else "SOFT_DELETED"
    return states.server_status(rec.get("vm_state"), rec.get("task_state"))


def addresses(rec, extended=True):
    """{network label: [addresses]} from the VIFs in the info cache; without
    ``extended`` (an update's answer before 2.75) no type and MAC address."""
    out = _addresses(rec)
    if not extended:
        out = {label: [{"version": ip["version"], "addr": ip["addr"]} for ip in ips]
               for label, ips in out.items()}
    return out


def _addresses(rec):
    out = {}
    for vif in rec.get("network_info") or []:
        net = vif.get("network") or {}
        label = net.get("label") or net.get("name") or net.get("id") or "network"
        ips = out.setdefault(label, [])
        for subnet in net.get("subnets") or []:
            for ip in subnet.get("ips") or []:
                entry = {"version": ip.get("version") or (6 if ":" in ip.get("address", "") else 4),
                         "addr": ip.get("address")}
                ips.append({**entry, "OS-EXT-IPS:type": ip.get("type", "fixed"),
                            "OS-EXT-IPS-MAC:mac_addr": vif.get("address")})
                for fip in ip.get("floating_ips") or []:
                    ips.append({"version": entry["version"], "addr": fip.get("address"),
                                "OS-EXT-IPS:type": "floating",
                                "OS-EXT-IPS-MAC:mac_addr": vif.get("address")})
        for ip in vif.get("fixed_ips") or []:  # flat port-style VIFs
            addr = ip.get("ip_address") or ip.get("address")
            ips.append({"version": 6 if ":" in addr else 4, "addr": addr,
                        "OS-EXT-IPS:type": "fixed",
                        "OS-EXT-IPS-MAC:mac_addr": vif.get("address") or vif.get("mac_address")})
    return out


def flavor(req, rec):
    fl = rec.get("flavor") or {}
    if not req.at_least("2.47"):
        fid = fl.get("flavorid")
        return {"id": fid, "links": [{"rel": "bookmark",
                                      "href": req.links("flavors", fid)[1]["href"]}]}
    out = {"vcpus": fl.get("vcpus"), "ram": fl.get("memory_mb"), "disk": fl.get("root_gb"),
           "ephemeral": fl.get("ephemeral_gb", 0), "swap": fl.get("swap", 0),
           "original_name": fl.get("name")}
    if req.can("os_compute_api:servers:show:flavor-extra-specs"):
        out["extra_specs"] = dict(fl.get("extra_specs") or {})
    return out


def image(req, rec):
    if not rec.get("image_ref"):
        return ""
    return {"id": rec["image_ref"],
            "links": [{"rel": "bookmark", "href": req.links("images", rec["image_ref"])[1]["href"]}]}


def host_status(req, host):
    """UP, DOWN, MAINTENANCE (disabled) or UNKNOWN, from the host's compute service."""
    if not host:
        return ""
    cache = req.environ.get("novella.compute_services")
    if cache is None:
        from novella.api.compute import hosts
        cache = {svc.host: svc for _c, svc in hosts.services(req.api)
                 if svc.binary == hosts.COMPUTE}
        req.environ["novella.compute_services"] = cache
    svc = cache.get(host)
    if svc is None:
        return "UNKNOWN"
    from novella.api.compute import hosts
    if not hosts.is_up(req.api.conf, svc):
        return "DOWN"
    return "MAINTENANCE" if svc.disabled else "UP"


def add_pinned_zones(api, recs):
    """2.96: the zone each server asked for at create (its request spec's)."""
    import json
    import sqlalchemy as sa
    from novella.db import api_models as am
    by_uuid = {r["uuid"]: r for r in recs}
    if not by_uuid:
        return
    with api.api_db.session() as s:
        rows = s.execute(sa.select(am.RequestSpec.instance_uuid, am.RequestSpec.spec)
                         .where(am.RequestSpec.instance_uuid.in_(list(by_uuid))))
        for uuid, spec in rows:
            by_uuid[uuid]["pinned_availability_zone"] = json.loads(spec).get("availability_zone")


def basic(req, rec):
    return {"id": rec["uuid"], "name": rec.get("display_name"),
            "links": req.links("servers", rec["uuid"])}


def detail(req, rec, show=False, update=False):
    """The detailed view; ``update``: as an update answers, which before 2.75
    leaves out the zone, config drive, key name, usage times, security groups,
    extended attributes and status, attached volumes and host status."""
    st = status(rec)
    everything = not update or req.at_least("2.75")
    out = basic(req, rec)
    out.update({
        "status": st, "tenant_id": rec["project_id"], "user_id": rec["user_id"],
        "metadata": dict(rec.get("metadata") or {}), "hostId": host_id(rec),
        "image": image(req, rec), "flavor": flavor(req, rec),
        "created": iso(rec.get("created_at")),
        "updated": iso(rec.get("updated_at") or rec.get("created_at")),
        "addresses": addresses(rec, extended=everything),
        "accessIPv4": rec.get("access_ip_v4") or "", "accessIPv6": rec.get("access_ip_v6") or "",
        "OS-DCF:diskConfig": "MANUAL",
    })
    if everything:
        out.update({
            "OS-EXT-AZ:availability_zone": rec.get("availability_zone") or "",
            "config_drive": rec.get("config_drive") or "",
            "key_name": rec.get("key_name"),
            "OS-SRV-USG:launched_at": _usec(rec.get("launched_at")),
            "OS-SRV-USG:terminated_at": _usec(rec.get("terminated_at")),
            "OS-EXT-STS:task_state": rec.get("task_state"),
            "OS-EXT-STS:vm_state": rec.get("vm_state"),
            "OS-EXT-STS:power_state": rec.get("power_state") or 0,
            "os-extended-volumes:volumes_attached": [
                {"id": v["id"], **({"delete_on_termination": v["delete_on_termination"]}
                                  if req.at_least("2.3") else {})}
                for v in rec.get("volumes") or []],
        })
    if st in ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING"):
        out["progress"] = rec.get("progress") or 0
    if everything and (rec.get("cell") is not None or st != "BUILD"):
        out["security_groups"] = [{"name": "default"}]
    if everything and req.can("os_compute_api:os-extended-server-attributes",
                              {"project_id": rec["project_id"], "user_id": rec["user_id"]}):
        out["OS-EXT-SRV-ATTR:host"] = rec.get("host")
        out["OS-EXT-SRV-ATTR:hypervisor_hostname"] = rec.get("node")
        out["OS-EXT-SRV-ATTR:instance_name"] = "instance-%08x" % (rec.get("id") or 0)
        if req.at_least("2.3"):
            out.update({"OS-EXT-SRV-ATTR:reservation_id": rec.get("reservation_id"),
                        "OS-EXT-SRV-ATTR:launch_index": rec.get("launch_index"),
                        "OS-EXT-SRV-ATTR:hostname": rec.get("hostname"),
                        "OS-EXT-SRV-ATTR:kernel_id": "", "OS-EXT-SRV-ATTR:ramdisk_id": "",
                        "OS-EXT-SRV-ATTR:root_device_name": None,
                        "OS-EXT-SRV-ATTR:user_data": rec.get("user_data")})
    if req.at_least("2.9"):
        out["locked"] = bool(rec.get("locked"))
    if everything and req.at_least("2.16") and req.can("os_compute_api:servers:show:host_status"):
        out["host_status"] = host_status(req, rec.get("host"))
    if req.at_least("2.19"):
        out["description"] = rec.get("display_description")
    if req.at_least("2.26"):
        out["tags"] = list(rec.get("tags") or [])
    if req.at_least("2.63"):
        out["trusted_image_certificates"] = None
    if req.at_least("2.73"):
        out["locked_reason"] = None
    if req.at_least("2.90"):
        out["OS-EXT-SRV-ATTR:hostname"] = rec.get("hostname")
    if everything and req.at_least("2.96"):
        out["pinned_availability_zone"] = rec.get("pinned_availability_zone")
    if show and req.at_least("2.71"):
        out["server_groups"] = rec.get("server_groups", [])
    fault = rec.get("fault")
    if fault and st in ("ERROR", "DELETED"):
        f = {"code": fault["code"], "message": fault["message"], "created": iso(fault["created"])}
        if fault["code"] != 500 or req.is_admin():
            if fault.get("details"):
                f["details"] = fault["details"]
        out["fault"] = f
    return out


def _usec(ts):
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f") if ts is not None else None
