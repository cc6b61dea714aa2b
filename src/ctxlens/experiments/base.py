"""What an experiment is: a typed config, a plan of keyed units, and the rows of one unit.

An experiment is one module with a ``Config`` dataclass and two functions:

- ``plan(config) -> list[dict]``: the coordinates of every unit (length, sample, layer, ...),
  known without loading a model, so a finished run resumes without loading anything;
- ``run(lm, config, unit, cache) -> list[dict]``: the measurements of one unit, one row each.
  ``cache`` is a dict kept per model, for inputs shared by units (tokenised windows, ...).
  ``lm`` is the loaded ``LM``, or the model spec string when ``loads_model`` is False.

The runner adds ``model`` and ``experiment`` to every unit and every row.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.core.options import make_config, positive  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class Experiment:
    name: str
    Config: type
    plan: Callable[[typing.Any], list[dict]]
    run: Callable[..., list[dict]]
    needs: tuple[str, ...] = ()  # analyses the model's family must support
    doc: str = ""
    # Experiments that build and train their own small models (sparse parity) take the model
    # spec as a string instead of a loaded LM; ``default_models`` is used when --model is absent.
    loads_model: bool = True
    default_models: tuple[str, ...] = ()
