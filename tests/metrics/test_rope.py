"""RoPE pair contributions against a brute-force loop over dims."""

import pytest
import torch

from ctxlens.metrics.rope import pair_index, rope_pair_contributions


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dims", [8, 16])
def test_pairs_equal_brute_force(layout, rotary_dims):
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(3, 16, generator=g), torch.randn(3, 16, generator=g)
    pairs, rest = rope_pair_contributions(q, k, layout=layout, rotary_dims=rotary_dims)
    half = rotary_dims // 2
    for i in range(half):
        a, b = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
        torch.testing.assert_close(pairs[:, i], q[:, a] * k[:, a] + q[:, b] * k[:, b])
    torch.testing.assert_close(rest, sum(q[:, d] * k[:, d] for d in range(rotary_dims, 16)) if rotary_dims < 16
                               else torch.zeros(3))
    torch.testing.assert_close(pairs.sum(-1) + rest, (q * k).sum(-1))


def test_pair_index_rejects_bad_input():
    with pytest.raises(ValueError):
        pair_index(7, "half")
    with pytest.raises(ValueError):
        pair_index(8, "diagonal")


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_pairs_are_bit_for_bit_one_addition_of_the_two_products_when_broadcast(layout):
    """The shapes of the dominant-dimension scan (q [H, c, 1, d] against keys [H, c, t, d]), with a
    partial rotary part: each pair is exactly q_a k_a + q_b k_b."""
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 5, 1, 12, generator=g), torch.randn(2, 5, 7, 12, generator=g)
    pairs, _ = rope_pair_contributions(q, k, layout=layout, rotary_dims=8)
    for i, (a, b) in enumerate(pair_index(8, layout).tolist()):
        assert torch.equal(pairs[..., i], q[..., a] * k[..., a] + q[..., b] * k[..., b])
    with pytest.raises(ValueError):
        rope_pair_contributions(q, k, layout="diagonal")
    with pytest.raises(ValueError):
        rope_pair_contributions(q, k, rotary_dims=7)
