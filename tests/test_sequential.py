"""The anytime-valid bounded-mean test (``ctxlens.core.sequential``), checked by simulation.

Type-I error under optional stopping (look after every item up to 200, stop at the first
crossing) on nulls at the boundary m0, against the naive fixed-level tests repeated after each
item; power and planning at the long-sequence paper's effects; fast decisions on a collapse; edge
cases. Every simulation is vectorised over datasets and seeded.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from ctxlens.core import sequential as seq
from ctxlens.core.stats import binom_tail, t_quantile

ALPHA = 0.05
N_NULL = 2000  # simulated datasets per null scenario
N_MAX = 200  # items per dataset, the test looked at after every one
MC_SE = math.sqrt(ALPHA * (1 - ALPHA) / N_NULL)


def _skewed(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Mean exactly 0 in [-1, 1]: 0.1 nine times in ten, -0.9 otherwise (frequent small gains, rare big loss)."""
    return np.where(rng.random(shape) < 0.1, -0.9, 0.1)


# name: (item model at the null, m0, lo, hi)
NULLS = {
    "symmetric +-1": (lambda rng, shape: rng.choice([-1.0, 1.0], shape), 0.0, -1.0, 1.0),
    "McNemar, 80% ties": (seq.paired_binary_model(0.0, 0.2), 0.0, -1.0, 1.0),
    "7 correlated cells": (seq.binary_difference_model(0.5, 0.5, 7, correlation=0.5), 0.0, -1.0, 1.0),
    "7 cells at 0.2": (seq.binary_difference_model(0.2, 0.2, 7, correlation=0.3), 0.0, -1.0, 1.0),
    "skewed, mean 0": (_skewed, 0.0, -1.0, 1.0),
    "Bernoulli(0.1)": (lambda rng, shape: (rng.random(shape) < 0.1).astype(float), 0.1, 0.0, 1.0),
    "Beta(0.5, 4.5)": (lambda rng, shape: rng.beta(0.5, 4.5, shape), 0.1, 0.0, 1.0),
}


@functools.lru_cache(maxsize=1)
def _t_critical() -> np.ndarray:
    """[N_MAX + 1] one-sided 5% critical t for a mean of n items (inf below n = 2)."""
    return np.array([math.inf, math.inf] + [t_quantile(n - 1, 2 * ALPHA) for n in range(2, N_MAX + 1)])


def _naive_t_rate(x: np.ndarray) -> float:
    """Fraction of datasets x [s, n] (centred at m0) where the one-sided 5% t test, repeated after
    every item from the second on, rejects at least once."""
    k = np.arange(1, x.shape[1] + 1)  # [n]
    mean = np.cumsum(x, axis=1) / k  # [s, n]
    ss = np.maximum(np.cumsum(x * x, axis=1) - k * mean * mean, 0.0)  # [s, n]
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(ss / (k - 1))
        t = mean / (sd / np.sqrt(k))
    return float(np.mean(((t > _t_critical()[1:x.shape[1] + 1]) & (sd > 1e-12)).any(axis=1)))


def _naive_sign_rate(x: np.ndarray) -> float:
    """Fraction of datasets x [s, n] of -1 / 0 / +1 items where the exact one-sided McNemar (sign)
    test at 5%, repeated after every item, rejects at least once."""
    up = np.cumsum(x > 0, axis=1)  # [s, n]
    discordant = np.cumsum(x != 0, axis=1)  # [s, n]
    crit, k = [], 0
    for d in range(x.shape[1] + 1):  # the smallest count with P(Binomial(d, 1/2) >= count) <= 5%
        while k <= d and binom_tail(k, d) > ALPHA:
            k += 1
        crit.append(k if k <= d else d + 1)
    return float(np.mean((up >= np.asarray(crit)[discordant]).any(axis=1)))


@pytest.mark.parametrize("name", list(NULLS))
def test_null_rate_under_optional_stopping(name):
    sample, m0, lo, hi = NULLS[name]
    rate = seq.power(sample, N_MAX, m0, lo, hi, ALPHA, N_NULL, seed=11)
    assert rate <= ALPHA + 3 * MC_SE, f"{name}: {rate:.4f} of {N_NULL} null datasets rejected"
    x = np.asarray(sample(np.random.default_rng(11), (N_NULL, N_MAX))) - m0  # [N_NULL, N_MAX]
    naive = _naive_t_rate(x)
    assert naive > 2 * ALPHA, f"{name}: the repeated t test rejects only {naive:.3f}"


def test_null_rate_less_and_naive_sign_test():
    sample, m0, lo, hi = NULLS["McNemar, 80% ties"]
    rate = seq.power(sample, N_MAX, m0, lo, hi, ALPHA, N_NULL, seed=12, alternative="less")
    assert rate <= ALPHA + 3 * MC_SE
    naive = _naive_sign_rate(np.asarray(sample(np.random.default_rng(12), (N_NULL, N_MAX))))
    assert naive > 2 * ALPHA, f"the repeated exact McNemar test rejects only {naive:.3f}"


# the long-sequence paper's effects (findings/long_sequence.py): a 0.20 drop of the per-haystack
# accuracy over the 7 depths from L to 2L at 5%; a 0.25 dip of the middle below an end, one cell
# per haystack, at Holm's first step 0.025.
EFFECTS = {
    "drop 0.20": (seq.binary_difference_model(0.5, 0.3, 7, correlation=0.3), 0.05),
    "dip 0.25": (seq.binary_difference_model(0.55, 0.30, 1, correlation=0.0), 0.025),
}


@pytest.mark.parametrize("name", list(EFFECTS))
def test_needed_n_reaches_power_and_is_not_padded(name):
    sample, alpha = EFFECTS[name]
    n = seq.needed_n(sample, 0.0, -1.0, 1.0, alpha, target=0.8, seed=0)
    assert n is not None and 10 < n < 200
    # needed_n reads the same seeded draws as power: exactly the first n that reaches the target
    assert seq.power(sample, n, 0.0, -1.0, 1.0, alpha, seed=0) >= 0.8 > seq.power(sample, n - 1, 0.0, -1.0, 1.0,
                                                                                  alpha, seed=0)
    times = seq.decision_times(sample, n, 0.0, -1.0, 1.0, alpha, n_sim=4000, seed=1)  # independent draws
    slack = 3 * math.sqrt(0.8 * 0.2 / 2000 + 0.8 * 0.2 / 4000)  # both powers are estimates
    assert np.mean(times > 0) >= 0.8 - slack
    fewer = n - max(3, round(0.15 * n))
    assert np.mean((times > 0) & (times <= fewer)) < 0.8 - slack, f"{name}: n = {n} is padded"


def test_needed_n_none_beyond_the_cap():
    sample, alpha = EFFECTS["dip 0.25"]
    assert seq.needed_n(sample, 0.0, -1.0, 1.0, alpha, n_cap=20, n_sim=500) is None


def test_a_collapse_decides_fast():
    drop = seq.test_mean([0.86] * 8, 0.0, -1.0, 1.0, alpha=0.05)  # accuracy 0.86 at L, 0.00 at 2L
    assert drop.decided and drop.decided_at is not None and drop.decided_at <= 8
    reverse = seq.test_mean([-1.0] * 8, 0.0, -1.0, 1.0, alpha=0.025, alternative="less")  # a reverse dip
    assert reverse.decided and reverse.decided_at is not None and reverse.decided_at <= 8


def test_empty_input():
    r = seq.test_mean([], 0.0, -1.0, 1.0)
    assert (r.n, r.decided, r.decided_at, r.p_anytime, r.max_wealth) == (0, False, None, 1.0, 1.0)
    assert len(seq.wealth([], 0.0, -1.0, 1.0)) == 0 and len(seq.bets([], 0.0, -1.0, 1.0)) == 0


@pytest.mark.parametrize("xs, m0, lo, hi, alternative, message", [
    ([0.5, 1.5], 0.0, -1.0, 1.0, "greater", "outside the declared range"),
    ([0.5, -1.2], 0.0, -1.0, 1.0, "less", "outside the declared range"),
    ([0.5, math.nan], 0.0, -1.0, 1.0, "greater", "finite"),
    ([0.5], 1.0, -1.0, 1.0, "greater", "strictly inside"),
    ([0.5], 0.0, -1.0, 1.0, "two-sided", "'greater' or 'less'"),
])
def test_bad_input_raises_one_sentence(xs, m0, lo, hi, alternative, message):
    with pytest.raises(ValueError, match=message) as err:
        seq.test_mean(xs, m0, lo, hi, alternative=alternative)
    assert str(err.value).count(". ") == 0 and str(err.value).endswith(".")


def test_wealth_stays_positive_and_the_bets_are_predictable():
    rng = np.random.default_rng(3)
    adverse = np.concatenate([np.ones(60), -np.ones(5000)])  # learn a big bet, then lose every item
    for xs in (adverse, rng.uniform(-1, 1, 500), np.where(rng.random(500) < 0.5, -1.0, 0.2)):
        w = seq.wealth(xs, 0.0, -1.0, 1.0)
        assert np.all(w > 0) and np.all(np.isfinite(w))
        steps = np.diff(np.concatenate([[0.0], np.log(w)]))  # [n] log of each factor
        assert steps.min() >= math.log(1 - seq.CAP) - 1e-12
        lam = seq.bets(xs, 0.0, -1.0, 1.0)
        assert lam.min() >= 0 and lam.max() < seq.CAP  # [0, CAP / (m0 - lo)) with m0 - lo = 1
        assert np.allclose(w, np.cumprod(1 + lam * xs))
    xs = rng.uniform(-1, 1, 40)
    changed = xs.copy()
    changed[20:] = -changed[20:]
    assert np.array_equal(seq.bets(xs, 0.0, -1.0, 1.0)[:21], seq.bets(changed, 0.0, -1.0, 1.0)[:21])
    assert seq.bets(np.abs(xs), 0.2, 0.0, 1.0)[0] == pytest.approx(2 * seq.CAP / 3 / 0.2, rel=0.01)  # the first bet


def test_result_is_consistent_deterministic_and_less_is_greater_negated():
    xs = np.random.default_rng(4).uniform(-0.6, 1.0, 60)
    r = seq.test_mean(xs, 0.0, -1.0, 1.0)
    assert r == seq.test_mean(list(xs), 0.0, -1.0, 1.0)
    assert r.p_anytime == pytest.approx(min(1.0, 1.0 / r.max_wealth))
    assert r.decided == (r.p_anytime <= r.alpha)
    assert r.decided_at == int(np.argmax(seq.wealth(xs, 0.0, -1.0, 1.0) >= 1 / r.alpha)) + 1
    flipped = seq.test_mean(-xs, 0.0, -1.0, 1.0, alternative="less")
    assert (flipped.max_wealth, flipped.decided_at) == (r.max_wealth, r.decided_at)
    sample = EFFECTS["drop 0.20"][0]
    assert np.array_equal(seq.decision_times(sample, 50, 0.0, -1.0, 1.0, n_sim=300, seed=5),
                          seq.decision_times(sample, 50, 0.0, -1.0, 1.0, n_sim=300, seed=5))


def test_item_models_match_their_parameters():
    rng = np.random.default_rng(6)
    p1, p2, k, rho = 0.5, 0.3, 7, 0.3
    x = seq.binary_difference_model(p1, p2, k, rho)(rng, (200_000,))
    d = p1 - p2
    var = rho * d * (1 - d) + (1 - rho) * (p1 * (1 - p1) + p2 * (1 - p2)) / k  # cells correlated by rho
    assert x.mean() == pytest.approx(d, abs=0.005) and x.var() == pytest.approx(var, rel=0.02)
    assert np.allclose(x * k, np.round(x * k)) and x.min() >= -1 and x.max() <= 1
    one = seq.binary_difference_model(0.55, 0.30, 1, 0.5)(rng, (200_000,))
    assert np.mean(one != 0) == pytest.approx(0.5 * 0.25 + 0.5 * (0.55 * 0.7 + 0.30 * 0.45), abs=0.005)
    pairs = seq.paired_binary_model(0.25, 0.4)(rng, (200_000,))
    assert np.mean(pairs == 1) == pytest.approx(0.325, abs=0.005)
    assert np.mean(pairs == -1) == pytest.approx(0.075, abs=0.005)
    with pytest.raises(ValueError, match="discordance"):
        seq.paired_binary_model(0.3, 0.2)
