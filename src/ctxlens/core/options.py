"""Options: strict coercion of values from the CLI, YAML or Python into a typed config dataclass.

Shared by experiments (``ctxlens.experiments``) and the probe layer's option groups
(``ctxlens.probes``), so every option is checked and worded alike. A field's type says what it
accepts: ``int``, ``float``, ``str``, ``bool``, ``list[...]``, ``X | None``, ``Literal[...]`` for
a fixed set of choices, and ``Annotated[type, Check]`` for a plain range check
(``PositiveInt``, ``Fraction``, ... below). A value that does not fit raises one sentence naming
the option, the value and what is allowed; a config's ``validate()`` is left with the checks
that relate several fields.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any

from ctxlens.core.errors import CtxlensError, clip, suggest


@dataclasses.dataclass(frozen=True)
class Check:
    """A plain check on one option, carried by ``Annotated[type, Check(...)]``: ``allows(value)``
    or the option is rejected as "must be ``what``"."""

    what: str
    allows: Callable[[typing.Any], bool]


def at_least(low: float) -> Check:
    """A finite number >= ``low``."""
    return Check(f"at least {low:g}", lambda v: low <= v < math.inf)


def _number(x: float) -> str:
    """A bound as one reads it: a whole number whole, with thousands separators from 10,000 (1024, 100,000,
    4,194,304: not 4.1943e+06)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if not float(x).is_integer() or abs(x) >= 1e18:
        return f"{x:g}"
    return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> Check:
    """A number in [low, high]; ``open_low`` / ``open_high`` leave that end out: (low, high]."""
    left, right = "(" if open_low else "[", ")" if open_high else "]"
    return Check(f"in {left}{_number(low)}, {_number(high)}{right}",
                 lambda v: (low < v if open_low else low <= v) and (v < high if open_high else v <= high))


# Range checks refuse nan and inf: no option takes them.
Positive = Check("positive", lambda v: 0 < v < math.inf)
NonNegative = Check("0 or more", lambda v: 0 <= v < math.inf)
Finite = Check("a finite number", lambda v: math.isfinite(v))
NonEmpty = Check("a non-empty list", lambda v: len(v) > 0)

PositiveInt = Annotated[int, Positive]
NonNegativeInt = Annotated[int, NonNegative]  # typically 0 means "all" or "off"
PositiveFloat = Annotated[float, Positive]
NonNegativeFloat = Annotated[float, NonNegative]
Fraction = Annotated[float, between(0, 1)]  # a fraction in [0, 1]
PositiveFraction = Annotated[float, between(0, 1, open_low=True)]  # in (0, 1]
Percent = Annotated[float, between(0, 100)]  # a percentage in [0, 100]
MAX_COUNT = 100_000  # samples, draws: a plan of more units would not fit in memory before any work
Count = Annotated[int, between(1, MAX_COUNT)]  # how many samples / draws / windows / bins
MAX_TOKENS = 1 << 22  # tokens of one part of a sequence (a period, a stride): beyond any model's context
Tokens = Annotated[int, between(1, MAX_TOKENS)]  # a span of tokens that is built in memory
NonNegativeTokens = Annotated[int, between(0, MAX_TOKENS)]
NonNegativeCount = Annotated[int, between(0, MAX_COUNT)]  # a count where 0 means "all" or "none"
MAX_STEPS = 10**8  # training steps, epochs, evaluations: more than any run finishes, a bound on a typo's 10^12
Steps = Annotated[int, between(1, MAX_STEPS)]
NonNegativeSteps = Annotated[int, between(0, MAX_STEPS)]
MAX_WIDTH = 1 << 16  # the width of a model a procedure trains, principal components kept
Width = Annotated[int, between(1, MAX_WIDTH)]
MAX_THREADS = 4096  # torch CPU threads
Threads = Annotated[int, between(1, MAX_THREADS)]
MAX_SEED = 2**63 - 1  # what torch.manual_seed takes; non-negative, as numpy's generators require
Seed = Annotated[int, between(0, MAX_SEED)]
MAX_LAYERS = 4096  # a layer index, negative from the end: beyond any model's depth
Layer = Annotated[int, between(-MAX_LAYERS, MAX_LAYERS)]
MAX_DEVICES = 1024  # GPUs a model is split over
Devices = Annotated[int, between(1, MAX_DEVICES)]
MAX_BITS = 1024  # bits of a sparse-parity sample (its input width)
Bits = Annotated[int, between(1, MAX_BITS)]


def _coerce(name: str, value: Any, typ: Any) -> Any:
    origin = typing.get_origin(typ)
    if origin is Annotated:
        inner, *checks = typing.get_args(typ)
        value = _coerce(name, value, inner)
        for check in checks:
            if isinstance(check, Check) and value is not None and not check.allows(value):
                raise _bad(name, value, check.what)
        return value
    if origin is typing.Literal:
        return _choice(name, value, typing.get_args(typ))
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
    return _scalar(name, value, typ)


def _scalar(name: str, value: Any, typ: Any) -> Any:
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
            _ascii_number(value)
            return int(value)
        if typ is float:
            if isinstance(value, bool):
                raise ValueError
            _ascii_number(value)
            return float(value)
        if typ is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError, OverflowError):
        pass
    else:
        return value
    raise _bad(name, value, getattr(typ, "__name__", str(typ)))


def _ascii_number(value: object) -> None:
    """Python's int() and float() read any script's digits ('١٢٨' is 128); options take ASCII only."""
    if isinstance(value, str) and not value.strip().isascii():
        raise ValueError


def _choice(name: str, value: Any, choices: tuple) -> Any:
    """``value`` if it is one of ``choices`` (a ``Literal``'s), else the error naming them all."""
    try:
        value = _scalar(name, value, type(choices[0]))
    except CtxlensError:
        pass
    if value in choices:
        return value
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(value, names, n=1, cutoff=0.5) if isinstance(value, str) else []
    fix = f"did you mean '{close[0]}'?" if close else "fix its value."
    raise CtxlensError(f"Option '{name}' must be one of {', '.join(names)}, got {clip(value)}; {fix}")


def _bad(name: str, value: object, what: str) -> CtxlensError:
    return CtxlensError(f"Option '{name}' must be {what}, got {clip(value)}; fix its value.")


def make_config(cls: type, options: dict) -> Any:
    """Build ``cls`` from a dict of options, with clear errors for unknown keys and bad values."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls, include_extras=True)
    values = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in fields:
            raise CtxlensError(
                f"Unknown option {clip(key)}.{suggest(name, fields)} Known options: {', '.join(sorted(fields))}."
            )
        values[name] = _coerce(key, value, hints[name])
        for item in values[name] if isinstance(values[name], list) else [values[name]]:
            if isinstance(item, float) and not math.isfinite(item):  # no option takes nan or inf: no JSON holds them
                raise _bad(key, item, "a finite number")
    config = cls(**values)
    check = getattr(config, "validate", None)
    if check:
        check()
    return config


def positive(name: str, values: Any) -> None:
    """Raise unless every value is a positive number."""
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if v is None or v <= 0:
            raise _bad(name, v, "positive")


def option(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING) -> Any:
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


Layers = list[Layer] | None
"""A layer-selection option: None (or an empty list, what ``--layers ''`` gives) for every layer
the analysis reads (every block, or every attention layer for q/k analyses), else layer
indices, negatives counting from the end (-1: the last layer). ``LM.layer_indices`` resolves
it to sorted absolute indices: a Config field reads ``layers: Layers = None``."""
