"""The exact power of the one-sided exact McNemar test (``core.stats.mcnemar_exact``, the sign test on
the discordant pairs) and the smallest difference of paired success rates it detects at a given n
(``mcnemar_power``, ``mcnemar_mde``), by enumerating every outcome. The long-sequence paper's needle
grid (Section 4, Tables 2-3) pairs cells over haystacks: the profile sizes that grid with this power
(``profile.suite``), and the sequential test of ``core.sequential`` is planned on the same alternative.
No torch, no scipy.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ctxlens.core.stats import binom_tail


@functools.lru_cache(maxsize=256)
def _mcnemar_critical(n: int, alpha: float) -> tuple[int | None, ...]:
    """[n + 1]: for D discordant pairs, the smallest count k with P(Binomial(D, 1/2) >= k) <= alpha
    (None when no k is)."""
    out: list[int | None] = []
    for D in range(n + 1):
        start = out[-1] if out and out[-1] is not None else 0  # the critical count never falls as D grows
        out.append(next((k for k in range(start, D + 1) if binom_tail(k, D, 0.5) <= alpha), None))
    return tuple(out)


def _binom_pmf(n: int, p: float) -> np.ndarray:
    """[n + 1] Binomial(n, p) probabilities, in log space."""
    k = np.arange(n + 1)
    if p <= 0.0 or p >= 1.0:
        return (k == (0 if p <= 0.0 else n)).astype(np.float64)
    logc = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(n + 1)])
    return np.exp(logc + k * math.log(p) + (n - k) * math.log1p(-p))


def mcnemar_power(n: int, diff: float, discordance: float, alpha: float = 0.05) -> float:
    """Exact power of the one-sided exact McNemar test (``mcnemar_exact``, level ``alpha``) on ``n``
    independent pairs when the first condition's success rate exceeds the second's by ``diff`` and
    a pair is discordant with probability ``discordance`` (taken as at least ``diff``): the number D
    of discordant pairs is Binomial(n, discordance), and each is (first only) with probability
    (discordance + diff) / (2 discordance)."""
    psi = min(1.0, max(float(discordance), float(diff)))
    if n <= 0 or psi <= 0:
        return 0.0
    q = min(1.0, (psi + diff) / (2 * psi))
    crit = _mcnemar_critical(n, alpha)
    pd = _binom_pmf(n, psi)
    total = 0.0
    for D in range(n + 1):
        if crit[D] is not None and pd[D] > 0:
            total += float(pd[D]) * float(_binom_pmf(D, q)[crit[D]:].sum())
    return total


def mcnemar_mde(n: int, discordance: float = 0.0, alpha: float = 0.05, power: float = 0.8, step: float = 0.01
                ) -> float | None:
    """The smallest difference of paired success rates (on a grid of ``step``) that the one-sided exact
    McNemar test on ``n`` pairs detects with probability ``power`` (``mcnemar_power``), the pairs
    discordant with probability max(``discordance``, difference); None when not even a difference of
    1 is. Bisection on the grid: the power rises with the difference."""
    top = int(round(1 / step))
    if mcnemar_power(n, 1.0, discordance, alpha) < power:
        return None
    lo, hi = 0, top  # power(lo * step) < power <= power(hi * step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mcnemar_power(n, mid * step, discordance, alpha) >= power else (mid, hi)
    return round(hi * step, 10)
