"""Options: strict coercion of values from the CLI, YAML or Python into a typed config dataclass.

Shared by experiments (``ctxlens.experiments``) and the probe layer's option groups
(``ctxlens.probes``), so every option is checked and worded alike.
"""

from __future__ import annotations

import dataclasses
import types
import typing

from ctxlens.core.errors import CtxlensError, suggest


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


def option(default=dataclasses.MISSING, help: str = "", *, factory=dataclasses.MISSING):
    """A config field with its help text: ``n_samples: int = option(8, "windows per length")``.

    A mutable default (a list) is given as ``factory``: ``option(factory=lambda: [512], help=...)``.
    ``ctxlens run EXPERIMENT --help`` and the README's option tables read the text back with
    ``option_help``."""
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def option_help(cls: type) -> dict[str, str]:
    """Field name -> help text of a config dataclass ('' where a field has none)."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


Layers = list[int] | None
"""A layer-selection option: None (or an empty list, what ``--layers ''`` gives) for every layer
the analysis reads (every block, or every attention layer for q/k analyses), else layer
indices, negatives counting from the end (-1: the last layer). ``LM.layer_indices`` resolves
it to sorted absolute indices: a Config field reads ``layers: Layers = None``."""
