"""One plotting function per experiment name.

A plotter takes the rows of one experiment (a DataFrame with a ``series`` column: the model, or
``model (run)`` when one model appears in several runs of the experiment) and a ``Context``, and
returns ``Panel``s. ``metrics`` names the columns whose missing values are reported as warnings
(the runner stores NaN/inf as null). Experiments without a plotter get the generic table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.core.registry import Registry
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


def _load_plots() -> None:
    """Import every module of ``ctxlens.report.plots``; each plotter registers itself on import."""
    import importlib
    import pkgutil

    import ctxlens.report.plots as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"ctxlens.report.plots.{info.name}")


PLOTTERS: Registry[Plotter] = Registry("plotter", load=_load_plots)


def plotter(name: str, *, title: str, paper: str, metrics: tuple[str, ...] = ()):
    """Decorator: register ``fn`` as the plotter of experiment ``name``."""
    def deco(fn):
        PLOTTERS.add(name, Plotter(name, fn, title, paper, metrics))
        return fn

    return deco


def plotters() -> dict[str, Plotter]:
    """Every plotter by experiment name (a copy)."""
    return PLOTTERS.as_dict()
