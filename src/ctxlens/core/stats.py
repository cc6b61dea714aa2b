"""Rank statistics without torch: one implementation, used by the metrics on tensors and by the
torch-free findings on row values.

Spearman's rho is the Pearson correlation of tie-averaged ranks; its p-value is the usual
large-sample t test (t = rho sqrt((n - 2) / (1 - rho^2)), n - 2 degrees of freedom), with the
regularised incomplete beta function computed here (Numerical Recipes' continued fraction), so
nothing needs scipy. Ranks are integers or halves, so the sums are exact in float64 and rho does
not depend on summation order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def rankdata(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """[n] -> [n] float64 ranks from 1, ties given the mean of the ranks they span."""
    x = np.asarray(x, dtype=np.float64).ravel()
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    new_group = np.ones(len(x), dtype=bool)
    new_group[1:] = sorted_x[1:] != sorted_x[:-1]
    group = np.cumsum(new_group) - 1  # [n] group id of each sorted entry
    starts = np.flatnonzero(new_group)  # [groups] first sorted index of each group
    sizes = np.diff(np.append(starts, len(x)))  # [groups]
    mean_rank = starts + (sizes + 1) / 2  # ranks start+1 .. start+size
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """(rho, two-sided p) of x [n] and y [n]; NaN for n < 3 or a constant input."""
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 3:
        return math.nan, math.nan
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    if denom == 0.0:
        return math.nan, math.nan
    rho = max(-1.0, min(1.0, float((rx * ry).sum()) / denom))
    if abs(rho) == 1.0:
        return rho, 0.0
    return rho, t_two_sided_p(rho * math.sqrt((n - 2) / (1.0 - rho * rho)), n - 2)


# ------------------------------------------------------------------ intervals and exact tests
# The card's verdicts are tests on independent items (texts, windows, haystacks, passkeys, random
# draws; DESIGN.md principle 8). These are the primitives they share, each bounded to its
# quantity's range: Wilson for a proportion, Newcombe's hybrid score for a difference of two
# (unpaired: method 10 of Newcombe 1998a; paired: method 10 of Newcombe 1998b), exact binomial
# tails, the exact McNemar / sign test for paired binary outcomes, randomization p-values with the
# +1 of Phipson and Smyth, and a percentile bootstrap over whatever the caller calls an item.

Z95 = 1.959963984540054


def normal_quantile(p: float) -> float:
    """The standard normal's p-quantile (``statistics.NormalDist``)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


def t_quantile(df: int, two_sided: float = 0.05) -> float:
    """The t value with two-sided tail ``two_sided`` (bisection on ``t_two_sided_p``)."""
    lo, hi = 0.0, 1000.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > two_sided else (lo, mid)
    return (lo + hi) / 2


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the proportion k / n, inside [0, 1]; (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p1 - p2 for two independent proportions, inside [-1, 1]."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p1 - p2
    lo = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, lo), min(1.0, hi)


def newcombe_paired(both: int, only_first: int, only_second: int, neither: int, z: float = Z95
                    ) -> tuple[float, float]:
    """Newcombe's score interval of p1 - p2 for paired binary outcomes (each item scored under both
    conditions: ``both`` items succeed in both, ``only_first`` in the first only, ...), inside [-1, 1]."""
    a, b, c, d = both, only_first, only_second, neither
    n = a + b + c + d
    if n == 0:
        return -1.0, 1.0
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, z)
    l2, u2 = wilson(a + c, n, z)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0 if denom == 0 else (a * d - b * c) / math.sqrt(denom)
    diff = p1 - p2
    lo = diff - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    hi = diff + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, lo), min(1.0, hi)


def binom_tail(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed exactly in log space."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
            + (n - i) * math.log1p(-p) for i in range(k, n + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def binomial_test(k: int, n: int, p: float = 0.5, alternative: str = "greater") -> float:
    """Exact binomial p-value of k successes in n trials against success probability ``p``:
    ``greater`` P(X >= k), ``less`` P(X <= k), ``two-sided`` twice the smaller tail (at most 1)."""
    if n == 0:
        return 1.0
    upper = binom_tail(k, n, p)
    lower = 1.0 - binom_tail(k + 1, n, p)
    if alternative == "greater":
        return upper
    if alternative == "less":
        return lower
    return min(1.0, 2 * min(upper, lower))


def mcnemar_exact(only_first: int, only_second: int, alternative: str = "greater") -> float:
    """Exact McNemar test (a sign test on the discordant pairs) that the first condition succeeds
    more often than the second (``greater``), less, or either way (``two-sided``)."""
    return binomial_test(only_first, only_first + only_second, 0.5, alternative)


def randomization_p(observed: float, null: Sequence[float], alternative: str = "less") -> float:
    """(1 + #{null draws at least as extreme}) / (1 + n): a valid p-value from n exchangeable draws;
    never below 1 / (n + 1)."""
    if alternative == "less":
        hits = sum(1 for x in null if x <= observed)
    elif alternative == "greater":
        hits = sum(1 for x in null if x >= observed)
    else:
        centre = sum(null) / len(null) if null else 0.0
        hits = sum(1 for x in null if abs(x - centre) >= abs(observed - centre))
    return (1 + hits) / (1 + len(null))


def bootstrap(items: Sequence, statistic: Callable[[list], float | None], n_boot: int = 2000, seed: int = 0,
              level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic(items)`` resampling whole items (the
    independent unit: a text, a window, a haystack) with replacement; None with fewer than two
    items or when the statistic is undefined on every resample. ``statistic`` takes a list of
    items and returns a float (or None, skipped)."""
    items = list(items)
    if len(items) < 2:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(items), len(items))
        v = statistic([items[i] for i in pick])
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            values.append(float(v))
    if not values:
        return None
    tail = (1 - level) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def mde(se: float, alpha: float = 0.05, power: float = 0.8, sides: int = 1) -> float:
    """The smallest true effect a test at level ``alpha`` detects with probability ``power`` when its
    estimate has standard error ``se`` (normal approximation): (z_{1-alpha/sides} + z_power) se."""
    return (normal_quantile(1 - alpha / sides) + normal_quantile(power)) * se


def one_sample_t(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, its SE, two-sided p of mean = 0) for independent ``values`` (Student's t, n - 1 df);
    p = 1 for fewer than two values or zero spread with mean 0, 0 for zero spread otherwise."""
    v = [float(x) for x in values]
    n = len(v)
    if n < 2:
        return (v[0] if v else math.nan), math.nan, 1.0
    m = sum(v) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    se = sd / math.sqrt(n)
    if se == 0:
        return m, 0.0, 1.0 if m == 0 else 0.0
    return m, se, t_two_sided_p(m / se, n - 1)


def sign_flip_p(diffs: Sequence[float], alternative: str = "greater", n_draws: int = 9999, seed: int = 0) -> float:
    """Paired permutation (sign-flip) p-value of the mean of paired differences ``diffs`` [n] (one per
    independent item): under the null each difference is as likely to have either sign. Exact (all
    2^n sign patterns, the observed one included) when 2^n <= n_draws + 1, else (1 + hits) /
    (1 + n_draws) over ``n_draws`` seeded random patterns (``randomization_p``'s rule). ``greater``:
    the mean is above 0; ``less``; ``two-sided``.
    With differences of +-1 and 0 it is the exact sign test (McNemar's on the discordant items)."""
    d = np.asarray([float(x) for x in diffs], dtype=np.float64)
    n = len(d)
    if n == 0:
        return 1.0
    observed = float(d.sum())
    if 2 ** n <= n_draws + 1:
        codes = np.arange(2 ** n)[:, None] >> np.arange(n)[None, :] & 1  # [2^n, n] every sign pattern
        null = ((1 - 2 * codes) * d[None, :]).sum(axis=1)
        eps = 1e-9 * max(1.0, float(np.abs(d).sum()))
        if alternative == "greater":
            return float(np.mean(null >= observed - eps))
        if alternative == "less":
            return float(np.mean(null <= observed + eps))
        return float(np.mean(np.abs(null) >= abs(observed) - eps))
    signs = np.random.default_rng(seed).integers(0, 2, size=(n_draws, n)) * 2.0 - 1.0  # [n_draws, n]
    null = signs @ d  # [n_draws]
    eps = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if alternative == "greater":
        hits = int(np.sum(null >= observed - eps))
    elif alternative == "less":
        hits = int(np.sum(null <= observed + eps))
    else:
        hits = int(np.sum(np.abs(null) >= abs(observed) - eps))
    return (1 + hits) / (1 + n_draws)  # as randomization_p (the null is symmetric about 0)


# ------------------------------------------------------------------ summaries of bootstrap draws and samples
# Moved here from the findings (issue 34): the resampled mean of the needle and RULER lines, Holm's
# procedure, the pooled two-proportion z, and the SD, percentile interval and quartiles of a sample.


def mean_resamples(values: Sequence[float], rng: np.random.Generator, n_boot: int = 2000) -> np.ndarray:
    """[n_boot] means of ``n_boot`` resamples (with replacement, one ``rng.integers`` call) of
    ``values`` [n >= 2], each value's deviation from the mean scaled by sqrt(n / (n - 1)) first, so
    that the variance of the resampled mean is the unbiased s^2 / n rather than (n - 1) s^2 / n^2
    (few items: a handful of haystacks, or RULER samples per task)."""
    x = np.asarray(values, dtype=np.float64)  # [n]
    x = x.mean() + (x - x.mean()) * math.sqrt(len(x) / (len(x) - 1))
    return x[rng.integers(0, len(x), (n_boot, len(x)))].mean(axis=1)  # [n_boot]


def bootstrap_mean(values: Sequence[float], n_boot: int = 2000, seed: int = 0,
                   bounds: tuple[float, float] = (-math.inf, math.inf)) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of ``values`` (``mean_resamples``, seeded),
    clipped to ``bounds`` (the range of the values); ``bounds`` itself below two values."""
    if len(values) < 2:
        return bounds
    lo, hi = np.quantile(mean_resamples(values, np.random.default_rng(seed), n_boot), [0.025, 0.975])
    return max(bounds[0], float(lo)), min(bounds[1], float(hi))


def holm(p: dict[str, float], alpha: float = 0.05) -> set[str]:
    """The keys of ``p`` (one p-value per hypothesis) that Holm's step-down procedure rejects at
    family-wise level ``alpha``: the smallest p below alpha / m, the next below alpha / (m - 1), ...,
    stopping at the first that is not."""
    order = sorted(p, key=lambda k: p[k])
    out = set()
    for i, k in enumerate(order):
        if p[k] >= alpha / (len(order) - i):
            break
        out.add(k)
    return out


def pooled_two_proportion_z(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float | None]:
    """(mean of ``first``, mean of ``second``, z) of the pooled, unpaired two-proportion z test on
    0/1 outcomes; z is None when the pooled variance is 0. Valid only for independent outcomes."""
    n1, n2 = len(first), len(second)
    p1, p2 = sum(first) / n1, sum(second) / n2
    pooled = (sum(first) + sum(second)) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return p1, p2, None if se == 0 else (p1 - p2) / se


def _finite(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """The finite entries of ``values`` (None dropped) as float64 [m]."""
    v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
    return v[np.isfinite(v)]


def sample_sd(values: Sequence[float | None] | np.ndarray) -> float | None:
    """The sample standard deviation (n - 1 in the denominator) of the finite ``values``; None with
    fewer than two."""
    v = _finite(values)
    return float(np.std(v, ddof=1)) if len(v) > 1 else None


def percentile_interval(values: Sequence[float | None] | np.ndarray, tail: float = 0.025
                        ) -> tuple[float, float] | None:
    """(the ``tail`` and 1 - ``tail`` quantiles) of the finite ``values`` (bootstrap draws, say);
    None when there are none."""
    v = _finite(values)
    if not len(v):
        return None
    lo, hi = np.quantile(v, [tail, 1 - tail])
    return float(lo), float(hi)


def quartiles(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(first quartile, median, third quartile) of ``values`` (linear interpolation); None when empty."""
    if not len(values):
        return None
    q = np.quantile(np.asarray(values, dtype=float), [0.25, 0.5, 0.75])
    return float(q[0]), float(q[1]), float(q[2])
