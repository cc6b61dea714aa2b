"""Package attributes that load on first use, so a package's torch-free modules import without torch.

``ctxlens.lm`` and ``ctxlens.data`` name their public objects in a ``{name: submodule}`` table and
hand ``__getattr__`` to ``attribute``: ``ctxlens.lm.load`` imports ``ctxlens.lm.loading`` only when
it is first asked for.
"""

from __future__ import annotations

import importlib
from typing import Any


def attribute(package: str, where: dict[str, str], name: str, namespace: dict) -> Any:
    """``package.name``: the object ``where[name]`` defines (cached in ``namespace``), else the
    submodule ``package.name``, else AttributeError."""
    if name not in where:  # a submodule, as ``package.NAME`` after ``import package``
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module '{package}' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
    namespace[name] = value
    return value
