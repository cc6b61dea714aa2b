"""Gemma 3's post-RoPE q/k, captured by ctxlens, give transformers' eager attention probabilities
on a sliding-window layer (local RoPE base 1e4, window 512) and on a global layer (base 1e6).

The sequence (600 tokens) is longer than the window, so the sliding layer's mask cuts keys off.
"""

import copy

import pytest
import torch

pytestmark = pytest.mark.real
SLIDING, GLOBAL = 4, 5  # Gemma 3: five sliding-window layers, then one global layer
SEQ = 600


def _probs_from_capture(lm, cap, layer: int) -> torch.Tensor:
    """softmax(q k^T * scaling) under the causal (and, on a sliding layer, window) mask: [1, heads, seq, seq]."""
    q, k = cap.queries[layer], cap.keys[layer]  # [1, heads, seq, head_dim], kv heads repeated
    logits = (q @ k.transpose(-1, -2)) * lm.config.query_pre_attn_scalar ** -0.5
    qi, ki = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None]
    allowed = ki <= qi
    if lm.config.layer_types[layer] == "sliding_attention":
        allowed &= qi - ki < lm.config.sliding_window
    return torch.softmax(logits.masked_fill(~allowed, float("-inf")), -1)


def _eager_probs(lm, ids) -> tuple:
    """transformers' eager attention probabilities of the first GLOBAL+1 layers (later ones cannot matter)."""
    eager = copy.deepcopy(lm.model)
    eager.set_attn_implementation("eager")
    eager.model.layers = eager.model.layers[:GLOBAL + 1]
    with torch.no_grad():
        return eager.model(ids, output_attentions=True, use_cache=False).attentions


def test_captured_qk_give_eager_attention_on_sliding_and_global_layers(gemma3):
    assert gemma3.config.layer_types[SLIDING] == "sliding_attention"
    assert gemma3.config.layer_types[GLOBAL] == "full_attention"
    assert gemma3.config.sliding_window < SEQ
    ids = torch.randint(10, 50_000, (1, SEQ), generator=torch.Generator().manual_seed(0))
    ids[0, 0] = gemma3.tokenizer.bos_token_id
    cap = gemma3.capture(ids, qk=[SLIDING, GLOBAL])
    eager = _eager_probs(gemma3, ids)
    for layer in (SLIDING, GLOBAL):
        torch.testing.assert_close(_probs_from_capture(gemma3, cap, layer), eager[layer], rtol=1e-4, atol=1e-5)
    far = SEQ - gemma3.config.sliding_window  # keys before this are outside the last query's window
    assert eager[SLIDING][0, :, -1, :far].abs().max() == 0  # the window mattered ...
    assert eager[GLOBAL][0, :, -1, :far].sum(-1).min() > 1e-3  # ... and the global layer sees those keys
