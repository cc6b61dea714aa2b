"""RoPE override: change base theta or scaling of a loaded model in place, per layer type.

The geometry paper (RoPE base sweeps) and the rope-distance paper (Section 4.2.2, extrapolation with YaRN and others)
need the same weights under a different rotary embedding. transformers computes inverse
frequencies when a ``*RotaryEmbedding`` module is built, from ``config.rope_parameters``; we
edit those parameters, validate them with transformers' own checks, and rebuild every rotary
module of the text model from the edited config, which is exactly what ``from_config`` would
have built.

Local/global hybrids (Gemma 3, OLMo 3, Gemma 3n, ...) keep one RoPE per layer type:
``rope_parameters`` is a dict keyed by layer type (``{"sliding_attention": {...},
"full_attention": {...}}``), ``config.layer_types`` names each layer's type, and the one rotary
module holds a ``<type>_inv_freq`` buffer per type. On such a model a change targets the
global (``full_attention``) layers by default, as Gemma 3's own long-context extension does
(its technical report raises the global layers' base to 1M and rescales them for 128K, the
local layers keep base 10K); ``layers="sliding"`` or ``"all"`` picks other types. A model with
one shared RoPE changes all its layers, and refuses a target that names only some of them.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.lm.placement import execution_device

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")

# a config's rope_parameters, or one layer type's entry of them: {"rope_type": ..., "rope_theta": ..., ...}
RopeParameters = dict[str, Any]

ROPE_TYPES = ("default", *ROPE_INIT_FUNCTIONS)
TARGETS = ("global", "sliding", "all")  # or one layer type by name, e.g. "sliding_attention"
GLOBAL, SLIDING = "full_attention", "sliding_attention"


# -- where the RoPE of a layer lives -------------------------------------------------------------
def text_config(model_or_config: torch.nn.Module | PretrainedConfig) -> PretrainedConfig:
    """The config of the text model (``text_config`` of a multimodal model such as gemma3)."""
    config: PretrainedConfig = getattr(model_or_config, "config", model_or_config)
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def rotary_modules(model: torch.nn.Module, under: str = "") -> list[tuple[str, torch.nn.Module]]:
    """(qualified name, module) of every rotary-embedding module in ``model`` (below ``under``,
    e.g. the text model of a multimodal model, so that a vision tower's RoPE is left alone)."""
    prefix = f"{under}." if under else ""
    return [(n, m) for n, m in model.named_modules()
            if n.startswith(prefix) and type(m).__name__.endswith("RotaryEmbedding")]


def rope_keys(config: PretrainedConfig) -> list[str]:
    """The layer types that carry their own RoPE parameters (transformers' nested
    ``rope_parameters``), or [] when one RoPE serves every layer."""
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict):
        return []
    nested = getattr(config, "nested_rope_parameter_keys", None)
    if nested is not None:
        return list(nested(params))
    # transformers before the method (5.17 has none) nests by the same rule: keys that name a layer type
    labels = getattr(config, "_rope_type_labels", None) or getattr(config, "layer_types", None) or ()
    return [key for key in params if key in labels]


def layer_type(config: PretrainedConfig, layer: int) -> str:
    """The attention type of ``layer``: ``config.layer_types[layer]``; a model without layer types
    is ``sliding_attention`` when its config sets a window for every layer (mistral), else
    ``full_attention``."""
    types = getattr(config, "layer_types", None)
    if types:
        return str(types[layer])
    return SLIDING if getattr(config, "sliding_window", None) else GLOBAL


def layer_parameters(config: PretrainedConfig, layer: int) -> RopeParameters | None:
    """The RoPE parameters ``layer`` uses (None for a layer type without RoPE)."""
    keys = rope_keys(config)
    if not keys:
        return config.rope_parameters
    kind = layer_type(config, layer)
    if kind not in keys:
        raise CtxlensError(f"Layer {layer} is of type '{kind}', which has no entry in rope_parameters "
                           f"(entries: {', '.join(keys)}); pick a layer of one of those types.")
    return config.rope_parameters[kind]


def inv_freq(model: torch.nn.Module, layer: int, under: str = "") -> torch.Tensor:
    """[n_pairs] inverse frequencies ``layer`` rotates q and k with (looked up each call:
    ``set_rope`` rebuilds the module)."""
    config = text_config(model)
    mods = rotary_modules(model, under)
    if not mods:
        raise CtxlensError(f"Model type '{config.model_type}' has no rotary embedding; RoPE analyses need a "
                           "RoPE model.")
    module = mods[0][1]
    if layer_parameters(config, layer) is None:
        raise CtxlensError(f"Layer {layer} ({layer_type(config, layer)}) uses no RoPE; pick a layer with RoPE.")
    name = f"{layer_type(config, layer)}_inv_freq" if rope_keys(config) else "inv_freq"
    return getattr(module, name)


# -- editing ---------------------------------------------------------------------------------------
def edited_parameters(params: RopeParameters, theta: float | None, scaling: RopeParameters | None) -> RopeParameters:
    """A copy of ``rope_parameters`` with a new theta and/or scaling (``{"rope_type": ..., ...}``)."""
    new = dict(params)
    if theta is not None:
        if not theta > 0:
            raise CtxlensError(f"RoPE theta must be positive, got {theta}; pass e.g. --rope-theta 500000.")
        new["rope_theta"] = float(theta)
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind is None:
            raise CtxlensError("A RoPE scaling needs a 'rope_type' (e.g. linear, dynamic, yarn, llama3).")
        if kind not in ROPE_TYPES:
            raise unknown("RoPE scaling type", kind, ROPE_TYPES)
        for key in [k for k in new if k not in ("rope_theta", "partial_rotary_factor")]:
            del new[key]
        new.update({k: v for k, v in scaling.items() if k != "type"}, rope_type=kind)
    return new


def _matches(target: str, kind: str) -> bool:
    if target == "all":
        return True
    if target == "global":
        return kind == GLOBAL
    if target == "sliding":
        return "sliding" in kind or kind == "chunked_attention"
    return kind == target


def target_types(config: PretrainedConfig, layers: str | None, n_layers: int) -> list[str] | None:
    """The layer types a change with target ``layers`` edits: their names for a model with a RoPE
    per layer type (default: the global layers), None for a model whose one RoPE serves all layers
    (default or a target that covers all of them), or a clear error."""
    keys = rope_keys(config)
    target = layers or ("global" if keys else "all")
    if keys:
        chosen = [k for k in keys if config.rope_parameters[k] is not None and _matches(target, k)]
        if not chosen and layers is None:  # no global type by that name (zaya's "hybrid"): every type
            chosen = [k for k in keys if config.rope_parameters[k] is not None]
        if not chosen:
            raise CtxlensError(f"'{config.model_type}' has no RoPE layers of type '{target}' (its RoPE layer types: "
                               f"{', '.join(keys)}); pass --rope-layers global, sliding, all or one of those.")
        return chosen
    present = sorted({layer_type(config, i) for i in range(n_layers)})
    if not all(_matches(target, kind) for kind in present):
        raise CtxlensError(f"'{config.model_type}' has one RoPE shared by all its layers ({', '.join(present)}), so "
                           f"it cannot change only the '{target}' ones; leave --rope-layers out or pass 'all'.")
    return None


def _build(cls: type[torch.nn.Module], config: PretrainedConfig, device: torch.device) -> torch.nn.Module:
    params = inspect.signature(cls.__init__).parameters
    kwargs: dict[str, object] = {"config": config} if "config" in params else {}
    if "device" in params:
        kwargs["device"] = device
    return cls(**kwargs).to(device)


def _rebuild(model: torch.nn.Module, config: PretrainedConfig, new: RopeParameters, under: str) -> None:
    """Set ``config.rope_parameters = new``, validate, rebuild the rotary modules; on failure the
    config is restored and nothing changed."""
    mods = rotary_modules(model, under)
    old = config.rope_parameters
    config.rope_parameters = new
    try:
        config.validate_rope()
        # each new module goes where the old one computed (its accelerate hook's device for a
        # dispatched model, whose offloaded buffers may sit on "meta")
        built = [(name, _build(type(m), config, execution_device(m))) for name, m in mods]
    except (ValueError, KeyError, TypeError) as err:
        config.rope_parameters = old
        raise CtxlensError(f"Cannot apply RoPE parameters {new} to '{config.model_type}': {err}") from None
    for name, module in built:
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attr, module)


def set_rope(model: torch.nn.Module, theta: float | None = None, scaling: RopeParameters | None = None,
             layers: str | None = None, under: str = "", n_layers: int | None = None) -> RopeParameters:
    """Edit ``model``'s RoPE in place. Returns the new parameters of what changed: the flat
    ``rope_parameters`` of a one-RoPE model, ``{layer_type: parameters}`` of the changed types
    of a model with a RoPE per layer type. ``layers``: see ``target_types``."""
    config = text_config(model)
    params = getattr(config, "rope_parameters", None)
    keys = rope_keys(config)
    if not rotary_modules(model, under) or not isinstance(params, dict) or not (keys or "rope_theta" in params):
        raise CtxlensError(
            f"Model type '{config.model_type}' has no rotary embedding to change; RoPE overrides apply to RoPE "
            "models only."
        )
    per_layer = [a for a in ("layer_rope_theta", "rope_theta_per_layer") if isinstance(getattr(config, a, None), list)]
    if per_layer:  # granite_swa keys its rotary tables by the bases listed per layer
        raise CtxlensError(f"'{config.model_type}' lists a RoPE base per layer in config.{per_layer[0]}, which "
                           "set_rope does not edit; save a config with the new bases and load that instead.")
    n_layers = n_layers or int(getattr(config, "num_hidden_layers", 0) or len(getattr(config, "layer_types", []) or []))
    chosen = target_types(config, layers, n_layers)
    if chosen is None:
        new = edited_parameters(params, theta, scaling)
        _rebuild(model, config, new, under)
        return dict(config.rope_parameters)
    new = copy.deepcopy(params)
    for kind in chosen:
        new[kind] = edited_parameters(params[kind], theta, scaling)
    _rebuild(model, config, new, under)
    return {kind: dict(config.rope_parameters[kind]) for kind in chosen}


def restore_rope(model: torch.nn.Module, params: RopeParameters, under: str = "") -> None:
    """Put back a whole ``rope_parameters`` (as read before a change) and rebuild the rotary modules."""
    _rebuild(model, text_config(model), copy.deepcopy(params), under)


LAYOUTS = ("half", "interleaved")


def pair_index(rotary_dims: int, layout: str) -> torch.Tensor:
    """[rotary_dims/2, 2] dim indices of each frequency pair, lowest frequency index first."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if rotary_dims % 2:
        raise ValueError(f"rotary_dims must be even, got {rotary_dims}")
    half = rotary_dims // 2
    i = torch.arange(half)
    return torch.stack([i, i + half], -1) if layout == "half" else torch.stack([2 * i, 2 * i + 1], -1)


@contextlib.contextmanager
def zero_rotation(model: torch.nn.Module, under: str = "") -> Iterator[None]:
    """Within the block every inverse frequency of every rotary module of ``model`` (below ``under``)
    is 0, so cos = the module's attention scaling (1 for plain RoPE), sin = 0 and q and k reach
    attention unrotated: RoPE removed, everything else as loaded (the rope-distance paper's null:
    no positional rotation). Each ``*inv_freq`` buffer is swapped for zeros and the very tensor
    it held is put back on exit, so the model is bitwise as before."""
    mods = rotary_modules(model, under)
    if not mods:
        raise CtxlensError(f"Model type '{text_config(model).model_type}' has no rotary embedding to zero; the "
                           "RoPE-zeroed control applies to RoPE models only.")
    saved = [(m, name, buf) for _, m in mods for name, buf in list(m._buffers.items())
             if name.endswith("inv_freq") and buf is not None]
    for m, name, buf in saved:
        m._buffers[name] = torch.zeros_like(buf)
    try:
        yield
    finally:
        for m, name, buf in saved:
            m._buffers[name] = buf
