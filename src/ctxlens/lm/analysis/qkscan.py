"""The per-layer q/k scan: each requested layer's post-RoPE q and k, one layer at a time.

The RoPE distance paper ("On the token distance modeling ability of higher RoPE attention
dimension"), Sections 4.1-4.2, needs for every layer and head the logits of chosen queries
against all earlier keys. ``scan_qk`` (``LM.scan_qk``) hands each requested layer's
q [H, L, d] and k [KVH, L, d] to a callback while the forward runs (the ``QKRecorder`` of
``ctxlens.lm.analysis.forward``, shared with ``LM.capture``) and stops after the deepest layer, so only
one layer's q/k exists at a time beyond what the forward itself holds. ``QKView.logits``
computes the logit rows of a chunk of queries, masked as the model masks them (causal, sliding
window, SelfExtend's grouped distances): no L x L matrix is built. Each layer carries its own
inverse frequencies, rotary dims and layer type (local/global hybrids such as Gemma 3 rotate
sliding layers with base 1e4 and global ones with base 1e6).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import torch

import ctxlens.lm.analysis.selfextend as _se
import ctxlens.lm.attention as attn_fn
from ctxlens.core.errors import CtxlensError
from ctxlens.lm.analysis.forward import QKRecorder, run_forward
from ctxlens.lm.analysis.rope import text_config

if TYPE_CHECKING:
    from ctxlens.lm.analysis.face import LMFace


def layer_window(lm: LMFace, module: torch.nn.Module) -> int | None:
    """The sliding window of an attention module (keys with m - n >= window are not seen), or None."""
    window = getattr(module, "sliding_window", None)
    config = text_config(lm.model)
    if window is None and getattr(config, "layer_types", None) is None:  # mistral: every layer slides
        window = getattr(config, "sliding_window", None)
    return int(window) if window else None


@functools.cache
def _passes_softcap(cls: type[torch.nn.Module]) -> bool | None:
    """Whether ``cls.forward`` hands ``softcap=`` to its attention function (gemma2 does; gemma3
    keeps ``attn_logit_softcapping`` in its config but does not apply it); None if unreadable."""
    try:
        return "softcap=" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return None


def layer_softcap(lm: LMFace, module: torch.nn.Module) -> float | None:
    """The attention-logit soft-cap ``module`` applies, or None."""
    cap = getattr(module, "attn_logit_softcapping", getattr(text_config(lm.model), "attn_logit_softcapping", None))
    # ignore: mypy checks a type[...] against Hashable with the instances' unbound __hash__; classes hash fine
    return cap if cap and _passes_softcap(type(module)) is not False else None  # type: ignore[arg-type]


@dataclass
class QKView:
    """One layer's post-RoPE q [H, L, d] and k [KVH, L, d] (batch element 0, float32) and how it attends."""

    layer: int
    q: torch.Tensor
    k: torch.Tensor
    scaling: float
    softcap: float | None
    window: int | None
    selfextend: _se.SelfExtend | None
    inv_freq: torch.Tensor
    layout: str
    rotary_dims: int
    layer_type: str = "full_attention"  # see LM.layer_type
    _k_grouped: torch.Tensor | None = field(default=None, repr=False)

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    def kv_of_head(self) -> torch.Tensor:
        """[H] index of the kv head each query head reads."""
        return torch.arange(self.n_heads, device=self.q.device) // (self.n_heads // self.k.shape[0])

    def logits(self, qpos: torch.Tensor, n_keys: int | None = None, q: torch.Tensor | None = None,
               k: torch.Tensor | None = None) -> torch.Tensor:
        """Unscaled logits [H, c, n] of queries at qpos [c] against keys 0..n-1 (n = max(qpos)+1),
        -inf where the model does not attend. ``q``/``k`` replace the layer's (same shapes)."""
        q = self.q if q is None else q
        k = self.k if k is None else k
        n = int(qpos.max()) + 1 if n_keys is None else n_keys
        kpos = torch.arange(n, device=q.device)
        qc, kc = q[:, qpos][None], k[:, :n][None]  # [1, H, c, d], [1, KVH, n, d]
        if self.selfextend is None:
            out = _se.scores(qc, kc)[0]
        else:
            kg = self._grouped_keys()[None, :, :n] if k is self.k else None
            out = _se.selfextend_scores(qc, kc, qpos, kpos, self.selfextend, self.inv_freq, self.layout,
                                        self.rotary_dims, kg)[0]
        true = qpos[:, None] - kpos[None]  # [c, n]
        hidden = true < 0
        if self.window is not None:
            hidden |= true >= self.window
        return out.float().masked_fill(hidden, float("-inf"))

    def _grouped_keys(self) -> torch.Tensor:
        """[KVH, L, d] the layer's keys moved to their SelfExtend grouped positions (computed once)."""
        if self._k_grouped is None:
            pos = torch.arange(self.k.shape[1], device=self.k.device)
            se = cast(_se.SelfExtend, self.selfextend)  # only called with SelfExtend on (logits)
            self._k_grouped = _se.rotate(self.k, se.key_positions(pos) - pos, self.inv_freq,
                                         self.layout, self.rotary_dims)
        return self._k_grouped

    def probs(self, qpos: torch.Tensor, *, n_keys: int | None = None, q: torch.Tensor | None = None,
              k: torch.Tensor | None = None) -> torch.Tensor:
        """Attention probabilities [H, c, n] of queries at qpos, as the model computes them (``logits``' options)."""
        z = self.logits(qpos, n_keys, q, k) * self.scaling
        if self.softcap:
            z = torch.tanh(z / self.softcap) * self.softcap
        return torch.softmax(z, dim=-1)


def scan_qk(lm: LMFace, ids: torch.Tensor, layers: Sequence[int], fn: Callable[[QKView], None]) -> None:
    """One forward of ``ids`` [1, L]; ``fn`` gets each of ``layers`` as a ``QKView``, in order."""
    if ids.shape[0] != 1:
        raise CtxlensError("The RoPE analyses take one sequence at a time; pass ids of shape [1, L].")
    lm.family.require("rope", lm.name)
    se = _se.active(lm)
    layout = cast(str, lm.family.rope_layout)  # set on every family that supports rope (required above)

    def on_layer(layer: int, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor) -> None:
        inv_freq = lm.inv_freq(layer)  # [n_pairs] of this layer's type
        fn(QKView(layer, query[0].float(), key[0].float(), attn_fn.scaling_of(module), layer_softcap(lm, module),
                  layer_window(lm, module), se, inv_freq, layout, 2 * inv_freq.numel(), lm.layer_type(layer)))

    recorder = QKRecorder(lm, layers, on_layer, stop_after_last=True)
    lm.check_length(ids.shape[1])
    run_forward(lm, ids.to(lm.device), recorder=recorder)
    recorder.check()
