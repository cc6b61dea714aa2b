"""Perplexity, one copy: of a suffix given a long prefix, and of whole windows.

The geometry paper ("How much do contextualized representations encode long-range context?"),
Section 4 and Appendix C, scores only the last N tokens of each window, each given everything
before it (suffix perplexity, sliding-window style): ``suffix_perplexity``. The RoPE distance
paper ("On the token distance modeling ability of higher RoPE attention dimension"), Sections
4.2.3 and 4.3.2, reads the loss of every token of a window with heads masked or RoPE pairs
ablated: ``window_nll``. Both go through ``LM.nll_from_hidden`` / ``LM.token_losses`` (the LM
head in chunks, with the family's logit post-processing).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


def suffix_hidden(lm: LM, ids: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Final hidden states (after the final norm) [B, end - start, d] of ids [B, L]."""
    return lm.final_hidden(ids)[:, start:end]  # of [B, L, d]


@torch.inference_mode()
def suffix_nll(lm: LM, ids: torch.Tensor, suffix_len: int) -> torch.Tensor:
    """[B, suffix_len] float32 nats of the last ``suffix_len`` tokens of ids [B, L], each given
    everything before it (sliding-window style scoring of the suffix)."""
    length = ids.shape[1]
    hidden = suffix_hidden(lm, ids, length - suffix_len - 1, length - 1)  # [B, N, d]
    return lm.nll_from_hidden(hidden, ids[:, length - suffix_len:])  # targets [B, N]


def suffix_perplexity(lm: LM, windows: torch.Tensor, suffix_len: int, batch_size: int) -> dict:
    """{"n_tokens", "nll", "nll_se", "ppl", "flag"} of the last ``suffix_len`` tokens of windows
    [n, L]; ``nll_se``: the standard error of ``nll`` over the n windows (each window's mean NLL
    one observation; None for one window)."""
    per_window: list[float] = []
    count = 0
    for b0 in range(0, windows.shape[0], batch_size):
        nll = suffix_nll(lm, windows[b0:b0 + batch_size], suffix_len)  # [B, N]
        per_window += nll.double().mean(dim=1).tolist()
        count += nll.numel()
    mean = sum(per_window) / len(per_window)  # every window scores N tokens: the mean over all of them
    if not math.isfinite(mean):
        return {"n_tokens": count, "nll": None, "nll_se": None, "ppl": None, "flag": "non-finite loss"}
    n = len(per_window)
    se = math.sqrt(sum((x - mean) ** 2 for x in per_window) / (n - 1) / n) if n > 1 else None
    return {"n_tokens": count, "nll": mean, "nll_se": se, "ppl": math.exp(min(mean, 700.0)), "flag": None}


def window_nll(lm: LM, ids: torch.Tensor) -> torch.Tensor:
    """[n * (L - 1)] float32 nats of every next token of windows ids [n, L], one window per forward."""
    return torch.cat([lm.token_losses(ids[i:i + 1])[0] for i in range(len(ids))])
