"""RULER common words extraction (``cwe``): name the 10 words repeated most often in a numbered list.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Table 15) and
the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.3,
Figures A.3-1/2) report it.
As RULER (``scripts/data/synthetic/common_words_extraction.py``; 120-token budget): 10 common
words appear 30 times and every other word 3 times (6 and 1 below 4096 tokens), shuffled and
numbered ``1. word 2. word ...``; one solved example (40 words repeated 10/3 times, or 20 words
3/1 times below 4096) comes first. The number of distinct words is what is fitted to the length.
"""

from __future__ import annotations

import itertools
import random

from ctxlens.tasks import words
from ctxlens.tasks.base import Draft, Sample, Setup, Task, count, finish, register, too_short
from ctxlens.tasks.fit import fit_knob, refine

TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the "
    "above list?"
)
ANSWER_PREFIX = " Answer: The top 10 words that appear most often in the list are:"
BUDGET = 120
SHORT = 4096  # below this length RULER uses fewer repetitions


def numbered(items: list[str], lead: str = "") -> list[str]:
    """Pieces of ``lead + "1. a 2. b ..."``: each number and each word its own piece."""
    out: list[str] = []
    for i, word in enumerate(items):
        out += [(" " if i else lead) + f"{i + 1}.", " " + word]
    return out


def word_list(rng: random.Random, chosen: list[str], n_common: int, common_reps: int, rare_reps: int) -> list[str]:
    """The shuffled list: the first ``n_common`` words ``common_reps`` times, the rest ``rare_reps`` times."""
    items = chosen[:n_common] * common_reps + chosen[n_common:] * rare_reps
    rng.shuffle(items)
    return items


def build(setup: Setup, index: int) -> Sample:
    n_cw = int(setup.option("num_cw"))
    short = setup.length < SHORT
    reps = (6, 1) if short else (int(setup.option("freq_cw")), int(setup.option("freq_ucw")))
    rng = setup.rng(index)
    real = words.word_pool(0)
    ex_words = rng.sample(real, 20 if short else 40)
    ex_items = word_list(rng, ex_words, n_cw, *((3, 1) if short else (10, 3)))
    before, after = TEMPLATE.format(context="\x00").split("\x00")
    # RULER's example: template + answer prefix + " " + the numbered answer, then a newline
    example = [before, *numbered(ex_items), after + ANSWER_PREFIX, *numbered(ex_words[:n_cw], " "), "\n"]
    # RULER draws from its real words while they suffice and from a larger list beyond
    big = words.word_pool(max(len(real) + 1, setup.target // (2 * reps[1])))
    order_real, order_big = rng.sample(real, len(real)), rng.sample(big, len(big))

    def chosen(n: int) -> list[str]:
        return order_real[:n] if n <= len(real) else order_big[:n]

    def make(n: int) -> Draft:
        items = word_list(setup.rng(index, f"list{n}"), chosen(n), n_cw, *reps)
        pieces = [*example, before, *numbered(items), after]
        a = len(example) + 1
        return Draft(pieces, (a, a + 2 * len(items)))

    lo = n_cw + 1
    empty = count(setup, make(lo), ANSWER_PREFIX)
    if empty > setup.target:
        raise too_short(setup, empty + setup.budget)
    # cheap estimate: the numbers' and the words' piece costs do not depend on the shuffle
    enc, top = setup.encoder, n_cw * reps[0] + (len(big) - n_cw) * reps[1]
    per_number = list(itertools.accumulate(enc.costs([f" {i}." for i in range(1, top + 1)]), initial=0))
    real_words = list(itertools.accumulate(enc.costs([" " + w for w in order_real]), initial=0))
    big_words = list(itertools.accumulate(enc.costs([" " + w for w in order_big]), initial=0))

    def body(n: int) -> int:
        cum = real_words if n <= len(real) else big_words
        items = n_cw * reps[0] + (n - n_cw) * reps[1]
        return per_number[items] + cum[n_cw] * reps[0] + (cum[n] - cum[n_cw]) * reps[1]

    base = empty - body(lo)
    guess = fit_knob(lambda k: base + body(k), setup.target, lo, lo, len(big))
    drafts: dict[int, Draft] = {}

    def exact(k: int) -> int:
        drafts[k] = drafts.get(k) or make(k)
        return count(setup, drafts[k], ANSWER_PREFIX)

    fit = refine(exact, setup.target, guess[0] if guess else lo, lo, len(big), enc.mode)
    assert fit is not None  # exact(lo) is count(make(lo)), which fits (checked above)
    n, _ = fit
    answer = chosen(n)[:n_cw]
    meta = {"distinct_words": n, "repetitions": list(reps), "example_words": len(ex_words)}
    return finish(setup, index, drafts[n], ANSWER_PREFIX, answer, meta)


register(Task("cwe", "cwe", BUDGET, "all", build, {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10},
              "common words extraction: 10 words x30 among words x3, one solved example first"))
