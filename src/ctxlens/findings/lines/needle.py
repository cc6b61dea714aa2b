"""The retrieval lines: RULER's effective length, needle retrieval at L vs 2L, lost in the middle
(RULER, Table 3; the long-sequence paper, Section 4, Tables 1-3)."""

from __future__ import annotations

import math

from ctxlens.findings.card import Context, Line, absent, card_line
from ctxlens.findings.long_sequence import MIDDLE_DEPTHS, Z_ONE_SIDED_05, _proportion_drop, _scores
from ctxlens.findings.models import reaches
from ctxlens.findings.verdicts import PAPERS
from ctxlens.tasks.scoring import effective_length, length_means


def _n(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


def _absent(key: str, model: str, why: str) -> Line:
    return absent(key, model, why)


@card_line("effective_length", "RULER effective length", "RULER (Table 3); " + PAPERS["002"],
           "the largest length whose mean score over the task set exceeds the threshold; RULER finds it below the "
           "claimed length for most models", order=1)
def _effective(ctx: Context) -> Line:
    return effective(ctx.of("ruler"), ctx.model, ctx.L, ctx.threshold)


def _needle_rows(ctx: Context) -> list[dict]:
    return _retrieval(ctx.of("niah-depth")) or [
        r for r in _retrieval(ctx.of("ruler")) if str(r.get("task", "")).startswith("niah_single")]


@card_line("retrieval_2l", "needle retrieval at L vs 2L", PAPERS["002"] + ", Tables 2-3",
           "lower at 2L than at L (one-sided z > 1.645)", order=2, applies=reaches(2))
def _retrieval_2l(ctx: Context) -> Line:
    return retrieval_2l(_needle_rows(ctx), ctx.model, ctx.L)


@card_line("middle_dip", "lost in the middle (at L)", PAPERS["002"] + ", Table 2",
           "depths 0 and 100 pooled above depths 40-60 (one-sided z > 1.645)", order=3)
def _middle_dip(ctx: Context) -> Line:
    return middle_dip(_retrieval(ctx.of("niah-depth")), ctx.model, ctx.L)


def effective(rows: list[dict], model: str, L: int, threshold: float) -> Line:
    """RULER's effective length (``tasks.scoring.effective_length``) and the task-set mean at it
    with its standard error (per task: sd / sqrt(n); the mean of T tasks: sqrt(sum se^2) / T);
    when there is none, the mean at the longest length up to L where the whole task set was scored."""
    ruler = [r for r in rows if r.get("score") is not None]
    if not ruler:
        return _absent("effective_length", model, "not measured: no scored ruler rows")
    eff = effective_length(ruler, threshold, by=("model",)).get((model,))
    whole = [m["length"] for m in length_means(ruler) if m["score"] is not None and m["length"] <= L]
    at = eff if eff is not None else max(whole) if whole else min(r["length"] for r in ruler)
    tasks = sorted({r["task"] for r in ruler if r["length"] == at})
    ses, means = [], []
    for t in tasks:
        s = [float(r["score"]) for r in ruler if r["length"] == at and r["task"] == t]
        m = sum(s) / len(s)
        means.append(m)
        ses.append(math.sqrt(sum((x - m) ** 2 for x in s) / (len(s) - 1) / len(s)) if len(s) > 1 else float("nan"))
    mean = sum(means) / len(means)
    se = None if any(math.isnan(x) for x in ses) else math.sqrt(sum(x * x for x in ses)) / len(ses)
    text = (f"{eff} tokens" if eff is not None else "none") + f" (L = {L})"
    unc = f"task-set score {mean:.1f} ± {_n(se)} (SE) at {at}"
    verdict = ("reaches L" if eff is not None and eff >= L else "below L, as RULER finds for most models")
    return Line("effective_length", model, eff, text, unc, verdict,
                {"effective_length": eff, "at": at, "score": mean, "se": se, "threshold": threshold})


def _retrieval(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("score") is not None]


def retrieval_2l(rows: list[dict], model: str, L: int) -> Line:
    """Pooled needle accuracy at L and 2L (binomial SE each) and the one-sided z of the drop."""
    at, beyond = _scores(rows, length=L), _scores(rows, length=2 * L)
    if not at or not beyond:
        return _absent("retrieval_2l", model, f"not measured: no needle rows at both {L} and {2 * L}")
    p1, p2, z = _proportion_drop(at, beyond)
    text = f"{p1:.2f} at {L} vs {p2:.2f} at {2 * L}"
    unc = f"SE {_se(p1, len(at)):.2f} / {_se(p2, len(beyond)):.2f} (n = {len(at)} / {len(beyond)}); z = {_n(z)}"
    verdict = ("nothing retrieved at L" if p1 == 0 else "drops, as expected" if z is not None and z > Z_ONE_SIDED_05
               else "no significant drop")
    return Line("retrieval_2l", model, p2 - p1, text, unc, verdict,
                {"at_L": p1, "at_2L": p2, "n_L": len(at), "n_2L": len(beyond), "z": z})


def middle_dip(rows: list[dict], model: str, L: int) -> Line:
    """Accuracy at the ends (depths 0 and 100 pooled) minus the middle (40-60) at L, with the
    unpooled standard error of the difference and the pooled one-sided z."""
    lo, hi = MIDDLE_DEPTHS
    got = [r for r in rows if r.get("length") == L]
    ends = _scores(got, depth=0.0) + _scores(got, depth=100.0)
    middle = [s for r in got if r.get("depth") is not None and lo <= r["depth"] <= hi for s in _scores([r])]
    if not ends or not middle:
        return _absent("middle_dip", model, f"not measured: no needle rows at depths 0, 100 and {lo:g}-{hi:g} at {L}")
    p1, p2, z = _proportion_drop(ends, middle)
    se = math.sqrt(_se(p1, len(ends)) ** 2 + _se(p2, len(middle)) ** 2)
    verdict = ("nothing retrieved" if p1 == p2 == 0 else "a dip in the middle, as expected"
               if z is not None and z > Z_ONE_SIDED_05 else "no significant dip")
    return Line("middle_dip", model, p1 - p2, f"ends {p1:.2f} vs middle {p2:.2f}: dip {p1 - p2:+.2f}",
                f"± {se:.2f} (SE); z = {_n(z)}", verdict, {"ends": p1, "middle": p2, "se": se, "z": z})
