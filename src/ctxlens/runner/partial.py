"""Finished samples of the unit in flight, kept in the run directory across an interrupt.

``partial/<digest>.jsonl`` (digest: of the unit's key) belongs to one unit of one writer, which
holds the run's lock while it writes it. Its first line says whose it is::

    {"ctxlens_partial": 1, "unit": KEY, "fingerprint": DIGEST}

where DIGEST covers the unit, the model's weights and every option of the run, so samples decoded
for other weights or options are never reused: such a file is rebuilt. Each further line is one
finished sample ``{"key": ..., "value": ...}``, appended and fsync'ed before the next starts; a
line cut off by a kill is dropped on reading. The file is removed once its unit commits, so a
committed unit never depends on it (``README.md``, "Guarantees"). The store's rules hold: a link
or special file at ``partial`` or at the file is refused, a file whose first line is not such a
header is not ours and is refused (nothing is changed), other files in ``partial/`` are never
touched.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

from ctxlens.core import files
from ctxlens.core.errors import CtxlensError

FOLDER = "partial"


def path_for(directory: Path, unit_key: str) -> Path:
    return directory / FOLDER / f"{hashlib.sha256(unit_key.encode()).hexdigest()[:40]}.jsonl"


def fingerprint(unit_key: str, weights: str | None, options: object) -> str:
    """Digest of what the unit's samples depend on: its key, the weights, every option."""
    text = json.dumps([unit_key, weights, options], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _folder(folder: Path) -> Path:
    """``folder`` (the run's ``partial/``), refused when it is a link or not a folder."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise CtxlensError(f"{folder} is not a folder ctxlens made (a link or a file); remove it or use a new "
                           "--out directory.")
    return folder


class PartialUnit:
    """The checkpoint (``ctxlens.core.progress.Checkpoint``) of one unit; ``opener`` opens the
    run's store (and takes its lock) before the first write."""

    def __init__(self, directory: Path, unit_key: str, fingerprint: str, opener: Callable[[], object]):
        self.path, self.opener = path_for(directory, unit_key), opener
        self.header = {"ctxlens_partial": 1, "unit": unit_key, "fingerprint": fingerprint}
        self.entries: dict[str, str] | None = None
        self.written = False  # by this attempt

    def saved(self) -> dict[str, str]:
        if self.entries is None:
            self.entries = self._read()
        return dict(self.entries)

    def _read(self) -> dict[str, str]:
        _folder(self.path.parent)
        data = files.read_bytes(self.path)
        if not data:
            return {}
        lines = data.split(b"\n")
        try:
            header = json.loads(lines[0])
        except ValueError:
            header = None
        if not (isinstance(header, dict) and header.get("ctxlens_partial") == 1):
            raise CtxlensError(f"{self.path} is not a partial-unit file of ctxlens; nothing was changed: move it "
                               "away, or use a new --out directory.")
        if header != self.header:
            return {}  # another model's or configuration's samples: rebuilt at the first save
        out: dict[str, str] = {}
        for line in lines[1:-1]:  # the last piece is '' after a complete line, or a line cut off
            try:
                entry = json.loads(line)
            except ValueError:
                break
            if not (isinstance(entry, dict) and isinstance(entry.get("key"), str)
                    and isinstance(entry.get("value"), str)):
                break
            out[entry["key"]] = entry["value"]
        return out

    def save(self, key: str, value: str) -> None:
        """Store one finished sample durably: the first save of this attempt writes the file afresh
        (header, the samples kept, this one: a torn line or another run's samples go), later ones append."""
        entries = self.saved()
        entries[key] = value
        self.opener()
        try:
            if not self.written:
                _folder(self.path.parent).mkdir(exist_ok=True)
                files.atomic_write(self.path, _line(self.header)
                                   + b"".join(_line({"key": k, "value": v}) for k, v in entries.items()))
                self.written = True
            else:
                files.append(self.path, _line({"key": key, "value": value}))
        except OSError as err:
            raise files.user_error(err, self.path, "write") or err from None
        self.entries = entries

    def remove(self) -> None:
        """Delete the file (its unit has committed; only a file headed as ours) and the folder once empty."""
        if _ours(self.path):
            self.path.unlink()
        try:
            self.path.parent.rmdir()
        except OSError:
            pass  # not empty (other units, foreign files) or missing


def sweep(directory: Path, committed: set[str]) -> None:
    """Remove the partial files of units that have committed (a kill between a unit's commit and
    the removal of its file leaves one); only files named and headed as ours are read or removed."""
    folder = directory / FOLDER
    if folder.is_symlink() or not folder.is_dir():
        return
    for path in folder.iterdir():
        if _NAME.fullmatch(path.name) and (_ours(path) or {}).get("unit") in committed:
            path.unlink()
    try:
        folder.rmdir()
    except OSError:
        pass  # other units' samples, or files that are not ours


_NAME = re.compile(r"[0-9a-f]{40}\.jsonl")


def _ours(path: Path) -> dict | None:
    """The header of ``path`` when it is a regular file (not a link) headed as a partial-unit file, else None."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        header = json.loads(files.read_bytes(path).split(b"\n", 1)[0])
    except (ValueError, CtxlensError):
        return None
    return header if isinstance(header, dict) and header.get("ctxlens_partial") == 1 else None


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()
