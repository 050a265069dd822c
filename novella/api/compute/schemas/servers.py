"""Bodies of server create, update and actions."""
from novella.api.compute import validation as v

_bdm_v2 = v.obj({
    "source_type": {"type": "string", "enum": ["volume", "image", "snapshot", "blank"]},
    "destination_type": {"type": "string", "enum": ["local", "volume"]},
    "uuid": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[a-zA-Z0-9._-]*$"},
    "image_id": v.uuid, "volume_id": v.uuid, "snapshot_id": v.uuid,
    "volume_size": {"type": ["integer", "string", "null"], "pattern": "^[0-9]+$", "minimum": 1,
                    "maximum": 2147483647},
    "device_name": {"type": ["string", "null"], "maxLength": 255},
    "device_type": {"type": ["string", "null"], "maxLength": 255},
    "disk_bus": {"type": ["string", "null"], "maxLength": 255},
    "boot_index": {"type": ["integer", "string", "null"], "pattern": "^-?[0-9]+$",
                   "minimum": -2147483648, "maximum": 2147483647},
    "delete_on_termination": v.boolean,
    "guest_format": {"type": "string", "maxLength": 255},
    "no_device": {},
    "connection_info": {"type": "string", "maxLength": 16777215},
    "tag": {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"},
    "volume_type": {"type": ["string", "null"], "minLength": 0, "maxLength": 255},
})

# The legacy (v1) mapping: converted to the v2 one where the server is created.
_bdm_legacy = v.obj({
    "virtual_name": {"type": "string", "maxLength": 255},
    "volume_id": v.uuid, "snapshot_id": v.uuid,
    "volume_size": {"type": ["integer", "string"], "pattern": "^[0-9]+$", "minimum": 1,
                    "maximum": 2147483647},
    "device_name": {"type": "string", "minLength": 1, "maxLength": 255,
                    "pattern": "^[a-zA-Z0-9._/-]*$"},
    "delete_on_termination": v.boolean,
    "no_device": {},
    "connection_info": {"type": "string", "maxLength": 16777215},
})

_network = v.obj({
    "fixed_ip": {"type": "string", "oneOf": [{"format": "ipv4"}, {"format": "ipv6"}]},
    "port": {"oneOf": [v.uuid, {"type": "null"}]},
    "uuid": {"type": "string"},
    "tag": {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"},
})

_tag = {"type": "string", "minLength": 1, "maxLength": 60, "pattern": "^[^,/]*$"}


def create(version):
    server = {
        "name": v.name_with_spaces,
        "imageRef": {"oneOf": [v.uuid, {"type": "string", "maxLength": 0},
                               {"type": "string", "pattern": "^https?://.*/[0-9a-fA-F-]{36}$"}]},
        "flavorRef": {"type": ["string", "integer"], "minLength": 1},
        "adminPass": {"type": "string"},
        "metadata": v.metadata,
        "networks": {"type": "array", "items": _network},
        "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]},
        "accessIPv4": {"type": "string", "format": "ipv4"},
        "accessIPv6": {"type": "string", "format": "ipv6"},
        "availability_zone": {"type": "string", "minLength": 1, "maxLength": 255},
        "block_device_mapping": {"type": "array", "items": _bdm_legacy},
        "block_device_mapping_v2": {"type": "array", "items": _bdm_v2},
        "key_name": {"type": "string", "minLength": 1, "maxLength": 255},
        "user_data": {"type": "string", "maxLength": 65535},
        "min_count": v.positive_int, "max_count": v.positive_int,
        "return_reservation_id": v.boolean,
        "security_groups": {"type": "array", "items": v.obj({"name": {"type": "string"}})},
        "config_drive": v.boolean,
    }
    required = ["name", "flavorRef"]
    if version < (2, 57):
        server["personality"] = v.personality
    if version >= (2, 19):
        server["description"] = v.description
    if version >= (2, 37):
        server["networks"] = {"oneOf": [{"type": "array", "items": _network},
                                        {"type": "string", "enum": ["none", "auto"]}]}
        required.append("networks")
    if version >= (2, 52):
        server["tags"] = {"type": "array", "items": _tag, "maxItems": 50}
    if version >= (2, 63):
        server["trusted_image_certificates"] = {"type": ["array", "null"]}
    if version >= (2, 74):
        server["host"] = {"type": "string", "minLength": 1, "maxLength": 255}
        server["hypervisor_hostname"] = {"type": "string", "minLength": 1, "maxLength": 255}
    if version >= (2, 90):
        server["hostname"] = hostname(version)
    hints = {"type": "object", "properties": {
        "group": v.uuid,
        "different_host": {"oneOf": [v.uuid, {"type": "array", "items": v.uuid}]},
        # As the reference: a string is not checked (only the items of a list).
        "same_host": {"type": ["string", "array"], "items": v.uuid},
        "query": {"type": ["string", "object"]},
        "target_cell": {"type": "string"},
        "different_cell": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "build_near_host_ip": {"type": "string"}, "cidr": {"type": "string"}},
        "additionalProperties": True}
    return v.obj({"server": v.obj(server, required),
                  "os:scheduler_hints": hints, "OS-SCH-HNT:scheduler_hints": hints},
                 ["server"])


def hostname(version):
    """A requested hostname: one DNS label (2.90), or a fully qualified name (2.94)."""
    if version >= (2, 94):
        return {"type": "string", "minLength": 1, "maxLength": 255,
                "pattern": "^[a-zA-Z0-9-._]*$"}
    return {"type": "string", "minLength": 2, "maxLength": 63,
            "pattern": "^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$"}


def update(version):
    server = {"name": v.name_with_spaces,
              "accessIPv4": {"type": "string", "format": "ipv4"},
              "accessIPv6": {"type": "string", "format": "ipv6"},
              "OS-DCF:diskConfig": {"type": "string", "enum": ["AUTO", "MANUAL"]}}
    if version >= (2, 19):
        server["description"] = v.description
    if version >= (2, 90):
        server["hostname"] = hostname(version)
    if version >= (2, 104):
        server["pinned_availability_zone"] = {"oneOf": [
            {"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]}
    return v.obj({"server": v.obj(server)}, ["server"])


reboot = v.obj({"reboot": v.obj({"type": {"type": "string",
                                          "enum": ["HARD", "Hard", "hard", "SOFT", "Soft", "soft"]}},
                                ["type"])}, ["reboot"])
# The argument-less actions take any value, as the reference's do: clients send
# null or {} (tempest's, python-novaclient's).
stop = v.obj({"os-stop": {}}, ["os-stop"])
start = v.obj({"os-start": {}}, ["os-start"])

tags_update_all = v.obj({"tags": {"type": "array", "items": _tag}}, ["tags"])
tag = _tag
