"""Host filters: named plugins, one per file, each with ``host_passes(host_state, spec)``.

``applies(spec)`` tells whether a filter has anything to check for a request
at all (no zone asked, no server group, ...); one that has not is skipped
rather than asked for every candidate host, which would pass them all.

A filter is a subclass of BaseHostFilter in any module of this package; its
class name is the name ``[filter_scheduler] enabled_filters`` lists. Adding
a filter is adding a file.
"""
import importlib
import pkgutil


class BaseHostFilter:
    """Decide whether one host can take the request spec (a dict)."""

    def __init__(self, conf, api_db=None):
        self.conf = conf
        self.api_db = api_db  # the API database, for a filter that reads servers

    def applies(self, spec):
        """False when host_passes would be True for every host, whatever it is."""
        return True

    def host_passes(self, host_state, spec):
        raise NotImplementedError

    def filter_all(self, hosts, spec):
        """The hosts that pass, in their order: ``host_passes`` for each. A
        filter whose check is a lookup or two answers in one pass instead
        (as long as its ``host_passes`` is its own)."""
        passes = self.host_passes
        return [h for h in hosts if passes(h, spec)]


def all_filters():
    """{class name: class} of every filter plugin in this package."""
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    found = {}
    todo = list(BaseHostFilter.__subclasses__())
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def load_filters(conf, names, api_db=None):
    """Instances of the named filters, in the given order."""
    available = all_filters()
    unknown = [n for n in names if n.rsplit(".", 1)[-1] not in available]
    if unknown:
        raise ValueError(f"unknown scheduler filters: {', '.join(unknown)}")
    return [available[n.rsplit(".", 1)[-1]](conf, api_db) for n in names]
