"""Post-RoPE q/k captures, RoPE pair contributions and head masking against independent truths."""

import copy

import pytest
import torch

from ctxlens.lm.families import FAMILIES
from ctxlens.metrics.rope import rope_pair_contributions
from tests.conftest import build_lm

QK_FAMILIES = sorted(f for f, fam in FAMILIES.items() if "qk" in fam.supports)
MASK_FAMILIES = sorted(f for f, fam in FAMILIES.items() if "head_mask" in fam.supports)


def _eager_probs(lm, ids) -> tuple:
    """Attention probabilities [batch, heads, seq, seq] per layer from transformers' eager attention."""
    model = copy.deepcopy(lm.model)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        return model(ids, output_attentions=True, use_cache=False).attentions


def _our_probs(lm, cap, layer: int, seq: int) -> torch.Tensor:
    module = lm.attention(layer)
    q, k = cap.queries[layer], cap.keys[layer]  # [batch, heads, seq, head_dim]
    logits = (q @ k.transpose(-1, -2)) * module.scaling  # [batch, heads, seq, seq]
    cap_value = getattr(lm.config, "attn_logit_softcapping", None)
    if cap_value:
        logits = torch.tanh(logits / cap_value) * cap_value
    qi, ki = torch.arange(seq)[:, None], torch.arange(seq)[None]
    allowed = ki <= qi
    window = getattr(module, "sliding_window", None)
    if window is None and getattr(lm.config, "layer_types", None) is None:  # mistral: every layer slides
        window = getattr(lm.config, "sliding_window", None)
    if window:
        allowed &= (qi - ki) < window
    return torch.softmax(logits.masked_fill(~allowed, float("-inf")), -1)


@pytest.mark.parametrize("family", QK_FAMILIES)
def test_softmax_of_captured_qk_equals_eager_attention(family, ids):
    lm = build_lm(family)
    layers = lm.attention_layers()
    cap = lm.capture(ids, qk=layers)
    eager = _eager_probs(lm, ids)  # hybrids report attention layers only
    eager = dict(zip(layers, eager)) if len(eager) == len(layers) else dict(enumerate(eager))
    for layer in layers:
        torch.testing.assert_close(_our_probs(lm, cap, layer, ids.shape[1]), eager[layer], rtol=1e-4, atol=1e-5)


def _pre_rope_qk(lm, layer: int, ids):
    """Pre-RoPE q and k [batch, seq, heads, head_dim] from the projections (test-side hooks)."""
    attn, hd, out = lm.attention(layer), lm.head_dim, {}
    if lm.family.name == "gpt_neox":
        def grab(m, a, o):  # fused [batch, seq, heads * 3 * head_dim]
            qkv = o.view(*o.shape[:2], lm.n_heads, 3 * hd)
            out["q"], out["k"] = qkv[..., :hd], qkv[..., hd:2 * hd]
        handles = [attn.query_key_value.register_forward_hook(grab)]
    else:
        heads = lambda o: o.view(*o.shape[:2], -1, hd)  # noqa: E731  [b, s, H * hd] -> [b, s, H, hd]
        handles = [attn.q_proj.register_forward_hook(lambda m, a, o: out.__setitem__("q", heads(o))),
                   attn.k_proj.register_forward_hook(lambda m, a, o: out.__setitem__("k", heads(o)))]
    with torch.no_grad():
        lm.model(ids, use_cache=False)
    for h in handles:
        h.remove()
    k = out["k"].repeat_interleave(lm.n_heads // out["k"].shape[2], dim=2)
    return out["q"], k


@pytest.mark.parametrize("family,layout", [("llama", "half"), ("gpt_neox", "half"), ("cohere", "interleaved")])
def test_pair_contributions_match_the_rotation_closed_form(family, layout, ids):
    """Pair i of q_m.k_n equals Re(zq conj(zk) e^{i(m-n)theta_i}) computed from pre-RoPE q, k."""
    lm = build_lm(family)
    assert lm.family.rope_layout == layout
    rot = lm.rotary_dims
    if family == "gpt_neox":
        assert rot == lm.head_dim // 4  # partial rotary
    cap = lm.capture(ids, qk=[0])
    q, k = cap.queries[0], cap.keys[0]  # [batch, heads, seq, head_dim] post-RoPE
    pairs, rest = rope_pair_contributions(q[:, :, :, None], k[:, :, None], layout=layout, rotary_dims=rot)
    # identity: contributions (times the scaling) sum to the logit
    logits = q @ k.transpose(-1, -2)
    torch.testing.assert_close(pairs.sum(-1) + rest, logits, rtol=1e-4, atol=1e-5)
    # independent truth from pre-RoPE vectors and the model's inverse frequencies
    qp, kp = _pre_rope_qk(lm, 0, ids)  # [batch, seq, heads, head_dim]
    half = rot // 2
    if layout == "half":
        a, b = torch.arange(half), torch.arange(half) + half
    else:
        a, b = torch.arange(0, rot, 2), torch.arange(1, rot, 2)
    zq, zk = torch.complex(qp[..., a], qp[..., b]), torch.complex(kp[..., a], kp[..., b])  # [batch, seq, heads, half]
    inv_freq = [m for n, m in lm.model.named_modules() if n.endswith("rotary_emb")][0].inv_freq
    dist = (torch.arange(ids.shape[1])[:, None] - torch.arange(ids.shape[1])[None]).float()  # [q, k]
    phase = torch.polar(torch.ones(()), dist[..., None] * inv_freq)  # [q, k, half]
    truth = (zq.permute(0, 2, 1, 3)[:, :, :, None] * zk.conj().permute(0, 2, 1, 3)[:, :, None] * phase).real
    torch.testing.assert_close(pairs, truth, rtol=1e-4, atol=1e-4)
    rest_truth = (qp[..., rot:].permute(0, 2, 1, 3) @ kp[..., rot:].permute(0, 2, 3, 1))
    torch.testing.assert_close(rest, rest_truth, rtol=1e-4, atol=1e-4)


def test_keys_expand_kv_heads_for_grouped_queries(ids):
    lm = build_lm("llama")
    cap = lm.capture(ids, qk=[1], query_positions=[-1], key_positions=range(10))
    assert cap.queries[1].shape == (2, 4, 1, 16)
    assert cap.kv_keys[1].shape == (2, 2, 10, 16)
    assert cap.keys[1].shape == (2, 4, 10, 16)
    torch.testing.assert_close(cap.keys[1][:, 1], cap.kv_keys[1][:, 0])


def _zero_columns(lm, layer: int, heads: list[int]) -> None:
    """Weight surgery: zero the output projection's inputs belonging to ``heads``."""
    proj, hd = lm.out_proj(layer), None
    with torch.no_grad():
        w = proj.weight
        if type(proj).__name__ == "Conv1D":  # gpt2: weight [in, out]
            hd = w.shape[0] // lm.n_heads
            for h in heads:
                w[h * hd:(h + 1) * hd] = 0
        else:  # Linear: weight [out, in]
            hd = w.shape[1] // lm.n_heads
            for h in heads:
                w[:, h * hd:(h + 1) * hd] = 0


@pytest.mark.parametrize("family", MASK_FAMILIES)
def test_masking_heads_equals_zeroing_their_output_projection_inputs(family, ids):
    lm = build_lm(family)
    layer = lm.attention_layers()[-1]
    with torch.no_grad():
        base = lm.model(ids, use_cache=False).logits
        with lm.mask_heads({layer: [0, 2]}):
            masked = lm.model(ids, use_cache=False).logits
        after = lm.model(ids, use_cache=False).logits
    surgery = copy.deepcopy(lm)
    _zero_columns(surgery, layer, [0, 2])
    with torch.no_grad():
        truth = surgery.model(ids, use_cache=False).logits
    torch.testing.assert_close(masked, truth, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(masked, base)
    torch.testing.assert_close(after, base, rtol=0, atol=0)  # hooks removed on exit


def test_head_mask_holds_during_generation():
    lm = build_lm("llama")
    prompt = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(3))
    surgery = copy.deepcopy(lm)
    _zero_columns(surgery, 1, [1, 3])
    kw = dict(max_new_tokens=10, do_sample=False, pad_token_id=0)
    with torch.no_grad(), lm.mask_heads({1: [1, 3]}):
        ours = lm.model.generate(prompt, **kw)
    with torch.no_grad():
        truth = surgery.model.generate(prompt, **kw)
    assert torch.equal(ours, truth)


def test_mask_heads_rejects_bad_heads_and_families():
    from ctxlens import CtxlensError

    lm = build_lm("llama")
    with pytest.raises(CtxlensError, match="Heads \\[9\\] do not exist"):
        with lm.mask_heads({0: [9]}):
            pass
    with pytest.raises(CtxlensError, match="head_mask"):
        with build_lm("mamba").mask_heads({0: [0]}):
            pass
