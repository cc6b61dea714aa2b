"""Files ctxlens reads and writes: regular files only, never through a symbolic link.

A run directory or report folder may be shared with files ctxlens did not write. These helpers
make sure a read never blocks on a FIFO or device, and a write never lands outside the folder
through a link: each opens with ``O_NOFOLLOW`` and checks the file type on the open descriptor
(no gap between check and use).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ctxlens.core.errors import CtxlensError

# errors a user fixes on the machine, not in ctxlens: each becomes one sentence
_USER_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                errno.EROFS: "the file system is read-only", errno.EACCES: "permission is denied",
                errno.EPERM: "permission is denied"}


def refuse_link_or_special(path: Path) -> None:
    """Raise unless ``path`` is missing or a regular file (not a link, FIFO, device or folder)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise CtxlensError(f"{path} is a symbolic link; ctxlens never reads or writes run files through links, "
                           "so replace it with the file itself or use a new directory.")
    if not stat.S_ISREG(st.st_mode):
        raise CtxlensError(f"{path} is not a regular file (a FIFO, device or folder); remove it or use a new "
                           "directory.")


def _open(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open that refuses links and non-regular files (checked on the descriptor)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            refuse_link_or_special(path)
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        refuse_link_or_special(path)
        raise CtxlensError(f"{path} is not a regular file; remove it or use a new directory.")
    return fd


def read_bytes(path: Path) -> bytes:
    """The file's bytes, b'' when it is missing; refuses links and special files."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8")


def append(path: Path, data: bytes, start: int | None = None) -> int:
    """Append ``data`` to ``path`` durably and return the size afterwards; with ``start``, first
    cut off anything past that offset (the rows a failed commit left behind)."""
    fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        if start is not None and os.fstat(fd).st_size != start:
            os.ftruncate(fd, start)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def truncate(path: Path, size: int) -> None:
    fd = _open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path`` by a new file holding ``data`` (temp file + rename: never half written).
    A link at ``path`` is refused, not replaced; a failed write leaves ``path`` as it was."""
    refuse_link_or_special(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # ranks may write the same file at once
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def user_error(err: OSError, path: Path | str, what: str) -> CtxlensError | None:
    """One sentence for an OSError the user fixes on the machine (full disk, read-only, denied),
    else None (a bug: keep the traceback)."""
    why = _USER_ERRNOS.get(err.errno or 0)
    if why is None:
        return None
    return CtxlensError(f"Could not {what} {path}: {why}; fix that and run the same command again "
                        "(finished units are kept).")
