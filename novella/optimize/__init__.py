"""Drains: goals and strategies (``strategies``), the plan that proves it fits
(``planner``) and its durable execution (``applier``). The HTTP API over them
is ``novella/api/optimize/app.py`` (docs/drain.md)."""
