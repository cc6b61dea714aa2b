"""Verdict words that follow power (issue 43, part 1): a null stands only where its test could see
the paper's effect; otherwise the line names the items it needs and their minutes."""

from __future__ import annotations

import math

from ctxlens.core.stats import mde
from ctxlens.findings.card import Line, decide, needs_by_se


def _line(**kw) -> Line:
    base = dict(key="accs_depth", model="m", value=0.1, text="", uncertainty="", verdict="no depth trend shown",
                n=16, unit="windows", mde=0.4, null=True, effect=0.1)
    return Line(**{**base, **kw})


def test_needs_by_se_is_the_closed_form_of_a_standard_error_falling_as_one_over_root_n():
    se = 0.3  # at n = 9: SE = sd / 3 with sd 0.9; at N items SE = 0.9 / sqrt(N)
    m = mde(se, sides=2)
    n_needed = needs_by_se(9, m, 0.2)
    assert mde(0.9 / math.sqrt(n_needed), sides=2) <= 0.2 < mde(0.9 / math.sqrt(n_needed - 1), sides=2)
    assert needs_by_se(9, 0.1, 0.2) == 9  # it sees the effect already
    assert needs_by_se(9, None, 0.2) is None and needs_by_se(9, 0.3, None) is None
    assert needs_by_se(9, 30.0, 0.001) is None  # beyond the cap: no number of items of this design


def test_a_null_the_test_could_not_see_becomes_undecided_with_its_cost():
    line = _line(needs=256)
    out = decide(line, seconds_per_item=30.0)
    assert out.verdict.startswith("undecided: needs 256 windows to detect 0.1 with 80% power (has 16; about 120 "
                                  "more minutes at this profile's pace)")
    assert out.verdict.endswith("so far: no depth trend shown")
    assert "more minutes" not in decide(line).verdict  # no pace known: no minutes invented


def test_a_null_with_power_and_a_decided_line_stay_as_they_are():
    assert decide(_line(needs=16)).verdict == "no depth trend shown"  # 16 windows see the effect
    assert decide(_line(null=False, needs=256, verdict="falls with depth")).verdict == "falls with depth"


def test_a_design_that_cannot_see_the_effect_says_so():
    out = decide(_line(key="masking_effect", needs=None, unit="passkeys", n=30, effect=0.3))
    assert out.verdict.startswith("undecided: no number of passkeys of this design detects the effect 0.3")


def test_the_observed_effect_is_priced_beside_the_papers():
    """The CE gain: 0.305 nats observed, mde 0.61 at 8 windows, the card's effect 0.01: deciding the
    observed gain needs 8 x (0.61 / 0.305)^2 = 32 windows."""
    out = decide(_line(key="usable_context", value=0.305, mde=0.61, n=8, effect=0.01, needs=needs_by_se(8, 0.61, 0.01)))
    assert "needs 29,768 windows to detect 0.01" in out.verdict
    assert "the observed 0.305 would be decided at about 32 windows" in out.verdict


def _entropy_rows(slope_per_doubling: float, seed: int = 0) -> list[dict]:
    """intrinsic-entropy rows at 6 doublings: S_n = 20 + slope log2 l (+ noise per replicate), CE
    falling; 50 bootstrap replicates around the truth and 50 permutation replicates with the
    lengths shuffled (no trend)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = [16, 32, 64, 128, 256, 512]
    out = [{"stage": "measure", "quantity": q, "length": n, "n_eig": 64, "norm": "max", "n_windows": 320,
            "value": v} for n in lengths for q, v in (("ce", 4 - 0.1 * np.log2(n)),
                                                      ("intrinsic_entropy", 20 + slope_per_doubling * np.log2(n)))]
    for stage in ("bootstrap", "permutation"):
        for b in range(50):
            order = rng.permutation(len(lengths)) if stage == "permutation" else np.arange(len(lengths))
            for i, n in enumerate(lengths):
                m = lengths[order[i]]
                out += [{"stage": stage, "replicate": b, "quantity": "ce", "length": n, "value": 4 - 0.1 * np.log2(m)},
                        {"stage": stage, "replicate": b, "quantity": "intrinsic_entropy", "length": n, "n_eig": 64,
                         "norm": "max", "value": 20 + slope_per_doubling * np.log2(m) + rng.normal(0, 0.2)}]
    return out


def test_a_significant_fall_of_the_entropy_is_named_as_the_opposite_of_the_papers_premise():
    from ctxlens.findings.lines.entropy import ce_entropy

    falls = ce_entropy(_entropy_rows(-2.0), "m").verdict
    assert falls.startswith("S_n falls with l") and "the opposite of the paper's premise" in falls
    assert ce_entropy(_entropy_rows(2.0), "m").verdict.startswith("S_n rises with l")
    assert "opposite" not in ce_entropy(_entropy_rows(2.0), "m").verdict
