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
from collections.abc import Sequence

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
