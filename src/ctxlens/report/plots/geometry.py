"""Figures of the geometry paper ("How much do contextualized representations encode long-range context?").

ACCS / self-similarity / anisotropy vs layer (Section 4, Figure 1), vs relative boundary
(Section 5.2, Figure 4), vs length (Section 5.3, Figure 5); anisotropy vs prefix compression
rate (Section 5.1, Figure 3); suffix perplexity (Section 4, Table 3); suffix perplexity, needle
accuracy and ACCS vs RoPE theta (Section 4, Figure 2); collapse modes (Appendix D, Figure 9).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxlens.core.papers import heading
from ctxlens.report.figures import Panel, figure, integer_axis, log2_axis, set_log
from ctxlens.report.plots._common import col, draw_lines, finish, groups, numeric, varying
from ctxlens.report.registry import Context, plotter

PAPER_ID = "geometry"  # the paper these sections reproduce (their place in the report)
PAPER = heading(PAPER_ID)  # the captions' first sentence
GEOMETRY = ("accs", "self_sim", "anisotropy")
LABELS = {"accs": "ACCS (cosine)", "self_sim": "self-similarity (cosine)", "anisotropy": "anisotropy (mean cosine)",
          "compression_rate": "prefix compression rate (LZMA / raw)"}
COORDS = ("length", "stream", "layer", "boundary", "transform")


def geometry_panel(df: pd.DataFrame, ctx: Context, name: str, x: str, xlabel: str, title: str, *,
                   extra: tuple[str, ...] = (), log2: bool = False, caption: str = "") -> Panel:
    """ACCS, self-similarity, anisotropy (and ``extra`` columns) vs ``x``, one line per model and
    per value of every other coordinate that varies."""
    metrics = (*GEOMETRY, *extra)
    data = numeric(df, x, *metrics)
    styles = varying(data, COORDS, exclude=(x,))
    table = data.groupby(["series", *styles, x], dropna=False, sort=False)[list(metrics)].mean().reset_index()
    fig, axes = figure(len(metrics))
    for i, (ax, m) in enumerate(zip(axes, metrics)):
        draw_lines(ax, table.dropna(subset=[m]), x, m, ctx, styles)
        finish(ax, xlabel, LABELS.get(m, m), show_legend=i == 0)
        if log2:
            log2_axis(ax, table[x])
        if x == "layer":
            integer_axis(ax)
    return Panel(name, title, fig, table, caption)


@plotter("accs-layers", title="ACCS, self-similarity and anisotropy vs layer", paper=f"{PAPER} Section 4, Figure 1",
         metrics=GEOMETRY, paper_id=PAPER_ID)
def accs_layers(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    return [geometry_panel(df, ctx, "accs-layers", "layer", "layer (index)",
                           "Suffix geometry vs layer, distant prefix shuffled",
                           caption="ACCS = self-similarity − anisotropy; expected to fall with depth.")]


@plotter("accs-boundary", title="ACCS vs relative boundary of the shuffled prefix",
         paper=f"{PAPER} Section 5.2, Figure 4, Tables 4-5", metrics=GEOMETRY, paper_id=PAPER_ID)
def accs_boundary(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    return [geometry_panel(df, ctx, "accs-boundary", "boundary",
                           "shuffled up to relative boundary (fraction of prefix)",
                           "Suffix geometry vs shuffled prefix range",
                           caption="A plateau while only distant tokens are shuffled, then a drop near 1, marks a "
                                   "model that relies on local context; a steady fall, one that uses the whole "
                                   "prefix.")]


@plotter("accs-length", title="ACCS vs length on periodic sequences",
         paper=f"{PAPER} Section 5.3, Figure 5, Tables 6-7", metrics=(*GEOMETRY, "compression_rate"), paper_id=PAPER_ID)
def accs_length(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    return [geometry_panel(df, ctx, "accs-length", "length", "sequence length (tokens)",
                           "Suffix geometry vs length, whole prefix shuffled", extra=("compression_rate",), log2=True,
                           caption="Compression rate: LZMA bytes / raw bytes of the original prefixes.")]


@plotter("anisotropy-compression", title="Anisotropy vs prefix compression rate",
         paper=f"{PAPER} Section 5.1, Figure 3; Appendix D, Figure 7", metrics=("anisotropy", "compression_rate"),
         paper_id=PAPER_ID)
def anisotropy_compression(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "compression_rate", "anisotropy")
    styles = varying(data, ("length", "layer", "stream"))
    keys = ["series", *styles, "perturbation", *[c for c in ("window", "bin") if c in data.columns]]
    table = data.groupby(keys, dropna=False, sort=False)[["compression_rate", "anisotropy"]].mean().reset_index()
    fig, (ax,) = figure(1, width=4.2, height=3.0)
    draw_lines(ax, table, "compression_rate", "anisotropy", ctx, [*styles, "perturbation"])
    finish(ax, "prefix compression rate (LZMA bytes / raw bytes)", LABELS["anisotropy"])
    return [Panel("anisotropy-compression", "Anisotropy of suffix representations vs how compressible the prefix is",
                  fig, table, "local-shuffle: windows of growing size shuffled; none: unperturbed windows binned by "
                              "their own compression rate.")]


@plotter("suffix-ppl", title="Suffix perplexity vs length", paper=f"{PAPER} Section 4, Appendix C Table 3",
         metrics=("nll", "ppl"), paper_id=PAPER_ID)
def suffix_ppl(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "length", "nll", "ppl")
    coords = [c for c in ("prefix_len", "suffix_len", "n_tokens") if c in data]
    table = data[["series", "length", *coords, "nll", "ppl"]]
    fig, axes = figure(2)
    draw_lines(axes[0], table.dropna(subset=["ppl"]), "length", "ppl", ctx)
    finish(axes[0], "window length (tokens)", "perplexity of the last N tokens")
    draw_lines(axes[1], table.dropna(subset=["nll"]), "length", "nll", ctx, label=False)
    finish(axes[1], "window length (tokens)", "suffix cross-entropy (nats/token)", show_legend=False)
    for ax in axes:
        log2_axis(ax, table["length"])
    return [Panel("suffix-ppl", "Suffix perplexity with a growing prefix (same suffix tokens at every length)", fig,
                  table.sort_values(["series", "length"]))]


@plotter("rope-theta-sweep", title="Suffix perplexity, needle accuracy and ACCS vs RoPE theta",
         paper=f"{PAPER} Section 4, Figure 2, Table 8", metrics=("ppl", "accuracy", "accs"), paper_id=PAPER_ID)
def rope_theta_sweep(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "theta", "ppl", "accuracy", "accs", "own_theta")
    views = [("suffix-ppl", "ppl", "suffix perplexity", ["length"]),
             ("needle", "accuracy", "needle accuracy (%)", ["length"]),
             ("accs", "accs", "ACCS, last layer (cosine)", ["length", "layer", "stream"])]
    present = [v for v in views if not data[col(data, "measure") == v[0]].empty]
    fig, axes = figure(max(1, len(present)))
    tables = []
    for ax, (measure, value, ylabel, coords) in zip(axes, present):
        rows = data[data["measure"] == measure].copy()
        if measure == "needle":
            rows[value] = rows[value] * 100
        styles = varying(rows, coords)
        t = rows.groupby(["series", *styles, "theta"], dropna=False, sort=False)[value].mean().reset_index()
        draw_lines(ax, t.dropna(subset=[value]), "theta", value, ctx, styles)
        set_log(ax)
        for series, g in groups(rows, ["series"]):
            for own in g["own_theta"].dropna().unique():
                ax.axvline(own, color=ctx.color(series[0]), linestyle=":", linewidth=1)
        if measure == "needle":
            ax.set_ylim(-3, 103)
        finish(ax, "RoPE base θ (log scale; dotted: the model's own)", ylabel)
        tables.append(t.assign(measure=measure).rename(columns={value: "value"}))
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return [Panel("rope-theta-sweep", "The same weights under different RoPE bases", fig, table,
                  "Similar perplexity can come with very different retrieval and ACCS.")]


def _rank_bins(ranks: np.ndarray) -> np.ndarray:
    """Log-2 bin of each 1-based rank: 1, 2-3, 4-7, ..."""
    return np.floor(np.log2(np.maximum(ranks, 1))).astype(int)


@plotter("collapse-modes", title="Mean -log p of every vocabulary entry by frequency rank",
         paper=f"{PAPER} Appendix D, Figure 9", metrics=("nll",), paper_id=PAPER_ID)
def collapse_modes(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "rank_low", "rank_high", "nll", "unigram_nll", "uniform_nll", "anisotropy")
    data["rank"] = np.sqrt(data["rank_low"] * data["rank_high"])
    conditions = list(dict.fromkeys(data["condition"]))
    fig, axes = figure(len(conditions), sharey=True)
    for ax, cond in zip(axes, conditions):
        rows = data[data["condition"] == cond]
        for j, ((series,), g) in enumerate(groups(rows, ["series"])):
            g = g.sort_values("rank")
            aniso = g["anisotropy"].dropna()
            label = series + (f" (anisotropy {aniso.iloc[0]:.2f})" if len(aniso) else "")
            ax.plot(g["rank"], g["nll"], color=ctx.color(series), label=label, marker="", linewidth=1)
            ax.plot(g["rank"], g["unigram_nll"], color="0.55", linestyle=":", linewidth=1,
                    label="unigram prior" if j == 0 else None)
            ax.axhline(g["uniform_nll"].iloc[0], color="0.2", linestyle="--", linewidth=0.8,
                       label="uniform (log |V|)" if j == 0 else None)
        set_log(ax)
        length = rows["length"].iloc[0] if "length" in rows and len(rows) else None
        finish(ax, "token frequency rank (log scale)", "mean −log p(v) (nats)",
               f"{cond} (length {length:g})" if length is not None else str(cond))
    data["rank_bin"] = _rank_bins(data["rank_low"].to_numpy())
    g = data.groupby(["series", "condition", "rank_bin"], sort=False)
    table = g.agg(rank_low=("rank_low", "min"), rank_high=("rank_high", "max"), nll=("nll", "mean"),
                  unigram_nll=("unigram_nll", "mean"), uniform_nll=("uniform_nll", "first"),
                  anisotropy=("anisotropy", "first")).reset_index().drop(columns="rank_bin")
    return [Panel("collapse-modes", "Collapse modes: towards uniform or towards the unigram prior", fig, table,
                  "Table: means over log-2 rank bins (1, 2-3, 4-7, ...) of the plotted per-rank curves.")]
