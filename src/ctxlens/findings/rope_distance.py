"""The Positional Heads finding of the RoPE-distance paper: masking distance-tracking heads hurts retrieval.

"On the token distance modeling ability of higher RoPE attention dimension", Sections 4.2-4.3,
Figure 8: heads whose dominant dimension correlates with distance exist, and
masking the top ones hurts passkey retrieval more than masking as many random heads
(``positional_heads_matter``, on the ``positional-heads`` and ``head-masking`` rows of
``zoo:rope``). The criterion is that of ``ctxlens.findings.positional`` (``verdict``, joining its
presence test with ``ctxlens.findings.masking``'s masking test).
"""

from __future__ import annotations

from ctxlens.core.papers import named
from ctxlens.core.zoo_facts import TRAIN_LENGTH
from ctxlens.findings.masking import masking_test
from ctxlens.findings.models import has_rope
from ctxlens.findings.positional import presence_test, verdict
from ctxlens.findings.verdicts import Rows, number, verdicts_row


def positional_heads_matter(rows: Rows, models: dict[str, str], controls: dict[str, str],
                            train_length: int = TRAIN_LENGTH) -> dict:
    """The RoPE-distance paper, Sections 4.2-4.3, Figure 8: heads whose dominant dimension correlates with
    distance exist, and masking the top ones hurts passkey retrieval more than masking as many
    random heads (``positional-heads`` + ``head-masking`` on ``zoo:rope``). Criterion
    (``ctxlens.findings.positional.verdict``): at least one head whose per-prompt rho differs from 0
    (t across prompts, p < 0.05 / n_heads), and at every fraction the top heads' passkey accuracy is
    below the random draws' with randomization p <= 0.05, without a perplexity collapse; undecided
    when either cannot be tested (no per-prompt rho, fewer than 19 draws) or the unmasked model
    retrieves nothing. Applies to every model with RoPE attention."""
    def check(name: str) -> tuple[str, bool | None] | None:
        spec = models.get(name)
        heads = [r for r in rows.of("positional-heads", spec) if r.get("transform", "none") == "none"]
        mask = [r for r in rows.of("head-masking", spec) if r.get("transform", "none") == "none"]
        if not heads or not mask:
            return None
        presence, masking = presence_test(heads), masking_test(mask)
        v = verdict(presence, masking)
        fr = "; ".join(f"{f}: top {number(s['top'])} vs random {number(s['random_mean'])} (p {number(s['p'])})"
                       for f, s in masking["fractions"].items())
        found = (f"{presence['n_pass']} of {presence['n_heads']} heads pass (t across {presence['n_prompts']} "
                 "prompts, Bonferroni)" if presence["n_heads"] else "no per-prompt rho (presence untested)")
        return f"{found}; passkey unmasked {number(masking['none'])}; {fr}; masking {masking['verdict']}", \
            v["reproduced"]

    return verdicts_row("positional heads matter more than random heads",
                        named("rope-distance", "Sections 4.2-4.3, Figure 8"),
                        "some head's per-prompt rho differs from 0 (t across prompts, Bonferroni over heads), and "
                        "masking the top heads lowers passkey accuracy more than as many random heads (randomization "
                        "p <= 0.05 at every fraction) without a perplexity collapse", has_rope, models, check,
                        "positional-heads and head-masking on a RoPE model")

