"""Helpers the plotters share: means with standard errors, varying coordinates, lines per series."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctxlens.core.declared_names import NAMES
from ctxlens.core.errors import CtxlensError
from ctxlens.report.figures import legend, style
from ctxlens.row_access import declared_names

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ctxlens.report.registry import Context


def col(df: pd.DataFrame, name: str) -> pd.Series:
    """Column ``name``, or all-missing when the rows lack it; a name that is neither a column of ``df`` nor
    declared by an experiment whose rows it holds raises (``ctxlens.row_access``: a misspelled column
    would otherwise plot as missing)."""
    if name in df.columns:
        return df[name]
    found = [str(e) for e in df["experiment"].dropna().unique()] if "experiment" in df.columns else []
    if found and not any(name in declared_names(e) for e in found if e in NAMES):
        if all(e in NAMES for e in found):
            raise CtxlensError(f"A plotter read column {name!r} of {', '.join(sorted(found))} rows, which no such "
                               "experiment declares; read a declared column, or declare it in the experiment's "
                               "columns=(...).")
    return pd.Series([None] * len(df), index=df.index, dtype=object)


def having(df: pd.DataFrame, **equal: object) -> pd.DataFrame:
    """Rows whose columns equal the given values (a missing column matches nothing)."""
    mask = pd.Series(True, index=df.index)
    for k, v in equal.items():
        mask &= col(df, k) == v
    return df[mask]


def numeric(df: pd.DataFrame, *names: str) -> pd.DataFrame:
    out = df.copy()
    for n in names:
        out[n] = pd.to_numeric(col(out, n), errors="coerce")
    return out


def varying(df: pd.DataFrame, candidates: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    """The candidate columns present in ``df`` that take more than one value."""
    return [c for c in candidates if c in df.columns and c not in exclude
            and df[c].astype(str).nunique(dropna=False) > 1]


def mean_sem(df: pd.DataFrame, by: Sequence[str], value: str) -> pd.DataFrame:
    """Per group of ``by``: mean of ``value``, its standard error (None for one value) and n.
    Rows without a value are skipped."""
    by = list(by)
    data = numeric(df, value).dropna(subset=[value])
    if data.empty:
        return pd.DataFrame(columns=[*by, value, "sem", "n"])
    g = data.groupby(by, dropna=False, sort=True)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["sem"] = [s / math.sqrt(n) if n > 1 and np.isfinite(s) else None for s, n in zip(out["std"], out["count"])]
    out = out.rename(columns={"mean": value, "count": "n"}).drop(columns="std")
    return out[[*by, value, "sem", "n"]]


def describe(keys: Sequence[str], values: Sequence[object]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in zip(keys, values))


def groups(df: pd.DataFrame, by: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
    """(key tuple, rows) per group in a stable order (series in order of appearance); the keys are pandas'
    cell values (Any: pandas is untyped here)."""
    if not by:
        yield (), df
        return
    for key, g in df.groupby(list(by), dropna=False, sort=False):
        yield (key if isinstance(key, tuple) else (key,)), g


def draw_lines(ax: Axes, data: pd.DataFrame, x: str, y: str, ctx: Context, styles: Sequence[str] = (), *,
               yerr: str | None = None, label: bool = True, **kw: Any) -> None:
    """One line per (series, styles...): colour from the series, style from the other keys; ``kw``: more
    properties of matplotlib's ``errorbar`` lines (``linestyle``, ``markersize``, ...)."""
    style_keys = sorted({tuple(k) for k, _ in groups(data, styles)}, key=str)
    for (series, *rest), g in groups(data, ["series", *styles]):
        g = g.sort_values(x)
        st = style(style_keys.index(tuple(rest))) if styles else style(0)
        name = series + (f" ({describe(styles, rest)})" if styles else "")
        err = None
        if yerr and yerr in g.columns:
            err = pd.to_numeric(g[yerr], errors="coerce").fillna(0).to_numpy()
        ax.errorbar(g[x].to_numpy(dtype=float), g[y].to_numpy(dtype=float), yerr=err, color=ctx.color(series),
                    label=name if label else None, capsize=2 if err is not None else 0, **{**st, **kw})


def finish(ax: Axes, xlabel: str, ylabel: str, title: str | None = None, show_legend: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if show_legend:
        legend(ax)


def mark_train_length(ax: Axes, df: pd.DataFrame) -> None:
    """A grey dotted vertical line at the training length, when the rows carry one."""
    for t in sorted({v for v in col(df, "train_length").dropna().unique()}):
        ax.axvline(float(t), color="0.5", linestyle=":", linewidth=1)
        ax.annotate("train length", (float(t), 1), xycoords=("data", "axes fraction"), fontsize=6,
                    color="0.4", ha="right", va="top", rotation=90)
