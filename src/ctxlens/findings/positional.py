"""Criteria for the Positional Heads finding of the RoPE-distance paper, fixed before any run (no torch).

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"):

- Section 4.3.1, Appendix A.3: Spearman's rho between relative distance and dominant dimension
  ranks every head; the top 5% / 10% are the Positional Heads. The paper makes no test; its
  quantities are the ranking, the top heads' rho and sign, and the spread of |rho| over heads
  (``ranking``).
- Section 4.2.2 says some heads show a significant correlation. ctxlens's test of that claim
  (``presence_test``): one rho per (head, prompt), prompts being the independent items (the paper
  samples 17); per head a one-sample t test across prompts that the mean rho is 0, Bonferroni over
  heads. The rho pooled over distances of a few texts counts ~1000 correlated points as
  independent and cannot fail; it is never tested here.
- The paper makes no control. ctxlens's negative control (``control_test``): the same detection
  with every rotary frequency 0 (``condition="rope-zeroed"`` rows; q and k unrotated), on the same
  prompts. The dominant dimension can depend on distance without any rotation (keys per distance,
  the causal mask, the content), and the t test above passes nearly every head on real models; so
  per head a paired one-sided t test across prompts that its rho with RoPE is further along the
  head's direction than with RoPE zeroed (the direction: the sign of its summed rho over both
  conditions, which swapping a prompt's two rho leaves unchanged, so under the null that RoPE adds
  nothing each prompt's difference is as likely either sign), Bonferroni over heads. "Present"
  when at least one head passes both tests (an intersection-union test per head). Rows without a
  control (written before it existed) leave presence ``controlled=False``: the t test alone,
  which the card reports as lacking its control.
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
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict

import numpy as np

from ctxlens.core.stats import betainc, bootstrap, normal_quantile, one_sample_t, quartiles, randomization_p, t_quantile

ALPHA = 0.05
MIN_PROMPTS = 17  # the paper's prompts (Section 4.2.1)
MIN_DRAWS = 19  # randomization p >= 1 / (draws + 1): 19 draws can reach 0.05
MIN_PASSKEYS = 30  # paired passkeys per condition (the design floor)
MIN_RHO = 0.3  # stated minimal effect: mean per-prompt rho of a Positional Head, and its |rho| gain over the control
REAL, CONTROL = "none", "rope-zeroed"  # positional-heads' conditions (rows without one are REAL)
MIN_DROP = 0.3  # stated minimal effect: top heads' passkey accuracy below the random draws' mean, at every fraction

_t_quantile = functools.cache(t_quantile)  # a bisection; the same (df, level) recurs for every dataset of a shape


# ------------------------------------------------------------------ positional heads


def _heads(rows: list[dict]) -> list[dict]:
    """The real condition's ``kind="head"`` rows (the control's heads are not ranked with them)."""
    return [r for r in of_condition(rows, REAL) if r.get("kind") == "head"]


def ranking(head_rows: list[dict], fractions=(0.05, 0.1)) -> dict:
    """The paper's quantities from ``kind="head"`` rows (rho pooled over the detection inputs):
    heads ranked by |rho| (the rows' ``rank``), the top fraction's heads with rho and sign, and
    the quartiles of |rho| over heads, overall and per layer type (sliding / full attention)."""
    heads = sorted((r for r in _heads(head_rows) if r.get("rho") is not None), key=lambda r: r["rank"])
    n = len(_heads(head_rows))
    top = {}
    for f in fractions:
        k = max(1, min(n, round(f * n)))
        chosen = heads[:k]
        top[str(f)] = {"n": k, "heads": [[r["layer"], r["head"], r["rho"]] for r in chosen],
                       "positive": sum(r["rho"] > 0 for r in chosen), "negative": sum(r["rho"] < 0 for r in chosen)}
    types = defaultdict(list)
    for r in heads:
        types[str(r.get("layer_type") or "all")].append(abs(r["rho"]))
    return {"n_heads": n, "top": top, "abs_rho": quartiles([abs(r["rho"]) for r in heads]),
            "abs_rho_by_type": {t: quartiles(v) for t, v in types.items()} if len(types) > 1 else {},
            "first": heads[0] if heads else None}


def of_condition(rows: list[dict], condition: str = REAL) -> list[dict]:
    """The rows of one detection condition; rows without a ``condition`` column are ``REAL``."""
    return [r for r in rows if r.get("condition", REAL) == condition]


def prompt_cells(rows: list[dict]) -> dict[str, dict[tuple[int, int], dict]]:
    """{condition: {(layer, head): {"rho": [per-prompt rho], "items": [(length, prompt) of each],
    "layer_type": ...}}} from the ``kind="prompt"`` rows, in one pass (one row per layer, head and
    prompt; a prompt whose rho is undefined is left out)."""
    out: dict[str, dict[tuple[int, int], dict]] = {}
    for r in rows:
        if r.get("kind") != "prompt":
            continue
        cells = out.setdefault(r.get("condition", REAL), {})
        cell = cells.setdefault((int(r["layer"]), int(r["head"])),
                                {"rho": [], "items": [], "layer_type": r.get("layer_type")})
        if r.get("rho") is not None and math.isfinite(r["rho"]):
            cell["rho"].append(float(r["rho"]))
            cell["items"].append((r.get("length"), r.get("prompt")))
    return out


def prompt_rhos(rows: list[dict], condition: str = REAL) -> dict[tuple[int, int], dict]:
    """{(layer, head): {"rho": [per-prompt rho], "layer_type": ...}} of ``condition`` (``prompt_cells``)."""
    return prompt_cells(rows).get(condition, {})


def presence_test(rows: list[dict], alpha: float = ALPHA) -> dict:
    """ctxlens's test of the paper's Section 4.2.2 claim on ``kind="prompt"`` rows: per head, a
    one-sample t test (n - 1 df) of its per-prompt rho (the real condition's) against 0; a head
    passes when p < alpha / heads (Bonferroni over every head tested). Also the passing heads'
    signs, per layer type, and the mde of a head's mean rho ((t at the Bonferroni level + z at
    80% power) x SE, SE the median over heads of sd / sqrt(prompts)). With RoPE-zeroed rows,
    ``control`` holds ``control_test`` and the same t test on the control's rows (``zeroed``), a
    head is ``positional`` when it passes both its t test and the comparison with its control,
    and ``present`` means at least one is (``controlled``: True); without them ``present`` means
    at least one head passes the t test (``controlled``: False, the verdict lacks its control)."""
    cells = prompt_cells(rows)
    test = t_test(cells.get(REAL, {}), alpha)
    control = None if not cells.get(CONTROL) else compare(cells[REAL] if REAL in cells else {}, cells[CONTROL], alpha)
    if control is None:
        return {**test, "controlled": False, "control": None, "zeroed": None}
    positional = [k for k, v in test["heads"].items() if v["pass"] and control["heads"].get(k, {}).get("pass")]
    by_type: dict[str, int] = defaultdict(int)
    for k in positional:
        by_type[str(test["heads"][k]["layer_type"] or "all")] += 1
    return {**test, "controlled": True, "present": bool(positional), "control": control,
            "zeroed": t_test(cells[CONTROL], alpha), "n_positional": len(positional),
            "positional": positional, "positional_by_type": dict(by_type),
            "positional_positive": sum(test["heads"][k]["mean"] > 0 for k in positional),
            "positional_negative": sum(test["heads"][k]["mean"] < 0 for k in positional)}


def t_test_across_prompts(rows: list[dict], condition: str = REAL, alpha: float = ALPHA) -> dict:
    """Per head of ``condition``'s prompt rows: a one-sample t test of the per-prompt rho against 0,
    Bonferroni over heads (see ``presence_test``); ``present``: at least one head passes."""
    return t_test(prompt_rhos(rows, condition), alpha)


def t_test(cells: dict[tuple[int, int], dict], alpha: float = ALPHA) -> dict:
    """``t_test_across_prompts`` on one condition's ``prompt_cells``."""
    tested = {k: v for k, v in cells.items() if len(v["rho"]) >= 2}
    n_heads = len(tested)
    n_prompts = max((len(v["rho"]) for v in cells.values()), default=0)
    level = alpha / max(1, n_heads)
    per_head, ses = {}, []
    for key, cell in tested.items():
        mean, se, p = one_sample_t(cell["rho"])
        per_head[key] = {"mean": mean, "se": se, "p": p, "pass": p < level, "layer_type": cell["layer_type"],
                         "n": len(cell["rho"])}
        if se == se:  # not NaN
            ses.append(se)
    passing = [k for k, v in per_head.items() if v["pass"]]
    by_type: dict[str, dict] = defaultdict(lambda: {"heads": 0, "pass": 0, "positive": 0, "negative": 0})
    for v in per_head.values():
        t = by_type[str(v["layer_type"] or "all")]
        t["heads"] += 1
        if v["pass"]:
            t["pass"] += 1
            t["positive" if v["mean"] > 0 else "negative"] += 1
    se_typ = float(np.median(ses)) if ses else math.nan
    return {"n_heads": n_heads, "n_prompts": n_prompts, "alpha": alpha, "level": level,
            "present": bool(passing), "n_pass": len(passing),
            "positive": sum(per_head[k]["mean"] > 0 for k in passing),
            "negative": sum(per_head[k]["mean"] < 0 for k in passing),
            "by_type": dict(by_type), "heads": per_head,
            "mde": (_t_quantile(n_prompts - 1, level) + normal_quantile(0.8)) * se_typ if ses else None}


def paired_prompts(real: dict[tuple[int, int], dict], zeroed: dict[tuple[int, int], dict]
                   ) -> dict[tuple[int, int], list[tuple[float, float]]]:
    """{(layer, head): [(rho with RoPE, rho with RoPE zeroed), ...]} from two conditions' ``prompt_cells``:
    one pair per (length, prompt) with a finite rho in both (the same prompt index: the same input)."""
    out = {}
    for key, cell in real.items():
        other = zeroed.get(key)
        if other is None or any(i[1] is None for i in cell["items"]):
            continue
        theirs = dict(zip(other["items"], other["rho"]))
        pairs = [(rho, theirs[i]) for i, rho in zip(cell["items"], cell["rho"]) if i in theirs]
        if pairs:
            out[key] = pairs
    return out


def control_test(rows: list[dict], alpha: float = ALPHA) -> dict | None:
    """ctxlens's comparison with the RoPE-zeroed control (see the module docstring): per head, with
    s the sign of its rho summed over both conditions and prompts, a paired one-sided t test
    (n - 1 df) across prompts of s (rho - rho zeroed) > 0 (``gain``: its mean, how much further
    along the head's direction its rho is with RoPE); a head passes when p < alpha / heads. None
    when the rows hold no RoPE-zeroed prompt rows. ``mde``: the smallest mean gain detected at 80%
    power ((one-sided t at the Bonferroni level + z) x the median SE over heads)."""
    cells = prompt_cells(rows)
    return compare(cells.get(REAL, {}), cells[CONTROL], alpha) if cells.get(CONTROL) else None


def compare(real: dict[tuple[int, int], dict], zeroed: dict[tuple[int, int], dict], alpha: float = ALPHA) -> dict:
    """``control_test`` on the two conditions' ``prompt_cells``."""
    pairs = {k: v for k, v in paired_prompts(real, zeroed).items() if len(v) >= 2}
    level = alpha / max(1, len(pairs))
    heads, ses = {}, []
    for key, items in pairs.items():
        sign = -1.0 if sum(a + b for a, b in items) < 0 else 1.0  # swap-invariant: fixed under the null
        gain, se, p_two = one_sample_t([sign * (a - b) for a, b in items])
        p = p_two / 2 if gain > 0 else 1 - p_two / 2  # one-sided: further along the direction with RoPE
        heads[key] = {"gain": gain, "se": se, "p": p, "pass": p < level, "n": len(items), "direction": sign,
                      "real": sum(a for a, _ in items) / len(items), "zeroed": sum(b for _, b in items) / len(items)}
        if se == se:  # not NaN
            ses.append(se)
    n = max((v["n"] for v in heads.values()), default=0)
    return {"n_heads": len(heads), "n_prompts": n, "level": level, "heads": heads,
            "n_pass": sum(v["pass"] for v in heads.values()),
            "mde": (_t_quantile(n - 1, 2 * level) + normal_quantile(0.8)) * float(np.median(ses)) if ses else None}


def head_interval(rows: list[dict], layer: int, head: int, n_boot: int = 2000) -> tuple[float, float] | None:
    """95% percentile bootstrap over prompts of one head's mean per-prompt rho (inside [-1, 1])."""
    cell = prompt_rhos(rows).get((int(layer), int(head)))
    if cell is None:
        return None
    return bootstrap(cell["rho"], lambda xs: sum(xs) / len(xs), n_boot=n_boot)


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


def masking_power(passkeys: int, draws: int, spreads, drop: float = MIN_DROP, alpha: float = ALPHA,
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


def reachable(spreads, drop: float = MIN_DROP, alpha: float = ALPHA) -> list[bool]:
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


def passkeys_needed(draws: int, spreads, drop: float = MIN_DROP, alpha: float = ALPHA, power: float = POWER,
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


def masking_design(spreads, drop: float = MIN_DROP, alpha: float = ALPHA, power: float = POWER,
                   ladder=DRAW_LADDER) -> dict | None:
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


def detectable_drop(passkeys: int, draws: int, spreads, alpha: float = ALPHA, power: float = POWER) -> float | None:
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


def verdict(presence: dict | None, masking: dict) -> dict:
    """The findings table's criterion: positional heads present (``presence_test``) and masking
    them hurts more than random (``masking_test``); None (undecided) when either cannot be tested."""
    present = None if presence is None or presence["n_heads"] == 0 else presence["present"]
    hurts = {"hurts": True, "no": False, "collapse": False}.get(masking["verdict"])
    reproduced = False if present is False or hurts is False else (None if present is None or hurts is None
                                                                   else True)
    return {"significant": present, "masking_hurts_more": hurts, "reproduced": reproduced}

