"""Eigen-spectrum, intrinsic entropy / dimension and KDE entropy (the intrinsic-entropy paper, Section 2.2.2,
Appendices C.2 and J.2) against closed forms and brute force."""

import math

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.metrics.spectrum import (
    CovarianceAccumulator,
    eigen_spectrum,
    intrinsic_dimension,
    intrinsic_entropy,
    kde_entropy,
)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _exact_covariance_data(variances, n, d, seed=0):
    """Rows [n, d] whose sample covariance (ddof=1) is exactly diag(variances, 0, ...) up to a
    random rotation: orthonormal columns orthogonal to the all-ones vector, scaled."""
    k = len(variances)
    a = torch.randn(n, k + 1, generator=_gen(seed), dtype=torch.float64)
    a[:, 0] = 1.0
    q, _ = torch.linalg.qr(a)  # [n, k+1], q[:, 0] ∝ ones
    cols = q[:, 1:] * math.sqrt(n - 1) * torch.tensor(variances, dtype=torch.float64).sqrt()  # [n, k]
    rot, _ = torch.linalg.qr(torch.randn(d, d, generator=_gen(seed + 1), dtype=torch.float64))
    return cols @ rot[:k] + 3.0  # [n, d], shifted mean


def test_streaming_covariance_equals_one_shot_even_with_a_large_mean():
    x = torch.randn(1000, 7, generator=_gen(), dtype=torch.float64) * torch.arange(1, 8) + 1e4
    x[1:4] = x[1:4].float().double()  # these rows arrive as float32
    acc = CovarianceAccumulator()
    for part in torch.split(x, [1, 3, 250, 400, 346]):
        acc.update(part.float() if part.shape[0] == 3 else part)
    ref = torch.cov(x.T)
    assert acc.n == 1000
    torch.testing.assert_close(acc.covariance(), ref, rtol=1e-6, atol=1e-6)
    expected = torch.linalg.eigvalsh(ref).flip(0)  # descending
    torch.testing.assert_close(eigen_spectrum(acc).eigenvalues, expected, rtol=1e-6, atol=1e-6)


def test_spectrum_gram_route_for_fewer_samples_than_dims():
    x = torch.randn(10, 40, generator=_gen(), dtype=torch.float64)
    spec = eigen_spectrum(x)
    ref = torch.linalg.eigvalsh(torch.cov(x.T)).flip(0).clamp_min(0)
    assert spec.dim == 40 and spec.rank == 9  # centring removes one direction
    torch.testing.assert_close(spec.eigenvalues, ref, atol=1e-10, rtol=1e-9)
    assert spec.relative[0] == 1.0 and (spec.relative[:-1] >= spec.relative[1:]).all()


@pytest.mark.parametrize("k", [1, 3, 8, 20])
def test_intrinsic_dimension_recovers_a_linear_subspace(k):
    n, d = 3000, 48
    g = _gen(k)
    basis, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    scales = 0.7 + 0.3 * torch.rand(k, generator=g, dtype=torch.float64)  # variances within [0.49, 1]
    x = (torch.randn(n, k, generator=g, dtype=torch.float64) * scales) @ basis[:k]
    x = x + 0.01 * torch.randn(n, d, generator=g, dtype=torch.float64)  # noise variance 1e-4
    thresholds = [0.002, 0.01, 0.05, 0.25]
    assert intrinsic_dimension(x, thresholds) == [k] * 4
    assert intrinsic_dimension(x.float(), 0.05) == k  # float32 features too
    # far below the noise floor every direction counts
    assert intrinsic_dimension(x, 1e-8) == d


def test_intrinsic_entropy_closed_form():
    variances = [4.0, 2.0, 1.0, 0.5, 0.1]
    x = _exact_covariance_data(variances, n=50, d=12)
    expected = [sum(math.log(v / 4.0) for v in variances[:n]) for n in (1, 2, 5)]
    got = intrinsic_entropy(x, [1, 2, 5])
    assert got == pytest.approx(expected, abs=1e-9)
    assert intrinsic_entropy(x, 2) == pytest.approx(expected[1], abs=1e-9)
    # scale and rotation do not change relative eigenvalues
    rot, _ = torch.linalg.qr(torch.randn(12, 12, generator=_gen(5), dtype=torch.float64))
    assert intrinsic_entropy(7.0 * x @ rot, 5) == pytest.approx(expected[2], abs=1e-8)
    with pytest.raises(CtxlensError, match="span only 5"):
        intrinsic_entropy(x, 6)
    with pytest.raises(CtxlensError, match="n in 1..12"):
        intrinsic_entropy(x, 0)


def _brute_kde_entropy(x, factor, leave_one_out=False):
    """-mean_i log( 1/m sum_j N(x_i; x_j, factor^2 cov) ), by explicit densities."""
    n = x.shape[0]
    kernel = torch.distributions.MultivariateNormal(x, covariance_matrix=torch.cov(x.T) * factor**2)  # n kernels
    dens = kernel.log_prob(x[:, None, :]).exp()  # [i, j]: density of kernel j at x_i
    if leave_one_out:
        dens = dens[~torch.eye(n, dtype=torch.bool)].view(n, n - 1)
    return -float(dens.mean(1).log().mean())


@pytest.mark.parametrize("leave_one_out", [False, True])
def test_kde_entropy_matches_explicit_gaussian_densities(leave_one_out):
    x = torch.randn(40, 3, generator=_gen(), dtype=torch.float64) @ torch.tensor(
        [[1.0, 0.3, 0.0], [0.0, 0.5, 0.2], [0.0, 0.0, 2.0]], dtype=torch.float64) + 5.0
    est = kde_entropy(x, leave_one_out=leave_one_out)
    assert est.n_components == 3 and est.n_samples == 40 and est.dim == 3
    assert est.bandwidth == pytest.approx(40 ** (-1 / 7))  # Scott's factor, as scipy's gaussian_kde
    assert est.entropy == pytest.approx(_brute_kde_entropy(x, est.bandwidth, leave_one_out), abs=1e-9)
    fixed = kde_entropy(x, bandwidth=0.5)
    assert fixed.entropy == pytest.approx(_brute_kde_entropy(x, 0.5), abs=1e-9)


def test_kde_entropy_scales_and_survives_singular_or_wide_features():
    g = _gen(3)
    x = torch.randn(60, 4, generator=g, dtype=torch.float64)
    base = kde_entropy(x)
    assert kde_entropy(10.0 * x).entropy == pytest.approx(base.entropy + 4 * math.log(10.0), abs=1e-9)
    # data on a 3-dimensional subspace of 10 dimensions: a singular covariance
    flat = torch.randn(60, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 10, generator=g, dtype=torch.float64)
    est = kde_entropy(flat)
    assert est.n_components == 3 and math.isfinite(est.entropy)
    # more dimensions than samples
    wide = kde_entropy(torch.randn(20, 300, generator=g))
    assert wide.n_components == 19 and wide.dim == 300 and math.isfinite(wide.entropy)
    assert kde_entropy(flat, n_components=2).n_components == 2
    with pytest.raises(CtxlensError, match="span only 3"):
        kde_entropy(flat, n_components=4)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(CtxlensError, match="NaN"):
        eigen_spectrum(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(CtxlensError, match="at least 2 samples"):
        eigen_spectrum(torch.ones(1, 3))
    with pytest.raises(CtxlensError, match="do not vary"):
        intrinsic_dimension(torch.ones(5, 3), 0.1)
    with pytest.raises(CtxlensError, match=r"\(0, 1\]"):
        intrinsic_dimension(torch.randn(5, 3), 0.0)
    with pytest.raises(CtxlensError, match="columns"):
        CovarianceAccumulator().update(torch.randn(4, 3)).update(torch.randn(4, 2))
    with pytest.raises(CtxlensError, match="matrix"):
        eigen_spectrum(torch.randn(5))
