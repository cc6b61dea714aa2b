"""``ctxlens.load``: a hub id, a local ``save_pretrained`` directory, a GGUF file, or
``PREFIX:NAME`` of a registered resolver (``zoo:NAME``, ``ref:NAME``) -> ``LM``.

All go through transformers' own ``from_pretrained``; zoo models are ordinary saved models in
a local cache directory (DESIGN principle 1: one code path). ``zoo:`` and ``ref:`` resolve
through functions of ``ctxlens.zoo`` declared as entry points (``ctxlens.lm.specs.ENTRY_POINTS``)
and loaded on first use, so importing ``lm`` imports no zoo module. Models
larger than one device load with ``device_map`` (accelerate; see ``ctxlens.lm.placement``),
optionally with weights offloaded to ``offload_folder``.
"""

from __future__ import annotations

import logging
import pickle
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import ctxlens.lm.attention as attention
import ctxlens.lm.placement as placement
from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.lm.families import Family, known_family
from ctxlens.lm.infer import infer_family
from ctxlens.lm.info import model_config
from ctxlens.lm.model import LM
from ctxlens.lm.specs import RESOLVERS, Resolved, Resolver, resolve, resolved  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase  # checked as Any (pyproject)

log = logging.getLogger(__name__)

DTYPES: dict[str, str | torch.dtype] = {
    "auto": "auto", "float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def _dtype(dtype: str | torch.dtype) -> str | torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise unknown("dtype", str(dtype), DTYPES)
    return DTYPES[dtype]


def load(
    spec: str | Resolved,
    *,
    dtype: str | torch.dtype = "float32",
    device: str | None = None,
    device_map: placement.DeviceMap | None = None,
    offload_folder: str | None = None,
    attn_implementation: str = "sdpa",
    trust_remote_code: bool = False,
    revision: str | None = None,
) -> LM:
    """Load a causal LM with its tokenizer (if any) and its family adapter.

    spec: hub id, local directory, GGUF file, or ``PREFIX:NAME`` of a registered resolver (``zoo:NAME``,
    ``ref:NAME``), or such a spec resolved already (``Resolved``: not resolved again; the LM keeps it).
    A ``model_type`` with no hand-written family gets an adapter inferred and checked on the model
    (``ctxlens.lm.infer``). dtype: float32 | bfloat16 | float16 | auto.
    device: "cpu", "cuda", "cuda:1", ... (ignored when ``device_map`` is given, e.g. "auto").
    device_map: "auto" (or another accelerate strategy), a device, or {module: device} with devices
    such as 0, "cuda:1", "cpu" or "disk" (then ``offload_folder`` holds the offloaded weights).
    attn_implementation: sdpa (default) | eager | flash_attention_2 (CUDA, flash-attn installed).
    """
    where, config = model_config(spec, trust_remote_code, revision)  # read once with read_info's
    source, spec = where.path, where.name
    common: dict[str, Any] = {"trust_remote_code": trust_remote_code, "revision": revision}
    family = known_family(config.model_type)  # None: inferred from the loaded model below
    if family is None:
        require_decoder(config.model_type, spec)
    kwargs: dict[str, Any] = dict(common, dtype=_dtype(dtype))
    placement.check_dtype(kwargs["dtype"], device, device_map)
    if family is None or family.interface:
        placement.check_attention(attn_implementation, device, device_map)
    if device_map is not None:
        kwargs.update(placement.device_map_option(device_map, offload_folder))
    if family is None or family.interface:
        kwargs["attn_implementation"] = supported_attention(config, attn_implementation)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, config=config, **kwargs)
    except (OSError, ValueError) as err:
        raise CtxlensError(f"Could not load weights for '{spec}' ({str(err).splitlines()[0]}); "
                           "check that the directory or hub id holds a causal LM.") from None
    except pickle.UnpicklingError:
        raise CtxlensError(f"The weights of '{spec}' are a pickle that holds more than tensors; ctxlens only loads "
                           "safetensors or weights-only pickles, so convert the checkpoint to safetensors.") from None
    if device_map is None:
        model = model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    placement.check_input_device(model, spec)
    return LM(model, _tokenizer(source, common, config), _adapter(model, family), name=spec,
              train_length=where.train_length, origin=where.origin, resolved=where)


def require_decoder(model_type: str, spec: str) -> None:
    """Refuse encoder-decoder, multimodal and BERT-style types in one sentence (see ``lm.tiny.every_type.scope``)."""
    from ctxlens.lm.tiny.every_type import IN_SCOPE, scope

    where, why = scope(model_type)
    if where != IN_SCOPE:
        raise CtxlensError(f"'{spec}' is a '{model_type}' model, {why}; ctxlens analyses decoder-only text models "
                           "(any type in transformers' causal-LM mapping that is one).")


def supported_attention(config: PretrainedConfig, requested: str) -> str:
    """``requested``, or eager when the model class refuses sdpa (gemma2's soft-capping).

    ctxlens records q/k in its own registered function either way, so the eager fallback
    changes speed, not what is captured.
    """
    cls = AutoModelForCausalLM._model_mapping.get(type(config), None)
    if requested == "sdpa" and cls is not None and not getattr(cls, "_supports_sdpa", True):
        log.info("%s does not support sdpa; using eager attention", cls.__name__)
        return "eager"
    return requested


def _tokenizer(source: str, common: dict[str, Any], config: PretrainedConfig | None = None
               ) -> PreTrainedTokenizerBase | None:
    """The tokenizer saved with the model (``config``: the model's, so transformers need not read it again)."""
    try:
        return AutoTokenizer.from_pretrained(source, **common, **({"config": config} if config is not None else {}))
    except (OSError, ValueError, TypeError, ImportError) as err:  # ImportError: a tokenizer class's extra package
        log.warning("no tokenizer for %s (%s); token-level analyses only", source, str(err).splitlines()[0])
        return None


def from_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase | None = None, name: str | None = None) -> LM:
    """Wrap an already-built transformers model (e.g. ``from_config`` in tests) as an ``LM``."""
    placement.check_input_device(model, name or model.config.model_type)
    family = _adapter(model, known_family(model.config.model_type))
    return LM(model, tokenizer, family, name=name or model.config.model_type)


def _adapter(model: PreTrainedModel, family: Family | None) -> Family:
    """Route attention through ctxlens and return the hand-written family, or one inferred and checked."""
    model.eval()
    if family is not None:
        if family.interface:
            attention.install(model)
        return family
    try:
        attention.install(model)
    except (ValueError, AttributeError, NotImplementedError) as err:
        log.info("%s keeps its own attention (%s)", model.config.model_type, str(err).splitlines()[0])
    return infer_family(model)
