"""The built-in corpus: deterministic English-like text with real long-range structure.

Used to train the zoo's tiny byte-level models (training context 512 bytes) and to probe them
for the four kinds of context use the seed papers measure: retrieval of a stated fact (paper
002, RULER's needle-in-a-haystack: a key-value pair stated early and asked later), induction /
copying (a span repeated verbatim), coreference (names and pronouns of people introduced at the
start), and plain local language statistics (template sentences over a small vocabulary).

Every document is built from *chunks* joined by one space (sometimes a newline):

* an introduction of 2-4 people: ``"Mara Velt is a baker from Oslin. She has a red lamp and a
  dog called Pim."``, later referred to by first name, pronoun, possessive and job;
* filler sentences from a small grammar (a few hundred words);
* facts ``"The code for the blue door is 4172."`` and, later, asks that repeat the key wording
  exactly: ``"Question: what is the code for the blue door? Answer: 4172."``. A *near* fact is
  asked at most ``NEAR_MAX_DISTANCE`` bytes after its value (inside one 512-byte training
  window), a *far* fact at least ``FAR_MIN_DISTANCE`` bytes after it; some facts are never asked;
* repeated spans: 20-80 bytes of earlier filler, word aligned, copied verbatim.

All randomness is ``random.Random`` seeded with a string (Python hashes string seeds with
SHA-512, not ``hash()``), and only lists and tuples are iterated, so the same arguments give
the same bytes on every machine and under every ``PYTHONHASHSEED``. The text is pure ASCII, so
bytes and characters coincide.

The code is split by topic: ``language`` (vocabulary, people, filler sentences), ``facts``
(how facts are worded, their keys and values), ``documents`` (the records, the document
generators and how one document is written) and ``probes`` (the retrieval probes).
"""

from __future__ import annotations

from ctxlens.data.corpus.documents import (
    FAR_MIN_DISTANCE,
    NEAR_MAX_DISTANCE,
    SPLITS,
    Document,
    Fact,
    Span,
    annotated_documents,
    corpus_text,
    documents,
)
from ctxlens.data.corpus.facts import MIN_PROBE_DISTANCE, mentions_fact, number_fact, question, statement
from ctxlens.data.corpus.probes import PROBE_DISTANCE_TOLERANCE, RetrievalProbe, retrieval_probes

__all__ = [
    "SPLITS",
    "NEAR_MAX_DISTANCE",
    "FAR_MIN_DISTANCE",
    "PROBE_DISTANCE_TOLERANCE",
    "MIN_PROBE_DISTANCE",
    "Fact",
    "Span",
    "Document",
    "RetrievalProbe",
    "documents",
    "annotated_documents",
    "corpus_text",
    "retrieval_probes",
    "statement",
    "question",
    "number_fact",
    "mentions_fact",
]
