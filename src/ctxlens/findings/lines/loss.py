"""The loss lines: CE against visible context and its power-law fit, the usable context, suffix
perplexity at 2L vs L (the intrinsic-entropy paper, Section 2.2.2, Eq. 3, Figure 2; the geometry
paper, Section 5)."""

from __future__ import annotations

import math

from ctxlens.core.stats import Z95
from ctxlens.findings.card import Context, Line, absent, card_line
from ctxlens.findings.verdicts import PAPERS

USABLE_GAIN = 0.01  # nats per doubling of the context: the "usable context" threshold


def _n(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _absent(key: str, model: str, why: str) -> Line:
    return absent(key, model, why)


@card_line("loss_fit", "CE vs context: C0 + C / l^gamma", PAPERS["001"] + ", Section 2.2.2, Eq. 3, Figure 2",
           "CE falls with context: C > 0, gamma > 0", order=4)
def _loss_fit(ctx: Context) -> Line:
    return loss_fit(ctx.of("loss-vs-length"), ctx.model)


@card_line("usable_context", "usable context", PAPERS["001"] + ", Section 2.2.2, Eq. 3, Figure 2",
           f"the fit gains less than {USABLE_GAIN} nats per doubling beyond it", order=5)
def _usable_context(ctx: Context) -> Line:
    return usable_context(ctx.of("loss-vs-length"), ctx.model, ctx.L)


@card_line("ppl_2l", "suffix perplexity with 2L vs L of context", PAPERS["000"] + ", Section 5; " + PAPERS["002"],
           "no gain beyond the training length: perplexity at 2L not below that at L", order=6)
def _ppl_2l(ctx: Context) -> Line:
    return ppl_2l(ctx.of("suffix-ppl"), ctx.model, ctx.L)


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
