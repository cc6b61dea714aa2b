"""Dominant dimension, top-k pair statistics and Spearman against brute force and closed forms;
pair contributions against transformers' eager attention (GQA, partial rotary, interleaved
pairs, YaRN attention scaling); Toeplitz structure under the true pair layout."""

import copy
import math

import pytest
import torch

from ctxlens.metrics.rope import (
    betainc,
    distance_dimension_correlation,
    dominant_dimension,
    mean_by_distance,
    rankdata,
    rope_pair_contributions,
    spearman,
    t_two_sided_p,
    top_pair_counts,
    top_pairs,
)
from ctxlens.probes.qk import scan
from tests.conftest import build_lm

G = torch.Generator().manual_seed(0)


def test_dominant_dimension_is_the_softmax_expectation_of_the_pair_index():
    pairs = torch.randn(5, 7, generator=G) * 3
    for row, got in zip(pairs.tolist(), dominant_dimension(pairs).tolist()):
        w = [math.exp(v) for v in row]
        assert got == pytest.approx(sum(i * wi for i, wi in enumerate(w)) / sum(w), rel=1e-5)
    one_hot = torch.full((7,), -1e4)
    one_hot[4] = 0.0
    assert float(dominant_dimension(one_hot)) == pytest.approx(4.0)
    assert float(dominant_dimension(torch.zeros(7))) == pytest.approx(3.0)  # uniform: the middle index


def test_top_pair_counts_equal_a_sort_per_sample():
    pairs = torch.randn(3, 50, 8, generator=G)  # [heads, samples, pairs]
    counts = top_pair_counts(pairs, 3)
    for h in range(3):
        truth = [0] * 8
        for s in range(50):
            for i in sorted(range(8), key=lambda i: -pairs[h, s, i].item())[:3]:
                truth[i] += 1
        assert counts[h].tolist() == truth
    assert set(top_pairs(pairs, 3)[0, 0].tolist()) == set(sorted(range(8), key=lambda i: -pairs[0, 0, i].item())[:3])
    with pytest.raises(ValueError):
        top_pairs(pairs, 9)


def test_rankdata_averages_ties():
    x = torch.tensor([3.0, 1.0, 3.0, 2.0, 3.0, 1.0])
    truth = [sum(b < a for b in x.tolist()) + (sum(b == a for b in x.tolist()) + 1) / 2 for a in x.tolist()]
    assert rankdata(x).tolist() == truth


def test_spearman_without_ties_matches_the_closed_form():
    x, y = torch.randn(30, generator=G), torch.randn(30, generator=G)
    rx, ry = rankdata(x), rankdata(y)
    n = 30
    closed = 1 - 6 * float(((rx - ry) ** 2).sum()) / (n * (n * n - 1))
    rho, p = spearman(x, y)
    assert rho == pytest.approx(closed, abs=1e-12)
    assert 0 < p < 1
    # invariant under monotone maps; perfect monotone relation -> |rho| = 1, p = 0
    assert spearman(x.exp(), y ** 3)[0] == pytest.approx(rho, abs=1e-12)
    assert spearman(x, -x.exp()) == (-1.0, 0.0)


def test_spearman_with_ties_is_pearson_of_average_ranks():
    x = torch.tensor([1, 2, 2, 3, 4, 4, 4, 5], dtype=torch.float)
    y = torch.tensor([2, 1, 3, 3, 5, 4, 6, 6], dtype=torch.float)
    rx = [sum(b < a for b in x.tolist()) + (sum(b == a for b in x.tolist()) + 1) / 2 for a in x.tolist()]
    ry = [sum(b < a for b in y.tolist()) + (sum(b == a for b in y.tolist()) + 1) / 2 for a in y.tolist()]
    mx, my = sum(rx) / 8, sum(ry) / 8
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    pearson = cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    assert spearman(x, y)[0] == pytest.approx(pearson, abs=1e-12)
    assert all(math.isnan(v) for v in spearman(torch.ones(5), torch.arange(5.0)))
    assert all(math.isnan(v) for v in spearman(torch.arange(2.0), torch.arange(2.0)))


@pytest.mark.parametrize("t", [0.0, 0.3, 1.0, 2.5, 12.0])
def test_t_p_value_matches_closed_forms(t):
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), abs=1e-12)  # Cauchy
    assert t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    assert t_two_sided_p(t, 1e7) == pytest.approx(math.erfc(t / math.sqrt(2)), abs=1e-6)  # normal limit


@pytest.mark.parametrize("x", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_incomplete_beta_matches_closed_forms(x):
    assert betainc(1, 1, x) == pytest.approx(x, abs=1e-12)
    assert betainc(3.5, 1, x) == pytest.approx(x ** 3.5, abs=1e-12)
    assert betainc(1, 4.0, x) == pytest.approx(1 - (1 - x) ** 4, abs=1e-12)


def test_mean_by_distance_and_correlation_average_per_distance_first():
    dist = torch.tensor([5, 1, 5, 3, 1, 1, 9])
    dom = torch.tensor([2.0, 4.0, 6.0, 1.0, 5.0, 6.0, 7.0])
    d, mean, counts = mean_by_distance(dist, dom)
    assert d.tolist() == [1, 3, 5, 9] and counts.tolist() == [3, 1, 2, 1]
    assert mean.tolist() == pytest.approx([5.0, 1.0, 4.0, 7.0])
    rho, p, n = distance_dimension_correlation(dist, dom)
    assert n == 4 and rho == pytest.approx(spearman(torch.tensor([1.0, 3, 5, 9]), torch.tensor([5.0, 1, 4, 7]))[0])
    # noisy pairs whose per-distance means rise with distance: perfect rank correlation
    dist = torch.arange(20).repeat_interleave(4)
    noise = torch.tensor([-1.0, 1.0, -2.0, 2.0]).repeat(20)
    rho, p, n = distance_dimension_correlation(dist, 0.1 * dist + noise)
    assert (rho, p, n) == (1.0, 0.0, 20)


# -- against the model's own attention -----------------------------------------------------------


def _eager_probs(lm, ids):
    model = copy.deepcopy(lm.model)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        return model(ids, use_cache=False, output_attentions=True).attentions  # per layer [B, H, L, L]


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "cohere"])  # GQA; partial rotary; interleaved pairs
@pytest.mark.parametrize("yarn", [False, True])
def test_contributions_times_scaling_sum_to_logits_whose_softmax_is_eager_attention(family, yarn):
    lm = build_lm(family)
    if yarn:
        lm.set_rope(scaling=YARN)
        assert [m for n, m in lm.model.named_modules() if n.endswith("rotary_emb")][0].attention_scaling > 1.1
    ids = torch.randint(3, 256, (1, 24), generator=torch.Generator().manual_seed(2))
    eager = _eager_probs(lm, ids)
    cap = lm.capture(ids, qk=lm.attention_layers())
    for layer in lm.attention_layers():
        q, k = cap.queries[layer][0], cap.keys[layer][0]  # [H, L, d]
        pairs, rest = rope_pair_contributions(q[:, :, None], k[:, None], lm.family.rope_layout, lm.rotary_dims)
        scaling = lm.attention(layer).scaling
        logits = scaling * (pairs.sum(-1) + rest)  # [H, L, L]
        torch.testing.assert_close(logits, scaling * (q @ k.transpose(-1, -2)), rtol=1e-4, atol=1e-5)
        causal = torch.ones(24, 24, dtype=torch.bool).tril()
        probs = torch.softmax(logits.masked_fill(~causal, float("-inf")), -1)
        torch.testing.assert_close(probs, eager[layer][0], rtol=1e-4, atol=1e-5)


def _is_toeplitz(m: torch.Tensor, tol: float) -> bool:
    """m [..., L, L]: every diagonal constant on the causal part."""
    n = m.shape[-1]
    return all(
        (m[..., i, j] - m[..., i - j, 0]).abs().max() <= tol for i in range(n) for j in range(i + 1)
    )


@pytest.mark.parametrize("family", ["llama", "cohere", "gpt_neox"])
def test_constant_input_gives_toeplitz_contributions_only_under_the_true_layout(family):
    lm = build_lm(family)
    ids = torch.full((1, 16), 7)
    cap = lm.capture(ids, qk=[0])
    q, k = cap.queries[0][0], cap.keys[0][0]  # [H, L, d]
    true = lm.family.rope_layout
    other = {"half": "interleaved", "interleaved": "half"}[true]
    for layout, toeplitz in ((true, True), (other, False)):
        pairs, _ = rope_pair_contributions(q[:, :, None], k[:, None], layout, lm.rotary_dims)  # [H, L, L, P]
        scale = pairs.abs().max()
        assert _is_toeplitz(pairs.movedim(-1, 0), 1e-4 * scale) is toeplitz, layout


@pytest.mark.parametrize("family", ["llama", "mistral", "gemma2"])  # GQA; sliding window; soft-capping
def test_chunked_top_keys_equal_the_top_of_eager_attention_rows(family, monkeypatch):
    import ctxlens.probes.qk as qk

    monkeypatch.setattr(qk, "WORK_BYTES", 4096)  # many small chunks
    lm = build_lm(family)
    ids = torch.randint(3, 256, (1, 40), generator=torch.Generator().manual_seed(4))
    eager = _eager_probs(lm, ids)
    seen = []

    def check(view):
        qpos = torch.arange(40)
        step = qk.chunk_size(view.n_heads, 40)
        assert step < 40
        for s in range(0, 40, step):
            rows = view.probs(qpos[s:s + step], n_keys=40)  # [H, c, 40]
            torch.testing.assert_close(rows, eager[view.layer][0, :, s:s + step], rtol=1e-4, atol=1e-5)
            vals, keys = view.logits(qpos[s:s + step], n_keys=40).topk(5, dim=-1)
            picked = eager[view.layer][0, :, s:s + step].gather(-1, keys)
            best = eager[view.layer][0, :, s:s + step].topk(5, dim=-1).values
            ok = torch.isfinite(vals)
            torch.testing.assert_close(picked[ok], best[ok], rtol=1e-4, atol=1e-6)
        seen.append(view.layer)

    scan(lm, ids, lm.attention_layers(), check)
    assert seen == lm.attention_layers()

