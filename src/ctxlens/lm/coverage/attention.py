"""The coverage checks on attention: captured q/k, head masking and ``set_rope``.

- ``qk``:         softmax of captured post-RoPE q k^T (scaled, soft-capped, causal / sliding mask,
                  attention sinks) vs transformers' eager attention probabilities;
- ``head_mask``:  ``lm.mask_heads`` logits vs the model with that head's output-projection
                  weight columns zeroed (the rope-distance paper, Section 5);
- ``rope``:       ``lm.set_rope(theta=...)`` logits vs a model built from the edited config with
                  the same weights (the rope-distance paper, Section 4.2.2).

Each is ``n/a`` for a model without softmax attention (``rope``: without a rotary embedding).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, cast

import torch

from ctxlens.lm.analysis.rope import rotary_modules
from ctxlens.lm.attention import scaling_of
from ctxlens.lm.coverage.probe import Builder, Check, check_close, logits_of, name_of_module, unsupported

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.model import LM

# -- post-RoPE q/k vs eager attention ------------------------------------------------------------------
_Q_PROJECTIONS = ("q_proj", "qkv_proj", "c_attn", "query_key_value", "Wqkv", "q_a_proj", "query")


def has_attention(model: torch.nn.Module) -> bool:
    """Any softmax-attention module (class name with 'Attention', not linear attention)."""
    return any("Attention" in type(m).__name__ and "Linear" not in type(m).__name__
               and any(hasattr(m, a) for a in _Q_PROJECTIONS)
               for m in model.modules())


def sliding_window(module: torch.nn.Module) -> int | None:
    """The module's window: its own attribute, else its layer type in the config, else the config's."""
    if hasattr(module, "sliding_window"):
        return cast("int | None", module.sliding_window)  # a foreign attribute (Module says Tensor | Module)
    config = getattr(module, "config", None)
    types = getattr(config, "layer_types", None)
    if types is not None and getattr(module, "layer_idx", None) is not None:
        return getattr(config, "sliding_window", None) if types[module.layer_idx] == "sliding_attention" else None
    return getattr(config, "sliding_window", None)


def probabilities_from_qk(q: torch.Tensor, k: torch.Tensor, module: torch.nn.Module,
                          allowed: torch.Tensor | None = None) -> torch.Tensor:
    """[heads, n, n] softmax(q k^T * scaling) with the module's soft-cap, mask and sinks.

    q, k: [heads, n, head_dim] post-RoPE over positions 0..n-1 (k with kv heads repeated).
    allowed: [n, n] or [heads, n, n] bool mask (default: causal, with the module's sliding window).
    """
    n = q.shape[1]
    scores = q.float() @ k.float().transpose(-1, -2) * scaling_of(module)
    config = getattr(module, "config", None)
    cap = getattr(module, "attn_logit_softcapping", None) or getattr(config, "attn_logit_softcapping", None)
    if cap:
        scores = torch.tanh(scores / cap) * cap
    if allowed is None:
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        allowed = j <= i
        window = sliding_window(module)
        if window:
            allowed = allowed & (j > i - int(window))
    scores = scores.masked_fill(~allowed, float("-inf"))
    sinks = getattr(module, "sinks", None)
    if isinstance(sinks, torch.Tensor):
        sink = sinks.float().reshape(-1, 1, 1).expand(-1, n, 1)
        return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    return torch.softmax(scores, dim=-1)


def _eager_probabilities(model: torch.nn.Module, module_name: str, ids: torch.Tensor) -> torch.Tensor:
    """[heads, n, n] attention probabilities of ``module_name`` in an eager forward."""
    seen: dict[str, torch.Tensor | None] = {}

    def hook(m: torch.nn.Module, args: tuple[object, ...], out: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        seen["p"] = out[1]  # eager attention returns (output, probabilities [batch, heads, n, n])

    handle = model.get_submodule(module_name).register_forward_hook(hook)
    try:
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False, output_attentions=True)
    finally:
        handle.remove()
    probabilities = seen.get("p")
    if probabilities is None:
        raise RuntimeError(f"eager attention of {module_name} returned no probabilities")
    return probabilities[0]


def _attention_layers(lm: LM, analysis: str) -> list[int] | Check:
    """The adapter's attention layers, or the verdict that ends an attention check before it starts
    (no attention: n/a; the adapter declined ``analysis``; attention but no layer found: fail)."""
    if not has_attention(lm.model):
        return Check("n/a", "the model has no softmax attention")
    declined = unsupported(lm, analysis)
    if declined:
        return declined
    layers = lm.attention_layers()
    return layers or Check("fail", "the model has attention but the adapter finds no attention layer")


def check_qk(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    layers = _attention_layers(lm, "qk")
    if isinstance(layers, Check):
        return layers
    eager = b.from_config(copy.deepcopy(b.model().config), attn_implementation="eager")
    for layer in layers:
        module = lm.attention(layer)
        cap = lm.capture(ids, qk=[layer])
        want = _eager_probabilities(eager, name_of_module(lm.model, module), ids)  # [heads, n, n]
        # the mask (causal, sliding, chunked ...) is read off the eager probabilities: what is checked is q and k
        got = probabilities_from_qk(cap.queries[layer][0], cap.keys[layer][0], module, allowed=want > 0)
        if isinstance(getattr(module, "sinks", None), torch.Tensor):  # any sink formula scales whole rows
            got, want = got / got.sum(-1, keepdim=True), want / want.sum(-1, keepdim=True)
        res = check_close(got, want, f"layer {layer} probabilities")
        if res.status != "pass":
            return res
    return Check("pass", f"layers {layers}")


# -- head masking vs zeroed output-projection columns ----------------------------------------------------
def _zero_head_columns(proj: torch.nn.Module, head: int, n_heads: int) -> None:
    """Zero the weights that read head ``head`` of the projection's input."""
    w = cast(torch.Tensor, proj.weight)  # Linear: [out, in]; GPT-2's Conv1D: [in, out]
    conv1d = type(proj).__name__ == "Conv1D"
    width = (w.shape[0] if conv1d else w.shape[1]) // n_heads
    with torch.no_grad():
        if conv1d:
            w[head * width:(head + 1) * width, :] = 0
        else:
            w[:, head * width:(head + 1) * width] = 0


def check_head_mask(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    layers = _attention_layers(lm, "head_mask")
    if isinstance(layers, Check):
        return layers
    layer, head = layers[-1], lm.n_heads - 1
    with lm.mask_heads({layer: [head]}):
        got = logits_of(lm.model, ids)
    ref = b.model()
    attn = lm.attention(layer)
    has_config = hasattr(attn, "config")
    own = (getattr(attn, "num_heads", 0) or getattr(attn.config, "num_attention_heads", 0)) if has_config else 0
    n_heads = int(own) or lm.n_heads
    _zero_head_columns(ref.get_submodule(name_of_module(lm.model, lm.out_proj(layer))), head, n_heads)
    want = logits_of(ref, ids)
    if torch.allclose(want, logits_of(b.model(), ids)):
        return Check("fail", f"zeroing head {head} of layer {layer} changes nothing; the check cannot tell")
    res = check_close(got, want, f"layer {layer} head {head} logits")
    return Check("pass", f"layer {layer} head {head}") if res.status == "pass" else res


# -- set_rope vs a model built from the edited config ------------------------------------------------------
def _thetas(params: object) -> list[float]:
    """Every rope_theta in a config's rope_parameters (one dict, or one per layer type)."""
    if not isinstance(params, dict):
        return []
    if "rope_theta" in params:
        return [float(params["rope_theta"])]
    return [t for p in params.values() for t in _thetas(p)]


def _text(config: PretrainedConfig) -> PretrainedConfig:
    """The config that holds the RoPE parameters (the text config of a multimodal wrapper)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def check_rope(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    if not rotary_modules(lm.model):  # rope_parameters alone (granitemoehybrid's NoPE default) rotate nothing
        return Check("n/a", "the model has no rotary embedding")
    declined = unsupported(lm, "rope")
    if declined:
        return declined
    original = copy.deepcopy(b.model().config)
    theta = 4.0 * max(_thetas(_text(original).rope_parameters) or [10000.0])
    params = lm.set_rope(theta=theta)
    if theta not in _thetas(params):
        return Check("fail", f"set_rope(theta={theta:g}) returned parameters without that theta: {params}")
    got = logits_of(lm.model, ids)
    edited = copy.deepcopy(original)
    old = _text(original).rope_parameters
    if "rope_theta" in old:  # one RoPE for every layer
        _text(edited).rope_parameters = copy.deepcopy(params)
    else:  # a RoPE per layer type: set_rope's default edits the global layers (every type without one)
        present = set(getattr(_text(original), "layer_types", None) or old)  # types some layer has
        want_types = [t for t in old if old[t] is not None and t == "full_attention" and t in present] or \
            [t for t in old if old[t] is not None and t in present]
        if sorted(params) != sorted(want_types):
            return Check("fail", f"set_rope's default changed layer types {sorted(params)}, not {want_types}")
        new = copy.deepcopy(dict(old))
        for t in want_types:
            new[t] = {**new[t], "rope_theta": theta}
        _text(edited).rope_parameters = new
    want = logits_of(b.from_config(edited), ids)
    if torch.allclose(want, logits_of(b.model(), ids)):
        return Check("fail", f"theta {theta:g} changes nothing at {ids.shape[1]} tokens; the check cannot tell")
    res = check_close(got, want, f"logits at theta {theta:g}")
    return Check("pass", f"theta {theta:g}") if res.status == "pass" else res
