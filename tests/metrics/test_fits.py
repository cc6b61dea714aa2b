"""Power-law and linear fits (the intrinsic-entropy paper, Eq. 3 / Figure 2 and the CE-vs-entropy fits): exact
recovery on noiseless curves, and uncertainties that match the sampling spread under noise."""

import math

import numpy as np
import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.metrics.fits import fit_linear, fit_power_law, power_law

LENGTHS = 2.0 ** np.arange(2, 14)  # 4 .. 8192


@pytest.mark.parametrize("c0,c,gamma", [
    (1.8, 5.0, 0.7),  # a typical CE curve
    (2.5, 30.0, 1.18),
    (0.1, -3.0, 0.3),  # rising curve (ID vs length in Appendix J.3 has C < 0)
    (3.0, 0.5, 2.5),
    (-0.015, 23.8, 1.18),  # Appendix J.3's CE & CL figures
])
def test_power_law_recovers_noiseless_parameters(c0, c, gamma):
    fit = fit_power_law(LENGTHS, power_law(LENGTHS, c0, c, gamma))
    assert fit.flag is None and fit.ok
    for name, true in (("C0", c0), ("C", c), ("gamma", gamma)):
        assert fit[name] == pytest.approx(true, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12)


def _z_scores(fit_fn, truth: dict, make_y, x, reps=300, seed=0):
    rng = np.random.default_rng(seed)
    z, est, err = [], [], []
    for _ in range(reps):
        fit = fit_fn(x, make_y(rng))
        z.append([(fit[k] - v) / fit.stderr[k] for k, v in truth.items()])
        est.append([fit[k] for k in truth])
        err.append([fit.stderr[k] for k in truth])
    return np.array(z), np.array(est), np.array(err)


def test_power_law_uncertainties_match_the_sampling_spread():
    x = np.geomspace(8, 16384, 24)
    truth = {"C0": 1.8, "C": 5.0, "gamma": 0.7}
    noisy = lambda rng: power_law(x, 1.8, 5.0, 0.7) + rng.normal(0, 0.01, x.size)  # noqa: E731
    z, est, err = _z_scores(fit_power_law, truth, noisy, x)
    # the reported 1-sigma errors describe the spread of the estimates over noise draws ...
    ratio = est.std(0) / np.median(err, 0)
    assert ((ratio > 0.8) & (ratio < 1.25)).all(), ratio
    # ... and the true values lie within 2 sigma about as often as a t(21) variable does (~94%)
    inside = (np.abs(z) < 2).mean(0)
    assert ((inside > 0.88) & (inside < 0.99)).all(), inside


def test_power_law_correlations_match_the_sampling_correlation():
    """corr(C, gamma) etc. as the fit reports them against the correlation of the estimates over noise draws."""
    x = np.geomspace(4, 1024, 9)  # a short profile's lengths: C and gamma strongly correlated
    rng = np.random.default_rng(3)
    fits = [fit_power_law(x, power_law(x, 2.0, 3.0, 0.6) + rng.normal(0, 0.01, x.size)) for _ in range(400)]
    est = np.array([[f["C0"], f["C"], f["gamma"]] for f in fits])  # [400, 3]
    sampled = np.corrcoef(est.T)  # [3, 3]
    for (i, a), (j, b) in [((0, "C0"), (1, "C")), ((0, "C0"), (2, "gamma")), ((1, "C"), (2, "gamma"))]:
        reported = np.median([f.correlation[f"{a},{b}"] for f in fits])
        assert abs(reported - sampled[i, j]) < 0.1, (a, b, reported, sampled[i, j])
    assert np.median([f.correlation["C,gamma"] for f in fits]) > 0.5  # large enough that ignoring it would mislead


def test_linear_fit_exact_and_under_noise():
    x = np.linspace(-3, 7, 15)
    exact = fit_linear(x, 2.5 * x - 1.0)
    assert exact.params == pytest.approx({"slope": 2.5, "intercept": -1.0}, rel=1e-12)
    assert exact.r2 == pytest.approx(1.0) and exact.pearson_r == pytest.approx(1.0)
    assert fit_linear(x, -x).pearson_r == pytest.approx(-1.0)
    noisy_y = 0.3 * x + np.random.default_rng(1).normal(0, 1.0, x.size)
    fit = fit_linear(x, noisy_y)
    assert fit.pearson_r == pytest.approx(np.corrcoef(x, noisy_y)[0, 1], rel=1e-12)
    assert [fit["slope"], fit["intercept"]] == pytest.approx(list(np.polyfit(x, noisy_y, 1)), rel=1e-10)
    assert fit.r2 == pytest.approx(fit.pearson_r**2, rel=1e-12)
    truth = {"slope": 0.3, "intercept": 2.0}
    z, est, err = _z_scores(fit_linear, truth, lambda rng: 0.3 * x + 2.0 + rng.normal(0, 0.5, x.size), x)
    ratio = est.std(0) / np.sqrt((err**2).mean(0))
    assert ((ratio > 0.85) & (ratio < 1.15)).all(), ratio


def test_too_few_points_are_flagged_never_nan():
    two = fit_power_law([1, 2, 2, 1], [3.0, 2.0, 2.0, 3.0])
    assert not two.ok and "at least 3 distinct" in two.flag
    three = fit_power_law([1, 2, 4], [3.0, 2.0, 1.5])
    assert three.ok and three.stderr["gamma"] is None and "no residual degrees of freedom" in three.flag
    flat = fit_power_law(LENGTHS, np.full(LENGTHS.size, 2.0))
    assert flat["C"] == 0.0 and flat["gamma"] is None and "constant" in flat.flag
    one = fit_linear([1.0], [2.0])
    assert not one.ok and "at least 2 distinct" in one.flag
    pair = fit_linear([1.0, 2.0], [2.0, 3.0])
    assert pair["slope"] == pytest.approx(1.0) and pair.stderr["slope"] is None and pair.flag
    const_y = fit_linear([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert const_y["slope"] == 0.0 and const_y.r2 is None and "constant" in const_y.flag
    for fit in (two, three, flat, one, pair, const_y):
        for row in fit.rows():
            assert row["value"] is None or math.isfinite(row["value"])
            assert row["stderr"] is None or math.isfinite(row["stderr"])


def test_rows_are_tidy():
    rows = fit_power_law(LENGTHS, power_law(LENGTHS, 1.0, 2.0, 0.5)).rows()
    assert [r["quantity"] for r in rows] == ["C0", "C", "gamma", "r2", "corr(C0, C)", "corr(C0, gamma)",
                                             "corr(C, gamma)"]
    assert {tuple(sorted(r)) for r in rows} == {("fit", "flag", "n_points", "quantity", "stderr", "value")}
    assert [r["quantity"] for r in fit_linear([1, 2, 3], [1, 3, 2]).rows()] == ["slope", "intercept", "r2", "pearson_r"]


def test_bad_inputs_raise():
    with pytest.raises(CtxlensError, match="differ in length"):
        fit_linear([1, 2, 3], [1, 2])
    with pytest.raises(CtxlensError, match="NaN"):
        fit_power_law([1, 2, 3, 4], [1, float("nan"), 2, 3])
    with pytest.raises(CtxlensError, match="positive lengths"):
        fit_power_law([0, 1, 2, 3], [1, 2, 3, 4])
