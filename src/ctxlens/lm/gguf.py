"""GGUF files as ordinary ``save_pretrained`` directories, converted once and cached.

transformers reads a GGUF file itself (``from_pretrained(dir, gguf_file=name)``, which needs the
``gguf`` package) and dequantises every tensor. That costs tens of seconds, so the first load
writes the dequantised model (safetensors, float32) and its tokenizer, which carries the chat
template when the file has one, to ``$CTXLENS_HOME/gguf/<sha256 of the file>/``. Every later
load of the same bytes, under any name, reads that directory like any other model directory
(DESIGN principle 1: one code path), in the dtype the user asks for. A process hashes a file
once while it is unchanged on disk (``content_sha256``), so a spec resolved by ``read_info`` and
again by ``load`` reads the file's bytes once.

The conversion writes into a temporary directory beside the target and renames it into place,
so a conversion that is killed or fails never leaves a half-made cache.
The cache is verified on every use (``ctxlens.lm.gguf_cache``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import ctxlens.lm.fingerprint as fingerprint
from ctxlens.core.errors import CtxlensError
from ctxlens.lm.gguf_cache import (  # noqa: F401 - the cache's names, re-exported (``gguf.SOURCE_FILE``...)
    SOURCE_FILE,
    cache_dir,
    check_conversion,
    digests,
    is_converted,
    move_into_place,
    verified,
)

log = logging.getLogger(__name__)

MAGIC = b"GGUF"


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


_HASHED: dict[tuple, str] = {}  # (real path, *stat) -> sha256 of the GGUF files this process has hashed


def content_sha256(path: Path) -> str:
    """``file_sha256`` of ``path``, read once per process while the file's stat (size, modification and
    change times, inode, device: ``fingerprint.stamp``) stays as it was, so ``read_info`` and then
    ``load`` of one GGUF file hash it once; a file changed on disk is hashed again. A file changed
    while it was read, or within ``fingerprint.RACY_NS`` before (``fingerprint.settled``), is not
    remembered."""
    stamped = fingerprint.stamp(path)
    key = (os.path.realpath(path), *stamped.values())
    if key in _HASHED:
        return _HASHED[key]
    digest = file_sha256(path)
    if fingerprint.settled(stamped) and fingerprint.stamp(path) == stamped:
        _HASHED[key] = digest
    return digest


def converted(path: Path, spec: str, sha256: str | None = None) -> Path:
    """The ``save_pretrained`` directory of GGUF file ``path``, converting it on first use.

    spec: what the user named (for messages). sha256: the file's hash when the caller has
    already verified it (saves reading the file again).
    """
    if not is_gguf(path):
        raise CtxlensError(f"'{spec}' is neither a model directory nor a readable GGUF file (it does not start "
                           "with the bytes 'GGUF'); point --model at a save_pretrained directory or a .gguf file.")
    sha256 = sha256 or content_sha256(path)
    target = cache_dir(sha256)
    if verified(sha256, spec) is not None:
        return target
    check_header(path, spec)  # before transformers' reader sees the file
    if target.exists() and not is_converted(target):
        raise CtxlensError(f"The GGUF cache directory '{target}' exists but is incomplete; delete it and load "
                           f"'{spec}' again.")
    require_gguf_package()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{sha256[:16]}-", dir=target.parent))
    try:
        log.info("converting %s to safetensors in %s (once per file)", path, target)
        with one_parse():  # the conversion and file_type's fallback read the file once between them
            convert(path, tmp, spec)
            source: dict = {"file": path.name, "path": str(path.resolve()), "sha256": sha256,
                            "file_type": file_type(path)}
        source["files"] = digests(tmp)  # what a later use verifies (``gguf_cache.verified``)
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=1) + "\n")
        move_into_place(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def require_gguf_package() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise CtxlensError("Reading a GGUF file needs the 'gguf' package; install it with pip install 'ctxlens[gguf]'.")


def convert(path: Path, out: Path, spec: str) -> None:
    """Dequantise GGUF ``path`` with transformers and save model (float32) and tokenizer to ``out``."""
    where = {"pretrained_model_name_or_path": str(path.parent), "gguf_file": path.name}
    with one_parse():
        _convert(where, out, spec)


def _convert(where: dict, out: Path, spec: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report (with terminal escapes) is ``_agrees``'s one sentence here
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32, output_loading_info=True,
                                                              ignore_mismatched_sizes=True, **_dequantize_option())
    except Exception as err:  # noqa: BLE001 - narrowed below to what a file's content makes transformers raise
        if isinstance(err, OSError) and err.errno is not None:  # a disk or path error, not the file's content
            raise
        # StrictDataclass...: metadata that transformers' typed config refuses (a hidden size no multiple of the heads)
        if not isinstance(err, (ValueError, KeyError, NotImplementedError, IndexError, RuntimeError, struct.error,
                                OSError)) and not type(err).__name__.startswith("StrictDataclass"):
            raise  # a bug: keep the traceback
        raise CtxlensError(f"transformers cannot read the GGUF file '{spec}' ({' '.join(str(err).split())[:200]}); "
                           "use a GGUF of an architecture transformers supports, or a save_pretrained "
                           "directory.") from None
    finally:
        hf_logging.set_verbosity(level)
    _agrees(loading, spec)
    if getattr(model, "hf_quantizer", None) is not None:  # a transformers that kept the weights packed
        raise CtxlensError(f"transformers kept the weights of '{spec}' quantized, so they cannot be saved; "
                           "upgrade transformers (pip install -U transformers).")
    model.save_pretrained(out, safe_serialization=True)
    _save_tokenizer(where, out, spec)


def _agrees(loading: dict, spec: str) -> None:
    """Refuse a GGUF whose metadata disagrees with its tensors, from transformers' loading report: a tensor
    whose shape is not the one the metadata implies (transformers would raise a RuntimeError), or a tensor
    the metadata implies that the file lacks (transformers would fill it with random values and go on)."""
    fix = "the file is damaged or was written wrongly; download or convert it again"
    mismatched = sorted(loading.get("mismatched_keys") or [], key=lambda m: str(m[0]))
    if mismatched:
        name, found, wanted = mismatched[0]
        raise CtxlensError(f"The GGUF file '{spec}' disagrees with itself: its metadata makes {name} of shape "
                           f"{tuple(wanted)}, but its tensor holds {tuple(found)} ({len(mismatched)} tensor(s) "
                           f"differ); {fix}.")
    missing = sorted(loading.get("missing_keys") or [])
    if missing:
        raise CtxlensError(f"The GGUF file '{spec}' lacks {len(missing)} tensor(s) its metadata implies (the first: "
                           f"{missing[0]}); {fix}.")


@contextmanager
def one_parse() -> Iterator[None]:
    """Within the block, ``gguf.GGUFReader(path)`` parses each file once: transformers reads a GGUF file
    for the config, again for the model (with its own config) and again for the tokenizer, and each
    read parses every metadata field (262,144 vocabulary strings for Gemma 3: two thirds of its
    conversion time). The reader is only read from, so the three calls share one."""
    import gguf

    made, original = {}, gguf.GGUFReader

    def reader(path: str | os.PathLike[str], mode: str = "r") -> Any:  # a gguf.GGUFReader
        key = (os.path.realpath(path), mode)
        if key not in made:
            made[key] = original(path, mode)
        return made[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = original


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


def _header_value(path: Path, key: str) -> int | float | bool | None:
    """The scalar value of metadata ``key`` in GGUF file ``path`` (version 2 or 3), read key by key
    from the header; None when absent, not a scalar, or the header is not one this reads."""
    import struct

    def read(f: BinaryIO, fmt: str) -> Any:  # what struct unpacks by fmt: int, float or bool
        size = struct.calcsize(fmt)
        data = f.read(size)
        if len(data) != size:
            raise EOFError
        return struct.unpack(fmt, data)[0]

    def skip(f: BinaryIO, kind: int) -> None:
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


# ------------------------------------------------------------------ a bounded walk of the header
TEMPLATE_KEY = "tokenizer.chat_template"
TEMPLATE_CAP = 1 << 20  # bytes: real chat templates are a few KiB
MAX_DIMS = 8  # GGML tensors have at most 4 dimensions
MAX_NESTING = 3  # arrays of arrays of ...


class _Header:
    """A reader over GGUF ``path`` that refuses any count or length the file's size cannot hold."""

    def __init__(self, f: BinaryIO, size: int):
        self.f, self.size = f, size

    def left(self) -> int:
        return self.size - self.f.tell()

    def read(self, fmt: str) -> Any:  # what struct unpacks by fmt: int, float or bool
        import struct

        n = struct.calcsize(fmt)
        data = self.f.read(n)
        if len(data) != n:
            raise _Bad(f"it ends inside its header, at byte {self.f.tell()} of {self.size}")
        return struct.unpack(fmt, data)[0]

    def count(self, what: str, least_bytes: int) -> int:
        """A u64 count of items each at least ``least_bytes`` long, checked against the bytes left."""
        n = self.read("<Q")
        if n * least_bytes > self.left():
            raise _Bad(f"it claims {n} {what}, more than its {self.size} bytes can hold")
        return n

    def string(self, what: str, cap: int | None = None) -> int:
        """Skip one string, returning its length (checked against the bytes left and ``cap``)."""
        n = self.read("<Q")
        if n > self.left():
            raise _Bad(f"a {what} claims {n} bytes, more than the {self.left()} left in the file")
        if cap is not None and n > cap:
            raise _Bad(f"its {what} is {n} bytes, over the {cap}-byte limit")
        self.f.seek(n, 1)
        return n

    def key(self) -> str:
        n = self.read("<Q")
        if n > min(self.left(), 1 << 16):
            raise _Bad(f"a metadata key claims {n} bytes")
        return self.f.read(n).decode("utf-8", "replace")

    def value(self, kind: int, name: str, depth: int = 0) -> None:
        import struct

        if kind in _SCALARS:
            self.read(_SCALARS[kind])
        elif kind == 8:
            self.string(f"value of '{name}'", TEMPLATE_CAP if name.startswith(TEMPLATE_KEY) else None)
        elif kind == 9:
            if depth >= MAX_NESTING:
                raise _Bad(f"'{name}' nests arrays more than {MAX_NESTING} deep")
            item = self.read("<I")
            least = struct.calcsize(_SCALARS[item]) if item in _SCALARS else 8 if item == 8 else 12
            n = self.count(f"items in '{name}'", least)
            if item in _SCALARS:
                self.f.seek(n * least, 1)
            else:
                for _ in range(n):
                    self.value(item, name, depth + 1)
        else:
            raise _Bad(f"'{name}' has value type {kind}, which GGUF does not define")


class _Bad(Exception):
    pass


def check_header(path: Path, spec: str) -> None:
    """Walk the whole header of GGUF ``path`` (version, metadata, tensor infos) with every count and
    length bounded by the file's size, and the chat template by ``TEMPLATE_CAP``, before any parser
    that trusts them reads the file: a truncated or hostile file gets one sentence, not a hang, an
    abort or a misleading error from a later reader."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            h = _Header(f, size)
            if f.read(4) != MAGIC:
                raise _Bad("it does not start with the bytes 'GGUF'")
            version = h.read("<I")
            if version not in (2, 3):
                raise _Bad(f"its version is {version}; ctxlens reads GGUF versions 2 and 3")
            n_tensors = h.read("<Q")
            n_kv = h.count("metadata entries", 13)  # key length (8) + at least 1 byte + type (4)
            if n_tensors * 25 > size:  # name length (8) + 1 byte + dims count (4) + type (4) + offset (8)
                raise _Bad(f"it claims {n_tensors} tensors, more than its {size} bytes can hold")
            for _ in range(n_kv):
                name = h.key()
                h.value(h.read("<I"), name)
            for _ in range(n_tensors):
                h.string("tensor name", 1 << 16)
                dims = h.read("<I")
                if dims > MAX_DIMS:
                    raise _Bad(f"a tensor claims {dims} dimensions")
                f.seek(8 * dims + 4 + 8, 1)
            if f.tell() > size:
                raise _Bad(f"its tensor table runs past the end of the file ({size} bytes)")
    except _Bad as err:
        raise CtxlensError(f"'{spec}' is not a GGUF file ctxlens can read: {err}; check the file (a download "
                           "cut short, or not a model) and point --model at a complete .gguf file.") from None
    except OSError as err:
        raise CtxlensError(f"Cannot read the GGUF file '{spec}' ({err.strerror}); check the path and its "
                           "permissions.") from None
