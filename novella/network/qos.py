"""QoS policies and rules of the embedded network service, and what they ask of placement.

A policy holds rules; a port uses its own policy (``qos_policy_id``) or else its
network's (``qos_network_policy_id``). Minimum-bandwidth and minimum-packet-rate
rules give the port a ``resource_request`` in the request-group format:

    {"request_groups": [{"id", "required": [traits], "resources": {class: amount}}],
     "same_subtree": [group ids]}

one group for the bandwidth rules (resources from the physical network's or the
tunnel's bandwidth provider: the trait ``CUSTOM_PHYSNET_<NAME>`` or
``CUSTOM_NETWORK_TUNNEL_PROVIDER``, and ``CUSTOM_VNIC_TYPE_<TYPE>``), one for the
packet-rate rules (from the agent's provider). A group's id is the UUID5 of the
ids of its rules (joined by ':') in the port id's namespace, so it is stable as
long as the rules are, and the ``allocation`` of a bound port's binding profile
({group id: provider}) keeps naming its providers.

Bandwidth-limit rules are stored and shown; they ask nothing of placement.
"""
import uuid

import sqlalchemy as sa

from novella.db.timestamps import isotime
from novella.network import models

BANDWIDTH_CLASSES = {"egress": "NET_BW_EGR_KILOBIT_PER_SEC",
                     "ingress": "NET_BW_IGR_KILOBIT_PER_SEC"}
PACKET_RATE_CLASSES = {"any": "NET_PACKET_RATE_KILOPACKET_PER_SEC",
                       "egress": "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
                       "ingress": "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC"}
TUNNEL_TRAIT = "CUSTOM_NETWORK_TUNNEL_PROVIDER"
MAX_INT = 2 ** 31 - 1

# type: (value fields, {field: required}, directions, resource classes or None)
RULE_TYPES = {
    "minimum_bandwidth": {"fields": {"min_kbps": True}, "directions": ("egress", "ingress"),
                          "classes": BANDWIDTH_CLASSES},
    "minimum_packet_rate": {"fields": {"min_kpps": True},
                            "directions": ("egress", "ingress", "any"),
                            "classes": PACKET_RATE_CLASSES},
    "bandwidth_limit": {"fields": {"max_kbps": True, "max_burst_kbps": False},
                        "directions": ("egress", "ingress"), "classes": None},
}
PLACEMENT_RULES = ("minimum_bandwidth", "minimum_packet_rate")
POLICY_FIELDS = {"name", "description", "shared", "is_default", "project_id", "tenant_id"}


class QosError(Exception):
    code = 400


class QosNotFound(QosError):
    code = 404


class QosPolicyNotFound(QosNotFound):
    pass


class QosRuleNotFound(QosNotFound):
    pass


class QosRuleTypeNotFound(QosNotFound):
    pass


class QosConflict(QosError):
    code = 409


class QosPolicyInUse(QosConflict):
    pass


class QoSRulesConflict(QosConflict):
    pass


class QoSPolicyDefaultAlreadyExists(QosConflict):
    pass


class QosPlacementAllocationUpdateConflict(QosConflict):
    pass


class QosForbidden(QosError):
    code = 403


class PolicyNotAuthorized(QosForbidden):
    pass


class HTTPBadRequest(QosError):
    pass


def group_id(port_id, rules):
    """The id of the request group ``rules`` (rows of one type) give port ``port_id``."""
    return str(uuid.uuid5(uuid.UUID(port_id), ":".join(r.id for r in rules)))


def _admin(ctxt):
    return ctxt is None or ctxt.is_admin


def _project(ctxt):
    return getattr(ctxt, "project_id", None)


def rule_dict(r):
    out = {"id": r.id, "type": r.type, "qos_policy_id": r.qos_policy_id,
           "direction": r.direction}
    for field in RULE_TYPES[r.type]["fields"]:
        out[field] = getattr(r, field)
    return out


def _int(field, value):
    if isinstance(value, bool) or value is None:
        raise HTTPBadRequest(f"Invalid input for {field}. Reason: '{value}' is not an integer.")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise HTTPBadRequest(f"Invalid input for {field}. Reason: '{value}' is not an integer.")
    if not 0 <= number <= MAX_INT:
        raise HTTPBadRequest(f"Invalid input for {field}. Reason: '{number}' is too large - "
                             f"must be no larger than '{MAX_INT}'." if number > 0 else
                             f"Invalid input for {field}. Reason: '{number}' is too small - "
                             f"must be at least '0'.")
    return number


def _bool(field, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise HTTPBadRequest(f"Invalid input for {field}. Reason: '{value}' is not a valid boolean value.")


class QosMixin:
    """The QoS part of ``NetworkAPI`` (its ``db`` and, optionally, ``placement``)."""

    # A placement client: set where the service may change allocations itself
    # (a bound port's policy replaced). Without it such a change is refused.
    placement = None

    # --- reading ------------------------------------------------------------------
    @staticmethod
    def _rules_of(s, policy_id):
        held = s.info.setdefault("qos_rules", {})
        if policy_id not in held:
            held[policy_id] = s.scalars(
                sa.select(models.QosRule).where(models.QosRule.qos_policy_id == policy_id)
                .order_by(models.QosRule.created_at, models.QosRule.id)).all()
        return held[policy_id]

    def _policy_dict(self, s, p):
        return {"id": p.id, "name": p.name or "", "description": p.description or "",
                "project_id": p.project_id, "tenant_id": p.project_id, "shared": p.shared,
                "is_default": p.is_default, "revision_number": p.revision_number, "tags": [],
                "rules": [rule_dict(r) for r in self._rules_of(s, p.id)],
                "created_at": isotime(p.created_at),
                "updated_at": isotime(p.updated_at or p.created_at)}

    def _visible_policy(self, s, ctxt, policy_id):
        p = s.get(models.QosPolicy, policy_id) if policy_id else None
        if p is None or not (_admin(ctxt) or p.shared or p.project_id == _project(ctxt)):
            raise QosPolicyNotFound(f"QoS policy {policy_id} could not be found.")
        return p

    def _own_policy(self, s, ctxt, policy_id, action):
        """A policy the caller may change (admins only, as the reference's defaults say)."""
        p = self._visible_policy(s, ctxt, policy_id)
        if not _admin(ctxt):
            raise PolicyNotAuthorized(f"rule:{action} is disallowed by policy")
        return p

    def get_qos_policy(self, ctxt, policy_id):
        with self.db.read_session() as s:
            return self._policy_dict(s, self._visible_policy(s, ctxt, policy_id))

    def list_qos_policies(self, ctxt):
        with self.db.read_session() as s:
            q = sa.select(models.QosPolicy)
            if not _admin(ctxt):
                q = q.where(sa.or_(models.QosPolicy.project_id == _project(ctxt),
                                   models.QosPolicy.shared.is_(True)))
            rows = s.scalars(q.order_by(models.QosPolicy.created_at, models.QosPolicy.id)).all()
            return [self._policy_dict(s, p) for p in rows]

    # --- policies -----------------------------------------------------------------
    def _check_default(self, s, project_id, except_id=None):
        q = sa.select(models.QosPolicy.id).where(models.QosPolicy.project_id == project_id,
                                                 models.QosPolicy.is_default.is_(True))
        if except_id:
            q = q.where(models.QosPolicy.id != except_id)
        if s.scalars(q).first() is not None:
            raise QoSPolicyDefaultAlreadyExists(
                f"A default QoS policy exists for project {project_id}.")

    def create_qos_policy(self, ctxt, name, rules=(), id=None, description="",  # noqa: A002
                          shared=False, is_default=False, project_id=None):
        """A policy, with ``rules`` given as ``{"type", "direction", <values>}`` dicts."""
        if not _admin(ctxt) and (project_id or _project(ctxt)) != _project(ctxt):
            raise PolicyNotAuthorized("rule:create_policy is disallowed by policy")
        project_id = project_id or _project(ctxt)
        with self.db.session(write=True) as s:
            if is_default:
                self._check_default(s, project_id)
            p = models.QosPolicy(id=id or str(uuid.uuid4()), name=name or "",
                                 description=description or "", project_id=project_id,
                                 shared=bool(shared), is_default=bool(is_default))
            s.add(p)
            s.flush()
            for r in rules:
                r = dict(r)
                self._add_rule(s, p, r.pop("type", None), r)
            return self._policy_dict(s, p)

    def update_qos_policy(self, ctxt, policy_id, fields):
        unknown = set(fields) - {"name", "description", "shared", "is_default"}
        if unknown:
            raise HTTPBadRequest(f"Unrecognized attribute(s) '{', '.join(sorted(unknown))}'")
        with self.db.session(write=True) as s:
            p = self._own_policy(s, ctxt, policy_id, "update_policy")
            if "is_default" in fields:
                fields["is_default"] = _bool("is_default", fields["is_default"])
                if fields["is_default"]:
                    self._check_default(s, p.project_id, except_id=p.id)
            if "shared" in fields:
                fields["shared"] = _bool("shared", fields["shared"])
            for key, value in fields.items():
                setattr(p, key, value if value is not None or key != "description" else "")
            p.revision_number += 1
            s.flush()
            return self._policy_dict(s, p)

    def _policy_users(self, s, policy_id):
        """(kind, id) of the networks and ports that name the policy."""
        nets = s.scalars(sa.select(models.Network.id)
                         .where(models.Network.qos_policy_id == policy_id)).all()
        ports = s.scalars(sa.select(models.Port.id)
                          .where(models.Port.qos_policy_id == policy_id)).all()
        return [("network", n) for n in nets] + [("port", p) for p in ports]

    def delete_qos_policy(self, ctxt, policy_id):
        with self.db.session(write=True) as s:
            p = self._own_policy(s, ctxt, policy_id, "delete_policy")
            users = self._policy_users(s, p.id)
            if users:
                kind, used_by = users[0]
                raise QosPolicyInUse(f"QoS Policy {p.id} is used by {kind} {used_by}.")
            s.execute(sa.delete(models.QosRule).where(models.QosRule.qos_policy_id == p.id))
            s.delete(p)

    def default_qos_policy_id(self, s, project_id):
        return s.scalars(sa.select(models.QosPolicy.id).where(
            models.QosPolicy.project_id == project_id,
            models.QosPolicy.is_default.is_(True))).first()

    # --- rules --------------------------------------------------------------------
    def _rule_values(self, rule_type, body, existing=None):
        spec = RULE_TYPES[rule_type]
        allowed = set(spec["fields"]) | {"direction"}
        unknown = set(body) - allowed - {"id", "type", "qos_policy_id"}
        if unknown:
            raise HTTPBadRequest(f"Unrecognized attribute(s) '{', '.join(sorted(unknown))}'")
        values = {}
        for field, required in spec["fields"].items():
            if field in body:
                values[field] = _int(field, body[field])
            elif existing is None:
                if required:
                    raise HTTPBadRequest(f"Failed to parse request. Required attribute "
                                         f"'{field}' not specified")
                values[field] = 0
        if "direction" in body or existing is None:
            direction = body.get("direction") or "egress"
            if direction not in spec["directions"]:
                raise HTTPBadRequest(f"Invalid input for direction. Reason: {direction} is not "
                                     f"in valid_values {list(spec['directions'])}.")
            values["direction"] = direction
        return values

    def _check_rule_conflict(self, s, p, rule_type, direction, rule_id=None):
        for other in self._rules_of(s, p.id):
            if other.type != rule_type or other.id == rule_id:
                continue
            pps_mix = rule_type == "minimum_packet_rate" and "any" in (direction, other.direction)
            if other.direction == direction or pps_mix:
                raise QoSRulesConflict(f"Rule {rule_type} conflicts with rule {other.id} which "
                                       f"already exists in QoS Policy {p.id}.")

    def _check_not_allocated(self, s, p, rule_type):
        """Placement-bearing rules of a policy do not change under a bound port's allocation."""
        if rule_type not in PLACEMENT_RULES:
            return
        for port in self._ports_using(s, p.id):
            profile = self._active(s, port.id).profile or {}
            if profile.get("allocation"):
                raise QosPolicyInUse(
                    f"QoS Policy {p.id} is used by port {port.id}, bound with an allocation "
                    f"in placement: its {rule_type} rules cannot change; give the port "
                    f"another policy instead.")

    def _ports_using(self, s, policy_id):
        """Ports whose effective policy is ``policy_id`` (their own, or their network's)."""
        own = sa.select(models.Port).where(models.Port.qos_policy_id == policy_id)
        inherited = sa.select(models.Port).join(
            models.Network, models.Network.id == models.Port.network_id).where(
            models.Port.qos_policy_id.is_(None), models.Network.qos_policy_id == policy_id)
        return list(s.scalars(own).all()) + list(s.scalars(inherited).all())

    def _add_rule(self, s, p, rule_type, body):
        if rule_type not in RULE_TYPES:
            raise HTTPBadRequest(f"Rule type {rule_type} is not supported.")
        values = self._rule_values(rule_type, body)
        self._check_rule_conflict(s, p, rule_type, values["direction"])
        self._check_not_allocated(s, p, rule_type)
        r = models.QosRule(id=body.get("id") or str(uuid.uuid4()), qos_policy_id=p.id,
                           type=rule_type, **values)
        s.add(r)
        s.flush()
        s.info.get("qos_rules", {}).pop(p.id, None)
        return r

    def _rule(self, s, p, rule_type, rule_id):
        r = s.get(models.QosRule, rule_id)
        if r is None or r.qos_policy_id != p.id or r.type != rule_type:
            raise QosRuleNotFound(f"QoS rule {rule_id} for policy {p.id} could not be found.")
        return r

    def create_qos_rule(self, ctxt, policy_id, rule_type, body):
        with self.db.session(write=True) as s:
            p = self._own_policy(s, ctxt, policy_id, f"create_policy_{rule_type}_rule")
            r = self._add_rule(s, p, rule_type, dict(body))
            p.revision_number += 1
            return rule_dict(r)

    def get_qos_rule(self, ctxt, policy_id, rule_type, rule_id):
        with self.db.read_session() as s:
            return rule_dict(self._rule(s, self._visible_policy(s, ctxt, policy_id),
                                        rule_type, rule_id))

    def list_qos_rules(self, ctxt, policy_id, rule_type):
        with self.db.read_session() as s:
            p = self._visible_policy(s, ctxt, policy_id)
            return [rule_dict(r) for r in self._rules_of(s, p.id) if r.type == rule_type]

    def update_qos_rule(self, ctxt, policy_id, rule_type, rule_id, body):
        with self.db.session(write=True) as s:
            p = self._own_policy(s, ctxt, policy_id, f"update_policy_{rule_type}_rule")
            r = self._rule(s, p, rule_type, rule_id)
            values = self._rule_values(rule_type, body, existing=r)
            if "direction" in values:
                self._check_rule_conflict(s, p, rule_type, values["direction"], rule_id=r.id)
            if any(getattr(r, k) != v for k, v in values.items()):
                self._check_not_allocated(s, p, rule_type)
            for key, value in values.items():
                setattr(r, key, value)
            p.revision_number += 1
            s.flush()
            return rule_dict(r)

    def delete_qos_rule(self, ctxt, policy_id, rule_type, rule_id):
        with self.db.session(write=True) as s:
            p = self._own_policy(s, ctxt, policy_id, f"delete_policy_{rule_type}_rule")
            r = self._rule(s, p, rule_type, rule_id)
            self._check_not_allocated(s, p, rule_type)
            s.delete(r)
            p.revision_number += 1

    def find_qos_rule(self, ctxt, rule_type, rule_id):
        """The policy id of rule ``rule_id`` of ``rule_type`` (the rules-alias API)."""
        with self.db.read_session() as s:
            r = s.get(models.QosRule, rule_id)
            if r is None or r.type != rule_type:
                raise QosRuleNotFound(f"QoS rule {rule_id} could not be found.")
            self._visible_policy(s, ctxt, r.qos_policy_id)
            return r.qos_policy_id

    # --- what ports ask of placement ------------------------------------------------
    def _check_policy_usable(self, s, ctxt, policy_id):
        """A port or network may name a policy of its project, or a shared one."""
        self._visible_policy(s, ctxt, policy_id)

    def _policy_request_groups(self, s, port_id, vnic_type, network, rules):
        by_type = {t: [r for r in rules if r.type == t] for t in PLACEMENT_RULES}
        vnic_trait = "CUSTOM_VNIC_TYPE_" + _trait_part(vnic_type)
        groups = []
        if by_type["minimum_bandwidth"]:
            net_trait = ("CUSTOM_PHYSNET_" + _trait_part(network.physical_network)
                         if network.physical_network else TUNNEL_TRAIT)
            groups.append({"id": group_id(port_id, by_type["minimum_bandwidth"]),
                           "required": [net_trait, vnic_trait],
                           "resources": {BANDWIDTH_CLASSES[r.direction]: r.min_kbps
                                         for r in by_type["minimum_bandwidth"]}})
        if by_type["minimum_packet_rate"]:
            groups.append({"id": group_id(port_id, by_type["minimum_packet_rate"]),
                           "required": [vnic_trait],
                           "resources": {PACKET_RATE_CLASSES[r.direction]: r.min_kpps
                                         for r in by_type["minimum_packet_rate"]}})
        return groups

    def _effective_policy_id(self, s, p):
        return p.qos_policy_id or self._network_of(s, p.network_id).qos_policy_id

    def _qos_resource_request(self, s, p):
        policy_id = self._effective_policy_id(s, p)
        if not policy_id:
            return None
        groups = self._policy_request_groups(s, p.id, p.vnic_type,
                                             self._network_of(s, p.network_id),
                                             self._rules_of(s, policy_id))
        if not groups:
            return None
        return {"request_groups": groups, "same_subtree": [g["id"] for g in groups]}

    def _change_port_policy(self, s, p, new_policy_id):
        """A compute port's policy is replaced: its allocation follows, as the reference does.

        The allocation of the server (the port's device) on the providers its
        binding profile names is changed by the difference between the old and
        the new policy's minimum rules, and the profile's ``allocation`` is
        renamed to the new groups. A port that had no allocation (no minimum
        rules when it was bound) keeps none: the new rules are not guaranteed.
        Rule types the old policy lacked are likewise not allocated.
        """
        old_policy_id = self._effective_policy_id(s, p)
        network_policy = self._network_of(s, p.network_id).qos_policy_id
        if (new_policy_id or network_policy) == old_policy_id:
            return
        if not p.device_owner.startswith("compute:"):
            return
        active = self._active(s, p.id)
        allocation = dict((active.profile or {}).get("allocation") or {})
        old = [r for r in (self._rules_of(s, old_policy_id) if old_policy_id else [])
               if r.type in PLACEMENT_RULES]
        new = [r for r in (self._rules_of(s, new_policy_id or network_policy)
                           if new_policy_id or network_policy else [])
               if r.type in PLACEMENT_RULES]
        if not old or not allocation:
            return
        new = [r for r in new if r.type in {o.type for o in old}]
        providers, renamed = {}, {}
        for rule_type in PLACEMENT_RULES:
            was = [r for r in old if r.type == rule_type]
            now = [r for r in new if r.type == rule_type]
            if was and group_id(p.id, was) in allocation:
                providers[rule_type] = allocation[group_id(p.id, was)]
                if now:
                    renamed[group_id(p.id, now)] = providers[rule_type]
        diff = {}
        for sign, rules in ((-1, old), (1, new)):
            for r in rules:
                rp = providers.get(r.type)
                if rp is None:
                    continue
                classes = RULE_TYPES[r.type]["classes"]
                rc = classes[r.direction]
                amount = r.min_kbps if r.type == "minimum_bandwidth" else r.min_kpps
                diff.setdefault(rp, {})
                diff[rp][rc] = diff[rp].get(rc, 0) + sign * amount
        diff = {rp: {rc: v for rc, v in d.items() if v} for rp, d in diff.items()}
        diff = {rp: d for rp, d in diff.items() if d}
        if diff:
            self._update_allocation(p.device_id, diff)
        profile = dict(active.profile or {})
        profile["allocation"] = renamed
        active.profile = profile

    def _update_allocation(self, consumer, diff):
        if self.placement is None:
            raise QosPlacementAllocationUpdateConflict(
                f"The allocation of consumer {consumer} would change by {diff}, and this "
                f"network service has no placement client to change it.")
        from novella.placement.client import PlacementError
        for _attempt in range(3):
            current = self.placement.get_allocations(consumer)
            allocations = {rp: dict(a["resources"])
                           for rp, a in (current.get("allocations") or {}).items()}
            for rp, d in diff.items():
                resources = allocations.setdefault(rp, {})
                for rc, delta in d.items():
                    value = resources.get(rc, 0) + delta
                    if value > 0:
                        resources[rc] = value
                    else:
                        resources.pop(rc, None)
            allocations = {rp: r for rp, r in allocations.items() if r}
            try:
                self.placement.put_allocations(
                    consumer, {rp: {"resources": r} for rp, r in allocations.items()},
                    current.get("project_id"), current.get("user_id"),
                    consumer_generation=current.get("consumer_generation"),
                    consumer_type=current.get("consumer_type") or "INSTANCE")
                return
            except PlacementError as exc:
                if getattr(exc, "code", None) == "placement.concurrent_update" and _attempt < 2:
                    continue
                raise QosPlacementAllocationUpdateConflict(
                    f"Failed to update allocation of consumer {consumer} with "
                    f"{diff}: {getattr(exc, 'detail', '') or exc}")


def _trait_part(name):
    import os_traits
    return os_traits.normalize_name(name).removeprefix("CUSTOM_")
