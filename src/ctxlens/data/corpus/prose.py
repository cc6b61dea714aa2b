"""Fact-free prose in the built-in corpus's language: the essay haystack of the RULER-style tasks.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4,
Table 4) hides needles in essays (RULER uses Paul Graham's), text with no key-value facts in it:
every value a model finds there is the needle's. The built-in corpus states facts ("The code for
the blue door is 4172.") and asks them, so its documents would plant distractors next to every
needle. These essays use the same people and filler sentences (``language``) without any fact,
ask or number: introductions of a document's people, then story sentences about them.

``essays()`` is one fixed cycle of documents (about 0.5 MB, some 120K tokens of a BPE tokenizer);
the task haystack repeats it when a prompt needs more.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ctxlens.data.corpus.language import filler, introduction, new_world

ESSAYS = 400
SENTENCES = (20, 45)  # filler sentences per essay (inclusive range)


def essay(index: int) -> str:
    """Essay ``index`` of the cycle: its people introduced, then filler sentences about them."""
    rng = random.Random(f"ctxlens.corpus.prose:{index}")
    world = new_world(rng, rng.randint(2, 4))
    parts = [introduction(p) for p in world.people]
    parts += [filler(rng, world) for _ in range(rng.randint(*SENTENCES))]
    return " ".join(parts)


def essays() -> Iterator[str]:
    """The ``ESSAYS`` essays of the cycle, in order (written as they are read)."""
    return (essay(i) for i in range(ESSAYS))
