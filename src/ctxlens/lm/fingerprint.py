"""A model's fingerprint: what a run records of each model it loads, so that a resume against
different weights under the same name is refused instead of mixing two models' rows.

For a local directory (a checkpoint, a zoo model, a converted GGUF file): SHA-256 over
``config.json`` and, for every weight file, its name, its size and the SHA-256 of all its bytes
(streamed in ``CHUNK`` reads), so a change to any one byte of the weights changes the fingerprint
(issue 32, item 5: the earlier version sampled three MiB of each file and missed a tensor scaled
elsewhere). For a hub id: the config and the hub commit transformers resolved.

Hashing a 1 GB file costs about a second, so each file's digest is cached in
``$CTXLENS_HOME/fingerprints.json`` under its resolved path, size, modification and change times
(ns), inode and device: a resume re-reads a file only when one of them changed. A file whose times
are within ``RACY_NS`` of the moment it was hashed is not cached (a write in the same clock tick
could leave its times unchanged; git calls this "racily clean"). The cache is data,
never authority: it is read with a size bound, an entry of the wrong shape ends the whole cache's
use (the file is hashed again), an entry is used only when every stat field matches the file now,
and a file that changed while it was hashed is not cached. Writing it is best effort (a read-only
or full home leaves the fingerprint right, only slower next time).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

CHUNK = 8 << 20  # bytes per read when hashing a weight file
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
CACHE_NAME = "fingerprints.json"
CACHE_ENTRIES = 512  # files remembered; the oldest are dropped first
CACHE_BYTES = 1 << 20  # a larger cache file is ignored (512 entries take about 150 KB)
RACY_NS = 2 * 10**9  # a file changed this recently is hashed again next time
_STAT = ("size", "mtime_ns", "ctime_ns", "ino", "dev")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def stamp(path: Path) -> dict[str, int]:
    """What must not have changed for a cached digest of ``path`` to be used."""
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino,
            "dev": st.st_dev}


def settled(stamped: dict[str, int]) -> bool:
    """Whether the file ``stamp`` described last changed more than ``RACY_NS`` ago, so that a digest
    of it may be remembered: a write in the same clock tick could leave its times unchanged."""
    return time.time_ns() - max(stamped["mtime_ns"], stamped["ctime_ns"]) > RACY_NS


def hash_file(path: Path) -> str:
    """SHA-256 of every byte of ``path``, read ``CHUNK`` bytes at a time into one reused buffer."""
    h = hashlib.sha256()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            h.update(view[:n])
    return h.hexdigest()


def _cache_path() -> Path:
    from ctxlens.core.paths import home

    return home() / CACHE_NAME


def _valid_entry(entry: object) -> bool:
    return (isinstance(entry, dict) and set(entry) == {"path", "sha256", *_STAT}
            and isinstance(entry["path"], str) and isinstance(entry["sha256"], str)
            and _HEX64.fullmatch(entry["sha256"]) is not None
            and all(type(entry[k]) is int and entry[k] >= 0 for k in _STAT))


def read_cache(path: Path | None = None) -> list[dict]:
    """The cache's entries, or [] when it is missing, too large, not ours, or any entry is malformed."""
    from ctxlens.core import files

    path = path or _cache_path()
    try:
        if os.path.getsize(path) > CACHE_BYTES:
            return []
        data = json.loads(files.read_bytes(path) or b"null")
    except Exception:  # noqa: BLE001 - unreadable, a link, not JSON, too deep: a broken cache is no cache
        return []
    entries = data.get("entries") if isinstance(data, dict) and data.get("ctxlens_fingerprints") == 1 else None
    if not isinstance(entries, list) or len(entries) > CACHE_ENTRIES or not all(map(_valid_entry, entries)):
        return []
    return entries


def _write_cache(entries: list[dict], path: Path | None = None) -> None:
    """Best effort: the cache only saves time, so a failure to write it is not the user's problem."""
    from ctxlens.core import files

    path = path or _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.atomic_write(path, json.dumps({"ctxlens_fingerprints": 1, "entries": entries[-CACHE_ENTRIES:]}))
    except Exception:  # noqa: BLE001, S110 - read-only home, full disk, a link in the way: hash again next time
        pass


def file_sha256(path: Path) -> str:
    """SHA-256 of ``path``'s bytes, from the cache when its stat is unchanged (see the module docstring)."""
    key = str(Path(path).resolve())
    stamped = stamp(path)
    before: dict[str, object] = {"path": key, **stamped}
    entries = read_cache()
    for entry in entries:
        if {k: entry[k] for k in before} == before:
            return entry["sha256"]
    digest = hash_file(path)
    if settled(stamped) and {"path": key, **stamp(path)} == before:  # unchanged while read, and not just written
        _write_cache([e for e in entries if e["path"] != key] + [{**before, "sha256": digest}])
    return digest


def _file_digest(path: Path, h) -> None:
    h.update(f"{path.name}\0{path.stat().st_size}\0{file_sha256(path)}\0".encode())


FULL = "full-"  # marks a fingerprint of every byte; older ctxlens versions recorded 32 hex digits of sampled windows


def is_sampled(recorded: str) -> bool:
    """Whether ``recorded`` is a fingerprint of an older ctxlens that read only windows of each weight file."""
    return not recorded.startswith(FULL) and len(recorded) == 32 and all(c in "0123456789abcdef" for c in recorded)


def directory_fingerprint(directory: Path) -> str:
    """Digest of a saved model directory's config and weight files (see the module docstring)."""
    h = hashlib.sha256(b"ctxlens-fingerprint-2\0")
    config = directory / "config.json"
    h.update(config.read_bytes() if config.is_file() else b"")
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)):
        _file_digest(path, h)
    return FULL + h.hexdigest()[:32]


def fingerprint(model) -> str:
    """Fingerprint of a loaded transformers model (``PreTrainedModel``), from where it was loaded."""
    source = Path(str(getattr(model.config, "_name_or_path", "") or ""))
    if source.is_dir():
        return directory_fingerprint(source)
    h = hashlib.sha256(b"ctxlens-fingerprint-hub\0")
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    h.update(str(getattr(model.config, "_commit_hash", "")).encode())
    return h.hexdigest()[:32]
