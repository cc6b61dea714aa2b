"""A model's fingerprint: what a run records of each model it loads, so that a resume against
different weights under the same name is refused instead of mixing two models' rows.

A GGUF file (``weights_fingerprint``): the SHA-256 of the file's own bytes, as the load recorded it
(``ModelInfo.weights``), so one file has one fingerprint whichever transformers version converted it
(issue 45: hashing the converted directory gave the same file two fingerprints under two versions).
Any other local directory (a checkpoint, a zoo model): SHA-256 over
``config.json`` and, for every weight file, its name, its size and the SHA-256 of all its bytes
(streamed in ``CHUNK`` reads), so a change to any one byte of the weights changes the fingerprint
(issue 32, item 5: the earlier version sampled three MiB of each file and missed a tensor scaled
elsewhere). For a hub id: the config and the hub commit transformers resolved.

Threat model (issue 45). The digest decides whether a resume may go on (the runner's weights check,
a profile's provenance), so it is computed from the bytes on disk in the process that decides, never
read back from a file: an earlier version cached each file's digest in ``$CTXLENS_HOME/fingerprints.json``
under its path and stat, and an entry planted there (the changed file's stat, the old digest) let
changed weights pass under the old digest. That file is no longer read or written (one left by an
earlier version is left alone). Within one process a file's digest is remembered while its stat (size,
modification and change times in ns, inode, device: ``stamp``) stays as it was, so planning, loading
and the resume check hash a file once; a file whose times are within ``RACY_NS`` of the moment it was
hashed is not remembered (a write in the same clock tick could leave its times unchanged; git calls
this "racily clean"), nor one that changed while it was read. The price is one read of every weight
file per process that plans or loads a local model (about a second per GB; loading reads the same
bytes). What this does not cover: anyone who can write the run directory can rewrite the fingerprint
it records (``config.yaml``), and anyone who can write the weights and ctxlens's own code can do
anything; the check guards against weights that changed, not against the user's own account.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

CHUNK = 8 << 20  # bytes per read when hashing a weight file
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
CACHE_NAME = "fingerprints.json"  # where an earlier version cached digests: no longer read or written
RACY_NS = 2 * 10**9  # a file changed this recently is hashed again next time


def stamp(path: Path) -> dict[str, int]:
    """What must not have changed for a remembered digest of ``path`` to be used."""
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


_HASHED: dict[tuple, str] = {}  # (real path, *stamp) -> sha256 of the files this process has hashed


def file_sha256(path: Path) -> str:
    """SHA-256 of ``path``'s bytes, hashed once per process while its stat is unchanged (see the module
    docstring: never read from a file on disk)."""
    stamped = stamp(path)
    key = (os.path.realpath(path), *stamped.values())
    if key in _HASHED:
        return _HASHED[key]
    digest = hash_file(path)
    if settled(stamped) and stamp(path) == stamped:  # unchanged while read, and not just written
        _HASHED[key] = digest
    return digest


class _Hasher(Protocol):
    """What ``_file_digest`` feeds: a ``hashlib`` hash object."""

    def update(self, data: bytes, /) -> None: ...


def _file_digest(path: Path, h: _Hasher) -> None:
    h.update(f"{path.name}\0{path.stat().st_size}\0{file_sha256(path)}\0".encode())


FULL = "full-"  # marks a fingerprint of every byte; older ctxlens versions recorded 32 hex digits of sampled windows


def is_sampled(recorded: str) -> bool:
    """Whether ``recorded`` is a fingerprint of an older ctxlens that read only windows of each weight file."""
    return not recorded.startswith(FULL) and len(recorded) == 32 and all(c in "0123456789abcdef" for c in recorded)


def directory_fingerprint(directory: Path) -> str:
    """Digest of a saved model directory's config and weight files (see the module docstring)."""
    h = hashlib.sha256(b"ctxlens-fingerprint-2\0")
    import ctxlens.lm.model_files as model_files

    config = directory / "config.json"
    h.update(model_files.read(config) if config.is_file() else b"")  # bounded (``model_files.LIMITS``)
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)):
        _file_digest(path, h)
    return FULL + h.hexdigest()[:32]


GGUF = FULL + "gguf-"  # marks the fingerprint of a GGUF file: its own sha256


def weights_fingerprint(model: PreTrainedModel, weights: Mapping[str, object] | None) -> str:
    """The fingerprint a run records of a loaded model: for a GGUF file, its own sha256 from ``weights``
    (the load's record, ``ModelInfo.weights``: format, quantization, file, digest); otherwise
    ``fingerprint(model)``."""
    digest = (weights or {}).get("digest")
    if (weights or {}).get("format") == "GGUF" and isinstance(digest, str) and digest.startswith("sha256:"):
        return GGUF + digest.removeprefix("sha256:")
    return fingerprint(model)


def fingerprint(model: PreTrainedModel) -> str:
    """Fingerprint of a loaded transformers model (``PreTrainedModel``), from where it was loaded."""
    source = Path(str(getattr(model.config, "_name_or_path", "") or ""))
    if source.is_dir():
        return directory_fingerprint(source)
    h = hashlib.sha256(b"ctxlens-fingerprint-hub\0")
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    h.update(str(getattr(model.config, "_commit_hash", "")).encode())
    return h.hexdigest()[:32]
