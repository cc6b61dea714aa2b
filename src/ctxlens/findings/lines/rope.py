"""The RoPE lines: positional heads and masking them (the RoPE-distance paper, Sections 4.2-4.3,
Figure 8)."""

from __future__ import annotations

import math

from ctxlens.core.stats import t_quantile
from ctxlens.findings.card import Context, Line, absent, card_line
from ctxlens.findings.models import has_rope
from ctxlens.findings.positional import masking_summary, significant_heads
from ctxlens.findings.verdicts import PAPERS


def _absent(key: str, model: str, why: str) -> Line:
    return absent(key, model, why)


@card_line("positional_heads", "positional heads (Bonferroni)", PAPERS["003"] + ", Section 4.2",
           "some heads whose dominant RoPE dimension tracks distance", order=9, applies=has_rope)
def _positional_heads(ctx: Context) -> Line:
    return positional(ctx.of("positional-heads"), ctx.of("head-masking"), ctx.model)[0]


@card_line("masking_effect", "masking the top positional heads", PAPERS["003"] + ", Section 4.3, Figure 8",
           "passkey accuracy with the top heads masked below the random draws' mean", order=10, applies=has_rope)
def _masking_effect(ctx: Context) -> Line:
    return positional(ctx.of("positional-heads"), ctx.of("head-masking"), ctx.model)[1]


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
