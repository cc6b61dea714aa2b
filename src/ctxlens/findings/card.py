"""The context-use card: per model, one number per question of the four papers, with its
uncertainty, the paper's expectation and a verdict, from result rows alone (no torch).

``compute_card(rows, infos)`` gives one ``Line`` per (question, model). L is the length a profile
built its suite around (recorded in each part's ``config.yaml``), else the model's training length
(its recorded ``ModelInfo``, ``ctxlens.findings.models``); the card's first line states L and
whether it is below the training length. Uncertainties, as each line says:

- binomial standard errors of accuracies (sqrt(p(1-p)/n)), one-sided two-proportion z-tests for
  drops (``long_sequence._proportion_drop``, z > 1.645);
- the fit's own standard errors for C0 and gamma (``loss-vs-length`` fit rows), propagated to the
  usable context by the delta method on log l with the correlation of C and gamma the fit records
  (``corr(C, gamma)``; runs written before it existed are read as uncorrelated);
- standard errors over seeds for suffix perplexity; Fisher-z 95% intervals for correlations
  (Spearman with the 1.06 / (n - 3) variance of Fieller, Hartley and Pearson); a t interval over
  the random draws for the head-masking effect.

"Usable context" is the length beyond which the fitted C0 + C / l^gamma gains less than
``USABLE_GAIN`` nats per doubling: C / l^gamma - C / (2l)^gamma < 0.01, i.e.
l* = (C (1 - 2^-gamma) / 0.01)^(1 / gamma) (the intrinsic-entropy paper, Section 2.2.2, Eq. 3, Figure 2).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ctxlens.core import stats
from ctxlens.findings.accs import PLATEAU_THRESHOLD, depth_trend, plateau
from ctxlens.findings.long_sequence import MIDDLE_DEPTHS, Z_ONE_SIDED_05, _proportion_drop, _scores
from ctxlens.findings.models import has_rope, local_model, reaches, recurrent_hybrid
from ctxlens.findings.positional import masking_summary, significant_heads
from ctxlens.findings.verdicts import PAPERS, Rows
from ctxlens.tasks.scoring import THRESHOLD, effective_length, length_means

USABLE_GAIN = 0.01  # nats per doubling of the context: the "usable context" threshold
Z95 = 1.959963984540054


@dataclass
class Line:
    """One cell of the card: ``value`` (a number or None), its ``uncertainty`` and ``text``, the
    ``verdict`` in words, and the numbers behind it (``numbers``)."""

    key: str
    model: str
    value: float | None
    text: str
    uncertainty: str
    verdict: str
    numbers: dict = field(default_factory=dict)


QUESTIONS = {  # key: (question, paper, expectation)
    "length": ("L, the length the lines are read at", "the profile (`ctxlens profile`)",
               "the training length; the papers read their findings there"),
    "effective_length": ("RULER effective length", "RULER (Table 3); " + PAPERS["002"],
                         "the largest length whose mean score over the task set exceeds the threshold; RULER finds "
                         "it below the claimed length for most models"),
    "retrieval_2l": ("needle retrieval at L vs 2L", PAPERS["002"] + ", Tables 2-3",
                     "lower at 2L than at L (one-sided z > 1.645)"),
    "middle_dip": ("lost in the middle (at L)", PAPERS["002"] + ", Table 2",
                   "depths 0 and 100 pooled above depths 40-60 (one-sided z > 1.645)"),
    "loss_fit": ("CE vs context: C0 + C / l^gamma", PAPERS["001"] + ", Section 2.2.2, Eq. 3, Figure 2",
                 "CE falls with context: C > 0, gamma > 0"),
    "usable_context": ("usable context", PAPERS["001"] + ", Section 2.2.2, Eq. 3, Figure 2",
                       f"the fit gains less than {USABLE_GAIN} nats per doubling beyond it"),
    "ppl_2l": ("suffix perplexity with 2L vs L of context", PAPERS["000"] + ", Section 5; " + PAPERS["002"],
               "no gain beyond the training length: perplexity at 2L not below that at L"),
    "accs_depth": ("ACCS depth trend", PAPERS["000"] + ", Section 4, Figure 1",
                   "Spearman(layer, ACCS) < 0: ACCS falls with depth"),
    "accs_plateau": ("distant-perturbation plateau ratio (at L)", PAPERS["000"] + ", Section 5.2, Table 4",
                     f"< {PLATEAU_THRESHOLD} for recurrent and ALiBi models, >= {PLATEAU_THRESHOLD} for hybrids"),
    "positional_heads": ("positional heads (Bonferroni)", PAPERS["003"] + ", Section 4.2",
                         "some heads whose dominant RoPE dimension tracks distance"),
    "masking_effect": ("masking the top positional heads", PAPERS["003"] + ", Section 4.3, Figure 8",
                       "passkey accuracy with the top heads masked below the random draws' mean"),
    "ce_entropy": ("CE vs intrinsic entropy", PAPERS["001"] + ", Section 2.2.2, Figure 1",
                   "Pearson r(CE, intrinsic entropy) <= -0.97"),
}


def _n(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


def _absent(key: str, model: str, why: str) -> Line:
    return Line(key, model, None, why, "", "")


def _fisher(r: float, n: int, spearman: bool = False) -> tuple[float, float] | None:
    """95% interval of a correlation by Fisher's z (Spearman: variance 1.06 / (n - 3))."""
    if n < 4 or abs(r) >= 1:
        return None
    half = Z95 * math.sqrt((1.06 if spearman else 1.0) / (n - 3))
    return math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)


def t_quantile(df: int, two_sided: float = 0.05) -> float:
    """The t value with two-sided tail ``two_sided`` (bisection on ``core.stats.t_two_sided_p``)."""
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if stats.t_two_sided_p(mid, df) > two_sided else (lo, mid)
    return (lo + hi) / 2


# ------------------------------------------------------------------------------- the lines
def length_line(model: str, L: int, info: dict | None) -> Line:
    """L, and how it stands to the model's training length (a profile capped by its budget, or
    set by ``--length``, measures at less than the papers do)."""
    trained = (info or {}).get("train_length")
    if not isinstance(trained, int) or trained <= 0:
        return Line("length", model, L, f"{L} tokens", "", "the training length is not recorded", {"L": L})
    verdict = ("the training length" if L == trained else f"below the training length ({trained}): lines at L and "
               f"2L are read at {L} and {2 * L}" if L < trained else f"beyond the training length ({trained})")
    return Line("length", model, L, f"{L} tokens", f"training length {trained}", verdict,
                {"L": L, "train_length": trained})


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


def _fit(rows: list[dict]) -> dict[str, tuple[float | None, float | None]]:
    return {r["quantity"]: (r.get("value"), r.get("stderr")) for r in rows
            if r.get("stage") == "fit" and r.get("fit", "power_law") == "power_law"}


def _degenerate(rows: list[dict]) -> str | None:
    """The power-law fit's flags when one says gamma ended at its search range (no power law in the
    points; ``metrics.fits.fit_power_law``), else None."""
    flags = {str(r["flag"]) for r in rows if r.get("stage") == "fit" and r.get("fit", "power_law") == "power_law"
             and r.get("flag")}
    return "; ".join(sorted(flags)) if any("search range" in f for f in flags) else None


def loss_fit(rows: list[dict], model: str) -> Line:
    """C0 and gamma of C0 + C / l^gamma as the ``loss-vs-length`` fit rows record them, with their
    SEs; a fit the rows flag (gamma at the end of its search range: no power law in the points)
    is reported as degenerate, not as a fall."""
    fit = _fit(rows)
    if not {"C0", "C", "gamma"} <= set(fit) or fit["gamma"][0] is None:
        return _absent("loss_fit", model, "not measured: no loss-vs-length fit rows")
    (c0, se0), (c, _), (g, seg) = fit["C0"], fit["C"], fit["gamma"]
    r2 = fit.get("r2", (None, None))[0]
    falls = c is not None and c > 0 and g > 0
    flag = _degenerate(rows)
    verdict = (f"degenerate fit ({flag})" if flag else
               "falls with context, as expected" if falls else "does not fall with context")
    return Line("loss_fit", model, g, f"C0 = {_n(c0)} nats, gamma = {_n(g)} (R^2 {_n(r2)})",
                f"± {_n(se0)} / ± {_n(seg)} (fit SE)", verdict,
                {"C0": c0, "C0_se": se0, "gamma": g, "gamma_se": seg, "r2": r2, "flag": flag})


def usable_length(c: float, gamma: float, gain: float = USABLE_GAIN) -> float:
    """l* with C / l^gamma - C / (2l)^gamma = ``gain`` (see the module docstring); ``inf`` when it lies
    beyond any float (a gamma near 0: the fit still gains that much at every length). Taken in
    log space, so a tiny gamma cannot overflow."""
    log_l = math.log(c * (1 - 2 ** -gamma) / gain) / gamma
    return math.exp(log_l) if log_l < 700 else math.inf


def usable_context(rows: list[dict], model: str, L: int) -> Line:
    """l* from the fit, with a factor-of uncertainty from the delta method on log l* (both
    standard errors and their correlation; no uncertainty when either error is unknown)."""
    fit = _fit(rows)
    if not {"C", "gamma"} <= set(fit) or None in (fit["C"][0], fit["gamma"][0]):
        return _absent("usable_context", model, "not measured: no loss-vs-length fit rows")
    (c, sec), (g, seg) = fit["C"], fit["gamma"]
    flag = _degenerate(rows)
    if flag:
        return Line("usable_context", model, None, "none: the fit is degenerate", flag, "untested", {"flag": flag})
    if not (c > 0 and g > 0):
        return Line("usable_context", model, None, "none: the fit does not fall with context", "",
                    "no context is used", {})
    lstar = usable_length(c, g)
    shown = f"{lstar:.0f}" if lstar < 1e6 else f"{lstar:.3g}"
    if math.isinf(lstar):
        return Line("usable_context", model, None, f"unbounded: with gamma = {_n(g)} the fit gains over "
                    f"{USABLE_GAIN} nats per doubling at every length", "", "beyond L", {"usable": None})
    d_c = 1 / (g * c)
    d_g = -math.log(c * (1 - 2 ** -g) / USABLE_GAIN) / g ** 2 + (2 ** -g * math.log(2)) / (g * (1 - 2 ** -g))
    rho = (fit.get("corr(C, gamma)") or (None, None))[0]
    se_log = None
    if sec is not None and seg is not None:  # var(log l*) = g' Cov g, with the estimates' correlation rho
        var = (d_c * sec) ** 2 + (d_g * seg) ** 2 + 2 * d_c * d_g * (rho or 0.0) * sec * seg
        se_log = math.sqrt(max(var, 0.0))
    unc = "-" if se_log is None or se_log > 700 else f"x/÷ {math.exp(se_log):.3g} (delta method, 1 SE)"
    verdict = "within L" if lstar <= L else "beyond L"
    return Line("usable_context", model, lstar, f"{shown} tokens (L = {L}; gain < {USABLE_GAIN} nats/doubling)",
                unc, verdict, {"usable": lstar, "se_log": se_log})


def _var_mean(values: list[float], mean: float) -> float:
    """The squared standard error of the mean of ``values`` (sample variance / n)."""
    return sum((x - mean) ** 2 for x in values) / (len(values) - 1) / len(values)


def ppl_2l(rows: list[dict], model: str, L: int) -> Line:
    """Mean suffix NLL with 2L and L of context (over seeds), the difference and its SE: over seeds
    when there are several, else from each row's SE over its sequences (``nll_se``), combined as
    if independent (the same suffix tokens at both lengths make the true SE smaller: conservative)."""
    def at(length: int) -> list[dict]:
        return [r for r in rows if r.get("length") == length and r.get("nll") is not None]

    ra, rb = at(L), at(2 * L)
    a, b = [float(r["nll"]) for r in ra], [float(r["nll"]) for r in rb]
    if not a or not b:
        return _absent("ppl_2l", model, f"not measured: no suffix-ppl rows at both {L} and {2 * L}")
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    diff = mb - ma
    if len(a) > 1 and len(b) > 1:
        se = math.sqrt(_var_mean(a, ma) + _var_mean(b, mb))
        unc = f"± {_n(se)} nats (SE over seeds)"
    elif len(a) == len(b) == 1 and ra[0].get("nll_se") is not None and rb[0].get("nll_se") is not None:
        se = math.hypot(float(ra[0]["nll_se"]), float(rb[0]["nll_se"]))
        unc = f"± {_n(se)} nats (SE over {ra[0].get('n_sequences', '?')} sequences, unpaired: conservative)"
    else:
        se, unc = None, "no SE: one row per length"
    if se is not None and abs(diff) > Z95 * se:
        verdict = "rises beyond L" if diff > 0 else "falls: context beyond L helps"
    else:
        verdict = "no significant change" if se is not None else ("rises" if diff > 0 else "falls") + " (untested)"
    return Line("ppl_2l", model, math.exp(diff), f"ppl ratio {math.exp(diff):.3g} (NLL {ma:.3g} -> {mb:.3g})",
                unc, verdict, {"nll_L": ma, "nll_2L": mb, "diff": diff, "se": se})


def accs_depth(rows: list[dict], model: str, L: int) -> Line:
    """Spearman(layer, ACCS) at the longest length <= L, with its Fisher-z 95% interval."""
    got = [r for r in rows if r.get("length", 0) <= L]
    if not got:
        return _absent("accs_depth", model, f"not measured: no accs-layers rows at or below {L}")
    length = max(r["length"] for r in got)
    t = depth_trend([r for r in got if r["length"] == length])
    rho = t["spearman"]
    if rho is None:
        return _absent("accs_depth", model, "not measured: too few layers for a rank correlation")
    ci = _fisher(rho, len(t["layers"]), spearman=True)
    unc = "-" if ci is None else f"95% CI {ci[0]:.2f} to {ci[1]:.2f} (Fisher z, n = {len(t['layers'])} layers)"
    return Line("accs_depth", model, rho, f"rho = {rho:.2f} at {length}", unc,
                "falls with depth, as expected" if t["reproduced"] else "does not fall with depth",
                {"rho": rho, "length": length, "ci": ci, "n": len(t["layers"])})


def accs_plateau(rows: list[dict], model: str, L: int, info: dict) -> Line:
    """Plateau ratio at the longest length <= L (last layer); the spread over other lengths shown."""
    lengths = sorted({r["length"] for r in rows if r.get("length") is not None})
    ratios = {n: plateau([r for r in rows if r["length"] == n])["plateau_ratio"] for n in lengths}
    within = [n for n in lengths if n <= L and ratios[n] is not None]
    if not within:
        return _absent("accs_plateau", model, f"not measured: no accs-boundary curve at or below {L}")
    at = within[-1]
    ratio = ratios[at]
    others = [v for v in ratios.values() if v is not None]
    unc = (f"range {min(others):.2f} to {max(others):.2f} over {len(others)} lengths" if len(others) > 1
           else "no per-sample values in the rows")
    flat = ratio < PLATEAU_THRESHOLD
    want = True if local_model(info) is None else False if recurrent_hybrid(info) is None else None
    verdict = ("a plateau" if flat else "no plateau") + ("" if want is None else ", as expected" if flat == want
                                                          else ", unlike the paper")
    return Line("accs_plateau", model, ratio, f"{ratio:.2f} at {at}", unc, verdict, {"ratio": ratio, "length": at})


def positional(heads: list[dict], mask: list[dict], model: str) -> tuple[Line, Line]:
    """Heads significant after Bonferroni; the top-minus-random masking effect at the largest
    fraction with a t interval over the random draws."""
    heads = [r for r in heads if r.get("transform", "none") == "none"]
    mask = [r for r in mask if r.get("transform", "none") == "none" and r.get("task") == "passkey"]
    if heads:
        sig = significant_heads(heads)
        first = Line("positional_heads", model, sig["n_significant_bonferroni"],
                     f"{sig['n_significant_bonferroni']} of {sig['n_heads']} heads",
                     f"p < {sig['alpha']} / {sig['n_heads']} (Bonferroni)",
                     "present, as expected" if sig["n_significant_bonferroni"] else "none found", sig)
    else:
        first = _absent("positional_heads", model, "not measured: no positional-heads rows")
    summary = masking_summary(mask) if mask else {"fractions": {}}
    if not summary["fractions"]:
        return first, _absent("masking_effect", model, "not measured: no head-masking passkey rows")
    frac = max(summary["fractions"], key=float)
    s = summary["fractions"][frac]
    draws = [d for d in s["random_draws"] if d is not None]
    if s["top"] is None or not draws:
        return first, _absent("masking_effect", model, "not measured: no scored masking rows")
    mean = sum(draws) / len(draws)
    effect = s["top"] - mean
    half = None
    if len(draws) > 1:
        sd = math.sqrt(sum((d - mean) ** 2 for d in draws) / (len(draws) - 1))
        half = t_quantile(len(draws) - 1) * sd / math.sqrt(len(draws))
    unc = "no interval: one random draw" if half is None else \
        f"95% CI {effect - half:+.2f} to {effect + half:+.2f} (t over {len(draws)} random draws)" + \
        (" (underpowered: fewer than 5 draws)" if len(draws) < 5 else "")
    if not summary["none"]:
        verdict = "nothing retrieved unmasked"
    elif half is not None and effect + half < 0:
        verdict = "top heads hurt more, as expected"
    else:
        verdict = "not more than random" if half is not None else "untested"
    return first, Line("masking_effect", model, effect, f"top {frac}: {effect:+.2f} vs random ({s['top']:.2f} vs "
                       f"{mean:.2f})", unc, verdict, {"top": s["top"], "random_mean": mean, "half": half,
                                                     "fraction": float(frac), "unmasked": summary["none"]})


def ce_entropy(rows: list[dict], model: str) -> Line:
    """Pearson r of CE on the intrinsic entropy (the fit over lengths, largest n measured) with
    its Fisher-z 95% interval over the fit's points, and R^2 = r^2; untested on fewer than three
    lengths."""
    fits = [r for r in rows if r.get("stage") == "fit" and r.get("x") == "intrinsic_entropy"
            and r.get("quantity") == "pearson_r" and r.get("value") is not None]
    if not fits:
        return _absent("ce_entropy", model, "not measured: no intrinsic-entropy fit rows")
    row = max(fits, key=lambda r: r.get("n_eig") or 0)
    r, n = float(row["value"]), int(row.get("n_points") or 0)
    if n < 3:  # a line through two points: r is +-1 whatever the model does
        return Line("ce_entropy", model, r, f"r = {r:.3f} (n = {row.get('n_eig')} eigenvalues)",
                    f"{n} lengths: any two points give r = ±1", "untested", {"r": r, "n": n, "ci": None})
    ci = _fisher(r, n)
    unc = "-" if ci is None else f"95% CI {ci[0]:.2f} to {ci[1]:.2f} (Fisher z, n = {n} lengths)"
    return Line("ce_entropy", model, r, f"r = {r:.3f}, R^2 = {r * r:.3f} (n = {row.get('n_eig')} eigenvalues)",
                unc, "linear, as expected" if r <= -0.97 else "not linear enough", {"r": r, "n": n, "ci": ci})


# ------------------------------------------------------------------------------- the card
NEEDS = {"retrieval_2l": reaches(2), "positional_heads": has_rope, "masking_effect": has_rope}


def model_lines(rows: Rows, model: str, info: dict | None, L: int | None, threshold: float = THRESHOLD) -> list[Line]:
    """Every line of one model's column, in ``QUESTIONS`` order."""
    if L is None:
        return [_absent(k, model, "not measured: the model's training length is not recorded") for k in QUESTIONS]
    niah = _retrieval(rows.of("niah-depth", model)) or [
        r for r in _retrieval(rows.of("ruler", model)) if str(r.get("task", "")).startswith("niah_single")]
    heads, masking = positional(rows.of("positional-heads", model), rows.of("head-masking", model), model)
    lines = [length_line(model, L, info), effective(rows.of("ruler", model), model, L, threshold),
             retrieval_2l(niah, model, L),
             middle_dip(_retrieval(rows.of("niah-depth", model)), model, L), loss_fit(rows.of("loss-vs-length", model),
                                                                                       model),
             usable_context(rows.of("loss-vs-length", model), model, L), ppl_2l(rows.of("suffix-ppl", model), model, L),
             accs_depth(rows.of("accs-layers", model), model, L),
             accs_plateau(rows.of("accs-boundary", model), model, L, info or {}), heads, masking,
             ce_entropy(rows.of("intrinsic-entropy", model), model)]
    for i, line in enumerate(lines):
        rule = NEEDS.get(line.key)
        why = rule(info) if rule is not None and info is not None else None
        if why:
            lines[i] = _absent(line.key, model, f"not applicable: {why}")
    return lines


def compute_card(rows: Iterable[dict], infos: dict[str, dict | None], lengths: dict[str, int | None],
                 threshold: float = THRESHOLD) -> dict[str, list[Line]]:
    """{model: its lines} for each model of ``infos`` (spec -> ModelInfo dict or None), each at
    ``lengths[model]`` (its L)."""
    grouped = Rows(rows)
    return {m: model_lines(grouped, m, infos.get(m), lengths.get(m), threshold) for m in infos}


CARD_EXPERIMENTS = ("ruler", "niah-depth", "loss-vs-length", "suffix-ppl", "accs-layers", "accs-boundary",
                    "positional-heads", "head-masking", "intrinsic-entropy")


def card_of_runs(runs, models: Iterable[str] | None = None, threshold: float = THRESHOLD) -> dict[str, list[Line]]:
    """The card of ``runs`` (``ctxlens.results.Run`` objects): one column per model the card's
    experiments measured (or ``models``), each at the profile's L its runs record, else at its
    recorded training length (else the zoo's for a zoo spec, else the ``train_length`` the rows
    record, else not known)."""
    from ctxlens.findings.models import info_for, recorded_infos, recorded_lengths, train_length_of

    runs = list(runs)
    rows = [r for run in runs for r in run.rows]
    recorded, profiled = recorded_infos(runs), recorded_lengths(runs)
    wanted = list(models) if models is not None else list(dict.fromkeys(
        str(r["model"]) for r in rows if r.get("experiment") in CARD_EXPERIMENTS and r.get("model")))
    infos = {m: info_for(m, m, recorded) for m in wanted}
    lengths: dict[str, int | None] = {}
    for m in wanted:
        stated = {int(r["train_length"]) for r in rows if r.get("model") == m and r.get("train_length")}
        lengths[m] = (profiled[m] if m in profiled else train_length_of(infos[m]) if infos[m] is not None
                      else stated.pop() if len(stated) == 1 else None)
    return compute_card(rows, infos, lengths, threshold)
