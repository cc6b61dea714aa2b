"""Self-similarity, anisotropy, ACCS and the Appendix A metrics against brute force and closed forms."""

import itertools
import math

import numpy as np
import pytest
import torch

from ctxlens import CtxlensError
from ctxlens.metrics.geometry import (
    AccsAccumulator,
    AnisotropyAccumulator,
    accs,
    anisotropy,
    covariance_condition_number,
    mean_dot,
    pooled_anisotropy,
    self_similarity,
)


def _data(n, d, seed, shift=1.5):
    """Random float64 rows with a shared direction, so the mean cosine is far from 0."""
    g = torch.Generator().manual_seed(seed)
    common = torch.randn(d, generator=g, dtype=torch.float64)
    return torch.randn(n, d, generator=g, dtype=torch.float64) + shift * common


def _brute_mean_cos(x):
    """Mean cosine over every ordered pair i != j, one pair at a time."""
    vals = [float(torch.nn.functional.cosine_similarity(x[i], x[j], dim=0))
            for i, j in itertools.permutations(range(len(x)), 2)]
    return sum(vals) / len(vals)


def _brute_mean_dot(x):
    vals = [float(x[i] @ x[j]) for i, j in itertools.permutations(range(len(x)), 2)]
    return sum(vals) / len(vals)


@pytest.mark.parametrize("n,d,shift", [(2, 3, 0.0), (37, 8, 0.0), (60, 5, 1.5), (45, 16, 4.0)])
def test_anisotropy_equals_brute_force_over_all_pairs(n, d, shift):
    x = _data(n, d, seed=n, shift=shift)
    assert anisotropy(x) == pytest.approx(_brute_mean_cos(x), abs=1e-6)


def test_pooled_anisotropy_is_anisotropy_of_both_pools_together():
    h, hp = _data(20, 6, 1), _data(20, 6, 2)
    assert pooled_anisotropy(h, hp) == pytest.approx(_brute_mean_cos(torch.cat([h, hp])), abs=1e-12)


def test_anisotropy_of_known_configurations():
    eye = torch.eye(7, dtype=torch.float64)
    assert anisotropy(eye) == pytest.approx(0.0, abs=1e-15)  # orthonormal: every pair orthogonal
    same = torch.tensor([[1.0, 2.0, -3.0]]).repeat(9, 1) * torch.arange(1, 10.0)[:, None]
    assert anisotropy(same) == pytest.approx(1.0, abs=1e-12)  # one direction, any positive scale
    k = 6
    v = torch.tensor([0.3, -1.0, 2.0])
    antipodal = torch.cat([v.repeat(k, 1), -v.repeat(k, 1)])
    # pairs within a group: +1 (2k(k-1) ordered pairs); across: -1 (2k^2): mean -1/(2k-1)
    assert anisotropy(antipodal) == pytest.approx(-1 / (2 * k - 1), abs=1e-12)


def test_anisotropy_ignores_vector_lengths():
    x = _data(30, 5, 3)
    scale = torch.rand(30, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 100 + 0.01
    assert anisotropy(x * scale) == pytest.approx(anisotropy(x), abs=1e-12)


def test_self_similarity_is_the_mean_rowwise_cosine():
    h, hp = _data(25, 4, 5), _data(25, 4, 6)
    truth = sum(float(torch.nn.functional.cosine_similarity(h[i], hp[i], dim=0)) for i in range(25)) / 25
    assert self_similarity(h, hp) == pytest.approx(truth, abs=1e-12)
    assert self_similarity(h, -3 * h) == pytest.approx(-1.0, abs=1e-12)


def test_without_perturbation_self_similarity_is_one_and_accs_is_one_minus_anisotropy():
    h = _data(40, 8, 7)
    assert self_similarity(h, h.clone()) == pytest.approx(1.0, abs=1e-12)
    pooled = _brute_mean_cos(torch.cat([h, h]))
    assert accs(h, h.clone()) == pytest.approx(1.0 - pooled, abs=1e-9)


def test_mean_dot_equals_brute_force():
    x = _data(33, 6, 8)
    assert mean_dot(x) == pytest.approx(_brute_mean_dot(x), rel=1e-9)


def test_condition_number_matches_numpy_and_is_inf_when_singular():
    x = _data(50, 6, 9)
    assert covariance_condition_number(x) == pytest.approx(np.linalg.cond(np.cov(x.numpy(), rowvar=False)), rel=1e-8)
    assert covariance_condition_number(_data(4, 6, 9)) == math.inf  # 4 vectors span at most 3 centred directions


def test_streaming_equals_one_shot_and_keeps_only_sums():
    h, hp = _data(103, 12, 10), _data(103, 12, 11)
    acc, pool = AccsAccumulator(covariance=True), AnisotropyAccumulator(covariance=True)
    for start in (0, 1, 20, 57, 90):  # uneven batches
        end = {0: 1, 1: 20, 20: 57, 57: 90, 90: 103}[start]
        acc.update(h[start:end].float(), hp[start:end].float())
        pool.update(h[start:end])
    got = acc.result()
    both = torch.cat([h.float(), hp.float()]).double()
    assert got["n"] == 103
    assert got["self_sim"] == pytest.approx(self_similarity(h.float(), hp.float()), abs=1e-12)
    assert got["anisotropy"] == pytest.approx(anisotropy(both), abs=1e-12)
    assert got["accs"] == pytest.approx(got["self_sim"] - got["anisotropy"], abs=1e-15)
    assert got["mean_dot"] == pytest.approx(mean_dot(both), rel=1e-9)
    assert got["condition_number"] == pytest.approx(covariance_condition_number(both), rel=1e-7)
    assert pool.result()["anisotropy"] == pytest.approx(anisotropy(h), abs=1e-12)
    assert pool.result()["condition_number"] == pytest.approx(covariance_condition_number(h), rel=1e-7)
    state = [v for v in vars(acc._pool).values() if torch.is_tensor(v)]
    assert max(t.numel() for t in state) == 12 * 12  # the covariance; no [n, d] buffer anywhere
    lean = AccsAccumulator()
    lean.update(h, hp)
    assert all(t.numel() <= 12 for t in vars(lean._pool).values() if torch.is_tensor(t))


@pytest.mark.parametrize("bad,message", [
    (torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), "zero vector"),
    (torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), "non-finite"),
    (torch.tensor([[1.0, float("inf")], [0.0, 1.0]]), "non-finite"),
    (torch.ones(3), r"\[n, d\] matrix"),
    (torch.ones(1, 4), "at least 2 vectors"),
])
def test_bad_inputs_raise_clear_errors(bad, message):
    with pytest.raises(CtxlensError, match=message):
        anisotropy(bad)
    with pytest.raises(CtxlensError, match=message):
        acc = AnisotropyAccumulator()
        acc.update(bad)
        acc.result()


def test_pair_errors():
    with pytest.raises(CtxlensError, match="same shape"):
        accs(torch.ones(3, 2), torch.ones(4, 2))
    with pytest.raises(CtxlensError, match="zero vector"):
        AccsAccumulator().update(torch.ones(2, 2), torch.zeros(2, 2))
    acc = AccsAccumulator()
    acc.update(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(CtxlensError, match="one accumulator per layer"):
        acc.update(torch.ones(2, 4), torch.ones(2, 4))
    with pytest.raises(CtxlensError, match="No pairs"):
        AccsAccumulator().result()
