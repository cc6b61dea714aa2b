"""Figures of the long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4).

RULER score per task and length with the effective length (Table 1, Tables 6-18), needle
depth x length heatmaps (Tables 2-3) and needle format tables (Table 4). Scores are percent.
"""

from __future__ import annotations

import pandas as pd

from ctxlens.core.papers import heading
from ctxlens.report.figures import Panel, figure, heatmap, log2_axis
from ctxlens.report.plots._common import col, draw_lines, finish, mean_sem, numeric
from ctxlens.report.registry import Context, plotter
from ctxlens.tasks.scoring import effective_length, length_means, sustained_length

PAPER_ID = "long-sequence"  # the paper these sections reproduce (their place in the report)
PAPER = heading(PAPER_ID)  # the captions' first sentence
SCORE = "score (%)"
N_EXAMPLES = 2  # example generations shown per model and group


def scored(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that were scored (flagged units without samples are left to the warnings)."""
    return numeric(df, "score")[lambda d: d["score"].notna()]


def _with_flags(per_task: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """``per_task`` plus one row (no score, ``flag``) per (series, task, length) that has flagged
    rows and no score: a task that did not fit that length, shown instead of left out."""
    if "flag" not in df:
        return per_task
    flags = df[df["flag"].notna() & df["score"].isna()] if "score" in df else df[df["flag"].notna()]
    have = set(zip(per_task["series"], per_task["task"], per_task["length"]))
    extra = [{"series": s, "task": t, "length": n, "score": None, "flag": f}
             for s, t, n, f in zip(flags["series"], flags["task"], flags["length"], flags["flag"])
             if (s, t, n) not in have]
    if not extra:
        return per_task
    extra_df = pd.DataFrame(extra).drop_duplicates(["series", "task", "length"])
    both = pd.concat([per_task, extra_df], ignore_index=True)
    return numeric(both, "score").sort_values(["series", "task", "length"], ignore_index=True)


def examples(df: pd.DataFrame, by: list[str]) -> tuple[str, pd.DataFrame]:
    """A few generations per model and group, beside what was expected (all text escaped)."""
    keep = [c for c in dict.fromkeys(("series", *by, "length", "sample", "score", "outputs", "pred", "prompt"))
            if c in df.columns]
    rows = scored(df).sort_values(["series", *[b for b in by if b in df], "sample" if "sample" in df else "series"])
    picked = rows.groupby(["series", *[b for b in by if b in df]], dropna=False, sort=False).head(N_EXAMPLES)
    out = picked[keep].copy()
    for c in ("pred", "prompt"):
        if c in out:
            out[c] = [_clip(v) for v in out[c]]
    return ("Example generations (expected outputs beside the model's text)", out)


def _clip(v: object, n: int = 300) -> object:
    if not isinstance(v, str):
        return v
    return v if len(v) <= n else v[: n // 2] + " … " + v[-n // 2:]


@plotter("ruler", title="RULER: score per task and length, effective length", paper=f"{PAPER} Table 1, Tables 6-18",
         metrics=("score",), paper_id=PAPER_ID)
def ruler(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    rows = scored(numeric(df, "length"))
    per_task = _with_flags(mean_sem(rows, ["series", "task", "length"], "score"), numeric(df, "length"))
    records = numeric(df, "length").to_dict("records")
    per_length = numeric(pd.DataFrame(length_means(records, by=("series",))), "score", "scored_mean")
    effective = effective_length(records, ctx.threshold, by=("series",))
    sustained = sustained_length(records, ctx.threshold, by=("series",))
    eff = pd.DataFrame([{"series": s, "threshold": ctx.threshold, "effective_length": effective.get((s,)),
                         "sustained_length": sustained.get((s,))} for s in dict.fromkeys(per_length["series"])])
    fig, (ax,) = figure(1, width=4.4, height=3.0)
    draw_lines(ax, per_length, "length", "score", ctx)
    ax.axhline(ctx.threshold, color="0.3", linestyle="--", linewidth=0.8, label=f"threshold {ctx.threshold:g}")
    for _, r in eff.iterrows():
        if r["effective_length"] is not None and pd.notna(r["effective_length"]):
            ax.axvline(r["effective_length"], color=ctx.color(r["series"]), linestyle=":", linewidth=1.2)
    log2_axis(ax, per_length["length"])
    ax.set_ylim(-3, 103)
    finish(ax, "context length (tokens)", "mean score over tasks (%)")
    first = Panel("ruler-length", "Mean over the same tasks at every length (a length where a task did not fit has "
                  "no mean: see 'missing'); dotted: RULER's effective length (largest length whose mean exceeds the "
                  "threshold); sustained length: largest length up to which every length's mean exceeds it",
                  fig, per_length)
    first.extra_tables.append(("Effective length", eff))

    series = list(dict.fromkeys(per_task["series"]))
    fig2, axes = figure(len(series), width=max(3.0, 0.6 * per_task["length"].nunique() + 2.0),
                        height=0.28 * per_task["task"].nunique() + 1.4)
    for ax, s in zip(axes, series):
        m = per_task[per_task["series"] == s].pivot_table(index="task", columns="length", values="score",
                                                                  dropna=False)
        heatmap(ax, m.to_numpy(), [_k(c) for c in m.columns], list(m.index), vmin=0, vmax=100, cmap="RdYlGn",
                colorbar_label=SCORE)
        finish(ax, "context length (tokens)", "task", s, show_legend=False)
        ax.title.set_color(ctx.color(s))
    second = Panel("ruler-tasks", "Score per task and length (blank: the task did not fit that length; "
                   "see its flag)", fig2, per_task)
    second.extra_tables.append(examples(df, ["task"]))
    return [first, second]


def _k(v: float) -> str:
    v = float(v)
    return f"{v / 1024:g}K" if v >= 1024 else f"{v:g}"


@plotter("niah-depth", title="Needle in a haystack: depth x length", paper=f"{PAPER} Tables 2-3", metrics=("score",),
         paper_id=PAPER_ID)
def niah_depth(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    rows = scored(numeric(df, "length", "depth", "depth_percent"))
    table = mean_sem(rows, ["series", "length", "depth"], "score")
    realised = rows.groupby(["series", "length", "depth"])["depth_percent"].mean().rename("realised_depth")
    table = table.merge(realised.reset_index(), on=["series", "length", "depth"], how="left")
    series = list(dict.fromkeys(table["series"]))
    fig, axes = figure(len(series), width=max(3.0, 0.7 * table["length"].nunique() + 2.0),
                       height=0.25 * table["depth"].nunique() + 1.5)
    for ax, s in zip(axes, series):
        m = table[table["series"] == s].pivot_table(index="depth", columns="length", values="score")
        heatmap(ax, m.to_numpy(), [_k(c) for c in m.columns], [f"{d:g}" for d in m.index], vmin=0, vmax=100,
                cmap="RdYlGn", colorbar_label=SCORE)
        finish(ax, "context length (tokens)", "needle depth (% of the haystack)", s, show_legend=False)
        ax.title.set_color(ctx.color(s))
    panel = Panel("niah-depth", "Single-needle retrieval by depth and length", fig, table,
                  "realised_depth: where the needle actually landed (percent of the haystack, sentence-aligned).")
    panel.extra_tables.append(examples(df, ["length", "depth"]))
    return [panel]


@plotter("niah-format", title="Needle formats: haystack, key and value types", paper=f"{PAPER} Table 4",
         metrics=("score",), paper_id=PAPER_ID)
def niah_format(df: pd.DataFrame, ctx: Context) -> list[Panel]:
    rows = scored(numeric(df, "length", "depth"))
    rows["format"] = [f"{h}-{k}-{v}" for h, k, v in zip(col(rows, "haystack"), col(rows, "key"), col(rows, "value"))]
    means = mean_sem(rows, ["series", "length", "format", "depth"], "score")
    wide = means.pivot_table(index=["series", "length", "format"], columns="depth", values="score", sort=False)
    wide.columns = [f"depth {d:g}%" for d in wide.columns]
    wide["mean"] = wide.mean(axis=1)
    table = wide.reset_index()
    facets = list(dict.fromkeys(zip(table["series"], table["length"])))
    fig, axes = figure(len(facets), width=3.4, height=0.3 * table["format"].nunique() + 1.5)
    for ax, (s, length) in zip(axes, facets):
        m = means[(means["series"] == s) & (means["length"] == length)].pivot_table(index="format", columns="depth",
                                                                                  values="score", sort=False)
        heatmap(ax, m.to_numpy(), [f"{d:g}%" for d in m.columns], list(m.index), vmin=0, vmax=100, cmap="RdYlGn",
                colorbar_label=SCORE)
        finish(ax, "needle depth", "haystack-key-value", f"{s}, {_k(length)} tokens", show_legend=False)
        ax.title.set_color(ctx.color(s))
    panel = Panel("niah-format", "Format table: score (%) per haystack-key-value format and depth", fig, table,
                  "repeat: RULER's noise haystack (one sentence group repeated); essay: running prose.")
    panel.extra_tables.append(examples(df, ["haystack", "key", "value", "depth"]))
    return [panel]

