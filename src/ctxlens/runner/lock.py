"""One writer per run directory (per log pair for sharded runs), held with ``flock``.

The lock lives in the file ``.ctxlens-lock`` (``.ctxlens-lock.rank{R}`` for rank R) and holds the
writer's process id, so a second writer is told which process has the directory. The kernel drops
the lock when its process ends, however it ends, so a lock left by a killed run never blocks the
resume. Within one process, stores of the same directory share the lock (a resume in the same
Python session is not a second writer).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from ctxlens.core import files
from ctxlens.core.errors import CtxlensError

_HELD: dict[Path, list[int]] = {}  # lock path -> [fd, holders] for the locks this process holds


def lock_name(rank: int | None) -> str:
    return ".ctxlens-lock" if rank is None else f".ctxlens-lock.rank{rank}"


def _busy(path: Path, fd: int) -> CtxlensError:
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    who = f"process {holder}" if holder.isdigit() else "another process"
    return CtxlensError(f"{path.parent} is being written by {who}; wait for it to finish (or stop it), "
                        "or use another --out directory.")


def try_lock(path: Path, mode: int, flags: int) -> int:
    """An fd of ``path`` (opened with ``flags``) holding an flock of ``mode``, or CtxlensError
    naming the holder."""
    files.refuse_link_or_special(path)
    fd = os.open(path, flags | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError as err:
        busy = _busy(path, fd) if err.errno in (errno.EWOULDBLOCK, errno.EACCES) else None
        os.close(fd)
        if busy is None:
            raise
        raise busy from None
    return fd


class WriterLock:
    """Held from ``acquire`` until ``release`` or the end of the process. ``name``: another lock
    file than the run's (``ctxlens profile`` holds ``.ctxlens-profile-lock`` in its ``--out``)."""

    def __init__(self, directory: Path, rank: int | None = None, name: str | None = None):
        self.path = (Path(directory) / (name or lock_name(rank))).absolute()
        self.held = False

    def acquire(self) -> None:
        if self.held:
            return
        if self.path in _HELD:
            _HELD[self.path][1] += 1
        else:
            fd = try_lock(self.path, fcntl.LOCK_EX, os.O_RDWR | os.O_CREAT)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            _HELD[self.path] = [fd, 1]
        self.held = True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        entry = _HELD[self.path]
        entry[1] -= 1
        if entry[1] == 0:
            del _HELD[self.path]
            os.close(entry[0])  # closing the last descriptor drops the flock

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


def check_free(directory: Path, rank: int | None = None) -> None:
    """Raise if another process holds the directory's lock; takes nothing, creates nothing."""
    path = (Path(directory) / lock_name(rank)).absolute()
    if path in _HELD or not path.exists():
        return
    os.close(try_lock(path, fcntl.LOCK_SH, os.O_RDONLY))  # read-only: works on a read-only folder
