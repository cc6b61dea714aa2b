"""Sequential tests of a bounded mean, valid at any stopping time (testing by betting).

Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86(1),
2024; Shafer, "Testing by betting", JRSS-A 184(2), 2021 (test martingales); Ville's inequality
(Ville 1939). DESIGN.md principle 10: samples are taken in rounds and stop when the test decides.

Items x_1, x_2, ... (haystacks, windows, passkeys: independent, or at least each with conditional
mean at most m0 given the earlier ones under H0) lie in a known range [lo, hi]. To test
H0: E[x] <= m0 against E[x] > m0 a gambler starts with wealth K_0 = 1 and at item t stakes a
fraction lambda_t of it on x_t - m0, chosen from x_1 .. x_{t-1} only (predictable):

    K_t = prod_{i <= t} (1 + lambda_i (x_i - m0)),   0 <= lambda_i <= CAP / (m0 - lo),  CAP < 1,

so every factor is at least 1 - CAP > 0 and K stays positive. Under H0 each factor has conditional
mean 1 + lambda_i (E[x_i | past] - m0) <= 1, so K is a nonnegative supermartingale with K_0 = 1 and
Ville's inequality gives P(sup_t K_t >= 1 / alpha) <= alpha. The test rejects the first time K
reaches 1 / alpha, and because the bound holds for the supremum over all t it holds at every
stopping time: look after every item, after every round, stop when it decides or when minutes run
out, add items to an undecided line later; the type-I error stays at most alpha. ``alternative=
"less"`` tests H0: E[x] >= m0 the same way on -x (range [-hi, -lo], null value -m0).

The betting rule (``bets``) is a mixture of constant bets, the "diversified Kelly" idea of the
paper and Cover's universal portfolio: K_t = sum_g w_g prod_{i <= t} (1 + l_g y_i) over a grid of
``N_BETS`` bets l_g on the normalised item y = (x - m0) / (m0 - lo) in [-1, (hi - m0) / (m0 - lo)],
the midpoints of (0, CAP] with CAP = 0.9 and prior weights w_g proportional to l_g. Each constant-bet
wealth is a test supermartingale and a fixed average of them is one too, so validity needs no
argument about the rule; written as a single gambler it bets the wealth-weighted mean of the grid,
lambda_t = sum_g w_g K_{t-1,g} l_g / sum_g w_g K_{t-1,g}, predictable and inside [0, CAP). Since
log K_t >= log w_g + log K_{t,g} for every g, it never trails the best bet of the grid in hindsight
by more than log(1 / that bet's weight), whatever the effect: nothing is tuned to one alternative.
Its first bet is the prior mean 2 CAP / 3 = 0.6, so a collapse (every haystack lost beyond the
training length) decides within 7-8 items, where rules that start at 0 and learn the bet (the
paper's aGRAPA, online Newton step) need a little longer. Weights rising with the bet were chosen
because the paper's effects are large per item; simulated on this module's item models (2,000
sequences, n at 80% power, the test looked at after every item), with aGRAPA (truncation 0.75) in
brackets: the 0.20 drop below, 35 (34-38); the 0.25 dip, 98-102 (116-123); a 0.10 drop, 83 (84).
A uniform prior on the bet does better only on small effects (a 0.10 dip on one cell: 632 against
726) and needs 9 items for the reverse collapse at 0.025.

When to prefer it to a fixed-n test (``core.stats``' exact McNemar, sign-flip, t): whenever n is not
fixed before the data. A fixed-n test is valid only at its planned n: tested after every item and
stopped at the first p < 0.05, the one-sided t test rejects true nulls at the boundary in 0.27-0.31
of the sequences of 200 (0.68 for skewed items), the exact McNemar test in 0.14 (``tests/
test_sequential.py``). This test pays for the freedom with power. At the long-sequence paper's
effects (``binary_difference_model``, 2,000 simulated sequences each, 80% power):

* a 0.20 drop of the per-haystack accuracy over 7 depth cells (0.5 at L -> 0.3 at 2L, cell
  correlation 0.3, item sd 0.31) at 5%: 35-36 haystacks against 14 for the fixed-n one-sided t
  test (33 vs 12 for independent cells, 39 vs 21 when every haystack is lost or kept whole). The
  ratio is large because the items' spread is small for their range: no bet may exceed
  1 / (m0 - lo), lest one item at -1 ruin the gambler, while the t test scales to the variance;
* a 0.25 dip, one cell per haystack (0.55 at an end, 0.30 in the middle, independent: discordance
  0.52) at Holm's first step 0.025: 100-102 against 69 for the fixed-n exact McNemar test (65
  vs 50 at discordance 0.385, 39 vs 31 at 0.25).

So planned for 80% power it needs 1.3-2.8 times the fixed n, but it stops as soon as the evidence
is in rather than always spending the planned n: the median haystack at which it decides is 28
for that drop and 54 for that dip (below the fixed 69), 14 and 16 at twice the effects, 7-8 for a
collapse; an undecided line can be topped up, and minutes go to the lines still open.

The anytime p-value p = min(1, 1 / sup_{s <= t} K_s) satisfies P(p_t <= a for some t) <= a for
every a (Ville again), so the p-value read at any stopping time is a valid p-value; Holm's
procedure needs nothing more of its inputs (no independence), so the two ends of the needle grid,
each with its own wealth, go into ``core.stats.holm`` unchanged, even when the stopping rule looks
at both ends and they share the middle cell.

Power and planning (``power``, ``needed_n``) are simulation: draw sequences from an item model of
the alternative (``binary_difference_model``, ``paired_binary_model`` or any ``sample(rng, shape)``),
monitor after every item, and count the sequences decided by n. Numpy only; nothing above
``core`` is imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CAP = 0.9  # the largest fraction of wealth ever staked, as a fraction of 1 / (m0 - lo): factors >= 1 - CAP
N_BETS = 16  # grid points of the mixture; 8 to 64 give the same needed n on the paper's effects
BET_GRID = CAP * (np.arange(N_BETS) + 0.5) / N_BETS  # [G] constant bets on the normalised item y
LOG_PRIOR = np.log(BET_GRID / BET_GRID.sum())  # [G] log prior weights, proportional to the bet
ALTERNATIVES = ("greater", "less")
FIRST_BLOCK = 32  # items per sequence drawn at once in simulations: 32, 32, 64, ..., then MAX_BLOCK
MAX_BLOCK = 512

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
"""``sample(rng, shape) -> items of that shape``, independent and identically distributed: shape
(n,) is one sequence, (n_sim, n) is n_sim sequences."""


# ------------------------------------------------------------------ checks and scaling


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}.")


def _sequence(xs: Sequence[float] | np.ndarray) -> np.ndarray:
    """``xs`` as a float64 [n]; ValueError for anything but one sequence of items."""
    x = np.asarray(xs, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"the items must be one sequence (a 1-d array), got shape {x.shape}.")
    return x


def _oriented(m0: float, lo: float, hi: float, alternative: str) -> tuple[float, float, float, float]:
    """(sign, m0, lo, hi) of the "greater" test equivalent to ``alternative`` on sign * x."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}.")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < m0 < hi):
        raise ValueError(f"the null mean m0 = {m0} must lie strictly inside the finite range ({lo}, {hi}).")
    return (1.0, m0, lo, hi) if alternative == "greater" else (-1.0, -m0, -hi, -lo)


def _normalised(xs: Sequence[float] | np.ndarray, m0: float, lo: float, hi: float, alternative: str) -> np.ndarray:
    """Items [..., n] -> y = (x - m0) / (m0 - lo) of the equivalent "greater" test, in
    [-1, (hi - m0) / (m0 - lo)]; ValueError for an item that is not finite or lies outside [lo, hi]
    (beyond a rounding tolerance of 1e-9 (hi - lo), clipped)."""
    sign, m0, lo, hi = _oriented(m0, lo, hi, alternative)
    x = np.asarray(xs, dtype=np.float64) * sign
    if not np.all(np.isfinite(x)):
        raise ValueError("the items must be finite numbers; drop or score the missing ones first.")
    tol = 1e-9 * (hi - lo)
    if x.size and (x.min() < lo - tol or x.max() > hi + tol):
        bad = float(sign * (x.min() if x.min() < lo - tol else x.max()))
        raise ValueError(f"item {bad} lies outside the declared range [{min(sign * lo, sign * hi)}, "
                         f"{max(sign * lo, sign * hi)}]; declare the range the items can take.")
    return (np.clip(x, lo, hi) - m0) / (m0 - lo)


# ------------------------------------------------------------------ the wealth


def _log_mixture(y: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log wealth of the mixture after each item of y [s, n], each constant-bet wealth starting
    from ``start`` [s, G] (log, weights not included): (log K [s, n], the per-bet log wealth after
    the last item [s, G])."""
    s, n = y.shape
    out = np.full((s, n), -np.inf)  # [s, n]
    end = start.copy()  # [s, G]
    for g, (bet, log_w) in enumerate(zip(BET_GRID, LOG_PRIOR)):
        path = start[:, g:g + 1] + np.cumsum(np.log1p(bet * y), axis=1)  # [s, n]
        np.logaddexp(out, log_w + path, out=out)
        if n:
            end[:, g] = path[:, -1]
    return out, end


def log_wealth(xs: Sequence[float] | np.ndarray, m0: float, lo: float, hi: float,
               alternative: str = "greater") -> np.ndarray:
    """[n] log K_t after each item of ``xs`` [n] for the test of E[x] <= m0 (``greater``) or
    E[x] >= m0 (``less``) with items in [lo, hi] (module docstring); K_0 = 1 is not included."""
    y = _normalised(_sequence(xs), m0, lo, hi, alternative).reshape(1, -1)  # [1, n]
    return _log_mixture(y, np.zeros((1, N_BETS)))[0][0]


def wealth(xs: Sequence[float] | np.ndarray, m0: float, lo: float, hi: float,
           alternative: str = "greater") -> np.ndarray:
    """[n] the wealth path K_1 .. K_n (``log_wealth`` exponentiated: inf past about 1e308, never
    <= 0 because each constant-bet wealth loses at most a factor 1 - CAP per item)."""
    with np.errstate(over="ignore"):
        return np.exp(log_wealth(xs, m0, lo, hi, alternative))


def bets(xs: Sequence[float] | np.ndarray, m0: float, lo: float, hi: float,
         alternative: str = "greater") -> np.ndarray:
    """[n] the mixture written as one gambler: lambda_t on the item's own scale, so that
    K_t = K_{t-1} (1 + lambda_t (x_t - m0)) (for ``less``: (1 + lambda_t (m0 - x_t))). Each is the
    wealth-weighted mean of the grid's bets after items 1 .. t-1 (predictable) and lies in
    [0, CAP / (m0 - lo)) (``less``: [0, CAP / (hi - m0))); the first is the prior mean."""
    _, m0_, lo_, _ = _oriented(m0, lo, hi, alternative)
    y = _normalised(_sequence(xs), m0, lo, hi, alternative)  # [n]
    before = np.vstack([np.zeros(N_BETS), np.cumsum(np.log1p(np.outer(y, BET_GRID)), axis=0)[:-1]])  # [n, G]
    logits = LOG_PRIOR + before[: len(y)]  # [n, G] log w_g K_{t-1,g}
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))  # [n, G]
    return (weights @ BET_GRID) / weights.sum(axis=1) / (m0_ - lo_)


# ------------------------------------------------------------------ the test


@dataclass(frozen=True)
class SequentialResult:
    """A sequential test read after ``n`` items: ``wealth`` K_n (an e-value), ``max_wealth``
    sup_{t <= n} K_t (K_0 = 1 included), ``decided`` whether it reached 1 / alpha, ``decided_at``
    the first item at which it did (None if not), and ``p_anytime`` = min(1, 1 / max_wealth), a
    p-value valid at any stopping time (module docstring), fit for Holm's procedure."""

    n: int
    wealth: float
    max_wealth: float
    decided: bool
    decided_at: int | None
    p_anytime: float
    alpha: float
    alternative: str


def test_mean(xs: Sequence[float] | np.ndarray, m0: float, lo: float, hi: float, alpha: float = 0.05,
              alternative: str = "greater") -> SequentialResult:
    """The anytime-valid test of H0: E[x] <= m0 against E[x] > m0 (``greater``) or of E[x] >= m0
    against E[x] < m0 (``less``) on the items ``xs`` [n] in [lo, hi], in the order they came
    (module docstring). Decided the first time the wealth reaches 1 / alpha; the type-I error is
    at most alpha however the decision to stop (or to add items) was made. Empty input: not
    decided, p = 1."""
    _check_alpha(alpha)
    logs = log_wealth(xs, m0, lo, hi, alternative)  # [n]
    crossed = np.flatnonzero(logs >= math.log(1.0 / alpha))
    top = max(0.0, float(logs.max())) if len(logs) else 0.0
    with np.errstate(over="ignore"):
        return SequentialResult(
            n=len(logs), wealth=float(np.exp(logs[-1])) if len(logs) else 1.0, max_wealth=float(np.exp(top)),
            decided=bool(len(crossed)), decided_at=int(crossed[0]) + 1 if len(crossed) else None,
            p_anytime=min(1.0, math.exp(-top)), alpha=alpha, alternative=alternative)


test_mean.__test__ = False  # type: ignore[attr-defined]  # a library function, not a pytest test


# ------------------------------------------------------------------ power and planning by simulation


def _blocks(n: int) -> list[tuple[int, int]]:
    """[(start, stop)] item ranges of the simulation blocks covering 1 .. n: 32, 32, 64, 128, ...,
    then ``MAX_BLOCK`` each. Block j is always drawn whole from its own seeded stream, so a
    sequence's first items do not depend on how far it is simulated."""
    out, start = [], 0
    while start < n:
        stop = start + min(MAX_BLOCK, max(FIRST_BLOCK, start))
        out.append((start, stop))
        start = stop
    return out


def _decision_times(sample: Sampler, n_max: int, m0: float, lo: float, hi: float, alpha: float, n_sim: int,
                    seed: int, alternative: str, target: float | None = None) -> np.ndarray:
    """[n_sim] the item at which each simulated sequence first decides, 0 if not by ``n_max``. With
    ``target`` it stops after the first block by whose end that fraction has decided (the later
    decisions are then 0)."""
    _check_alpha(alpha)
    if n_sim < 1:
        raise ValueError(f"n_sim must be at least 1, got {n_sim}.")
    threshold = math.log(1.0 / alpha)
    state = np.zeros((n_sim, N_BETS))  # [n_sim, G] log wealth of each constant bet
    times = np.zeros(n_sim, dtype=np.int64)  # [n_sim]
    for j, (start, stop) in enumerate(_blocks(n_max)):
        items = np.asarray(sample(np.random.default_rng([seed, j]), (n_sim, stop - start)), dtype=np.float64)
        if items.shape != (n_sim, stop - start):
            raise ValueError(f"the item model returned shape {items.shape} for shape {(n_sim, stop - start)}.")
        y = _normalised(items[:, : min(stop, n_max) - start], m0, lo, hi, alternative)  # [n_sim, block]
        logs, state = _log_mixture(y, state)  # [n_sim, block]
        hit = logs >= threshold  # [n_sim, block]
        first = np.where(hit.any(axis=1), hit.argmax(axis=1) + start + 1, 0)  # [n_sim]
        times = np.where(times > 0, times, first)
        if target is not None and np.mean(times > 0) >= target:
            break
    return times


def decision_times(sample: Sampler, n_max: int, m0: float, lo: float, hi: float, alpha: float = 0.05,
                   n_sim: int = 2000, seed: int = 0, alternative: str = "greater") -> np.ndarray:
    """[n_sim] for ``n_sim`` sequences drawn from ``sample`` (seeded by ``seed`` >= 0, deterministic),
    the item at which ``test_mean`` first decides when looked at after every item, 0 when it has not
    by ``n_max``."""
    return _decision_times(sample, n_max, m0, lo, hi, alpha, n_sim, seed, alternative)


def power(sample: Sampler, n_max: int, m0: float, lo: float, hi: float, alpha: float = 0.05, n_sim: int = 2000,
          seed: int = 0, alternative: str = "greater") -> float:
    """The fraction of ``n_sim`` simulated sequences of items from ``sample`` (the alternative) that
    the test decides by ``n_max`` items, monitoring after every item (``decision_times``). Under a
    null it is the type-I error under optional stopping, at most alpha up to simulation error."""
    return float(np.mean(decision_times(sample, n_max, m0, lo, hi, alpha, n_sim, seed, alternative) > 0))


def needed_n(sample: Sampler, m0: float, lo: float, hi: float, alpha: float = 0.05, target: float = 0.8,
             n_cap: int = 4096, n_sim: int = 2000, seed: int = 0, alternative: str = "greater") -> int | None:
    """The smallest n at which the test, monitored after every item, has decided in a fraction
    ``target`` of ``n_sim`` sequences simulated from ``sample`` (seeded, deterministic); None if not
    by ``n_cap``. One pass: the sequences are extended block by block (``_blocks``) until that
    fraction has decided, and n is read off the decision times, so it is exactly
    ``power(sample, n, ..., seed=seed) >= target > power(sample, n - 1, ..., seed=seed)``."""
    if not 0.0 < target < 1.0:
        raise ValueError(f"target power must lie in (0, 1), got {target}.")
    times = _decision_times(sample, n_cap, m0, lo, hi, alpha, n_sim, seed, alternative, target)
    decided = np.sort(times[times > 0])  # [k]
    need = math.ceil(target * n_sim - 1e-9)  # sequences that must have decided
    return int(decided[need - 1]) if len(decided) >= need else None


# ------------------------------------------------------------------ item models for planning


def _shape(shape: int | tuple[int, ...]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)


def binary_difference_model(p_first: float, p_second: float, k_cells: int = 1, correlation: float = 0.0) -> Sampler:
    """Items = per haystack, the mean over its ``k_cells`` cells (depths) of (cell at the first
    condition - cell at the second), each cell 1 (retrieved) or 0, in [-1, 1] with mean exactly
    p_first - p_second. Cells of one haystack are correlated by a simple mixture: with probability
    ``correlation`` the haystack is retrieved or lost as a whole (one uniform u decides every cell:
    retrieved at a condition iff u < its rate, so at both when u < min), otherwise its 2 k cells are
    independent Bernoulli(p_first) and Bernoulli(p_second). Two cells of one condition then have
    correlation exactly ``correlation``. ``k_cells`` = 1 is the paired-binary (McNemar) case, with
    discordance correlation |p1 - p2| + (1 - correlation) (p1 (1 - p2) + p2 (1 - p1)).
    The long-sequence paper's drop: k = 7 depths at L and 2L; its dip: k = 1, an end vs the middle."""
    for name, p in (("p_first", p_first), ("p_second", p_second), ("correlation", correlation)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {p}.")
    if k_cells < 1:
        raise ValueError(f"k_cells must be at least 1, got {k_cells}.")

    def sample(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        shape = _shape(shape)
        whole = rng.random(shape) < correlation  # [*shape] haystacks decided as a whole
        u = rng.random(shape)  # [*shape]
        cells = (rng.binomial(k_cells, p_first, shape) - rng.binomial(k_cells, p_second, shape)) / k_cells
        return np.where(whole, (u < p_first).astype(np.float64) - (u < p_second), cells)

    return sample


def paired_binary_model(diff: float, discordance: float) -> Sampler:
    """Items in {-1, 0, 1}: one binary cell per item at two conditions (the first minus the second),
    discordant with probability ``discordance``, +1 with probability (discordance + diff) / 2 and
    -1 with (discordance - diff) / 2: the parametrisation of ``core.mcnemar.mcnemar_power``, so the
    fixed-n exact McNemar test and this one can be planned on the same alternative."""
    if not (0.0 <= discordance <= 1.0 and abs(diff) <= discordance):
        raise ValueError(f"need |diff| <= discordance <= 1, got diff {diff} and discordance {discordance}.")
    up = (discordance + diff) / 2

    def sample(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        u = rng.random(_shape(shape))  # [*shape]
        return (u < up).astype(np.float64) - ((u >= up) & (u < discordance))

    return sample
