"""``ctxlens.core.stats``: the helpers moved there from the findings (issue 34), each against an
independent truth (a closed form, the standard library, a hand count, or the code they replaced)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from ctxlens.core import stats


def _old_bootstrap_mean(values, n_boot=2000, seed=0):
    """The findings' ``long_sequence._bootstrap_mean`` before the move, verbatim."""
    if len(values) < 2:
        return -1.0, 1.0
    x = np.asarray(values, dtype=np.float64)
    x = x.mean() + (x - x.mean()) * math.sqrt(len(x) / (len(x) - 1))
    means = x[np.random.default_rng(seed).integers(0, len(x), (n_boot, len(x)))].mean(axis=1)
    lo, hi = np.quantile(means, [0.025, 0.975])
    return max(-1.0, float(lo)), min(1.0, float(hi))


def test_resampled_means_have_the_unbiased_variance_of_the_mean():
    values = [0.0, 1.0, 1.0, -1.0, 0.5]
    means = stats.mean_resamples(values, np.random.default_rng(0), 200_000)
    assert means.mean() == pytest.approx(statistics.mean(values), abs=0.01)
    assert means.var() == pytest.approx(statistics.variance(values) / len(values), rel=0.02)  # s^2 / n


def test_resampled_means_of_two_values_take_three_values():
    # two values a < b become m -+ (b - a) / sqrt(2); a resample of two has one of three means
    means = stats.mean_resamples([0.0, 1.0], np.random.default_rng(1), 1000)
    d = 1 / math.sqrt(2)
    assert set(np.round(means, 12)) == {round(0.5 - d, 12), 0.5, round(0.5 + d, 12)}


def test_bootstrap_mean_is_the_findings_old_interval_bit_for_bit():
    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 40):
        values = list(rng.choice([-1.0, 0.0, 1.0], n))
        assert stats.bootstrap_mean(values, bounds=(-1.0, 1.0)) == _old_bootstrap_mean(values)
    assert stats.bootstrap_mean([0.3], bounds=(-1.0, 1.0)) == (-1.0, 1.0)
    assert stats.bootstrap_mean([0.25] * 5) == (0.25, 0.25)  # no spread: every resample's mean


def test_holm_rejects_step_down():
    assert stats.holm({"a": 0.01, "b": 0.04}) == {"a", "b"}  # 0.01 < 0.05 / 2, then 0.04 < 0.05
    assert stats.holm({"a": 0.03, "b": 0.04}) == set()  # 0.03 >= 0.025 stops at once
    assert stats.holm({"a": 0.001, "b": 0.2, "c": 0.02}) == {"a", "c"}  # 0.001 < 0.05/3, 0.02 < 0.05/2, 0.2 >= 0.05
    assert stats.holm({"a": 0.04}, alpha=0.01) == set()


def test_pooled_two_proportion_z_closed_form():
    # p1 = 3/4, p2 = 1/4, pooled 1/2: se = sqrt(1/4 * (1/4 + 1/4)) = sqrt(1/8), z = 1/2 / sqrt(1/8) = sqrt(2)
    p1, p2, z = stats.pooled_two_proportion_z([1, 1, 1, 0], [1, 0, 0, 0])
    assert (p1, p2) == (0.75, 0.25) and z == pytest.approx(math.sqrt(2), rel=1e-12)
    assert stats.pooled_two_proportion_z([1, 1], [1, 1])[2] is None


def test_sample_sd_percentiles_and_quartiles_match_the_standard_library():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert stats.sample_sd([*values, None, math.nan, math.inf]) == pytest.approx(statistics.stdev(values), rel=1e-12)
    assert stats.sample_sd([1.0, None]) is None
    assert stats.quartiles(values) == pytest.approx(tuple(statistics.quantiles(values, n=4, method="inclusive")))
    assert stats.quartiles([]) is None
    assert stats.percentile_interval([float(i) for i in range(101)]) == pytest.approx((2.5, 97.5))  # (n-1) q
    assert stats.percentile_interval(list(range(11)), tail=0.1) == pytest.approx((1.0, 9.0))
    assert stats.percentile_interval([None, math.nan]) is None
