"""``niah_corpus``: one needle in the corpus's wording, no competing fact, ask as in training.

Truth: string search on the prompt (byte tokenizer: token offsets are byte offsets) with an
independent pattern for anything shaped like a fact, and the corpus's own statement/question.
"""

from __future__ import annotations

import re

import pytest

from ctxlens.data.corpus import question, statement
from ctxlens.tasks import generate

FACT_SHAPED = re.compile(r"(code|number|password) for the [a-z]+ [a-z]+")


@pytest.mark.parametrize("depth", [0, 25, 50, 100])
def test_one_needle_at_its_depth_and_the_ask_last(depth, byte_tok):
    (s,) = generate("niah_corpus", byte_tok, 1024, 1, seed=7, cache=False, options={"depths": [depth]})
    (key,), ((value,),) = s.meta["keys"], s.meta["values"]
    assert re.fullmatch(r"\d{4}", value) and s.outputs == [value]
    needle, ask = statement(key, value), question(key)
    assert s.prompt.endswith(" " + ask) and s.prompt.count(needle) == 1
    assert len(FACT_SHAPED.findall(s.prompt)) == 2  # the needle and the ask, nothing else
    assert "Answer: " not in s.prompt[: -len(ask)]
    at = s.prompt.index(needle)
    (d,) = s.depths
    assert d["tokens"] in (at, at - 1)
    hay = len(s.prompt) - len(ask) - 1 - len(needle) - 1  # the prose around the needle, bytes
    assert abs(100 * at / hay - d["percent"]) < 0.5
    assert abs(d["percent"] - depth) < 10  # the sentence boundary nearest the depth
    assert s.n_tokens <= 1024 - 8


def test_same_fact_at_every_length(byte_tok):
    short = generate("niah_corpus", byte_tok, 512, 3, seed=1, cache=False)
    long = generate("niah_corpus", byte_tok, 2048, 3, seed=1, cache=False)
    assert [s.meta["keys"] for s in short] == [s.meta["keys"] for s in long]
    assert [s.outputs for s in short] == [s.outputs for s in long]
    assert all(2048 - 8 - 40 < s.n_tokens <= 2048 - 8 for s in long)
