"""Prefix caches: a cut copy equals a fresh prefill of the shorter prefix and leaves the original
alone; the reuse check passes full-attention and Gemma-3-like caches and refuses the ones whose
continuation drifts or cannot be batched (decided on the model, not by its name)."""

from __future__ import annotations

import pytest
import torch

from ctxlens.lm.prefix_cache import copied, croppable, nbytes, prefill, reuse_problem
from tests.conftest import build_lm

IDS = torch.randint(3, 250, (40,), generator=torch.Generator().manual_seed(3)).tolist()


def test_a_cut_copy_is_the_prefill_of_the_shorter_prefix_and_the_original_is_untouched():
    lm = build_lm("llama")
    long, short = prefill(lm, IDS[:30]), prefill(lm, IDS[:20])
    keys = long.layers[0].keys.clone()  # [1, kv_heads, 30, head_dim]
    cut = copied(long, 20, 30, batch=3)
    for a, b in zip(cut.layers, short.layers):
        assert a.keys.shape == (3, *b.keys.shape[1:]) and torch.allclose(a.keys, b.keys.expand_as(a.keys), atol=1e-6)
        assert torch.allclose(a.values, b.values.expand_as(a.values), atol=1e-6)
    assert torch.equal(long.layers[0].keys, keys)
    # keys and values: layers x 2 x [1, kv_heads, 30, head_dim] float32
    cfg = lm.config
    assert nbytes(long) == cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * 30 * cfg.head_dim * 4


def test_sliding_window_caches_cannot_be_cut_back():
    assert croppable(prefill(build_lm("llama"), IDS))
    assert not croppable(prefill(build_lm("gemma3_text"), IDS))  # 5 of 6 layers keep their last 15 tokens


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gemma3", "gpt2"])
def test_reusable_caches_pass_the_check(family):
    assert reuse_problem(build_lm(family)) == ""


@pytest.mark.parametrize("family, why", [("mamba2", "fails"), ("mpt", "changes the logits"),
                                         ("recurrent_gemma", "no transformers Cache")])
def test_caches_that_do_not_continue_exactly_are_refused(family, why):
    assert why in reuse_problem(build_lm(family))
