"""JSON-schema validation of request bodies and query strings.

A schema may be one document or a list of ``(min_version, max_version,
schema)`` choices, so each microversion's body is described where it
changes. Failures are 400s worded as the reference words them.
"""
import jsonschema
from jsonschema import validators

from novella.api.compute import errors

_Validator = validators.validator_for({"$schema": "http://json-schema.org/draft-04/schema#"})
_FORMATS = jsonschema.FormatChecker()


def pick(schema, version):
    """The schema document for a version (None when the body has none there)."""
    if callable(schema):
        return schema(version)
    if isinstance(schema, list):
        for lo, hi, doc in schema:
            if (lo is None or version >= lo) and (hi is None or version <= hi):
                return doc
        return None
    return schema


def _describe(error):
    path = "/".join(str(p) for p in error.path)
    if error.validator == "additionalProperties" or not path:
        return f"Invalid input for field/attribute {path or 'body'}. {error.message}" \
            if path else error.message
    return (f"Invalid input for field/attribute {error.path[-1]}. Value: {error.instance!r}. "
            f"{error.message}")


def validate(schema, document, version=None):
    doc = pick(schema, version) if version is not None else schema
    if doc is None:
        return
    validator = _Validator(doc, format_checker=_FORMATS)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        raise errors.BadRequest(_describe(error))


# --- building blocks --------------------------------------------------------
def string(min_length=0, max_length=255, **kw):
    return {"type": "string", "minLength": min_length, "maxLength": max_length, **kw}


name = {"type": "string", "minLength": 1, "maxLength": 255,
        "pattern": r"^(?! )[^\x00-\x1f]*(?<! )$"}
name_with_spaces = {"type": "string", "minLength": 1, "maxLength": 255,
                    "pattern": r"^[^\x00-\x1f]*\S[^\x00-\x1f]*$"}
description = {"type": ["string", "null"], "minLength": 0, "maxLength": 255,
               "pattern": r"^[^\x00-\x08\x0b\x0c\x0e-\x1f]*$"}
uuid = {"type": "string", "format": "uuid"}
boolean = {"type": ["boolean", "string"],
           "enum": [True, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
                    False, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"]}
positive_int = {"type": ["integer", "string"], "pattern": r"^[0-9]*$", "minimum": 1}
non_negative_int = {"type": ["integer", "string"], "pattern": r"^[0-9]*$", "minimum": 0}
metadata = {"type": "object",
            "patternProperties": {r"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
            "additionalProperties": False}


def to_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "on", "yes", "y", "t")


def obj(properties, required=(), additional=False):
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": additional}
