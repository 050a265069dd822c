"""Cleanup after a failure, which must neither hide the error being handled
nor stop the cleanup steps after it."""
import contextlib
import logging

LOG = logging.getLogger(__name__)


@contextlib.contextmanager
def step(what):
    """Run one cleanup step; a failure is logged, never raised."""
    try:
        yield
    except Exception:  # noqa: BLE001 - logged; the caller carries on
        LOG.exception("cleanup step %s failed", what)
