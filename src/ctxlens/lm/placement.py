"""Where a model runs: accelerate device maps, offload, and the guards of the GPU-only paths.

Issue 9, parts 2 and 3. Models larger than one device load with ``device_map`` (accelerate's
``dispatch_model`` through transformers' ``from_pretrained``): blocks sit on several GPUs, on
the CPU, or on disk (``offload_folder``), and accelerate's hooks move activations between them
and stream offloaded weights in for their forward. ctxlens' analyses only need three things
from such a model, which this module provides:

- the device its token ids go to (the input embedding's execution device), which must be a
  real device (an offloaded embedding would leave its weights on the "meta" device);
- where captured slices go: to the CPU as soon as each is taken when the model spans more than
  one placement, so a capture never holds memory on the devices the forward still needs, and
  never mixes devices across layers;
- the execution device of any module (a rotary embedding rebuilt by ``set_rope`` goes there).

The GPU-only paths (flash attention kernels, bfloat16 on the GPU, device maps needing
accelerate) are checked here before loading, so that a missing extra or device ends in one
clear ``CtxlensError`` instead of a traceback from deep inside transformers.
"""

from __future__ import annotations

import importlib.util
import json
from typing import TYPE_CHECKING

import torch

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

AUTO_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
DeviceMap = str | int | torch.device | dict[str, str | int]  # a strategy, a device, or {module: device}
FLASH_PACKAGES = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}


# -- device maps ---------------------------------------------------------------------------------

def device_map_option(device_map: DeviceMap, offload_folder: str | None = None) -> dict[str, object]:
    """``from_pretrained`` keyword arguments for ``device_map`` (a strategy name such as "auto", a
    device string, a {module: device} dict, or that dict as a JSON string, e.g. from the CLI)."""
    if importlib.util.find_spec("accelerate") is None:
        raise CtxlensError("Loading with a device map needs the accelerate package, which is not installed; "
                           "pip install accelerate, or load without --device-map.")
    if isinstance(device_map, str) and device_map.strip().startswith("{"):
        try:
            device_map = json.loads(device_map)
        except json.JSONDecodeError as err:
            raise CtxlensError(f"The device map is not valid JSON ({err.msg}); write it as "
                               '\'{"model.layers.0": 0, "model.layers.1": "cpu", ...}\'.') from None
    if isinstance(device_map, dict):
        places = {str(v) for v in device_map.values()}
        if "disk" in places and not offload_folder:
            raise CtxlensError("The device map offloads modules to 'disk' but no offload folder was given; "
                               "pass offload_folder (--offload-folder DIR) for the offloaded weights.")
    elif not isinstance(device_map, (str, int, torch.device)):
        raise CtxlensError(f"A device map must be a strategy ({', '.join(AUTO_MAPS)}), a device, or a "
                           f"{{module: device}} mapping, got {type(device_map).__name__}.")
    kwargs: dict[str, object] = {"device_map": device_map}
    if offload_folder:
        kwargs["offload_folder"] = str(offload_folder)
    return kwargs


def placements(model: torch.nn.Module) -> set[str]:
    """The distinct placements of a dispatched model's device map ({"0", "1", "cpu", "disk"}); empty
    for a model that was not loaded with a device map."""
    return {str(v) for v in (getattr(model, "hf_device_map", None) or {}).values()}


def is_split(model: torch.nn.Module) -> bool:
    """True when the model's modules sit in more than one placement (devices, CPU, disk)."""
    return len(placements(model)) > 1


def execution_device(module: torch.nn.Module) -> torch.device:
    """The device ``module`` computes on: its accelerate hook's execution device, else the device
    of its first tensor that is not on "meta", else the CPU."""
    hook = getattr(module, "_hf_hook", None)
    for h in [hook, *getattr(hook, "hooks", ())]:
        device = getattr(h, "execution_device", None)
        if device is not None:
            return torch.device(f"cuda:{device}" if isinstance(device, int) else device)
    for t in [*module.parameters(), *module.buffers()]:
        if t.device.type != "meta":
            return t.device
    return torch.device("cpu")


def input_device(model: PreTrainedModel) -> torch.device:
    """The device token ids go to: the input embedding's execution device."""
    return execution_device(model.get_input_embeddings())


def check_input_device(model: torch.nn.Module, name: str) -> None:
    """Raise when a dispatched model's first parameter (what ``LM.device`` reports) was offloaded to
    "meta": token ids would be sent there. Device maps must keep the input embeddings on a device."""
    first = next(model.parameters(), None)
    if placements(model) and first is not None and first.device.type == "meta":
        raise CtxlensError(
            f"The input embeddings of '{name}' were offloaded (their weights are on the 'meta' device); "
            "keep the embedding module on a GPU or the CPU in the device map."
        )


def capture_device(model: torch.nn.Module, out_device: str | torch.device | None = None) -> str | torch.device | None:
    """Where captured slices go: ``out_device`` when given; the CPU for a model split over several
    placements; else None (they stay where the layer computed them)."""
    if out_device is not None:
        return out_device
    return "cpu" if is_split(model) else None


def synchronize() -> None:
    """Wait for every GPU, so that slices copied to the CPU without blocking are complete."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i in range(torch.cuda.device_count()):
            torch.cuda.synchronize(i)


# -- guards of the GPU-only paths -----------------------------------------------------------------

def _wants_cuda(device: str | None, device_map: DeviceMap | None) -> bool:
    if device_map is not None:
        return torch.cuda.is_available()
    return (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")


def check_attention(attn_implementation: str | None, device: str | None, device_map: DeviceMap | None = None
                    ) -> None:
    """Clear errors for a flash-attention request on a machine that cannot run it."""
    impl = attn_implementation or "sdpa"
    if "flash" not in impl:
        return
    if not _wants_cuda(device, device_map):
        raise CtxlensError(f"attn_implementation '{impl}' needs a CUDA GPU and the model would run on the CPU; "
                           "use --attn-implementation sdpa on a CPU, or run on a GPU.")
    package = FLASH_PACKAGES.get(impl)
    if package and importlib.util.find_spec(package) is None and importlib.util.find_spec("kernels") is None:
        raise CtxlensError(f"attn_implementation '{impl}' needs the {package.replace('_', '-')} package (or the "
                           "kernels package), which is not installed; pip install 'ctxlens[flash]' on a GPU "
                           "machine, or use --attn-implementation sdpa.")


def check_dtype(dtype: str | torch.dtype, device: str | None, device_map: DeviceMap | None = None) -> None:
    """bfloat16 on a GPU that lacks it (before Ampere) is an error naming float16 instead."""
    if dtype is torch.bfloat16 and _wants_cuda(device, device_map) and not torch.cuda.is_bf16_supported():
        raise CtxlensError("This GPU does not support bfloat16; pass --dtype float16 (or float32).")
