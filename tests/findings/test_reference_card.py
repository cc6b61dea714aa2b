"""The committed reference card, recomputed from its rows by another route (issue 31): plain
Python and numpy over the rows, exact enumerations instead of the library's tests, for both
reference models. A line the rows cannot test is skipped here; what it shows instead is checked by
the test of the committed cards (``tests/test_reference_profiles.py``)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from ctxlens.findings.card import card_of_runs
from ctxlens.results import read_runs

PROFILE = Path(__file__).resolve().parents[2] / "reference" / "profile"
MODELS = ("ref:smollm2-135m", "ref:gemma3-270m")
pytestmark = pytest.mark.skipif(not PROFILE.is_dir(), reason="no committed reference profile")


@pytest.fixture(scope="module")
def card_and_rows():
    runs = read_runs([PROFILE])
    rows = defaultdict(list)
    for run in runs:
        for r in run.rows:
            rows[(r.get("experiment"), r.get("model"))].append(r)
    return {m: {line.key: line for line in lines} for m, lines in card_of_runs(runs).items()}, rows


def _L(card, model) -> int:
    return int(card[model]["length"].value)


def _cells(rows, length) -> dict[tuple, dict[float, int]]:
    """{(seed, sample): {depth: 1 / 0}} of the scored needle rows at ``length``."""
    out: dict[tuple, dict[float, int]] = defaultdict(dict)
    for r in rows:
        if r.get("length") == length and r.get("score") is not None and r.get("sample") is not None:
            out[(r.get("seed", 0), r["sample"])][float(r["depth"])] = int(float(r["score"]) > 0)
    return out


def _sign_flip_p(drops: list[float]) -> float:
    """One-sided p of a positive mean drop by enumerating every sign pattern."""
    observed = sum(drops)
    hits = sum(sum(s * d for s, d in zip(signs, drops)) >= observed - 1e-12
               for signs in itertools.product((1, -1), repeat=len(drops)))
    return hits / 2 ** len(drops)


@pytest.mark.parametrize("model", MODELS)
def test_needle_lines_from_the_rows(card_and_rows, model):
    card, rows = card_and_rows
    if model not in card:
        pytest.skip(f"{model} is not in the committed profile")
    L, niah = _L(card, model), rows[("niah-depth", model)]
    at, beyond = _cells(niah, L), _cells(niah, 2 * L)
    line = card[model]["retrieval_2l"]
    pairs = []
    for h in set(at) & set(beyond):
        depths = set(at[h]) & set(beyond[h])
        if depths:
            pairs.append((np.mean([at[h][d] for d in depths]), np.mean([beyond[h][d] for d in depths])))
    if line.value is not None:
        assert line.n == len(pairs)
        assert line.numbers["at_L"] == pytest.approx(np.mean([a for a, _ in pairs]))
        assert line.numbers["at_2L"] == pytest.approx(np.mean([b for _, b in pairs]))
        if len(pairs) <= 16:
            assert line.numbers["p"] == pytest.approx(_sign_flip_p([a - b for a, b in pairs]))
    mid = card[model]["middle_dip"]
    if mid.value is not None:
        full = [c for c in at.values() if {0.0, 50.0, 100.0} <= set(c)]
        assert mid.n == len(full)
        for end, depth in (("start", 0.0), ("end", 100.0)):
            assert mid.numbers[end] == pytest.approx(np.mean([c[depth] for c in full]))
            b = sum(c[depth] == 1 and c[50.0] == 0 for c in full)  # the end found, the middle missed
            k = sum(c[depth] == 0 and c[50.0] == 1 for c in full)
            p = sum(math.comb(b + k, i) for i in range(b, b + k + 1)) / 2 ** (b + k)  # exact McNemar, one-sided
            assert mid.numbers[f"p_{end}"] == pytest.approx(p)


@pytest.mark.parametrize("model", MODELS)
def test_loss_lines_from_the_rows(card_and_rows, model):
    card, rows = card_and_rows
    if model not in card:
        pytest.skip(f"{model} is not in the committed profile")
    L = _L(card, model)
    gain = card[model]["usable_context"]
    ce = defaultdict(dict)
    for r in rows[("loss-vs-length", model)]:
        if r.get("stage") == "measure" and r.get("ce") is not None:
            ce[r["sample"]][r["length"]] = r["ce"]
    measured = sorted({n for c in ce.values() for n in c if n <= L})
    if gain.value is not None and len(measured) >= 2:
        last, before = measured[-1], measured[-2]
        diffs = [c[before] - c[last] for c in ce.values() if before in c and last in c]
        assert gain.n == len(diffs) and gain.value == pytest.approx(np.mean(diffs))
    ppl = card[model]["ppl_2l"]
    seq = defaultdict(dict)
    for r in rows[("suffix-ppl", model)]:
        if r.get("stage") == "sequence" and r.get("sequence_nll") is not None:
            seq[r["sequence"]][r["length"]] = r["sequence_nll"]
    both = [s for s in seq.values() if L in s and 2 * L in s]
    if ppl.value is not None and both:
        assert ppl.n == len(both)
        assert ppl.value == pytest.approx(math.exp(np.mean([s[2 * L] - s[L] for s in both])))


def _t_crit(df: int, tail: float) -> float:
    """The t value whose upper tail is ``tail``, by numerical integration of the t density."""
    x = np.linspace(0, 60, 600_001)
    dens = (1 + x * x / df) ** (-(df + 1) / 2)
    dens /= 2 * np.trapezoid(dens, x)  # half the mass lies above 0
    upper = 0.5 - np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(x))])
    return float(x[np.argmax(upper <= tail)])


@pytest.mark.parametrize("model", MODELS)
def test_positional_heads_from_the_rows(card_and_rows, model):
    card, rows = card_and_rows
    if model not in card:
        pytest.skip(f"{model} is not in the committed profile")
    line = card[model]["positional_heads"]
    got = [r for r in rows[("positional-heads", model)]  # with RoPE (not the RoPE-zeroed control's rows)
           if r.get("transform", "none") == "none" and r.get("condition", "none") == "none"]
    heads = sorted((r for r in got if r.get("kind") == "head"), key=lambda r: r["rank"])
    if not heads or line.value is None:
        pytest.skip("no positional-heads rows")
    top = line.numbers["ranking"]["top"]["0.05"]
    k = max(1, round(0.05 * len(heads)))
    assert [h[:2] for h in top["heads"]] == [[r["layer"], r["head"]] for r in heads[:k]]
    assert top["positive"] == sum(r["rho"] > 0 for r in heads[:k])
    prompts = defaultdict(list)
    for r in got:
        if r.get("kind") == "prompt" and r.get("rho") is not None:
            prompts[(r["layer"], r["head"])].append(r["rho"])
    if not prompts or line.n is None or line.unit != "prompts":
        return
    n = min(len(v) for v in prompts.values())
    crit = _t_crit(n - 1, 0.05 / 2 / len(heads))  # two-sided, Bonferroni over heads
    passing = [h for h, v in prompts.items()
               if abs(np.mean(v)) / (np.std(v, ddof=1) / math.sqrt(len(v))) > crit]
    assert line.numbers["n_pass"] == len(passing)
