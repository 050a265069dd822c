"""Goals and strategies (the Infrastructure Optimization API's catalog).

Each strategy names its goal, its parameters as a JSON schema (shown as the
strategy's ``parameters_spec`` and used to validate an audit's parameters)
and how it chooses the hosts to empty and the hosts allowed to receive
(``scope(params, fleet)``). Where the servers go is the planner's business
(``novella/optimize/planner.py``).
"""
import uuid

import jsonschema

_NAMESPACE = uuid.UUID("6f1d2e0a-7c43-4b8e-9a51-0d3c2b7e4f10")


def stable_uuid(kind, name):
    """Goals and strategies live in the code: their uuids are derived from their names."""
    return str(uuid.uuid5(_NAMESPACE, f"{kind}:{name}"))


GOALS = {
    "cluster_maintaining": "Cluster Maintaining",
    "hardware_maintenance": "Hardware Maintenance",
}

# Figures every plan reports (Watcher's efficacy specification shape).
EFFICACY_SPEC = [
    {"name": "instance_migrations_count", "description": "Servers the plan moves.",
     "unit": None, "schema": "Range(min=0, max=None, min_included=True, max_included=True)"},
    {"name": "live_migrations_count", "description": "Of which live migrations.",
     "unit": None, "schema": "Range(min=0, max=None, min_included=True, max_included=True)"},
    {"name": "resizes_count", "description": "Of which resizes to a mapped flavor.",
     "unit": None, "schema": "Range(min=0, max=None, min_included=True, max_included=True)"},
]

_PARALLEL = {
    "parallel_total": {"type": "integer", "minimum": 1, "default": 6,
                       "description": "Moves in flight at once, at most."},
    "parallel_per_node": {"type": "integer", "minimum": 1, "default": 2,
                          "description": "Moves in flight from one source host, at most."},
    "on_failure": {"type": "string", "enum": ["continue", "stop"], "default": "continue",
                   "description": "After a move failed on every destination tried: "
                                  "go on with the others, or stop the plan."},
}
_NAMES = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}

STRATEGIES = {
    "host_maintenance": {
        "display_name": "Host Maintenance Strategy",
        "goal": "cluster_maintaining",
        "parameters_spec": {
            "type": "object",
            "properties": {
                "maintenance_node": {"type": "string", "minLength": 1,
                                     "description": "The compute host to empty."},
                "backup_node": {"type": "string", "minLength": 1,
                                "description": "The one host to move its servers to "
                                               "(default: any host the scheduler allows)."},
                **_PARALLEL,
            },
            "required": ["maintenance_node"],
            "additionalProperties": False,
        },
    },
    "zone_migration": {
        "display_name": "Zone migration",
        "goal": "hardware_maintenance",
        "parameters_spec": {
            "type": "object",
            "properties": {
                "compute_nodes": {
                    "type": "array", "minItems": 1,
                    "items": {"type": "object",
                              "properties": {"src_node": {"type": "string", "minLength": 1},
                                             "dst_node": {"type": "string", "minLength": 1}},
                              "required": ["src_node"], "additionalProperties": False},
                    "description": "Source hosts to empty, each with an optional destination."},
                "priority": {
                    "type": "object",
                    "properties": {
                        "project": {"type": "array", "items": {"type": "string"}},
                        "compute_node": {"type": "array", "items": {"type": "string"}},
                        "compute": {"type": "array", "items": {
                            "type": "string",
                            "enum": ["vcpu_num", "mem_size", "disk_size", "created_at"]}},
                    },
                    "additionalProperties": False,
                    "description": "Which servers move first: projects and hosts in the "
                                   "order listed, then the largest (or oldest) first."},
                **_PARALLEL,
            },
            "required": ["compute_nodes"],
            "additionalProperties": False,
        },
    },
    "cell_drain": {
        "display_name": "Cell, zone or aggregate drain",
        "goal": "hardware_maintenance",
        "parameters_spec": {
            "type": "object",
            "properties": {
                "source_cell": {"type": "string", "minLength": 1,
                                "description": "The cell to empty (name or uuid)."},
                "source_aggregate": {"type": "string", "minLength": 1,
                                     "description": "Or the host aggregate to empty."},
                "source_zone": {"type": "string", "minLength": 1,
                                "description": "Or the availability zone to empty."},
                "target_cells": dict(_NAMES, description="Cells that receive "
                                     "(default: every other cell)."),
                "target_aggregates": dict(_NAMES, description="Or aggregates that receive."),
                "target_zones": dict(_NAMES, description="Or availability zones that receive."),
                "flavor_map": {"type": "object",
                               "additionalProperties": {"type": "string", "minLength": 1},
                               "description": "Flavor name or id -> the flavor its servers "
                                              "are resized to on the way."},
                **_PARALLEL,
            },
            "oneOf": [{"required": ["source_cell"]}, {"required": ["source_aggregate"]},
                      {"required": ["source_zone"]}],
            "additionalProperties": False,
        },
    },
}


class InvalidParameters(ValueError):
    """An audit's parameters do not fit its strategy (the message says how)."""


def validate(strategy, params):
    """``params`` with the defaults filled in; InvalidParameters when they do not fit."""
    spec = STRATEGIES[strategy]["parameters_spec"]
    if not isinstance(params, dict):
        raise InvalidParameters("parameters must be an object")
    try:
        jsonschema.validate(params, spec)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        if exc.validator == "oneOf" and not where:
            raise InvalidParameters(
                f"{strategy} needs exactly one of source_cell, source_aggregate, source_zone")
        raise InvalidParameters(f"Invalid parameter {where or strategy}: {exc.message}")
    out = {k: v["default"] for k, v in spec["properties"].items() if "default" in v}
    out.update(params)
    return out


def goal_of(strategy):
    return STRATEGIES[strategy]["goal"]


def strategies_of(goal):
    return [name for name, s in STRATEGIES.items() if s["goal"] == goal]


# -- scope: which hosts are emptied, which may receive --------------------------------

class ScopeError(ValueError):
    """A parameter names a cell, host, aggregate or zone that does not exist."""


def scope(strategy, params, fleet):
    """(source hosts, allowed destinations, {source host: its own destination or None}).

    ``allowed destinations`` is a set of hosts, or None for any host not emptied.
    """
    if strategy == "host_maintenance":
        source = params["maintenance_node"]
        fleet.require_hosts([source] + ([params["backup_node"]] if "backup_node" in params
                                        else []))
        backup = params.get("backup_node")
        return [source], ({backup} if backup else None), {source: backup}
    if strategy == "zone_migration":
        pairs = {}
        for pair in params["compute_nodes"]:
            pairs[pair["src_node"]] = pair.get("dst_node")
        fleet.require_hosts(list(pairs) + [d for d in pairs.values() if d])
        targets = None if any(d is None for d in pairs.values()) else set(pairs.values())
        return list(pairs), targets, pairs
    # cell_drain
    if "source_cell" in params:
        sources = fleet.cell_hosts(fleet.cell(params["source_cell"]))
    elif "source_aggregate" in params:
        sources = fleet.aggregate_hosts(params["source_aggregate"])
    else:
        sources = fleet.zone_hosts(params["source_zone"])
    if "target_cells" in params:
        targets = set()
        for name in params["target_cells"]:
            targets |= set(fleet.cell_hosts(fleet.cell(name)))
    elif "target_aggregates" in params:
        targets = set()
        for name in params["target_aggregates"]:
            targets |= set(fleet.aggregate_hosts(name))
    elif "target_zones" in params:
        targets = set()
        for name in params["target_zones"]:
            targets |= set(fleet.zone_hosts(name))
    elif "source_cell" in params:
        source_cell = fleet.cell(params["source_cell"])
        targets = {h for h, c in fleet.host_cells.items() if c.uuid != source_cell.uuid}
    else:
        targets = None
    return sorted(sources), targets, {h: None for h in sources}
