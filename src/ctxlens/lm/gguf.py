"""GGUF files as ordinary ``save_pretrained`` directories, converted once and cached.

transformers reads a GGUF file itself (``from_pretrained(dir, gguf_file=name)``, which needs the
``gguf`` package) and dequantises every tensor. That costs tens of seconds, so the first load
writes the dequantised model (safetensors, float32) and its tokenizer, which carries the chat
template when the file has one, to ``$CTXLENS_HOME/gguf/<sha256 of the file>/``. Every later
load of the same bytes, under any name, reads that directory like any other model directory
(DESIGN principle 1: one code path), in the dtype the user asks for.

The conversion writes into a temporary directory beside the target and renames it into place,
so a conversion that is killed or fails never leaves a half-made cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from ctxlens.core.errors import CtxlensError
from ctxlens.core.paths import home

log = logging.getLogger(__name__)

MAGIC = b"GGUF"
SOURCE_FILE = "ctxlens-gguf.json"  # inside a cache directory: which file it was converted from


def is_gguf(path: Path) -> bool:
    """Whether ``path`` is a readable file that starts with the GGUF magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir(sha256: str) -> Path:
    """Where the converted copy of the GGUF file with this content hash lives."""
    return home() / "gguf" / sha256


def is_converted(directory: Path) -> bool:
    return (directory / SOURCE_FILE).is_file() and (directory / "config.json").is_file()


def converted(path: Path, spec: str, sha256: str | None = None) -> Path:
    """The ``save_pretrained`` directory of GGUF file ``path``, converting it on first use.

    spec: what the user named (for messages). sha256: the file's hash when the caller has
    already verified it (saves reading the file again).
    """
    if not is_gguf(path):
        raise CtxlensError(f"'{spec}' is neither a model directory nor a readable GGUF file (it does not start "
                           "with the bytes 'GGUF'); point --model at a save_pretrained directory or a .gguf file.")
    sha256 = sha256 or file_sha256(path)
    target = cache_dir(sha256)
    if is_converted(target):
        return target
    if target.exists():
        raise CtxlensError(f"The GGUF cache directory '{target}' exists but is incomplete; delete it and load "
                           f"'{spec}' again.")
    require_gguf_package()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{sha256[:16]}-", dir=target.parent))
    try:
        log.info("converting %s to safetensors in %s (once per file)", path, target)
        convert(path, tmp, spec)
        source = {"file": path.name, "path": str(path.resolve()), "sha256": sha256, "file_type": file_type(path)}
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n")
        _move_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def require_gguf_package() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise CtxlensError("Reading a GGUF file needs the 'gguf' package; install it with pip install 'ctxlens[gguf]'.")


def convert(path: Path, out: Path, spec: str) -> None:
    """Dequantise GGUF ``path`` with transformers and save model (float32) and tokenizer to ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    where = {"pretrained_model_name_or_path": str(path.parent), "gguf_file": path.name}
    try:
        model = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32, **_dequantize_option())
    except (ValueError, KeyError, NotImplementedError) as err:
        raise CtxlensError(f"transformers cannot read the GGUF file '{spec}' ({str(err).splitlines()[0]}); "
                           "use a GGUF of an architecture transformers supports, or a save_pretrained "
                           "directory.") from None
    if getattr(model, "hf_quantizer", None) is not None:  # a transformers that kept the weights packed
        raise CtxlensError(f"transformers kept the weights of '{spec}' quantized, so they cannot be saved; "
                           "upgrade transformers (pip install -U transformers).")
    model.save_pretrained(out, safe_serialization=True)
    _save_tokenizer(where, out, spec)


def _dequantize_option() -> dict:
    """Ask transformers (versions with ``GgufConfig``) for plain dense weights, not packed blocks."""
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers always dequantise
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _save_tokenizer(where: dict, out: Path, spec: str) -> None:
    from transformers import AutoTokenizer

    try:
        AutoTokenizer.from_pretrained(**where).save_pretrained(out)
    except Exception as err:  # noqa: BLE001 - the tokenizers builders raise bare Exception; the model is still usable
        log.warning("no tokenizer in %s (%s); token-level analyses only", spec, str(err).splitlines()[0])


def _move_into_place(tmp: Path, target: Path) -> None:
    """Rename the finished conversion to ``target``; another process may have finished first."""
    try:
        os.rename(tmp, target)
    except OSError:
        if not is_converted(target):
            raise



def file_type(path: Path) -> str | None:
    """The quantisation of GGUF file ``path``: its ``general.file_type`` as llama.cpp names it
    (``MOSTLY_Q4_K_M`` -> ``Q4_K_M``), else the commonest type of its 2-D tensors; None when the
    file or the ``gguf`` package is missing. The key is read from the header alone (``_header_value``):
    the package's full reader parses every vocabulary string (tens of seconds on Gemma 3)."""
    if importlib.util.find_spec("gguf") is None or not Path(path).is_file():
        return None
    import gguf as gg

    value = _header_value(Path(path), "general.file_type")
    if isinstance(value, int):
        try:
            return gg.LlamaFileType(value).name.removeprefix("MOSTLY_")
        except ValueError:
            pass
    counts: dict[str, int] = {}
    for tensor in gg.GGUFReader(path).tensors:
        if len(tensor.shape) > 1:
            counts[tensor.tensor_type.name] = counts.get(tensor.tensor_type.name, 0) + 1
    return max(counts, key=lambda name: counts[name]) if counts else None


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _header_value(path: Path, key: str):
    """The scalar value of metadata ``key`` in GGUF file ``path`` (version 2 or 3), read key by key
    from the header; None when absent, not a scalar, or the header is not one this reads."""
    import struct

    def read(f, fmt):
        size = struct.calcsize(fmt)
        data = f.read(size)
        if len(data) != size:
            raise EOFError
        return struct.unpack(fmt, data)[0]

    def skip(f, kind):
        if kind in _SCALARS:
            f.seek(struct.calcsize(_SCALARS[kind]), 1)
        elif kind == 8:
            f.seek(read(f, "<Q"), 1)
        elif kind == 9:
            item, count = read(f, "<I"), read(f, "<Q")
            if item in _SCALARS:
                f.seek(count * struct.calcsize(_SCALARS[item]), 1)
            else:
                for _ in range(count):
                    skip(f, item)
        else:
            raise ValueError(kind)

    try:
        with open(path, "rb") as f:
            if f.read(4) != MAGIC or read(f, "<I") not in (2, 3):
                return None
            read(f, "<Q")  # tensor count
            for _ in range(read(f, "<Q")):
                name = f.read(read(f, "<Q")).decode("utf-8", "replace")
                kind = read(f, "<I")
                if name == key:
                    return read(f, _SCALARS[kind]) if kind in _SCALARS else None
                skip(f, kind)
    except (OSError, EOFError, ValueError, struct.error):
        return None
    return None
