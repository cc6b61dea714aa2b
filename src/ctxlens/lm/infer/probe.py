"""The probe an inferred adapter is checked on, and how a check compares its two routes.

``ctxlens.lm.infer`` runs each claim it reads off the module tree on ``PROBE_LEN`` random tokens
(a few forwards), against a route that does not use the claim; the tolerance of those
comparisons follows the model's dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

PROBE_LEN = 12


def probe_ids(model: PreTrainedModel, length: int = PROBE_LEN) -> torch.Tensor:
    """[1, length] random token ids (fixed seed) on the model's device."""
    vocab = int(model.get_output_embeddings().weight.shape[0]) if model.get_output_embeddings() is not None else 256
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(min(3, vocab - 1), min(vocab, 32000), (1, length), generator=gen)
    return ids.to(next(model.parameters()).device)


ATOL = 1e-4  # relative to the scale of the compared tensors, in float32


def tolerance(dtype: torch.dtype) -> float:
    """Relative tolerance of the probe's comparisons: ATOL in float32, 16 ulps in bfloat16 / float16
    (a wrong read point or pair layout is off by order one, so this still tells them apart)."""
    return max(ATOL, 16 * torch.finfo(dtype).eps) if dtype.is_floating_point else ATOL


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference relative to b's scale (inf for shapes that differ)."""
    if a.shape != b.shape:
        return float("inf")
    return float((a.float() - b.float()).abs().max()) / max(1.0, float(b.float().abs().max()))


def all_close(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = max(tolerance(a.dtype), tolerance(b.dtype))  # the coarser of the two
    a, b = a.float(), b.float()
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and \
        float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))
