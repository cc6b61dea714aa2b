"""Criteria for the head-masking part of the RoPE-distance paper's Positional Heads finding, fixed
before any run (no torch): the test, its interval, and its power and design.

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"):

- Section 4.3.2, Figures 8-9: masking the top heads hurts passkey retrieval more than masking as
  many random heads, without a general collapse of perplexity. ctxlens's test (``masking_test``):
  per fraction, the top heads' passkey accuracy against the random draws' on the same passkeys,
  randomization p = (1 + #draws at least as low) / (1 + draws); "hurts more" when p <= 0.05 at
  every fraction (an intersection-union test, valid at 5% without correction) and the top heads'
  perplexity is not above every random draw's (Figure 9's check; above all of them: "general
  collapse", not specific). Its interval (``masking_interval``) is a two-way bootstrap over the
  passkeys and the random draws, both being samples; its power (``masking_power``) is simulated
  from the draws' mean and between-draw spread; where more than 5% of random sets already score as
  low as the top set would after the stated drop, no design sees it (``reachable``), and the line
  says undecided, not "no".

The Positional Heads themselves (ranking, presence test, control) are ``ctxlens.findings.positional``;
its ``verdict`` joins the two into the findings table's criterion.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ctxlens.core.stats import betainc, randomization_p
from ctxlens.findings.positional import ALPHA

MIN_DRAWS = 19  # randomization p >= 1 / (draws + 1): 19 draws can reach 0.05
MIN_PASSKEYS = 30  # paired passkeys per condition (the design floor)
Spreads = Sequence[tuple[float, float]]  # per fraction: the random draws' (mean, between-draw SD)
MIN_DROP = 0.3  # stated minimal effect: top heads' passkey accuracy below the random draws' mean, at every fraction


# ------------------------------------------------------------------ head masking


def _pooled(rows: list[dict]) -> float | None:
    """Accuracy pooled over passkey rows (weighted by their probe counts); a flagged row (a length
    RULER's passkey does not fit, no score) counts nothing."""
    rows = [r for r in rows if r.get("score") is not None]
    n = sum(r["n"] for r in rows)
    return None if n == 0 else sum(r["score"] * r["n"] for r in rows) / n


def _cells(rows: list[dict], task: str) -> dict[tuple, list[dict]]:
    by = defaultdict(list)
    for r in rows:
        if r.get("task") == task:
            by[(r["condition"], float(r["fraction"]), int(r["draw"]))].append(r)
    return by


def _ppl(rows: list[dict]) -> float | None:
    """Perplexity of a condition's windows (exp of the mean NLL over its rows, weighted by windows)."""
    rows = [r for r in rows if r.get("nll") is not None]
    n = sum(r.get("n", 1) for r in rows)
    return None if not n else math.exp(sum(r["nll"] * r.get("n", 1) for r in rows) / n)


def _hits(rows: list[dict]) -> dict | None:
    """{(length, depth, probe): 0/1} of per-passkey rows; None when the rows pool several passkeys."""
    if any("probe" not in r or r.get("n") != 1 for r in rows if r.get("score") is not None):
        return None
    return {(r["length"], r.get("depth"), r["probe"]): float(r["score"]) for r in rows if r.get("score") is not None}


def masking_summary(mask_rows: list[dict]) -> dict:
    """Per fraction: the top heads' and every random draw's passkey accuracy and perplexity, the
    unmasked ones, the passkeys per condition and the draws (rows of one transform); the design:
    the passkeys' prompt lengths (``lengths``) and the unmasked perplexity's windows (``windows``,
    of ``window_lengths`` tokens)."""
    pk, pp = _cells(mask_rows, "passkey"), _cells(mask_rows, "perplexity")
    none = pk.get(("none", 0.0, 0), [])
    none_ppl = [r for r in pp.get(("none", 0.0, 0), []) if r.get("nll") is not None]
    out = {"none": _pooled(none), "none_ppl": _ppl(pp.get(("none", 0.0, 0), [])),
           "n_passkeys": sum(r["n"] for r in none if r.get("score") is not None), "fractions": {},
           "lengths": sorted({int(r["length"]) for r in none if r.get("score") is not None and "length" in r}),
           "windows": sum(r.get("n", 1) for r in none_ppl),
           "window_lengths": sorted({int(r["length"]) for r in none_ppl if "length" in r})}
    fractions = sorted({f for c, f, _ in [*pk, *pp] if c != "none"})
    for f in fractions:
        draws = sorted({d for c, fr, d in [*pk, *pp] if c == "random" and fr == f})
        random_acc = [_pooled(pk.get(("random", f, d), [])) for d in draws]
        out["fractions"][str(f)] = {
            "top": _pooled(pk.get(("top", f, 0), [])), "random_draws": random_acc,
            "random_mean": _mean(random_acc), "n_draws": len(draws),
            "top_ppl": _ppl(pp.get(("top", f, 0), [])),
            "random_ppl": [_ppl(pp.get(("random", f, d), [])) for d in draws],
            "top_heads": next((r.get("heads") for r in pk.get(("top", f, 0), []) + pp.get(("top", f, 0), [])
                               if r.get("heads") is not None), None),
        }
    return out


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _collapse(s: dict) -> bool | None:
    """The top heads' perplexity above every random draw's (Figure 9's check fails); None unmeasured."""
    ppl = [p for p in s["random_ppl"] if p is not None]
    if s["top_ppl"] is None or not ppl:
        return None
    return s["top_ppl"] > max(ppl)


def masking_test(mask_rows: list[dict], alpha: float = ALPHA) -> dict:
    """ctxlens's test of Section 4.3.2 / Figure 8 on ``head-masking`` rows of one transform (see
    the module docstring). Per fraction: effect (top minus the random draws' mean accuracy), the
    randomization p (one-sided, lower), the perplexity check. ``verdict``: "hurts" (p <= alpha at
    every fraction, no collapse), "collapse" (p <= alpha at every fraction, but some top set's
    perplexity is above every random draw's), "no" (some fraction p > alpha), "untestable" (fewer
    than ``MIN_DRAWS`` draws: p cannot reach alpha), "nothing" (the unmasked model retrieves no
    passkey), "absent" (no passkey rows). Its power: ``masking_plan``."""
    s = masking_summary(mask_rows)
    fr = s["fractions"]
    for v in fr.values():
        draws = [d for d in v["random_draws"] if d is not None]
        v["effect"] = None if v["top"] is None or not draws else v["top"] - sum(draws) / len(draws)
        v["p"] = None if v["top"] is None or not draws else randomization_p(v["top"], draws, "less")
        v["collapse"] = _collapse(v)
        v["sd_random"] = float(np.std(draws, ddof=1)) if len(draws) > 1 else None
    scored = {f: v for f, v in fr.items() if v["top"] is not None}
    if s["none"] is None or not scored:
        verdict = "absent"
    elif s["none"] == 0:
        verdict = "nothing"
    elif min(v["n_draws"] for v in scored.values()) < MIN_DRAWS:
        verdict = "untestable"
    elif all(v["p"] is not None and v["p"] <= alpha for v in scored.values()):
        verdict = "collapse" if any(v["collapse"] for v in scored.values()) else "hurts"
    else:
        verdict = "no"
    return {**s, "verdict": verdict, "alpha": alpha}


# ------------------------------------------------------------------ head masking: the interval


def paired_outcomes(mask_rows: list[dict], fraction: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(top [passkeys], random [draws, passkeys]): 0/1 outcomes at ``fraction`` on the passkeys that
    every condition scored, in one order (paired); None when the rows do not hold one row per passkey."""
    pk = _cells(mask_rows, "passkey")
    f = float(fraction)
    top = _hits(pk.get(("top", f, 0), []))
    found = [_hits(pk[k]) for k in sorted(pk) if k[0] == "random" and k[1] == f]
    draws = [d for d in found if d is not None]
    if top is None or not draws or len(draws) < len(found):
        return None
    keys = [k for k in top if all(k in d for d in draws)]
    if not keys:
        return None
    return np.array([top[k] for k in keys]), np.array([[d[k] for k in keys] for d in draws])


def two_way_replicates(top: np.ndarray, random: np.ndarray, rng: np.random.Generator, n_boot: int = 2000,
                       resample_draws: bool = True) -> np.ndarray:
    """[boot] bootstrap replicates of top minus the random draws' mean accuracy from top [passkeys] and
    random [draws, passkeys] outcomes. Both are samples: of passkeys, and of random head sets (the
    paper's Section 4.3.2 compares with "randomly sampled" heads), so each replicate resamples the
    passkeys (paired: a resampled passkey keeps its outcome under every condition) and, crossed with
    them, the draws, with replacement (a two-way bootstrap), and takes the top set's mean over the
    resampled passkeys minus the resampled draws' mean over them. ``resample_draws=False`` holds the
    draws fixed (the passkeys-only bootstrap: it leaves the draws' own spread out)."""
    n_keys, n_draws = top.shape[-1], random.shape[0]
    counts = rng.multinomial(n_keys, np.full(n_keys, 1 / n_keys), n_boot)  # [boot, passkeys] times each is drawn
    weights = (rng.multinomial(n_draws, np.full(n_draws, 1 / n_draws), n_boot) if resample_draws
               else np.ones((n_boot, n_draws), dtype=np.int64))  # [boot, draws]
    drawn = (weights @ random) / n_draws  # [boot, passkeys]: the resampled draws' mean outcome per passkey
    return (counts * (top[None, :] - drawn)).sum(axis=1) / n_keys  # [boot]


def two_way_bootstrap(top: np.ndarray, random: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                      resample_draws: bool = True) -> tuple[float, float]:
    """Percentile interval of ``two_way_replicates`` (seeded), inside [-1, 1]. Holding the draws fixed
    (``resample_draws=False``) is too narrow where random head sets differ: on simulated data it covers
    the true effect far less often than 95% (``tests/findings/test_masking_design.py``)."""
    stat = two_way_replicates(top, random, np.random.default_rng(seed), n_boot, resample_draws)
    tail = (1 - level) / 2
    lo, hi = np.quantile(stat, [tail, 1 - tail])
    return max(-1.0, float(lo)), min(1.0, float(hi))


def masking_interval(mask_rows: list[dict], fraction: str, n_boot: int = 2000) -> tuple[float, float] | None:
    """95% two-way bootstrap interval (``two_way_bootstrap``: over passkeys, paired, and over random
    draws) of top minus the random draws' mean accuracy at ``fraction``; None when the rows do not
    hold one row per passkey. Inside [-1, 1]."""
    found = paired_outcomes(mask_rows, fraction)
    return None if found is None or len(found[0]) < 2 else two_way_bootstrap(*found, n_boot=n_boot)


# ------------------------------------------------------------------ head masking: power and design
# ctxlens's test of the rope-distance paper's Section 4.3.2, Figure 8 (the paper states no power).
# The randomization p of a top set against D draws fires only when at most alpha (D + 1) - 1 draws
# score at or below it, so a drop is seen only where the top set falls below nearly every random set.
# The model of the data: each random draw's retrieval rate from a Beta with the draws' mean and
# between-draw SD (``draw_spread``), its accuracy binomial over the passkeys, and the top set's rate
# ``drop`` below the draws' mean; the passkeys independent (pairing them only adds power).

N_SIMS = 2000  # simulated datasets per power estimate (its SE <= 0.011)
POWER = 0.8
DESIGN = ((0.8, 0.08), (0.8, 0.08))  # the planned design's draws per fraction: accuracy 0.8, a modest spread
DRAW_LADDER = (19, 39, 59, 99, 199, 499)  # draws at which a randomization p reaches 0.05 exactly: 20 (k + 1) - 1
MAX_PASSKEYS = 2000
PLANNED_PASSKEYS = 90  # 30 per depth: power 0.815 at MIN_DRAWS and DESIGN (40,000 datasets); 87 the least; tested


def draw_spread(accuracies: list[float], passkeys: int) -> tuple[float, float]:
    """(mean, between-draw SD of the rates) of the random draws' accuracies, each over ``passkeys``
    passkeys: the method of moments with the passkeys' binomial noise taken out (var(accuracy) =
    var(rate) + E[rate (1 - rate)] / passkeys, E[rate (1 - rate)] = mean (1 - mean) - var(rate))."""
    acc = np.asarray([a for a in accuracies if a is not None], dtype=np.float64)  # [draws]
    mean = float(acc.mean())
    var = float(acc.var(ddof=1)) if len(acc) > 1 else 0.0
    if passkeys > 1:
        var = (var - mean * (1 - mean) / passkeys) / (1 - 1 / passkeys)
    return mean, math.sqrt(max(0.0, var))


def beta_shape(mean: float, sd: float) -> tuple[float, float] | None:
    """Beta(a, b) with ``mean`` and ``sd`` (moments; sd capped just below its largest value,
    sqrt(mean (1 - mean)): two spikes at 0 and 1); None when every rate is ``mean`` (sd 0, mean 0 or 1)."""
    most = mean * (1 - mean)
    if sd <= 0 or most <= 0:
        return None
    total = most / min(sd * sd, 0.999 * most) - 1  # a + b
    return mean * total, (1 - mean) * total


def draw_rates(rng: np.random.Generator, mean: float, sd: float, shape: tuple[int, ...]) -> np.ndarray:
    """Random head sets' retrieval rates of ``shape`` from the Beta with ``mean`` and ``sd``."""
    ab = beta_shape(mean, sd)
    return np.full(shape, min(1.0, max(0.0, mean))) if ab is None else rng.beta(ab[0], ab[1], shape)


def fires(top: np.ndarray, random: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """[sims] whether the randomization p (1 + #draws at or below the top set) / (1 + draws) is at most
    ``alpha``, from top [sims] and random [sims, draws] accuracies (``randomization_p``: ties count
    against)."""
    below = (random <= top[:, None]).sum(axis=1)  # [sims]
    return (1 + below) / (1 + random.shape[1]) <= alpha


def masking_power(passkeys: int, draws: int, spreads: Spreads, drop: float = MIN_DROP, alpha: float = ALPHA,
                  n_sims: int = N_SIMS, seed: int = 0) -> float:
    """Power of the card's rule (p <= alpha at every fraction) with ``passkeys`` passkeys and ``draws``
    random draws per fraction, ``spreads`` the draws' (mean, between-draw SD) per fraction and the
    top set ``drop`` below their mean (at least 0), by simulation (the model above)."""
    rng = np.random.default_rng(seed)
    fired = np.ones(n_sims, dtype=bool)  # [sims]
    for mean, sd in spreads:
        random = rng.binomial(passkeys, draw_rates(rng, mean, sd, (n_sims, draws)))  # [sims, draws] retrieved
        top = rng.binomial(passkeys, min(1.0, max(0.0, mean - drop)), n_sims)  # [sims]
        fired &= fires(top, random, alpha)
    return float(fired.mean())


def reachable(spreads: Spreads, drop: float = MIN_DROP, alpha: float = ALPHA) -> list[bool]:
    """Per fraction, whether any design can see ``drop``: the share of random head sets whose rate is at
    or below the top set's (the Beta's CDF at mean - drop) is under ``alpha``. With unlimited passkeys
    and draws the randomization p tends to that share, so where it is not under alpha no number of
    passkeys or draws reaches the power (random sets already retrieve as little as the top set)."""
    out = []
    for mean, sd in spreads:
        ab, at = beta_shape(mean, sd), max(0.0, mean - drop)
        share = float(at >= mean) if ab is None else betainc(ab[0], ab[1], at)  # random sets at or below the top
        out.append(share < alpha)
    return out


def passkeys_needed(draws: int, spreads: Spreads, drop: float = MIN_DROP, alpha: float = ALPHA, power: float = POWER,
                    lo: int = 1, cap: int = MAX_PASSKEYS) -> int | None:
    """The fewest passkeys (at least ``lo``) at which ``masking_power`` reaches ``power`` with ``draws``
    draws, by bisection (power rises with passkeys); None when ``cap`` passkeys do not reach it."""
    if masking_power(cap, draws, spreads, drop, alpha) < power:
        return None
    if masking_power(lo, draws, spreads, drop, alpha) >= power:
        return lo
    hi = cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if masking_power(mid, draws, spreads, drop, alpha) >= power else (mid, hi)
    return hi


def masking_design(spreads: Spreads, drop: float = MIN_DROP, alpha: float = ALPHA, power: float = POWER,
                   ladder: Sequence[int] = DRAW_LADDER) -> dict | None:
    """The cheapest design of ``ladder``'s draws reaching ``power``: {"draws", "passkeys", "forwards"},
    forwards = (1 + fractions (1 + draws)) x passkeys per length (every masking condition reads every
    passkey); None when no rung reaches it within ``MAX_PASSKEYS`` (always so where ``reachable`` is not)."""
    if not all(reachable(spreads, drop, alpha)):
        return None
    best = None
    for draws in ladder:
        conditions = 1 + len(spreads) * (1 + draws)
        if best is not None and conditions >= best["forwards"]:
            break  # even one passkey costs more
        cap = MAX_PASSKEYS if best is None else min(MAX_PASSKEYS, best["forwards"] // conditions)
        need = passkeys_needed(draws, spreads, drop, alpha, power, cap=cap)  # None: not cheaper than the best
        if need is not None and (best is None or conditions * need < best["forwards"]):
            best = {"draws": draws, "passkeys": need, "forwards": conditions * need}
    return best


def detectable_drop(passkeys: int, draws: int, spreads: Spreads, alpha: float = ALPHA,
                    power: float = POWER) -> float | None:
    """The smallest drop (in steps of 0.01) ``masking_power`` sees with ``power`` at this design; None
    when not even a top set that retrieves nothing is seen."""
    top = max(round(100 * mean) for mean, _ in spreads)
    if top <= 0 or masking_power(passkeys, draws, spreads, top / 100, alpha) < power:
        return None
    lo, hi = 0, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if masking_power(passkeys, draws, spreads, mid / 100, alpha) >= power else (mid, hi)
    return hi / 100


def masking_plan(test: dict, drop: float = MIN_DROP, alpha: float = ALPHA, power: float = POWER) -> dict | None:
    """What ``masking_test``'s design can see, from its rows: per fraction the draws' (mean, between-draw
    SD) (``spreads``) and whether any design sees ``drop`` (``reachable``); at the rows' passkeys and
    draws the power to see ``drop`` and the smallest drop seen with ``power`` (``mde``); the passkeys
    the rows' draws need (``needs``, the rows' own when enough; None when no number of passkeys
    reaches it with these draws) and, when more draws are needed, the cheapest design that reaches it
    (``design``, ``masking_design``). None when no fraction has a top set and draws."""
    scored = [v for v in test["fractions"].values()
              if v["top"] is not None and any(d is not None for d in v["random_draws"])]
    n = test["n_passkeys"]
    if not scored or n < 1:
        return None
    draws = min(v["n_draws"] for v in scored)
    spreads = [draw_spread(v["random_draws"], n) for v in scored]
    seen = masking_power(n, draws, spreads, drop, alpha)
    needs = n if seen >= power else passkeys_needed(draws, spreads, drop, alpha, power, lo=n)
    return {"spreads": spreads, "reachable": reachable(spreads, drop, alpha), "power": seen, "draws": draws,
            "mde": detectable_drop(n, draws, spreads, alpha, power), "needs": needs,
            "design": None if needs is not None else masking_design(spreads, drop, alpha, power)}
