"""Where ctxlens keeps what it builds or converts: ``$CTXLENS_HOME`` (default ``~/.cache/ctxlens``)."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The ctxlens cache root; zoo models, converted GGUF files and reference models live under it."""
    return Path(os.environ.get("CTXLENS_HOME", Path.home() / ".cache" / "ctxlens")).expanduser()
