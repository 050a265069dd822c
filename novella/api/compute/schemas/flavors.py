"""Bodies of flavor create/update, extra specs and access."""
from novella.api.compute import validation as v

_id = {"type": ["string", "number", "null"], "minLength": 1, "maxLength": 255,
       "pattern": r"^(?! )[a-zA-Z0-9. _-]+(?<! )$"}


def create(version):
    flavor = {
        "name": v.name, "id": _id,
        "ram": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1, "maximum": 2147483647},
        "vcpus": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1, "maximum": 2147483647},
        "disk": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 0, "maximum": 2147483647},
        "OS-FLV-EXT-DATA:ephemeral": {"type": ["integer", "string"], "pattern": "^[0-9]+$",
                                      "minimum": 0, "maximum": 2147483647},
        "swap": {"type": ["integer", "string"], "pattern": "^[0-9]*$", "minimum": 0, "maximum": 2147483647},
        "rxtx_factor": {"type": ["number", "string"], "pattern": r"^[0-9]+(\.[0-9]+)?$",
                        "minimum": 0, "exclusiveMinimum": True, "maximum": 3.40282e38},
        "os-flavor-access:is_public": v.boolean,
    }
    if version >= (2, 102):
        del flavor["rxtx_factor"]
    if version >= (2, 55):
        flavor["description"] = {"type": ["string", "null"], "minLength": 0, "maxLength": 65535,
                                 "pattern": r"^[^\x00-\x08\x0b\x0c\x0e-\x1f]*$"}
    return v.obj({"flavor": v.obj(flavor, ["name", "ram", "vcpus", "disk"])}, ["flavor"])


update = [((2, 55), None, v.obj({"flavor": v.obj({"description": {
    "type": ["string", "null"], "minLength": 0, "maxLength": 65535,
    "pattern": r"^[^\x00-\x08\x0b\x0c\x0e-\x1f]*$"}}, ["description"])}, ["flavor"]))]

_spec_key = r"^[a-zA-Z0-9-_:. /]{1,255}$"
_spec_value = {"type": ["string", "number", "boolean"], "maxLength": 255}
extra_specs_create = v.obj({"extra_specs": {
    "type": "object", "patternProperties": {_spec_key: _spec_value},
    "additionalProperties": False}}, ["extra_specs"])
extra_spec_update = {"type": "object", "patternProperties": {_spec_key: _spec_value},
                     "additionalProperties": False, "minProperties": 1, "maxProperties": 1}

_tenant = {"type": "string", "minLength": 1, "maxLength": 255,
           "pattern": r"^[a-zA-Z0-9-_:. ]*$"}
add_tenant = v.obj({"addTenantAccess": v.obj({"tenant": _tenant}, ["tenant"])}, ["addTenantAccess"])
remove_tenant = v.obj({"removeTenantAccess": v.obj({"tenant": _tenant}, ["tenant"])},
                      ["removeTenantAccess"])
