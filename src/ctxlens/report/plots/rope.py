"""Figures of the rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension").

Top-k dimension histograms (Section 4.1, Figure 1), dominant dimension vs distance (Sections
4.2.1-4.2.2, Figure 3), RoPE-pair ablation (Section 4.2.3, Figure 4), heads ranked by their
distance-dimension correlation (Section 4.3.1), masking Positional Heads vs random heads with
error bars over random draws (Section 4.3.2, Figures 6-9).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxlens.core.papers import heading
from ctxlens.report.figures import Panel, figure, heatmap, log2_axis, style
from ctxlens.report.plots._common import (
    describe,
    draw_lines,
    finish,
    groups,
    having,
    mark_train_length,
    mean_sem,
    numeric,
    varying,
)
from ctxlens.report.registry import Context, plotter

PAPER_ID = "rope-distance"  # the paper these sections reproduce (their place in the report)
PAPER = heading(PAPER_ID)  # the captions' first sentence
DIM = "RoPE pair index (0 = highest frequency)"


@plotter("rope-dims", title="How often each RoPE dimension is among the top-k contributors",
         paper=f"{PAPER} Section 4.1, Figure 1", metrics=("share",), paper_id=PAPER_ID)
def rope_dims(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "dim", "share", "layer")
    data["share"] = data["share"] * 100
    styles = varying(data, ("transform", "length"))
    hist = data.groupby(["series", *styles, "dim"], sort=False)["share"].mean().reset_index()
    combos = list(dict.fromkeys(tuple(k) for k, _ in groups(hist, ["series", *styles])))
    fig, (ax,) = figure(1, width=5.0, height=2.8)
    width = 0.8 / max(1, len(combos))
    for i, key in enumerate(combos):
        g = hist[np.logical_and.reduce([hist[c] == v for c, v in zip(["series", *styles], key)])].sort_values("dim")
        label = key[0] + (f" ({describe(styles, key[1:])})" if styles else "")
        ax.bar(g["dim"] + (i - (len(combos) - 1) / 2) * width, g["share"], width=width, color=ctx.color(key[0]),
               alpha=1.0 if i % 2 == 0 else 0.65, label=label)
    finish(ax, DIM, "share of top-k slots (%)")
    first = Panel("rope-dims", "Top-k contributing RoPE dimensions, all layers and heads", fig, hist,
                  "Share of the top-k slots over sampled query-key pairs, averaged over layers and heads.")
    per_layer = data.groupby(["series", *styles, "layer", "dim"], sort=False)["share"].mean().reset_index()
    facets = combos[:6]
    fig2, axes = figure(len(facets), width=3.4, height=0.35 * per_layer["layer"].nunique() + 1.4)
    for ax, key in zip(axes, facets):
        g = per_layer[np.logical_and.reduce([per_layer[c] == v for c, v in zip(["series", *styles], key)])]
        m = g.pivot_table(index="layer", columns="dim", values="share")
        heatmap(ax, m.to_numpy(), [f"{d:g}" for d in m.columns], [f"{v:g}" for v in m.index], cmap="magma",
                fmt="{:.0f}", colorbar_label="share (%)")
        finish(ax, DIM, "layer", key[0] + (f" ({describe(styles, key[1:])})" if styles else ""), show_legend=False)
        ax.title.set_color(ctx.color(key[0]))
    second = Panel("rope-dims-layers", "Top-k share per layer (mean over heads)", fig2, per_layer)
    return [first, second]


def _curves(df: pd.DataFrame, ctx: Context, name: str, title: str, styles_from: tuple[str, ...]) -> list[Panel]:
    curve = numeric(having(df, kind="curve"), "distance_lo", "distance_hi", "dominant_dim", "train_length")
    corr = numeric(having(df, kind="correlation"), "rho", "p_value")
    panels = []
    if not curve.empty:
        curve["distance"] = (curve["distance_lo"] + curve["distance_hi"]) / 2
        styles = varying(curve, styles_from)
        table = curve.groupby(["series", *styles, "distance_lo", "distance_hi", "distance"], sort=False)[
            "dominant_dim"].mean().reset_index()
        fig, (ax,) = figure(1, width=4.6, height=3.0)
        draw_lines(ax, table, "distance", "dominant_dim", ctx, styles, markersize=2.5)
        mark_train_length(ax, curve)
        finish(ax, "relative distance (tokens)", "dominant dimension (pair index)")
        panels.append(Panel(name, title, fig, table.drop(columns="distance"),
                            "Dominant dimension: the RoPE pair (0 = highest frequency) contributing most to a "
                            "query-key logit; mean over heads of its mean in each distance bin."))
    if not corr.empty:
        styles = varying(corr, styles_from)
        keys = list(dict.fromkeys(tuple(k) for k, _ in groups(corr, ["series", *styles])))
        fig, (ax,) = figure(1, width=max(3.2, 1.0 * len(keys) + 1.5), height=3.2)
        data = [corr[np.logical_and.reduce([corr[c] == v for c, v in zip(["series", *styles], k)])]["rho"].dropna()
                for k in keys]
        parts = ax.boxplot(data, patch_artist=True, widths=0.6, medianprops={"color": "black"})
        for patch, k in zip(parts["boxes"], keys):
            patch.set_facecolor(ctx.color(k[0]))
            patch.set_alpha(0.6)
        ax.set_xticks(range(1, len(keys) + 1), ["\n".join([k[0], *describe(styles, k[1:]).split(", ")]).strip()
                                                for k in keys], fontsize=6)
        ax.axhline(0, color="0.4", linewidth=0.8)
        finish(ax, "model (and setting)", "Spearman ρ per head", show_legend=False)
        summary = []
        for k, rho in zip(keys, data):
            rows = corr[np.logical_and.reduce([corr[c] == v for c, v in zip(["series", *styles], k)])]
            sig = (rows["p_value"] < 0.05) & rows["rho"].notna()
            summary.append({**dict(zip(["series", *styles], k)), "heads": len(rows), "mean_rho": rho.mean(),
                            "median_rho": rho.median(), "positive_p<0.05": int((sig & (rows["rho"] > 0)).sum()),
                            "negative_p<0.05": int((sig & (rows["rho"] < 0)).sum())})
        panels.append(Panel(f"{name}-rho", "Distance-dimension correlation of every head", fig, pd.DataFrame(summary)))
    return panels


@plotter("dominant-dimension", title="Dominant RoPE dimension vs relative distance",
         paper=f"{PAPER} Sections 4.2.1-4.2.2, Figure 3, Appendix A.1-A.3", metrics=("rho", "dominant_dim"),
         paper_id=PAPER_ID)
def dominant_dimension(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    return _curves(df, ctx, "dominant-dimension", "Dominant dimension vs distance, below and beyond the training "
                   "length", ("transform", "length"))


@plotter("positional-heads", title="Heads ranked by distance-dimension correlation",
         paper=f"{PAPER} Section 4.3.1, Appendix A.3", metrics=("rho",), paper_id=PAPER_ID)
def positional_heads(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    heads = numeric(having(df, kind="head"), "rank", "rho", "p_value")
    sel = numeric(having(df, kind="selection"), "fraction", "n_selected")
    styles = varying(heads, ("transform", "length", "condition"))  # the RoPE-zeroed control drawn apart
    keys = list(dict.fromkeys(tuple(k) for k, _ in groups(heads, ["series", *styles])))
    fig, axes = figure(max(1, len(keys)), width=3.6, height=2.7, sharey=True)
    for ax, key in zip(axes, keys):
        g = heads[np.logical_and.reduce([heads[c] == v for c, v in zip(["series", *styles], key)])].sort_values("rank")
        sig = g["significant"].fillna(False).astype(bool) if "significant" in g else pd.Series(False, index=g.index)
        c = ctx.color(key[0])
        ax.bar(g["rank"], g["rho"], color=[c if s else "white" for s in sig], edgecolor=c, linewidth=0.6)
        s = sel[np.logical_and.reduce([sel[c_] == v for c_, v in zip(["series", *styles], key)])] if len(sel) else sel
        for k, (_, r) in enumerate(s.iterrows()):
            ax.axvline(r["n_selected"] + 0.5, color="0.3", linestyle=style(k + 1)["linestyle"], linewidth=0.9,
                       label=f"top {r['fraction'] * 100:g}% ({int(r['n_selected'])} heads)")
        ax.axhline(0, color="0.4", linewidth=0.6)
        finish(ax, "rank (1 = strongest)", "Spearman ρ (filled: p < α)",
               key[0] + (f" ({describe(styles, key[1:])})" if styles else ""))
        ax.title.set_color(c)
    keep = [c for c in ("series", *styles, "rank", "layer", "head", "rho", "p_value", "significant") if c in heads]
    return [Panel("positional-heads", "Every attention head by its distance-dimension correlation; the top ones are "
                  "Positional Heads", fig, heads.sort_values(["series", *styles, "rank"])[keep])]


@plotter("head-masking", title="Masking Positional Heads vs random heads", paper=f"{PAPER} Section 4.3.2, Figures 6-9",
         metrics=("score", "ppl"), paper_id=PAPER_ID)
def head_masking(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    data = numeric(df, "score", "ppl", "length", "fraction", "train_length")
    # the value drawn: a passkey row's score (1 or 0) in percent, a perplexity row's ppl
    data["value"] = np.where(data["task"] == "passkey", data["score"] * 100, data["ppl"])
    per_draw = data.groupby(["series", "transform", "task", "condition", "fraction", "draw", "length"], dropna=False,
                            sort=False)["value"].mean().reset_index()  # passkey: mean over depths
    table = per_draw.groupby(["series", "transform", "task", "condition", "fraction", "length"], dropna=False,
                             sort=False)["value"].agg(["mean", "std", "count"]).reset_index()
    table = table.rename(columns={"mean": "value", "std": "std_over_draws", "count": "draws"})
    tasks = list(dict.fromkeys(table["task"]))
    fig, axes = figure(len(tasks), width=3.8, height=2.9)
    conditions = list(dict.fromkeys(zip(table["condition"], table["fraction"])))
    ylabels = {"passkey": "passkey accuracy (%, mean over depths)", "perplexity": "perplexity"}
    for i, (ax, task) in enumerate(zip(axes, tasks)):
        mine = table[table["task"] == task]
        for (series, transform), g in mine.groupby(["series", "transform"], sort=False):
            for k, (cond, frac) in enumerate(conditions):
                line = g[(g["condition"] == cond) & (g["fraction"] == frac)].sort_values("length")
                if line.empty:
                    continue
                err = line["std_over_draws"].fillna(0).to_numpy(float) if cond == "random" else None
                label = f"{series}: {cond}" + (f" {frac * 100:g}%" if cond != "none" else "")
                label += f" [{transform}]" if mine["transform"].nunique() > 1 else ""
                ax.errorbar(line["length"], line["value"], yerr=err, color=ctx.color(series), capsize=2,
                            label=label if i == 0 else None, **style(k))
        mark_train_length(ax, data)
        log2_axis(ax, mine["length"])
        if task == "passkey":
            ax.set_ylim(-3, 103)
        finish(ax, "context length (tokens)", ylabels.get(task, task), task, show_legend=i == 0)
    return [Panel("head-masking", "Zeroing the top Positional Heads vs as many random heads; error bars: standard "
                  "deviation over random draws", fig, table)]


@plotter("rope-dim-ablation", title="Zeroing RoPE dimension pairs: loss, attention and dominant dimension",
         paper=f"{PAPER} Section 4.2.3, Figure 4", metrics=("delta", "tv", "rho"), paper_id=PAPER_ID)
def rope_dim_ablation(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    loss = numeric(having(df, kind="loss"), "length", "nll_base", "nll_ablated", "delta", "train_length")
    att = numeric(having(df, kind="attention"), "length", "tv")
    panels = []
    views = [v for v in ((loss, "delta", "Δ CE, ablated − base (nats/token)"),
                         (att, "tv", "attention change (mean TV distance)")) if not v[0].empty]
    if views:
        fig, axes = figure(len(views), width=3.6, height=2.8)
        tables = []
        for i, (ax, (rows, value, ylabel)) in enumerate(zip(axes, views)):
            styles = varying(rows, ("transform",))
            t = mean_sem(rows, ["series", *styles, "ablation", "length"], value)
            draw_lines(ax, t, "length", value, ctx, [*styles, "ablation"], label=i == 0)
            mark_train_length(ax, loss if not loss.empty else rows)
            log2_axis(ax, t["length"])
            finish(ax, "context length (tokens)", ylabel, show_legend=i == 0)
            tables.append(t)
        table = tables[0]
        if not loss.empty:
            base = loss.groupby(["series", "ablation", "length"], sort=False)[["nll_base", "nll_ablated"]].mean()
            table = table.merge(base.reset_index(), on=["series", "ablation", "length"], how="left")
        panel = Panel("rope-dim-ablation", "Effect of zeroing RoPE frequency pairs in q and k", fig, table,
                      "TV: total-variation distance between a query's attention row with and without the pairs, "
                      "mean over queries and heads.")
        if len(tables) > 1:
            panel.extra_tables.append(("Attention change (mean total variation over heads)", tables[1]))
        panels.append(panel)
    panels += _curves(df, ctx, "rope-dim-ablation-dominant", "Dominant dimension vs distance with the pairs removed",
                      ("transform", "ablation", "length"))
    return panels

