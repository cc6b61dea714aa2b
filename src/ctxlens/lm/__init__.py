"""Loading models and capturing exactly the internal states the analyses need.

The top-level modules load a model and give it one face: model specs and the files behind them
(``specs``, ``gguf``), the weights' fingerprint (``fingerprint``), the config-only description
(``info``), the family adapters (``families``), the loader (``loading``), device placement
(``placement``), the recording attention function (``attention``), the prompt-prefix cache
(``prefix_cache``) and the ``LM`` facade (``model``). The sub-packages hold the rest, one
concern each:

- ``ctxlens.lm.analysis``: what the experiments compute on a loaded model's internals (captures,
  the q/k scan, token losses, head masks, RoPE reading and editing, SelfExtend);
- ``ctxlens.lm.infer``: the family adapter of a decoder type without a hand-written one, inferred
  from the module tree and checked on the model at load;
- ``ctxlens.lm.coverage``: the independent checks of each analysis on every causal-LM type of
  transformers (``ctxlens models --all``);
- ``ctxlens.lm.tiny``: tiny random-weight configs and models, the fixtures of tests and demos.

The names below load on first use, so that the torch-free modules of this package
(``ctxlens.lm.specs``, ``ctxlens.lm.gguf``) import without torch.
"""

from __future__ import annotations

import typing

from ctxlens.core import lazy

_WHERE = {"Capture": "analysis.capture", "FAMILIES": "families", "Family": "families", "families": "families",
          "get_family": "families", "from_model": "loading", "load": "loading", "LM": "model",
          "ModelInfo": "info", "read_info": "info"}
__all__ = ["Capture", "FAMILIES", "Family", "LM", "ModelInfo", "families", "from_model", "get_family", "load",
           "read_info"]

if typing.TYPE_CHECKING:
    from ctxlens.lm.analysis.capture import Capture
    from ctxlens.lm.families import FAMILIES, Family, families, get_family
    from ctxlens.lm.info import ModelInfo, read_info
    from ctxlens.lm.loading import from_model, load
    from ctxlens.lm.model import LM


def __getattr__(name: str) -> object:
    return lazy.attribute(__name__, _WHERE, name, globals())
