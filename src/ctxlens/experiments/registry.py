"""Experiment registry: name -> Experiment declaration, with a suggestion on a typo.

An experiment is a module of ``ctxlens.experiments`` that calls ``register`` once. On first use
the registry imports every module of the package but ``HELPERS`` (found with ``pkgutil``, none
listed by hand) and checks that each declared exactly one experiment (the one whose ``run`` it
defines): a new module that declares none, or two, stops every lookup with one sentence naming it.
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
from ctxlens.experiments.columns import (  # noqa: F401  (the declaration's vocabulary, for experiment modules)
    ACCS,
    BOS,
    COMPRESSION_RATE,
    CONDITION,
    CORRELATION,
    DISTANCE_BINS,
    FITS,
    FLAG,
    FRACTION,
    KIND,
    LENGTH,
    NLL,
    ROPE_LAYER,
    ROPE_UNIT,
    SAMPLE,
    SEED,
    SOURCE,
    TASK_ROWS,
    TRAINING,
    TRANSFORM,
    WINDOWS,
    Column,
    N,
    declare,
    pick,
)

HELPERS = ("base", "catalog", "columns", "registry")  # the modules of ctxlens.experiments that declare no experiment


def load_builtin() -> None:
    """Import every experiment module of ``ctxlens.experiments``; each must register exactly one."""
    EXPERIMENTS.load_package(
        "ctxlens.experiments", HELPERS, origin=lambda e: e.run.__module__, most=1,
        fix="end it with register(Experiment(...)) as the README's 'Adding an experiment' shows, "
            "or name it in HELPERS of ctxlens.experiments.registry if it is a helper")


EXPERIMENTS: Registry[Experiment] = Registry("experiment", load=load_builtin)


def register(experiment: Experiment) -> Experiment:
    """Add a declaration; its paper id must be one of ``ctxlens.core.papers.PAPERS`` (or ""), and it
    must declare its rows' columns."""
    if experiment.paper:
        PAPERS[experiment.paper]  # an unknown id raises with the registry's suggestion
    if experiment.smoke.at_length is None and not experiment.smoke.unmeasured:
        raise CtxlensError(f"Experiment {experiment.name!r} declares neither smoke.at_length nor why it has none; "
                           "give one of them.")
    for step in experiment.demo:
        if step.models not in ("zoo", "rope", "own") or (step.models == "own") == experiment.loads_model:
            raise CtxlensError(f"Experiment {experiment.name!r} has a demo step on models {step.models!r}; use 'zoo' "
                               "or 'rope' for one that loads a model, 'own' for one that trains its own.")
    if not experiment.columns:
        raise CtxlensError(f"Experiment {experiment.name!r} declares no columns; list its rows' columns in "
                           "columns=(...) (ctxlens.core.columns.Column: name, type, unit, meaning).")
    experiment.declared  # noqa: B018 - a column declared twice, differently, raises here
    return EXPERIMENTS.add(experiment.name, experiment)


def get_experiment(name: str) -> Experiment:
    return EXPERIMENTS[name]


def experiments() -> dict[str, Experiment]:
    return EXPERIMENTS.as_dict()


def by_paper() -> list[Experiment]:
    """Every experiment, by paper (in ``PAPERS`` order; those citing none last), then by name."""
    order = {paper: i for i, paper in enumerate(PAPERS)}
    return sorted(EXPERIMENTS.as_dict().values(), key=lambda e: (order.get(e.paper, len(order)), e.name))
