"""Loading models and capturing exactly the internal states the analyses need.

The names below load on first use, so that the torch-free modules of this package
(``ctxlens.lm.specs``, ``ctxlens.lm.gguf``) import without torch.
"""

from __future__ import annotations

import typing

from ctxlens.core import lazy

_WHERE = {"Capture": "capture", "FAMILIES": "families", "Family": "families", "families": "families",
          "get_family": "families", "from_model": "loading", "load": "loading", "LM": "model",
          "ModelInfo": "info", "read_info": "info"}
__all__ = ["Capture", "FAMILIES", "Family", "LM", "ModelInfo", "families", "from_model", "get_family", "load",
           "read_info"]

if typing.TYPE_CHECKING:
    from ctxlens.lm.capture import Capture
    from ctxlens.lm.families import FAMILIES, Family, families, get_family
    from ctxlens.lm.info import ModelInfo, read_info
    from ctxlens.lm.loading import from_model, load
    from ctxlens.lm.model import LM


def __getattr__(name: str):
    return lazy.attribute(__name__, _WHERE, name, globals())
