"""SelfExtend and RoPE pair ablation against brute-force reimplementations built on each
family's own rotary code, and against identities (group size 1, window beyond the input)."""

import copy
import sys

import pytest
import torch

import ctxlens.lm.analysis.selfextend as se_mod
from ctxlens import CtxlensError
from ctxlens.lm.analysis.rope import rotary_modules
from ctxlens.lm.analysis.selfextend import SelfExtend, ablate_pairs, rotate, self_extend
from tests.conftest import build_lm

FAMILIES = ["llama", "gpt_neox", "cohere"]  # GQA + half pairs; partial rotary; interleaved pairs


def _rope_parts(lm):
    """The family's own rotary module and apply_rotary_pos_emb."""
    module = sys.modules[type(lm.attention(0)).__module__]
    return rotary_modules(lm.model)[0][1], module.apply_rotary_pos_emb


def _rotated(lm, x, positions):
    """x [B, heads, L, d] pre-RoPE -> rotated at ``positions`` [L] by the model's own code."""
    rot, apply = _rope_parts(lm)
    cos, sin = rot(x, positions[None])
    return apply(x, x, cos, sin)[0]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("yarn", [False, True])
def test_rotate_moves_a_post_rope_vector_to_another_position(family, yarn):
    lm = build_lm(family)
    if yarn:  # attention factor folded into cos/sin must survive the move
        lm.set_rope(scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8})
    x = torch.randn(1, 2, 12, lm.head_dim, generator=torch.Generator().manual_seed(0))
    pos = torch.arange(12)
    new = torch.tensor([0, 5, 2, 30, 4, 1, 9, 100, 8, 3, 11, 7])
    moved = rotate(_rotated(lm, x, pos), new - pos, rotary_modules(lm.model)[0][1].inv_freq,
                   lm.family.rope_layout, lm.rotary_dims)
    torch.testing.assert_close(moved, _rotated(lm, x, new), rtol=1e-4, atol=1e-5)


def _brute_force(lm, qp, kp, v, group, window, scaling):
    """SelfExtend written out: full L x L neighbour and grouped logits from pre-RoPE q/k."""
    n = qp.shape[2]
    pos = torch.arange(n)
    q, k = _rotated(lm, qp, pos), _rotated(lm, kp, pos)
    qg = _rotated(lm, qp, pos // group + window - window // group)
    kg = _rotated(lm, kp, pos // group)
    rep = qp.shape[1] // kp.shape[1]
    k, kg, v = (t.repeat_interleave(rep, dim=1) for t in (k, kg, v))
    dist = pos[:, None] - pos[None]
    logits = torch.where(dist < window, q @ k.transpose(-1, -2), qg @ kg.transpose(-1, -2)) * scaling
    probs = torch.softmax(logits.masked_fill(dist < 0, float("-inf")), -1)
    return (probs @ v).transpose(1, 2), q, _rotated(lm, kp, pos)


@pytest.mark.parametrize("family", FAMILIES)
def test_selfextend_attention_equals_brute_force(family, monkeypatch):
    monkeypatch.setattr(se_mod, "WORK_BYTES", 16 * 4 * 30 * 7)  # chunks of 7 queries
    lm = build_lm(family)
    g = torch.Generator().manual_seed(1)
    h, kvh, n, d = lm.n_heads, lm.n_kv_heads, 30, lm.head_dim
    qp = torch.randn(1, h, n, d, generator=g)
    kp, v = torch.randn(1, kvh, n, d, generator=g), torch.randn(1, kvh, n, d, generator=g)
    group, window, scaling = 3, 5, d ** -0.5
    truth, q, k = _brute_force(lm, qp, kp, v, group, window, scaling)
    ov = se_mod._Override(lm.model, lm.family.rope_layout, lm.rotary_dims, SelfExtend(group, window))
    module = lm.attention(0)
    ours, _ = se_mod._selfextend_attention(module, q, k, v, None, ov, scaling=scaling)
    torch.testing.assert_close(ours, truth, rtol=1e-4, atol=1e-5)
    last, _ = se_mod._selfextend_attention(module, q[:, :, -1:], k, v, None, ov, scaling=scaling)  # decoding step
    torch.testing.assert_close(last, truth[:, -1:], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(truth, _brute_force(lm, qp, kp, v, 1, window, scaling)[0], atol=1e-3)


def _logits(lm, ids):
    with torch.no_grad():
        return lm.model(ids, use_cache=False).logits


@pytest.mark.parametrize("family", ["llama", "gpt_neox", "cohere", "mistral", "gemma2"])
def test_group_size_one_or_a_window_beyond_the_input_is_the_original_model(family, ids):
    lm = build_lm(family)
    base = _logits(lm, ids)
    with self_extend(lm, 1, 4):
        torch.testing.assert_close(_logits(lm, ids), base, rtol=1e-4, atol=1e-5)
    with self_extend(lm, 4, ids.shape[1]):
        torch.testing.assert_close(_logits(lm, ids), base, rtol=1e-4, atol=1e-5)
    with self_extend(lm, 4, 8):
        grouped = _logits(lm, ids)
    torch.testing.assert_close(grouped[:, :8], base[:, :8], rtol=1e-4, atol=1e-5)  # all within the window
    assert (grouped[:, 8:] - base[:, 8:]).abs().max() > 1e-4
    torch.testing.assert_close(_logits(lm, ids), base, rtol=0, atol=0)  # removed on exit
    assert lm.model.config._attn_implementation == "ctxlens-" + ("eager" if family == "gemma2" else "sdpa")


def test_cached_generation_equals_uncached_greedy_steps():
    lm = build_lm("llama")
    prompt = torch.randint(3, 256, (1, 20), generator=torch.Generator().manual_seed(3))
    with self_extend(lm, 3, 6), torch.no_grad():
        out = lm.model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
        seq = prompt
        for _ in range(6):
            nxt = lm.model(seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
    assert torch.equal(out, seq)


def test_capture_sees_the_post_rope_qk_under_selfextend(ids):
    lm = build_lm("llama")
    plain = lm.capture(ids, qk=[1])
    with self_extend(lm, 4, 8):
        ext = lm.capture(ids, qk=[1])
    assert ext.queries[1].shape == plain.queries[1].shape
    # layer 1 reads layer 0's output, which SelfExtend leaves alone inside the window only
    torch.testing.assert_close(ext.queries[1][:, :, :8], plain.queries[1][:, :, :8], rtol=1e-4, atol=1e-5)
    assert (ext.queries[1][:, :, 8:] - plain.queries[1][:, :, 8:]).abs().max() > 1e-5


def _zero_q_rows(lm, pairs):
    """Weight surgery: zero the q_proj rows of the dims of ``pairs`` in every head (pre-RoPE)."""
    from ctxlens.metrics.rope import pair_index

    dims = pair_index(lm.rotary_dims, lm.family.rope_layout)[pairs].flatten()
    model = copy.deepcopy(lm.model)
    with torch.no_grad():
        for layer in lm.attention_layers():
            w = model.get_submodule(lm.family.layers)[layer].self_attn.q_proj.weight  # [H * d, hidden]
            for h in range(lm.n_heads):
                w[h * lm.head_dim + dims] = 0
    return model


@pytest.mark.parametrize("family", ["llama", "cohere"])
def test_ablating_pairs_equals_zeroing_their_query_projection_rows(family, ids):
    lm = build_lm(family)
    pairs = [1, 4, 6]
    truth = _zero_q_rows(lm, pairs)
    with ablate_pairs(lm, pairs):
        ours = _logits(lm, ids)
    with torch.no_grad():
        torch.testing.assert_close(ours, truth(ids, use_cache=False).logits, rtol=1e-4, atol=1e-5)
    assert (ours - _logits(lm, ids)).abs().max() > 1e-5


def test_ablation_and_selfextend_compose_and_undo(ids):
    lm = build_lm("llama")
    base = _logits(lm, ids)
    with ablate_pairs(lm, [0]), self_extend(lm, 2, 4):
        both = _logits(lm, ids)
        assert se_mod.active(lm) == SelfExtend(2, 4)
    assert (both - base).abs().max() > 1e-5
    torch.testing.assert_close(_logits(lm, ids), base, rtol=0, atol=0)
    assert se_mod.active(lm) is None


def test_errors():
    lm = build_lm("llama")
    with pytest.raises(CtxlensError, match="selfextend:G:W"):
        with self_extend(lm, 0, 4):
            pass
    with pytest.raises(CtxlensError, match="does not support the 'rope'"):
        with self_extend(build_lm("mamba"), 2, 4):
            pass
    with pytest.raises(CtxlensError, match="pairs 0..7"):
        with ablate_pairs(lm, [8]):
            pass
