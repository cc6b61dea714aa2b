"""The loss lines: CE against visible context and its power-law fit, the observed gain over the last
measured doubling, suffix perplexity at 2L vs L (the intrinsic-entropy paper, Section 2.2.2, Eq. 2-3,
Figure 2; the geometry paper, Sections 4-5).

The intrinsic-entropy paper approximates the Bayes risk H(P, P_l) at context length l by a trained
model's CE and derives dR/dl < 0 (Section 2.2.1, from Assumptions 1-2). The card's test of it is the
OBSERVED fall of CE over the last measured doubling, CE(l/2) - CE(l), paired over windows: in
``loss-vs-length`` sample i is the same document window at every length (every length's windows are
cut from one array of ids and score the same targets; with ``scoring="positions"`` each length reads
its own targets, l tokens into one forward of the window), so each window gives one difference and
the windows are the independent items. The fit C0 + C / l^gamma (Eq. 3) is descriptive: it is not
extrapolated (a "usable context" beyond the measured lengths is "not determined").

Suffix perplexity: ``suffix-ppl`` scores the same suffix tokens of each sequence at every length
(windows cut once and cropped on the left), so 2L vs L is paired over sequences when the rows hold
each sequence's NLL (``stage="sequence"`` rows).
"""

from __future__ import annotations

import functools
import math

from ctxlens.core.papers import named
from ctxlens.core.stats import normal_quantile, one_sample_t, t_quantile
from ctxlens.findings.card import Context, Line, absent, card_line, needs_by_se
from ctxlens.findings.models import train_length_of
from ctxlens.findings.verdicts import number as _n

USABLE_GAIN = 0.01  # nats per doubling of the context: the smallest gain the card calls a use of context
SIGN_SHARE = 0.65  # the sequential sign test's stated effect: 65% of windows gain (the paper states no size)
MIN_ITEMS = 3  # a paired t interval needs at least 3 items (2 degrees of freedom)
_t95 = functools.lru_cache(maxsize=None)(t_quantile)  # the two-sided 5% t value by degrees of freedom (a bisection)


# ------------------------------------------------------------------------------- the paired test
def paired_mean(diffs: list[float]) -> dict:
    """The mean of paired differences (one per independent item) with its t interval and power:
    {"n", "mean", "se", "ci" (95%, Student's t), "p" (two-sided), "mde" (smallest true mean the
    two-sided 5% test detects with 80% power, t quantile + normal power term), "fires"
    ("up" when the interval lies above 0, "down" below, else None)}; fewer than ``MIN_ITEMS``
    items or zero spread: no interval and never fires."""
    d = [float(x) for x in diffs if x is not None and math.isfinite(float(x))]
    n = len(d)
    out = {"n": n, "mean": sum(d) / n if d else None, "se": None, "ci": None, "p": None, "mde": None, "fires": None}
    if n < MIN_ITEMS:
        return out
    mean, se, p = one_sample_t(d)
    if not se > 0:
        return {**out, "se": se}
    t = _t95(n - 1)
    ci = (mean - t * se, mean + t * se)
    fires = "up" if ci[0] > 0 else "down" if ci[1] < 0 else None
    return {**out, "se": se, "ci": ci, "p": p, "mde": (t + normal_quantile(0.8)) * se, "fires": fires}


def sign_test(diffs: list[float]) -> dict:
    """The anytime-valid sign test of the paired differences, in the windows' order (``core.sequential``:
    a betting test of the share of windows whose difference is positive, ties counting a half, valid
    however many rounds add windows): {"n", "share", "p_gain" (anytime p of H0: share <= 1/2 against more
    windows gaining), "p_loss" (against fewer), "fires" ("up", "down" or None, each side at 2.5%),
    "needs" (windows the test needs to see ``SIGN_SHARE`` with 80% power, monitored after every window)}."""
    from ctxlens.core.sequential import test_mean

    signs = [1.0 if d > 0 else 0.0 if d < 0 else 0.5 for d in diffs if d is not None and math.isfinite(float(d))]
    up = test_mean(signs, 0.5, 0.0, 1.0, alpha=SIGN_ALPHA, alternative="greater")
    down = test_mean(signs, 0.5, 0.0, 1.0, alpha=SIGN_ALPHA, alternative="less")
    fires = "up" if up.decided else "down" if down.decided else None
    return {"n": len(signs), "share": sum(signs) / len(signs) if signs else None, "p_gain": up.p_anytime,
            "p_loss": down.p_anytime, "fires": fires, "needs": sign_needs()}


SIGN_ALPHA = 0.025  # each side of the two-sided sign test


@functools.cache
def sign_needs(share: float = SIGN_SHARE) -> int | None:
    """Windows the sequential sign test needs to see a share ``share`` of windows gaining with 80% power
    (simulated: 2,000 sequences, monitored after every window)."""
    from ctxlens.core.sequential import needed_n

    return needed_n(lambda rng, shape: (rng.random(shape) < share).astype(float), 0.5, 0.0, 1.0, alpha=SIGN_ALPHA)


# ------------------------------------------------------------------------------- loss-vs-length
def per_window(rows: list[dict]) -> dict[int, dict[int, float]]:
    """{length: {sample: CE}} of the ``loss-vs-length`` measure rows (finite CE only)."""
    out: dict[int, dict[int, float]] = {}
    for r in rows:
        if r.get("stage") == "measure" and r.get("ce") is not None and r.get("sample") is not None:
            if math.isfinite(float(r["ce"])):
                out.setdefault(int(r["length"]), {})[int(r["sample"])] = float(r["ce"])
    return out


def last_doubling(rows: list[dict]) -> tuple[int, int, list[float]] | None:
    """(l_prev, l_top, [CE(l_prev) - CE(l_top) per window]) over the two largest measured lengths,
    paired over the windows measured at both; None with fewer than two lengths."""
    by = per_window(rows)
    if len(by) < 2:
        return None
    prev, top = sorted(by)[-2:]
    both = sorted(set(by[prev]) & set(by[top]))
    return prev, top, [by[prev][i] - by[top][i] for i in both]


def gain_test(rows: list[dict]) -> dict | None:
    """The observed gain over the last measured doubling, per doubling (divided by log2 of the two
    lengths' ratio, 1 for a true doubling), paired over windows (``paired_mean``), with the lengths and
    the windows' sequential sign test (``sign_test``, the windows in sample order)."""
    got = last_doubling(rows)
    if got is None:
        return None
    prev, top, diffs = got
    per = math.log2(top / prev)
    return {**paired_mean([d / per for d in diffs]), "prev": prev, "top": top, "sign": sign_test(diffs)}


def _fit(rows: list[dict]) -> dict[str, dict]:
    return {r["quantity"]: r for r in rows
            if r.get("stage") == "fit" and r.get("fit", "power_law") == "power_law"}


def _value(fit: dict[str, dict], key: str) -> float | None:
    v = fit.get(key, {}).get("value")
    return None if v is None else float(v)


def _degenerate(rows: list[dict]) -> str | None:
    """The power-law fit's flags when one says gamma ended at its search range (no power law in the
    points; ``metrics.fits.fit_power_law``), else None."""
    flags = {str(r["flag"]) for r in _fit(rows).values() if r.get("flag")}
    return "; ".join(sorted(flags)) if any("search range" in f for f in flags) else None


def _c0_state(fit: dict[str, dict]) -> str | None:
    """Why C0 is not identified ("at its bound 0" for the constrained fit, "negative" for an old
    unconstrained one), else None."""
    c0 = _value(fit, "C0")
    if any("C0 at its bound" in str(r.get("flag") or "") for r in fit.values()):
        return "at its bound 0; the unconstrained optimum is negative"
    if c0 is not None and c0 < 0:
        return f"the unconstrained fit puts it at {_n(c0)} < 0, impossible for a cross-entropy"
    return None


@card_line("loss_fit", "CE vs context: C0 + C / l^gamma", named("intrinsic-entropy", "Section 2.2.2, Eq. 3, Figure 2"),
           "a fit of the measured lengths (descriptive); C0 >= 0 is the CE floor", order=4, reads=("loss-vs-length",))
def _loss_fit(ctx: Context) -> Line:
    return loss_fit(ctx.of("loss-vs-length"), ctx.model)


def loss_fit(rows: list[dict], model: str) -> Line:
    """C0, C and gamma of C0 + C / l^gamma as the ``loss-vs-length`` fit rows record them, with the
    bootstrap interval of gamma over windows (rows from before the bootstrap: none, and said so).
    C0 at its bound or negative is reported as "not identified"; the fit is descriptive (no
    verdict rests on it: the test of the loss side is the observed gain, ``usable_context``)."""
    fit = _fit(rows)
    g, c0, c = _value(fit, "gamma"), _value(fit, "C0"), _value(fit, "C")
    if g is None or c is None:
        return absent("loss_fit", model, "not measured: no loss-vs-length fit rows")
    r2 = _value(fit, "r2")
    flag, c0_why = _degenerate(rows), _c0_state(fit)
    lo, hi = fit["gamma"].get("ci_low"), fit["gamma"].get("ci_high")
    by = per_window(rows)
    n_docs = fit["gamma"].get("n_docs") or (len(by[max(by)]) if by else None)
    boot = lo is not None and hi is not None
    c0_text = f"C0 not identified ({c0_why})" if c0_why else f"C0 = {_n(c0)} nats"
    text = f"{c0_text}, C = {_n(c)}, gamma = {_n(g)} (R^2 {_n(r2)})"
    unc = (f"n = {n_docs} windows; gamma 95% CI {_n(lo)} to {_n(hi)} (bootstrap over windows, "
           f"{fit['gamma'].get('n_boot')} refits, SE-weighted, C0 >= 0)" if boot else
           f"n = {n_docs} windows; no interval: the rows hold an unweighted, unconstrained fit without a "
           "bootstrap over windows (re-run the part)")
    verdict = (f"degenerate fit ({flag})" if flag else
               "descriptive (C0 not identified)" if c0_why else "descriptive (the test is the gain line)")
    return Line("loss_fit", model, g, text, unc, verdict,
                {"C0": c0, "C": c, "gamma": g, "r2": r2, "flag": flag, "c0_identified": c0_why is None,
                 "gamma_ci": (lo, hi) if boot else None},
                n=n_docs, unit="windows", interval=(lo, hi) if lo is not None and hi is not None else None,
                bounds=(0.0, math.inf))


def usable_length(c: float, gamma: float, gain: float = USABLE_GAIN) -> float:
    """l* with C / l^gamma - C / (2l)^gamma = ``gain``; ``inf`` when it lies beyond any float (a gamma
    near 0: the fit still gains that much at every length). Taken in log space, so a tiny gamma
    cannot overflow."""
    log_l = math.log(c * (1 - 2 ** -gamma) / gain) / gamma
    return math.exp(log_l) if log_l < 700 else math.inf


def _usable(fit: dict[str, dict], top: int) -> tuple[str, float | None]:
    """Where the fit's gain per doubling falls below ``USABLE_GAIN``, only when that lies within
    the measured lengths (no extrapolation): (words, l* or None)."""
    c, g = _value(fit, "C"), _value(fit, "gamma")
    if c is None or g is None or _c0_state(fit) or not (c > 0 and g > 0):
        return f"usable context: not determined (no fit with an identified C0 >= 0; nothing beyond {top})", None
    lstar = usable_length(c, g)
    if lstar * 2 <= top:
        return f"the fit's gain drops below {USABLE_GAIN} nats/doubling at l = {lstar:.0f} (within the lengths)", lstar
    return f"usable context: beyond {top}, not determined (the fit would extrapolate)", None


@card_line("usable_context", "CE gain over the last measured doubling, CE(l/2) - CE(l)",
           named("intrinsic-entropy", "Section 2.2.1-2.2.2 (dR/dl < 0), Eq. 3, Figure 2"),
           "the Bayes-risk proxy still falls: gain > 0", order=5, reads=("loss-vs-length",))
def _usable_context(ctx: Context) -> Line:
    return usable_context(ctx.of("loss-vs-length"), ctx.model, ctx.L, "loss-vs-length" in ctx.sequential)


def usable_context(rows: list[dict], model: str, L: int, sequential: bool = False) -> Line:
    """The observed CE gain over the last measured doubling, paired over windows, with its t
    interval and power; the verdict fires "falls" only when the interval lies above 0. The fit's
    predicted gain and a usable context are shown only within the measured lengths. ``sequential``
    (a profile whose rounds may add windows to this part: ``profile.rounds``): the verdict is the
    anytime-valid sign test's instead (``sign_test``), which stays at its level however many rounds
    looked; the t interval is then descriptive."""
    t = gain_test(rows)
    if t is None or not t["n"]:
        return absent("usable_context", model, "not measured: no loss-vs-length rows at two lengths")
    fit = _fit(rows)
    prev, top, n = t["prev"], t["top"], t["n"]
    c, g = _value(fit, "C"), _value(fit, "gamma")
    predicted = c * (prev ** -g - top ** -g) / math.log2(top / prev) if c is not None and g is not None else None
    usable, lstar = _usable(fit, top)
    text = (f"CE({prev}) - CE({top}) = {_n(t['mean'])} nats per doubling (fit: {_n(predicted)}); {usable}")
    numbers = {"gain": t["mean"], "se": t["se"], "ci": t["ci"], "p": t["p"], "predicted": predicted,
               "usable": lstar, "prev": prev, "top": top, "L": L}
    if sequential and t["ci"] is None:  # the sign test needs no spread: windows that all gain decide
        return _sequential_gain(model, t, text, f"n = {n} windows; no t interval (no spread)", numbers)
    if t["ci"] is None:
        return Line("usable_context", model, t["mean"], text, f"n = {n} windows: too few for an interval",
                    "untested", numbers, n=n, unit="windows", bounds=(-math.inf, math.inf))
    under = t["mde"] > USABLE_GAIN
    power = f"detects >= {_n(t['mde'], 2)} nats" + (f" (underpowered for {USABLE_GAIN})" if under else "")
    how = ("paired over windows; each length read at its own offset of one forward per window"
           if any(r.get("visible_min") is not None for r in rows) else "paired; the same targets at every length")
    unc = f"n = {n} windows ({how}); 95% CI {_n(t['ci'][0])} to {_n(t['ci'][1])} (t); {power}"
    if sequential:
        return _sequential_gain(model, t, text, unc, numbers)
    verdict = ("falls over the last doubling" if t["fires"] == "up" else
               "rises over the last doubling" if t["fires"] == "down" else "no significant gain")
    return Line("usable_context", model, t["mean"], text, unc, verdict, numbers, n=n, unit="windows",
                interval=t["ci"], bounds=(-math.inf, math.inf), mde=t["mde"], underpowered=under,
                null=t["fires"] is None, effect=USABLE_GAIN, needs=needs_by_se(n, t["mde"], USABLE_GAIN))


def _sequential_gain(model: str, t: dict, text: str, unc: str, numbers: dict) -> Line:
    """The gain line of a profile whose rounds may add windows: the verdict from the sign test."""
    s, n = t["sign"], t["n"]
    unc = (f"{unc} (descriptive); {_n(100 * s['share'], 3)}% of windows gain: anytime-valid p of a gain = "
           f"{_n(s['p_gain'])}, of a loss = {_n(s['p_loss'])} (sign test by betting over windows, each side at 2.5%, "
           f"valid under optional stopping; detects a share of {SIGN_SHARE:g} gaining at {s['needs']} windows)")
    test = "ctxlens's anytime-valid sign test"
    verdict = (f"falls over the last doubling (most windows gain; {test})" if s["fires"] == "up" else
               f"rises over the last doubling (most windows lose; {test})" if s["fires"] == "down" else
               "no significant gain")
    return Line("usable_context", model, t["mean"], text, unc, verdict,
                {**numbers, "share": s["share"], "p_gain": s["p_gain"], "p_loss": s["p_loss"]}, n=n, unit="windows",
                interval=t["ci"], bounds=(-math.inf, math.inf), mde=t["mde"], underpowered=(s["needs"] or n + 1) > n,
                null=s["fires"] is None, effect=SIGN_SHARE, needs=s["needs"])


# ------------------------------------------------------------------------------- suffix-ppl
@card_line("ppl_2l", "suffix perplexity with 2L vs L of context",
           named("geometry", "Sections 4-5") + "; " + named("long-sequence"),
           "beyond the training length (2L > T): perplexity at 2L not below that at L", order=6, reads=("suffix-ppl",))
def _ppl_2l(ctx: Context) -> Line:
    return ppl_2l(ctx.of("suffix-ppl"), ctx.model, ctx.L, train_length_of(ctx.info) if ctx.info else None)


def sequence_nll(rows: list[dict], length: int) -> dict[int, float]:
    """{sequence: its suffix NLL} of the ``stage="sequence"`` rows at ``length``."""
    return {int(r["sequence"]): float(r["sequence_nll"]) for r in rows
            if r.get("stage") == "sequence" and r.get("length") == length and r.get("sequence_nll") is not None}


def ppl_test(rows: list[dict], L: int) -> dict | None:
    """NLL at 2L minus NLL at L per sequence (the same suffix tokens at both), ``paired_mean``;
    None when the rows hold no per-sequence NLL at both lengths."""
    a, b = sequence_nll(rows, L), sequence_nll(rows, 2 * L)
    both = sorted(set(a) & set(b))
    if not both:
        return None
    return {**paired_mean([b[i] - a[i] for i in both]), "nll_L": sum(a[i] for i in both) / len(both),
            "nll_2L": sum(b[i] for i in both) / len(both)}


def ppl_2l(rows: list[dict], model: str, L: int, T: int | None = None) -> Line:
    """The suffix perplexity ratio ppl(2L) / ppl(L) = exp(mean paired NLL difference), with the
    exponentiated t interval (inside (0, inf)). The expectation is about context beyond the
    training length T; with 2L <= T the line is "not a test of the paper". Rows with one mean NLL
    per length (no per-sequence NLL) are untested, and say so."""
    means = {r.get("length"): float(r["nll"]) for r in rows if r.get("nll") is not None and r.get("stage") is None}
    t = ppl_test(rows, L)
    if t is None:
        if L in means and 2 * L in means:
            diff = means[2 * L] - means[L]
            n_seq = next((r.get("n_sequences") for r in rows if r.get("length") == L), "?")
            return Line("ppl_2l", model, math.exp(diff), f"ppl ratio {math.exp(diff):.3g} (NLL {means[L]:.3g} -> "
                        f"{means[2 * L]:.3g})", f"{n_seq} sequences, but the rows hold one mean NLL per length",
                        "untested: no per-sequence NLL for a paired test (re-run the part)"
                        + (f"; 2L = {2 * L} <= T = {T}: not a test of the paper" if T and 2 * L <= T else ""),
                        {"nll_L": means[L], "nll_2L": means[2 * L], "diff": diff, "se": None})
        return absent("ppl_2l", model, f"not measured: no suffix-ppl rows at both {L} and {2 * L}")
    n, diff = t["n"], t["mean"]
    ratio = math.exp(diff)
    text = f"ppl ratio {ratio:.3g} (NLL {t['nll_L']:.3g} -> {t['nll_2L']:.3g}, paired)"
    numbers = {"nll_L": t["nll_L"], "nll_2L": t["nll_2L"], "diff": diff, "se": t["se"], "ci": t["ci"], "T": T}
    if t["ci"] is None:
        return Line("ppl_2l", model, ratio, text, f"n = {n} sequences: too few for an interval", "untested",
                    numbers, n=n, unit="sequences", bounds=(0.0, math.inf))
    ci = (math.exp(t["ci"][0]), math.exp(t["ci"][1]))
    unc = (f"n = {n} sequences (paired); 95% CI of the ratio {ci[0]:.3g} to {ci[1]:.3g} (t on NLL); "
           f"detects a change >= {_n(t['mde'], 2)} nats")
    inside = T is not None and 2 * L <= T
    if inside:
        verdict = f"inside the training length (2L = {2 * L} <= T = {T}): not a test of the paper"
    else:
        verdict = ("rises beyond L" if t["fires"] == "up" else "falls: context beyond L helps" if t["fires"] == "down"
                   else "no significant change")
    return Line("ppl_2l", model, ratio, text, unc, verdict, numbers, n=n, unit="sequences", interval=ci,
                bounds=(0.0, math.inf), mde=t["mde"])
