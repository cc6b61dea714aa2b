"""Suffix perplexity's standard error over windows, against transformers' own forward."""

import math

import numpy as np
import torch

from ctxlens.probes.perplexity import suffix_perplexity
from tests.conftest import build_lm


def test_suffix_nll_and_its_standard_error_match_a_plain_forward():
    lm = build_lm("llama")
    windows = torch.randint(0, lm.vocab_size, (5, 40), generator=torch.Generator().manual_seed(0))  # [5, 40]
    got = suffix_perplexity(lm, windows, suffix_len=8, batch_size=2)
    with torch.no_grad():
        logits = lm.model(windows).logits.double()  # [5, 40, V]
    logp = torch.log_softmax(logits[:, -9:-1], dim=-1)  # predictions of the last 8 tokens: [5, 8, V]
    nll = -logp.gather(-1, windows[:, -8:, None]).squeeze(-1)  # [5, 8]
    per_window = nll.mean(dim=1).numpy()  # [5]
    assert math.isclose(got["nll"], float(nll.mean()), rel_tol=1e-5)
    assert math.isclose(got["nll_se"], float(per_window.std(ddof=1) / math.sqrt(5)), rel_tol=1e-4)
    assert suffix_perplexity(lm, windows[:1], suffix_len=8, batch_size=2)["nll_se"] is None
    assert np.isfinite(got["ppl"])


def test_suffix_ppl_rows_hold_each_sequences_nll_paired_across_lengths():
    from ctxlens.experiments import suffix_ppl as E
    from ctxlens.experiments.base import make_config

    lm = build_lm("llama")
    config = make_config(E.Config, {"source": "random", "lengths": [24, 48], "n_sequences": 3, "suffix_len": 8,
                                    "batch_size": 2})
    cache, rows = {}, {}
    for unit in E.plan(config):
        rows[unit["length"]] = E.run(lm, config, unit, cache)
    ids = E.sx.suffix_windows(lm, config, config.lengths, cache)
    for length, got in rows.items():
        summary, seqs = got[0], [r for r in got if r.get("stage") == "sequence"]
        assert "stage" not in summary and [r["sequence"] for r in seqs] == [0, 1, 2]
        windows = ids.at(length)  # [3, length]
        with torch.no_grad():
            logp = torch.log_softmax(lm.model(windows).logits.double()[:, -9:-1], dim=-1)  # [3, 8, V]
        per = (-logp.gather(-1, windows[:, -8:, None]).squeeze(-1)).mean(1)  # [3]
        for r, want in zip(seqs, per.tolist()):
            assert math.isclose(r["sequence_nll"], want, rel_tol=1e-5)
        assert math.isclose(summary["nll"], float(per.mean()), rel_tol=1e-5)
        assert math.isclose(summary["nll_se"], float(per.std() / math.sqrt(3)), rel_tol=1e-4)
    # sequence i ends in the same suffix tokens at both lengths: the design is paired
    assert torch.equal(ids.at(24)[:, -8:], ids.at(48)[:, -8:])
