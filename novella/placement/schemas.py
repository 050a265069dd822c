"""JSON schemas of request bodies and query strings, per microversion."""
import copy
import functools

UUID_RE = "^[0-9a-fA-F-]{36}$"
NAME_RE = "^[A-Z0-9_]+$"
CUSTOM_RE = "^CUSTOM_[A-Z0-9_]+$"
GROUP_RE = "[1-9][0-9]*"
GROUP_RE_1_33 = "[a-zA-Z0-9_-]{1,64}"
MAX_INT = 2147483647
MAX_FLOAT = 3.40282e+38


def derive(schema, props=None, drop=(), required=None, **top):
    """A deep copy of ``schema`` with properties added/removed."""
    out = copy.deepcopy(schema)
    for name in drop:
        out["properties"].pop(name, None)
        if name in out.get("required", ()):
            out["required"].remove(name)
    out["properties"].update(copy.deepcopy(props or {}))
    if required is not None:
        out["required"] = list(required)
    out.update(copy.deepcopy(top))
    return out


def obj(props, required=(), **kw):
    return dict({"type": "object", "properties": props, "required": list(required),
                 "additionalProperties": False}, **kw)


STR = {"type": "string"}
UUID = {"type": "string", "format": "uuid"}
PROJECT = {"type": "string", "minLength": 1, "maxLength": 255}
INT = {"type": "integer"}

# -- resource providers --------------------------------------------------------
RP_POST = obj({"name": {"type": "string", "maxLength": 200}, "uuid": UUID}, ["name"])
RP_PUT = derive(RP_POST, drop=["uuid"])
_PARENT = {"parent_provider_uuid": {"anyOf": [UUID, {"type": "null"}]}}
RP_POST_1_14 = derive(RP_POST, _PARENT)
RP_PUT_1_14 = derive(RP_PUT, _PARENT)
RP_LIST = [((1, 0), obj({"name": STR, "uuid": UUID}))]
RP_LIST.append(((1, 3), derive(RP_LIST[-1][1], {"member_of": STR})))
RP_LIST.append(((1, 4), derive(RP_LIST[-1][1], {"resources": STR})))
RP_LIST.append(((1, 14), derive(RP_LIST[-1][1], {"in_tree": UUID})))
RP_LIST.append(((1, 18), derive(RP_LIST[-1][1], {"required": STR})))
RP_LIST.reverse()

# -- inventories ---------------------------------------------------------------------


def _bounded(minimum):
    return {"type": "integer", "maximum": MAX_INT, "minimum": minimum}


INVENTORY = obj({
    "resource_provider_generation": INT,
    "total": _bounded(1), "reserved": _bounded(0), "min_unit": _bounded(1),
    "max_unit": _bounded(1), "step_size": _bounded(1),
    "allocation_ratio": {"type": "number", "maximum": MAX_FLOAT},
}, ["total", "resource_provider_generation"])
INVENTORY_POST = derive(INVENTORY, {"resource_class": {"type": "string", "pattern": NAME_RE}},
                        required=["total", "resource_class"])
INVENTORY_RECORD = derive(INVENTORY, required=["total"])
INVENTORIES_PUT = obj({"resource_provider_generation": INT,
                       "inventories": {"type": "object",
                                       "patternProperties": {NAME_RE: INVENTORY_RECORD}}},
                      ["resource_provider_generation", "inventories"])

# -- resource classes and traits ---------------------------------------------------
RC_POST = obj({"name": {"type": "string", "pattern": CUSTOM_RE, "maxLength": 255}}, ["name"])
TRAIT = {"type": "string", "minLength": 1, "maxLength": 255}
TRAITS_PUT_RP = obj({"traits": {"type": "array", "items": TRAIT},
                     "resource_provider_generation": INT},
                    ["traits", "resource_provider_generation"])
TRAITS_LIST = obj({"name": STR, "associated": STR})

# -- aggregates ------------------------------------------------------------------------
AGGREGATES = {"type": "array", "items": UUID, "uniqueItems": True}
AGGREGATES_1_19 = obj({"aggregates": AGGREGATES, "resource_provider_generation": INT},
                      ["aggregates", "resource_provider_generation"])

# -- allocations ---------------------------------------------------------------------
_RESOURCES = {"type": "object", "minProperties": 1,
              "patternProperties": {NAME_RE: {"type": "integer", "minimum": 1}},
              "additionalProperties": False}
ALLOC_1_0 = obj({"allocations": {"type": "array", "minItems": 1, "items": obj(
    {"resource_provider": obj({"uuid": UUID}, ["uuid"]), "resources": _RESOURCES},
    ["resource_provider", "resources"])}}, ["allocations"])
ALLOC_1_8 = derive(ALLOC_1_0, {"project_id": PROJECT, "user_id": PROJECT},
                   required=["allocations", "project_id", "user_id"])
ALLOC_1_12 = obj({
    "allocations": {"type": "object", "minProperties": 1, "patternProperties": {
        UUID_RE: obj({"generation": INT, "resources": _RESOURCES}, ["resources"])},
        "additionalProperties": False},
    "project_id": PROJECT, "user_id": PROJECT}, ["allocations", "project_id", "user_id"])
ALLOC_DELETABLE = copy.deepcopy(ALLOC_1_12)
ALLOC_DELETABLE["properties"]["allocations"]["minProperties"] = 0
_CGEN = {"consumer_generation": {"type": ["integer", "null"], "additionalProperties": False}}
ALLOC_1_28 = derive(ALLOC_DELETABLE, _CGEN,
                    required=ALLOC_DELETABLE["required"] + ["consumer_generation"])
MAPPINGS = {"type": "object", "minProperties": 1, "patternProperties": {
    GROUP_RE_1_33: {"type": "array", "minItems": 1, "items": UUID}}}
ALLOC_1_34 = derive(ALLOC_1_28, {"mappings": MAPPINGS})
ALLOC_1_38 = derive(ALLOC_1_34, {"consumer_type": {
    "type": "string", "pattern": NAME_RE, "minLength": 1, "maxLength": 255}},
    required=ALLOC_1_34["required"] + ["consumer_type"])
PUT_ALLOCATIONS = [((1, 38), ALLOC_1_38), ((1, 34), ALLOC_1_34), ((1, 28), ALLOC_1_28),
                   ((1, 12), ALLOC_1_12), ((1, 8), ALLOC_1_8), ((1, 0), ALLOC_1_0)]


def _post(per_consumer, min_props=1):
    return {"type": "object", "minProperties": min_props, "additionalProperties": False,
            "patternProperties": {UUID_RE: per_consumer}}


POST_ALLOCATIONS = [((1, 38), _post(ALLOC_1_38)), ((1, 34), _post(ALLOC_1_34)),
                    ((1, 28), _post(ALLOC_1_28)), ((1, 13), _post(ALLOC_DELETABLE))]

# -- usages ----------------------------------------------------------------------------
USAGES = obj({"project_id": PROJECT, "user_id": PROJECT}, ["project_id"])
USAGES_1_38 = derive(USAGES, {"consumer_type": {
    "type": "string", "pattern": NAME_RE + "|^all|^unknown$", "minLength": 1,
    "maxLength": 255}})

# -- reshaper --------------------------------------------------------------------------
_RESHAPE_INV = {"type": "object", "patternProperties": {UUID_RE: INVENTORIES_PUT},
                "minProperties": 1, "additionalProperties": False}
RESHAPER = [((1, 38), obj({"inventories": _RESHAPE_INV, "allocations": _post(ALLOC_1_38, 0)},
                          ["inventories", "allocations"])),
            ((1, 34), obj({"inventories": _RESHAPE_INV, "allocations": _post(ALLOC_1_34, 0)},
                          ["inventories", "allocations"])),
            ((1, 30), obj({"inventories": _RESHAPE_INV, "allocations": _post(ALLOC_1_28, 0)},
                          ["inventories", "allocations"]))]

# -- allocation candidates -----------------------------------------------------------


def candidates_schema(version):
    return _candidates_schema(tuple(version))


@functools.lru_cache(maxsize=None)
def _candidates_schema(version):
    version = _V(version)
    props = {"resources": STR}
    schema = {"type": "object", "properties": props, "required": ["resources"],
              "additionalProperties": False}
    if version.matches((1, 16)):
        props["limit"] = {"type": ["integer", "string"], "pattern": "^[1-9][0-9]*$",
                          "minimum": 1, "minLength": 1}
    if version.matches((1, 17)):
        props["required"] = {"type": ["string"]}
    if version.matches((1, 21)):
        props["member_of"] = {"type": ["string"]}
    if version.matches((1, 25)):
        del props["resources"], props["required"], props["member_of"], schema["required"]
        props["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}
        kinds = ["resources", "required", "member_of"]
        if version.matches((1, 31)):
            kinds.append("in_tree")
        group = GROUP_RE_1_33 if version.matches((1, 33)) else GROUP_RE
        schema["patternProperties"] = {"^%s(%s)?$" % (k, group): STR for k in kinds}
    if version.matches((1, 35)):
        props["root_required"] = {"type": ["string"]}
    if version.matches((1, 36)):
        props["same_subtree"] = {"type": ["string"]}
    return schema


def pick(versions, version):
    for minimum, schema in versions:
        if version.matches(minimum):
            return schema
    raise LookupError(version)


class _V(tuple):
    def matches(self, minimum):
        return self >= minimum
