"""Checks a run makes before any model loads, so a mistake answers in about a second (issue 33 part 4).

``make_config`` (``ctxlens.core.options``) already refuses an unknown option name or a value of the
wrong type with a "did you mean". Some values are only read once a unit runs: a text source, the
needle placement, the task data files, the generation backend; ``check_values`` checks those from
the config alone. ``check_lengths`` refuses a planned length beyond the model's positions from its
config (``ModelInfo``, read without the weights), naming the length the user asked for. ``check``
does both for one experiment's options; ``ctxlens run`` calls it, and ``ctxlens profile`` can call
it for each part it plans.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ctxlens.core.errors import CtxlensError, clip, unknown
from ctxlens.core.units import Unit
from ctxlens.experiments.base import Experiment, make_config

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from ctxlens.lm.info import ModelInfo

TASK_FILES = ("squad", "hotpotqa")  # "builtin" or a local file / folder


def check(experiment: str | Experiment, options: dict[str, object]) -> DataclassInstance:
    """The experiment's config from ``options``, after every check that needs no model: option
    names and types (``make_config``), then the values read only at run time (``check_values``)."""
    from ctxlens.experiments.registry import get_experiment

    exp = get_experiment(experiment) if isinstance(experiment, str) else experiment
    config = make_config(exp.Config, options)
    check_values(config)
    return config


def check_values(config: DataclassInstance) -> None:
    """Raise, before any model loads, on an option value a unit would refuse only once it runs:
    a text source (``source``, ``*_source``) that does not exist, an unknown needle ``placement``,
    a missing task data file, a generation ``backend`` that cannot start here."""
    for name in vars(config):
        value = getattr(config, name)
        if name in TASK_FILES:
            _check_task_file(name, value)
        elif name == "haystack_source" and value == "builtin":  # the synthetic corpus's essays
            continue
        elif (name == "source" or name.endswith("_source")) and isinstance(value, str):
            _check_source(name, value)
    placement = getattr(config, "placement", None)
    if placement is not None:
        from ctxlens.tasks.niah import PLACEMENTS

        if placement not in PLACEMENTS:
            raise unknown("needle placement", str(placement), PLACEMENTS)
    _check_backend(config)


def _check_source(name: str, spec: str) -> None:
    """A text source that opens without reading its documents (hub datasets are left to the run:
    checking one needs the network)."""
    from ctxlens.data.sources import open_source

    if spec.strip().startswith("hf:"):
        return
    try:
        open_source(spec)
    except CtxlensError as err:
        raise CtxlensError(f"--{name.replace('_', '-')}: {err}") from None


def _check_task_file(name: str, value: object) -> None:
    if isinstance(value, str) and value != "builtin" and not Path(value).expanduser().exists():
        raise CtxlensError(f"--{name.replace('_', '-')} {clip(value)} does not exist; give an existing file or "
                           "folder, or builtin.")
    path = Path(value).expanduser() if isinstance(value, str) and value != "builtin" else None
    if path is not None and not path.is_file() and not path.is_dir():
        raise CtxlensError(f"--{name.replace('_', '-')} {clip(value)} is not a regular file (a FIFO, device or "
                           "socket); give a file.")


def _check_backend(config: DataclassInstance) -> None:
    backend = getattr(config, "backend", None)
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise CtxlensError("The vllm backend needs the vllm package, which is not installed; install it on a GPU "
                           "machine (pip install vllm) or use --backend transformers.")
    if backend == "openai" and not getattr(config, "api_base", ""):
        raise CtxlensError("The openai backend needs --api-base, e.g. http://localhost:8000/v1.")


def planned_lengths(config: DataclassInstance, units: Iterable[Unit]) -> list[int]:
    """The lengths a plan asks for: its units' ``length`` (the length the user gave, not a prompt
    length less a generation budget), else the config's ``lengths``."""
    found = {u["length"] for u in units if isinstance(u.get("length"), int) and not isinstance(u["length"], bool)}
    if not found:
        given = getattr(config, "lengths", None)
        found = {n for n in given or [] if isinstance(n, int)} if isinstance(given, list) else set()
    return sorted(found)


def check_lengths(spec: str, info: ModelInfo | None, lengths: Iterable[int], extrapolate: bool) -> None:
    """Raise, from the model's config alone, when a length asked for exceeds what ``info``'s
    positions allow (``ModelInfo.allows``): one sentence naming the length, the limit and the fix."""
    if info is None or info.max_positions is None:
        return
    beyond = [n for n in lengths if not info.allows(n, extrapolate)]
    if not beyond:
        return
    limit = info.max_positions
    asked = ", ".join(map(str, beyond[:6])) + (" ..." if len(beyond) > 6 else "")
    if info.hard_limit:
        fix = f"use lengths up to {limit} (its positions are learned: they cannot extrapolate)"
    else:
        fix = (f"use lengths up to {limit}, change its RoPE (--rope-theta / --rope-scaling), or pass "
               "--allow-extrapolation")
    raise CtxlensError(f"{clip(spec, 120)} takes at most {limit} positions but the plan asks for length {asked}; "
                       f"{fix}.")
