"""The intrinsic-entropy line: CE against the intrinsic entropy of the final features (the
intrinsic-entropy paper, Section 2.2.1-2.2.2, Eq. 2, Figure 1; Appendix G).

The paper assumes the entropy S(P_l) rises with the context length l (Assumption 2) and derives
the Bayes risk linear in it with a negative slope, R = -k S + const (Eq. 2), measured with
S_n = sum_{i <= n} log of the relative eigenvalues (each divided by the largest) of last-token
features over >= 10000 samples per length (Section 2.2.2, Appendix H.1.2), and it states the
relation for models close to the Bayes model (Appendix G). Its 0.97 (Figure 1) is the correlation
between entropies of different subspaces, not a threshold on CE vs entropy.

The card tests both statements over the windows (the independent items; sample i is the same
window at every length): the slope of S_n on log2 l and Pearson r(CE, S_n) across lengths. Each
verdict is a one-sided randomization test (ctxlens's test) against the ``stage="permutation"``
replicates of ``intrinsic-entropy``, where each window's lengths are shuffled (the null: context
length changes nothing, so a window's features are exchangeable across lengths); the interval
shown is the percentile interval over the ``stage="bootstrap"`` replicates (one resample of
windows shared by every length). (A percentile-bootstrap test of the slope fired at twice its
nominal rate in the calibration simulations with 60 windows; the randomization test is exact.)
It needs at least ``MIN_LENGTHS`` lengths; fewer: "not tested".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ctxlens.core.papers import named
from ctxlens.core.stats import normal_quantile, percentile_interval, randomization_p, sample_sd
from ctxlens.findings.card import Context, Line, absent, card_line, needs_by_se
from ctxlens.findings.verdicts import number as _n

MIN_LENGTHS = 6  # a slope or a correlation over fewer lengths has too few degrees of freedom to say much
ALPHA = 0.05  # one-sided: the paper states the direction of both effects
ENTROPY_RISE = 0.1  # nats of S_n per doubling of l: ctxlens's stated effect (the paper shows the rise, not its size)
SCOPE = "stated for near-Bayes models; Appendix G"


# ------------------------------------------------------------------------------- from the rows
def _s_n(eigenvalues: list[float], n: int, norm: str) -> float | None:
    """S_n of descending raw eigenvalues, divided by the largest (``max``) or their sum (``trace``)."""
    if len(eigenvalues) < n or not eigenvalues[0] > 0:
        return None
    scale = eigenvalues[0] if norm == "max" else sum(eigenvalues)
    return sum(math.log(max(v / scale, 1e-300)) for v in eigenvalues[:n])


def points(rows: list[dict], n_eig: int, norm: str = "max") -> dict[int, tuple[float, float]]:
    """{length: (CE, S_n)} of the measure rows: S_n from the raw ``eigenvalue`` rows when the rows
    hold them (either normalisation), else the ``intrinsic_entropy`` rows (``max`` only)."""
    ce: dict[int, float] = {}
    eig: dict[int, list[tuple[int, float]]] = {}
    ent: dict[int, float | None] = {}
    for r in rows:
        if r.get("stage") != "measure" or r.get("value") is None or r.get("length") is None:
            continue
        q, length = r.get("quantity"), int(r["length"])
        if q == "ce":
            ce[length] = float(r["value"])
        elif q == "eigenvalue":
            eig.setdefault(length, []).append((int(r["index"]), float(r["value"])))
        elif q == "intrinsic_entropy" and r.get("n_eig") == n_eig:
            ent[length] = float(r["value"])
    s: dict[int, float | None] = ({n: _s_n([v for _, v in sorted(e)], n_eig, norm) for n, e in eig.items()}
                                  if eig else ent if norm == "max" else {})
    return {n: (ce[n], sn) for n in sorted(ce) if (sn := s.get(n)) is not None}


def replicates(rows: list[dict], n_eig: int, norm: str = "max", stage: str = "bootstrap"
               ) -> list[dict[int, tuple[float, float]]]:
    """Per replicate, {length: (CE, S_n)} from the rows of ``stage`` ("bootstrap" or "permutation")."""
    ce: dict[int, dict[int, float]] = {}
    s: dict[int, dict[int, float]] = {}
    for r in rows:
        if r.get("stage") != stage or r.get("value") is None:
            continue
        b, length = int(r["replicate"]), r["length"]
        if r.get("quantity") == "ce":
            ce.setdefault(b, {})[length] = float(r["value"])
        elif r.get("quantity") == "intrinsic_entropy" and r.get("n_eig") == n_eig and r.get("norm") == norm:
            s.setdefault(b, {})[length] = float(r["value"])
    return [{n: (ce[b][n], s[b][n]) for n in sorted(ce[b]) if n in s.get(b, {})} for b in sorted(ce)]


def slope(pts: dict[int, tuple[float, float]]) -> float | None:
    """OLS slope of S_n on log2 l (nats of entropy per doubling of the context)."""
    if len(pts) < 2:
        return None
    x = [math.log2(n) for n in pts]
    y = [s for _, s in pts.values()]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((a - mx) ** 2 for a in x)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx if sxx > 0 else None


def pearson(pts: dict[int, tuple[float, float]]) -> float | None:
    """Pearson r of CE and S_n across the lengths (+-1 for two lengths, whatever the model does);
    None when either is constant."""
    if len(pts) < 2:
        return None
    x, y = [c for c, _ in pts.values()], [s for _, s in pts.values()]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx, syy = sum((a - mx) ** 2 for a in x), sum((b - my) ** 2 for b in y)
    if not (sxx > 0 and syy > 0):
        return None
    return max(-1.0, min(1.0, sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)))


def _interval(values: list[float | None]) -> tuple[tuple[float, float], float] | None:
    """(95% percentile interval, SD) of the finite bootstrap values; None with fewer than 20."""
    if sum(1 for x in values if x is not None and math.isfinite(x)) < 20:
        return None
    interval, sd = percentile_interval(values), sample_sd(values)
    return None if interval is None or sd is None else (interval, sd)


def entropy_test(rows: list[dict], n_eig: int | None = None, norm: str = "max") -> dict | None:
    """The two statements of the paper on the rows, for S_n with ``n_eig`` eigenvalues (default:
    the largest n the rows hold): {"n_eig", "lengths", "n" (windows), "slope", "slope_ci"
    (bootstrap), "slope_p" (randomization, one-sided), "slope_mde" ((z_0.95 + z_0.8) x the SD of the
    permutation slopes), "rises" (slope_p <= ALPHA), "r", "r_ci", "r_p", "r_mde", "negative"
    (r_p <= ALPHA), "why" (why untested, else None)}. None without rows."""
    ns = sorted({int(r["n_eig"]) for r in rows if r.get("quantity") == "intrinsic_entropy" and r.get("n_eig")})
    if not ns:
        return None
    k = n_eig if n_eig is not None else ns[-1]
    pts = points(rows, k, norm)
    n = next((int(r["n_windows"]) for r in rows if r.get("n_windows")), None) or \
        next((int(r["n_samples"]) for r in rows if r.get("n_samples")), None)
    out: dict[str, Any] = {
        "n_eig": k, "norm": norm, "lengths": sorted(pts), "n": n, "slope": slope(pts), "slope_ci": None,
        "slope_mde": None, "rises": None, "r": pearson(pts), "r_ci": None, "r_mde": None, "negative": None,
        "why": None}
    if len(pts) < MIN_LENGTHS:
        return {**out, "why": f"{len(pts)} lengths (the test needs >= {MIN_LENGTHS})"}
    reps = [p for p in replicates(rows, k, norm) if len(p) == len(pts)]
    perms = [p for p in replicates(rows, k, norm, "permutation") if len(p) == len(pts)]
    slopes, rs = _interval([slope(p) for p in reps]), _interval([pearson(p) for p in reps])
    null_s = [v for v in (slope(p) for p in perms) if v is not None]
    null_r = [v for v in (pearson(p) for p in perms) if v is not None]
    if slopes is None or rs is None or len(null_s) < 19 or len(null_r) < 19 or None in (out["slope"], out["r"]):
        return {**out, "why": "no bootstrap and permutation replicates over windows in the rows"}
    power = normal_quantile(1 - ALPHA) + normal_quantile(0.8)
    sp, rp = randomization_p(out["slope"], null_s, "greater"), randomization_p(out["r"], null_r, "less")
    fall_p = randomization_p(out["slope"], null_s, "less")
    return {**out, "slope_ci": slopes[0], "slope_p": sp, "slope_mde": power * float(np.std(null_s, ddof=1)),
            "rises": sp <= ALPHA, "fall_p": fall_p, "falls": fall_p <= ALPHA, "r_ci": rs[0], "r_p": rp,
            "r_mde": min(2.0, power * float(np.std(null_r, ddof=1))),
            "negative": rp <= ALPHA}


# ------------------------------------------------------------------------------- the line
@card_line("ce_entropy", "CE vs intrinsic entropy", named("intrinsic-entropy", "Section 2.2.1-2.2.2, Eq. 2, Figure 1"),
           f"S_n rises with l and CE = -k S_n + const: r(CE, S_n) < 0 ({SCOPE})",
           order=11, reads=("intrinsic-entropy",))
def _ce_entropy(ctx: Context) -> Line:
    return ce_entropy(ctx.of("intrinsic-entropy"), ctx.model)


def ce_entropy(rows: list[dict], model: str) -> Line:
    """Pearson r(CE, S_n) across lengths with its bootstrap interval over windows, and the slope of
    S_n on log2 l (does the entropy rise with l?); "not tested" with fewer than ``MIN_LENGTHS``
    lengths or without the bootstrap rows. The trace-normalised slope is shown beside the paper's."""
    t = entropy_test(rows)
    if t is None or not t["lengths"]:
        return absent("ce_entropy", model, "not measured: no intrinsic-entropy rows")
    k, r, sl, n = t["n_eig"], t["r"], t["slope"], t["n"]
    text = (f"r(CE, S_{k}) = {_n(r)} over {len(t['lengths'])} lengths; S_{k} slope {_n(sl)} nats per doubling of l")
    numbers = {"r": r, "slope": sl, "n_eig": k, "lengths": t["lengths"], "r_ci": t["r_ci"], "slope_ci": t["slope_ci"]}
    if t["why"]:
        return Line("ce_entropy", model, r, text, f"n = {n} windows; {t['why']}",
                    f"not tested: {t['why']}; re-run the part", numbers, n=n, unit="windows", bounds=(-1.0, 1.0))
    trace = entropy_test(rows, k, "trace")
    tr = "" if trace is None or trace["slope_ci"] is None else \
        f"; trace-normalised slope 95% CI {_n(trace['slope_ci'][0])} to {_n(trace['slope_ci'][1])}"
    numbers["trace_slope_ci"] = None if trace is None else trace["slope_ci"]
    unc = (f"n = {n} windows (paired across lengths); r 95% CI {_n(t['r_ci'][0])} to {_n(t['r_ci'][1])} "
           f"(bootstrap), p = {t['r_p']:.3g} (randomization over lengths); slope 95% CI {_n(t['slope_ci'][0])} to "
           f"{_n(t['slope_ci'][1])}, p = {t['slope_p']:.3g}, detects >= {_n(t['slope_mde'], 2)}{tr}")
    rises = ("S_n rises with l" if t["rises"] else
             f"S_n falls with l (one-sided randomization p = {t['fall_p']:.3g}): the opposite of the paper's premise"
             if t["falls"] else "no significant rise of S_n with l")
    sign = "r < 0 as Eq. 2" if t["negative"] else "r < 0 not shown"
    under = n is not None and n < 10000
    null = not (t["rises"] or t["falls"])  # the rise is the premise the card asks about: decided, or needs more windows
    return Line("ce_entropy", model, r, text, unc, f"{rises} (ctxlens's test); {sign} ({SCOPE})"
                + ("; fewer windows than the paper's 10000" if under else ""), numbers, n=n, unit="windows",
                interval=t["r_ci"], bounds=(-1.0, 1.0), mde=t["r_mde"], underpowered=bool(t["r_mde"] >= 1.0),
                ranges=dict.fromkeys(("slope", "trace-normalised slope"), (-math.inf, math.inf)),  # nats per doubling
                null=null, effect=ENTROPY_RISE, needs=needs_by_se(n, t["slope_mde"], ENTROPY_RISE) if null else None)
