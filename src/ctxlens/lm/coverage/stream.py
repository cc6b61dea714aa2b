"""The coverage checks on the residual stream: token losses and the residual after the mixer.

- ``token_loss``: ``lm.token_losses`` vs ``F.cross_entropy`` of the model's own logits;
- ``residual``:   ``lm.capture(residual=...)`` at every layer vs the block output of a forward
                  in which that layer's MLP / FFN / MoE branch outputs zero (the geometry paper, Section 3:
                  the residual stream after the context-mixing sublayer); a block with one mixer and no
                  MLP (mamba's) is checked against block input + mixer output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F

from ctxlens.lm.coverage.probe import Builder, Check, check_close, logits_of, unsupported

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

Output = torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]  # a module's output, or the tuple it leads

# Direct children of a block that are its MLP / FFN / MoE branch (by attribute or class name).
_MLP_NAMES = ("mlp", "feed_forward", "ffn", "mlp_block", "block_sparse_moe", "moe", "shared_mlp", "channel_mixer",
              "shared_experts", "shared_expert", "experts", "feedforward", "moe_block", "dense_mlp",
              "fc2")  # fc2: the second MLP linear of blocks that hold fc1/fc2 directly (opt, xglm, biogpt)
# class-name endings (not substrings: "Qwen3_5MoeGatedDeltaNet" is a mixer, not an MoE)
_MLP_CLASSES = ("MLP", "Mlp", "FeedForward", "Moe", "MoE", "MoeBlock", "MoEBlock", "Experts", "FFN", "Ffn",
                "SparseMoe", "MoELayer", "MoeLayer")


def check_token_loss(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    got = lm.token_losses(ids)[0]  # [seq-1]
    logits = logits_of(b.model(), ids)[0]  # [seq, vocab], the model's own forward
    want = F.cross_entropy(logits[:-1], ids[0, 1:], reduction="none")
    return check_close(got, want, "token losses")


def mlp_children(block: torch.nn.Module) -> list[torch.nn.Module]:
    """The block's MLP / FFN / MoE branches (direct children), found by attribute or class name."""
    out: list[torch.nn.Module] = []
    linears: list[torch.nn.Module] = []
    for name, child in block.named_children():
        cls = type(child).__name__
        if "Attention" in cls or "Norm" in cls:
            continue
        if name in _MLP_NAMES or cls.endswith(_MLP_CLASSES):
            out.append(child)
        elif isinstance(child, torch.nn.Linear):
            linears.append(child)
    if out:
        return out
    # no MLP module: its last Linear writes the branch back to the stream (opt's fc1 -> fc2)
    return linears[-1:] if len(linears) >= 2 else []


def _zero_output(module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object], out: Output) -> Output:
    """The branch outputs zero; an MLP that adds the residual itself (bloom's) returns that residual."""
    first = out[0] if isinstance(out, (tuple, list)) else out
    residual = kwargs.get("residual", args[1] if len(args) > 1 else None)
    zero = residual if isinstance(residual, torch.Tensor) and residual.shape == first.shape else torch.zeros_like(first)
    return (zero,) + tuple(out[1:]) if isinstance(out, (tuple, list)) else zero


def _block_output_without_mlp(model: PreTrainedModel, layers_path: str, layer: int,
                              ids: torch.Tensor) -> torch.Tensor | None:
    """[1, seq, d_model] block ``layer``'s output when its MLP branches output zero (None: no MLP)."""
    block = model.get_submodule(layers_path)[layer]
    mlps = mlp_children(block)
    if not mlps:
        return None
    seen: dict[str, torch.Tensor] = {}

    def keep(module: torch.nn.Module, args: tuple[object, ...], out: Output) -> None:
        seen.setdefault("h", out[0] if isinstance(out, (tuple, list)) else out)

    handles = [m.register_forward_hook(_zero_output, with_kwargs=True) for m in mlps]
    handles.append(block.register_forward_hook(keep))
    try:
        logits_of(model, ids)
    finally:
        for h in handles:
            h.remove()
    return seen["h"]


def _input_plus_mixer(model: PreTrainedModel, layers_path: str, layer: int, ids: torch.Tensor) -> torch.Tensor | None:
    """[1, seq, d_model] block input + output of its one non-norm child (a mamba block's mixer):
    what the block output must be if it is the residual after the mixer; None for other blocks."""
    block = model.get_submodule(layers_path)[layer]
    mixers = [c for _, c in block.named_children() if "Norm" not in type(c).__name__]
    if len(mixers) != 1:
        return None
    seen: dict[str, torch.Tensor] = {}

    def keep_in(module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        # a block's first input is its hidden states [1, seq, d_model]
        seen.setdefault("x", cast(torch.Tensor, args[0] if args else kwargs.get("hidden_states")))

    def keep_out(module: torch.nn.Module, args: tuple[object, ...], out: Output) -> None:
        seen.setdefault("y", out[0] if isinstance(out, (tuple, list)) else out)

    handles = [block.register_forward_pre_hook(keep_in, with_kwargs=True), mixers[0].register_forward_hook(keep_out)]
    try:
        logits_of(model, ids)
    finally:
        for h in handles:
            h.remove()
    return seen["x"] + seen["y"]


def check_residual(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    declined = unsupported(lm, "residual")
    if declined:
        return declined
    positions = list(range(0, ids.shape[1], 5))
    cap = lm.capture(ids, residual="all", positions=positions)
    checked, skipped = [], []
    for layer in range(lm.n_layers):
        mode = lm.family.resid_mode(lm.config, layer)
        want = _block_output_without_mlp(b.model(), lm.family.layers, layer, ids)
        if want is None:
            if mode != "out":
                return Check("fail", f"layer {layer} has no MLP branch to zero but the residual is read at '{mode}'")
            want = _input_plus_mixer(b.model(), lm.family.layers, layer, ids)
            if want is None:
                skipped.append(layer)
                continue
        res = check_close(cap.residual[layer], want[:, positions], f"layer {layer}")
        if res.status != "pass":
            return res
        checked.append(layer)
    if not checked:
        return Check("n/a", "no block has an MLP branch; the residual is the block output")
    return Check("pass", f"layers {checked}" + (f" (no MLP: {skipped})" if skipped else ""))
