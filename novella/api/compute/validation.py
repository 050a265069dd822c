"""JSON-schema validation of request bodies and query strings.

A schema may be one document or a list of ``(min_version, max_version,
schema)`` choices, so each microversion's body is described where it
changes. Failures are 400s worded as the reference words them.
"""
import base64

import jsonschema
from jsonschema import validators

from novella.api import router
from novella.api.compute import errors

_Draft4 = validators.validator_for({"$schema": "http://json-schema.org/draft-04/schema#"})


def _numeric_string(keyword):
    """``minimum`` / ``maximum`` that also bound the digits of an integer given
    as a string (the reference's schemas accept ``"2"`` where they accept 2)."""
    check = _Draft4.VALIDATORS[keyword]

    def bound(validator, value, instance, schema):
        if isinstance(instance, str) and instance.strip().lstrip("-").isdigit() \
                and len(instance) < 4300:
            instance = int(instance)
        return check(validator, value, instance, schema)
    return bound


_Validator = validators.extend(_Draft4, {"minimum": _numeric_string("minimum"),
                                         "maximum": _numeric_string("maximum")})
_FORMATS = jsonschema.FormatChecker()
MAX_INT = 2147483647   # the largest integer the databases store (a signed 32-bit column)


@_FORMATS.checks("int32")
def _int32(value):
    """An integer, or the digits of one, that a 32-bit column can hold."""
    if isinstance(value, bool):
        return True
    if isinstance(value, str):
        return len(value) <= 10 and (not value.isdigit() or int(value) <= MAX_INT)
    return not isinstance(value, int) or -MAX_INT - 1 <= value <= MAX_INT


@_FORMATS.checks("base64")
def _base64(value):
    """Base64 text (the contents of a personality file); as the reference, characters
    outside the alphabet (line breaks, spaces) are skipped, a wrong length is not."""
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value)
    except ValueError:
        return False
    return True


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
    path = "/".join(router.clip(str(p)) for p in error.path)
    message = router.clip_message(error.message, error.instance)
    if error.validator == "additionalProperties" or not path:
        return f"Invalid input for field/attribute {path or 'body'}. {message}" \
            if path else message
    return (f"Invalid input for field/attribute {router.clip(str(error.path[-1]))}. "
            f"Value: {router.clip(error.instance)}. {message}")


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
positive_int = {"type": ["integer", "string"], "pattern": r"^0*[1-9][0-9]*$", "minimum": 1,
                "minLength": 1, "maximum": MAX_INT, "format": "int32"}
non_negative_int = {"type": ["integer", "string"], "pattern": r"^[0-9]*$", "minimum": 0,
                    "minLength": 1, "maximum": MAX_INT, "format": "int32"}
metadata = {"type": "object",
            "patternProperties": {r"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": "string", "maxLength": 255}},
            "additionalProperties": False}

# Files to inject into the guest (create and rebuild, before 2.57).
personality = {"type": "array", "items": {
    "type": "object", "properties": {"path": {"type": "string"},
                                     "contents": {"type": "string", "format": "base64"}},
    "additionalProperties": False}}



def to_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "on", "yes", "y", "t")


def obj(properties, required=(), additional=False):
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": additional}
