"""Per-token losses without full-vocabulary logits for every position.

The base model returns final hidden states [batch, seq, d_model] (after the final norm); the
LM head, the family's logit post-processing and log-softmax then run on chunks of positions,
so peak memory holds ``chunk x vocab`` logits instead of ``seq x vocab``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch


def chunk_size(vocab: int, batch: int, budget: int = 1 << 25) -> int:
    """Positions per chunk so one chunk's float32 logits stay near ``budget`` elements."""
    return max(1, budget // max(1, vocab * batch))


def nll_from_hidden(
    hidden: torch.Tensor, targets: torch.Tensor, head: torch.nn.Module,
    post: Callable[[torch.Tensor], torch.Tensor] | None = None, chunk: int | None = None
) -> torch.Tensor:
    """hidden [batch, n, d_model], targets [batch, n] -> nats [batch, n] (float32); ``post``: the family's
    logit post-processing of logits [batch, chunk, vocab]."""
    b, n, _ = hidden.shape
    # at least 4 chunks, so a short input never holds its logits and their log-softmax at once
    vocab = cast(torch.Tensor, head.weight).shape[0]  # LM head weight [vocab, d_model]
    chunk = chunk or min(chunk_size(vocab, b), max(1, -(-n // 4)))
    out = torch.empty(b, n, dtype=torch.float32, device=hidden.device)
    for s in range(0, n, chunk):
        logits = head(hidden[:, s : s + chunk])  # [batch, chunk, vocab]
        if post is not None:
            logits = post(logits)
        logp = torch.log_softmax(logits.float(), dim=-1)
        out[:, s : s + chunk] = -logp.gather(-1, targets[:, s : s + chunk, None].to(logp.device)).squeeze(-1)
    return out
