"""Facts about the environment a run ran in, written to ``env.json`` (its fields and version are declared in
``ctxlens.core.schema.ENV``; the run store stamps the version, ``ctxlens.results`` reads it back through it)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import platform
import subprocess
import sys
from pathlib import Path

PACKAGES = ("ctxlens", "torch", "transformers", "accelerate", "datasets", "tokenizers", "numpy", "safetensors")


def _version(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def git_revision() -> str | None:
    """The git revision of the ctxlens source tree, when it is a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def tree_digest(root: Path) -> str:
    """sha256 (first 16 hex digits) of the Python sources under ``root``: each file's path under it and
    its bytes, in path order; any edit, rename or new file changes it, other files do not."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.cache
def source_digest() -> str:
    """``tree_digest`` of the ctxlens package that runs: names the code where no git checkout does (an
    installed copy, a snapshot). Computed once per process."""
    return tree_digest(Path(__file__).resolve().parent.parent)


def environment(device: str | None = None) -> dict:
    import torch

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in PACKAGES},
        "git_revision": git_revision(),
        "source_digest": source_digest(),
        "device": device,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "torch_threads": torch.get_num_threads(),
        "argv": sys.argv,
    }
    return env
