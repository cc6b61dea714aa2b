"""The base of every text source (``ctxlens.data.sources`` opens them from a spec; the natural text is
``ctxlens.data.realtext``)."""

from __future__ import annotations

from collections.abc import Iterator


class TextSource:
    """Where experiment text comes from.

    ``spec`` is the string the source was opened with; ``is_text`` is False only for the
    token-level ``random`` source, which has no documents. ``byte_budget``: read at most this
    many bytes of a document where the source can (a ``.txt`` file), ending the stream there and
    setting ``cut``; other sources read whole documents and never cut. ``whole_documents``: True
    for a source whose token windows must each lie inside one document (``token_windows`` then
    skips the documents shorter than a window and leaves their number in ``skipped_documents``).
    """

    is_text: bool = True
    byte_budget: int | None = None
    cut: bool = False
    whole_documents: bool = False
    skipped_documents: int = 0
    used_documents: int = 0

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def documents(self) -> Iterator[str]:
        """Yield the non-empty documents, one at a time, always in the same order."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"
