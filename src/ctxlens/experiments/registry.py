"""Experiment registry: name -> Experiment, with a suggestion on a typo."""

from __future__ import annotations

from ctxlens.core.errors import unknown
from ctxlens.experiments.base import Experiment

EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    if experiment.name in EXPERIMENTS:
        raise ValueError(f"experiment {experiment.name!r} registered twice")
    EXPERIMENTS[experiment.name] = experiment
    return experiment


def get_experiment(name: str) -> Experiment:
    _load_builtin()
    if name not in EXPERIMENTS:
        raise unknown("experiment", name, EXPERIMENTS)
    return EXPERIMENTS[name]


def experiments() -> dict[str, Experiment]:
    _load_builtin()
    return dict(EXPERIMENTS)


_NOT_EXPERIMENTS = {"base", "registry"}


def _load_builtin() -> None:
    """Import every module of ``ctxlens.experiments`` once; each registers itself on import."""
    import importlib
    import pkgutil

    import ctxlens.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in _NOT_EXPERIMENTS and not info.name.startswith("_"):
            importlib.import_module(f"ctxlens.experiments.{info.name}")
