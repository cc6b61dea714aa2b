"""Text sources and the token windows cut from them.

The names below load on first use, so that the torch-free modules of this package (the corpus,
the sources, the byte tokenizer) import without torch.
"""

from __future__ import annotations

import typing

from ctxlens.core import lazy

_WHERE = {"TEXT_EXTENSIONS": "sources", "FileSource": "sources", "HubSource": "sources", "RandomSource": "sources",
          "TextSource": "sources", "open_source": "sources", "token_windows": "windows"}
__all__ = ["TEXT_EXTENSIONS", "FileSource", "HubSource", "RandomSource", "TextSource", "open_source", "token_windows"]

if typing.TYPE_CHECKING:
    from ctxlens.data.sources import (
        TEXT_EXTENSIONS,
        FileSource,
        HubSource,
        RandomSource,
        TextSource,
        open_source,
    )
    from ctxlens.data.windows import token_windows


def __getattr__(name: str) -> object:
    return lazy.attribute(__name__, _WHERE, name, globals())
