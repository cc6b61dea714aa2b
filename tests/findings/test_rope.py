"""Calibration of the RoPE side's verdicts (the RoPE-distance paper, Sections 4.2-4.3, Figures 8-9):
simulated rows with the real sampling structure (few inputs, many correlated points per input;
paired passkeys under every masking condition), under the null and with a planted effect of the
stated minimal size, through the same functions the card calls; and the card's lines on rows
written by hand against hand computations."""

from __future__ import annotations

import math

import numpy as np

from ctxlens.core.stats import spearman
from ctxlens.findings import masking as mask
from ctxlens.findings import positional as pos
from ctxlens.findings.lines.rope import masking_effect, positional_heads

N_SIMS = 200
HEADS, PROMPTS, DISTANCES, OLD_TEXTS = 20, 17, 150, 3


def _dominant(rng, slope: float) -> np.ndarray:
    """[HEADS, PROMPTS, DISTANCES] mean dominant dimension by distance: per (head, prompt) a random
    offset and a random walk over distance (points of one prompt are correlated, and its trend is
    random with mean 0), plus noise; head 0 gets ``slope`` x distance / DISTANCES in every prompt."""
    walk = np.cumsum(rng.normal(0.0, 0.1, (HEADS, PROMPTS, DISTANCES)), axis=-1)
    offset = rng.normal(0.0, 2.0, (HEADS, PROMPTS, 1))
    y = offset + walk + rng.normal(0.0, 1.0, (HEADS, PROMPTS, DISTANCES))
    y[0] += slope * np.arange(DISTANCES) / DISTANCES
    return y


def _per_prompt_rho(y: np.ndarray) -> np.ndarray:
    """[..., DISTANCES] -> [...] Spearman rho with distance (distance ranks are 0..D-1, no ties)."""
    ranks = np.argsort(np.argsort(y, axis=-1), axis=-1).astype(float)
    d = np.arange(DISTANCES) - (DISTANCES - 1) / 2
    return ((ranks - (DISTANCES - 1) / 2) * d).sum(-1) / (d * d).sum()


def _prompt_rows(rho: np.ndarray) -> list[dict]:
    """Rows shaped as positional-heads writes them: kind="prompt", one per (layer, head, prompt)."""
    return [{"kind": "prompt", "layer": h // 4, "head": h % 4, "layer_type": "full_attention", "prompt": p,
             "rho": float(rho[h, p])} for h in range(rho.shape[0]) for p in range(rho.shape[1])]


def _old_test_fires(y: np.ndarray) -> bool:
    """The old criterion: per head, Spearman over distance of the mean over a few texts, every
    distance a point; any head with p < 0.05 / heads."""
    pooled = y[:, :OLD_TEXTS].mean(axis=1)  # [HEADS, DISTANCES]
    ps = [spearman(np.arange(DISTANCES), pooled[h])[1] for h in range(HEADS)]
    return min(ps) < 0.05 / HEADS


def test_the_pooled_point_test_fails_calibration_and_the_prompt_test_holds_its_level():
    rng = np.random.default_rng(0)
    old = new = 0
    for _ in range(N_SIMS):
        y = _dominant(rng, 0.0)
        old += _old_test_fires(y)
        new += pos.presence_test(_prompt_rows(_per_prompt_rho(y)))["present"]
    assert old / N_SIMS > 0.5  # pseudo-replication: far above its nominal 5%
    assert new / N_SIMS <= 0.09


def test_a_planted_distance_correlation_in_every_prompt_is_found():
    rng = np.random.default_rng(1)
    fired, sizes, signs = 0, [], []
    for _ in range(N_SIMS):
        rho = _per_prompt_rho(_dominant(rng, 1.5))
        sizes.append(rho[0].mean())
        test = pos.presence_test(_prompt_rows(rho))
        fired += test["present"]
        signs.append(test["positive"] >= 1)
    assert 0.25 <= np.mean(sizes) <= 0.4  # the planted size: mean per-prompt rho about MIN_RHO
    assert fired / N_SIMS >= 0.7 and np.mean(signs) >= 0.7


# ------------------------------------------------------------------ masking

PASSKEYS, DRAWS, FRACTIONS = 30, 19, (0.05, 0.1)


def _mask_rows(rng, drop: float, fractions=FRACTIONS, ppl_top: float = 1.0) -> list[dict]:
    """Rows shaped as head-masking writes them: one per (condition, passkey), the same passkeys
    under every condition (a latent difficulty per passkey), a random shift per head set (sd 0.15 on
    the latent scale) and noise; the top set's shift is drawn as a random set's, minus ``drop``
    (in accuracy: the latent shift is scaled so the mean accuracy drop is about ``drop``);
    perplexity one row per condition, the top set's times ``ppl_top``."""
    ease = rng.normal(1.2, 0.6, PASSKEYS)  # [passkeys]

    def condition(name: str, f: float, d: int, shift: float, ppl: float) -> list[dict]:
        p = 1 / (1 + np.exp(-(ease + shift) * 3))  # [passkeys]
        hits = rng.random(PASSKEYS) < p
        base = {"task": "passkey", "condition": name, "fraction": f, "draw": d, "length": 1024, "n": 1}
        rows = [{**base, "depth": 0.5, "probe": i, "score": float(h)} for i, h in enumerate(hits)]
        nll = math.log(20.0 * ppl) + rng.normal(0, 0.05)
        return rows + [{**base, "task": "perplexity", "score": math.exp(nll), "nll": nll}]

    rows = condition("none", 0.0, 0, 0.0, 1.0)
    for f in fractions:
        rows += condition("top", f, 0, rng.normal(0, 0.15) - drop * 3.2, ppl_top)
        for d in range(DRAWS):
            rows += condition("random", f, d, rng.normal(0, 0.15), 1.0)
    return rows


def test_masking_randomization_test_holds_its_level_per_fraction_and_over_both():
    rng = np.random.default_rng(2)
    one = both = 0
    for _ in range(N_SIMS):
        one += mask.masking_test(_mask_rows(rng, 0.0, fractions=(0.1,)))["verdict"] == "hurts"
        both += mask.masking_test(_mask_rows(rng, 0.0))["verdict"] == "hurts"
    assert one / N_SIMS <= 0.09 and both / N_SIMS <= 0.09


def test_masking_a_planted_drop_of_the_stated_size_is_found_and_a_collapse_is_named():
    rng = np.random.default_rng(3)
    fired, drops = 0, []
    for _ in range(N_SIMS):
        test = mask.masking_test(_mask_rows(rng, mask.MIN_DROP))
        drops += [s["effect"] for s in test["fractions"].values()]
        fired += test["verdict"] == "hurts"
    assert -0.36 <= np.mean(drops) <= -0.24  # about the stated minimal drop
    assert fired / N_SIMS >= 0.7
    collapsed = mask.masking_test(_mask_rows(np.random.default_rng(4), 0.6, ppl_top=8.0))
    assert collapsed["verdict"] == "collapse"


# ------------------------------------------------------------------ the lines on hand-written rows


def test_positional_heads_line_reads_the_ranking_and_tests_across_prompts():
    heads = [{"kind": "head", "layer": 0, "head": h, "rho": r, "rank": i + 1, "layer_type": t}
             for i, (h, r, t) in enumerate([(2, 0.9, "full_attention"), (0, -0.5, "sliding_attention"),
                                            (1, 0.1, "sliding_attention"), (3, 0.05, "full_attention")])]
    old = positional_heads(heads, "m")
    assert old.verdict == "untested" and "not tested" in old.uncertainty and old.value == 0.9
    assert "|rho| median 0.30" in old.text  # median of 0.9, 0.5, 0.1, 0.05 = (0.1 + 0.5) / 2
    # per-prompt rho: head 2 always 0.8 +- 0.1 (t = 0.8 / (0.1 / sqrt(17)) huge), the others centred on 0
    prompts = [{"kind": "prompt", "layer": 0, "head": h, "prompt": p, "layer_type": heads[[2, 0, 1, 3].index(h)][
        "layer_type"], "rho": (0.8 if h == 2 else 0.0) + (0.1 if p % 2 else -0.1)} for h in range(4) for p in range(17)]
    line = positional_heads(heads + prompts, "m")
    assert line.n == 17 and line.unit == "prompts" and line.verdict.startswith("uncontrolled")
    assert "): 1 of 4 heads pass ctxlens's t test (1 positive, 0 negative)" in line.verdict
    assert "lacks its RoPE-zeroed control" in line.verdict and "--control rope-zeroed" in line.verdict
    assert line.numbers["n_pass"] == 1 and line.numbers["positive"] == 1 and not line.numbers["controlled"]
    assert math.isclose(line.value, (9 * 0.7 + 8 * 0.9) / 17)  # head 2: 9 even prompts at 0.7, 8 odd at 0.9
    assert -1 <= line.interval[0] <= line.value <= line.interval[1] <= 1
    assert "full_attention 1 of 2" in line.verdict and "sliding_attention 0 of 2" in line.verdict
    # the RoPE-zeroed control on the same prompts: head 2 at 0.1 +- 0.1 there (gain 0.7 in every prompt: t
    # infinite, p = 0 < 0.05 / 4), the others as with RoPE (gain 0, p = 0.5): 1 head passes both tests; the
    # t test against 0 passes head 2 under the control too (0.0 x 9, 0.2 x 8: t = 3.8, p < 0.05 / 4)
    zeroed = [{**r, "condition": "rope-zeroed", "rho": r["rho"] - (0.7 if r["head"] == 2 else 0.0)} for r in prompts]
    controlled = positional_heads(heads + prompts + zeroed, "m")
    assert controlled.verdict.startswith("present, as expected: 1 of 4 heads pass both ctxlens's tests (1 positive")
    assert "1 of 4 beat their RoPE-zeroed control" in controlled.verdict
    assert "with RoPE 1 of 4 pass the t test, with RoPE zeroed 1 of 4" in controlled.verdict
    assert controlled.value == line.value and controlled.numbers["n_positional"] == 1
    # a control as strong as the real heads: the t test still passes head 2, but nothing beats its control
    same = positional_heads(heads + prompts + [{**r, "condition": "rope-zeroed"} for r in prompts], "m")
    assert same.verdict.startswith("none beyond the control: 0 of 4 heads pass both") and same.numbers["n_pass"] == 1


def test_masking_line_shows_every_fraction_and_refuses_too_few_draws():
    rng = np.random.default_rng(5)
    rows = _mask_rows(rng, 0.0)
    line = masking_effect(rows, [], "m")
    assert line.n == PASSKEYS and line.unit == "passkeys" and "top 5%" in line.text and "top 10%" in line.text
    assert -1 <= line.interval[0] <= line.interval[1] <= 1
    top = np.mean([r["score"] for r in rows if r["task"] == "passkey" and r["condition"] == "top"
                   and r["fraction"] == 0.1])
    rand = np.mean([np.mean([r["score"] for r in rows if r["task"] == "passkey" and r["condition"] == "random"
                             and r["fraction"] == 0.1 and r["draw"] == d]) for d in range(DRAWS)])
    assert math.isclose(line.value, top - rand)
    few = [r for r in rows if r["condition"] != "random" or r["draw"] < 5]
    assert masking_effect(few, [], "m").verdict.startswith("untested")


# ------------------------------------------------------------------ against the RoPE-zeroed control


def _controlled_rows(rng, heads: int, prompts: int, planted: int = 0, gain: float = 0.0) -> list[dict]:
    """prompt rows of both conditions as positional-heads writes them with control=rope-zeroed. Per head a
    distance trend the statistic has without any rotation (mean rho on the atanh scale drawn N(0, 0.8): most
    heads pass the t test against 0 in both conditions, as on the reference models), per prompt an effect
    shared by every head and both conditions (sd 0.15), per (head, prompt) a content effect shared by both
    conditions (sd 0.25), and each condition's own noise (sd 0.3). The first ``planted`` heads have a weak
    trend of their own (0.2 on the atanh scale, random sign) that RoPE moves ``gain`` further (on the atanh
    scale) in the real condition; the rest are drawn alike in both conditions (the null)."""
    trend = rng.normal(0.0, 0.8, heads)  # [heads]
    trend[:planted] = 0.2 * rng.choice([-1.0, 1.0], planted)
    prompt = rng.normal(0.0, 0.15, prompts)  # [prompts]
    content = rng.normal(0.0, 0.25, (heads, prompts))  # [heads, prompts]
    real_trend = trend.copy()
    real_trend[:planted] += gain * np.sign(trend[:planted])
    rows = []
    for condition, base in (("none", real_trend), ("rope-zeroed", trend)):
        rho = np.tanh(base[:, None] + prompt[None, :] + content + rng.normal(0.0, 0.3, (heads, prompts)))
        rows += [{"kind": "prompt", "condition": condition, "layer": h // 9, "head": h % 9, "prompt": p,
                  "layer_type": "full_attention", "rho": float(rho[h, p])}
                 for h in range(heads) for p in range(prompts)]
    return rows


SHAPES = ((72, 17), (72, 32), (270, 17))  # Gemma-3 and SmolLM2's heads; the paper's 17 prompts, the profile's 32


def test_the_control_comparison_holds_its_level_where_rope_adds_nothing():
    rng = np.random.default_rng(6)
    fired = uncontrolled = 0
    for i in range(N_SIMS):
        heads, prompts = SHAPES[i % len(SHAPES)]
        test = pos.presence_test(_controlled_rows(rng, heads, prompts))
        assert test["controlled"]
        fired += test["present"]
        uncontrolled += test["n_pass"] > 0
    assert uncontrolled / N_SIMS > 0.95  # the t test against 0 alone passes heads in every null dataset
    assert fired / N_SIMS <= 0.09


def test_heads_that_rope_makes_stronger_than_their_control_are_found():
    rng = np.random.default_rng(7)
    fired, gains = 0, []
    for i in range(N_SIMS):
        heads, prompts = SHAPES[i % len(SHAPES)]
        rows = _controlled_rows(rng, heads, prompts, planted=max(1, heads // 20), gain=0.35)
        test = pos.presence_test(rows)
        fired += test["present"]
        gains += [test["control"]["heads"][(0, h)]["gain"] for h in range(3)]
    assert 0.25 <= np.mean(gains) <= 0.35  # the planted gain in rho: about the stated minimal effect (MIN_RHO)
    assert fired / N_SIMS >= 0.7
