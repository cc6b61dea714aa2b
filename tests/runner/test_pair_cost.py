"""The cost of (query, key) pairs in the plan's estimate (issue 33 part 4).

The rope-distance paper's dominant dimension and top pairs (Sections 4.1-4.2) compute, for every
(query, key) pair, every layer's and head's per-frequency contributions: at short lengths that work,
not the forward, is most of positional heads' time (x5 over the estimate on SmolLM2 at L = 256).
The truths here: the pairs ``LayerQK.pair_contributions`` is actually called with (counted), a
probe around a stand-in whose extra time per pair is known, and the estimate's closed form.
"""

from __future__ import annotations

import math
import types

import pytest
import torch

from ctxlens.core.options import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.probes import dominant, qk
from ctxlens.probes.throughput import PAIR_QUERIES, PAIR_TOP, PAIR_WINDOW, Throughput, measure, pair_cost
from ctxlens.runner import plans

SPEC = "zoo:rope"


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """Every call's (query, key) pairs (keys [H, c, t]: c x t), as ``LayerQK.pair_contributions`` sees them."""
    seen: list[int] = []
    real = qk.LayerQK.pair_contributions

    def counting(self, qpos, keys):
        seen.append(keys.shape[1] * keys.shape[2])
        return real(self, qpos, keys)

    monkeypatch.setattr(qk.LayerQK, "pair_contributions", counting)
    return seen


@pytest.mark.parametrize(("length", "n_queries", "top_k"), [(48, 12, 8), (40, 0, 8), (16, 64, 100)])
def test_query_key_pairs_counts_the_pairs_accumulate_computes_at_each_layer(counted, length, n_queries, top_k):
    import ctxlens

    lm = ctxlens.load(SPEC)
    layers = lm.layer_indices(None, attention=True)
    ids = torch.randint(0, lm.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))  # [1, length]
    sums = dominant.DistanceSums(layers, lm.n_heads, length, lm.device)
    with torch.inference_mode():
        dominant.accumulate(lm, ids, layers, sums, top_k, n_queries)
    assert sum(counted) == len(layers) * dominant.query_key_pairs(length, n_queries, top_k)


@pytest.mark.parametrize(("name", "options"), [
    ("positional-heads", {"lengths": [32], "n_samples": 2, "n_queries": 8, "top_k": 6, "control": "rope-zeroed"}),
    ("dominant-dimension", {"lengths": [24, 32], "n_samples": 2, "n_queries": 0, "top_k": 5}),
    ("rope-dims", {"lengths": [32], "n_samples": 2, "n_pairs": 40}),
])
def test_the_pairs_an_experiment_states_are_the_pairs_it_computes(counted, tmp_path, name, options):
    import ctxlens
    from ctxlens.runner.execute import run

    exp = get_experiment(name)
    config = make_config(exp.Config, {**options, "source": "random"})
    stated = sum(w.pairs for unit in exp.plan(config) for w in plans.unit_work(exp, config, unit) or [])
    run(name, [SPEC], tmp_path / "run", {**options, "source": "random"}, progress=False, announce=False)
    n_layers = len(ctxlens.load(SPEC).layer_indices(None, attention=True))
    assert stated > 0 and sum(counted) == n_layers * stated


def test_the_estimate_adds_the_pairs_at_the_probes_cost_per_pair():
    exp = get_experiment("positional-heads")
    config = make_config(exp.Config, {"lengths": [100], "n_samples": 3, "n_queries": 10, "top_k": 20,
                                      "control": "rope-zeroed"})
    speed = Throughput(prefill=100.0, at=100, slope=0.0, decode=10.0, seconds=0.0, pair=1e-3)
    # 6 forwards of 100 tokens at 100 tokens/s, and 6 inputs x 10 queries x 20 keys at 1 ms
    assert plans.estimate_seconds(exp, config, exp.plan(config), speed) == pytest.approx(6.0 + 1.2)
    without = Throughput(prefill=100.0, at=100, slope=0.0, decode=10.0, seconds=0.0)  # a record before pairs
    assert plans.estimate_seconds(exp, config, exp.plan(config), without) == pytest.approx(6.0)
    assert plans.probe_shape(exp, config, exp.plan(config))["pairs"]
    ruler = get_experiment("ruler")
    ruler_config = make_config(ruler.Config, {"tasks": ["niah_single_1"], "n_samples": 1})
    assert not plans.probe_shape(ruler, ruler_config, ruler.plan(ruler_config))["pairs"]


def test_the_probe_reads_the_extra_time_per_pair_over_the_scan(monkeypatch):
    """A stand-in whose q/k scan takes 20 ms and whose accumulate 20 ms more for its pairs: the
    probe's cost per pair is those 20 ms over the pairs, not the scan's share."""
    import time

    scan_s, extra_s = 0.02, 0.02
    lm = types.SimpleNamespace(layer_indices=lambda layers, attention: [0, 1], n_heads=2,
                               device=torch.device("cpu"), scan_qk=lambda ids, layers, fn: time.sleep(scan_s))
    monkeypatch.setattr(dominant, "accumulate", lambda *a, **k: time.sleep(scan_s + extra_s))
    ids = torch.zeros(1, PAIR_WINDOW, dtype=torch.long)  # [1, PAIR_WINDOW]
    got = pair_cost(lm, ids)
    n = dominant.query_key_pairs(PAIR_WINDOW, PAIR_QUERIES, PAIR_TOP)
    assert got == pytest.approx(extra_s / n, rel=0.5)  # sleeps overrun by a few ms on a busy machine


def test_a_real_probe_times_pairs_only_when_the_plan_has_them():
    import ctxlens

    lm = ctxlens.load(SPEC)
    assert measure(lm, budget=0.3).pair == 0.0
    timed = measure(lm, budget=0.3, pairs=True)
    assert timed.pair >= 0 and math.isfinite(timed.pair)
    assert ("per (query, key) pair" in timed.describe()) == (timed.pair > 0)


def test_the_suites_pair_parts_are_the_parts_whose_units_state_pairs():
    from ctxlens.lm.info import read_info
    from ctxlens.profile.budget import configured
    from ctxlens.profile.suite import PARTS, Size

    info = read_info(SPEC)
    for part in PARTS:
        exp, _, config = configured(part, Size(256, 0.0), info)
        stated = any(w.pairs for unit in exp.plan(config) for w in plans.unit_work(exp, config, unit) or [])
        assert stated == part.pairs, part.name
