"""Figures for the report: one colour per model, labelled axes with units, PNG + PDF files.

Figures are ``matplotlib.figure.Figure`` objects made without pyplot (no global state, no GUI
backend). Text is drawn literally (``text.parse_math`` off), so a ``$`` in a model name is just a
dollar sign. A ``Panel`` is one figure with the table of the numbers it plots.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import matplotlib
import numpy as np
from matplotlib.figure import Figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.image import AxesImage
    from matplotlib.typing import LineStyleType, RcKeyType

# Okabe & Ito's colour-blind safe palette, then the tab10 colours it lacks.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000",
           "#8c564b", "#7f7f7f", "#bcbd22", "#17becf", "#9467bd", "#d62728")
LINESTYLES: tuple[LineStyleType, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")

RC: dict[RcKeyType, Any] = {  # rc_context's argument: keys are matplotlib's rcParams names
    "text.parse_math": False,
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "savefig.dpi": 150,
    "pdf.fonttype": 42,
    "svg.fonttype": "none",
}


@dataclass
class Panel:
    """One figure of an experiment and the table of the numbers it plots."""

    name: str  # file stem, unique in a report
    title: str
    fig: Figure | None
    table: pd.DataFrame | None  # the plotted numbers
    caption: str = ""
    extra_tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # fits, effective lengths, ...


class Palette:
    """A fixed colour per series (model), assigned in order of first appearance."""

    def __init__(self, series: Iterable[str] = ()) -> None:
        self._colors: dict[str, str] = {}
        for s in series:
            self.color(s)

    def color(self, series: str) -> str:
        if series not in self._colors:
            self._colors[series] = PALETTE[len(self._colors) % len(PALETTE)]
        return self._colors[series]

    def items(self) -> list[tuple[str, str]]:
        return list(self._colors.items())


def figure(n: int, *, ncols: int | None = None, width: float = 3.3, height: float = 2.6,
           sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure with ``n`` axes in a grid (at most 3 per row by default) -> (fig, axes)."""
    ncols = ncols or min(n, 3)
    nrows = math.ceil(n / ncols)
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        axes: list[Axes] = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


class LineStyle(TypedDict):
    linestyle: LineStyleType
    marker: str


def style(i: int) -> LineStyle:
    """Line style and marker of the i-th value of a secondary coordinate (length, layer, ...)."""
    return {"linestyle": LINESTYLES[i % len(LINESTYLES)], "marker": MARKERS[i % len(MARKERS)]}


def legend(ax: Axes, **kw: Any) -> None:  # kw: matplotlib's Legend properties
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, frameon=False, **kw)


def log2_axis(ax: Axes, values: Iterable[float | None], axis: str = "x", base: float = 2) -> None:
    """Log scale with ticks at the values (lengths, sizes), when they are positive and spread."""
    vals = sorted({float(v) for v in values if v is not None and np.isfinite(v)})
    if len(vals) < 2 or vals[0] <= 0 or vals[-1] / vals[0] < 4:
        return
    set_log(ax, axis, base=base)
    ticks = vals if len(vals) <= 8 else vals[:: math.ceil(len(vals) / 8)]
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, [_tick(v) for v in ticks])


def set_log(ax: Axes, axis: str = "x", base: float = 10) -> None:
    """Log scale with plain-text tick labels (math text is off, so no 10^k notation)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=base)
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def integer_axis(ax: Axes, axis: str = "x") -> None:
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def _tick(v: float) -> str:
    if v >= 1024 and v % 1024 == 0:
        return f"{int(v // 1024)}K"
    return f"{v:g}"


def heatmap(ax: Axes, matrix: np.ndarray, xlabels: Sequence[object], ylabels: Sequence[object], *,
            vmin: float | None = None, vmax: float | None = None, cmap: str = "viridis", fmt: str = "{:.0f}",
            colorbar_label: str | None = None) -> AxesImage:
    """matrix [len(ylabels), len(xlabels)] as coloured cells with their values written in."""
    masked = np.ma.masked_invalid(np.asarray(matrix, dtype=float))
    im = ax.imshow(masked, aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xticks(range(len(xlabels)), [str(x) for x in xlabels])
    ax.set_yticks(range(len(ylabels)), [str(y) for y in ylabels])
    ax.grid(False)
    lo, hi = im.get_clim()
    for (i, j), v in np.ndenumerate(masked.filled(np.nan)):
        if np.isfinite(v):
            dark = (v - lo) / (hi - lo or 1) < 0.55
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=6,
                    color="white" if dark else "black")
    if colorbar_label:
        ax.figure.colorbar(im, ax=ax, label=colorbar_label, shrink=0.9)
    return im


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="png")
    return buf.getvalue()


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def save(fig: Figure, stem: Path) -> tuple[bytes, list[Path]]:
    """Write ``stem``.png and ``stem``.pdf; return the PNG bytes (for embedding) and the paths.

    Both go through ``core.files.atomic_write`` (an exclusive temporary file, never a link), so a
    planted ``*.tmp`` link or a link in a figure's place leaves its target untouched, and a full
    disk or read-only folder is one sentence."""
    from ctxlens.core import files

    png = png_bytes(fig)
    pdf = io.BytesIO()
    with matplotlib.rc_context(RC):
        fig.savefig(pdf, format="pdf", metadata={"Creator": "ctxlens report"})
    png_path, pdf_path = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, stem.parent, "create") or err from None
    files.atomic_write(png_path, png)
    files.atomic_write(pdf_path, pdf.getvalue())
    return png, [png_path, pdf_path]
