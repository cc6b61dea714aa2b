"""Figures of the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), and token-loss.

CE vs visible context with the fitted C0 + C / l^gamma (Section 2.2.2, Eq. 3, Figure 2);
eigen-spectra per length and CE vs intrinsic entropy / dimension / KDE entropy with linear fits
(Figures 1, 3, 10, 15); sparse-parity feature dimension vs visible subtasks and CE vs it
(Appendix J.3, Figures 16-17); a transformer's loss vs the Bayes risk on it (Section 4.3, Table 1);
optimal context length vs training-set size (Section 3, Figure 4,
Appendix F Figure 12); accuracy vs visible context with the optimum marked (Appendix A.1, A.3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps

from ctxlens.core.papers import heading
from ctxlens.report.figures import Panel, figure, log2_axis, set_log
from ctxlens.report.plots._common import col, describe, draw_lines, finish, groups, having, mean_sem, numeric
from ctxlens.report.registry import Context, plotter
from ctxlens.tasks.scoring import optimal_length

PAPER_ID = "intrinsic-entropy"  # the paper these sections reproduce (their place in the report)
PAPER = heading(PAPER_ID)  # the captions' first sentence
CE = "cross-entropy (nats/token)"


@plotter("token-loss", title="Mean next-token loss vs window length", paper="ctxlens smoke analysis",
         metrics=("nll",))
def token_loss(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    table = mean_sem(df, ["series", "length"], "nll")
    table["ppl"] = np.exp(table["nll"].astype(float))
    fig, (ax,) = figure(1, width=4.0, height=2.8)
    draw_lines(ax, table, "length", "nll", ctx, yerr="sem")
    log2_axis(ax, table["length"])
    finish(ax, "window length (tokens)", "mean next-token loss (nats/token)")
    return [Panel("token-loss", "Mean next-token loss per window (error bars: standard error over windows)",
                  fig, table)]


# ------------------------------------------------------------------------------- fits
def fit_params(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Fit rows (one per quantity) -> one row per fit: value and stderr of each quantity."""
    fits = numeric(having(df, stage="fit"), "value", "stderr")
    if fits.empty:
        return pd.DataFrame()
    keys = [k for k in keys if k in fits.columns]
    wide = fits.pivot_table(index=keys, columns="quantity", values="value", aggfunc="first", dropna=False)
    err = fits.pivot_table(index=keys, columns="quantity", values="stderr", aggfunc="first", dropna=False)
    err = err.dropna(axis=1, how="all").add_suffix(" stderr")
    order = [c for q in dict.fromkeys(fits["quantity"]) for c in (q, f"{q} stderr") if c in wide or c in err]
    out = wide.join(err).reset_index()[[*keys, *order]]
    extra = fits.groupby(keys, dropna=False, sort=False)[[c for c in ("n_points", "flag") if c in fits]].first()
    return out.merge(extra.reset_index(), on=keys, how="left")


def power_law(length: np.ndarray, c0: float, c: float, gamma: float) -> np.ndarray:
    """C0 + C / l^gamma at lengths [n]."""
    return c0 + c * length ** -gamma


@plotter("loss-vs-length", title="Cross-entropy vs visible context, with its power-law fit",
         paper=f"{PAPER} Section 2.2.2 (Eq. 3, Figure 2), Appendix E (Figure 11)", metrics=("ce", "value"),
         paper_id=PAPER_ID)
def loss_vs_length(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    measured = mean_sem(having(df, stage="measure"), ["series", "length"], "ce")
    params = fit_params(df, ["series"])
    fig, (ax,) = figure(1, width=4.4, height=3.0)
    draw_lines(ax, measured, "length", "ce", ctx, yerr="sem", linestyle="none")
    measured["fitted"] = None
    for _, p in params.iterrows():
        if any(pd.isna(p.get(k)) for k in ("C0", "C", "gamma")):
            continue
        mine = measured["series"] == p["series"]
        lo, hi = measured.loc[mine, "length"].min(), measured.loc[mine, "length"].max()
        grid = np.geomspace(lo, hi, 200)
        ax.plot(grid, power_law(grid, p["C0"], p["C"], p["gamma"]), color=ctx.color(p["series"]), linewidth=1.2,
                label=f"fit: {p['C0']:.3g} + {p['C']:.3g} / l^{p['gamma']:.3g}")
        measured.loc[mine, "fitted"] = power_law(measured.loc[mine, "length"].to_numpy(float), p["C0"], p["C"],
                                                 p["gamma"])
    log2_axis(ax, measured["length"])
    finish(ax, "visible context length l (tokens)", CE)
    panel = Panel("loss-vs-length", "CE with exactly l tokens visible (same targets at every l); lines: fitted "
                  "C0 + C / l^γ", fig, measured, "Error bars: standard error over samples.")
    if not params.empty:
        panel.extra_tables.append(("Power-law fit (value ± 1σ standard error)", params))
    return [panel]


def _ce_against(df: pd.DataFrame, ctx: Context, quantity: str, key: str | None, xlabel: str, name: str,
                title: str) -> Panel:
    """CE vs one measure per length, facets per ``key`` value, with the linear fit of the fit rows."""
    measure = having(df, stage="measure")
    ce = numeric(having(measure, quantity="ce"), "value")[["series", "length", "value"]].rename(columns={"value": "ce"})
    xs = numeric(having(measure, quantity=quantity), "value")
    keep = ["series", "length", *([key] if key else []), "value"]
    points = xs[keep].rename(columns={"value": quantity}).merge(ce, on=["series", "length"], how="left")
    facets = list(dict.fromkeys(points[key])) if key else [None]
    fits = fit_params(having(df, x=quantity), ["series", *([key] if key else [])])
    fig, axes = figure(len(facets), width=3.0, height=2.6)
    for i, (ax, facet) in enumerate(zip(axes, facets)):
        pts = points if key is None else points[points[key] == facet]
        draw_lines(ax, pts.dropna(subset=[quantity, "ce"]), quantity, "ce", ctx, linestyle="none", label=i == 0)
        for _, r in pts.dropna(subset=[quantity, "ce"]).iterrows():
            ax.annotate(f"{r['length']:g}", (r[quantity], r["ce"]), fontsize=5.5, xytext=(2, 2),
                        textcoords="offset points", color="0.35")
        mine = fits if key is None or fits.empty else fits[fits[key] == facet]
        for _, p in mine.iterrows():
            if pd.isna(p.get("slope")) or pd.isna(p.get("intercept")):
                continue
            xv = pts.loc[pts["series"] == p["series"], quantity].dropna()
            if xv.empty:
                continue
            grid = np.linspace(xv.min(), xv.max(), 50)
            r2 = p.get("r2")
            ax.plot(grid, p["slope"] * grid + p["intercept"], color=ctx.color(p["series"]), linewidth=1,
                    label=f"fit slope {p['slope']:.3g}" + (f", R² {r2:.3f}" if pd.notna(r2) else ""))
        finish(ax, xlabel, CE, describe([key], [facet]) if key else None)
    panel = Panel(name, title, fig, points, "Point labels: context length in tokens.")
    if not fits.empty:
        panel.extra_tables.append(("Linear fit of CE (value ± 1σ standard error)", fits))
    return panel


@plotter("intrinsic-entropy", title="Eigen-spectra, intrinsic entropy and dimension vs CE",
         paper=f"{PAPER} Figures 1, 3, 10, 13, 15", metrics=("value",), paper_id=PAPER_ID)
def intrinsic_entropy(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    panels = [_spectra(having(df, stage="measure", quantity="relative_eigenvalue"), ctx, "intrinsic-entropy-spectra",
                       "PCA eigen-spectrum of last-token features per context length")]
    quantities = set(col(df, "quantity").dropna())
    if "intrinsic_entropy" in quantities:
        panels.append(_ce_against(df, ctx, "intrinsic_entropy", "n_eig", "intrinsic entropy S_n (nats)",
                                  "intrinsic-entropy-ce", "CE vs intrinsic entropy (n largest eigenvalues)"))
    if "intrinsic_dimension" in quantities:
        panels.append(_ce_against(df, ctx, "intrinsic_dimension", "threshold", "intrinsic dimension (eigenvalues)",
                                  "intrinsic-dimension-ce",
                                  "CE vs intrinsic dimension (relative-eigenvalue threshold)"))
    if "kde_entropy" in quantities:
        panels.append(_ce_against(df, ctx, "kde_entropy", None, "KDE entropy (nats)", "kde-entropy-ce",
                                  "CE vs Gaussian-KDE entropy of the features"))
    return panels


def _spectra(rows: pd.DataFrame, ctx: Context, name: str, title: str) -> Panel:
    """Relative eigenvalue vs index, one line per length (sequential colours), one axis per model."""
    rows = numeric(rows, "index", "value", "length")
    series = list(dict.fromkeys(rows["series"]))
    fig, axes = figure(max(1, len(series)), width=3.2, height=2.7)
    lengths = sorted(rows["length"].dropna().unique())
    cmap = colormaps["viridis"]
    for ax, s in zip(axes, series):
        for k, length in enumerate(lengths):
            g = rows[(rows["series"] == s) & (rows["length"] == length)].sort_values("index")
            g = g[g["value"] > 0]
            ax.plot(g["index"], g["value"], color=cmap(k / max(1, len(lengths) - 1)), label=f"l={length:g}")
        set_log(ax, "x")
        set_log(ax, "y")
        finish(ax, "eigenvalue index", "relative eigenvalue", s)
        ax.title.set_color(ctx.color(s))
    table = rows.pivot_table(index=["series", "index"], columns="length", values="value", aggfunc="first")
    table.columns = [f"l={c:g}" for c in table.columns]
    return Panel(name, title, fig, table.reset_index(), "Colour: context length (dark = short).")


@plotter("parity-dimension", title="Sparse parity: feature dimension vs visible subtasks, CE vs dimension",
         paper=f"{PAPER} Appendix J.3, Figures 16-17", metrics=("value",), paper_id=PAPER_ID)
def parity_dimension(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    measure = numeric(having(df, stage="measure"), "value", "length")
    wide = measure[measure["quantity"].isin(["visible_tasks", "ce", "bayes_risk"])].pivot_table(
        index=["series", "length"], columns="quantity", values="value", aggfunc="first").reset_index()
    dims = measure[measure["quantity"] == "intrinsic_dimension"][["series", "length", "threshold", "value"]]
    points = dims.rename(columns={"value": "intrinsic_dimension"}).merge(wide, on=["series", "length"], how="left")
    fig, axes = figure(2, width=3.4, height=2.8)
    draw_lines(axes[0], points, "visible_tasks", "intrinsic_dimension", ctx, ["threshold"])
    top = float(np.nanmax(points[["visible_tasks", "intrinsic_dimension"]].to_numpy(float))) if len(points) else 1
    axes[0].plot([0, top], [0, top], color="0.5", linestyle="--", linewidth=0.8, label="ID = t(l)")
    finish(axes[0], "visible subtasks t(l)", "PCA dimension of the feature", "dimension vs visible subtasks")
    draw_lines(axes[1], points, "intrinsic_dimension", "ce", ctx, ["threshold"], linestyle="none", label=False)
    if "bayes_risk" in wide:
        for _, g in groups(wide.sort_values("visible_tasks"), ["series"]):
            axes[1].plot(g["visible_tasks"], g["bayes_risk"], color="0.2", linestyle="--", linewidth=0.8,
                         label="Bayes risk vs t(l)")
            break
    finish(axes[1], "PCA dimension (or t(l) for the Bayes risk)", CE, "CE vs dimension")
    panel = Panel("parity-dimension", "Each visible subtask adds one feature direction and removes ln 2 / T nats",
                  fig, points)
    fits = numeric(having(df, stage="fit"), "value", "stderr", "paper", "bayes")
    if not fits.empty:
        keep = [c for c in ("series", "threshold", "quantity", "value", "stderr", "paper", "bayes", "n_points", "flag")
                if c in fits]
        panel.extra_tables.append(("Linear fit of CE on the dimension, beside the paper's and the Bayes risk's",
                                   fits[keep]))
    return [panel]


@plotter("parity-table", title="Sparse parity: a transformer's loss vs the Bayes risk per context length",
         paper=f"{PAPER} Section 4.3, Appendix C.4, Table 1", metrics=("loss",), paper_id=PAPER_ID)
def parity_table(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    loss = mean_sem(df, ["series", "ctl"], "loss")
    bayes = numeric(df, "bayes_risk").groupby("ctl")["bayes_risk"].first()
    loss["bayes_risk"] = loss["ctl"].map(bayes)
    loss["gap"] = loss["loss"].astype(float) - loss["bayes_risk"]
    fig, axes = figure(2, width=3.4, height=2.8)
    draw_lines(axes[0], loss, "ctl", "loss", ctx, yerr="sem")
    axes[0].plot(bayes.index, bayes.to_numpy(), color="black", linestyle="--", linewidth=1, label="Bayes risk")
    finish(axes[0], "context length (bits)", "test loss (nats)", "loss and the minimum possible")
    draw_lines(axes[1], loss, "ctl", "gap", ctx)
    axes[1].axhline(0, color="0.5", linewidth=0.8)
    finish(axes[1], "context length (bits)", "loss - Bayes risk (nats)", "gap (paper: about 0.001)")
    return [Panel("parity-table", "Test loss at each context length beside the exact Bayes risk (Table 1)", fig,
                  loss, "Error bars: standard error over training seeds.")]


# ------------------------------------------------------------------------------- optimal length
def lowest(table: pd.DataFrame, by: list[str], x: str, y: str) -> pd.DataFrame:
    """Per group of ``by``: the row with the lowest ``y`` (the smallest ``x`` on ties)."""
    ordered = table.dropna(subset=[y]).sort_values([*by, y, x])
    return ordered.groupby(by, sort=False).head(1)


@plotter("optimal-context", title="Optimal context length vs training-set size (sparse parity)",
         paper=f"{PAPER} Section 3 (Eq. 5-6, Figure 4), Appendix F (Figure 12)", metrics=("best_val_loss",),
         paper_id=PAPER_ID)
def optimal_context(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    loss = mean_sem(df, ["series", "n_train", "ctl"], "best_val_loss")
    bayes = numeric(df, "bayes_risk").groupby(["series", "ctl"])["bayes_risk"].first().reset_index()
    loss = loss.merge(bayes, on=["series", "ctl"], how="left")
    best = lowest(loss, ["series", "n_train"], "ctl", "best_val_loss")
    loss["optimal"] = loss.index.isin(best.index)
    series = list(dict.fromkeys(loss["series"]))
    fig, axes = figure(len(series) + 1, width=3.3, height=2.7)
    sizes = sorted(loss["n_train"].unique())
    cmap = colormaps["viridis"]
    for ax, s in zip(axes, series):
        mine = loss[loss["series"] == s]
        for k, n in enumerate(sizes):
            g = mine[mine["n_train"] == n].sort_values("ctl")
            c = cmap(k / max(1, len(sizes) - 1))
            ax.errorbar(g["ctl"], g["best_val_loss"], yerr=g["sem"].fillna(0).astype(float), color=c, marker="o",
                        label=f"D={n:g}", capsize=2)
            opt = g[g["optimal"]]
            ax.plot(opt["ctl"], opt["best_val_loss"], marker="*", markersize=11, color=c, markeredgecolor="black",
                    linestyle="none")
        b = mine.groupby("ctl")["bayes_risk"].first().dropna()
        ax.plot(b.index, b.to_numpy(), color="black", linestyle="--", linewidth=1, label="Bayes risk")
        finish(ax, "visible context length (bits)", "best validation loss (nats)", f"{s} (★ optimum)")
        ax.title.set_color(ctx.color(s))
    ax = axes[-1]
    draw_lines(ax, best, "n_train", "ctl", ctx)
    log2_axis(ax, best["n_train"], base=10)
    finish(ax, "training-set size D (samples, log scale)", "optimal context length (bits)", "optimum vs D")
    panel = Panel("optimal-context", "Validation loss vs visible context per training-set size; the optimum grows "
                  "with D", fig, loss, "Error bars: standard error over seeds.")
    optimum = best[["series", "n_train", "ctl", "best_val_loss"]].rename(columns={"ctl": "optimal_ctl"})
    panel.extra_tables.append(("Optimal context length per training-set size", optimum))
    return [panel]


def accuracy_vs_visible(df: pd.DataFrame, ctx: Context, facet: str, name: str, title: str, facet_label: str) -> Panel:
    """Mean score (%) vs visible tokens per facet value, one line per model, the optimum starred."""
    rows = numeric(df.dropna(subset=["score"]) if "score" in df else df.iloc[0:0], "score", "visible", "fraction")
    table = mean_sem(rows, ["series", facet, "fraction"], "score")
    visible = rows.groupby(["series", facet, "fraction"], dropna=False)["visible"].mean().rename("visible")
    table = table.merge(visible.reset_index(), on=["series", facet, "fraction"], how="left")
    best = optimal_length(table.rename(columns={facet: "facet"}).to_dict("records"), x="visible",
                          by=("series", "facet"))
    table["optimum"] = [best.get((s, f)) == v for s, f, v in zip(table["series"], table[facet], table["visible"])]
    facets = list(dict.fromkeys(table[facet]))
    fig, axes = figure(max(1, len(facets)), width=3.1, height=2.6, sharey=True)
    for i, (ax, f) in enumerate(zip(axes, facets)):
        mine = table[table[facet] == f]
        draw_lines(ax, mine, "visible", "score", ctx, yerr="sem", label=i == 0)
        opt = mine[mine["optimum"]]
        for _, r in opt.iterrows():
            ax.plot(r["visible"], r["score"], marker="*", markersize=12, color=ctx.color(r["series"]),
                    markeredgecolor="black", linestyle="none")
        ax.set_ylim(-3, 103)
        finish(ax, "visible context (tokens)", "accuracy (%)", f"{facet_label} {f:g}" if isinstance(f, float)
               else f"{facet_label} {f}", show_legend=i == 0)
    panel = Panel(name, title, fig, table, "★: the visible context with the best mean accuracy. Error bars: "
                                           "standard error over samples.")
    opt_table = table[table["optimum"]][["series", facet, "visible", "fraction", "score"]]
    panel.extra_tables.append(("Optimal visible context", opt_table.rename(columns={"visible": "optimal_visible"})))
    return panel


@plotter("visible-fraction", title="Accuracy vs visible context on long task prompts",
         paper=f"{PAPER} Appendix A.3, Figures A.3-1, A.3-2", metrics=("score",), paper_id=PAPER_ID)
def visible_fraction(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    from ctxlens.report.plots.tasks import examples

    panel = accuracy_vs_visible(df, ctx, "task", "visible-fraction", "The model sees only the last part of each "
                                "prompt: accuracy rises, then (often) falls", "task")
    panel.extra_tables.append(examples(df, ["task", "fraction"]))
    return [panel]


@plotter("position-weighted-qa", title="Position-weighted QA: accuracy vs visible context per gamma",
         paper=f"{PAPER} Appendix A.1, Figures 8-9", metrics=("score",), paper_id=PAPER_ID)
def position_weighted_qa(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    from ctxlens.report.plots.tasks import examples

    panel = accuracy_vs_visible(df, ctx, "gamma", "position-weighted-qa", "Golden paragraph near the end with "
                                "weight γ: the optimal visible context shrinks as γ grows", "γ =")
    panel.extra_tables.append(examples(df, ["gamma", "fraction"]))
    return [panel]
