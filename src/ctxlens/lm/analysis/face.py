"""``LMFace``: the part of ``ctxlens.lm.model.LM`` that the analyses behind its methods use.

``LM`` delegates to the modules of this package (captures, the q/k scan, head masking, SelfExtend),
so they cannot name ``LM`` itself without an import circle (``tests/test_import_cycles.py``); they
annotate their ``lm`` parameter with this protocol instead, and mypy checks that ``LM`` has it
wherever ``LM`` hands itself down.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from ctxlens.core.options import Layers
from ctxlens.lm.families import Family


class LMFace(Protocol):
    """What the analyses read of a loaded model (see ``ctxlens.lm.model.LM`` for each member)."""

    @property
    def model(self) -> Any: ...  # the transformers model

    @property
    def family(self) -> Family: ...

    @property
    def name(self) -> str: ...

    @property
    def layers(self) -> Any: ...  # the blocks' ModuleList

    @property
    def n_layers(self) -> int: ...

    @property
    def n_heads(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def text_prefix(self) -> str: ...

    def attention(self, layer: int) -> torch.nn.Module: ...

    def attention_layers(self) -> list[int]: ...

    def layer_indices(self, layers: Layers, *, attention: bool = False) -> list[int]: ...

    def out_proj(self, layer: int) -> torch.nn.Module: ...

    def layer_type(self, layer: int) -> str: ...

    def inv_freq(self, layer: int) -> torch.Tensor: ...

    def layer_rotary_dims(self, layer: int) -> int: ...

    def check_length(self, n_tokens: int) -> None: ...

    def base_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     cache: Any = None) -> Any: ...
