"""When two logits of one forward count as tied: the width shared by every read of greedy decoding from a
teacher-forced forward (``tasks.forced`` for RULER's tasks, ``zoo.build.greedy_hits`` for the zoo's
retrieval probes). The forward runs the ids in one pass where decoding runs them step by step, so their
logits differ by the rounding of the dtype; a call closer than that is left to decoding."""

from __future__ import annotations

import torch

TIE = 1e-4  # float32: logits within TIE * max(1, |logit|) of each other count as tied


def tie_width(dtype: torch.dtype) -> float:
    """Relative gap under which two logits of a forward in ``dtype`` count as tied: ``TIE`` in
    float32, 8 ulps of a half-precision dtype."""
    return max(TIE, 8 * torch.finfo(dtype).eps)


def against_rivals(logits: torch.Tensor, gold: torch.Tensor, dtype: torch.dtype
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """logits [B, M, vocab] (float) of a forward in ``dtype`` and the gold ids gold [B, M] they should predict ->
    (wins [B, M]: the gold id is the argmax by more than a tie, loses [B, M]: another id beats it by more than a
    tie, rival [B, M]: the best other id)."""
    at_gold = logits.gather(-1, gold[..., None]).squeeze(-1)  # [B, M]
    rival = logits.scatter(-1, gold[..., None], float("-inf")).max(-1)  # values, indices [B, M]
    tie = tie_width(dtype) * at_gold.abs().clamp(min=1.0)  # [B, M]
    return at_gold - rival.values > tie, rival.values - at_gold > tie, rival.indices
