"""RULER frequent words extraction (``fwe``): name the three most frequent coded words.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Table 16) and
the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.3,
Figure A.3-1) report it.
As RULER (``scripts/data/synthetic/freq_words_extraction.py``; 50-token budget, alpha 2): a
vocabulary of ``(L - budget) // 50`` random 6-letter words is ranked at random, the word of rank
k appears ``floor(N k^-alpha / zeta(alpha))`` times, rank 1 is replaced by the noise word ``...``,
and the answer is ranks 2-4. The total N is what is fitted to the length.
"""

from __future__ import annotations

import functools
import math
import random
import string

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.base import Draft, Sample, Setup, Task, TooShort, count, finish, register, too_short
from ctxlens.tasks.fit import fit_knob, refine

TEMPLATE = (
    "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
    "appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
    "What are the three most frequently appeared words in the above coded text?"
)
ANSWER_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"
BUDGET = 50


@functools.cache  # the fit calls ``counts`` hundreds of times per sample
def zeta(alpha: float, terms: int = 1000) -> float:
    """Riemann zeta(alpha) for alpha > 1 (direct sum plus Euler-Maclaurin tail)."""
    if alpha <= 1:
        raise CtxlensError(f"The fwe option alpha must exceed 1, got {alpha}.")
    head = math.fsum(k ** -alpha for k in range(1, terms))
    n = float(terms)
    return head + n ** (1 - alpha) / (alpha - 1) + 0.5 * n ** -alpha + alpha / 12 * n ** (-alpha - 1)


def counts(total: int, vocab: int, alpha: float) -> list[int]:
    """How often the word of each rank appears: ``floor(total * k^-alpha / zeta(alpha))``."""
    z = zeta(alpha)
    return [int(total * k ** -alpha / z) for k in range(1, vocab + 1)]


def vocabulary(rng: random.Random, size: int, letters: int) -> list[str]:
    """``size`` distinct random lower-case words in random rank order, rank 1 replaced by '...'."""
    if size > 26 ** letters // 2:  # drawn at random until distinct: never more than half of what there is
        raise CtxlensError(f"fwe needs {size:,} different coded words, but words of {letters} letter(s) give only "
                           f"{26 ** letters:,} (at most half are drawn); raise --coded-wordlen or lower "
                           "--vocab-size.")
    vocab: set[str] = set()
    while len(vocab) < size:
        vocab.add("".join(rng.choices(string.ascii_lowercase, k=letters)))
    ranked = sorted(vocab)
    rng.shuffle(ranked)
    ranked[0] = "..."
    return ranked


def build(setup: Setup, index: int) -> Sample:
    alpha, letters = float(setup.option("alpha")), int(setup.option("coded_wordlen"))
    size = int(setup.option("vocab_size") or 0) or max(5, setup.target // 50)
    if size < 4:  # the answer is ranks 2 to 4
        raise CtxlensError(f"fwe needs a vocabulary of 4 words at least (its answer is the words of ranks 2 to 4), got "
                           f"--vocab-size {size}; use 4 or more, or 0 for RULER's (a fiftieth of the length).")
    if size > max(5, setup.target):  # ranks past the prompt's tokens never appear; a larger draw only costs time
        raise TooShort(f"Task 'fwe' with a vocabulary of {size:,} words needs more than {setup.length:,} tokens (words "
                       f"past rank {setup.target:,} could never appear in its text); use a --vocab-size of at most "
                       f"{setup.target:,}, 0 for RULER's (a fiftieth of the length), or longer lengths.")
    vocab = vocabulary(setup.rng(index), size, letters)
    before, after = TEMPLATE.format(context="\x00").split("\x00")

    def make(total: int) -> Draft:
        text = [w for w, c in zip(vocab, counts(total, size, alpha)) for _ in range(c)]
        setup.rng(index, f"order{total}").shuffle(text)
        pieces = [before.rstrip(" "), *(" " + w for w in text), after]
        return Draft(pieces, (0, len(pieces) - 1))

    empty = count(setup, make(0), ANSWER_PREFIX)
    if empty > setup.target:
        raise too_short(setup, empty + setup.budget)
    word_costs = setup.encoder.costs([" " + w for w in vocab])

    def rough(total: int) -> int:  # pieces are order-free: the words' costs times their counts
        return empty + sum(c * k for c, k in zip(word_costs, counts(total, size, alpha)))

    start = int((setup.target - empty) / max(1, word_costs[1]))
    hi = 4 * setup.target + 10
    guess = fit_knob(rough, setup.target, start, 0, hi)
    drafts: dict[int, Draft] = {}

    def exact(k: int) -> int:
        drafts[k] = drafts.get(k) or make(k)
        return count(setup, drafts[k], ANSWER_PREFIX)

    fit = refine(exact, setup.target, guess[0] if guess else 0, 0, hi, setup.encoder.mode)
    assert fit is not None  # exact(0) is count(make(0)), which fits (checked above)
    n, _ = fit
    meta = {"vocab_size": size, "total_words": n, "alpha": alpha, "counts": counts(n, size, alpha)[:5]}
    return finish(setup, index, drafts[n], ANSWER_PREFIX, vocab[1:4], meta)


register(Task("fwe", "fwe", BUDGET, "all", build, {"alpha": 2.0, "coded_wordlen": 6, "vocab_size": 0},
              "frequent words extraction: Zipf-distributed coded words, name the top 3"))
