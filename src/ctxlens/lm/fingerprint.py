"""A model's fingerprint: what a run records of each model it loads, so that a resume against
different weights under the same name is refused instead of mixing two models' rows.

For a local directory (a checkpoint, a zoo model, a converted GGUF file): SHA-256 over
``config.json`` and, for every weight file, its name, its size and samples of its bytes (the
first, middle and last ``SAMPLE`` bytes, plus a safetensors file's whole header). Cheap for any
size (at most a few MiB read per file), and any retraining, fine-tuning or requantisation changes
the sampled bytes. For a hub id: the config and the hub commit transformers resolved.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

SAMPLE = 1 << 20  # bytes read at each of three places in a weight file
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")


def _file_digest(path: Path, h) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}\0{size}\0".encode())
    with open(path, "rb") as f:
        if path.suffix == ".safetensors" and size >= 8:
            header = int.from_bytes(f.read(8), "little")
            h.update(f.read(min(header, size - 8)))
        for start in sorted({0, max(0, size // 2 - SAMPLE // 2), max(0, size - SAMPLE)}):
            f.seek(start)
            h.update(f.read(SAMPLE))


def directory_fingerprint(directory: Path) -> str:
    """Digest of a saved model directory's config and weight files (see the module docstring)."""
    h = hashlib.sha256(b"ctxlens-fingerprint-1\0")
    config = directory / "config.json"
    h.update(config.read_bytes() if config.is_file() else b"")
    for path in sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)):
        _file_digest(path, h)
    return h.hexdigest()[:32]


def fingerprint(model) -> str:
    """Fingerprint of a loaded transformers model (``PreTrainedModel``), from where it was loaded."""
    source = Path(str(getattr(model.config, "_name_or_path", "") or ""))
    if source.is_dir():
        return directory_fingerprint(source)
    h = hashlib.sha256(b"ctxlens-fingerprint-hub\0")
    h.update(json.dumps(model.config.to_dict(), sort_keys=True, default=str).encode())
    h.update(str(getattr(model.config, "_commit_hash", "")).encode())
    return h.hexdigest()[:32]
