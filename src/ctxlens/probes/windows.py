"""Token windows cut from a text source (or random ids), once per run, at its longest length.

Every experiment that reads a source cuts its windows here. The geometry paper ("How much do
contextualized representations encode long-range context?"), Section 3, scores the same suffix
tokens in every condition: windows are cut once at the longest length a run asks for and
cropped on the left for shorter ones (``Windows.at``), so every length ends on the same tokens.
The longest length is taken from the lengths the caller passes, inside ``source_windows``:
nothing else has to remember it, and ``Windows.cut_length`` names it for the rows.

BOS: a model whose tokenizer puts a BOS token before any text it encodes was trained (and is
used) with that token first, so windows are scored with it first by default (``bos=None``,
"auto": ``tokenizer_adds_bos``); ``bos=True``/``False`` forces it. With a BOS, ``Windows.at(length)``
is the BOS followed by the last ``length - 1`` text tokens: ``length`` stays the number of
positions the model reads, and the suffix tokens stay the same at every length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.core.units import Cache
from ctxlens.data.sources import open_source
from ctxlens.data.windows import token_windows

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


def tokenizer_adds_bos(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` puts its BOS first when it encodes text: encode "a" with its special
    tokens and look at the first id (the tokenizer's own rule, whatever its flags say). False for
    no tokenizer or no BOS token."""
    bos = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None
    if bos is None:
        return False
    try:
        ids = tokenizer.encode("a", add_special_tokens=True)
    except (TypeError, ValueError):
        return False
    return len(ids) > 0 and int(ids[0]) == int(bos)


@overload
def bos_id(lm: LM, bos: Literal[True]) -> int: ...
@overload
def bos_id(lm: LM, bos: bool | None) -> int | None: ...
def bos_id(lm: LM, bos: bool | None) -> int | None:
    """The BOS id to put first in ``lm``'s windows, or None: ``bos`` None (auto) follows
    ``tokenizer_adds_bos``; True demands the tokenizer's BOS; False gives None."""
    if bos is False:
        return None
    tokenizer = lm.tokenizer
    if bos is None:
        return int(tokenizer.bos_token_id) if tokenizer_adds_bos(tokenizer) else None
    lm.require_tokenizer("the bos option")
    if getattr(tokenizer, "bos_token_id", None) is None:
        raise CtxlensError(f"The tokenizer of '{lm.name}' has no BOS token; run with --bos false.")
    return int(tokenizer.bos_token_id)


@dataclass(frozen=True)
class Windows:
    """``n`` windows cut at ``cut_length`` tokens: ids [n, cut_length] of text, and the BOS id put
    first by ``at`` (None: no BOS)."""

    ids: torch.Tensor
    bos_id: int | None = None

    @property
    def cut_length(self) -> int:
        return int(self.ids.shape[1])

    @property
    def bos(self) -> bool:
        """Whether the windows start with a BOS (the rows' ``bos`` column)."""
        return self.bos_id is not None

    def at(self, length: int) -> torch.Tensor:
        """[n, length]: the last ``length`` tokens of every window (the same last tokens at every
        length); with a BOS, the BOS then the last ``length - 1`` tokens."""
        if self.bos_id is None:
            return self.ids[:, self.cut_length - length:]
        if length < 2:
            raise CtxlensError(f"A window of {length} token cannot hold the BOS and a text token; use lengths >= 2.")
        text = self.ids[:, self.cut_length - length + 1:]  # [n, length - 1]
        return torch.cat([torch.full_like(text[:, :1], self.bos_id), text], 1)


def cut_windows(lm: LM, source: str, length: int, n: int, seed: int, *, text_field: str = "text",
                role: str = "text source") -> torch.Tensor:
    """[n, length] token ids of ``source`` (a source spec, or "random") tokenized for ``lm``;
    ``role`` names the source in the error of a model without a tokenizer."""
    opened = open_source(source, text_field=text_field)
    if opened.is_text:
        lm.require_tokenizer(f"{role} '{source}'")
    return token_windows(opened, lm.tokenizer, length, n, seed=seed, vocab_size=lm.vocab_size)


def source_windows(lm: LM, source: str, lengths: Sequence[int], n: int, seed: int, cache: Cache, *,
                   text_field: str = "text", bos: bool | None = False) -> Windows:
    """``n`` windows of ``source`` cut at max(lengths), cached in ``cache`` (the runner's per-model
    dict) per source, text field, seed, n and cut length; ``bos``: see ``bos_id`` (None: auto)
    -- a random source never gets one (its ids are not text)."""
    longest = max(lengths)
    key = ("windows", source, text_field, seed, n, longest)
    if key not in cache:
        cache[key] = cut_windows(lm, source, longest, n, seed, text_field=text_field)  # [n, longest]
    return Windows(cache[key], None if bos is None and is_random(source) else bos_id(lm, bos))


def is_random(source: str) -> bool:
    """Whether ``source`` names the random source (uniform ids, no text: auto puts no BOS before them)."""
    return source.strip().partition(":")[0] == "random"
