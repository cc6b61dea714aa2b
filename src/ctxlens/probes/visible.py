"""Loss and features with exactly l tokens visible: the last position of fresh windows.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), Section
2.2.2, measures a trained LM's cross-entropy and its last-token features with exactly l tokens
of context. Both ``loss-vs-length`` and ``intrinsic-entropy`` cut samples from a source, read
windows of l tokens as fresh inputs (nothing earlier reaches them through attention, recurrent
state or positions), keep only the last position's states and score the next token through the
LM head in chunks: no full-vocabulary logits for every position. A model whose tokenizer puts a
BOS first reads it first here too (``bos`` unset: auto, ``ctxlens.probes.windows.bos_id``); the BOS
does not count as a visible token.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from ctxlens.core.units import Cache
from ctxlens.probes.source import SourceOptions
from ctxlens.probes.windows import bos_id, is_random, source_windows

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


def samples(lm: LM, config: SourceOptions, length: int, cache: Cache) -> torch.Tensor:
    """The ``config.n_samples`` token windows of ``length`` ids of ``config.source``: [n_samples, length] (cached)."""
    return source_windows(lm, config.source, [length], config.n_samples, config.seed, cache,
                          text_field=config.text_field).ids


def uses_bos(lm: LM, config: SourceOptions) -> bool:
    """Whether ``config``'s windows get a BOS on ``lm`` (the rows' ``bos`` column): ``config.bos``,
    or for unset (auto) whether the tokenizer adds one, never before the random source's ids."""
    if config.bos is None and is_random(config.source):
        return False
    return bos_id(lm, config.bos) is not None


def with_bos(lm: LM, windows: torch.Tensor, config: SourceOptions | None = None) -> torch.Tensor:
    """windows [B, l] -> [B, l + 1] with the tokenizer's BOS id first, or [B, l] unchanged when
    ``config`` (its ``bos`` and ``source``) says no BOS (``uses_bos``); no ``config``: always a BOS."""
    if config is not None and not uses_bos(lm, config):
        return windows
    bos = bos_id(lm, True)
    return torch.cat([torch.full_like(windows[:, :1], bos), windows], 1)


def iter_last_states(lm: LM, windows: torch.Tensor, batch_tokens: int, layer: int | None = None
                     ) -> Iterator[tuple[torch.Tensor, torch.Tensor | None]]:
    """Forward windows [B, l] in batches of about ``batch_tokens`` tokens; yield per batch the
    last position's final hidden state (after the final norm, what the LM head reads) [b, d]
    and, when ``layer`` is given, that block's output at the last position [b, d]."""
    rows = max(1, batch_tokens // windows.shape[1])
    for s in range(0, windows.shape[0], rows):
        yield lm.last_states(windows[s : s + rows], block=layer)


def next_token_nll(lm: LM, final: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """final hidden states [B, d], targets [B] -> nats [B] (float32), through the LM head in chunks."""
    return lm.nll_from_hidden(final[None], targets[None])[0]
