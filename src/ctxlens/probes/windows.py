"""Token windows cut from a text source (or random ids), once per run, at its longest length.

Every experiment that reads a source cuts its windows here. The geometry paper ("How much do
contextualized representations encode long-range context?"), Section 3, scores the same suffix
tokens in every condition: windows are cut once at the longest length a run asks for and
cropped on the left for shorter ones (``Windows.at``), so every length ends on the same tokens.
The longest length is taken from the lengths the caller passes, inside ``source_windows``:
nothing else has to remember it, and ``Windows.cut_length`` names it for the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ctxlens.data.sources import open_source
from ctxlens.data.windows import token_windows


@dataclass(frozen=True)
class Windows:
    """``n`` windows cut at ``cut_length`` tokens: ids [n, cut_length]."""

    ids: torch.Tensor

    @property
    def cut_length(self) -> int:
        return int(self.ids.shape[1])

    def at(self, length: int) -> torch.Tensor:
        """[n, length]: the last ``length`` tokens of every window (the same last tokens at every length)."""
        return self.ids[:, self.cut_length - length:]


def cut_windows(lm, source: str, length: int, n: int, seed: int, *, text_field: str = "text",
                role: str = "text source") -> torch.Tensor:
    """[n, length] token ids of ``source`` (a source spec, or "random") tokenized for ``lm``;
    ``role`` names the source in the error of a model without a tokenizer."""
    opened = open_source(source, text_field=text_field)
    if opened.is_text:
        lm.require_tokenizer(f"{role} '{source}'")
    return token_windows(opened, lm.tokenizer, length, n, seed=seed, vocab_size=lm.vocab_size)


def source_windows(lm, source: str, lengths: Sequence[int], n: int, seed: int, cache: dict, *,
                   text_field: str = "text") -> Windows:
    """``n`` windows of ``source`` cut at max(lengths), cached in ``cache`` (the runner's per-model
    dict) per source, text field, seed, n and cut length."""
    longest = max(lengths)
    key = ("windows", source, text_field, seed, n, longest)
    if key not in cache:
        cache[key] = cut_windows(lm, source, longest, n, seed, text_field=text_field)  # [n, longest]
    return Windows(cache[key])
