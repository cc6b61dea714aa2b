"""The GGUF conversion cache: ``$CTXLENS_HOME/gguf/<sha256 of the file>/`` (``ctxlens.lm.gguf``),
keyed by content and verified on every use, never trusted by its path (issue 45): the
conversion records the SHA-256 of every file it wrote in ``ctxlens-gguf.json`` (``files``), and each
later use checks that the directory holds exactly those files with those digests (hashed once per
process while unchanged: ``fingerprint.file_sha256``) and that the record names the directory's own
key, before anything loads from it. Weights, config or tokenizer changed in the cache would otherwise
be measured while the run records the GGUF file's digest; a mismatch is one sentence telling the user
to delete the directory. A cache converted by an earlier ctxlens records no digests: it is converted
again and replaced, never taken as it is. The record lives beside the files it vouches for, so this
catches a cache changed or damaged after its conversion, not someone who rewrites the record too
(who could as well rewrite the run's own records).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import ctxlens.lm.fingerprint as fingerprint
from ctxlens.core.errors import CtxlensError
from ctxlens.core.paths import home

SOURCE_FILE = "ctxlens-gguf.json"  # inside a cache directory: which file it was converted from


def cache_dir(sha256: str) -> Path:
    """Where the converted copy of the GGUF file with this content hash lives."""
    return home() / "gguf" / sha256


def is_converted(directory: Path) -> bool:
    return (directory / SOURCE_FILE).is_file() and (directory / "config.json").is_file()


RECORD_BYTES = 1 << 20  # a ctxlens-gguf.json is a few hundred bytes


def digests(directory: Path) -> dict[str, str]:
    """name -> SHA-256 of every file of a finished conversion (its record excluded)."""
    out = {}
    for path in sorted(directory.iterdir()):
        if path.name == SOURCE_FILE:
            continue
        if path.is_symlink() or not path.is_file():
            raise CtxlensError(f"The GGUF conversion in '{directory}' holds '{path.name}', which is not a regular "
                               "file; delete the directory and load the file again.")
        out[path.name] = fingerprint.file_sha256(path)
    return out


def verified(sha256: str, spec: str) -> Path | None:
    """The cache directory of the GGUF file with content hash ``sha256`` once it is checked against its
    record (``check_conversion``); None when there is none, or it is an earlier ctxlens's without digests
    (the caller converts again); one sentence when its files are not those converted."""
    target = cache_dir(sha256)
    if not is_converted(target):
        return None
    return target if check_conversion(target, spec, sha256) is not None else None


def check_conversion(directory: Path, spec: str, sha256: str | None = None) -> dict | None:
    """The record of the converted GGUF directory ``directory`` once it holds exactly the files the record
    lists, each with its recorded SHA-256 (and, with ``sha256``, the record names that file); None when the
    record lists no files (an earlier ctxlens's); one sentence naming what differs otherwise."""
    from ctxlens.core import files, yaml_safe

    def changed(why: str) -> CtxlensError:
        return CtxlensError(f"The GGUF cache directory '{directory}' does not hold what ctxlens converted from "
                            f"'{spec}' ({why}); delete that directory and load '{spec}' again to convert it anew.")

    try:
        record = yaml_safe.load_json(files.read_bytes(directory / SOURCE_FILE, RECORD_BYTES, "GGUF cache record"),
                                     str(directory / SOURCE_FILE))
    except (CtxlensError, OSError, ValueError) as err:
        raise changed(f"its record {SOURCE_FILE} cannot be read: {str(err)[:160]}") from None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str) or \
            sha256 is not None and record["sha256"] != sha256:
        raise changed(f"its record {SOURCE_FILE} names another file")
    recorded = record.get("files")
    if recorded is None:
        return None  # converted by an earlier ctxlens, which recorded no digests
    if not isinstance(recorded, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in recorded.items()):
        raise changed(f"its record {SOURCE_FILE} lists its files wrongly")
    present = {p.name for p in directory.iterdir()} - {SOURCE_FILE}
    if present != set(recorded):
        extra, lost = sorted(present - set(recorded)), sorted(set(recorded) - present)
        raise changed(f"{extra[0]} was added" if extra else f"{lost[0]} is missing")
    for name, digest in sorted(recorded.items()):
        path = directory / name
        if path.is_symlink() or not path.is_file():
            raise changed(f"{name} is not a regular file")
        if fingerprint.file_sha256(path) != digest:
            raise changed(f"{name} changed since the conversion")
    return record


def earlier(target: Path) -> bool:
    """Whether ``target`` is a finished conversion of an earlier ctxlens (a record without digests)."""
    from ctxlens.core import files

    try:
        record = json.loads(files.read_bytes(target / SOURCE_FILE, RECORD_BYTES, "GGUF cache record"))
    except (OSError, ValueError, CtxlensError):
        return False
    return is_converted(target) and isinstance(record, dict) and "files" not in record


def move_into_place(tmp: Path, target: Path) -> None:
    """Rename the finished conversion to ``target``; another process may have finished first. A conversion
    of an earlier ctxlens in the way (no digests recorded) is moved aside and removed first."""
    aside = None
    if earlier(target):
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name[:16]}-old-", dir=target.parent))
        try:
            os.rename(target, aside / "old")
        except FileNotFoundError:  # another process replaced it first
            pass
    try:
        os.rename(tmp, target)
    except OSError:
        if not is_converted(target):
            raise
    finally:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
