"""Text sources and the token windows cut from them."""

from ctxlens.data.sources import (
    TEXT_EXTENSIONS,
    FileSource,
    HubSource,
    RandomSource,
    TextSource,
    open_source,
)
from ctxlens.data.windows import token_windows

__all__ = [
    "TEXT_EXTENSIONS",
    "FileSource",
    "HubSource",
    "RandomSource",
    "TextSource",
    "open_source",
    "token_windows",
]
