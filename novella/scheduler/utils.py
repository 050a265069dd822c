"""Request building: from a request spec to an allocation-candidates query.

The unnumbered group carries the flavor (VCPU, MEMORY_MB, DISK_GB, then the
``resources:*`` and ``trait:*`` extra specs and the image's ``trait:*``
properties); granular groups come from ``resources<N>:*``/``trait<N>:*`` extra
specs and from the spec's ``requested_resources`` (ports and the like).
"""
import math
import re

from novella.placement.client import RequestGroup

STANDARD_CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")
# resources:VCPU, resources1:CUSTOM_X, resources_NET:NET_BW_EGR_KILOBIT_PER_SEC
_RESOURCES_KEY = re.compile(r"^resources(\d+|_[A-Za-z0-9_-]+)?:([A-Z0-9_]+)$")
_TRAIT_KEY = re.compile(r"^trait(\d+|_[A-Za-z0-9_-]+)?:([A-Za-z0-9_]+)$")
_MEMBER_OF_KEY = re.compile(r"^member_of(\d+|_[A-Za-z0-9_-]+)?$")


def flavor_disk_gb(flavor, is_bfv=False):
    """Local disk a flavor needs: root (not when booted from volume), ephemeral, swap."""
    disk = (flavor.get("ephemeral_gb") or 0) + math.ceil((flavor.get("swap") or 0) / 1024)
    if not is_bfv:
        disk += flavor.get("root_gb") or 0
    return disk


def _add_trait(group, trait, forbidden):
    wanted = "!" + trait if forbidden else trait
    other = trait if forbidden else "!" + trait
    if other in group.required:
        group.required.remove(other)  # the later statement wins
    if wanted not in group.required:
        group.required.append(wanted)


class ResourceRequest:
    """The groups, policy and limit of one GET /allocation_candidates."""

    def __init__(self, limit=None):
        self.groups = {"": RequestGroup(suffix="")}
        self.group_policy = None
        self.limit = limit
        self.same_subtree = []  # lists of suffixes (a port's bandwidth and packet rate)
        self.root_required = []  # traits of the root provider, "!" forbidding

    def group(self, suffix):
        g = self.groups.get(suffix)
        if g is None:
            g = self.groups[suffix] = RequestGroup(suffix=suffix)
        return g

    @classmethod
    def from_request_spec(cls, spec, limit=None, in_tree=None, member_of=()):
        """Build the query for ``spec``.

        ``in_tree`` (a compute node uuid) and ``member_of`` (aggregate uuid
        lists) come from the destination and tenant/zone pre-filters.
        """
        rr = cls(limit=limit)
        flavor = spec.get("flavor") or {}
        extra = flavor.get("extra_specs") or {}
        root = rr.groups[""]
        root.resources.update({
            "VCPU": flavor.get("vcpus") or 0,
            "MEMORY_MB": flavor.get("memory_mb") or 0,
            "DISK_GB": flavor_disk_gb(flavor, spec.get("is_bfv")),
        })
        for key, value in sorted(extra.items()):
            rr._apply_extra_spec(key, value)
        for key, value in sorted(((spec.get("image") or {}).get("properties") or {}).items()):
            m = _TRAIT_KEY.match(key)
            if m and not m.group(1) and str(value).lower() == "required":
                _add_trait(root, m.group(2), forbidden=False)
        for req in spec.get("requested_resources") or []:
            g = rr.group(req.get("suffix") or "")
            for rc, amount in (req.get("resources") or {}).items():
                g.resources[rc] = g.resources.get(rc, 0) + int(amount)
            for t in req.get("required_traits") or []:
                _add_trait(g, t, forbidden=False)
            for t in req.get("forbidden_traits") or []:
                _add_trait(g, t, forbidden=True)
            g.member_of.extend(list(aggs) for aggs in req.get("member_of") or [])
            if req.get("in_tree"):
                g.in_tree = req["in_tree"]
            subtree = sorted(req.get("same_subtree") or [])
            if len(subtree) > 1 and subtree not in rr.same_subtree:
                rr.same_subtree.append(subtree)
        root.member_of.extend(list(aggs) for aggs in member_of)
        if in_tree:
            for g in rr.groups.values():
                g.in_tree = g.in_tree or in_tree
        # Zero amounts mean "do not ask for it" (e.g. resources:DISK_GB=0).
        for g in rr.groups.values():
            g.resources = {rc: n for rc, n in g.resources.items() if n}
        if rr.group_policy is None and len(rr.numbered_groups()) > 1:
            rr.group_policy = "none"
        return rr

    def _apply_extra_spec(self, key, value):
        if key == "group_policy":
            self.group_policy = value
            return
        m = _RESOURCES_KEY.match(key)
        if m:
            try:
                amount = int(value)
            except (TypeError, ValueError):
                return  # the API validates extra specs; ignore what cannot be a count
            self.group(m.group(1) or "").resources[m.group(2)] = amount
            return
        m = _TRAIT_KEY.match(key)
        if m and str(value).lower() in ("required", "forbidden"):
            _add_trait(self.group(m.group(1) or ""), m.group(2),
                       forbidden=str(value).lower() == "forbidden")
            return
        m = _MEMBER_OF_KEY.match(key)
        if m:
            aggs = value[3:] if value.startswith("in:") else value
            self.group(m.group(1) or "").member_of.append(aggs.split(","))

    def numbered_groups(self):
        return [g for s, g in self.groups.items() if s and g.resources]

    def query_groups(self):
        """Groups to send: the unnumbered one first, then those asking for resources."""
        out = []
        root = self.groups[""]
        if root.resources or root.required or root.member_of or not self.numbered_groups():
            out.append(root)
        out.extend(sorted(self.numbered_groups(), key=lambda g: g.suffix))
        return out

    def total_resources(self):
        """Every resource class asked for, summed over groups."""
        total = {}
        for g in self.groups.values():
            for rc, n in g.resources.items():
                total[rc] = total.get(rc, 0) + n
        return total

    def query_params(self):
        """(key, value) pairs of the query string, for logs and tests."""
        params = []
        for g in self.query_groups():
            params.extend(g.query())
        if self.limit is not None:
            params.append(("limit", str(self.limit)))
        if self.group_policy:
            params.append(("group_policy", self.group_policy))
        params.extend(("same_subtree", ",".join(suffixes)) for suffixes in self.same_subtree)
        if self.root_required:
            params.append(("root_required", ",".join(self.root_required)))
        return params


def selection(host_state, allocation_request, version, limits=None, availability_zone=None):
    """The selection document handed to the conductor for one host.

    ``availability_zone``: the host's zone, as the scheduler found it in its
    aggregates, so the conductor need not look it up again.
    """
    return {"service_host": host_state.host, "nodename": host_state.nodename,
            "compute_node_uuid": host_state.uuid, "cell_uuid": host_state.cell_uuid,
            "availability_zone": availability_zone,
            "allocation_request": allocation_request,
            "allocation_request_version": version, "limits": limits or {}}


def port_profiles(requested_resources, mappings=None, allocations=None, traits_of=None):
    """``{port id: {"allocation": {request group id: provider uuid}}}`` for the
    request groups of a server's ports (``requested_resources`` entries with a
    ``requester_id``): what each port's binding profile says it was given.

    A group's provider is placement's answer in ``mappings`` (an allocation
    request's, 1.34) when there is one; else, from a consumer's
    ``allocations`` ``{provider: {"resources": ...}}``, the provider that
    holds every resource class of the group and has its required traits
    (``traits_of(provider)`` -> set). Raises ValueError when none does.
    """
    out = {}
    for group in requested_resources or []:
        port, suffix = group.get("requester_id"), group.get("suffix")
        if not port or not suffix:
            continue
        provider = ((mappings or {}).get(suffix) or [None])[0]
        if provider is None:
            provider = _provider_of(group, allocations or {}, traits_of)
        out.setdefault(port, {"allocation": {}})["allocation"][suffix] = provider
    return out


def selection_port_profiles(request_spec, selection):
    """``port_profiles`` of the spec's ports on a host the scheduler selected."""
    return port_profiles(request_spec.get("requested_resources"),
                         mappings=selection["allocation_request"].get("mappings"))


def _provider_of(group, allocations, traits_of):
    wanted = set(group.get("resources") or {})
    required = set(group.get("required_traits") or [])
    for provider in sorted(allocations):
        held = set((allocations[provider].get("resources") or {}))
        if wanted <= held and (not required or required <= set(traits_of(provider))):
            return provider
    raise ValueError(f"no provider in the allocation satisfies request group {group.get('suffix')}")
