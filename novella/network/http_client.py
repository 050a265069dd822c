"""The network service client over its HTTP API (Neutron's v2.0 wire format).

``NetworkHTTPClient`` has the interface of ``novella.network.api.NetworkAPI``
for what the compute hosts, the conductor and the Compute API ask of the
network service, each call made of the Neutron requests a Nova does: ports
created and updated (``binding:host_id``, ``binding:profile``), port
bindings created, activated and deleted through the extended port-bindings
API, and a server's network_info composed of its ports, their networks,
subnets and floating IPs. Built by ``novella.clients.service_clients`` from
``[neutron]``.

What the database-backed client does in one transaction is here a series
of requests: a step that fails undoes the ones before it (the ports made
for a server, the bindings made for a move), as Nova does.

The port-binding and ``binding:*`` requests are an administrator's, so they
go with the service's own credentials; reads for a user go with the user's
token. A port made for a server is created with only Neutron's own port
attributes (its ``device_id`` the server, its ``device_owner``
``compute:<zone>``): whether a port of a server is the user's (only unbound
and released when the server lets it go) or was made for it (deleted) is
not the network service's to say. The compute side decides it from the
server's records and passes it (``preserve``) to ``deallocate_for_instance``
and ``deallocate_port_for_instance`` (novella/network/ownership.py). The
network_info this client composes says ``preserve_on_delete`` of the ports
``allocate_for_instance`` was given (true) or made (false); of ports it only
reads, it cannot know, and says null.
"""
from novella.network import api as net_api
from novella.network import (auto_allocate, floating_ips, qos, routers, security_groups,
                             subnetpools, trunks)

ACTIVE, INACTIVE = net_api.ACTIVE, net_api.INACTIVE


def _error_classes():
    """{name: exception class} of the network service's modules (the service's own
    first, where a module has a class of the same name)."""
    out = {}
    for module in (net_api, floating_ips, qos, security_groups, trunks, routers, subnetpools,
                   auto_allocate):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, Exception):
                out.setdefault(name, obj)
    return out


_BY_STATUS = {404: net_api.NotFound, 409: net_api.Conflict}


def _error(resp):
    """The database client's exception for an error answer."""
    try:
        err = resp.json().get("NeutronError") or {}
    except ValueError:
        err = {}
    message = err.get("message") or resp.text or f"HTTP {resp.status_code}"
    cls = _error_classes().get(err.get("type") or "")
    if cls is None:
        cls = _BY_STATUS.get(resp.status_code, net_api.NetworkError)
        exc = cls(message)
        exc.code = resp.status_code
        return exc
    return cls(message)


class NetworkHTTPClient:
    def __init__(self, session):
        self.http = session

    # --- requests ------------------------------------------------------------------------
    def _call(self, ctxt, method, path, body=None, params=None, admin=False):
        resp = self.http.request(ctxt, method, "/v2.0" + path, admin=admin,
                                 json=body, params=params)
        if resp.status_code >= 400:
            raise _error(resp)
        return resp.json() if resp.content else None

    def _get(self, ctxt, path, key, admin=False, **params):
        return self._call(ctxt, "GET", path, params=params or None, admin=admin)[key]

    def _admin(self, ctxt, method, path, body=None, **params):
        return self._call(ctxt, method, path, body, params or None, admin=True)

    # --- networks and subnets ------------------------------------------------------------
    def create_network(self, ctxt, name, cidr=None, shared=False, project_id=None, mtu=1500,
                       physical_network=None, network_type=None, qos_policy_id=None,
                       id=None, external=False, is_default=False,  # noqa: A002
                       admin_state_up=True, description=""):
        if id is not None:
            raise net_api.InvalidInput("a network's id cannot be chosen over the HTTP API")
        body = {"name": name, "shared": shared, "mtu": mtu, "router:external": external,
                "is_default": is_default or None, "admin_state_up": admin_state_up,
                "provider:physical_network": physical_network,
                "provider:network_type": network_type, "qos_policy_id": qos_policy_id,
                "description": description or None}
        if project_id:
            body["project_id"] = project_id
        net = self._call(ctxt, "POST", "/networks", {"network": {
            k: v for k, v in body.items() if v is not None}}, admin=ctxt is None)["network"]
        if cidr:
            self.create_subnet(ctxt, net["id"], cidr, name=f"{name}-subnet")
            net = self.get_network(ctxt, net["id"])
        return net

    def ensure_default_network(self, ctxt, name="private", cidr="10.0.0.0/24"):
        for net in self.list_networks(None, name=name):
            return net
        return self.create_network(ctxt, name, cidr=cidr, shared=True)

    def update_network(self, ctxt, network_id, changes):
        return self._call(ctxt, "PUT", f"/networks/{network_id}",
                          {"network": dict(changes)})["network"]

    def available_networks(self, ctxt, project_id):
        return [n for n in self._admin(ctxt, "GET", "/networks")["networks"]
                if (n["project_id"] == project_id or n["shared"])
                and not n.get("router:external")]

    def get_network(self, ctxt, network_id):
        return self._get(ctxt, f"/networks/{network_id}", "network")

    def list_networks(self, ctxt, **filters):
        return self._get(ctxt, "/networks", "networks", **filters)

    def delete_network(self, ctxt, network_id):
        self._call(ctxt, "DELETE", f"/networks/{network_id}")

    def create_subnet(self, ctxt, network_id, cidr, name=None, gateway_ip=None,
                      allocation_pools=None, enable_dhcp=True, subnetpool_id=None,
                      prefixlen=None, use_default_subnetpool=False, ip_version=4, **attrs):
        body = {"network_id": network_id, "name": name or "",
                "ip_version": 6 if ":" in (cidr or "") else ip_version,
                "enable_dhcp": enable_dhcp, **attrs}
        for key, value in (("cidr", cidr), ("subnetpool_id", subnetpool_id),
                           ("prefixlen", prefixlen),
                           ("use_default_subnetpool", use_default_subnetpool)):
            if value:
                body[key] = value
        if gateway_ip:
            body["gateway_ip"] = gateway_ip
        if allocation_pools is not None:
            body["allocation_pools"] = allocation_pools
        return self._call(ctxt, "POST", "/subnets", {"subnet": body})["subnet"]

    def update_subnet(self, ctxt, subnet_id, changes):
        return self._call(ctxt, "PUT", f"/subnets/{subnet_id}",
                          {"subnet": dict(changes)})["subnet"]

    def get_subnet(self, ctxt, subnet_id):
        return self._get(ctxt, f"/subnets/{subnet_id}", "subnet")

    def list_subnets(self, ctxt, network_id=None):
        params = {"network_id": network_id} if network_id else {}
        return self._get(ctxt, "/subnets", "subnets", **params)

    def delete_subnet(self, ctxt, subnet_id):
        self._call(ctxt, "DELETE", f"/subnets/{subnet_id}")

    # --- ports and bindings ------------------------------------------------------------------
    def create_port(self, ctxt, body):
        return self._call(ctxt, "POST", "/ports", {"port": dict(body)})["port"]

    def get_port(self, ctxt, port_id):
        return self._get(ctxt, f"/ports/{port_id}", "port")

    def list_ports(self, ctxt, filters=None, **kw):
        return self._get(ctxt, "/ports", "ports", **dict(filters or {}, **kw))

    def update_port(self, ctxt, port_id, body):
        return self._call(ctxt, "PUT", f"/ports/{port_id}", {"port": dict(body)})["port"]

    def delete_port(self, ctxt, port_id):
        self._call(ctxt, "DELETE", f"/ports/{port_id}")

    def create_port_binding(self, ctxt, port_id, host, vnic_type=None, profile=None):
        body = {"host": host}
        if vnic_type:
            body["vnic_type"] = vnic_type
        if profile:
            body["profile"] = dict(profile)
        return self._admin(ctxt, "POST", f"/ports/{port_id}/bindings", {"binding": body})["binding"]

    def list_port_bindings(self, ctxt, port_id):
        return self._admin(ctxt, "GET", f"/ports/{port_id}/bindings")["bindings"]

    def get_port_binding(self, ctxt, port_id, host):
        return self._admin(ctxt, "GET", f"/ports/{port_id}/bindings/{host}")["binding"]

    def activate_port_binding(self, ctxt, port_id, host):
        return self._admin(ctxt, "PUT", f"/ports/{port_id}/bindings/{host}/activate")["binding"]

    def delete_port_binding(self, ctxt, port_id, host):
        self._admin(ctxt, "DELETE", f"/ports/{port_id}/bindings/{host}")

    # --- servers -------------------------------------------------------------------------
    def _instance_ports(self, ctxt, instance_uuid):
        return self._admin(ctxt, "GET", "/ports", device_id=instance_uuid)["ports"]

    def _vifs(self, ctxt, ports, given=None):
        """network_info of ``ports``, in the database client's shape. ``given``: the ids
        of those the user gave, when known (an allocation); else ``preserve_on_delete``
        is null."""
        if not ports:
            return []
        networks, subnets = {}, {}
        for net_id in dict.fromkeys(p["network_id"] for p in ports):
            networks[net_id] = self._admin(ctxt, "GET", f"/networks/{net_id}")["network"]
            subnets[net_id] = self._admin(ctxt, "GET", "/subnets", network_id=net_id)["subnets"]
        floating = {(f["port_id"], f["fixed_ip_address"]): f["floating_ip_address"]
                    for f in self._admin(ctxt, "GET", "/floatingips",
                                         port_id=[p["id"] for p in ports])["floatingips"]}
        return [self._vif(p, networks[p["network_id"]], subnets[p["network_id"]], floating,
                          None if given is None else p["id"] in given)
                for p in ports]

    @staticmethod
    def _vif(port, network, subnets, floating, preserve=None):
        out = []
        for sn in subnets:
            ips = [{"address": ip["ip_address"], "type": "fixed", "version": sn["ip_version"],
                    "floating_ips": [{"address": floating[(port["id"], ip["ip_address"])],
                                      "type": "floating", "version": 4}]
                    if (port["id"], ip["ip_address"]) in floating else []}
                   for ip in port["fixed_ips"] if ip["subnet_id"] == sn["id"]]
            if ips:
                out.append({"cidr": sn["cidr"], "version": sn["ip_version"], "ips": ips,
                            "gateway": {"address": sn["gateway_ip"]}, "dns": [], "routes": []})
        return {"id": port["id"], "address": port["mac_address"],
                "type": port["binding:vif_type"], "details": port["binding:vif_details"],
                "devname": ("tap" + port["id"])[:14], "ovs_interfaceid": port["id"],
                "vnic_type": port["binding:vnic_type"], "profile": port["binding:profile"],
                "active": port["status"] == ACTIVE,
                "preserve_on_delete": preserve,
                "network": {"id": network["id"], "label": network["name"], "bridge": "br-int",
                            "subnets": out,
                            "meta": {"tenant_id": network["project_id"], "mtu": network["mtu"],
                                     "physical_network":
                                         network.get("provider:physical_network")}}}

    def _requested(self, ctxt, project_id, requested_networks):
        if requested_networks == "none":
            return []
        if not requested_networks or requested_networks == "auto":
            nets = self.available_networks(ctxt, project_id)
            if len(nets) > 1:
                raise net_api.NetworkAmbiguous("more than one network is available; choose one")
            if not nets and requested_networks == "auto":
                return [{"network_id": self.get_auto_allocated_topology(ctxt, project_id)["id"]}]
            return [{"network_id": n["id"]} for n in nets]
        out = []
        for r in requested_networks:
            r = {"network_id": r} if isinstance(r, str) else r
            out.append({"network_id": r.get("network_id") or r.get("uuid"),
                        "port_id": r.get("port_id") or r.get("port"),
                        "address": r.get("address") or r.get("fixed_ip")})
        return out

    def _group_ids(self, ctxt, project_id, names):
        """Ids of the project's groups named (or with the ids) ``names``; None for its
        default group alone, which the network service makes if the project has none."""
        if not names or list(names) == ["default"]:
            return None
        return self._resolve_groups(ctxt, project_id, names)

    def _resolve_groups(self, ctxt, project_id, names):
        groups = self._admin(ctxt, "GET", "/security-groups",
                             project_id=project_id)["security_groups"]
        out = []
        for name in names:
            found = [g["id"] for g in groups if name in (g["id"], g["name"])]
            if not found:
                raise security_groups.SecurityGroupNotFound(
                    f"Unable to find security_group with name or id '{name}'")
            if len(found) > 1:
                raise security_groups.SecurityGroupNameNotUnique(
                    f"Multiple security_group matches found for name '{name}', use an "
                    "ID to be more specific.")
            out.append(found[0])
        return out

    def allocate_for_instance(self, ctxt, instance_uuid, project_id, requested_networks=None,
                              host=None, availability_zone="nova", port_profiles=None,
                              security_groups=None):
        """As the database client's; the ports made here are deleted again, and the
        ports given restored, if a later step fails."""
        owner = f"compute:{availability_zone or 'nova'}"
        profiles = port_profiles or {}
        made, given, ports = [], [], []
        try:
            requests = self._requested(ctxt, project_id, requested_networks)
            groups = self._group_ids(ctxt, project_id, security_groups)
            for req in requests:
                if req.get("port_id"):
                    p = self._admin(ctxt, "GET", f"/ports/{req['port_id']}")["port"]
                    if p["device_id"] and p["device_id"] != instance_uuid:
                        raise net_api.PortInUse(f"port {p['id']} is in use by {p['device_id']}")
                    body = {"device_id": instance_uuid, "device_owner": owner,
                            "binding:host_id": host or p["binding:host_id"],
                            "binding:profile": dict(p["binding:profile"],
                                                    **profiles.get(p["id"], {}))}
                    given.append(p)
                    ports.append(self._admin(ctxt, "PUT", f"/ports/{p['id']}",
                                             {"port": body})["port"])
                    continue
                body = {"network_id": req["network_id"], "project_id": project_id,
                        "device_id": instance_uuid, "device_owner": owner,
                        "binding:host_id": host or ""}
                if groups is not None:
                    body["security_groups"] = groups
                if req.get("address"):
                    body["fixed_ips"] = [{"ip_address": req["address"]}]
                p = self._admin(ctxt, "POST", "/ports", {"port": body})["port"]
                made.append(p["id"])
                if profiles.get(p["id"]):
                    p = self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                        "binding:profile": dict(profiles[p["id"]])}})["port"]
                ports.append(p)
            return self._vifs(ctxt, ports, given={p["id"] for p in given})
        except Exception:
            for port_id in made:
                self._quietly(self._admin, ctxt, "DELETE", f"/ports/{port_id}")
            for p in given:
                self._quietly(self._admin, ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                    k: p[k] for k in ("device_id", "device_owner", "binding:host_id",
                                      "binding:profile")}})
            raise

    @staticmethod
    def _quietly(fn, *args):
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - undoing what can be undone
            pass

    def get_instance_nw_info(self, ctxt, instance_uuid):
        return self._vifs(ctxt, self._instance_ports(ctxt, instance_uuid))

    def deallocate_for_instance(self, ctxt, instance_uuid, preserve):
        """As the database client's: the server's ports in ``preserve`` (the user's)
        are unbound and released, the others deleted. A port deleted meanwhile (by
        another delete of the server) is skipped."""
        for p in self._instance_ports(ctxt, instance_uuid):
            try:
                if p["id"] not in preserve:
                    self._admin(ctxt, "DELETE", f"/ports/{p['id']}")
                    continue
                self._unbind(ctxt, p)
                self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                    "device_id": "", "device_owner": ""}})
            except net_api.PortNotFound:
                pass

    def deallocate_port_for_instance(self, ctxt, instance_uuid, port_id, preserve):
        """As the database client's."""
        try:
            p = self._admin(ctxt, "GET", f"/ports/{port_id}")["port"]
            if p["device_id"] != instance_uuid:
                return
            if not preserve:
                self._admin(ctxt, "DELETE", f"/ports/{port_id}")
                return
            self._unbind(ctxt, p)
            self._admin(ctxt, "PUT", f"/ports/{port_id}", {"port": {
                "device_id": "", "device_owner": ""}})
        except net_api.PortNotFound:
            pass

    def _unbind(self, ctxt, p):
        """Every binding of the port goes; it is left unbound."""
        active = p["binding:host_id"]
        for b in self._admin(ctxt, "GET", f"/ports/{p['id']}/bindings")["bindings"]:
            if b["host"] != active:
                self._admin(ctxt, "DELETE", f"/ports/{p['id']}/bindings/{b['host']}")
        if active or p["binding:profile"]:
            self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                "binding:host_id": "", "binding:profile": {}}})

    def unbind_ports(self, ctxt, instance_uuid):
        for p in self._instance_ports(ctxt, instance_uuid):
            self._unbind(ctxt, p)
        return self.get_instance_nw_info(ctxt, instance_uuid)

    def bind_ports_to_host(self, ctxt, instance_uuid, host, vnic_types=None, port_profiles=None):
        """INACTIVE bindings on ``host`` for every port of a server; those made are
        deleted again if one cannot be."""
        made, out = [], {}
        try:
            for p in self._instance_ports(ctxt, instance_uuid):
                was_unbound = not p["binding:host_id"]
                out[p["id"]] = self.create_port_binding(
                    ctxt, p["id"], host, (vnic_types or {}).get(p["id"]),
                    (port_profiles or {}).get(p["id"]))
                made.append((p, was_unbound))
        except Exception:
            for p, was_unbound in made:
                if was_unbound:  # the binding made was the port's one: unbound again
                    self._quietly(self._unbind, ctxt, dict(p, **{"binding:host_id": host}))
                else:
                    self._quietly(self.delete_port_binding, ctxt, p["id"], host)
            raise
        return out

    def activate_port_bindings(self, ctxt, instance_uuid, host):
        for p in self._instance_ports(ctxt, instance_uuid):
            if p["binding:host_id"] != host:
                self.activate_port_binding(ctxt, p["id"], host)
        return self.get_instance_nw_info(ctxt, instance_uuid)

    def delete_port_bindings(self, ctxt, instance_uuid, host):
        if not host:
            return
        for p in self._instance_ports(ctxt, instance_uuid):
            try:
                self.delete_port_binding(ctxt, p["id"], host)
            except (net_api.PortBindingNotFound, net_api.PortNotFound):
                pass

    def migrate_instance_finish(self, ctxt, instance_uuid, host, port_profiles=None):
        for p in self._instance_ports(ctxt, instance_uuid):
            if p["binding:host_id"] != host:
                try:
                    if self.get_port_binding(ctxt, p["id"], host)["status"] == INACTIVE:
                        self.activate_port_binding(ctxt, p["id"], host)
                        p = self.get_port(ctxt, p["id"])
                except net_api.PortBindingNotFound:
                    pass
            profile = dict(p["binding:profile"], **(port_profiles or {}).get(p["id"], {}))
            profile.pop("migrating_to", None)  # the move is over
            self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                "binding:host_id": host, "binding:profile": profile}})
        return self.get_instance_nw_info(ctxt, instance_uuid)

    def setup_networks_on_host(self, ctxt, instance_uuid, host=None, teardown=False):
        for p in self._instance_ports(ctxt, instance_uuid):
            profile = dict(p["binding:profile"])
            if teardown:
                profile.pop("migrating_to", None)
                if host and host != p["binding:host_id"]:
                    try:
                        if self.get_port_binding(ctxt, p["id"], host)["status"] == INACTIVE:
                            self.delete_port_binding(ctxt, p["id"], host)
                    except net_api.PortBindingNotFound:
                        pass
            elif host and host != p["binding:host_id"]:
                profile["migrating_to"] = host
            if profile != p["binding:profile"]:
                self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                    "binding:profile": profile}})

    def _ports(self, ctxt, instance_uuid, port_ids):
        ports = [self._admin(ctxt, "GET", f"/ports/{pid}")["port"] for pid in port_ids]
        if instance_uuid:
            ports += self._instance_ports(ctxt, instance_uuid)
        return ports

    def sriov_ports(self, ctxt, instance_uuid=None, port_ids=()):
        out, physnets = [], {}
        for p in self._ports(ctxt, instance_uuid, port_ids):
            if p["binding:vnic_type"] in net_api.SRIOV_VNIC_TYPES:
                if p["network_id"] not in physnets:
                    physnets[p["network_id"]] = self._admin(
                        ctxt, "GET", f"/networks/{p['network_id']}")["network"].get(
                        "provider:physical_network")
                out.append({"port_id": p["id"], "vnic_type": p["binding:vnic_type"],
                            "physical_network": physnets[p["network_id"]]})
        return out

    def get_requested_resource_groups(self, ctxt, instance_uuid=None, port_ids=()):
        groups = []
        for p in self._ports(ctxt, instance_uuid, port_ids):
            rr = p.get("resource_request") or {}
            for g in rr.get("request_groups", []):
                groups.append({"suffix": g["id"], "requester_id": p["id"],
                               "resources": dict(g["resources"]),
                               "required_traits": list(g["required"]),
                               "forbidden_traits": [], "member_of": [], "in_tree": None,
                               "same_subtree": list(rr.get("same_subtree", []))})
        return groups

    # --- security groups and floating IPs -----------------------------------------------
    def list_security_groups(self, ctxt, project_id=None):
        params = {"project_id": project_id} if project_id else {}
        return self._get(ctxt, "/security-groups", "security_groups", **params)

    def get_security_group(self, ctxt, group_id):
        return self._get(ctxt, f"/security-groups/{group_id}", "security_group")

    def find_security_group(self, ctxt, name_or_id, project_id=None):
        project_id = project_id or getattr(ctxt, "project_id", None)
        gid = self._resolve_groups(ctxt, project_id, [name_or_id])[0]
        return self._admin(ctxt, "GET", f"/security-groups/{gid}")["security_group"]

    def get_instance_security_groups(self, ctxt, instance_uuid):
        ids = {}
        for p in self._instance_ports(ctxt, instance_uuid):
            ids.update(dict.fromkeys(p.get("security_groups") or []))
        return [self._admin(ctxt, "GET", f"/security-groups/{gid}")["security_group"]
                for gid in ids]

    def instances_security_group_names(self, ctxt, instance_uuids):
        if not instance_uuids:
            return {}
        ports = self._admin(ctxt, "GET", "/ports", device_id=list(instance_uuids))["ports"]
        ids = {gid for p in ports for gid in p.get("security_groups") or []}
        names = {g["id"]: g["name"] for g in self._admin(
            ctxt, "GET", "/security-groups", id=sorted(ids))["security_groups"]} if ids else {}
        out = {}
        for p in ports:
            seen = out.setdefault(p["device_id"], [])
            for name in sorted(names[g] for g in p.get("security_groups") or [] if g in names):
                if name not in seen:
                    seen.append(name)
        return out

    def add_security_group_to_instance(self, ctxt, instance_uuid, project_id, name_or_id):
        gid = self._resolve_groups(ctxt, project_id, [name_or_id])[0]
        ports = self._instance_ports(ctxt, instance_uuid)
        if not ports:
            raise security_groups.SecurityGroupNotFound(
                f"instance_id {instance_uuid} could not be found as device id on any ports")
        for p in ports:
            if gid not in p["security_groups"]:
                self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                    "security_groups": p["security_groups"] + [gid]}})

    def remove_security_group_from_instance(self, ctxt, instance_uuid, project_id, name_or_id):
        gid = self._resolve_groups(ctxt, project_id, [name_or_id])[0]
        found = False
        for p in self._instance_ports(ctxt, instance_uuid):
            if gid in p["security_groups"]:
                found = True
                self._admin(ctxt, "PUT", f"/ports/{p['id']}", {"port": {
                    "security_groups": [g for g in p["security_groups"] if g != gid]}})
        if not found:
            raise security_groups.SecurityGroupNotFound(
                f"Security group {name_or_id} not in use by instance {instance_uuid}.")

    def create_security_group(self, ctxt, name, description="", project_id=None):
        body = {"name": name, "description": description}
        if project_id:
            body["project_id"] = project_id
        return self._call(ctxt, "POST", "/security-groups",
                          {"security_group": body})["security_group"]

    def update_security_group(self, ctxt, group_id, name=None, description=None):
        body = {k: v for k, v in (("name", name), ("description", description)) if v is not None}
        return self._call(ctxt, "PUT", f"/security-groups/{group_id}",
                          {"security_group": body})["security_group"]

    def delete_security_group(self, ctxt, group_id):
        self._call(ctxt, "DELETE", f"/security-groups/{group_id}")

    def create_security_group_rule(self, ctxt, body):
        return self._call(ctxt, "POST", "/security-group-rules",
                          {"security_group_rule": dict(body)})["security_group_rule"]

    def get_security_group_rule(self, ctxt, rule_id):
        return self._get(ctxt, f"/security-group-rules/{rule_id}", "security_group_rule")

    def list_security_group_rules(self, ctxt):
        return self._get(ctxt, "/security-group-rules", "security_group_rules")

    def delete_security_group_rule(self, ctxt, rule_id):
        self._call(ctxt, "DELETE", f"/security-group-rules/{rule_id}")

    def create_floatingip(self, ctxt, floating_network_id, port_id=None, fixed_ip_address=None,
                          project_id=None, description=""):
        body = {"floating_network_id": floating_network_id, "port_id": port_id,
                "fixed_ip_address": fixed_ip_address, "project_id": project_id,
                "description": description}
        return self._call(ctxt, "POST", "/floatingips", {"floatingip": {
            k: v for k, v in body.items() if v is not None}})["floatingip"]

    def get_floatingip(self, ctxt, fip_id):
        return self._get(ctxt, f"/floatingips/{fip_id}", "floatingip")

    def list_floatingips(self, ctxt, **filters):
        return self._get(ctxt, "/floatingips", "floatingips", **filters)

    def update_floatingip(self, ctxt, fip_id, port_id, fixed_ip_address=None,
                          description=None):
        body = {"port_id": port_id}
        if fixed_ip_address:
            body["fixed_ip_address"] = fixed_ip_address
        if description is not None:
            body["description"] = description
        return self._call(ctxt, "PUT", f"/floatingips/{fip_id}",
                          {"floatingip": body})["floatingip"]

    def delete_floatingip(self, ctxt, fip_id):
        self._call(ctxt, "DELETE", f"/floatingips/{fip_id}")

    def instances_floating_ips(self, ctxt, instance_uuids):
        if not instance_uuids:
            return {}
        ports = {p["id"]: p["device_id"] for p in self._admin(
            ctxt, "GET", "/ports", device_id=list(instance_uuids))["ports"]}
        out = {}
        if not ports:
            return out
        for f in self._admin(ctxt, "GET", "/floatingips", port_id=list(ports))["floatingips"]:
            out.setdefault(ports[f["port_id"]], {}).setdefault(
                (f["port_id"], f["fixed_ip_address"]), []).append(f["floating_ip_address"])
        return out

    # --- QoS policies and rules -----------------------------------------------------------
    def list_qos_policies(self, ctxt):
        return self._get(ctxt, "/qos/policies", "policies")

    def get_qos_policy(self, ctxt, policy_id):
        return self._get(ctxt, f"/qos/policies/{policy_id}", "policy")

    def create_qos_policy(self, ctxt, name, rules=(), id=None, description="",  # noqa: A002
                          shared=False, is_default=False, project_id=None):
        """A policy, then each of ``rules`` (``{"type", ...}``); the policy goes again
        if a rule is refused."""
        if id is not None:
            raise net_api.InvalidInput("a QoS policy's id cannot be chosen over the HTTP API")
        body = {"name": name, "description": description, "shared": shared,
                "is_default": is_default}
        if project_id:
            body["project_id"] = project_id
        policy = self._call(ctxt, "POST", "/qos/policies", {"policy": body})["policy"]
        try:
            for rule in rules:
                rule = dict(rule)
                self.create_qos_rule(ctxt, policy["id"], rule.pop("type"), rule)
        except Exception:
            self._quietly(self.delete_qos_policy, ctxt, policy["id"])
            raise
        return self.get_qos_policy(ctxt, policy["id"])

    def update_qos_policy(self, ctxt, policy_id, fields):
        return self._call(ctxt, "PUT", f"/qos/policies/{policy_id}",
                          {"policy": dict(fields)})["policy"]

    def delete_qos_policy(self, ctxt, policy_id):
        self._call(ctxt, "DELETE", f"/qos/policies/{policy_id}")

    @staticmethod
    def _rule(rule_type, rule):
        return dict(rule, type=rule_type)

    def create_qos_rule(self, ctxt, policy_id, rule_type, body):
        made = self._call(ctxt, "POST", f"/qos/policies/{policy_id}/{rule_type}_rules",
                          {f"{rule_type}_rule": dict(body)})[f"{rule_type}_rule"]
        return self._rule(rule_type, made)

    def get_qos_rule(self, ctxt, policy_id, rule_type, rule_id):
        return self._rule(rule_type, self._get(
            ctxt, f"/qos/policies/{policy_id}/{rule_type}_rules/{rule_id}", f"{rule_type}_rule"))

    def list_qos_rules(self, ctxt, policy_id, rule_type):
        return [self._rule(rule_type, r) for r in self._get(
            ctxt, f"/qos/policies/{policy_id}/{rule_type}_rules", f"{rule_type}_rules")]

    def update_qos_rule(self, ctxt, policy_id, rule_type, rule_id, body):
        return self._rule(rule_type, self._call(
            ctxt, "PUT", f"/qos/policies/{policy_id}/{rule_type}_rules/{rule_id}",
            {f"{rule_type}_rule": dict(body)})[f"{rule_type}_rule"])

    def delete_qos_rule(self, ctxt, policy_id, rule_type, rule_id):
        self._call(ctxt, "DELETE", f"/qos/policies/{policy_id}/{rule_type}_rules/{rule_id}")

    def find_qos_rule(self, ctxt, rule_type, rule_id):
        """The id of the policy the rule is in (the rules-alias API)."""
        kind = f"{rule_type}_rules".replace("_", "-")
        return self._get(ctxt, f"/qos/alias-{kind}/{rule_id}",
                         f"{rule_type}_rule")["qos_policy_id"]

    # --- trunks ----------------------------------------------------------------------------
    def list_trunks(self, ctxt):
        return self._get(ctxt, "/trunks", "trunks")

    def get_trunk(self, ctxt, trunk_id):
        return self._get(ctxt, f"/trunks/{trunk_id}", "trunk")

    def create_trunk(self, ctxt, port_id, sub_ports=(), name="", description="",
                     project_id=None):
        body = {"port_id": port_id, "sub_ports": list(sub_ports), "name": name,
                "description": description}
        if project_id:
            body["project_id"] = project_id
        return self._call(ctxt, "POST", "/trunks", {"trunk": body})["trunk"]

    def update_trunk(self, ctxt, trunk_id, changes):
        return self._call(ctxt, "PUT", f"/trunks/{trunk_id}", {"trunk": dict(changes)})["trunk"]

    def delete_trunk(self, ctxt, trunk_id):
        self._call(ctxt, "DELETE", f"/trunks/{trunk_id}")

    def add_subports(self, ctxt, trunk_id, sub_ports):
        return self._call(ctxt, "PUT", f"/trunks/{trunk_id}/add_subports",
                          {"sub_ports": list(sub_ports)})

    def remove_subports(self, ctxt, trunk_id, sub_ports):
        return self._call(ctxt, "PUT", f"/trunks/{trunk_id}/remove_subports",
                          {"sub_ports": list(sub_ports)})

    # --- routers, subnet pools, auto-allocated topologies ----------------------------------
    def create_router(self, ctxt, name="", project_id=None, admin_state_up=True,
                      external_gateway_info=None, description=""):
        body = {"name": name, "admin_state_up": admin_state_up, "description": description}
        if project_id:
            body["project_id"] = project_id
        if external_gateway_info:
            body["external_gateway_info"] = dict(external_gateway_info)
        return self._call(ctxt, "POST", "/routers", {"router": body})["router"]

    def get_router(self, ctxt, router_id):
        return self._get(ctxt, f"/routers/{router_id}", "router")

    def list_routers(self, ctxt, **filters):
        return self._get(ctxt, "/routers", "routers", **filters)

    def update_router(self, ctxt, router_id, changes):
        return self._call(ctxt, "PUT", f"/routers/{router_id}", {"router": dict(changes)})["router"]

    def delete_router(self, ctxt, router_id):
        self._call(ctxt, "DELETE", f"/routers/{router_id}")

    def add_router_interface(self, ctxt, router_id, subnet_id=None, port_id=None):
        body = {"subnet_id": subnet_id} if subnet_id else {"port_id": port_id}
        return self._call(ctxt, "PUT", f"/routers/{router_id}/add_router_interface", body)

    def remove_router_interface(self, ctxt, router_id, subnet_id=None, port_id=None):
        body = {k: v for k, v in (("subnet_id", subnet_id), ("port_id", port_id)) if v}
        return self._call(ctxt, "PUT", f"/routers/{router_id}/remove_router_interface", body)

    def create_subnetpool(self, ctxt, name, prefixes, default_prefixlen=None,
                          min_prefixlen=None, max_prefixlen=None, is_default=False,
                          shared=False, project_id=None, description=""):
        body = {"name": name, "prefixes": list(prefixes), "default_prefixlen": default_prefixlen,
                "min_prefixlen": min_prefixlen, "max_prefixlen": max_prefixlen,
                "is_default": is_default, "shared": shared, "project_id": project_id,
                "description": description}
        return self._call(ctxt, "POST", "/subnetpools", {"subnetpool": {
            k: v for k, v in body.items() if v is not None}}, admin=ctxt is None)["subnetpool"]

    def get_subnetpool(self, ctxt, pool_id):
        return self._get(ctxt, f"/subnetpools/{pool_id}", "subnetpool")

    def list_subnetpools(self, ctxt):
        return self._get(ctxt, "/subnetpools", "subnetpools")

    def delete_subnetpool(self, ctxt, pool_id):
        self._call(ctxt, "DELETE", f"/subnetpools/{pool_id}")

    def get_auto_allocated_topology(self, ctxt, project_id, dry_run=False):
        """As the database client's: one request, the topology made in one transaction
        by the network service. With the service's credentials (``project_id`` named)."""
        params = {"fields": "dry-run"} if dry_run else {}
        return self._admin(ctxt, "GET", f"/auto-allocated-topology/{project_id}",
                           **params)["auto_allocated_topology"]

    def delete_auto_allocated_topology(self, ctxt, project_id):
        self._admin(ctxt, "DELETE", f"/auto-allocated-topology/{project_id}")
