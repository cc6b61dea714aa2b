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
