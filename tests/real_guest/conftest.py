"""Real guests under TCG: the guest image built once per test process.

The QEMU and image-building tools come from README.md's Debian packages. When
they are missing these tests skip with the reason, and fail when ``CI=true``
(tests/backends.py).
"""
import shutil

import pytest

from novella.virt import guest_image
from tests.backends import _unavailable


def require_tools():
    missing = guest_image.missing_tools() + [
        t for t in ("qemu-system-x86_64", "xorriso") if shutil.which(t) is None]
    try:
        guest_image.find_kernel()
    except guest_image.GuestImageError as exc:
        missing.append(str(exc))
    if missing:
        _unavailable("QEMU and the guest image's tools", "missing " + ", ".join(missing))


@pytest.fixture(scope="session")
def built_guest(tmp_path_factory):
    require_tools()
    return guest_image.build(str(tmp_path_factory.mktemp("guest-image")))
