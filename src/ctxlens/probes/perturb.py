"""Seeded prefix perturbations and the LZMA prefix compression rate.

The geometry paper ("How much do contextualized representations encode long-range context?"):

- Section 3, *Shuffling as perturbation*: shuffling a prefix range destroys its structure but
  keeps its unigram distribution; "the random seed is controlled so that all architectures
  process the same perturbed prefixes for the same set of suffix tokens". Here the permutation
  of a range depends only on (seed, sample index, range, window), never on the model, so every
  model with the same tokenizer sees exactly the same perturbed prefixes.
- Section 5.1 (Figure 3): local shuffling within consecutive windows of growing size, and the
  prefix compression rate, compressed bytes / raw bytes under LZMA.
"""

from __future__ import annotations

import hashlib
import lzma
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ctxlens.core.errors import CtxlensError

# raw LZMA2 stream: no container header, so short prefixes are not dominated by framing bytes
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9}]


def perturbation_seed(seed: int, sample: int, start: int, end: int, window: int) -> int:
    """Generator seed for one perturbation of one sample (SHA-256, the same on every machine)."""
    digest = hashlib.sha256(f"ctxlens.perturb:{seed}:{sample}:{start}:{end}:{window}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


@dataclass(frozen=True)
class Shuffle:
    """Shuffle tokens [start, end) of a sequence; with ``window`` > 0, only within consecutive
    windows of that many tokens counted from ``start`` (local shuffling, Section 5.1)."""

    start: int
    end: int
    window: int = 0  # 0: one permutation of the whole range

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end or self.window < 0:
            raise CtxlensError(
                f"A shuffle needs 0 <= start <= end and window >= 0, got start={self.start}, end={self.end}, "
                f"window={self.window}; fix the perturbation range."
            )

    @property
    def empty(self) -> bool:
        return self.end - self.start < 2 or self.window == 1

    def apply(self, ids: torch.Tensor, samples: Sequence[int], seed: int) -> torch.Tensor:
        """ids [B, L] -> perturbed copy [B, L]; row b is permuted with the seed of ``samples[b]``."""
        if ids.ndim != 2 or len(samples) != ids.shape[0]:
            raise CtxlensError("Shuffle.apply needs ids [B, L] and one sample index per row.")
        if self.end > ids.shape[1]:
            raise CtxlensError(
                f"Cannot shuffle tokens up to {self.end} of a {ids.shape[1]}-token sequence; "
                "keep the perturbed range inside the prefix."
            )
        out = ids.clone()
        if self.empty:
            return out
        for row, sample in enumerate(samples):
            g = torch.Generator().manual_seed(perturbation_seed(seed, int(sample), self.start, self.end, self.window))
            out[row, self.start:self.end] = ids[row, self.start:self.end][self._permutation(g).to(ids.device)]
        return out

    def _permutation(self, g: torch.Generator) -> torch.Tensor:
        """[end - start] indices: a permutation that only mixes tokens within each window."""
        n = self.end - self.start
        width = self.window or n
        pieces = [torch.randperm(min(width, n - s), generator=g) + s for s in range(0, n, width)]
        return torch.cat(pieces)


def compression_rate(data: bytes) -> float:
    """LZMA-compressed size / raw size of ``data`` (a raw LZMA2 stream, preset 9)."""
    if not data:
        raise CtxlensError("Cannot compute the compression rate of an empty prefix; use a longer prefix.")
    # a dictionary just larger than the input compresses identically and skips preset 9's 64 MB set-up
    filters = [{**_LZMA_FILTERS[0], "dict_size": max(4096, 1 << (len(data) - 1).bit_length())}]
    return len(lzma.compress(data, format=lzma.FORMAT_RAW, filters=filters)) / len(data)


def token_bytes(ids: torch.Tensor, tokenizer: Any, vocab_size: int) -> bytes:
    """The raw bytes of token ids [n]: the decoded UTF-8 text when there is a tokenizer, else
    each id as a little-endian integer of the fewest bytes that hold ``vocab_size`` ids."""
    if tokenizer is not None:
        return tokenizer.decode(ids.tolist()).encode("utf-8")
    width = max(1, (max(vocab_size - 1, 1).bit_length() + 7) // 8)
    return b"".join(int(t).to_bytes(width, "little") for t in ids.tolist())
