"""SelfExtend and RoPE pair ablation: positional overrides inside the attention function.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 2.2, studies SelfExtend (Jin et al. 2024, "LLM Maybe LongLM") as a length extrapolation
method without fine-tuning: a query at position m attends to a key at position n with the
ordinary relative distance m - n when m - n < W (neighbour attention), and otherwise with the
grouped distance (m // G + W - W // G) - n // G (grouped attention), so that distances never
seen in training are mapped by floor division onto seen ones. Section 4.2.3 (Figure 4) removes
chosen RoPE frequency pairs from q and k.

Both act on post-RoPE q and k, which is all the attention function sees. A rotation is
orthogonal and adds angles, so the q of position m becomes the q of position p by rotating
each frequency pair i by (p - m) * theta_i (YaRN's attention factor, folded into q and k,
is kept). Installing either override routes the model's attention through
``ctxlens-positional``: it applies the edit, records q/k for active recorders
(``ctxlens.lm.attention``), and either runs SelfExtend, chunked over queries so that no
L x L matrix exists, or hands over to the implementation the model had before.

Positions are taken as 0..k_len-1 for keys and the last q_len of those for queries
(unpadded inputs, prefill or cached generation). Each layer rotates with its own inverse
frequencies (per layer type on local/global hybrids such as Gemma 3: base 1e4 on sliding
layers, 1e6 on global ones).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

import ctxlens.lm.analysis.rope as _rope
import ctxlens.lm.attention as attn_fn
from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from ctxlens.lm.analysis.face import LMFace

NAME = "ctxlens-positional"
_ATTR = "_ctxlens_positional"  # per attention module: _Override
_PREVIOUS = "_ctxlens_previous_attn"  # on the model: implementation to restore and fall back to
WORK_BYTES = 256 * 2**20  # score working set per chunk of queries


@dataclass(frozen=True)
class SelfExtend:
    """Group size G (floor division of distant positions) and neighbour window W."""

    group: int
    window: int

    def __post_init__(self) -> None:
        if self.group < 1 or self.window < 1:
            raise CtxlensError(
                f"SelfExtend needs a group size and a neighbour window of at least 1, got G={self.group}, "
                f"W={self.window}; write selfextend:G:W, e.g. selfextend:4:128."
            )

    def query_positions(self, pos: torch.Tensor) -> torch.Tensor:
        """Grouped positions of queries at ``pos`` [n]."""
        return pos // self.group + (self.window - self.window // self.group)

    def key_positions(self, pos: torch.Tensor) -> torch.Tensor:
        """Grouped positions of keys at ``pos`` [n]."""
        return pos // self.group

    def distance(self, qpos: torch.Tensor, kpos: torch.Tensor) -> torch.Tensor:
        """Relative distance the model uses between queries at ``qpos`` and keys at ``kpos``
        (broadcast against each other, e.g. [c, 1] and [1, n] -> [c, n])."""
        true = qpos - kpos
        grouped = self.query_positions(qpos) - self.key_positions(kpos)
        return torch.where(true < self.window, true, grouped)


def rotate(x: torch.Tensor, shift: torch.Tensor, inv_freq: torch.Tensor, layout: str, rotary_dims: int) -> torch.Tensor:
    """x [..., head_dim] post-RoPE, shift [...] (broadcast to x.shape[:-1]) -> x moved by ``shift``
    positions: frequency pair i rotated by shift * inv_freq[i]; non-rotary dims unchanged."""
    idx = _rope.pair_index(rotary_dims, layout).to(x.device)  # [n_pairs, 2]
    angle = shift.to(x.device, torch.float64)[..., None] * inv_freq.to(x.device, torch.float64)  # [..., n_pairs]
    cos, sin = angle.cos().float(), angle.sin().float()
    a, b = x[..., idx[:, 0]].float(), x[..., idx[:, 1]].float()  # [..., n_pairs]
    out = x.clone()
    out[..., idx[:, 0]] = (a * cos - b * sin).to(x.dtype)
    out[..., idx[:, 1]] = (b * cos + a * sin).to(x.dtype)
    return out


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q [B, H, c, d] . k [B, KVH, n, d] -> [B, H, c, n] (grouped queries share a kv head, no copy)."""
    b, h, c, d = q.shape
    kvh = k.shape[1]
    out = q.reshape(b, kvh, (h // kvh) * c, d) @ k.transpose(-1, -2)  # [B, KVH, G*c, n]
    return out.view(b, h, c, k.shape[2])


def _weighted(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """p [B, H, c, n] @ v [B, KVH, n, d] -> [B, H, c, d]."""
    b, h, c, n = p.shape
    kvh = v.shape[1]
    return (p.reshape(b, kvh, (h // kvh) * c, n) @ v).view(b, h, c, v.shape[-1])


@dataclass
class _Override:
    """What ``ctxlens-positional`` does for one attention module."""

    model: torch.nn.Module  # the *ForCausalLM (a plain reference: not registered as a submodule)
    layout: str
    rotary_dims: int
    selfextend: SelfExtend | None = None
    edit: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None
    layer: int = 0  # the block this module belongs to: its layer type picks the inverse frequencies
    under: str = ""  # dotted path of the text model holding the rotary module

    def inv_freq(self) -> torch.Tensor:
        """[n_pairs] the layer's current inverse frequencies (looked up each call: set_rope rebuilds the module)."""
        return _rope.inv_freq(self.model, self.layer, self.under)


def selfextend_scores(q: torch.Tensor, k: torch.Tensor, qpos: torch.Tensor, kpos: torch.Tensor, se: SelfExtend,
                      inv_freq: torch.Tensor, layout: str, rotary_dims: int,
                      k_grouped: torch.Tensor | None = None) -> torch.Tensor:
    """Unscaled logits [B, H, c, n] of post-RoPE q [B, H, c, d] at qpos [c] against k [B, KVH, n, d]
    at kpos [n] under SelfExtend: neighbour scores below the window, grouped ones beyond it.
    ``k_grouped`` (k moved to its grouped positions) may be passed to reuse it across chunks."""
    if k_grouped is None:
        k_grouped = rotate(k, se.key_positions(kpos) - kpos, inv_freq, layout, rotary_dims)
    q_grouped = rotate(q, se.query_positions(qpos) - qpos, inv_freq, layout, rotary_dims)
    near = (qpos[:, None] - kpos[None]) < se.window  # [c, n]
    return torch.where(near, scores(q, k), scores(q_grouped, k_grouped))


def _selfextend_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, ov: _Override, scaling: float | None = None,
                          softcap: float | None = None) -> tuple[torch.Tensor, None]:
    """query [B, H, q, d], key/value [B, KVH, k, d] post-RoPE -> output [B, q, H, d]."""
    b, h, q_len, d = query.shape
    k_len = key.shape[2]
    dev = query.device
    qpos_all, kpos = torch.arange(k_len - q_len, k_len, device=dev), torch.arange(k_len, device=dev)
    scaling = d ** -0.5 if scaling is None else scaling
    inv_freq, se = ov.inv_freq(), cast(SelfExtend, ov.selfextend)  # set: the caller checked
    k_grouped = rotate(key, se.key_positions(kpos) - kpos, inv_freq, ov.layout, ov.rotary_dims)
    out = torch.empty(b, h, q_len, value.shape[-1], dtype=value.dtype, device=dev)
    chunk = max(1, WORK_BYTES // (4 * 4 * b * h * k_len))
    for s in range(0, q_len, chunk):
        qpos = qpos_all[s:s + chunk]
        logits = selfextend_scores(query[:, :, s:s + chunk], key, qpos, kpos, se, inv_freq, ov.layout,
                                   ov.rotary_dims, k_grouped).float() * scaling  # [B, H, c, k]
        if softcap is not None:
            logits = torch.tanh(logits / softcap) * softcap
        logits = logits.masked_fill(qpos[:, None] < kpos[None], float("-inf"))
        if attention_mask is not None:
            m = attention_mask[:, :, s:s + chunk] if attention_mask.shape[2] > 1 else attention_mask
            m = m[..., :k_len]  # [B, 1, c or 1, k]
            logits = logits.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else logits + m.float()
        probs = torch.softmax(logits, dim=-1).to(value.dtype)
        out[:, :, s:s + chunk] = _weighted(probs, value)
    return out.transpose(1, 2).contiguous(), None


def _positional_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, *args: Any, **kwargs: Any
                          ) -> tuple[torch.Tensor, torch.Tensor | None]:
    ov: _Override | None = getattr(module, _ATTR, None)
    if ov is not None and ov.edit is not None:
        query, key = ov.edit(query, key)
    if ov is None or ov.selfextend is None:  # the previous implementation records and attends
        previous = getattr(ov.model if ov else None, _PREVIOUS, None) or attn_fn.PREFIX + "sdpa"
        return ALL_ATTENTION_FUNCTIONS[previous](module, query, key, value, attention_mask, *args, **kwargs)
    for rec in attn_fn.RECORDERS:
        rec.record(module, query, key)
    return _selfextend_attention(module, query, key, value, attention_mask, ov,
                                 scaling=kwargs.get("scaling"), softcap=kwargs.get("softcap"))


def _register() -> None:
    if NAME not in ALL_ATTENTION_FUNCTIONS.valid_keys():
        ALL_ATTENTION_FUNCTIONS.register(NAME, _positional_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def _overrides(lm: LMFace) -> list[_Override]:
    """The _Override of every attention module of ``lm``, created on first use."""
    lm.family.require("rope", lm.name)
    out = []
    for layer in lm.attention_layers():
        module = lm.attention(layer)
        if getattr(module, _ATTR, None) is None:
            ov = _Override(lm.model, cast(str, lm.family.rope_layout), lm.layer_rotary_dims(layer), layer=layer,
                           under=lm.text_prefix)
            object.__setattr__(module, _ATTR, ov)
        out.append(getattr(module, _ATTR))
    return out


def _install(lm: LMFace) -> None:
    _register()
    current = lm.model.config._attn_implementation
    if "flash" in str(current):
        raise CtxlensError(f"SelfExtend and RoPE-pair ablation need q and k before attention, which "
                           f"'{current}' does not expose; load the model with --attn-implementation sdpa.")
    if current != NAME:
        object.__setattr__(lm.model, _PREVIOUS, current)
        lm.model.set_attn_implementation(NAME)


def _uninstall_if_idle(lm: LMFace) -> None:
    mods = [lm.attention(layer) for layer in lm.attention_layers()]
    overrides = [getattr(m, _ATTR, None) for m in mods]
    if any(ov is not None and (ov.selfextend is not None or ov.edit is not None) for ov in overrides):
        return
    for m in mods:
        if hasattr(m, _ATTR):
            object.__delattr__(m, _ATTR)
    previous = getattr(lm.model, _PREVIOUS, None)
    if previous is not None:
        lm.model.set_attn_implementation(previous)
        object.__delattr__(lm.model, _PREVIOUS)


def active(lm: LMFace) -> SelfExtend | None:
    """The SelfExtend applied to ``lm``, or None."""
    for layer in lm.attention_layers():
        ov = getattr(lm.attention(layer), _ATTR, None)
        if ov is not None and ov.selfextend is not None:
            return ov.selfextend
    return None


@contextlib.contextmanager
def self_extend(lm: LMFace, group: int, window: int) -> Iterator[SelfExtend]:
    """Within the block every attention layer of ``lm`` uses SelfExtend(group, window)."""
    se = SelfExtend(int(group), int(window))
    ovs = _overrides(lm)
    _install(lm)
    for ov in ovs:
        ov.selfextend = se
    try:
        yield se
    finally:
        for ov in ovs:
            ov.selfextend = None
        _uninstall_if_idle(lm)


def zero_pairs_edit(pairs: Sequence[int], layout: str, rotary_dims: int) -> Callable:
    """A q/k edit that zeroes the dims of frequency pairs ``pairs`` in q [..., d] and k [..., d]."""
    idx = _rope.pair_index(rotary_dims, layout)[list(pairs)].flatten()  # [2 * n_removed]

    def edit(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = q.clone(), k.clone()
        q[..., idx.to(q.device)] = 0
        k[..., idx.to(k.device)] = 0
        return q, k

    return edit


@contextlib.contextmanager
def ablate_pairs(lm: LMFace, pairs: Sequence[int], layers: Sequence[int] | None = None) -> Iterator[None]:
    """Within the block, RoPE frequency pairs ``pairs`` are zeroed in post-RoPE q and k of
    ``layers`` (default: every attention layer), so they contribute nothing to any logit."""
    ovs = _overrides(lm)
    chosen = set(lm.attention_layers() if layers is None else layers)
    targets = [ov for layer, ov in zip(lm.attention_layers(), ovs) if layer in chosen]
    for ov in targets:
        bad = [p for p in pairs if not 0 <= p < ov.rotary_dims // 2]
        if bad:
            raise CtxlensError(f"RoPE pairs {bad} do not exist in layer {ov.layer}; it has pairs "
                               f"0..{ov.rotary_dims // 2 - 1}.")
    _install(lm)
    for ov in targets:  # each layer's own pair layout (partial rotary may differ per layer type)
        ov.edit = zero_pairs_edit(pairs, cast(str, lm.family.rope_layout), ov.rotary_dims)
    try:
        yield
    finally:
        for ov in targets:
            ov.edit = None
        _uninstall_if_idle(lm)
