"""``loss-vs-length`` and ``intrinsic-entropy`` (the intrinsic-entropy paper, Section 2.2.2, Appendix C) on a tiny
random config of every supported family: rows are tidy, finite, and the loss at the longest visible length
equals the model's own cross-entropy on that window (an independent truth from full logits)."""

import math

import pytest
import torch

from ctxlens.experiments import get_experiment, make_config
from ctxlens.lm.families import FAMILIES
from tests.conftest import build_lm


def _rows(name, lm, **options):
    exp = get_experiment(name)
    config = make_config(exp.Config, options)
    cache = {}
    return [dict(unit, **r) for unit in exp.plan(config) for r in exp.run(lm, config, unit, cache)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_scaling_experiments_on_every_family(family):
    lm = build_lm(family)
    rows = _rows("loss-vs-length", lm, source="random", lengths=[2, 4, 8], n_samples=2, n_scored=3)
    measured = [r for r in rows if r["stage"] == "measure"]
    assert {r["length"] for r in measured} == {2, 4, 8}
    assert all(r["flag"] is None and math.isfinite(r["ce"]) and r["ce"] > 0 for r in measured), measured
    fit = [r for r in rows if r["stage"] == "fit"]
    assert {r["quantity"] for r in fit} >= {"C0", "C", "gamma", "r2"}

    rows = _rows("intrinsic-entropy", lm, source="random", lengths=[4, 8], n_samples=12, entropy_n=[2],
                 thresholds=[0.05], eigen_rows=2, kde=False)
    ce = [r for r in rows if r.get("quantity") == "ce" and r["stage"] == "measure"]
    assert len(ce) == 2 and all(math.isfinite(r["value"]) for r in ce)
    assert all(isinstance(r["value"], int) for r in rows if r.get("quantity") == "intrinsic_dimension")


@pytest.mark.parametrize("family", ["llama", "mamba2", "gpt2", "recurrent_gemma"])
def test_longest_visible_length_matches_full_logits(family):
    """With l = the whole window, the scored loss is transformers' own loss of the last token."""
    from ctxlens.data.sources import open_source
    from ctxlens.data.windows import token_windows
    from ctxlens.experiments.loss_vs_length import Config, plan, run

    lm = build_lm(family)
    config = make_config(Config, {"source": "random", "lengths": [6], "n_samples": 1, "n_scored": 1, "seed": 3})
    unit = plan(config)[0]
    row = run(lm, config, unit, {})[0]
    ids = token_windows(open_source("random"), None, 7, 1, seed=3, vocab_size=lm.vocab_size)  # [1, 7]
    with torch.no_grad():
        logits = lm.model(ids[:, :6]).logits[0, -1].float()
    expected = float(torch.nn.functional.cross_entropy(logits[None], ids[0, 6:7]))
    assert row["ce"] == pytest.approx(expected, rel=1e-4)
