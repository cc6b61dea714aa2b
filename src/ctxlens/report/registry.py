"""One plotting function per experiment name, and the order of the report's sections.

A plotter takes the rows of one experiment (a DataFrame with a ``series`` column: the model, or
``model (run)`` when one model appears in several runs of the experiment) and a ``Context``, and
returns ``Panel``s. ``metrics`` names the columns whose missing values are reported as warnings
(the runner stores NaN/inf as null). Experiments without a plotter get the generic table.

A plotter also declares the paper its experiment reproduces (``paper_id``, an id of
``ctxlens.core.papers.PAPERS``, the same as the experiment's declaration says: a test checks every
registered experiment against its plotter), and that places its section (``section_order``): the
papers in ``PAPERS`` order, those citing none after them, and within one paper the order its
plotters were declared in. So a new experiment's section lands with its paper, not last, and no
list of names is kept by hand. The report reads rows only and never imports the experiments
(``tests/test_layers.py``), so the place is declared here, beside the figure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.papers import PAPERS
from ctxlens.core.registry import Registry
from ctxlens.report.figures import Palette, Panel

if TYPE_CHECKING:
    import pandas as pd

    PlotFn = Callable[[pd.DataFrame, "Context"], list[Panel]]  # an experiment's rows -> its panels


@dataclass
class Context:
    palette: Palette
    threshold: float  # RULER effective-length threshold (score, percent)

    def color(self, series: str) -> str:
        return self.palette.color(series)


@dataclass(frozen=True)
class Plotter:
    name: str
    fn: PlotFn
    title: str
    paper: str  # the caption's citation: the paper's heading and where in it
    metrics: tuple[str, ...] = ()
    paper_id: str = ""  # the paper its experiment reproduces (``PAPERS``; "" for none): where its section goes


def _load_plots() -> None:
    """Import every module of ``ctxlens.report.plots``; each plotter registers itself on import."""
    import importlib
    import pkgutil

    import ctxlens.report.plots as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"ctxlens.report.plots.{info.name}")


PLOTTERS: Registry[Plotter] = Registry("plotter", load=_load_plots)


def plotter(name: str, *, title: str, paper: str, metrics: tuple[str, ...] = (),
            paper_id: str = "") -> Callable[[PlotFn], PlotFn]:
    """Decorator: register ``fn`` as the plotter of experiment ``name``; ``paper_id`` (an id of
    ``PAPERS``, as the experiment declares it) places its section among its paper's."""
    if paper_id:
        PAPERS[paper_id]  # an unknown id raises with the registry's suggestion

    def deco(fn: PlotFn) -> PlotFn:
        PLOTTERS.add(name, Plotter(name, fn, title, paper, metrics, paper_id))
        return fn

    return deco


def plotters() -> dict[str, Plotter]:
    """Every plotter by experiment name (a copy)."""
    return PLOTTERS.as_dict()


def section_order(experiments: Iterable[str]) -> list[str]:
    """``experiments`` in the report's order: those with a plotter by their paper (``PAPERS`` order, then
    those citing none), within a paper in the order their plotters were declared; then those without a
    plotter (the generic table), by name."""
    reg = plotters()
    papers = {paper: i for i, paper in enumerate(PAPERS)}
    declared = {name: i for i, name in enumerate(reg)}
    names = list(dict.fromkeys(experiments))
    plotted = sorted((e for e in names if e in reg),
                     key=lambda e: (papers.get(reg[e].paper_id, len(papers)), declared[e]))
    return plotted + sorted(e for e in names if e not in reg)
