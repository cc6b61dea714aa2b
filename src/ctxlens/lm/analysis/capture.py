"""Captures asked for, not dumped: one forward, only the slices requested.

A request names layers and positions; ``run_capture`` installs hooks that copy
``x[:, positions]`` as each layer runs, records post-RoPE q/k through the registered attention
function (``ctxlens.lm.attention``), and stops the forward after the deepest layer anyone
asked for (the hooks, recorder and stop of ``ctxlens.lm.analysis.forward``, shared with the q/k scan).
Memory grows with ``len(layers) x len(positions) x d_model``, not with sequence length x
layers. On a model split over several devices by a device map, every slice
goes to the CPU as soon as it is taken (``ctxlens.lm.placement.capture_device``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch

import ctxlens.lm.placement as placement
from ctxlens.core.errors import CtxlensError
from ctxlens.lm.analysis.forward import QKRecorder, Stop, run_forward

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

    from ctxlens.lm.analysis.face import LMFace

# capture positions: None (all), a slice, or indices (negatives count from the end)
Positions = slice | Sequence[int] | torch.Tensor | None


def normalize_positions(positions: Positions, seq_len: int) -> torch.Tensor | None:
    """None (all positions) or a sorted-as-given LongTensor of indices in [0, seq_len)."""
    if positions is None:
        return None
    if isinstance(positions, slice):
        return torch.arange(seq_len)[positions]
    idx = torch.as_tensor(list(positions) if not torch.is_tensor(positions) else positions, dtype=torch.long)
    idx = torch.where(idx < 0, idx + seq_len, idx)
    if idx.numel() and (idx.min() < 0 or idx.max() >= seq_len):
        raise CtxlensError(
            f"Capture positions must lie in [-{seq_len}, {seq_len}) for a sequence of {seq_len} tokens; "
            "pass positions inside the sequence."
        )
    return idx


def _take(x: torch.Tensor, idx: torch.Tensor | None, dim: int, out_device: str | torch.device | None) -> torch.Tensor:
    y = x if idx is None else x.index_select(dim, idx.to(x.device))
    y = y.detach()
    if out_device is not None and y.device != torch.device(out_device):
        y = y.to(out_device, non_blocking=True)
    elif idx is None:
        y = y.clone()
    return y


class _Expanded(Mapping[int, torch.Tensor]):
    """keys[layer] as [batch, heads, n, head_dim]: kv heads repeated for grouped-query attention."""

    def __init__(self, raw: dict[int, torch.Tensor], n_heads: int):
        self.raw, self.n_heads = raw, n_heads

    def __getitem__(self, layer: int) -> torch.Tensor:
        k = self.raw[layer]  # [batch, kv_heads, n, head_dim]
        groups = self.n_heads // k.shape[1]
        return k if groups == 1 else k.repeat_interleave(groups, dim=1)

    def __iter__(self) -> Iterator[int]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


@dataclass
class Capture:
    """What one forward returned. Positions are absolute token indices.

    residual[layer]: [batch, n_positions, d_model]  residual stream after the mixer sublayer
    block[layer]:    [batch, n_positions, d_model]  block (layer) output
    queries[layer]:  [batch, heads, n_queries, head_dim]  post-RoPE
    keys[layer]:     [batch, heads, n_keys, head_dim]     post-RoPE, kv heads repeated
    kv_keys[layer]:  [batch, kv_heads, n_keys, head_dim]  post-RoPE as the model stores them
    """

    positions: torch.Tensor | None
    query_positions: torch.Tensor | None
    key_positions: torch.Tensor | None
    residual: dict[int, torch.Tensor] = field(default_factory=dict)
    block: dict[int, torch.Tensor] = field(default_factory=dict)
    queries: dict[int, torch.Tensor] = field(default_factory=dict)
    kv_keys: dict[int, torch.Tensor] = field(default_factory=dict)
    n_heads: int = 0

    @property
    def keys(self) -> Mapping[int, torch.Tensor]:
        return _Expanded(self.kv_keys, self.n_heads)


def _layer_list(lm: LMFace, req: Iterable[int] | int | str | None) -> list[int]:
    """The layers a capture request names: None or [] nothing, "all" every layer, an int or a list
    of indices (negatives count from the end) resolved by ``LM.layer_indices``."""
    if req is None or (not isinstance(req, (int, str)) and not list(req)):
        return []
    listed = None if req == "all" else [req] if isinstance(req, int) else list(cast("Iterable[int]", req))
    return lm.layer_indices(listed)


def _hidden_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    if args:
        return args[0]
    for name in ("hidden_states", "activations", "hidden", "x", "input"):
        if name in kwargs:
            return kwargs[name]
    raise RuntimeError("could not find the hidden-state argument of a hooked module")


def _first(out: Any) -> torch.Tensor:  # a module's output: a tensor, or a tuple / list led by one
    return out[0] if isinstance(out, (tuple, list)) else out


def run_capture(
    lm: LMFace,
    input_ids: torch.Tensor,
    *,
    residual: Sequence[int] | str | None = None,
    block: Sequence[int] | str | None = None,
    positions: Positions = None,
    qk: Sequence[int] | int | None = None,
    query_positions: Positions = None,
    key_positions: Positions = None,
    attention_mask: torch.Tensor | None = None,
    out_device: str | torch.device | None = None,
) -> Capture:
    """One forward of ``lm`` over ``input_ids`` [batch, seq] returning only what was asked.

    residual/block: layers ("all", a list, or None) whose residual-after-mixer / block output
    to keep at ``positions``; qk: layers whose post-RoPE queries (at ``query_positions``) and
    keys (at ``key_positions``) to keep. Positions may be negative (counted from the end).
    out_device: where slices go (default: where they were computed; the CPU for a model split
    over several devices).
    """
    seq = input_ids.shape[1]
    out_device = placement.capture_device(lm.model, out_device)
    res_layers, blk_layers = _layer_list(lm, residual), _layer_list(lm, block)
    qk_layers = _layer_list(lm, qk)
    if qk_layers:
        lm.family.require("qk", lm.name)
    if res_layers:
        lm.family.require("residual", lm.name)
    cap = Capture(
        positions=normalize_positions(positions, seq),
        query_positions=normalize_positions(query_positions, seq),
        key_positions=normalize_positions(key_positions, seq),
        n_heads=lm.n_heads,
    )
    pos = cap.positions
    last = max(res_layers + blk_layers + qk_layers, default=-1)
    if last < 0:
        raise CtxlensError("Nothing to capture; ask for residual, block or qk layers.")
    recorder = None  # q/k of qk_layers, recorded by the attention function
    if qk_layers:
        def keep_qk(layer: int, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor) -> None:
            cap.queries[layer] = _take(query, cap.query_positions, 2, out_device)
            cap.kv_keys[layer] = _take(key, cap.key_positions, 2, out_device)

        recorder = QKRecorder(lm, qk_layers, keep_qk)
    handles: list[RemovableHandle] = []
    pending: dict[int, torch.Tensor] = {}

    def stop_if_last(layer: int) -> None:
        if layer == last:
            raise Stop

    for layer in sorted(set(res_layers + blk_layers + qk_layers)):
        module = lm.layers[layer]
        mode = lm.family.resid_mode(lm.model.config, layer)
        want_res, want_blk = layer in res_layers, layer in blk_layers
        if want_res and mode == "in":
            def block_in(m: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], layer: int = layer) -> None:
                cap.residual[layer] = _take(_hidden_arg(args, kwargs), pos, 1, out_device)

            handles.append(module.register_forward_pre_hook(block_in, with_kwargs=True))
        if want_res and mode.startswith("pre:"):
            sub = module.get_submodule(mode[4:])

            def pre(m: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], layer: int = layer) -> None:
                cap.residual[layer] = _take(_hidden_arg(args, kwargs), pos, 1, out_device)

            handles.append(sub.register_forward_pre_hook(pre, with_kwargs=True))
        if want_res and mode.startswith("post:"):
            def sub_out(m: torch.nn.Module, args: tuple[Any, ...], out: Any, layer: int = layer) -> None:
                cap.residual[layer] = _take(_first(out), pos, 1, out_device)

            handles.append(module.get_submodule(mode[5:]).register_forward_hook(sub_out))
        if want_res and mode.startswith("sum:"):
            sub = module.get_submodule(mode[4:])

            def layer_in(m: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], layer: int = layer) -> None:
                pending[layer] = _take(_hidden_arg(args, kwargs), pos, 1, None)

            def mixer_out(m: torch.nn.Module, args: tuple[Any, ...], out: Any, layer: int = layer) -> None:
                x = pending.pop(layer)
                cap.residual[layer] = _take(x + _take(_first(out), pos, 1, None), None, 1, out_device)

            handles.append(module.register_forward_pre_hook(layer_in, with_kwargs=True))
            handles.append(sub.register_forward_hook(mixer_out))

        def post(m: torch.nn.Module, args: tuple[Any, ...], out: Any, layer: int = layer, want_res: bool = want_res,
                 want_blk: bool = want_blk, mode: str = mode) -> None:
            h = _first(out)
            if want_blk:
                cap.block[layer] = _take(h, pos, 1, out_device)
            if want_res and mode == "out":
                cap.residual[layer] = _take(h, pos, 1, out_device)
            stop_if_last(layer)

        handles.append(module.register_forward_hook(post))

    try:
        run_forward(lm, input_ids, hooks=handles, recorder=recorder, attention_mask=attention_mask)
    finally:
        if out_device is not None:
            placement.synchronize()  # slices copied without blocking are complete before anyone reads them
    if recorder is not None:
        recorder.check()
    return cap


def last_states(lm: LMFace, input_ids: torch.Tensor,
                block: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(final hidden state [batch, d_model] after the final norm, output of block ``block``
    [batch, d_model] or None) at the last position of input_ids [batch, seq]: one full forward
    (the final state needs every layer), with a hook on ``block`` when one is asked for."""
    grabbed: list[torch.Tensor] = []
    hooks: list[RemovableHandle] = []
    if block is not None:
        def grab(module: torch.nn.Module, args: tuple[Any, ...], out: Any) -> None:
            grabbed.append(_first(out)[:, -1])  # [batch, d_model]

        hooks.append(lm.layers[block].register_forward_hook(grab))
    out = run_forward(lm, input_ids, hooks=hooks)
    assert out is not None  # no hook here raises Stop
    return out.last_hidden_state[:, -1], (grabbed[-1] if grabbed else None)
