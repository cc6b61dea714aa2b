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
from typing import IO, BinaryIO

from ctxlens.core.errors import CtxlensError

# errors a user fixes on the machine, not in ctxlens: each becomes one sentence
_USER_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                errno.EROFS: "the file system is read-only", errno.EACCES: "permission is denied",
                errno.EPERM: "permission is denied", errno.ENOTDIR: "a part of the path is a file, not a folder",
                errno.EEXIST: "a file is in the way of a folder", errno.EISDIR: "it is a folder",
                errno.ENAMETOOLONG: "the name is too long", errno.ELOOP: "the path goes through a symbolic link"}


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


def open_input(path: Path | str, what: str = "Input file") -> BinaryIO:
    """A user's input file opened for reading in binary (links followed: a corpus may be linked), once it
    is known to be a regular file: checked on the descriptor, opened without blocking, so a FIFO, device
    or socket given as a file is one sentence instead of a read that waits forever."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except IsADirectoryError:
        raise CtxlensError(f"{what} '{path}' is a folder; pass a file.") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CtxlensError(f"{what} '{path}' is not a regular file (a FIFO, device or socket); pass a file.")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


def check_size(f: IO, path: Path | str, limit: int, what: str, fix: str) -> int:
    """The size of the open file ``f`` (``fstat`` on its descriptor: the file that will be read, not
    whatever the path names by then), after refusing one larger than ``limit`` bytes in one sentence:
    ``what`` and ``path``, the size, the limit and ``fix``."""
    size = os.fstat(f.fileno()).st_size
    if size > limit:
        raise CtxlensError(f"{what} '{path}' is {size:,} bytes, more than the {_mib(limit)} ctxlens reads; {fix}.")
    return size


def read_input(path: Path | str, limit: int, what: str = "Input file", fix: str = "pass a smaller file") -> bytes:
    """A user's input file's bytes (``open_input``: links followed, FIFOs and devices refused), its size
    checked on the open descriptor against ``limit`` before anything is read (``check_size``), and at
    most ``limit`` bytes read even if it grows meanwhile."""
    with open_input(path, what) as f:
        check_size(f, path, limit, what, fix)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CtxlensError(f"{what} '{path}' grew past the {_mib(limit)} ctxlens reads while it was read; {fix}.")
    return data


def check_input_size(path: Path | str, limit: int, what: str = "Input file", fix: str = "pass a smaller file") -> None:
    """For a file another library reads whole (transformers' tokenizer and config files): refuse it, when
    it exists, unless it is a regular file of at most ``limit`` bytes (checked on an open descriptor)."""
    try:
        with open_input(path, what) as f:
            check_size(f, path, limit, what, fix)
    except FileNotFoundError:
        return
    except OSError as err:
        raise user_error(err, path, "read") or err from None


def regular_input(path: Path | str, what: str = "Input file") -> None:
    """Raise the sentence of ``open_input`` unless ``path`` is a regular file (stat only: for readers
    that open the file themselves, such as pyarrow)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise CtxlensError(f"{what} '{path}' is not a regular file (a FIFO, device or socket); pass a file.")


def read_bytes(path: Path, limit: int | None = None, what: str = "File") -> bytes:
    """The file's bytes, b'' when it is missing; refuses links and special files. With ``limit``, a
    file larger than that is refused (``check_size``, on the open descriptor) before it is read."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        if limit is None:
            return f.read()
        fix = "check that it is the file ctxlens wrote, or remove it"
        check_size(f, path, limit, what, fix)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CtxlensError(f"{what} '{path}' grew past the {_mib(limit)} ctxlens reads while it was read; {fix}.")
    return data


def read_text(path: Path, limit: int | None = None, what: str = "File") -> str:
    return read_bytes(path, limit, what).decode("utf-8")


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


def _exclusive_tmp(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path`` and its descriptor, created with ``O_CREAT | O_EXCL |
    O_NOFOLLOW``: never an existing file, never through a link planted at its name (a planted
    ``.NAME.PID.tmp`` is stepped over to ``.NAME.PID.K.tmp``, and left as it is)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for k in range(TMP_TRIES):
        tmp = path.with_name(f".{path.name}.{os.getpid()}{'' if k == 0 else f'.{k}'}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o644)
        except FileExistsError:
            continue
    raise CtxlensError(f"{path.parent} holds {TMP_TRIES} files named like ctxlens' temporary files for {path.name}; "
                       "remove the .*.tmp files there or use a new directory.")


TMP_TRIES = 16


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path`` by a new file holding ``data`` (temp file + rename: never half written).
    A link at ``path`` is refused, not replaced; the temporary file is created exclusively
    (``_exclusive_tmp``); a failed write leaves ``path`` as it was, and a full disk, read-only
    folder or path under a file is one sentence (``user_error``)."""
    path = Path(path)
    refuse_link_or_special(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        tmp, fd = _exclusive_tmp(path)
    except OSError as err:
        raise user_error(err, path, "write") or err from None
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        problem = user_error(err, path, "write") if isinstance(err, OSError) else None
        if problem is not None:
            raise problem from None
        raise


def user_error(err: OSError, path: Path | str | None, what: str) -> CtxlensError | None:
    """One sentence for an OSError the user fixes on the machine (full disk, read-only, denied, a
    path under a file), else None (a bug: keep the traceback)."""
    why = _USER_ERRNOS.get(err.errno or 0)
    path = path if path is not None else err.filename
    if why is None:
        return None
    return CtxlensError(f"Could not {what} {path}: {why}; fix that and run the same command again "
                        "(finished units are kept).")


def inside(path: Path, root: Path, what: str = "a profile's file") -> Path:
    """``path`` once no component of it below ``root`` is a symbolic link (checked with lstat, level by
    level) and it lies inside ``root``: a planted link to another place is one sentence naming it, and
    nothing is written or moved through it."""
    root_resolved = root.resolve()
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise CtxlensError(f"{path} is outside {root}; ctxlens writes {what} only inside it.") from None
    at = root
    for part in rel.parts:
        at = at / part
        if at.is_symlink():
            raise CtxlensError(f"{at} is a symbolic link; ctxlens never writes or moves {what} through a link, so "
                               "remove the link or use a new --out directory.")
    if root_resolved not in (path.resolve(), *path.resolve().parents):
        raise CtxlensError(f"{path} resolves outside {root}; use a new --out directory.")
    return path
