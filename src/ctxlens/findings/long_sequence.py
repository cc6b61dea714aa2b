"""The retrieval findings of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?".

Section 4, Tables 1-3: every architecture retrieves a needle worse beyond its training length
(``retrieval_collapses``, test ``length_test``) and, at the training length, worse in the middle
of the context than at its ends (``lost_in_the_middle``, test ``middle_test``). The card's lines
(``ctxlens.findings.lines.needle``) call the same two tests: one implementation.

The independent item is the haystack. A ``niah-depth`` row is one (length, depth, haystack)
cell; its haystack is (``seed``, ``sample``): the task generator draws a sample's key, value and
haystack from random streams keyed by (task, seed, sample index) only
(``ctxlens.tasks.base.Setup.rng``: the same at every length unless ``by_length``; the depth is a
generator option, not part of the key), and ``experiments/niah_depth.py`` runs every (length,
depth) unit with the same seed and ``n_samples``. So sample i of seed s is the same haystack with
the same needle at every depth and every length, and a top-up run (``niah-depth+1``, seed 1) adds
new haystacks. Cells of one haystack are correlated (a hard key is hard at every depth), so both
tests are paired over haystacks:

* ``middle_test``: each end (depth 0, depth 100) against the middle, the haystack's depth-50 cell
  (the paper's centre column: Tables 2-3 include depth 50, and Table 4 reads "the middle" at
  depth 50 alone). One binary cell per haystack keeps the outcome binary: per haystack the item
  end - middle in {-1, 0, 1}, with a paired Newcombe interval; the two ends are one family,
  decided by Holm at 5% (first step 0.025, second 0.05).
* ``length_test``: per haystack, its accuracy over the depths it has at both L and 2L, the item
  its drop in [-1, 1]; a bootstrap over haystacks of the mean difference.

Both are tested with the anytime-valid betting test of ``core.sequential`` (the haystacks in the
order they were sampled, ``sampled``), because the profile adds haystacks in rounds and stops
when a line decides (``ctxlens.profile.rounds``): its type-I error holds at any stopping time,
where a fixed-n test read after every round would not. Each line tests the effect (a drop, a
dip), the reverse (the middle above an end), and that the effect is smaller than the paper's (a
decided null); the fixed-n sign-flip and McNemar p-values are kept beside it (``p_fixed``).

The effect each test must detect is the paper's smallest typical effect: ``MIN_DIP`` = 0.25, the
end-minus-middle dips of Table 2 (Mamba2: 59 / 66 at depths 0 / 100 vs 39 at depth 50; TPP: 53 /
56 vs 26, i.e. 0.20-0.29); ``MIN_DROP`` = 0.20, the drop of the mean over depths from Table 2
(training length) to Table 3 (twice it), which six of the paper's eight models exceed (Mamba2
0.43 -> 0.21). Power (``mde``) and the haystacks needed for the paper's effect (``needs``) are
simulated on item models of the test (``drop_plan``, ``dip_plan``): the dip's with the observed
discordance (at least the effect), the drop's with cells of a haystack together 30% of the time.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable

from ctxlens.core import sequential
from ctxlens.core.papers import named
from ctxlens.core.stats import (
    bootstrap_mean,
    holm,
    mcnemar_exact,
    newcombe_paired,
    sign_flip_p,
)
from ctxlens.core.zoo_facts import TRAIN_LENGTH
from ctxlens.findings.models import any_model, reaches
from ctxlens.findings.verdicts import Rows, as_models, verdicts_row

ALPHA = 0.05
MIN_BOOTSTRAP = 5  # haystacks: fewer give a percentile bootstrap of a handful of distinct values, no interval
DEPTH_GRID = (0.0, 20.0, 40.0, 50.0, 60.0, 80.0, 100.0)  # the long-sequence paper, Tables 2-3
MIDDLE = 50.0  # the middle cell of a haystack (see the module docstring)
ENDS = {"start": 0.0, "end": 100.0}
MIN_DIP = 0.25  # the paper's Table 2 end-minus-middle dips of Mamba2 and TPP: 0.20-0.29
MIN_DROP = 0.20  # Table 2 -> Table 3 drop of the mean over depths: six of the eight models drop more
PLAN_CORRELATION = 0.3  # planning: cells (depths) of one haystack retrieved or lost together this often
NEEDS_CAP = 4096  # haystacks: beyond this a line's planner gives up (None: "no number of haystacks")


def _given(v: object) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def haystacks(rows: list[dict], length: int) -> tuple[dict[tuple, dict[float, int]], int]:
    """({haystack (seed, sample): {depth: 1 retrieved / 0 not}} at ``length``, rows skipped for not
    naming their haystack). Scored rows only; a single-needle score is 0 or 100 (>= 50 counts)."""
    cells: dict[tuple, dict[float, int]] = defaultdict(dict)
    unnamed = 0
    for r in rows:
        if r.get("length") != length or not _given(r.get("score")) or not _given(r.get("depth")):
            continue
        if not _given(r.get("sample")):
            unnamed += 1
            continue
        cells[(r.get("seed", 0), int(r["sample"]))][float(r["depth"])] = int(float(r["score"]) >= 50)
    return dict(cells), unnamed


def sampled(haystack: tuple) -> tuple:
    """The order haystacks were sampled in: by seed (a round), then sample index, numerically (a
    name that is not a number after the numbers, by its text)."""
    return tuple((0, v, "") if isinstance(v, int | float) and not isinstance(v, bool) else (1, 0, repr(v))
                 for v in haystack)


def _pairs(cells: dict[tuple, dict[float, int]], first: float, second: float) -> tuple[int, int, int, int]:
    """(both, first only, second only, neither) over haystacks with both depths."""
    both = only1 = only2 = neither = 0
    for depth in cells.values():
        if first in depth and second in depth:
            a, b = depth[first], depth[second]
            both += a and b
            only1 += a and not b
            only2 += b and not a
            neither += not a and not b
    return both, only1, only2, neither


def _anytime(items: list[float], m0: float, alternative: str) -> float:
    """The anytime-valid p of ``core.sequential.test_mean`` on per-haystack items in [-1, 1] (1 when none)."""
    return sequential.test_mean(items, m0, -1.0, 1.0, ALPHA, alternative).p_anytime if items else 1.0


def anytime_mde(model: Callable[[float], sequential.Sampler], n: int, alpha: float, step: float = 0.05) -> float | None:
    """The smallest effect on a grid of ``step`` that the anytime-valid test, looked at after every one
    of ``n`` haystacks, detects with 80% power (``core.sequential.power``) when items follow
    ``model(effect)``; None when not even an effect of 1 is. Bisection: power rises with the effect."""
    def reaches(k: int) -> bool:
        return sequential.power(model(k * step), n, 0.0, -1.0, 1.0, alpha, n_sim=1000) >= 0.8

    top = int(round(1 / step))
    if n < 1 or not reaches(top):
        return None
    lo, hi = 0, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return round(hi * step, 10)


def end_vs_middle(cells: dict[tuple, dict[float, int]], end: float, middle: float = MIDDLE) -> dict | None:
    """One end against the middle on haystack pairs, the haystacks in the order they were sampled
    ((seed, sample): round by round): accuracies, the paired Newcombe interval of end - middle, the
    anytime-valid p (module docstring) that the end exceeds the middle (a dip, ``p``), that it is
    below it (``p_reverse``), and that the dip is smaller than the paper's ``MIN_DIP`` (``p_small``),
    beside the fixed-n exact one-sided McNemar p of a dip (``p_fixed``); None when no haystack has
    both cells."""
    a, b, c, d = _pairs(cells, end, middle)
    n = a + b + c + d
    if n == 0:
        return None
    items = [float(cells[h][end] - cells[h][middle]) for h in sorted(cells, key=sampled)
             if end in cells[h] and middle in cells[h]]  # [n] end - middle per haystack, in {-1, 0, 1}
    return {"n": n, "end": (a + b) / n, "middle": (a + c) / n, "diff": (b - c) / n,
            "interval": newcombe_paired(a, b, c, d), "p": _anytime(items, 0.0, "greater"),
            "p_reverse": _anytime(items, 0.0, "less"), "p_small": _anytime(items, MIN_DIP, "less"),
            "p_fixed": mcnemar_exact(b, c, "greater"), "discordant": (b + c) / n, "counts": (a, b, c, d)}


def _holm(p: dict[str, float]) -> list[str]:
    """The keys of ``p`` (two one-sided p-values, one per end) that Holm's procedure rejects at 5%
    (``core.stats.holm``), in ``ENDS`` order: the smaller p below 0.025, then the other below 0.05."""
    rejected = holm(p, ALPHA)
    return [k for k in ENDS if k in rejected]


def middle_test(rows: list[dict], length: int, plan: bool = False) -> dict:
    """The lost-in-the-middle test at ``length`` (module docstring): per end the paired comparison
    with the depth-50 cell; ``dips`` the ends whose one-sided McNemar p passes Holm at 5% over the
    two ends; ``reverse`` the ends below the middle by the same rule (McNemar the other way);
    ``mde`` the smallest dip detectable at Holm's first step (0.025) with 80% power; ``missing``
    depths of the paper's grid the rows lack; ``why`` says what is missing when nothing can be
    tested."""
    cells, unnamed = haystacks(rows, length)
    have = sorted({dep for c in cells.values() for dep in c})
    out: dict = {"length": length, "n": len(cells), "depths": have, "unnamed": unnamed,
                 "missing": [dep for dep in DEPTH_GRID if dep not in have], "why": None}
    if not cells:
        out["why"] = (f"the {unnamed} needle rows at {length} do not name their haystack (sample)" if unnamed
                      else f"no needle rows at {length}")
        return out
    measured = {name: end_vs_middle(cells, depth) for name, depth in ENDS.items()}
    sides = {name: s for name, s in measured.items() if s is not None}
    if len(sides) < len(measured):
        out["why"] = f"the rows at {length} lack depth 0, 50 or 100 (they hold {', '.join(f'{d:g}' for d in have)})"
        return out
    out.update(sides)
    out["dips"] = _holm({k: sides[k]["p"] for k in ENDS})
    out["reverse"] = _holm({k: sides[k]["p_reverse"] for k in ENDS})
    out["small"] = _holm({k: sides[k]["p_small"] for k in ENDS})
    out["n"] = min(s["n"] for s in sides.values())
    out["discordance"] = max(MIN_DIP, *(s["discordant"] for s in sides.values()))
    if plan:
        out["mde"], out["needs"] = dip_plan(out["n"], round(out["discordance"], 2))
    out["retrieved"] = any(s["end"] > 0 or s["middle"] > 0 for s in sides.values())
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@functools.lru_cache(maxsize=512)
def drop_needs(at_L: float, depths: int) -> int | None:
    """The haystacks the anytime-valid L-vs-2L test needs for the paper's ``MIN_DROP`` with 80% power,
    simulated on ``_drop_model``."""
    return sequential.needed_n(_drop_model(MIN_DROP, at_L, depths), 0.0, -1.0, 1.0, ALPHA, n_cap=NEEDS_CAP)


@functools.lru_cache(maxsize=512)
def dip_needs(discordance: float) -> int | None:
    """The haystacks one end's anytime-valid dip test needs at Holm's first step (0.025) for the paper's
    ``MIN_DIP`` with 80% power: paired binary items discordant with probability ``discordance``."""
    return sequential.needed_n(sequential.paired_binary_model(MIN_DIP, discordance), 0.0, -1.0, 1.0, ALPHA / 2,
                               n_cap=NEEDS_CAP)


@functools.lru_cache(maxsize=512)
def drop_plan(n: int, at_L: float, depths: int) -> tuple[float | None, int | None]:
    """(the smallest drop the anytime-valid L-vs-2L test detects with 80% power at ``n`` haystacks,
    ``drop_needs``), simulated on ``_drop_model``."""
    return anytime_mde(lambda e: _drop_model(e, at_L, depths), n, ALPHA), drop_needs(at_L, depths)


@functools.lru_cache(maxsize=512)
def dip_plan(n: int, discordance: float) -> tuple[float | None, int | None]:
    """(the smallest dip one end's anytime-valid test detects at Holm's first step, 0.025, with 80%
    power at ``n`` haystacks, ``dip_needs``): items discordant with probability ``discordance`` (the
    observed, at least the effect)."""
    mde = anytime_mde(lambda e: sequential.paired_binary_model(e, max(e, discordance)), n, ALPHA / 2)
    return mde, dip_needs(discordance)


def _drop_model(drop: float, at_L: float, depths: int) -> sequential.Sampler:
    """Planning items of the L-vs-2L test: per haystack the mean over ``depths`` cells of (retrieved at
    L) - (retrieved at 2L), at L at the observed rate ``at_L`` (at least ``drop``), at 2L ``drop`` lower,
    cells of a haystack together with probability ``PLAN_CORRELATION`` (an assumption, stated)."""
    first = max(drop, at_L)
    return sequential.binary_difference_model(first, first - drop, max(1, depths), PLAN_CORRELATION)


def length_test(rows: list[dict], length: int, plan: bool = False) -> dict:
    """Needle retrieval at ``length`` vs twice it, paired over haystacks (module docstring): per
    haystack present at both lengths, its accuracy over the depths it has at both; ``at_L``,
    ``at_2L`` the means over haystacks, ``diff`` = at_2L - at_L with a bootstrap interval over
    haystacks (None with fewer than ``MIN_BOOTSTRAP``), ``p`` the one-sided sign-flip p of a drop,
    ``mde`` the smallest drop detectable at 5% with 80% power, ``why`` what is missing when nothing
    can be tested."""
    at, beyond = haystacks(rows, length)[0], haystacks(rows, 2 * length)[0]
    out: dict = {"length": length, "n": 0, "why": None}
    pairs = []
    for h in sorted(set(at) & set(beyond), key=sampled):
        depths = sorted(set(at[h]) & set(beyond[h]))
        if depths:
            pairs.append((sum(at[h][d] for d in depths) / len(depths), sum(beyond[h][d] for d in depths) / len(depths)))
    if not pairs:
        out["why"] = f"no haystack has needle rows at both {length} and {2 * length}"
        return out
    drops = [a - b for a, b in pairs]  # [n] per haystack, in the order sampled
    out.update(n=len(pairs), at_L=_mean([a for a, _ in pairs]), at_2L=_mean([b for _, b in pairs]),
               depths=sorted({d for h in set(at) & set(beyond) for d in set(at[h]) & set(beyond[h])}))
    out["diff"] = out["at_2L"] - out["at_L"]
    out["interval"] = (bootstrap_mean([-x for x in drops], bounds=(-1.0, 1.0))  # resampling haystacks
                       if len(drops) >= MIN_BOOTSTRAP else None)
    out["p"], out["p_small"] = _anytime(drops, 0.0, "greater"), _anytime(drops, MIN_DROP, "less")
    out["p_fixed"] = sign_flip_p(drops, "greater")
    if plan:
        out["mde"], out["needs"] = drop_plan(len(pairs), round(out["at_L"], 2), len(out["depths"]))
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def retrieval_collapses(rows: Rows, models: dict[str, str], controls: dict[str, str],
                        train_length: int = TRAIN_LENGTH) -> dict:
    """The long-sequence paper, Section 4, Tables 1-3: every architecture retrieves worse beyond its training
    length (Table 2 at the training length T vs Table 3 at 2T: the mean over depths drops for all
    eight models). ``niah-depth`` at T and 2T. Criterion (``length_test``): the per-haystack
    accuracy over depths is lower at 2T than at T, anytime-valid p <= 0.05 over haystacks (valid
    however many rounds of haystacks were added); not reproduced when the drop is shown below the
    paper's 0.2; undecided otherwise, or when nothing is retrieved at T. Applies to every
    architecture whose positions reach 2T."""
    models = as_models(models)

    def check(name: str) -> tuple[str, bool | None] | None:
        t = models.length(name)
        got = length_test(rows.of("niah-depth", models.get(name)), t)
        if got["why"]:
            return None
        ok = None if got["at_L"] == 0 else True if got["p"] <= ALPHA else False if got["p_small"] <= ALPHA else None
        return (f"accuracy {_pct(got['at_L'])} at {t}, {_pct(got['at_2L'])} at {2 * t} (n = {got['n']} haystacks, "
                f"anytime-valid p = {got['p']:.3g})"), ok

    return verdicts_row("retrieval collapses beyond the training length",
                        named("long-sequence", "Section 4, Tables 1-3"),
                        "needle accuracy per haystack at 2x the training length significantly below that at the "
                        "training length (anytime-valid betting test over haystacks, p <= 0.05); a drop shown below "
                        "0.2 is not reproduced", reaches(2), models, check,
                        "niah-depth at the training length and twice it")


def lost_in_the_middle(rows: Rows, models: dict[str, str], controls: dict[str, str],
                       train_length: int = TRAIN_LENGTH) -> dict:
    """The long-sequence paper, Section 4, Table 2: at the training length every architecture retrieves a
    needle at the start (depth 0) and the end (depth 100) better than in the middle (Table 2:
    Mamba2 59 / 66 at the ends vs 39 at depth 50, TPP 53 / 56 vs 26). ``niah-depth`` at the
    training length. Criterion (``middle_test``): each end above the haystack's depth-50 cell,
    anytime-valid betting test over haystacks, both ends significant under Holm at 5%; not
    reproduced when an end is shown below the middle or its dip below 0.25; otherwise undecided
    when nothing is retrieved at those depths. Applies to every architecture."""
    models = as_models(models)

    def check(name: str) -> tuple[str, bool | None] | None:
        t = models.length(name)
        got = middle_test(rows.of("niah-depth", models.get(name)), t)
        if got["why"]:
            return None
        s, e = got["start"], got["end"]
        ok = (None if not got["retrieved"] else True if got["dips"] == list(ENDS)
              else False if got["reverse"] or got["small"] else None)
        return (f"accuracy {s['end']:.2f} at depth 0, {s['middle']:.2f} at depth 50, {e['end']:.2f} at depth 100 "
                f"(n = {got['n']} haystacks), anytime-valid p = {s['p']:.3g} / {e['p']:.3g}"), ok

    return verdicts_row("lost in the middle", named("long-sequence", "Section 4, Table 2"),
                        "at the training length, accuracy at depths 0 and 100 each above depth 50 (anytime-valid test "
                        "over haystacks, Holm at 5% over the two ends)", any_model, models, check,
                        "niah-depth at the training length with depths 0, 50 and 100")
