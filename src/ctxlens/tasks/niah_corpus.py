"""``niah_corpus``: one needle in the built-in corpus's own wording, for the zoo models.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 2-3)
sweeps the depth of a single needle at and beyond the training length. RULER's wording ("One of
the special magic numbers for ... is: ...") is foreign to models trained on the built-in corpus
(``ctxlens.data.corpus``), which retrieve nothing in it; this task asks in the wording they were
trained on, so the depth and length sweeps have something to measure:

* haystack: the sentences of the built-in corpus with every fact, ask and answer sentence
  removed (``corpus.mentions_fact``), so no other value competes with the needle;
* needle: ``The code for the blue door is 4172.`` (a 4-digit value: chance of a greedy exact
  match about 1e-4) at the sentence boundary nearest the requested depth;
* the prompt ends in the ask ``Question: what is the code for the blue door? Answer: `` with
  its trailing space, byte for byte as in training. The answer is scored with RULER's ``all``
  metric (the value appears in the output).

Keys, values and depths come from the sample's own seed, the same at every length (paired sweeps).
"""

from __future__ import annotations

from ctxlens.data import corpus
from ctxlens.tasks import haystack as hay
from ctxlens.tasks.base import Sample, Setup, Task, finish, register
from ctxlens.tasks.fit import Stream
from ctxlens.tasks.layout import Insert, fit_stream, stream_draft
from ctxlens.tasks.niah import depths_for

BUDGET = 8  # "4172." and a little room


def _haystack(setup: Setup) -> Stream:
    """The batch's corpus prose without facts, built once and shared by its samples."""
    if "corpus-prose" not in setup.shared:
        prose = (s for s in hay.corpus_sentences() if not corpus.mentions_fact(s))
        setup.shared["corpus-prose"] = Stream(prose, " ", setup.encoder, keep_head=True)
    return setup.shared["corpus-prose"]


def build(setup: Setup, index: int) -> Sample:
    rng = setup.rng(index)
    key, value = corpus.number_fact(rng)
    (depth,) = depths_for(setup, rng, 1)
    answer_prefix = " " + corpus.question(key)
    stream = _haystack(setup)
    inserts = [Insert(corpus.statement(key, value), depth, "needle", True)]
    draft, pick = fit_stream(setup, stream, lambda p: stream_draft(stream, p, [], [], inserts), answer_prefix)
    meta = {"haystack": "corpus", "keys": [key], "values": [[value]], "queries": [key],
            "haystack_units": len(pick.units), "padding": pick.pad}
    return finish(setup, index, draft, answer_prefix, [value], meta)


register(Task("niah_corpus", "niah", BUDGET, "all", build, {}, "one number needle in the zoo's corpus wording"))
