"""Matching a requested value against a host's, with the extra-spec operators.

``"<in> x"`` substring, ``"<all-in> a b"``, ``"<or> a <or> b"``, ``"s== x"``
and the other ``s``-prefixed string comparisons, ``"== n"``, ``"!= n"``,
``">= n"``, ``"<= n"`` and ``"= n"`` (at least n) numeric ones; a value
without operator must be equal.
"""
import operator

_NUMERIC = {"=": operator.ge, "==": operator.eq, "!=": operator.ne,
            ">=": operator.ge, "<=": operator.le}
_STRING = {"s==": operator.eq, "s!=": operator.ne, "s<": operator.lt, "s<=": operator.le,
           "s>": operator.gt, "s>=": operator.ge}


def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def match(value, req):
    """True when the host's ``value`` satisfies the requested ``req``."""
    if value is None:
        return False
    req = str(req).strip()
    words = req.split()
    if not words:
        return str(value) == req
    op = words[0]
    if op == "<in>" and len(words) >= 2:
        return " ".join(words[1:]) in str(value)
    if op == "<all-in>" and len(words) >= 2:
        have = value if isinstance(value, (list, set, tuple)) else str(value).split()
        return all(w in have for w in words[1:])
    if op == "<or>":
        return str(value) in [w for w in words if w != "<or>"]
    if op in _STRING and len(words) == 2:
        return _STRING[op](str(value), words[1])
    if op in _NUMERIC and len(words) == 2:
        a, b = _float(value), _float(words[1])
        return a is not None and b is not None and _NUMERIC[op](a, b)
    return str(value) == req
