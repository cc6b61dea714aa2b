"""The built-in corpus's key-value facts: how one is worded, stated and asked, and its keys and values.

A fact is stated as ``"The code for the blue door is 4172."`` and asked as ``"Question: what
is the code for the blue door? Answer: 4172."``; the ask repeats the key's wording exactly, as
in the single-needle retrieval of "How Well Can a Long Sequence Model Model Long Sequences?"
(Section 4; RULER's needle-in-a-haystack). The documents, the retrieval probes and the
``niah_corpus`` task all word facts through ``statement`` and ``question`` here.
"""

from __future__ import annotations

import random
import re

from ctxlens.data.corpus.language import unique

# --------------------------------------------------------------------------------------
# Vocabulary of facts
# --------------------------------------------------------------------------------------

_FACT_ADJS = ("blue", "red", "green", "old", "small", "tall", "silver", "golden", "wooden",
              "iron", "black", "white", "broken", "secret", "north", "east")
_FACT_NOUNS = ("door", "box", "gate", "chest", "lock", "safe", "room", "boat", "tower",
               "bridge", "cellar", "window")
_NUMBER_ATTRS = ("code", "number")
_WORD_ATTRS = ("password",)
_VALUE_WORDS = ("falcon", "river", "amber", "thunder", "willow", "marble", "copper", "lantern",
                "meadow", "harbor", "crystal", "ember", "orchid", "pepper", "saddle", "tiger",
                "velvet", "walnut", "zephyr", "biscuit", "canyon", "dolphin", "glacier",
                "hazel")


# --------------------------------------------------------------------------------------
# Wording
# --------------------------------------------------------------------------------------


def statement(key: str, value: str) -> str:
    """How a fact is stated: ``"The code for the blue door is 4172."``."""
    return f"The {key} is {value}."


def question(key: str) -> str:
    """How a fact is asked, up to the answer: ``"Question: what is the KEY? Answer: "``."""
    return f"Question: what is the {key}? Answer: "


_FACT_WORDING = re.compile(r"\b(?:" + "|".join(_NUMBER_ATTRS + _WORD_ATTRS) + r") for the \w+ \w+|^Answer: ")


def mentions_fact(sentence: str) -> bool:
    """Whether ``sentence`` states or asks a fact (or is the ``Answer: ...`` half of an ask)."""
    return _FACT_WORDING.search(sentence) is not None


def _longest_probe_key() -> str:
    longest = lambda words: max(words, key=len)  # noqa: E731
    return f"{longest(_NUMBER_ATTRS)} for the {longest(_FACT_ADJS)} {longest(_FACT_NOUNS)}"


# the least distance_bytes that holds any probe's fact, a space and its question
MIN_PROBE_DISTANCE = len(statement(_longest_probe_key(), "0000")) + 1 + len(
    question(_longest_probe_key()))


# --------------------------------------------------------------------------------------
# Keys and values
# --------------------------------------------------------------------------------------


def number_fact(rng: random.Random) -> tuple[str, str]:
    """A random (key, 4-digit value) of the corpus's numeric facts: ``("code for the blue door", "4172")``."""
    key = new_key(rng, [], numeric=True)
    return key, value_for(rng, key)


def new_key(rng: random.Random, taken: list[str], *, numeric: bool) -> str:
    def make(r: random.Random) -> str:
        attrs = _NUMBER_ATTRS if numeric or r.random() < 0.7 else _WORD_ATTRS
        return f"{r.choice(attrs)} for the {r.choice(_FACT_ADJS)} {r.choice(_FACT_NOUNS)}"

    return unique(rng, make, taken)


def value_for(rng: random.Random, key: str) -> str:
    if key.startswith(_WORD_ATTRS):
        return rng.choice(_VALUE_WORDS)
    return str(rng.randint(1000, 9999))
