"""Experiment registry: name -> Experiment declaration, with a suggestion on a typo.

An experiment is a module of ``ctxlens.experiments`` that calls ``register``; the registry
imports every module of the package once, on first use, and keeps what registered.
"""

from __future__ import annotations

from ctxlens.core.errors import CtxlensError
from ctxlens.core.papers import PAPERS
from ctxlens.core.registry import Registry
from ctxlens.experiments.base import (  # noqa: F401  (the declaration's vocabulary, for experiment modules)
    DEMO_GEOMETRY,
    DEMO_ROPE,
    DEMO_TASK,
    EXTRAPOLATE,
    SMOKE_SEQUENCES,
    DemoStep,
    Experiment,
    Smoke,
    T,
    summary,
)


def _load_builtin() -> None:
    """Import every module of ``ctxlens.experiments``; each experiment module registers itself."""
    import importlib
    import pkgutil

    import ctxlens.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"ctxlens.experiments.{info.name}")


EXPERIMENTS: Registry[Experiment] = Registry("experiment", load=_load_builtin)


def register(experiment: Experiment) -> Experiment:
    """Add a declaration; its paper id must be one of ``ctxlens.core.papers.PAPERS`` (or "")."""
    if experiment.paper:
        PAPERS[experiment.paper]  # an unknown id raises with the registry's suggestion
    if experiment.smoke.at_length is None and not experiment.smoke.unmeasured:
        raise CtxlensError(f"Experiment {experiment.name!r} declares neither smoke.at_length nor why it has none; "
                           "give one of them.")
    for step in experiment.demo:
        if step.models not in ("zoo", "rope", "own") or (step.models == "own") == experiment.loads_model:
            raise CtxlensError(f"Experiment {experiment.name!r} has a demo step on models {step.models!r}; use 'zoo' "
                               "or 'rope' for one that loads a model, 'own' for one that trains its own.")
    return EXPERIMENTS.add(experiment.name, experiment)


def get_experiment(name: str) -> Experiment:
    return EXPERIMENTS[name]


def experiments() -> dict[str, Experiment]:
    return EXPERIMENTS.as_dict()


def by_paper() -> list[Experiment]:
    """Every experiment, by paper (in ``PAPERS`` order; those citing none last), then by name."""
    order = {paper: i for i, paper in enumerate(PAPERS)}
    return sorted(EXPERIMENTS.as_dict().values(), key=lambda e: (order.get(e.paper, len(order)), e.name))
