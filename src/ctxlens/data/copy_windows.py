"""Random-period copy windows: the induction warm-up of the zoo recipe.

A copy window is a random string over an alphabet of bytes, repeated until the window is full.
Its first copy is unpredictable (ln of the alphabet size a byte); every later byte is fixed by
the byte one period back, so predicting it needs a content-based induction head (Olsson et
al. 2022, "In-context learning and induction heads"): find the earlier occurrence of the
current byte and copy what followed it. The period is drawn per window, so attending a fixed
distance back does not help.

Why the zoo uses them: on the built-in corpus alone, the tiny zoo models formed no induction
head within the CPU training budget, and no model retrieved a stated fact (the geometry paper Section 3
and the long-sequence paper measure retrieval on models that can). ``ctxlens.zoo.specs.Recipe`` therefore
opens with a pure-copy phase at short window lengths (attention is less diluted there, so the
head forms sooner: about step 450 at 128 bytes, against none in 600 steps at 512), grows the
windows to the training length, then mixes copy windows into the corpus; the same windows go
to every architecture. The first phase uses lowercase letters only: with digits (or all of
printable ASCII) in the alphabet the head had not formed by step 600. Digits join in the
later phases, and they must: with letters only, the head formed but never copied the digits
that the corpus's answers are made of, and retrieval stayed at 0.
"""

from __future__ import annotations

import torch

from ctxlens.core.errors import unknown

PRINTABLE = bytes(range(33, 127))  # printable ASCII without the space
LETTERS = b"abcdefghijklmnopqrstuvwxyz"
ALPHANUMERIC = LETTERS + b"0123456789"
ALPHABETS = {"letters": LETTERS, "alphanumeric": ALPHANUMERIC, "printable": PRINTABLE}
MIN_PERIOD = 8


def alphabet(name: str) -> bytes:
    """The bytes of a named alphabet; an unknown name gets the closest match and the list."""
    if name not in ALPHABETS:
        raise unknown("copy-window alphabet", name, ALPHABETS)
    return ALPHABETS[name]


def copy_windows(g: torch.Generator, n: int, length: int, *, min_period: int = MIN_PERIOD,
                 alphabet: bytes = PRINTABLE) -> torch.Tensor:
    """[n, length] byte ids: row i repeats a uniform random string of period p_i.

    p_i is uniform on [min_period, length // 2], so each row holds at least two copies; the
    bytes are uniform on ``alphabet``. Deterministic given the generator's state.
    """
    if not min_period <= length // 2:
        raise ValueError(f"length={length} is too short for copy windows with min_period={min_period}; "
                         f"use a length of at least {2 * min_period}.")
    symbols = torch.tensor(list(alphabet))  # [len(alphabet)]
    rows = []
    for _ in range(n):
        period = int(torch.randint(min_period, length // 2 + 1, (), generator=g))
        string = symbols[torch.randint(0, len(symbols), (period,), generator=g)]  # [period]
        rows.append(string.repeat(length // period + 1)[:length])
    return torch.stack(rows)  # [n, length]
