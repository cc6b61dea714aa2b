"""Criteria for the Positional Heads finding of the RoPE-distance paper, fixed before any zoo run.

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Sections 4.2.2 and 4.3, Figure 8: (1) some heads show a significant correlation between
relative distance and dominant dimension; (2) masking the heads with the strongest
correlation hurts passkey retrieval more than masking as many random heads.

- ``significant``: at least one head with p < alpha / n_heads (Bonferroni over heads).
- ``masking_hurts_more``: for every fraction, the passkey accuracy with the top heads masked
  (pooled over lengths and depths) is below the mean accuracy over the random draws.
- undecided (None) when no masking condition can hurt: the unmasked accuracy is 0.

``reproduced`` is True when both hold, False when either fails, None when undecided.
"""

from __future__ import annotations

from collections import defaultdict


def _pooled(rows: list[dict]) -> float | None:
    """Accuracy pooled over passkey rows (weighted by their probe counts); a flagged row (a length
    RULER's passkey does not fit, no score) counts nothing."""
    rows = [r for r in rows if r.get("score") is not None]
    n = sum(r["n"] for r in rows)
    return None if n == 0 else sum(r["score"] * r["n"] for r in rows) / n


def significant_heads(head_rows: list[dict], alpha: float = 0.05) -> dict:
    """Heads of a ``positional-heads`` run with p below alpha and below alpha / n_heads."""
    heads = [r for r in head_rows if r.get("kind") == "head"]
    n = len(heads)
    raw = [r for r in heads if r["p_value"] is not None and r["p_value"] < alpha]
    strict = [r for r in raw if r["p_value"] < alpha / max(1, n)]
    return {
        "n_heads": n, "alpha": alpha,
        "n_significant": len(raw), "n_significant_bonferroni": len(strict),
        "heads_bonferroni": [[r["layer"], r["head"], r["rho"], r["p_value"]] for r in strict],
        "ranked": [[r["layer"], r["head"], r["rho"], r["p_value"]] for r in sorted(heads, key=lambda r: r["rank"])],
    }


def masking_summary(mask_rows: list[dict]) -> dict:
    """Passkey accuracy per condition and fraction from ``head-masking`` rows (one transform)."""
    passkey = [r for r in mask_rows if r["task"] == "passkey"]
    by = defaultdict(list)
    for r in passkey:
        by[(r["condition"], r["fraction"], r["draw"])].append(r)
    out = {"none": _pooled(by[("none", 0.0, 0)]), "fractions": {}}
    for f in sorted({r["fraction"] for r in passkey if r["condition"] != "none"}):
        draws = sorted(d for c, fr, d in by if c == "random" and fr == f)
        random_acc = [_pooled(by[("random", f, d)]) for d in draws]
        out["fractions"][str(f)] = {
            "top": _pooled(by[("top", f, 0)]),
            "random_draws": random_acc,
            "random_mean": sum(random_acc) / len(random_acc) if random_acc else None,
            "by_length": {
                str(length): {
                    "top": _pooled([r for r in by[("top", f, 0)] if r["length"] == length]),
                    "random_mean": _mean([_pooled([r for r in by[("random", f, d)] if r["length"] == length])
                                          for d in draws]),
                    "none": _pooled([r for r in by[("none", 0.0, 0)] if r["length"] == length]),
                } for length in sorted({r["length"] for r in passkey})
            },
        }
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def verdict(significance: dict, masking: dict) -> dict:
    """Apply the criteria of the module docstring."""
    significant = significance["n_significant_bonferroni"] > 0
    if not masking["none"]:
        hurts = None
    else:
        hurts = all(v["top"] is not None and v["random_mean"] is not None and v["top"] < v["random_mean"]
                    for v in masking["fractions"].values())
    reproduced = False if not significant or hurts is False else (None if hurts is None else True)
    return {"significant": significant, "masking_hurts_more": hurts, "reproduced": reproduced}
