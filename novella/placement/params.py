"""Parsing of the query parameters shared by several handlers."""
import re

from novella.api import router
from novella.placement import base

MAX_AMOUNT = 2147483647   # the largest inventory total or max_unit placement stores
_FORM = "?resources=VCPU:2,MEMORY_MB:1024"


def resources(value):
    """``VCPU:2,MEMORY_MB:1024`` -> {"VCPU": 2, "MEMORY_MB": 1024}."""
    if value.strip() == "":
        raise base.bad_request(
            "Badly formed resources parameter. Expected resources query string "
            "parameter in form: %s. Got: empty string." % _FORM)
    out = {}
    for item in value.split(","):
        try:
            name, amount = item.split(":")
        except ValueError:
            raise base.bad_request(
                "Badly formed resources parameter. Expected resources query string "
                "parameter in form: %s. Got: %s." % (_FORM, item))
        try:
            amount = int(amount)
            if amount > MAX_AMOUNT:
                raise ValueError(amount)
        except ValueError:
            raise base.bad_request(
                "Requested resource %s expected positive integer amount. Got: %s."
                % (router.clip(name), router.clip(amount)))
        if amount < 1:
            raise base.bad_request(
                "Requested resource %s requires amount >= 1. Got: %d." % (name, amount))
        out[name] = amount
    return out


def traits_value(value, allow_forbidden=False, allow_any=False):
    """Parse one ``required`` value into ([set of any-of traits], {forbidden})."""
    bad = "Invalid query string parameters: "
    if value.startswith("in:"):
        if not allow_any:
            raise base.bad_request(
                bad + "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since "
                "microversion 1.39. Got: %s" % value)
        anyof = set(t.strip() for t in value[3:].split(","))
        if not all(anyof):
            raise base.bad_request(
                bad + "Expected 'required' parameter value of the form: "
                "in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: %s" % value)
        if any(t.startswith("!") for t in anyof):
            raise base.bad_request(
                bad + "The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support "
                "forbidden traits. Got: %s" % value)
        return [anyof], set()
    names = [t.strip() for t in value.split(",")]
    forbidden = {t[1:] for t in names if t.startswith("!")}
    form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
    if not all(names) or not all(forbidden):
        raise base.bad_request(
            bad + "Expected 'required' parameter value of the form: %s. "
            "Got an empty trait in: %s" % (form, value))
    if forbidden and not allow_forbidden:
        raise base.bad_request(
            bad + "Expected 'required' parameter value of the form: "
            "HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s" % value)
    return [{t} for t in names if not t.startswith("!")], forbidden


def traits(req, suffix=""):
    v = req.version
    values = req.GET.getall("required" + suffix)
    allow_any = v.matches((1, 39))
    if not allow_any:
        values = values[-1:]
    required, forbidden = [], set()
    for value in values:
        r, f = traits_value(value, v.matches((1, 22)), allow_any)
        required += r
        forbidden |= f
    return required, forbidden


def member_of(req, suffix=""):
    """Return ([set of any-of aggregates], {forbidden aggregates})."""
    v = req.version
    values = req.GET.getall("member_of" + suffix)
    if not v.matches((1, 24)) and len(values) > 1:
        raise base.bad_request("Multiple member_of%s parameters are not supported" % suffix)
    required, forbidden = [], set()
    for value in values:
        if "," in value and not value.startswith(("in:", "!in:")):
            raise base.bad_request(
                "Multiple values for 'member_of' must be prefixed with the 'in:' or "
                "'!in:' keyword using the valid microversion. Got: %s" % value)
        req_set, forb_set = set(), set()
        if value.startswith("!in:"):
            forb_set = set(value[4:].split(","))
        elif value.startswith("!"):
            forb_set = {value[1:]}
        elif value.startswith("in:"):
            req_set = set(value[3:].split(","))
        else:
            req_set = {value}
        for agg in req_set | forb_set:
            if not base.is_uuid(agg):
                raise base.bad_request(
                    "Invalid query string parameters: Expected 'member_of' parameter to "
                    "contain valid UUID(s). Got: %s" % agg)
        if req_set:
            required.append(req_set)
        if forb_set:
            if not v.matches((1, 32)):
                raise base.bad_request(
                    "Forbidden member_of%s parameters are not supported in the "
                    "specified microversion" % suffix)
            forbidden |= forb_set
    return required, forbidden


def in_tree(value):
    value = value.strip()
    if not base.is_uuid(value):
        raise base.bad_request(
            "Invalid query string parameters: Expected 'in_tree' parameter to be a "
            "format of uuid. Got: %s" % value)
    return value


def normal_uuid(value):
    import uuid
    return str(uuid.UUID(value))


GROUP_KEY = re.compile(r"^(resources|required|member_of|in_tree)([1-9][0-9]*)?$")
GROUP_KEY_1_33 = re.compile(r"^(resources|required|member_of|in_tree)([a-zA-Z0-9_-]{1,64})?$")
