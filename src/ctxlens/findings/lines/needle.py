"""The retrieval lines: RULER's effective length, needle retrieval at L vs 2L, lost in the middle
(RULER, Table 3; the long-sequence paper, Section 4, Tables 1-3).

The needle lines call the tests of ``ctxlens.findings.long_sequence`` (the findings table uses the
same ones): the haystack is the independent item, cells of one haystack are paired across depths
and lengths. RULER's line reads the whole task set (13 tasks) against the model's claimed length.
"""

from __future__ import annotations

import math

import numpy as np

from ctxlens.core.papers import RULER_TASKS as RULER_13  # RULER's 13 tasks (Table 1)
from ctxlens.core.papers import named
from ctxlens.core.stats import mde as mde_of
from ctxlens.core.stats import mean_resamples
from ctxlens.findings.card import Context, Line, absent, card_line, needs_by_se
from ctxlens.findings.long_sequence import (
    ALPHA,
    DEPTH_GRID,
    ENDS,
    MIDDLE,
    MIN_BOOTSTRAP,
    MIN_DIP,
    MIN_DROP,
    length_test,
    middle_test,
)
from ctxlens.findings.models import reaches
from ctxlens.findings.verdicts import number as _n

MIN_GAP = 10.0  # ctxlens's stated minimal effect for RULER: a task-set score 10 points from the threshold
N_BOOT = 2000


def _claimed(info: dict | None) -> int | None:
    """The model's claimed length: its training length, else its maximum positions (RULER compares
    the effective length with the length a model claims)."""
    for key in ("train_length", "max_positions"):
        v = (info or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _train_length(info: dict | None) -> int | None:
    v = (info or {}).get("train_length")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


@card_line("effective_length", "RULER effective length", "RULER (Table 3); " + named("long-sequence"),
           "the largest length whose mean score over the 13 tasks exceeds 85.6; RULER finds it below the "
           "claimed length for most models", order=1, reads=("ruler",))
def _effective(ctx: Context) -> Line:
    return effective(ctx.of("ruler"), ctx.model, _claimed(ctx.info), ctx.threshold)


@card_line("retrieval_2l", "needle retrieval at L vs 2L", named("long-sequence", "Tables 2-3"),
           "lower at 2L than at L when L is the training length (paired over haystacks)", order=2,
           applies=reaches(2), reads=("niah-depth",))
def _retrieval_2l(ctx: Context) -> Line:
    return retrieval_2l(ctx.of("niah-depth"), ctx.model, ctx.L, _train_length(ctx.info))


@card_line("middle_dip", "lost in the middle (at L)", named("long-sequence", "Table 2"),
           "depths 0 and 100 each above depth 50 (paired over haystacks)", order=3, reads=("niah-depth",))
def _middle_dip(ctx: Context) -> Line:
    return middle_dip(ctx.of("niah-depth"), ctx.model, ctx.L)


# ------------------------------------------------------------------------------ RULER
def _task_values(rows: list[dict], length: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        if r.get("length") == length and r.get("score") is not None:
            out.setdefault(str(r["task"]), []).append(float(r["score"]))
    return out


def task_set_score(values: dict[str, list[float]], n_boot: int = N_BOOT, seed: int = 0
                   ) -> tuple[float, tuple[float, float] | None]:
    """RULER's score of a task set (the mean of the task means, each task weighing the same) and its
    95% interval from a bootstrap over samples within each task (the tasks are RULER's fixed set;
    the samples are the random items). Each task's deviations from its mean are scaled by
    sqrt(n / (n - 1)) before resampling, so the bootstrap variance is the unbiased one even with
    few samples per task; the interval is clipped to [0, 100]. None with a task of one sample."""
    tasks = sorted(values)
    score = float(np.mean([np.mean(values[t]) for t in tasks]))
    if any(len(values[t]) < 2 for t in tasks):
        return score, None
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for t in tasks:
        total += mean_resamples(values[t], rng, n_boot)  # [n_boot]
    total /= len(tasks)
    lo, hi = np.quantile(total, [0.025, 0.975])
    return score, (max(0.0, float(lo)), min(100.0, float(hi)))


def _se(values: dict[str, list[float]]) -> float | None:
    """SE of the task-set score: sqrt(sum_t s_t^2 / n_t) / T (None with a task of one sample)."""
    if any(len(v) < 2 for v in values.values()):
        return None
    return math.sqrt(sum(np.var(v, ddof=1) / len(v) for v in values.values())) / len(values)


def _ci_text(ci: tuple[float, float] | None) -> str:
    return f" (CI {ci[0]:.1f} to {ci[1]:.1f})" if ci else ""


def effective(rows: list[dict], model: str, claimed: int | None, threshold: float) -> Line:
    """RULER's effective length (RULER, Table 3): the largest length whose task-set score over all 13
    tasks exceeds ``threshold`` (85.6), compared with the model's ``claimed`` length. Each length's
    score carries a bootstrap interval over samples within tasks (``task_set_score``); ctxlens's test
    calls a length below (above) the threshold only when the whole interval is. With fewer than the
    13 tasks at every length the line shows the subset's mean and determines no effective length."""
    ruler = [r for r in rows if r.get("score") is not None]
    if not ruler:
        return absent("effective_length", model, "not measured: no scored ruler rows")
    per = {n: _task_values(ruler, n) for n in sorted({r["length"] for r in ruler})}
    full = [n for n, v in per.items() if set(RULER_13) <= set(v)]
    if not full:
        return _subset(per, model, claimed)
    scored = {n: task_set_score({t: per[n][t] for t in RULER_13}) for n in full}
    ses = {n: _se({t: per[n][t] for t in RULER_13}) for n in full}
    eff = max((n for n in full if scored[n][0] > threshold), default=None)
    at = eff if eff is not None else max(full)
    score, ci = scored[at]
    n_items = min(len(per[at][t]) for t in RULER_13)
    se_at = ses[at]
    m = None if se_at is None else mde_of(se_at, sides=2)
    below = [n for n in full if (ci_n := scored[n][1]) is not None and ci_n[1] <= threshold]
    above = [n for n in full if (ci_n := scored[n][1]) is not None and ci_n[0] > threshold]
    curve = ", ".join(f"{scored[n][0]:.1f} at {n}" + _ci_text(scored[n][1]) for n in full)
    text = (f"{eff} tokens" if eff is not None else "none") + f" (claimed {claimed if claimed else 'not recorded'}; " \
        + f"13 tasks: {curve})"
    ci_text = f"95% CI {ci[0]:.1f} to {ci[1]:.1f}" if ci else "no interval (a task with one sample)"
    unc = (f"n = {n_items} samples per task; score {score:.1f} at {at}, {ci_text} (bootstrap over samples within "
           f"tasks); detects a gap >= {_n(m)} points from {threshold}"
           + ("" if m is not None and m <= MIN_GAP else f" (underpowered for ctxlens's stated {MIN_GAP:g})"))
    longest = max(full)
    if claimed is None:
        verdict = "claimed length not recorded: not compared"
    elif below and min(below) <= claimed:
        verdict = (f"below the claimed length {claimed}, as RULER finds for most models: at {min(below)} the "
                   f"score's 95% interval is below {threshold} (ctxlens's test)")
    elif longest >= claimed and all(n in above for n in full if n <= claimed):
        verdict = f"reaches the claimed length {claimed} (every interval up to it above {threshold}; ctxlens's test)"
    elif longest < claimed and all(n in above for n in full):
        verdict = (f"above {threshold} up to {longest}; lengths up to the claimed {claimed} not measured: "
                   "effective length not determined")
    else:
        verdict = f"undetermined: an interval includes {threshold}"
    null = verdict.startswith("undetermined")
    return Line("effective_length", model, eff, text, unc, verdict,
                {"effective_length": eff, "at": at, "score": score, "se": ses[at], "threshold": threshold,
                 "claimed": claimed, "scores": {n: scored[n][0] for n in full}, "intervals": {n: scored[n][1]
                                                                                               for n in full}},
                n=n_items, unit="samples per task", interval=ci, bounds=(0.0, 100.0), mde=m,
                underpowered=m is None or m > MIN_GAP, null=null, effect=MIN_GAP,
                needs=needs_by_se(n_items, m, MIN_GAP))


def _subset(per: dict[int, dict[str, list[float]]], model: str, claimed: int | None) -> Line:
    """No length holds all 13 tasks: the subset mean at the length with the most tasks (the longest
    on ties), with its interval, and no effective length."""
    at = max(per, key=lambda n: (len(set(per[n]) & set(RULER_13)) or len(per[n]), n))
    values = per[at]
    k = len(values)
    score, ci = task_set_score(values)
    n_items = min(len(v) for v in values.values())
    ci_text = f"95% CI {ci[0]:.1f} to {ci[1]:.1f}" if ci else "no interval (a task with one sample)"
    text = f"subset mean at length {at}: {score:.1f} ({k} of 13 tasks); effective length not determined"
    unc = f"n = {n_items} samples per task; {ci_text} (bootstrap over samples within tasks)"
    verdict = (f"not tested: the rows hold {k} of RULER's 13 tasks (claimed length "
               f"{claimed if claimed else 'not recorded'}); re-run the ruler part with all 13")
    return Line("effective_length", model, None, text, unc, verdict,
                {"effective_length": None, "at": at, "score": score, "k_tasks": k, "claimed": claimed},
                n=n_items, unit="samples", interval=ci, bounds=(0.0, 100.0))


# ------------------------------------------------------------------------------ needles
def _grid_note(got: dict) -> str:
    missing = got.get("missing") or []
    if not missing:
        return ""
    have = ", ".join(f"{d:g}" for d in got["depths"])
    return f"; the rows hold depths {have}, not the paper's {', '.join(f'{d:g}' for d in DEPTH_GRID)}: read as is"


def _detects(what: str, mde: float | None, n: int) -> str:
    """The power clause of the anytime-valid test: the smallest detectable effect, or that n haystacks
    cannot detect any."""
    return f"detects a {what} >= {_n(mde)}" if mde is not None else \
        f"{n} haystacks cannot detect even a {what} of 1 (80% power)"



def retrieval_2l(rows: list[dict], model: str, L: int, train: int | None) -> Line:
    """Needle accuracy at L and 2L per haystack (``long_sequence.length_test``): the paper expects a
    drop only from the training length T to 2T, so the verdict tests it only when L >= T; when 2L
    is inside T (or T is not known) the numbers are shown and the line says it is no test."""
    got = length_test(rows, L, plan=True)
    if got["why"]:
        return absent("retrieval_2l", model, f"not measured: {got['why']}")
    n, m, ci = got["n"], got["mde"], got["interval"]
    text = f"{got['at_L']:.2f} at {L} vs {got['at_2L']:.2f} at {2 * L} (mean over depths per haystack)"
    ci_text = (f"95% CI {ci[0]:+.2f} to {ci[1]:+.2f} (bootstrap over haystacks)" if ci else
               f"no interval (fewer than {MIN_BOOTSTRAP} haystacks to bootstrap)")
    unc = (f"n = {n} haystacks; 2L - L {got['diff']:+.2f}, {ci_text}; anytime-valid p of a drop = {got['p']:.3g}, "
           f"of a drop below the paper's {MIN_DROP:g} = {got['p_small']:.3g} (betting test over haystacks, valid "
           f"under optional stopping; fixed-n sign-flip p {got['p_fixed']:.3g}); {_detects('drop', m, n)}"
           + ("" if m is not None and m <= MIN_DROP else f" (underpowered for the paper's {MIN_DROP:g})"))
    if train is None:
        verdict = "not a test of the paper: the model's training length is not recorded"
    elif 2 * L <= train:
        verdict = f"not a test of the paper (2L = {2 * L} is inside the training length {train})"
    elif L < train:
        verdict = f"not a test of the paper (L = {L} is below the training length {train})"
    elif got["at_L"] == 0:
        verdict = "nothing retrieved at L: untestable"
    elif got["p"] <= ALPHA:
        verdict = "drops, as the paper expects (ctxlens's anytime-valid test)"
    elif got["p_small"] <= ALPHA:
        verdict = f"no drop as large as the paper's {MIN_DROP:g}: the drop is below it (ctxlens's anytime-valid test)"
    else:
        verdict = "no significant drop (ctxlens's anytime-valid test)"
    null = verdict.startswith("no significant")
    return Line("retrieval_2l", model, got["diff"], text, unc, verdict,
                {"at_L": got["at_L"], "at_2L": got["at_2L"], "n": n, "p": got["p"], "p_small": got["p_small"],
                 "p_fixed": got["p_fixed"], "needs": got["needs"], "train_length": train, "depths": got["depths"]},
                n=n, unit="haystacks", interval=ci, bounds=(-1.0, 1.0), mde=m,
                underpowered=m is None or m > MIN_DROP, null=null, effect=MIN_DROP, needs=got["needs"])


def middle_dip(rows: list[dict], model: str, L: int) -> Line:
    """Each end (depth 0, depth 100) against the middle (depth 50) on haystack pairs at L
    (``long_sequence.middle_test``): exact McNemar per end, Holm over the two ends, and the paired
    Newcombe interval of each end minus the middle. ``value`` is the smaller end minus the middle."""
    got = middle_test(rows, L, plan=True)
    if got["why"]:
        return absent("middle_dip", model, f"not measured: {got['why']}")
    s, e, n, m = got["start"], got["end"], got["n"], got["mde"]
    worse = min(ENDS, key=lambda k: got[k]["diff"])
    value, ci = got[worse]["diff"], got[worse]["interval"]
    text = (f"start (depth 0) {s['end']:.2f}, middle (depth {MIDDLE:g}) {s['middle']:.2f}, end (depth 100) "
            f"{e['end']:.2f} at {L}")
    unc = (f"n = {n} haystacks; start - middle {s['diff']:+.2f} (95% CI {s['interval'][0]:+.2f} to "
           f"{s['interval'][1]:+.2f}; anytime-valid p of a dip {s['p']:.3g}, of the reverse {s['p_reverse']:.3g}, of "
           f"a dip below {MIN_DIP:g} {s['p_small']:.3g}); end - middle {e['diff']:+.2f} (95% CI "
           f"{e['interval'][0]:+.2f} to {e['interval'][1]:+.2f}; p {e['p']:.3g} / {e['p_reverse']:.3g} / "
           f"{e['p_small']:.3g}); betting tests "
           f"over haystacks, valid under optional stopping, Holm over the two ends; {_detects('dip', m, n)}"
           + ("" if m is not None and m <= MIN_DIP else f" (underpowered for the paper's {MIN_DIP:g})")
           + _grid_note(got))
    if not got["retrieved"]:
        verdict = "nothing retrieved at depths 0, 50, 100: untestable"
    elif got["dips"] == list(ENDS):
        verdict = "the middle dips below both ends, as the paper finds"
    elif got["dips"]:
        verdict = f"one-ended: the middle dips below the {got['dips'][0]} only (Holm over the two ends)"
    elif got["reverse"]:
        verdict = "no dip in the middle"
    elif got["small"]:
        verdict = (f"no dip as large as the paper's {MIN_DIP:g}: at the " + " and the ".join(got["small"])
                   + " the dip is below it (ctxlens's anytime-valid test, Holm)")
    else:
        verdict = "no significant dip in the middle"
    null = verdict == "no significant dip in the middle" and bool(got["retrieved"])
    if got["reverse"]:
        verdict += "; the " + " and the ".join(got["reverse"]) + " below the middle (anytime-valid test, Holm), " \
            "the reverse of the paper's pattern"
    return Line("middle_dip", model, value, text, unc, verdict,
                {"start": s["end"], "middle": s["middle"], "end": e["end"], "p_start": s["p"], "p_end": e["p"],
                 "p_reverse": {k: got[k]["p_reverse"] for k in ENDS}, "p_small": {k: got[k]["p_small"] for k in ENDS},
                 "small": got["small"], "reverse": got["reverse"], "needs": got["needs"],
                 "ci_start": s["interval"], "ci_end": e["interval"], "dips": got["dips"], "missing": got["missing"],
                 "worse": worse},
                n=n, unit="haystacks", interval=ci, bounds=(-1.0, 1.0), mde=m,
                underpowered=m is None or m > MIN_DIP, null=null, effect=MIN_DIP, needs=got["needs"])
