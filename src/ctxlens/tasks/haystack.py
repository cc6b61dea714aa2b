"""Haystacks of the RULER tasks: a repeated noise line, an essay corpus, or distractor needles.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4 and Table 4)
compares needles hidden in repeated sentences ("Repeat") with needles hidden in essays
("Essay"); RULER's third haystack is made of other needles. As in RULER:

* ``noise``: the line ``NOISE`` repeated, lines joined by newlines, whole lines only (RULER's
  ``[haystack] * num_haystack``: a prompt never ends in a line's first sentences);
* ``essay``: running prose with all whitespace collapsed to single spaces, taken from its start
  and repeated when it runs out, split into sentences (needles go between sentences);
* ``needle``: lines that are themselves needles with random keys and values.

RULER's essays are Paul Graham's, prose without key-value facts; ctxlens has no network, so
``builtin`` uses the fact-free essays written in the built-in corpus's language
(``ctxlens.data.corpus.prose``: no digits, no "X is N" facts, no questions, no task keys) and any
other spec opens a local text corpus (a ``.txt`` / ``.jsonl`` / ``.parquet`` file or folder, see
``ctxlens.data.sources``). ``corpus_sentences`` is the built-in corpus itself, facts and all, for
``niah_corpus``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from ctxlens.core.errors import CtxlensError

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
HAYSTACKS = ("noise", "essay", "needle")

_SENTENCE_END = re.compile(r"[.!?][\"')\]]*( +)(?=[\"'(\[]?[A-Z0-9])")
_MAX_SENTENCE_CHARS = 600  # longer "sentences" (text without full stops) are cut at spaces


def noise_lines() -> Iterator[str]:
    """The noise haystack: the same line forever."""
    return itertools.repeat(NOISE)


def sentences(text: str) -> list[str]:
    """Split whitespace-collapsed ``text`` into sentences (long runs cut at spaces)."""
    text = " ".join(text.split())
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        out.extend(_cut_long(text[start:m.start(1)]))
        start = m.end(1)
    if start < len(text):
        out.extend(_cut_long(text[start:].rstrip()))
    return [s for s in out if s]


def _cut_long(sentence: str) -> list[str]:
    if len(sentence) <= _MAX_SENTENCE_CHARS:
        return [sentence]
    parts: list[str] = []
    cur: list[str] = []
    size = 0
    for word in sentence.split(" "):
        if cur and size + len(word) + 1 > _MAX_SENTENCE_CHARS:
            parts.append(" ".join(cur))
            cur, size = [], 0
        cur.append(word)
        size += len(word) + 1
    if cur:
        parts.append(" ".join(cur))
    return parts


_CORPUS = "\x00corpus"  # the key of the built-in corpus's own stream (no user spec can equal it)


def _documents(spec: str) -> Iterator[str]:
    if spec == "builtin":
        from ctxlens.data.corpus.prose import essays

        return essays()
    if spec == _CORPUS:
        from ctxlens.data import corpus

        return corpus.documents(0, None, split="validation")
    from ctxlens.data.sources import open_source

    source = open_source(spec)
    if not source.is_text:
        raise CtxlensError(f"Essay source '{spec}' holds no text; name a text corpus (a file, folder or 'builtin').")
    return source.documents()


_ESSAYS: dict[str, tuple[list[str], Iterator[str]]] = {}  # spec -> (sentences read so far, reader)


def _read_essay(spec: str) -> Iterator[str]:
    while True:
        any_text = False
        for doc in _documents(spec):
            for sentence in sentences(doc):
                any_text = True
                yield sentence
        if not any_text:
            raise CtxlensError(f"Essay source '{spec}' has no text; point it at a corpus with some prose.")


def essay_sentences(spec: str = "builtin") -> Iterator[str]:
    """Sentences of the essay corpus ``spec``, from its start, repeated when it runs out.

    Sentences already read are kept per process, so every batch re-reads them for free.
    """
    if spec not in _ESSAYS:
        _ESSAYS[spec] = ([], _read_essay(spec))
    seen, reader = _ESSAYS[spec]
    i = 0
    while True:
        while i >= len(seen):
            seen.append(next(reader))
        yield seen[i]
        i += 1


def corpus_sentences() -> Iterator[str]:
    """Sentences of the built-in corpus (with its facts and asks), endless."""
    return essay_sentences(_CORPUS)
