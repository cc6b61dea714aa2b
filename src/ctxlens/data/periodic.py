"""Periodic-regularity sequences: random tokens with one string repeated throughout.

Seed paper 000 ("How much do contextualized representations encode long-range context?"),
Section 5.3, *Fixed language source*: "starting from fully random sequences (i.e.,
incompressible), we inject regularity by periodically repeating an L-token string with stride
k and L > k (L = 200, k = 56)". A prefix of such a sequence grows more compressible the longer
it is, so shuffling it disrupts more and more structure.

Our reading of "stride". The paper gives no formula. If copies of the L-token string started
every k tokens (k < L), each copy would overwrite all but the first k tokens of the one before,
so the sequence would just repeat the first k tokens and L would play no part. We therefore read
the stride as the run of *random* tokens between consecutive copies:

    [pattern: L tokens][random: k tokens][pattern][random: k tokens][pattern] ...

i.e. copy j occupies positions ``[j * (L + k), j * (L + k) + L)`` (the last copy is cut at
``length``), the sequence has period ``L + k`` outside the random gaps, and with ``L > k`` most
of it (L / (L + k) = 78% for the defaults) is regular. ``stride=0`` gives back-to-back copies.

Tokens (pattern and gaps) are uniform on ``[low, vocab_size)``, drawn from a CPU
``torch.Generator``: first the pattern, then the background in fixed blocks of
``_BLOCK`` tokens, so a shorter sequence is exactly a prefix of a longer one with the same seed.
"""

from __future__ import annotations

import hashlib

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.data.checks import check_int

__all__ = ["periodic_sequence", "periodic_batch", "pattern_starts", "sample_seed"]

_BLOCK = 4096  # background tokens drawn per generator call (prefix-stable across lengths)


def periodic_sequence(
    length: int,
    *,
    vocab_size: int,
    period_len: int = 200,
    stride: int = 56,
    seed: int = 0,
    low: int = 0,
) -> torch.Tensor:  # int64
    """One periodic sequence of token ids, shape [length] (paper 000, Section 5.3).

    The ``period_len``-token pattern sits at every position in ``pattern_starts(...)``; the
    ``stride`` tokens between copies are fresh uniform tokens. ``low`` lets the caller keep
    special-token ids (below ``low``) out of the sequence.
    """
    _check(length=length, vocab_size=vocab_size, period_len=period_len, stride=stride,
           seed=seed, low=low)
    generator = torch.Generator().manual_seed(seed)
    pattern = torch.randint(low, vocab_size, (period_len,), generator=generator)  # [L]
    blocks = -(-length // _BLOCK)
    background = torch.cat([  # [blocks * _BLOCK]
        torch.randint(low, vocab_size, (_BLOCK,), generator=generator) for _ in range(blocks)
    ])
    sequence = background[:length].clone()  # [length]
    for start in pattern_starts(length, period_len=period_len, stride=stride):
        end = min(start + period_len, length)
        sequence[start:end] = pattern[: end - start]
    return sequence


def periodic_batch(
    n: int,
    length: int,
    *,
    vocab_size: int,
    period_len: int = 200,
    stride: int = 56,
    seed: int = 0,
    low: int = 0,
) -> torch.Tensor:  # int64
    """``n`` independent periodic sequences, shape [n, length].

    Row i is ``periodic_sequence(length, ..., seed=sample_seed(seed, i))``: each row has its own
    pattern and gaps, and row i does not depend on ``n``.
    """
    check_int("n", n, minimum=1)
    check_int("seed", seed)
    rows = [
        periodic_sequence(length, vocab_size=vocab_size, period_len=period_len, stride=stride,
                          seed=sample_seed(seed, i), low=low)
        for i in range(n)
    ]
    return torch.stack(rows)  # [n, length]


def pattern_starts(length: int, *, period_len: int = 200, stride: int = 56) -> range:
    """Start positions of the pattern copies inside a sequence of ``length`` tokens."""
    return range(0, length, period_len + stride)


def sample_seed(seed: int, index: int) -> int:
    """A generator seed for sample ``index`` of a batch seeded with ``seed``.

    SHA-256 of ``"seed:index"`` (not Python's ``hash``), so it is the same on every machine and
    distinct (seed, index) pairs do not collide the way ``seed * C + index`` can.
    """
    digest = hashlib.sha256(f"ctxlens.periodic:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def _check(*, length: int, vocab_size: int, period_len: int, stride: int, seed: int, low: int) -> None:
    check_int("length", length, minimum=1)
    check_int("vocab_size", vocab_size, minimum=1)
    check_int("period_len", period_len, minimum=1)
    check_int("stride", stride, minimum=0)
    check_int("seed", seed)
    check_int("low", low, minimum=0)
    if low >= vocab_size:
        raise CtxlensError(
            f"low={low} leaves no token ids below vocab_size={vocab_size}; pass a low "
            "smaller than vocab_size."
        )
