"""oslo.policy defaults of Novella's APIs, with the reference's rule names.

``compute.list_rules()`` feeds the Compute API's enforcer,
``placement.list_rules()`` the Placement API's. Operators override any rule
in a policy file exactly as they would for the reference.
"""
import threading
import time

from oslo_policy import policy

# How often an enforcer looks for a new or changed policy file.
POLICY_FILE_CHECK_SECONDS = 1.0


class Enforcer(policy.Enforcer):
    """oslo.policy's Enforcer, looking for policy file changes at most once a second.

    oslo.policy looks on every check, and without a policy file it searches
    every config directory for one each time: several stat calls for each
    API request. A changed file still takes effect within a second.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._files_checked = None
        self._check_lock = threading.Lock()

    def clear(self):
        super().clear()
        self._files_checked = None  # the next check loads everything again

    def load_rules(self, force_reload=False):
        now = time.monotonic()
        with self._check_lock:
            due = (force_reload or self._files_checked is None
                   or now - self._files_checked >= POLICY_FILE_CHECK_SECONDS)
            if due:
                self._files_checked = now
        if due:
            super().load_rules(force_reload)


def make_enforcer(conf, rules):
    """An Enforcer over ``conf`` with ``rules`` registered as defaults."""
    enforcer = Enforcer(conf)
    enforcer.register_defaults(rules)
    return enforcer
