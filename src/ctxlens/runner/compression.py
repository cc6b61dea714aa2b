"""The archived form of a results file (``ctxlens archive``, ``ctxlens.runner.archive``): its name
(``archived``: ``results.jsonl`` -> ``results.jsonl.gz``) and its bytes decompressed within a bound
(``gunzip``: at most ``MAX_ARCHIVED_BYTES``, so a decompression bomb costs at most one chunk more).
Every reader of a run directory reads either form through ``ctxlens.runner.store.read_results``."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

from ctxlens.core.errors import CtxlensError

ARCHIVE_SUFFIX = ".gz"
MAX_ARCHIVED_BYTES = 64 << 20  # decompressed bytes of one archived results file: 64 MiB (over 60x the largest
# committed run's rows), so the rows parsed from it (about 5x in memory) fit what card and report hold
_CHUNK = 1 << 22


def archived(path: Path) -> Path:
    """The archived (gzip) form of the results file ``path``: ``results.jsonl`` -> ``results.jsonl.gz``."""
    return path.with_name(path.name + ARCHIVE_SUFFIX)


def gunzip(path: Path, raw: bytes, limit: int | None = None) -> bytes:
    """The bytes the gzip data ``raw`` (read from ``path``) holds, at most ``limit`` of them
    (``MAX_ARCHIVED_BYTES`` when None): decompression stops within one chunk (4 MiB) past the
    limit, so a decompression bomb costs at most that much memory. Empty, truncated, corrupt or
    oversized data is one sentence."""
    limit = MAX_ARCHIVED_BYTES if limit is None else limit
    chunks, size = [], 0
    try:
        if not raw:
            raise EOFError("the file is empty")
        with gzip.GzipFile(fileobj=io.BytesIO(raw), mode="rb") as f:
            while size <= limit and (chunk := f.read(_CHUNK)):  # GzipFile decompresses no more than asked for
                chunks.append(chunk)
                size += len(chunk)
    except (OSError, EOFError, zlib.error) as err:
        raise CtxlensError(
            f"{path} is not a complete gzip file ({' '.join(str(err).split())[:120] or type(err).__name__}), so its "
            "rows cannot be read and nothing was modified; restore the file from where the run was archived, "
            "or run the experiment again in a new --out directory."
        ) from None
    if size > limit:
        raise CtxlensError(
            f"{path} decompresses to more than {limit:,} bytes, more than ctxlens reads from one archived results "
            "file, so nothing was read; if it is a genuine run's rows, unpack it with `gzip -dk` and remove the .gz."
        )
    return b"".join(chunks)
