"""Archive finished runs: each results file gzip-compressed in place, and back (``ctxlens archive``).

A run's rows are most of its bytes and compress about 15-45x (they repeat their coordinates on
every line), so committed reference runs travel as ``results.jsonl.gz`` beside their plain
``units.jsonl``, ``config.yaml`` and ``env.json``; every reader reads either form
(``runner.store.read_results``). Archiving one results file:

1. its bytes are read (never through a link), compressed deterministically (gzip level 9,
   header time 0, no file name: archiving the same rows again gives the same bytes), and
   written to ``results.jsonl.gz`` atomically (``core.files.atomic_write``: an exclusive
   temporary file, then a rename; a link at the name is refused, not followed);
2. the ``.gz`` is read back and must decompress to exactly the bytes read in step 1, and the
   plain file must still hold exactly those bytes;
3. only then is the plain file removed.

``unpack`` is the same in reverse. A ``.gz`` already there that holds other bytes (not ours,
or another state of the run) is refused, as is any run file that is a link or special file,
and a directory some writer holds (its ``runner.lock``): the archive never races a live run.
An interrupted archive leaves both forms, identical; running the command again finishes it.
"""

from __future__ import annotations

import fcntl
import gzip
import os
from dataclasses import dataclass
from pathlib import Path

from ctxlens.core import files
from ctxlens.core.errors import CtxlensError
from ctxlens.runner.compression import archived, gunzip
from ctxlens.runner.lock import lock_name, try_lock
from ctxlens.runner.rundir import check_ours
from ctxlens.runner.store import results_files


@dataclass
class Moved:
    """One results file archived or unpacked: its plain path and its bytes in each form."""

    path: Path
    plain_bytes: int
    archived_bytes: int
    changed: bool  # False: it was in that form already


def compress(data: bytes) -> bytes:
    """``data`` gzip-compressed, the same bytes on every call (level 9, mtime 0, no name)."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def archive_run(directory: str | os.PathLike, *, unpack: bool = False) -> list[Moved]:
    """Archive (or ``unpack``) every results file of one run directory; see the module docstring."""
    directory = Path(directory)
    check_ours(directory)
    step = _unpack_one if unpack else _archive_one
    with _no_writer(directory):
        return [step(path) for path in results_files(directory)]


class _no_writer:
    """Hold every writer lock of ``directory`` (the single-process one and each rank's) for the
    duration, so that no run appends while a results file changes form; a live writer is refused."""

    def __init__(self, directory: Path):
        ranks = [None] + sorted({int(p.name.rsplit("rank", 1)[1]) for p in directory.glob(".ctxlens-lock.rank*")
                                 if p.name.rsplit("rank", 1)[1].isdigit()})
        self.paths = [directory / lock_name(rank) for rank in ranks]
        self.fds: list[int] = []

    def __enter__(self) -> _no_writer:
        try:
            for path in self.paths:
                self.fds.append(try_lock(path, fcntl.LOCK_EX, os.O_RDWR | os.O_CREAT))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        while self.fds:
            os.close(self.fds.pop())


def _archive_one(path: Path) -> Moved:
    gz = archived(path)
    if not os.path.lexists(path):
        return Moved(path, len(gunzip(gz, files.read_bytes(gz))), _size(gz), changed=False)
    data = files.read_bytes(path)
    if not os.path.lexists(gz):  # else an interrupted archive, finished below when the .gz holds these rows
        _write(gz, compress(data))
    _same_or_refuse(gz, _unpacked(gz), data, path)
    _same_or_refuse(path, files.read_bytes(path), data, path)
    _remove(path)
    return Moved(path, len(data), _size(gz), changed=True)


def _unpack_one(path: Path) -> Moved:
    gz = archived(path)
    if not os.path.lexists(gz):
        return Moved(path, _size(path), 0, changed=False)
    files.refuse_link_or_special(path)
    raw = files.read_bytes(gz)
    data = gunzip(gz, raw)
    if os.path.lexists(path):
        _same_or_refuse(path, files.read_bytes(path), data, gz)  # an interrupted unpack: finish it
    else:
        _write(path, data)
    _same_or_refuse(path, files.read_bytes(path), data, gz)
    _same_or_refuse(gz, files.read_bytes(gz), raw, gz)
    _remove(gz)
    return Moved(path, len(data), len(raw), changed=True)


def _unpacked(gz: Path) -> bytes | None:
    """What ``gz`` decompresses to, None when it is no complete gzip file (a link is refused)."""
    raw = files.read_bytes(gz)
    try:
        return gunzip(gz, raw)
    except CtxlensError:
        return None


def _same_or_refuse(path: Path, found: bytes | None, expected: bytes, source: Path) -> None:
    """Raise unless ``path`` holds (or decompresses to) exactly the bytes read from ``source``."""
    if found != expected:
        raise CtxlensError(
            f"{path} does not hold the same rows as {source.name}, so ctxlens will not replace or remove either; "
            f"move {path.name} away (it is not this run's copy) and run the command again."
        )


def _write(path: Path, data: bytes) -> None:
    try:
        files.atomic_write(path, data)
    except OSError as err:
        raise files.user_error(err, path, "write") or err from None


def _remove(path: Path) -> None:
    files.refuse_link_or_special(path)
    try:
        path.unlink()
    except OSError as err:
        raise files.user_error(err, path, "remove") or err from None


def _size(path: Path) -> int:
    files.refuse_link_or_special(path)
    return path.stat().st_size
