"""oslo.policy defaults of Novella's APIs, with the reference's rule names.

``compute.list_rules()`` feeds the Compute API's enforcer,
``placement.list_rules()`` the Placement API's. Operators override any rule
in a policy file exactly as they would for the reference.
"""
import threading
import time

from oslo_policy import _checks, _external, policy

# How often an enforcer looks for a new or changed policy file.
POLICY_FILE_CHECK_SECONDS = 1.0


# Decisions an enforcer remembers before it starts afresh (a bound on memory).
MAX_DECISIONS = 10000


class Enforcer(policy.Enforcer):
    """oslo.policy's Enforcer, looking for policy file changes at most once a
    second and remembering its decisions until the rules change.

    oslo.policy looks on every check, and without a policy file it searches
    every config directory for one each time: several stat calls for each
    API request. A changed file still takes effect within a second.

    A decision depends only on the rules, the target and the credentials, so
    it is remembered by those. Evaluating a rule from scratch inspects each
    check's signature, several times per API request. Rules that ask a
    remote server (``http:``/``https:`` checks) are asked every time.
    """

    def __init__(self, *args, **kwargs):
        self._decisions = {}
        self._remember = True
        super().__init__(*args, **kwargs)
        self._files_checked = None
        self._check_lock = threading.Lock()

    def clear(self):
        super().clear()
        self._files_checked = None  # the next check loads everything again
        self._decisions = {}

    def set_rules(self, *args, **kwargs):
        super().set_rules(*args, **kwargs)
        self._decisions = {}
        self._remember = not any(_calls_out(check) for check in self.rules.values())

    def _due(self, force_reload):
        return (force_reload or self._files_checked is None
                or time.monotonic() - self._files_checked >= POLICY_FILE_CHECK_SECONDS)

    def load_rules(self, force_reload=False):
        if not self._due(force_reload):
            return
        # Loaded under the lock: a thread that comes while the first load runs
        # waits for the rules instead of deciding (and remembering) without them.
        with self._check_lock:
            if self._due(force_reload):
                super().load_rules(force_reload)
                self._files_checked = time.monotonic()

    def enforce(self, rule, target, creds, do_raise=False, exc=None, *args, **kwargs):
        self.load_rules()
        key = _decision_key(rule, target, creds) if self._remember else None
        if key is not None:
            known = self._decisions.get(key)
            if known is not None and (known or not do_raise):
                return known
        result = super().enforce(rule, target, creds, do_raise, exc, *args, **kwargs)
        if key is not None:
            if len(self._decisions) >= MAX_DECISIONS:
                self._decisions = {}
            self._decisions[key] = result
        return result


def _frozen(mapping):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in mapping.items()))


def _decision_key(rule, target, creds):
    """What a decision depends on, hashable; None when it cannot be (then not remembered)."""
    if not isinstance(rule, str):
        return None
    values = creds.to_policy_values() if hasattr(creds, "to_policy_values") else creds
    try:
        key = (rule, _frozen(target or {}), _frozen(values))
        hash(key)
    except TypeError:  # a value that is a dict or another unhashable
        return None
    return key


def _calls_out(check):
    """Whether a check tree asks a remote server."""
    if isinstance(check, (_external.HttpCheck, _external.HttpsCheck)):
        return True
    children = getattr(check, "rules", None) or [getattr(check, "rule", None)]
    return any(_calls_out(c) for c in children if isinstance(c, _checks.BaseCheck))


def make_enforcer(conf, rules):
    """An Enforcer over ``conf`` with ``rules`` registered as defaults."""
    enforcer = Enforcer(conf)
    enforcer.register_defaults(rules)
    return enforcer
