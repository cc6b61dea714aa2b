"""RULER document QA (``qa_1``: SQuAD, ``qa_2``: HotpotQA), optionally position-weighted.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Tables 17-18) reports
both; the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.1, Figures
8-9) draws the golden paragraph's distance x to the end of the input with P(x) ∝ (1 - x/L)^gamma.
As RULER (``scripts/data/synthetic/qa.py``; 32-token budget, metric ``part``): documents
``Document {i}:\\n{text}`` joined by blank lines inside the QA template; the question's own
documents, then its article's other paragraphs, then random documents fill the length.

Placement (option ``placement``): RULER shuffles every sample's documents with the same fixed
permutation (``random.Random(seed).shuffle`` of the question's documents followed by the
distractors), so at one length the golden document sits at the same slot in every sample and
the task measures one arbitrary depth per length. The default, ``grid``, sends each required
document to a depth drawn from RULER's depth grid (or the ``depths`` option, or from the
position-weighted law when the ``gamma`` option is set), so the samples cover the depths and
every depth is recorded; ``placement=ruler`` uses RULER's fixed-seed shuffle with the batch's
seed (``--seed 42`` is RULER's default). Either way the distractors are whole documents chosen to
fill the length (``Stream.pick``: a shorter document may follow a skipped longer one).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.tasks.base import Sample, Setup, Task, finish, register
from ctxlens.tasks.fit import Stream
from ctxlens.tasks.layout import Insert, fit_stream, stream_draft
from ctxlens.tasks.niah import depths_for
from ctxlens.tasks.qa_data import QA, QASource, open_qa

PLACEMENTS = ("grid", "ruler")  # the golden documents' placement: drawn depths (default) or RULER's fixed shuffle

TEMPLATE = (
    "Answer the question based on the given documents. Only give me the answer and do not output any other words."
    "\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given documents. "
    "Only give me the answer and do not output any other words.\n\nQuestion: {query}"
)
ANSWER_PREFIX = " Answer:"
DOCUMENT = "Document {i}:\n{document}"
BUDGET = 32


def weighted_depth(u: float, gamma: float) -> float:
    """Depth (percent) of a document whose distance x to the end has density ∝ (1 - x/L)^gamma.

    Inverse CDF: x/L = 1 - (1 - u)^(1/(gamma+1)), so depth = 100 (1 - x/L) = 100 (1 - u)^(1/(gamma+1)).
    """
    if gamma < 0:
        raise CtxlensError(f"gamma must be >= 0, got {gamma}; gamma = 0 is RULER's uniform placement.")
    return 100.0 * (1.0 - u) ** (1.0 / (gamma + 1.0))


def _distractors(rng: random.Random, qa: QA, n_docs: int) -> Iterator[int]:
    """Preferred distractors (same article) in random order, then every other document, repeated."""
    taken = set(qa.context)
    more = [d for d in qa.more if d not in taken]
    rng.shuffle(more)
    yield from more
    rest = [d for d in range(n_docs) if d not in taken and d not in set(more)]
    if not rest and not more:
        return
    while True:
        rng.shuffle(rest)
        yield from rest if rest else more


def _inserts(setup: Setup, rng: random.Random, source: QASource, qa: QA) -> list[Insert]:
    """The question's documents: at RULER's fixed-seed slots (``placement=ruler``) or at drawn depths."""
    gamma, rule = setup.option("gamma"), setup.option("placement") or "grid"
    if rule not in PLACEMENTS:
        raise unknown("document placement", str(rule), PLACEMENTS)
    if rule == "ruler":
        if gamma is not None or setup.option("depths") is not None:
            raise CtxlensError("placement=ruler puts the documents where RULER's fixed shuffle does; drop the gamma "
                               "and depths options or use placement=grid.")
        return [Insert(source.docs[d], None, "document", d in qa.support, shuffled=(setup.seed, j))
                for j, d in enumerate(qa.context)]
    if gamma is not None and setup.option("depths") is None:
        depths = sorted(weighted_depth(rng.random(), float(gamma)) for _ in qa.context)
    else:
        depths = depths_for(setup, rng, len(qa.context))
    order = list(qa.context)
    rng.shuffle(order)
    return [Insert(source.docs[d], depth, "document", d in qa.support) for d, depth in zip(order, depths)]


def build(setup: Setup, index: int) -> Sample:
    dataset = setup.option("dataset")
    source = open_qa(dataset, setup.option(dataset) or "builtin")
    qa = source.qas[index % len(source.qas)]
    rng = setup.rng(index)
    inserts = _inserts(setup, rng, source, qa)
    before, after = TEMPLATE.format(context="\x00", query=qa.query).split("\x00")
    stream = Stream((source.docs[d] for d in _distractors(setup.rng(index, "distractors"), qa, len(source.docs))),
                    "\n\n", setup.encoder, dress=lambda d: DOCUMENT.format(i=10, document=d))

    def number(items: list[str]) -> list[tuple[str, ...]]:  # label and text apart: texts are encoded once
        return [tuple(DOCUMENT.format(i=i + 1, document="\x00" + d).split("\x00")) for i, d in enumerate(items)]

    draft, pick = fit_stream(setup, stream, lambda p: stream_draft(stream, p, [before], [after], inserts, number),
                             ANSWER_PREFIX)
    meta = {"dataset": source.name, "question": qa.query, "question_index": index % len(source.qas),
            "documents": len(pick.units) + len(inserts), "padding": pick.pad, "gamma": setup.option("gamma")}
    return finish(setup, index, draft, ANSWER_PREFIX, qa.outputs, meta)


register(Task("qa_1", "qa", BUDGET, "part", build, {"dataset": "squad", "squad": "builtin", "gamma": None,
                                                           "placement": "grid"},
              "single-document QA (SQuAD) among distractor documents"))
register(Task("qa_2", "qa", BUDGET, "part", build, {"dataset": "hotpotqa", "hotpotqa": "builtin",
                                                           "gamma": None, "placement": "grid"},
              "two-hop QA (HotpotQA) among distractor documents"))
