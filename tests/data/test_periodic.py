"""Tests for ctxlens.data.periodic (paper 000, Section 5.3): the repeat structure is checked
position by position against the layout [pattern L][random k][pattern L][random k] ..."""

from __future__ import annotations

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.data.periodic import periodic_batch, periodic_sequence, sample_seed


def brute_force_pattern_positions(length: int, L: int, k: int) -> dict[int, int]:
    """position -> index into the pattern, for every position covered by a copy."""
    where, start = {}, 0
    while start < length:
        for j in range(L):
            if start + j < length:
                where[start + j] = j
        start += L + k
    return where


@pytest.mark.parametrize("length, L, k", [(1000, 200, 56), (777, 30, 7), (50, 200, 56),
                                          (64, 8, 0), (301, 1, 3)])
def test_pattern_sits_at_every_repeat_position(length, L, k):
    seq = periodic_sequence(length, vocab_size=50_000, period_len=L, stride=k, seed=3)
    assert seq.shape == (length,) and seq.dtype == torch.long
    where = brute_force_pattern_positions(length, L, k)
    pattern = {}
    for position, j in where.items():
        pattern.setdefault(j, int(seq[position]))
        assert int(seq[position]) == pattern[j]  # every copy agrees with the first
    gaps = [int(seq[p]) for p in range(length) if p not in where]
    assert len(gaps) == length - len(where)
    if len(gaps) >= 20:  # the gaps are fresh random tokens, not the pattern again
        assert len(set(gaps)) > 0.9 * len(gaps)


def test_pattern_itself_is_random():
    seq = periodic_sequence(1000, vocab_size=50_000, seed=0)
    pattern = seq[:200].tolist()
    assert len(set(pattern)) > 190  # 200 draws from 50k: nearly all distinct
    assert seq[256:456].tolist() == pattern and seq[512:712].tolist() == pattern
    assert seq[200:256].tolist() != pattern[:56]


def test_default_layout_is_L200_k56():
    seq = periodic_sequence(2 * 256 + 10, vocab_size=1000, seed=5)
    assert torch.equal(seq[0:200], seq[256:456])
    assert torch.equal(seq[0:10], seq[512:522])


def test_range_respects_low_and_vocab_size():
    seq = periodic_sequence(5000, vocab_size=20, low=3, period_len=10, stride=40, seed=1)
    assert int(seq.min()) >= 3 and int(seq.max()) < 20
    assert set(seq.tolist()) == set(range(3, 20))  # 4000 gap draws cover all 17 ids
    assert set(periodic_sequence(10, vocab_size=1, seed=0).tolist()) == {0}


def test_determinism_and_prefix_stability():
    a = periodic_sequence(6000, vocab_size=30_000, seed=11)
    assert torch.equal(a, periodic_sequence(6000, vocab_size=30_000, seed=11))
    assert not torch.equal(a, periodic_sequence(6000, vocab_size=30_000, seed=12))
    for shorter in (1, 256, 4096, 4097, 5000):  # across generator-block boundaries
        assert torch.equal(periodic_sequence(shorter, vocab_size=30_000, seed=11), a[:shorter])


def test_batch_rows_are_independent_and_do_not_depend_on_n():
    batch = periodic_batch(4, 600, vocab_size=10_000, seed=2)
    assert batch.shape == (4, 600) and batch.dtype == torch.long
    assert torch.equal(periodic_batch(2, 600, vocab_size=10_000, seed=2), batch[:2])
    patterns = [tuple(row[:200].tolist()) for row in batch]
    assert len(set(patterns)) == 4
    for row in batch:  # each row has the periodic structure
        assert torch.equal(row[:200], row[256:456])
    assert not torch.equal(periodic_batch(4, 600, vocab_size=10_000, seed=3), batch)


def test_sample_seeds_do_not_collide_like_linear_formulas():
    seeds = {sample_seed(s, i) for s in range(20) for i in range(50)}
    assert len(seeds) == 1000
    assert all(0 <= s < 2**63 for s in seeds)


@pytest.mark.parametrize("kwargs, message", [
    (dict(length=0, vocab_size=10), r"length must be at least 1"),
    (dict(length=10, vocab_size=0), r"vocab_size must be at least 1"),
    (dict(length=10, vocab_size=10, period_len=0), r"period_len must be at least 1"),
    (dict(length=10, vocab_size=10, stride=-1), r"stride must be at least 0"),
    (dict(length=10, vocab_size=10, low=10), r"low=10 leaves no token ids"),
    (dict(length=10, vocab_size=10, low=-1), r"low must be at least 0"),
    (dict(length=10.0, vocab_size=10), r"length must be a whole number"),
    (dict(length=10, vocab_size=10, seed=True), r"seed must be a whole number"),
])
def test_errors(kwargs, message):
    length = kwargs.pop("length")
    with pytest.raises(CtxlensError, match=message):
        periodic_sequence(length, **kwargs)


def test_batch_errors():
    with pytest.raises(CtxlensError, match=r"n must be at least 1"):
        periodic_batch(0, 10, vocab_size=10)
    with pytest.raises(CtxlensError, match=r"length must be at least 1"):
        periodic_batch(2, 0, vocab_size=10)
