"""Security groups of the embedded network service, as Neutron keeps them.

Every project has a group named ``default`` (made the first time the project's
groups are looked at or one of its ports is made): egress open for IPv4 and
IPv6, ingress from the members of the group itself. It cannot be deleted, and
no other group may take its name. A port without groups named gets its
project's default group. A group some port uses cannot be deleted. The
service stores rules and shows them; no traffic is filtered.

A rule: ``direction`` (ingress|egress), ``ethertype`` (IPv4|IPv6), ``protocol``
(a name, a number 0-255 or None: any), ``port_range_min``/``max`` (ports for
TCP, UDP, SCTP and UDP-Lite; ICMP type and code), at most one of
``remote_ip_prefix`` and ``remote_group_id``. An identical rule is refused.
"""
import ipaddress
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

DEFAULT = "default"
PROTOCOLS = {"ah": 51, "dccp": 33, "egp": 8, "esp": 50, "gre": 47, "icmp": 1, "icmpv6": 58,
             "igmp": 2, "ipip": 4, "ipv6-encap": 41, "ipv6-frag": 44, "ipv6-icmp": 58,
             "ipv6-nonxt": 59, "ipv6-opts": 60, "ipv6-route": 43, "ospf": 89, "pgm": 113,
             "rsvp": 46, "sctp": 132, "tcp": 6, "udp": 17, "udplite": 136, "vrrp": 112}
_PORTED = {"tcp", "udp", "sctp", "udplite", "dccp", "6", "17", "132", "136", "33"}
_ICMP = {"icmp", "icmpv6", "ipv6-icmp", "1", "58"}
RULE_FIELDS = {"security_group_id", "direction", "ethertype", "protocol", "port_range_min",
               "port_range_max", "remote_ip_prefix", "remote_group_id", "description",
               "project_id", "tenant_id"}


class SecurityGroupError(Exception):
    code = 400


class SecurityGroupNotFound(SecurityGroupError):
    code = 404


class SecurityGroupRuleNotFound(SecurityGroupError):
    code = 404


class SecurityGroupInUse(SecurityGroupError):
    code = 409


class SecurityGroupCannotRemoveDefault(SecurityGroupError):
    code = 409


class SecurityGroupDefaultAlreadyExists(SecurityGroupError):
    code = 409


class SecurityGroupRuleExists(SecurityGroupError):
    code = 409


class SecurityGroupNameNotUnique(SecurityGroupError):
    code = 409


class InvalidInput(SecurityGroupError):
    pass


def _not_found(group_id):
    return SecurityGroupNotFound(f"Security group {group_id} does not exist")


def _int_or_none(name, value):
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"Invalid input for {name}. Reason: '{value}' is not an integer.")


class SecurityGroupMixin:
    """Mixed into ``NetworkAPI`` (``self.db``)."""

    # --- views ----------------------------------------------------------------------
    @staticmethod
    def _sg_rule_dict(r):
        return {"id": r.id, "security_group_id": r.security_group_id,
                "direction": r.direction, "ethertype": r.ethertype, "protocol": r.protocol,
                "port_range_min": r.port_range_min, "port_range_max": r.port_range_max,
                "remote_ip_prefix": r.remote_ip_prefix, "remote_group_id": r.remote_group_id,
                "remote_address_group_id": None,
                "normalized_cidr": r.remote_ip_prefix and str(
                    ipaddress.ip_network(r.remote_ip_prefix, strict=False)),
                "description": r.description, "project_id": r.project_id,
                "tenant_id": r.project_id, "revision_number": 0, "tags": [],
                "created_at": isotime(r.created_at), "updated_at": isotime(r.updated_at or r.created_at)}

    def _sg_group_dict(self, s, g):
        rules = s.scalars(sa.select(models.SecurityGroupRule)
                          .where(models.SecurityGroupRule.security_group_id == g.id)
                          .order_by(models.SecurityGroupRule.created_at,
                                    models.SecurityGroupRule.id)).all()
        return {"id": g.id, "name": g.name, "description": g.description,
                "project_id": g.project_id, "tenant_id": g.project_id, "stateful": True,
                "shared": False, "revision_number": g.revision_number, "tags": [],
                "security_group_rules": [self._sg_rule_dict(r) for r in rules],
                "created_at": isotime(g.created_at), "updated_at": isotime(g.updated_at or g.created_at)}

    # --- groups ---------------------------------------------------------------------
    def _default_group(self, s, project_id):
        """The project's default group, made with its four rules when it has none."""
        g = s.scalars(sa.select(models.SecurityGroup).where(
            models.SecurityGroup.project_id == project_id,
            models.SecurityGroup.name == DEFAULT)).first()
        if g is not None or project_id is None:
            return g
        g = models.SecurityGroup(id=str(uuid.uuid4()), name=DEFAULT,
                                 description="Default security group", project_id=project_id)
        s.add(g)
        s.flush()
        for direction in ("egress", "ingress"):
            for ethertype in ("IPv4", "IPv6"):
                s.add(models.SecurityGroupRule(
                    id=str(uuid.uuid4()), security_group_id=g.id, project_id=project_id,
                    direction=direction, ethertype=ethertype,
                    remote_group_id=g.id if direction == "ingress" else None))
        s.flush()
        return g

    def _sg_group(self, s, ctxt, group_id, lock=False):
        q = sa.select(models.SecurityGroup).where(models.SecurityGroup.id == group_id)
        g = s.scalars(q.with_for_update() if lock else q).first()
        if g is None or not (ctxt is None or ctxt.is_admin or g.project_id == ctxt.project_id):
            raise _not_found(group_id)
        return g

    def ensure_default_security_group(self, ctxt, project_id):
        with self.db.session(write=True) as s:
            return self._sg_group_dict(s, self._default_group(s, project_id))

    def list_security_groups(self, ctxt, project_id=None):
        """Groups of ``project_id`` (default: the caller's; an admin's None: every project's)."""
        if project_id is None and not (ctxt is None or ctxt.is_admin):
            project_id = ctxt.project_id
        with self.db.session(write=True) as s:
            own = getattr(ctxt, "project_id", None)
            if own is not None:
                self._default_group(s, own)
            q = sa.select(models.SecurityGroup).order_by(models.SecurityGroup.created_at,
                                                         models.SecurityGroup.id)
            if project_id is not None:
                q = q.where(models.SecurityGroup.project_id == project_id)
            return [self._sg_group_dict(s, g) for g in s.scalars(q)]

    def get_security_group(self, ctxt, group_id):
        with self.db.session() as s:
            return self._sg_group_dict(s, self._sg_group(s, ctxt, group_id))

    def find_security_group(self, ctxt, name_or_id, project_id=None):
        """A group of the project by id or name (Neutron's name-or-id lookup)."""
        project_id = project_id or getattr(ctxt, "project_id", None)
        with self.db.session(write=True) as s:
            self._default_group(s, project_id)
            found = s.scalars(sa.select(models.SecurityGroup).where(
                models.SecurityGroup.id == name_or_id)).first()
            if found is not None and (ctxt is None or ctxt.is_admin
                                      or found.project_id == ctxt.project_id):
                return self._sg_group_dict(s, found)
            named = s.scalars(sa.select(models.SecurityGroup).where(
                models.SecurityGroup.name == name_or_id,
                models.SecurityGroup.project_id == project_id)).all()
            if not named:
                raise SecurityGroupNotFound(
                    f"Unable to find security_group with name or id '{name_or_id}'")
            if len(named) > 1:
                raise SecurityGroupNameNotUnique(
                    f"Multiple security_group matches found for name '{name_or_id}', "
                    "use an ID to be more specific.")
            return self._sg_group_dict(s, named[0])

    def create_security_group(self, ctxt, name, description="", project_id=None):
        project_id = project_id or getattr(ctxt, "project_id", None)
        with self.db.session(write=True) as s:
            self._default_group(s, project_id)
            if name == DEFAULT:
                raise SecurityGroupDefaultAlreadyExists("Default security group already exists.")
            g = models.SecurityGroup(id=str(uuid.uuid4()), name=name or "",
                                     description=description or "", project_id=project_id)
            s.add(g)
            s.flush()
            for ethertype in ("IPv4", "IPv6"):  # a new group may send anything
                s.add(models.SecurityGroupRule(id=str(uuid.uuid4()), security_group_id=g.id,
                                               project_id=project_id, direction="egress",
                                               ethertype=ethertype))
            s.flush()
            return self._sg_group_dict(s, g)

    def update_security_group(self, ctxt, group_id, name=None, description=None):
        with self.db.session(write=True) as s:
            g = self._sg_group(s, ctxt, group_id, lock=True)
            if name is not None and name != g.name:
                if g.name == DEFAULT or name == DEFAULT:
                    raise InvalidInput("Updating default security group not allowed.")
                g.name = name
            if description is not None:
                g.description = description
            g.revision_number += 1
            s.flush()
            return self._sg_group_dict(s, g)

    def delete_security_group(self, ctxt, group_id):
        with self.db.session(write=True) as s:
            g = self._sg_group(s, ctxt, group_id, lock=True)
            if g.name == DEFAULT and not (ctxt is None or ctxt.is_admin):
                raise SecurityGroupCannotRemoveDefault(
                    "Insufficient rights for removing default security group.")
            used = s.scalars(sa.select(models.SecurityGroupPortBinding.port_id).where(
                models.SecurityGroupPortBinding.security_group_id == g.id)).first()
            if used is not None:
                raise SecurityGroupInUse(f"Security Group {g.id} in use.")
            s.execute(sa.delete(models.SecurityGroupRule).where(sa.or_(
                models.SecurityGroupRule.security_group_id == g.id,
                models.SecurityGroupRule.remote_group_id == g.id)))
            s.delete(g)

    # --- rules ----------------------------------------------------------------------
    def _check_sg_rule(self, s, ctxt, body):
        """The rule's columns from a Neutron-style body, or InvalidInput."""
        unknown = set(body) - RULE_FIELDS
        if unknown:
            raise InvalidInput(f"Unrecognized attribute(s) '{', '.join(sorted(unknown))}'")
        if not body.get("security_group_id"):
            raise InvalidInput("Failed to parse request. Required attribute "
                               "'security_group_id' not specified")
        group = self._sg_group(s, ctxt, body["security_group_id"])
        direction = body.get("direction")
        if direction not in ("ingress", "egress"):
            raise InvalidInput(f"Invalid input for direction. Reason: {direction!r} is not in "
                               "['ingress', 'egress'].")
        ethertype = body.get("ethertype") or "IPv4"
        if ethertype not in ("IPv4", "IPv6"):
            raise InvalidInput(f"Invalid input for ethertype. Reason: {ethertype!r} is not in "
                               "['IPv4', 'IPv6'].")
        protocol = body.get("protocol")
        if protocol is not None:
            protocol = str(protocol).lower()
            if protocol not in PROTOCOLS and not (protocol.isdigit() and int(protocol) <= 255):
                raise InvalidInput(
                    f"Security group rule protocol {body['protocol']} not supported. Only "
                    f"protocol values {sorted(PROTOCOLS)} and integer representations "
                    "[0 to 255] are supported.")
        low = _int_or_none("port_range_min", body.get("port_range_min"))
        high = _int_or_none("port_range_max", body.get("port_range_max"))
        if protocol in _PORTED:
            for value in (low, high):
                if value is not None and not 0 < value <= 65535:
                    raise InvalidInput(f"Invalid value for port {value}.")
            if low is not None and high is not None and low > high:
                raise InvalidInput("For TCP/UDP protocols, port_range_min must be "
                                   "<= port_range_max")
        elif protocol in _ICMP:
            for field, value in (("type", low), ("code", high)):
                if value is not None and not 0 <= value <= 255:
                    raise InvalidInput(f"Invalid value for ICMP {field} (type or code) "
                                       f"setting: {value}")
            if high is not None and low is None:
                raise InvalidInput("ICMP code (port-range-max) is provided but ICMP type "
                                   "(port-range-min) is missing.")
        elif low is not None or high is not None:
            raise InvalidInput("Ports may be given only for TCP, UDP, SCTP, UDP-Lite, DCCP "
                               "and ICMP rules.")
        prefix, remote = body.get("remote_ip_prefix"), body.get("remote_group_id")
        if prefix and remote:
            raise InvalidInput("Only remote_ip_prefix or remote_group_id may be provided.")
        if prefix:
            try:
                net = ipaddress.ip_network(prefix, strict=False)
            except ValueError:
                raise InvalidInput(f"Invalid input for remote_ip_prefix. Reason: '{prefix}' is "
                                   "not a valid IP subnet.")
            if f"IPv{net.version}" != ethertype:
                raise InvalidInput(f"Conflicting value ethertype {ethertype} for CIDR {prefix}")
        if remote:
            self._sg_group(s, ctxt, remote)
        return {"security_group_id": group.id, "direction": direction, "ethertype": ethertype,
                "protocol": protocol, "port_range_min": low, "port_range_max": high,
                "remote_ip_prefix": prefix or None, "remote_group_id": remote or None,
                "description": body.get("description") or "",
                "project_id": group.project_id}

    def create_security_group_rule(self, ctxt, body):
        with self.db.session(write=True) as s:
            values = self._check_sg_rule(s, ctxt, body)
            same = [getattr(models.SecurityGroupRule, k) == v if v is not None
                    else getattr(models.SecurityGroupRule, k).is_(None)
                    for k, v in values.items() if k not in ("description", "project_id")]
            existing = s.scalars(sa.select(models.SecurityGroupRule.id).where(*same)).first()
            if existing is not None:
                raise SecurityGroupRuleExists(
                    f"Security group rule already exists. Rule id is {existing}.")
            rule = models.SecurityGroupRule(id=str(uuid.uuid4()), **values)
            s.add(rule)
            s.flush()
            return self._sg_rule_dict(rule)

    def _sg_rule(self, s, ctxt, rule_id):
        r = s.get(models.SecurityGroupRule, rule_id)
        if r is None or not (ctxt is None or ctxt.is_admin or r.project_id == ctxt.project_id):
            raise SecurityGroupRuleNotFound(f"Security group rule {rule_id} does not exist")
        return r

    def get_security_group_rule(self, ctxt, rule_id):
        with self.db.session() as s:
            return self._sg_rule_dict(self._sg_rule(s, ctxt, rule_id))

    def list_security_group_rules(self, ctxt):
        with self.db.session() as s:
            q = sa.select(models.SecurityGroupRule).order_by(
                models.SecurityGroupRule.created_at, models.SecurityGroupRule.id)
            if not (ctxt is None or ctxt.is_admin):
                q = q.where(models.SecurityGroupRule.project_id == ctxt.project_id)
            return [self._sg_rule_dict(r) for r in s.scalars(q)]

    def delete_security_group_rule(self, ctxt, rule_id):
        with self.db.session(write=True) as s:
            s.delete(self._sg_rule(s, ctxt, rule_id))

    # --- ports and servers -------------------------------------------------------------
    def _port_group_ids(self, s, port_id):
        return list(s.scalars(sa.select(models.SecurityGroupPortBinding.security_group_id)
                              .where(models.SecurityGroupPortBinding.port_id == port_id)
                              .order_by(models.SecurityGroupPortBinding.security_group_id)))

    def _set_port_groups(self, s, ctxt, port, group_ids, new=False, checked=False):
        """The port's groups become ``group_ids`` (None: its project's default group);
        returns their ids. ``new``: the port was made just now and has none yet;
        ``checked``: ``group_ids`` were found by the caller (``_resolve_groups``)."""
        if group_ids is None:
            default = self._default_group(s, port.project_id)
            group_ids = [default.id] if default is not None else []
        elif not checked:
            for gid in group_ids:
                self._sg_group(s, ctxt, gid)
        if not new:
            s.execute(sa.delete(models.SecurityGroupPortBinding).where(
                models.SecurityGroupPortBinding.port_id == port.id))
        group_ids = list(dict.fromkeys(group_ids))
        s.add_all(models.SecurityGroupPortBinding(port_id=port.id, security_group_id=gid)
                  for gid in group_ids)
        s.flush()
        return group_ids

    def _resolve_groups(self, s, ctxt, project_id, names_or_ids):
        """Group ids of the project for names or ids (None: None, the default)."""
        if not names_or_ids:
            return None
        # The project's groups any ref names, by id or by name, in one statement.
        refs = list(names_or_ids)
        found = s.scalars(sa.select(models.SecurityGroup).where(
            models.SecurityGroup.project_id == project_id,
            sa.or_(models.SecurityGroup.id.in_(refs), models.SecurityGroup.name.in_(refs)))
            .order_by(models.SecurityGroup.created_at, models.SecurityGroup.id)).all()
        ids = []
        for ref in refs:
            g = next((f for f in found if f.id == ref), None)
            if g is None:
                named = [f for f in found if f.name == ref]
                if ref == DEFAULT and not named:
                    named = [self._default_group(s, project_id)]
                if not named:
                    raise SecurityGroupNotFound(
                        f"Unable to find security_group with name or id '{ref}'")
                if len(named) > 1:
                    raise SecurityGroupNameNotUnique(
                        f"Multiple security_group matches found for name '{ref}', use an "
                        "ID to be more specific.")
                g = named[0]
            ids.append(g.id)
        return ids

    def get_instance_security_groups(self, ctxt, instance_uuid):
        """The groups of the server's ports, each once."""
        with self.db.session() as s:
            ids = {}
            for p in self._instance_ports(s, instance_uuid):
                ids.update(dict.fromkeys(self._port_group_ids(s, p.id)))
            return [self._sg_group_dict(s, s.get(models.SecurityGroup, gid)) for gid in ids]

    def instances_security_group_names(self, ctxt, instance_uuids):
        """{server uuid: [group names]} for the servers that have ports, one query."""
        if not instance_uuids:
            return {}
        with self.db.session() as s:
            rows = s.execute(
                sa.select(models.Port.device_id, models.SecurityGroup.name)
                .join(models.SecurityGroupPortBinding,
                      models.SecurityGroupPortBinding.port_id == models.Port.id)
                .join(models.SecurityGroup, models.SecurityGroup.id
                      == models.SecurityGroupPortBinding.security_group_id)
                .where(models.Port.device_id.in_(list(instance_uuids)))
                .order_by(models.Port.created_at, models.SecurityGroup.name)).all()
        out = {}
        for uuid_, name in rows:
            names = out.setdefault(uuid_, [])
            if name not in names:
                names.append(name)
        return out

    def add_security_group_to_instance(self, ctxt, instance_uuid, project_id, name_or_id):
        """Every port of the server gains the group (already there: nothing changes)."""
        with self.db.session(write=True) as s:
            gid = self._resolve_groups(s, ctxt, project_id, [name_or_id])[0]
            ports = self._instance_ports(s, instance_uuid, lock=True)
            if not ports:
                raise SecurityGroupNotFound(f"instance_id {instance_uuid} could not be found "
                                            "as device id on any ports")
            for p in ports:
                groups = self._port_group_ids(s, p.id)
                if gid not in groups:
                    self._set_port_groups(s, ctxt, p, groups + [gid])

    def remove_security_group_from_instance(self, ctxt, instance_uuid, project_id, name_or_id):
        with self.db.session(write=True) as s:
            gid = self._resolve_groups(s, ctxt, project_id, [name_or_id])[0]
            found = False
            for p in self._instance_ports(s, instance_uuid, lock=True):
                groups = self._port_group_ids(s, p.id)
                if gid in groups:
                    found = True
                    self._set_port_groups(s, ctxt, p, [g for g in groups if g != gid])
            if not found:
                raise SecurityGroupNotFound(
                    f"Security group {name_or_id} not associated with the instance "
                    f"{instance_uuid}")
