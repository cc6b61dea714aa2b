"""Adapters inferred from a loaded model's module tree, then checked on the model itself.

A ``model_type`` with no hand-written ``Family`` (``ctxlens.lm.families``) gets one built here:

1. *Read the tree* (``ctxlens.lm.infer.tree``): the block list, the attention module and its
   output projection, the rotary modules, the MLP branches, the decoder.
2. *Check each claim on a short probe* (``ctxlens.lm.infer.probe``: ``PROBE_LEN`` tokens, a few
   forwards) against a route that does not use it, with tolerances that follow the model's
   dtype: token losses and the residual read point (``ctxlens.lm.infer.stream``); q/k capture,
   head masking and the RoPE pair layout (``ctxlens.lm.infer.attention``).
3. *Assemble the Family* (this module): what the checks confirmed, the model's kind and position
   encoding.

Whatever a check cannot confirm is marked unsupported with one sentence saying why
(``Family.unsupported``); nothing is guessed silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ctxlens.core.errors import CtxlensError
from ctxlens.lm.families import Family
from ctxlens.lm.infer.attention import check_head_mask, check_qk, check_rope_layout, recording_modules
from ctxlens.lm.infer.probe import PROBE_LEN, probe_ids
from ctxlens.lm.infer.stream import check_logits, check_residual
from ctxlens.lm.infer.tree import (
    any_block_list,
    embedding_width,
    find_attention,
    find_decoder,
    find_layers,
    find_out_proj,
    is_attention,
    rotary_modules,
    text_config,
)
from ctxlens.lm.model import LM, config_int, submodule

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

P = ParamSpec("P")
T = TypeVar("T")


def _kind(n_attention: int, n_layers: int, model: PreTrainedModel) -> str:
    if n_attention == n_layers:
        return "transformer"
    if n_attention:
        return "hybrid"
    ssm = any("Mamba" in type(m).__name__ or "SSM" in type(m).__name__ for m in model.modules())
    return "ssm" if ssm else "recurrent"


def _position(model: PreTrainedModel, rope_layout: str | None) -> str:
    text = text_config(model.config)
    if rope_layout or rotary_modules(model):
        return "rope"
    if getattr(text, "alibi", False) or "alibi" in str(getattr(text, "position_embedding_type", "")):
        return "alibi"
    if any(n.endswith(("wpe", "embed_positions", "position_embeddings")) for n, _ in model.named_modules()):
        return "learned"
    return "none"


def infer_family(model: PreTrainedModel) -> Family:
    """A ``Family`` for ``model`` (its attention already routed through ctxlens), checked on a probe."""
    config = model.config
    try:
        layers, irregular = find_layers(model), None
    except CtxlensError as err:  # token losses need no block list: load, and refuse what needs one
        layers = any_block_list(model, err)
        irregular = str(err).split(";")[0].replace("Cannot find", "ctxlens cannot find")
    blocks = model.get_submodule(layers)
    attn = find_attention(blocks)
    ids = probe_ids(model)
    refused: dict[str, str] = {}
    try:
        found, why = check_logits(model, ids)
    except Exception as err:  # noqa: BLE001 - the model's own forward failed on the probe
        raise CtxlensError(f"'{config.model_type}' fails its own forward on a {PROBE_LEN}-token probe "
                           f"({type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}); "
                           "check its config.") from None
    if why or found is None:
        raise CtxlensError(f"ctxlens cannot compute token losses for '{config.model_type}': {why}")
    post, pre_head = found
    resid, why = _attempt_found(check_residual, model, blocks, attn, ids)
    if why:
        refused["residual"] = why
    found_attn = {i: submodule(b, attn) for i, b in enumerate(blocks)}
    named = {i: m for i, m in found_attn.items() if m is not None and is_attention(m)}
    recorded = _attempt(recording_modules, model, list(named.values()), ids)
    recording = recorded if isinstance(recorded, list) else []
    attn_layers = tuple(i for i, m in named.items() if any(m is r for r in recording))
    modules = [named[i] for i in attn_layers] or list(named.values())
    text = text_config(config)
    n_heads = config_int(text, "num_attention_heads", "n_head")
    interface = bool(modules)
    out_proj, rope_layout = None, None
    if modules and not n_heads:
        modules, interface = [], False
        refused["qk"] = refused["head_mask"] = ("its config gives no single number of attention heads "
                                                "(none, or one per layer).")
    if modules:
        why = _attempt(check_qk, model, [named[i] for i in attn_layers], n_heads, ids)
        if why:
            refused["qk"] = refused["rope"] = why
            interface = False
        out_proj = find_out_proj(modules[0], embedding_width(model))
        if out_proj is None:
            refused["head_mask"] = "no Linear inside its attention module maps the heads back to the model width."
        layer_types = getattr(text, "layer_types", None)
        index = [next(i for i, b in enumerate(blocks) if submodule(b, attn) is m) for m in modules]
        types = [layer_types[i] if isinstance(layer_types, (list, tuple)) and len(layer_types) > i else None
                 for i in index]
        if interface and rotary_modules(model):
            rope_layout, why = _attempt_found(check_rope_layout, model, modules, types, ids)
            if why:
                refused["rope"] = why
    if irregular:  # the block list was not found: only token losses were checked
        for analysis in ("residual", "qk", "rope", "head_mask"):
            refused[analysis] = f"{irregular} (its blocks are not one list of its configured layers)."
    family = Family(
        name=config.model_type, kind=_kind(len(named), len(blocks), model), position=_position(model, rope_layout),
        layers=layers, resid=resid or "out", attn=attn if modules else None, out_proj=out_proj, interface=interface,
        base=find_decoder(model), pre_head=pre_head, attn_layers=attn_layers if interface else None,
        rope_layout=rope_layout, logits_post=post, unsupported=tuple(refused.items()), inferred=True,
        notes="adapter inferred from the module tree and checked on the model at load",
    )
    if "head_mask" in family.supports:
        layer = next(i for i, b in enumerate(blocks) if submodule(b, attn) is modules[0])
        why = _attempt(check_head_mask, LM(model, None, family, name=config.model_type), layer, ids)
        if why:
            family = _refuse(family, "head_mask", why)
    return family


def _attempt(check: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | str:
    """``check(*args)``; a check that raises refuses its analysis with the error's first line."""
    try:
        return check(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of a probe means "not confirmed"
        return _raised(err)


def _attempt_found(check: Callable[P, tuple[T, str | None]], *args: P.args, **kwargs: P.kwargs
                   ) -> tuple[T | None, str | None]:
    """``check(*args)`` for a check returning (found, why); one that raises gives (None, its error's first line)."""
    try:
        return check(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of a probe means "not confirmed"
        return None, _raised(err)


def _raised(err: Exception) -> str:
    return f"its check raised {type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"


def _refuse(family: Family, analysis: str, why: str) -> Family:
    import dataclasses

    return dataclasses.replace(family, unsupported=(*family.unsupported, (analysis, why)))
