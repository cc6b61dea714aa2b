"""Named types for what an experiment's procedure passes around: planned units, rows, the model's cache.

An experiment's ``plan(config)`` returns a list of ``Unit``; the runner runs each through
``run(lm, config, unit, cache)``, which returns the unit's ``Row`` list, and asks ``work(config, unit)``
how many tokens it processes (``ctxlens.experiments.base``). "Unit" is a unit of work here; the unit a
column's numbers count in is ``Column.unit`` (``ctxlens.core.columns``).

Plain aliases, so a unit, a row and a cache stay the dicts they always were: the types only name
them (and say their keys are column names) for readers and for mypy. Torch-free.
"""

from __future__ import annotations

from typing import Any, TypeAlias

# A planned unit, coordinate -> JSON value: ``plan`` writes it, the runner keys rows by it, ``run``/``work`` read it.
Unit: TypeAlias = dict[str, Any]
# One measurement, column -> value: ``run`` writes it; the runner checks and commits it; findings and report read it.
Row: TypeAlias = dict[str, Any]
# Per-model scratch (str or tuple keys): the runner makes one per model; ``run`` fills and reads it across units.
Cache: TypeAlias = dict[Any, Any]
