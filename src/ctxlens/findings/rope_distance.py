"""The Positional Heads finding of the RoPE-distance paper: masking distance-tracking heads hurts retrieval.

"On the token distance modeling ability of higher RoPE attention dimension", Sections 4.2-4.3,
Figure 8: heads whose dominant dimension correlates with distance exist, and
masking the top ones hurts passkey retrieval more than masking as many random heads
(``positional_heads_matter``, on the ``positional-heads`` and ``head-masking`` rows of
``zoo:rope``). The criterion is that of ``ctxlens.findings.positional``.
"""

from __future__ import annotations

from ctxlens.findings.models import has_rope
from ctxlens.findings.positional import masking_summary, significant_heads, verdict
from ctxlens.findings.verdicts import PAPERS, TRAIN_LENGTH, Rows, _num, _verdicts


def positional_heads_matter(rows: Rows, models: dict[str, str], controls: dict[str, str],
                            train_length: int = TRAIN_LENGTH) -> dict:
    """The RoPE-distance paper, Sections 4.2-4.3, Figure 8: heads whose dominant dimension correlates with
    distance exist, and masking the top ones hurts passkey retrieval more than masking as many
    random heads (``positional-heads`` + ``head-masking`` on ``zoo:rope``). Criterion
    (``ctxlens.findings.positional.verdict``): at least one head with p < 0.05 / n_heads, and for every
    fraction the passkey accuracy with the top heads masked is below the mean over random draws;
    undecided when the unmasked model retrieves nothing. Applies to every model with RoPE attention."""
    def check(name: str):
        spec = models.get(name)
        heads = [r for r in rows.of("positional-heads", spec) if r.get("transform", "none") == "none"]
        mask = [r for r in rows.of("head-masking", spec) if r.get("transform", "none") == "none"
                and r.get("task") == "passkey"]
        if not heads or not mask:
            return None
        sig, summary = significant_heads(heads), masking_summary(mask)
        v = verdict(sig, summary)
        fr = "; ".join(f"{f}: top {_num(s['top'])} vs random {_num(s['random_mean'])}"
                       for f, s in summary["fractions"].items())
        return (f"{sig['n_significant_bonferroni']} of {sig['n_heads']} heads significant (Bonferroni); passkey "
                f"unmasked {_num(summary['none'])}; {fr}"), v["reproduced"]

    return _verdicts("positional heads matter more than random heads", f"{PAPERS['003']}, Sections 4.2-4.3, Figure 8",
                     "some head significant after Bonferroni, and masking the top heads lowers passkey accuracy more "
                     "than masking as many random heads", has_rope, models, check,
                     "positional-heads and head-masking on a RoPE model")

