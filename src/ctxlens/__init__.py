"""ctxlens: how much, and how well, does a language model use long context?

``load``, ``LM`` and ``families`` are imported lazily, so readers of result files (the report,
``ctxlens.runner.read_rows``) never import torch. ``zoo:NAME`` and ``ref:NAME`` specs resolve
without importing ``ctxlens.zoo`` first (``ctxlens.lm.specs.ENTRY_POINTS``).
"""

from typing import Any

from ctxlens.core.errors import CtxlensError

__version__ = "0.1.0"
__all__ = ["CtxlensError", "LM", "families", "load", "__version__"]


def __getattr__(name: str) -> Any:  # LM (a class), families (a module), load (a function)
    if name in ("LM", "families", "load"):
        import importlib

        # from the defining module: ``ctxlens.lm.families`` is also a submodule's name
        where = {"LM": "model", "families": "families", "load": "loading"}[name]
        return getattr(importlib.import_module(f"ctxlens.lm.{where}"), name)
    raise AttributeError(f"module 'ctxlens' has no attribute {name!r}")
