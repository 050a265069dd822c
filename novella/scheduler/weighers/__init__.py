"""Host weighers: named plugins, one per file, each with ``weigh(host_state, spec)``.

Each weigher's raw values are normalised to 0..1 over the candidate hosts,
multiplied by the weigher's ``[filter_scheduler] *_weight_multiplier``
(overridable per host by the same key in its aggregates' metadata) and
summed; the highest total wins. ``[filter_scheduler] weight_classes`` names
the enabled ones (``all`` for every plugin in this package).
"""
import importlib
import operator
import pkgutil

_AGGREGATES = operator.attrgetter("aggregates")


class BaseHostWeigher:
    multiplier_option = None  # the [filter_scheduler] option scaling this weigher

    def __init__(self, conf):
        self.conf = conf

    def applies(self, spec):
        """False when every host would weigh the same for this request (then
        the weigher adds nothing and is skipped)."""
        return True

    def weigh(self, host_state, spec):
        """The raw weight; larger is better before the multiplier."""
        raise NotImplementedError

    def weigh_all(self, hosts, spec):
        """The raw weights of ``hosts`` as floats, in their order: ``weigh``
        for each. A weigher reading one figure of the host state gives it
        in one pass instead (``weigh_all`` of the weighers in this package),
        as long as its ``weigh`` is its own. None: every host weighs the
        same (the weigher then adds nothing)."""
        weigh = self.weigh
        return [float(weigh(h, spec)) for h in hosts]

    def weight_multiplier(self, host_state, default=None):
        """``default``: the configured multiplier when the caller has already read it."""
        for value in sorted(host_state.metadata_values(self.multiplier_option)):
            try:
                return float(value)
            except ValueError:
                continue
        if default is not None:
            return default
        return getattr(self.conf.filter_scheduler, self.multiplier_option)


def all_weighers():
    """{class name: class} of every weigher plugin in this package."""
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    found = {}
    todo = list(BaseHostWeigher.__subclasses__())
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def load_weighers(conf, names):
    available = all_weighers()
    short = [n.rsplit(".", 1)[-1] for n in names]
    if any(n in ("all", "all_weighers") for n in short):
        return [available[n](conf) for n in sorted(available)]
    unknown = [n for n in short if n not in available]
    if unknown:
        raise ValueError(f"unknown scheduler weighers: {', '.join(unknown)}")
    return [available[n](conf) for n in short]


def weigh_hosts(weighers, hosts, spec):
    """Hosts sorted best first (stable for equal weights), with their weights."""
    totals = _totals(weighers, hosts, spec)
    if totals is None:
        return [(0.0, h) for h in hosts]
    order = sorted(range(len(hosts)), key=totals.__getitem__, reverse=True)
    return [(totals[i], hosts[i]) for i in order]


def weighed_hosts(weighers, hosts, spec):
    """``weigh_hosts`` without the weights: the hosts, best first."""
    totals = _totals(weighers, hosts, spec)
    if totals is None:
        return list(hosts)  # every host weighs 0: placement's order stands
    return [hosts[i] for i in sorted(range(len(hosts)), key=totals.__getitem__, reverse=True)]


def _totals(weighers, hosts, spec):
    """Each host's total weight, or None when every host weighs 0 (every
    weigher skipped or weighing all hosts alike). ``reverse=True`` keeps
    the order of equal totals, as sorting on the negated totals did."""
    totals = None
    if hosts:
        # Only a host in an aggregate can override a multiplier.
        in_aggregates = any(map(_AGGREGATES, hosts))
        for w in weighers:
            if not w.applies(spec):
                continue
            values = w.weigh_all(hosts, spec)
            if values is None:
                continue  # every host weighs the same: 0 once normalised
            lo, hi = min(values), max(values)
            if hi == lo:
                continue  # normalised, every host weighs 0
            span = hi - lo
            if totals is None:
                totals = [0.0] * len(hosts)
            # The option read once per request, not once per host (oslo.config lookups add up).
            default = getattr(w.conf.filter_scheduler, w.multiplier_option)
            if in_aggregates:
                for i, h in enumerate(hosts):
                    multiplier = w.weight_multiplier(h, default) if h.aggregates else default
                    totals[i] += multiplier * ((values[i] - lo) / span)
            else:
                totals = [t + default * ((v - lo) / span) for t, v in zip(totals, values)]
    return totals
