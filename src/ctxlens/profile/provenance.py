"""What the parts of a profile measure with (``provenance``: weights, tokenizer, dtype, device, attention,
library versions), and the check that a resume measures with the same (``same_setup``): rows measured
with other weights or another tokenizer never pool into one card line."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ctxlens.profile.record as records
from ctxlens.core.errors import CtxlensError
from ctxlens.core.terminal import printable
from ctxlens.profile.types import Provenance

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

PROVENANCE = records.PROVENANCE


def provenance(lm: LM) -> Provenance:
    """What the parts of a profile measure with: the weights' digest (the GGUF file's own sha256, else
    ctxlens's fingerprint of the directory), the tokenizer's (every rule that turns text into ids and
    frames a chat prompt: ``tasks.tokens.fingerprint``), the dtype, device and attention implementation
    the model runs with, and the transformers and torch versions."""
    import torch
    import transformers

    from ctxlens.tasks.tokens import fingerprint

    weights = (lm.info.weights or {}).get("digest") if getattr(lm, "info", None) is not None else None
    model = getattr(lm, "model", None)
    return {"weights": weights,
            "tokenizer": fingerprint(lm.tokenizer) if getattr(lm, "tokenizer", None) is not None else None,
            "dtype": str(getattr(model, "dtype", None)).removeprefix("torch."),
            "device": str(getattr(model, "device", None)),
            "attention": getattr(getattr(model, "config", None), "_attn_implementation", None),
            "transformers": transformers.__version__, "torch": torch.__version__}


def same_setup(spec: str, recorded: Provenance | None, now: Provenance, redo: bool) -> None:
    """Refuse a resume whose setup differs from the one the recorded parts measured with (``provenance``),
    naming what changed; a record from before provenance was kept is taken as it is. With ``--redo`` the
    parts named run with the new setup and every part keeps the setup it ran with (``part["provenance"]``)."""
    if not recorded:
        return
    changed = [f"{key} {printable(str(recorded.get(key)))} -> {printable(str(now.get(key)))}" for key in PROVENANCE
               if key in recorded and recorded.get(key) != now.get(key)]
    if changed and not redo:
        raise CtxlensError(f"{spec} was profiled with another setup than now ({'; '.join(changed)}); resume with the "
                           "same weights, tokenizer, dtype and device, or re-measure parts with --redo PART, or use a "
                           "new --out directory.")
