"""Reading a loaded model's module tree: where an inferred adapter (``ctxlens.lm.infer``) looks.

The block list is the shallowest ``nn.ModuleList`` with one entry per layer; the attention
module is the block child (or grandchild) whose class is an ``*Attention``; its output
projection is the Linear (or Conv1D) that maps the heads back to ``d_model``; the rotary
modules are the ``*RotaryEmbedding`` modules; the MLP branches are the block children named or
classed like an MLP / feed-forward / mixture of experts (failing those, the bare Linears that
write back to ``d_model``); the decoder is ``base_model`` or the child holding the blocks.

Nothing here runs the model: what is read is checked on a probe (``ctxlens.lm.infer.stream``,
``ctxlens.lm.infer.attention``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

_MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "channel_mix", "mlp_block", "ff")
_MLP_CLASSES = ("MLP", "Mlp", "FeedForward", "MoE", "Moe", "Experts", "FFN", "Ffn", "SparseMoe")


def text_config(config: PretrainedConfig) -> PretrainedConfig:
    """The text model's config (a multimodal config keeps it as a sub-config)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def layer_count(config: PretrainedConfig) -> int | None:
    text = text_config(config)
    for attr in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if isinstance(getattr(text, attr, None), int):
            return int(getattr(text, attr))
    return None


def find_layers(model: PreTrainedModel) -> str:
    """Dotted path of the block list: the shallowest ModuleList with one entry per layer."""
    want = layer_count(model.config)
    lists = [(n.count("."), -len(m), n) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and (want is None or len(m) == want)]
    if not lists:
        raise CtxlensError(f"Cannot find the list of {want} blocks in '{model.config.model_type}'; "
                           "add a hand-written Family for it in ctxlens.lm.families.")
    return min(lists)[2]


def any_block_list(model: nn.Module, err: CtxlensError) -> str:
    """The shallowest, longest list of non-leaf modules (hrm_text's looped stacks, longcat's
    paired sublayers), for a model whose layer count matches no list; ``err`` when there is none."""
    lists = [(n.count("."), -len(m), n) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and all(any(True for _ in b.children()) for b in m)]
    if not lists:
        raise err
    return min(lists)[2]


def is_norm(module: nn.Module) -> bool:
    """A normalisation layer: a *Norm class with no children (dbrx's NormAttentionNorm holds attention)."""
    return "Norm" in type(module).__name__ and not any(True for _ in module.children())


def is_attention(module: nn.Module) -> bool:
    name = type(module).__name__
    return "Attention" in name and "Norm" not in name


def find_attention(blocks: nn.ModuleList) -> str | None:
    """The path most blocks keep their attention module under: a child, or a grandchild (dbrx's
    norm_attn_norm.attn); None without attention."""
    counts: dict[str, int] = {}
    for block in blocks:
        for path, child in block.named_modules():
            if path and path.count(".") <= 1 and is_attention(child) and not any(
                    is_attention(block.get_submodule(path[:i])) for i in range(len(path)) if path[i] == "."):
                counts[path] = counts.get(path, 0) + 1
    return max(counts, key=lambda p: (counts[p], -p.count("."))) if counts else None


def projection_shape(module: nn.Module) -> tuple[int, int] | None:
    """(in_features, out_features) of an nn.Linear or a GPT-2 style Conv1D (weight [in, out])."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        weight = cast(torch.Tensor, module.weight)  # [in, out]
        return weight.shape[0], weight.shape[1]
    return None


def find_out_proj(attention: nn.Module, d_model: int) -> str | None:
    """The output projection: the last Linear (or Conv1D) of the attention module mapping back to d_model."""
    found = [n for n, m in attention.named_children() if (projection_shape(m) or (0, 0))[1] == d_model]
    return found[-1] if found else None


def _own_name(module: nn.Module, prefix: str) -> str:
    """The class name without the model's own prefix ("GraniteMoeHybridMambaLayer" -> "MambaLayer")."""
    name = type(module).__name__
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def mlp_branches(block: nn.Module, d_model: int, prefix: str = "") -> list[str]:
    """The MLP / feed-forward / mixture-of-experts children of a block, by attribute or class name
    (a shared expert too); failing those, the Linear children that write back to d_model (opt's fc2)."""
    children = [(a, c) for a, c in block.named_children() if not is_attention(c) and "Norm" not in type(c).__name__]
    found = [a for a, c in children if a in _MLP_NAMES or a.lower().endswith("mlp")
             or any(k in _own_name(c, prefix) for k in _MLP_CLASSES)]
    return found or [a for a, c in children if isinstance(c, nn.Linear) and c.out_features == d_model]


def find_decoder(model: PreTrainedModel) -> str | None:
    """Path of the decoder when transformers' ``base_model`` is the whole model (llama4_text)."""
    if model.base_model is not model:
        return None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    for name, module in model.named_children():
        if module is decoder:
            return name
    return find_layers(model).split(".")[0]  # the child that holds the blocks


def rotary_modules(model: nn.Module) -> list[nn.Module]:
    return [m for _, m in model.named_modules() if type(m).__name__.endswith("RotaryEmbedding")]


def decoder(model: PreTrainedModel) -> nn.Module:
    path = find_decoder(model)
    return model.get_submodule(path) if path else model.base_model


def embedding_width(model: PreTrainedModel) -> int:
    return int(model.get_input_embeddings().weight.shape[1])
