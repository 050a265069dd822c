"""Microversion negotiation for the Compute API.

A request names its version in ``OpenStack-API-Version: compute X.Y`` or the
older ``X-OpenStack-Nova-API-Version: X.Y``; none means the minimum,
``latest`` the maximum. Versions outside [MIN, MAX] are refused with 406.
"""
import functools
import re

import microversion_parse

from novella.api.compute import errors

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 104)
SERVICE_TYPE = "compute"
HEADER = "OpenStack-API-Version"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
VARY = f"{HEADER}, {LEGACY_HEADER}"

_FORMAT = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


def fmt(version):
    return "%d.%d" % version


@functools.lru_cache(maxsize=256)
def parse(text):
    """'2.53' -> (2, 53); BadRequest for anything else."""
    m = _FORMAT.match(text or "")
    if not m:
        raise errors.BadRequest(f"API Version String {text} is of invalid format. "
                                "Must be of format MajorNum.MinorNum.")
    return int(m.group(1)), int(m.group(2))


def negotiate(headers):
    """The version a request asks for, checked against [MIN, MAX]."""
    text = microversion_parse.get_version(headers, service_type=SERVICE_TYPE,
                                          legacy_headers=[LEGACY_HEADER])
    if text is None:
        return MIN_VERSION
    if text.strip().lower() == "latest":
        return MAX_VERSION
    version = parse(text.strip())
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise errors.NotAcceptable(
            f"Version {fmt(version)} is not supported by the API. "
            f"Minimum is {fmt(MIN_VERSION)} and maximum is {fmt(MAX_VERSION)}.")
    return version


def response_headers(version):
    return {HEADER: f"{SERVICE_TYPE} {fmt(version)}", LEGACY_HEADER: fmt(version),
            "Vary": VARY}
