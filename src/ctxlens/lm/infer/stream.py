"""The probe checks of an inferred adapter on the residual stream: token losses and the read point.

- token losses: the LM head on the decoder's final hidden states, with the logit
  post-processing found among the config's soft-cap / scale fields and any module between
  decoder and head, equals the model's own logits (the closest candidate wins);
- residual after the mixer (the geometry paper, Section 3): in every block, the read point that
  equals the block output when its MLP branches output zero (one forward, all blocks at once;
  one point per layer for hybrids whose layer kinds differ).

Each check returns what it found, or None and one sentence saying why it could not confirm it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ctxlens.lm.infer.probe import all_close, relative_error
from ctxlens.lm.infer.tree import decoder, embedding_width, is_norm, mlp_branches, text_config

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

LogitsPost = Callable[[object, torch.Tensor], torch.Tensor]  # (config, logits [..., vocab]) -> logits, as Family's
Resid = str | tuple[str, ...]  # one read point for every layer, or one per layer (Family.resid)
Output = torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]  # a module's output, or the tuple it leads
Store = dict[tuple[str, int], torch.Tensor]  # (read point, layer) -> [1, seq, d_model]


def _post_candidates(config: PretrainedConfig) -> list[tuple[str, LogitsPost | None]]:
    """(description, logits_post) pairs to try: none, then each logit field of the config."""
    from ctxlens.lm.families import scale, softcap

    text = text_config(config)
    out: list[tuple[str, LogitsPost | None]] = [("none", None)]
    for attr in sorted(a for a in dir(text) if "logit" in a and not a.startswith("_")):
        try:  # properties too (minicpm3's logits_scaling); some configs refuse per-layer reads
            value = getattr(text, attr)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if "cap" in attr:
            out.append((f"soft-cap {attr}", softcap(attr)))
        else:
            out += [(f"scale by {attr}", scale(attr)), (f"divide by {attr}", _divide(attr))]
    return out


def _divide(attr: str) -> LogitsPost:
    def post(config: PretrainedConfig, logits: torch.Tensor) -> torch.Tensor:
        return logits / getattr(text_config(config), attr, 1.0)

    return post


def _pre_head_candidates(model: PreTrainedModel) -> list[str | None]:
    """None (the LM head reads the final hidden states), then each top-level child that could sit
    between them (modernbert-decoder's prediction head: logits = decoder(lm_head(h)))."""
    head, body = model.get_output_embeddings(), decoder(model)
    return [None, *(n for n, m in model.named_children() if m is not head and m is not body)]


def check_logits(model: PreTrainedModel, ids: torch.Tensor
                 ) -> tuple[tuple[LogitsPost | None, str | None] | None, str | None]:
    """((logits_post, pre_head), None) reproducing the model's logits from its final hidden states, or (None, why)."""
    head = model.get_output_embeddings()
    if head is None:
        return None, "the model has no output embedding (LM head) to compute losses from."
    scored: list[tuple[float, int, tuple[LogitsPost | None, str | None]]] = []
    with torch.inference_mode():
        want = model(input_ids=ids, use_cache=False).logits.float()  # [1, seq, vocab]
        hidden = decoder(model)(input_ids=ids, use_cache=False).last_hidden_state  # [1, seq, d_model]
        for pre in _pre_head_candidates(model):
            try:
                raw = head(hidden if pre is None else model.get_submodule(pre)(hidden))  # [1, seq, vocab]
            except Exception:  # noqa: BLE001 - a child that is not a hidden -> hidden map
                continue
            # the closest candidate, not the first within tolerance: a soft-cap barely bends small logits
            for _, post in _post_candidates(model.config):
                got = raw if post is None else post(text_config(model.config), raw)
                if got.shape == want.shape and all_close(got, want):
                    scored.append((float((got.float() - want).abs().max()), len(scored), (post, pre)))
    if scored:
        return min(scored)[2], None
    return None, ("the base model's final hidden states through the LM head do not reproduce the model's "
                  "logits under any logit scaling or soft-cap in its config, so chunked losses would be wrong.")


def _block_candidates(block: nn.Module, branches: list[str]) -> list[str]:
    """Read points to try in one block, each checked against the block output with its MLP zeroed."""
    sublayers = [n for n, c in block.named_children() if not is_norm(c)]
    mixers = [n for n in sublayers if n not in branches]
    if not branches:  # one mixer and norms: the block output, if it is input + mixer output
        return [f"sum:{mixers[0]}"] if len(mixers) == 1 else []
    if not mixers:  # an MLP-only block (nemotron_h): no mixer ran, the residual is the block input
        return ["in"]
    return ([f"pre:{n}" for n, _ in block.named_children() if n not in mixers] + [f"sum:{m}" for m in mixers]
            + [f"post:{m}" for m in mixers])  # dbrx's norm_attn_norm returns the stream itself


def check_residual(model: PreTrainedModel, blocks: nn.ModuleList, attn: str | None,
                   ids: torch.Tensor) -> tuple[Resid | None, str | None]:
    """(mode or per-layer modes, None): in each block, the read point equal to its output with every
    MLP branch zeroed (one forward, all blocks at once); or (None, why)."""
    prefix = type(model).__name__.split("For")[0]
    branches = [mlp_branches(b, embedding_width(model), prefix) for b in blocks]
    candidates = [_block_candidates(b, br) for b, br in zip(blocks, branches)]
    seen: Store = {}
    truth: dict[int, torch.Tensor] = {}  # layer -> its block output [1, seq, d_model]
    handles: list[RemovableHandle] = []
    for i, block in enumerate(blocks):
        handles.append(block.register_forward_pre_hook(_keep(seen, ("in", i)), with_kwargs=True))
        handles.append(block.register_forward_hook(lambda m, a, o, i=i: truth.__setitem__(i, _first(o).detach())))
        for branch in branches[i]:
            handles.append(block.get_submodule(branch).register_forward_hook(_zero_output))
        for c in candidates[i]:
            if c.startswith("pre:"):
                sub = block.get_submodule(c[4:])
                handles.append(sub.register_forward_pre_hook(_keep(seen, (c, i)), with_kwargs=True))
            elif c.startswith("sum:"):
                sub = block.get_submodule(c[4:])
                handles.append(sub.register_forward_hook(
                    lambda m, a, o, key=(c, i): seen.__setitem__(key, _first(o).detach())))
            elif c.startswith("post:"):  # only a sublayer returning (stream, its normed copy), as dbrx's
                sub = block.get_submodule(c[5:])
                handles.append(sub.register_forward_hook(
                    lambda m, a, o, key=(c, i): seen.__setitem__(key, _pair_first(o))))
    with _hooks(handles), torch.inference_mode():
        decoder(model)(input_ids=ids, use_cache=False)
    # per layer, the passing read points by their error: the closest wins, not the first within
    # tolerance (in bfloat16 a small attention output hides inside the layer input's rounding)
    passing = [{c: relative_error(_read(seen, c, i, truth), truth[i]) for c in candidates[i]
                if i in truth and all_close(_read(seen, c, i, truth), truth[i])} for i in range(len(blocks))]
    passing = [{("out" if c.startswith("sum:") and not branches[i] else c): e for c, e in p.items()}
               for i, p in enumerate(passing)]
    bad = [i for i, p in enumerate(passing) if not p]
    if bad:
        return None, (f"in layer {bad[0]} no point equals layer input + mixer output (the block output with the MLP "
                      "branch zeroed), so the residual after the mixer cannot be read.")
    common = [c for c in passing[0] if all(c in p for p in passing)]
    if common:  # one read point for every layer, the closest over all of them
        return min(common, key=lambda c: max(p[c] for p in passing)), None
    return tuple(min(p, key=p.__getitem__) for p in passing), None


def _pair_first(out: object) -> torch.Tensor:
    """The first of two same-shaped tensors a sublayer returns; NaN for any other output."""
    if (isinstance(out, tuple) and len(out) == 2 and all(torch.is_tensor(o) for o in out)
            and out[0].shape == out[1].shape):
        return out[0].detach()
    return torch.full((0,), float("nan"))


def _keep(store: Store, key: tuple[str, int]) -> Callable[[nn.Module, tuple[object, ...], dict[str, object]], None]:
    def hook(m: nn.Module, args: tuple[object, ...], kwargs: dict[str, object]) -> None:
        h = _hidden(args, kwargs)
        if h is not None:
            store[key] = h.detach()

    return hook


def _read(seen: Store, mode: str, i: int, truth: dict[int, torch.Tensor]) -> torch.Tensor:
    if mode == "in":
        return seen.get(("in", i), torch.full((0,), float("nan")))
    if mode.startswith("post:"):
        return seen.get((mode, i), torch.full((0,), float("nan")))
    if mode.startswith("sum:"):
        x, y = seen.get(("in", i)), seen.get((mode, i))
        return torch.full((0,), float("nan")) if x is None or y is None or x.shape != y.shape else x + y
    return seen.get((mode, i), torch.full((0,), float("nan")))


def _first(out: Output) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def _hidden(args: tuple[object, ...], kwargs: dict[str, object]) -> torch.Tensor | None:
    if args and torch.is_tensor(args[0]):
        return args[0]
    for name in ("hidden_states", "activations", "hidden", "x", "input"):
        value = kwargs.get(name)
        if torch.is_tensor(value):
            return value
    return None


@contextlib.contextmanager
def _hooks(handles: list[RemovableHandle]) -> Iterator[None]:
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _zero_output(module: nn.Module, args: tuple[object, ...], out: torch.Tensor | tuple[torch.Tensor, ...]
                 ) -> torch.Tensor | tuple[torch.Tensor, ...]:
    if isinstance(out, tuple):
        return (torch.zeros_like(out[0]),) + out[1:]
    return torch.zeros_like(out)
