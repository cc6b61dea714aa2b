"""One forward with hooks, a q/k recorder and an early stop: the mechanism every capture shares.

``LM.capture`` (``ctxlens.lm.analysis.capture``), the per-layer q/k scan (``ctxlens.lm.analysis.qkscan``) and
``LM.last_states`` all run the base model once with some forward hooks installed and, for
post-RoPE q/k, a recorder pushed on the registered attention function
(``ctxlens.lm.attention``). Any of them may raise ``Stop`` once it has everything it needs: the
forward ends there, so no layer past the deepest one asked for runs. ``run_forward`` installs,
runs and cleans up in one place; ``QKRecorder`` hands each requested layer's q and k to a
callback once and can stop after the last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

import ctxlens.lm.attention as attn_fn
from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle
    from transformers.utils import ModelOutput  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.analysis.face import LMFace

# on_layer(layer, attention module, post-RoPE q [batch, heads, seq, d], k [batch, kv_heads, seq, d])
OnLayer = Callable[[int, torch.nn.Module, torch.Tensor, torch.Tensor], None]


class Stop(Exception):
    """Raised by a hook or a recorder to end the forward early."""


def run_forward(lm: LMFace, input_ids: torch.Tensor, *, hooks: Sequence[RemovableHandle] = (),
                recorder: attn_fn.Recorder | None = None,
                attention_mask: torch.Tensor | None = None) -> ModelOutput | None:
    """``lm.base_forward`` of input_ids [batch, seq] in inference mode with ``hooks`` (handles of
    hooks already registered) and ``recorder`` (pushed on the attention function) live.

    Returns the base model's output, or None when a hook or the recorder raised ``Stop``. The
    hooks are removed and the recorder popped on every exit.
    """
    if recorder is not None:
        attn_fn.push(recorder)
    try:
        with torch.inference_mode():
            return lm.base_forward(input_ids, attention_mask=attention_mask)
    except Stop:
        return None
    finally:
        for handle in hooks:
            handle.remove()
        if recorder is not None:
            attn_fn.pop(recorder)


class QKRecorder:
    """Receives (module, q [batch, heads, seq, d], k [batch, kv_heads, seq, d]) from the attention
    function and calls ``on_layer(layer, module, q, k)`` once for each of ``layers``; with
    ``stop_after_last`` it raises ``Stop`` once every layer has been seen."""

    def __init__(self, lm: LMFace, layers: Sequence[int], on_layer: OnLayer, stop_after_last: bool = False):
        self.lm, self.on_layer, self.stop_after_last = lm, on_layer, stop_after_last
        self.layers = sorted(set(layers))
        self.modules = {id(lm.attention(layer)): layer for layer in self.layers}
        self.seen: list[int] = []

    def record(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor) -> None:
        layer = self.modules.get(id(module))
        if layer is None or layer in self.seen:
            return
        self.seen.append(layer)
        self.on_layer(layer, module, query, key)
        if self.stop_after_last and len(self.seen) == len(self.layers):
            raise Stop

    def check(self) -> None:
        """Raise when a requested layer ran no attention through ctxlens' attention function."""
        missing = [layer for layer in self.layers if layer not in self.seen]
        if missing:
            raise CtxlensError(
                f"Layers {missing} of '{self.lm.name}' have no attention that ran through ctxlens' attention "
                "function; ask for q/k of attention layers only."
            )
