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

import dataclasses
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError, suggest


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


def _coerce(name: str, value, typ):
    origin = typing.get_origin(typ)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        return None if value is None else _coerce(name, value, args[0])
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(typ) or (str,)
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            value = [value]
        return [_coerce(name, v, inner) for v in value]
    try:
        if typ is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                return value.lower() in ("true", "1", "yes")
            if not isinstance(value, bool):
                raise ValueError
            return value
        if typ is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if typ is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if typ is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise CtxlensError(f"Option '{name}' must be {getattr(typ, '__name__', typ)}, got {value!r}; fix its value.")


def make_config(cls: type, options: dict):
    """Build ``cls`` from a dict of options, with clear errors for unknown keys and bad types."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in fields:
            raise CtxlensError(
                f"Unknown option {key!r}.{suggest(name, fields)} Known options: {', '.join(sorted(fields))}."
            )
        values[name] = _coerce(key, value, hints[name])
    config = cls(**values)
    check = getattr(config, "validate", None)
    if check:
        check()
    return config


def positive(name: str, values) -> None:
    """Raise unless every value is a positive number."""
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if v is None or v <= 0:
            raise CtxlensError(f"Option '{name}' must be positive, got {v}; pass values above zero.")
