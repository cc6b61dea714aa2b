"""One plotting function per experiment name.

A plotter takes the rows of one experiment (a DataFrame with a ``series`` column: the model, or
``model (run)`` when one model appears in several runs of the experiment) and a ``Context``, and
returns ``Panel``s. ``metrics`` names the columns whose missing values are reported as warnings
(the runner stores NaN/inf as null). Experiments without a plotter get the generic table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.report.figures import Palette


@dataclass
class Context:
    palette: Palette
    threshold: float  # RULER effective-length threshold (score, percent)

    def color(self, series: str) -> str:
        return self.palette.color(series)


@dataclass(frozen=True)
class Plotter:
    name: str
    fn: Callable
    title: str
    paper: str
    metrics: tuple[str, ...] = ()


PLOTTERS: dict[str, Plotter] = {}
_MODULES = ("geometry", "scaling", "tasks", "rope")


def plotter(name: str, *, title: str, paper: str, metrics: tuple[str, ...] = ()):
    def deco(fn):
        PLOTTERS[name] = Plotter(name, fn, title, paper, metrics)
        return fn

    return deco


def plotters() -> dict[str, Plotter]:
    import importlib

    for module in _MODULES:
        importlib.import_module(f"ctxlens.report.plots.{module}")
    return PLOTTERS
