"""RoPE override: change base theta or scaling of a loaded model in place.

Seed 000 (RoPE base sweeps) and seed 003 (Section 4.2.2, extrapolation with YaRN and others)
need the same weights under a different rotary embedding. transformers computes inverse
frequencies when a ``*RotaryEmbedding`` module is built, from ``config.rope_parameters``; we
edit those parameters, validate them with transformers' own checks, and rebuild every rotary
module from the edited config, which is exactly what ``from_config`` would have built.
"""

from __future__ import annotations

import inspect

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.lm.placement import execution_device

ROPE_TYPES = ("default", *ROPE_INIT_FUNCTIONS)


def rotary_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(qualified name, module) of every rotary-embedding module in ``model``."""
    return [(n, m) for n, m in model.named_modules() if type(m).__name__.endswith("RotaryEmbedding")]


def edited_parameters(params: dict, theta: float | None, scaling: dict | None) -> dict:
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


def _build(cls, config, device):
    params = inspect.signature(cls.__init__).parameters
    kwargs = {"config": config} if "config" in params else {}
    if "device" in params:
        kwargs["device"] = device
    return cls(**kwargs).to(device)


def set_rope(model: torch.nn.Module, theta: float | None = None, scaling: dict | None = None) -> dict:
    """Edit ``model``'s RoPE in place; returns the new ``rope_parameters``."""
    config = model.config
    mods = rotary_modules(model)
    params = getattr(config, "rope_parameters", None)
    if not mods or not isinstance(params, dict) or "rope_theta" not in params:
        raise CtxlensError(
            f"Model type '{config.model_type}' has no rotary embedding to change; RoPE overrides apply to RoPE models only."
        )
    old = dict(params)
    config.rope_parameters = edited_parameters(params, theta, scaling)
    try:
        config.validate_rope()
        # each new module goes where the old one computed (its accelerate hook's device for a
        # dispatched model, whose offloaded buffers may sit on "meta")
        built = [(name, _build(type(m), config, execution_device(m))) for name, m in mods]
    except (ValueError, KeyError, TypeError) as err:
        tried, config.rope_parameters = config.rope_parameters, old
        raise CtxlensError(
            f"Cannot apply RoPE parameters {tried} to '{config.model_type}': {err}"
        ) from None
    for name, module in built:
        parent_name, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attr, module)
    return dict(config.rope_parameters)
