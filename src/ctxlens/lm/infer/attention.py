"""The probe checks of an inferred adapter on its attention: q/k capture, head masking, RoPE layout.

- q/k: the attention modules hand their post-RoPE q and k, with the scale they apply, to
  ctxlens' registered attention function once per forward, with the configured head count and
  no extra score terms;
- head masking: zeroing a head's slice of the output projection's input equals zeroing that
  head's columns of the projection weight;
- RoPE pair layout: the first attention layer RoPE reaches gets the same input with every
  inverse frequency zeroed, so its rotated query must be the unrotated one turned by
  ``position * inv_freq``; the layout ("half" or "interleaved") for which that holds is the
  model's.

Each check returns None (or what it found), or one sentence saying why it could not confirm it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

import ctxlens.lm.attention as attn_fn
from ctxlens.lm.infer.probe import all_close, tolerance
from ctxlens.lm.infer.tree import decoder, projection_shape, rotary_modules

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.model import LM


class _Seen:
    """A recorder: the first q/k each attention module hands over, and how often it is called."""

    def __init__(self) -> None:
        self.q: dict[int, torch.Tensor] = {}  # id(module) -> [batch, heads, seq, head_dim]
        self.k: dict[int, torch.Tensor] = {}  # id(module) -> [batch, kv_heads, seq, head_dim]
        self.calls: dict[int, int] = {}

    def record(self, module: nn.Module, query: torch.Tensor, key: torch.Tensor) -> None:
        self.q.setdefault(id(module), query.detach())
        self.k.setdefault(id(module), key.detach())
        self.calls[id(module)] = self.calls.get(id(module), 0) + 1


def _recorded(model: PreTrainedModel, ids: torch.Tensor) -> _Seen:
    seen = _Seen()
    attn_fn.push(seen)
    try:
        with torch.inference_mode():
            decoder(model)(input_ids=ids, use_cache=False)
    finally:
        attn_fn.pop(seen)
    return seen


def recording_modules(model: PreTrainedModel, modules: list[nn.Module], ids: torch.Tensor) -> list[nn.Module]:
    """The attention modules that hand their q/k to ctxlens' registered attention function."""
    seen = _recorded(model, ids)
    return [m for m in modules if id(m) in seen.q]


def check_qk(model: PreTrainedModel, modules: list[nn.Module], n_heads: int, ids: torch.Tensor) -> str | None:
    """None when the attention modules hand [1, heads, seq, head_dim] q/k to ctxlens, else why not."""
    seen = _recorded(model, ids)
    if not modules:
        return ("none of its attention modules runs through transformers' attention interface, so post-RoPE "
                "queries and keys cannot be captured.")
    if any(seen.calls.get(id(m), 0) > 1 for m in modules):
        return ("its attention function runs more than once per module in one forward (looped blocks, or "
                "differential attention's two maps), so one capture per layer would be ambiguous.")
    terms = sorted({t for m in modules for t in getattr(m, "_ctxlens_score_terms", ())})
    if terms:
        return (f"its attention adds {', '.join(terms)} to the q.k scores, so scores computed from captured "
                "queries and keys would not be the model's.")
    for m in modules:
        q, k = seen.q[id(m)], seen.k[id(m)]
        if q.ndim != 4 or q.shape[1] != n_heads or q.shape[2] != ids.shape[1] or k.shape[-1] != q.shape[-1]:
            return (f"its attention hands over queries of shape {tuple(q.shape)}, "
                    f"not [batch, {n_heads} heads, seq, head_dim].")
    return None


def check_head_mask(lm: LM, layer: int, ids: torch.Tensor) -> str | None:
    """None when masking heads equals zeroing their output-projection columns, else why not."""
    proj = lm.out_proj(layer)
    n_in = cast("tuple[int, int]", projection_shape(proj))[0]  # a found out_proj has a shape (find_out_proj)
    if n_in % lm.n_heads:
        return f"its output projection takes {n_in} inputs, not a whole number per each of {lm.n_heads} heads."
    heads = sorted({0, lm.n_heads - 1})
    with torch.inference_mode():
        with lm.mask_heads({layer: heads}):
            masked = lm.decoder(input_ids=ids, use_cache=False).last_hidden_state
        width = n_in // lm.n_heads
        weight = cast(torch.Tensor, proj.weight)  # a found out_proj has a weight (find_out_proj)
        saved = weight.detach().clone()
        columns = weight if isinstance(proj, nn.Linear) else weight.T  # [out, in]
        try:
            for h in heads:
                columns[:, h * width:(h + 1) * width] = 0
            zeroed = lm.decoder(input_ids=ids, use_cache=False).last_hidden_state
        finally:
            weight.copy_(saved)
    if all_close(masked, zeroed):
        return None
    return "zeroing a head's slice of the output projection's input does not equal zeroing its weight columns."


def inv_freq_of(rotary: nn.Module, layer_type: str | None = None) -> torch.Tensor | None:
    """[n_pairs] inverse frequencies of a rotary module (per layer type where it keeps several)."""
    if layer_type and torch.is_tensor(getattr(rotary, f"{layer_type}_inv_freq", None)):
        return getattr(rotary, f"{layer_type}_inv_freq")
    return cast(torch.Tensor, rotary.inv_freq) if torch.is_tensor(getattr(rotary, "inv_freq", None)) else None


def _inv_freq_buffers(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, n) for m in rotary_modules(model) for n, b in m.named_buffers(recurse=False) if n.endswith("inv_freq")]


@contextlib.contextmanager
def _no_rotation(model: nn.Module) -> Iterator[None]:
    """Within the block every rotary module's inverse frequencies are zero: RoPE rotates nothing."""
    saved = [(m, n, getattr(m, n).clone()) for m, n in _inv_freq_buffers(model)]
    try:
        for m, n, _ in saved:
            getattr(m, n).zero_()
        yield
    finally:
        for m, n, b in saved:
            getattr(m, n).copy_(b)


def check_rope_layout(model: PreTrainedModel, modules: list[nn.Module], layer_types: list[str | None],
                      ids: torch.Tensor) -> tuple[str | None, str | None]:
    """("half" | "interleaved", None) for the pair layout under which q rotates by p * inv_freq, or (None, why).

    ``modules``: the attention modules in layer order, ``layer_types`` their types. The first one
    whose query changes when every inverse frequency is zeroed is the first that applies RoPE
    (flint's first layers use none); nothing before it depends on RoPE, so unrotated it receives
    the same input and returns the unrotated query.
    """
    rotated, plain = _recorded(model, ids).q, None
    with _no_rotation(model):
        plain = _recorded(model, ids).q
    first = next((i for i, m in enumerate(modules) if id(m) in rotated and id(m) in plain
                  and not torch.equal(rotated[id(m)], plain[id(m)])), None)
    if first is None:
        return None, "zeroing its rotary modules' inverse frequencies changes no attention layer's queries."
    rotaries = rotary_modules(model)
    inv = inv_freq_of(rotaries[0], layer_types[first]) if rotaries else None
    if inv is None:
        return None, "it has no rotary-embedding module with inverse frequencies to check against."
    inv = inv.detach().clone()
    tol = tolerance(rotated[id(modules[first])].dtype)
    q, q0 = rotated[id(modules[first])][0].double(), plain[id(modules[first])][0].double()  # [heads, seq, head_dim]
    n = inv.numel()
    if 2 * n > q.shape[-1]:
        return None, f"its rotary module has {n} frequency pairs but the heads have only {q.shape[-1]} dims."
    angle = torch.arange(q.shape[1], dtype=torch.float64, device=q.device)[:, None] * inv.double().to(q.device)
    for offset in (0, q.shape[-1] - 2 * n):
        for layout in ("half", "interleaved"):
            z, z0 = _pairs(q[..., offset:], n, layout), _pairs(q0[..., offset:], n, layout)  # [heads, seq, n_pairs]
            want = z0 * torch.polar(torch.ones_like(angle), angle)  # unrotated pair rotated by position x inv_freq
            # the rope type's attention scaling multiplies rotated and unrotated queries alike
            if float((z - want).abs().max() / z.abs().max().clamp_min(1e-12)) < tol:
                if offset:
                    return None, (f"its rotary dims are the last {2 * n} of each {q.shape[-1]}-dim head (latent "
                                  "attention), and the RoPE analyses read them from the front.")
                return layout, None
            backwards = z0 * torch.polar(torch.ones_like(angle), -angle)
            if float((z - backwards).abs().max() / z.abs().max().clamp_min(1e-12)) < tol:
                return None, ("its queries turn by minus position x inv_freq (a sign-flipped rotate_half), "
                              "and the RoPE analyses assume the usual direction.")
    return None, ("its first attention layer's queries are not the unrotated queries turned by position x inv_freq "
                  "under either pair layout, so the RoPE analyses cannot apply.")


def _pairs(x: torch.Tensor, n: int, layout: str) -> torch.Tensor:
    """[..., head_dim] -> [..., n] complex pairs (rotary dims only)."""
    if layout == "half":
        return torch.complex(x[..., :n], x[..., n:2 * n])
    return torch.complex(x[..., 0:2 * n:2], x[..., 1:2 * n:2])
