"""The model options of a run (``--dtype`` ... ``--rope-layers``): typed and checked before any model loads
(``parse_model_options``: booleans strictly, RoPE scaling as finite numbers, devices this machine has),
which of them ``load`` takes (``LOAD_KEYS``), and applied to a loaded model (``prepare``: a RoPE base
or scaling, extrapolation allowed)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxlens.core.errors import CtxlensError, clip
from ctxlens.core.units import Row
from ctxlens.experiments.base import make_config

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

LOAD_KEYS = ("dtype", "device", "device_map", "offload_folder", "attn_implementation", "trust_remote_code", "revision")


@dataclass
class ModelOptions:
    """The typed model options (``--dtype`` ... ``--rope-layers``); booleans parse strictly, so
    ``trust_remote_code: "false"`` in a YAML file is False, and ``"maybe"`` is an error."""

    dtype: str | None = None
    device: str | None = None
    offload_folder: str | None = None
    attn_implementation: str | None = None
    trust_remote_code: bool | None = None
    revision: str | None = None
    rope_theta: float | None = None
    allow_extrapolation: bool | None = None
    rope_layers: str | None = None


# device_map: "auto" / a device / {module: device}; rope_scaling: a dict. The loader and lm.analysis.rope check them.
_UNTYPED = ("device_map", "rope_scaling")


def parse_model_options(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` checked and typed against ``ModelOptions`` (plus the two structured options);
    keys left unset are dropped."""
    typed = make_config(ModelOptions, {k: v for k, v in raw.items() if v is not None and k not in _UNTYPED})
    parsed = {**{k: v for k, v in dataclasses.asdict(typed).items() if v is not None},
              **{k: raw[k] for k in _UNTYPED if raw.get(k) is not None}}
    check_rope_scaling(parsed.get("rope_scaling"))
    check_device(parsed.get("device"), "--device")
    check_device_map(parsed.get("device_map"))
    if parsed.get("rope_theta") is not None and not 0 < parsed["rope_theta"] < 1e30:
        raise CtxlensError(f"--rope-theta must be a positive finite base, got {parsed['rope_theta']}; e.g. 10000.")
    return parsed


def check_rope_scaling(scaling: object) -> None:
    """Raise unless ``scaling`` is None or a {name: value} mapping whose numbers are finite and whose
    ``factor`` is a positive number (a NaN factor once made every row null)."""
    import math

    fix = "give a JSON object such as '{\"rope_type\": \"linear\", \"factor\": 2}'"
    if scaling is None:
        return
    if not isinstance(scaling, dict) or not all(isinstance(k, str) for k in scaling):
        raise CtxlensError(f"--rope-scaling must be a mapping of RoPE scaling parameters, got "
                           f"{type(scaling).__name__}; {fix}.")
    for key, value in scaling.items():
        numbers = value if isinstance(value, list) else [value]
        if not all(v is None or isinstance(v, (str, bool)) or (isinstance(v, (int, float)) and math.isfinite(v))
                   for v in numbers):
            raise CtxlensError(f"--rope-scaling's {key!r} must be a finite number or text, got {clip(value)}; {fix}.")
    factor = scaling.get("factor")
    if "factor" in scaling and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                                or not 0 < factor <= 1e6):
        raise CtxlensError(f"--rope-scaling's factor must be a positive number (at most 1e6), got {clip(factor)}; "
                           f"{fix}.")


_DEVICE = re.compile(r"(cpu|mps|cuda|xpu)(:[0-9]{1,3})?")


def check_device(device: object, what: str = "--device") -> None:
    """Raise, before any model loads, unless ``device`` (a string or a device index) names a device
    this machine has: cpu, cuda / cuda:N with N below the GPU count, mps, xpu; never meta."""
    if device is None:
        return
    import torch

    name = f"cuda:{device}" if isinstance(device, int) and not isinstance(device, bool) else device
    if not isinstance(name, str) or not _DEVICE.fullmatch(name):
        raise CtxlensError(f"{what} must be cpu, cuda, cuda:N, mps or xpu, got {clip(device)}; e.g. {what} cpu.")
    kind, _, index = name.partition(":")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (index and int(index) >= count):
            have = "no CUDA GPU" if count == 0 else f"{count} CUDA GPU(s), cuda:0 to cuda:{count - 1}"
            raise CtxlensError(f"{what} {name}: this machine has {have}; pass {what} cpu or a GPU it has.")
    elif kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise CtxlensError(f"{what} mps: this machine has no Apple GPU; pass {what} cpu.")
    elif kind == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        raise CtxlensError(f"{what} xpu: this machine has no Intel GPU; pass {what} cpu.")


def check_device_map(device_map: object) -> None:
    """Raise unless every device a device map names (a device string, or the values of a
    {module: device} mapping, given as JSON or a dict) is one this machine has ("disk" aside)."""
    from ctxlens.core import yaml_safe

    if isinstance(device_map, str) and device_map.strip().startswith("{"):
        device_map = yaml_safe.load_json(device_map, "--device-map", limit=1 << 20)
    if isinstance(device_map, dict):
        for place in device_map.values():
            place = int(place) if isinstance(place, str) and place.isdigit() else place
            if place not in ("disk", "cpu"):
                check_device(place, "--device-map")
    elif isinstance(device_map, str) and device_map not in ("auto", "balanced", "balanced_low_0", "sequential"):
        check_device(device_map, "--device-map")


def prepare(lm: LM, model_options: dict[str, Any]) -> Row:
    """Apply the model options that change a loaded model; returns the RoPE change as columns
    (``{"rope_changed": {layer type or "all": new parameters}}``, empty when none)."""
    theta, scaling, layers = (model_options.get(k) for k in ("rope_theta", "rope_scaling", "rope_layers"))
    changed: Row = {}
    if theta is not None or scaling is not None:
        params = lm.set_rope(theta=theta, scaling=scaling, layers=layers)
        per_type = all(isinstance(v, dict) for v in params.values())
        changed = {"rope_changed": params if per_type else {"all": params}}
    elif layers is not None:
        from ctxlens.core.errors import CtxlensError

        raise CtxlensError("--rope-layers says which layers --rope-theta / --rope-scaling change; pass one of "
                           "those too.")
    if model_options.get("allow_extrapolation"):
        lm.allow_extrapolation()
    return changed


def extrapolating(model_options: dict[str, object]) -> bool:
    """Whether lengths beyond the positions are allowed: --allow-extrapolation, or a changed RoPE
    (``LM.set_rope`` allows them, as ``prepare`` applies it)."""
    return any(model_options.get(k) is not None and model_options.get(k) is not False
               for k in ("allow_extrapolation", "rope_theta", "rope_scaling"))
