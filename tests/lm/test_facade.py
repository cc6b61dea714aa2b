"""The LM facade's small methods the experiments use instead of reaching into the model."""

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.lm import attention as attn_fn
from tests.conftest import build_lm


def test_layer_indices_resolve_one_convention():
    lm = build_lm("llama")  # 2 layers
    assert lm.layer_indices(None) == lm.layer_indices([]) == [0, 1]
    assert lm.layer_indices([-1, 0, 1]) == [0, 1]
    assert lm.layer_indices(None, attention=True) == lm.attention_layers()
    with pytest.raises(CtxlensError, match=r"Layer 2 does not exist .*\[-2, 1\]"):
        lm.layer_indices([2])


def test_layer_indices_refuse_layers_without_attention():
    lm = build_lm("jamba")  # attention and mamba layers
    mixers = [i for i in range(lm.n_layers) if i not in lm.attention_layers()]
    assert mixers and lm.layer_indices(None) == list(range(lm.n_layers))
    with pytest.raises(CtxlensError, match="have no attention"):
        lm.layer_indices(mixers[:1], attention=True)


@pytest.mark.parametrize("family", ["llama", "gemma2"])  # gemma2 soft-caps its final logits
def test_head_logits_and_nll_match_the_model_head(family, ids):
    lm = build_lm(family)
    with torch.no_grad():
        logits = lm.model(ids, use_cache=False).logits  # [B, L, vocab]
    hidden = lm.final_hidden(ids)  # [B, L, d]
    torch.testing.assert_close(lm.head_logits(hidden), logits, rtol=1e-4, atol=1e-4)
    nll = lm.nll_from_hidden(hidden[:, :-1], ids[:, 1:])  # [B, L - 1]
    torch.testing.assert_close(nll, lm.token_losses(ids))
    with pytest.raises(CtxlensError, match="Token ids must lie"):
        lm.final_hidden(torch.full((1, 4), lm.vocab_size))


def test_last_states_equal_the_final_hidden_and_the_block_capture(ids):
    lm = build_lm("llama")
    final, block = lm.last_states(ids, block=0)  # [B, d] each
    torch.testing.assert_close(final, lm.final_hidden(ids)[:, -1])
    torch.testing.assert_close(block, lm.capture(ids, block=[0], positions=[-1]).block[0][:, 0])
    assert lm.last_states(ids)[1] is None


def test_an_early_stop_leaves_no_hook_or_recorder_behind(ids):
    lm = build_lm("llama")
    seen = []
    lm.scan_qk(ids[:1], [0], lambda view: seen.append((view.layer, tuple(view.q.shape))))
    assert seen == [(0, (lm.n_heads, ids.shape[1], lm.head_dim))]
    lm.capture(ids, residual=[0], qk=[0])
    assert not attn_fn.RECORDERS
    assert all(not layer._forward_hooks and not layer._forward_pre_hooks for layer in lm.layers)


def test_rope_snapshot_restores_parameters_limit_and_flag(ids):
    lm = build_lm("llama")
    before, loss = lm.rope_snapshot(), lm.token_losses(ids)
    lm.set_rope(scaling={"rope_type": "dynamic", "factor": 4.0}, max_positions=16)
    assert lm.extrapolate and lm.rope_snapshot() != before
    lm.restore_rope(before)
    assert lm.rope_snapshot() == before and not lm.extrapolate
    torch.testing.assert_close(lm.token_losses(ids), loss)
