"""Length-extrapolation transforms the RoPE experiments accept, and the training length.

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Sections 2.2 and 4.2.2, compares a model with and without a length extrapolation method. A
transform is named by a short spec:

    none                no change
    theta:500000        RoPE base change
    linear:4            linear position interpolation (factor 4)
    dynamic:4           dynamic NTK scaling (factor 4, from the training length on)
    yarn:4              YaRN (factor 4 over the training length, with its attention factor)
    selfextend:G:W      SelfExtend, group size G, neighbour window W (no fine-tuning)

A RoPE change (theta, linear, dynamic, yarn) may end in ``@LAYERS`` (``global``, ``sliding``,
``all`` or a layer type): on a model with a RoPE per layer type (Gemma 3) it then changes those
layers; without it, the global layers, as Gemma 3's own long-context extension does
(``ctxlens.lm.analysis.rope``). ``yarn:4@all`` scales sliding and global layers alike.

RoPE changes go through ``LM.set_rope`` (transformers' own rotary code); SelfExtend through
``ctxlens.lm.analysis.selfextend``. ``applied`` undoes the change on exit, so one loaded model serves
every unit of a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, overload

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

KINDS = ("none", "theta", "linear", "dynamic", "yarn", "selfextend")
_HELP = ("write none, theta:BASE, linear:F, dynamic:F, yarn:F (each optionally @global, @sliding or @all) "
         "or selfextend:G:W")


@dataclass(frozen=True)
class Transform:
    kind: str
    value: float | None = None  # theta or scaling factor
    group: int | None = None  # SelfExtend
    window: int | None = None  # SelfExtend
    layers: str | None = None  # RoPE changes: which layer types (None: the model's default, see lm.analysis.rope)


@overload
def _number(spec: str, text: str, integer: Literal[True]) -> int: ...
@overload
def _number(spec: str, text: str, integer: Literal[False] = False) -> float: ...
def _number(spec: str, text: str, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = None
    if value is None or value <= 0:
        kind = "a positive whole number" if integer else "a positive number"
        raise CtxlensError(f"Transform '{spec}' needs {kind} where it has '{text}'; {_HELP}.")
    return value


def parse_transform(spec: str) -> Transform:
    """A transform spec (see the module docstring) -> ``Transform``, or a clear error."""
    body, _, layers = str(spec).strip().partition("@")
    parts = body.split(":")
    kind = parts[0]
    arity = {"none": 0, "theta": 1, "linear": 1, "dynamic": 1, "yarn": 1, "selfextend": 2}
    if kind not in arity:
        from ctxlens.core.errors import suggest

        raise CtxlensError(f"Unknown transform '{spec}'.{suggest(kind, KINDS)} {_HELP[0].upper() + _HELP[1:]}.")
    if len(parts) - 1 != arity[kind]:
        raise CtxlensError(f"Transform '{spec}' has {len(parts) - 1} values but {kind} takes {arity[kind]}; {_HELP}.")
    if "@" in str(spec) and (kind in ("none", "selfextend") or not layers):
        raise CtxlensError(f"Transform '{spec}' names layers where it cannot; only RoPE changes take @global, "
                           "@sliding or @all, e.g. yarn:4@all.")
    if kind == "none":
        return Transform("none")
    if kind == "selfextend":
        return Transform(kind, group=_number(spec, parts[1], True), window=_number(spec, parts[2], True))
    value = _number(spec, parts[1])
    if kind in ("linear", "dynamic", "yarn") and value < 1:
        raise CtxlensError(f"Transform '{spec}' has a factor below 1; extrapolation factors are >= 1, e.g. {kind}:4.")
    return Transform(kind, value=value, layers=layers or None)


def train_length(lm: LM, override: int | None = None) -> int:
    """The length the model was trained at: ``override``, else what its source records
    (``LM.train_length``: the zoo's recipe for ``zoo:NAME``), else ``original_max_position_embeddings``
    of its RoPE, else ``max_position_embeddings``."""
    if override:
        return int(override)
    recorded = getattr(lm, "train_length", None)
    if recorded:
        return int(recorded)
    stated = lm.config_train_length()
    if stated:
        return stated
    raise CtxlensError(f"Cannot tell the training length of '{lm.name}'; pass --train-length N.")


@contextlib.contextmanager
def applied(lm: LM, spec: str, trained: int) -> Iterator[Transform]:
    """Within the block ``lm`` runs under transform ``spec``; ``trained`` is its training length."""
    t = parse_transform(spec)
    if t.kind == "none":
        yield t
        return
    lm.family.require("rope", lm.name)
    if t.kind == "selfextend":
        assert t.group is not None and t.window is not None  # parse_transform gives selfextend both
        with lm.self_extend(t.group, t.window):
            yield t
        return
    assert t.value is not None  # parse_transform gives every RoPE change (theta, linear, dynamic, yarn) a value
    own = lm.rope_snapshot()
    if t.kind == "theta":
        lm.set_rope(theta=t.value, layers=t.layers)
    elif t.kind == "linear":
        lm.set_rope(scaling={"rope_type": "linear", "factor": t.value}, layers=t.layers)
    elif t.kind == "yarn":  # the extended length is factor x training length (as transformers expects)
        lm.set_rope(scaling={"rope_type": "yarn", "factor": t.value, "original_max_position_embeddings": trained},
                    layers=t.layers, max_positions=round(t.value * trained))
    else:  # dynamic NTK rescales from config.max_position_embeddings on: make that the training length
        lm.set_rope(scaling={"rope_type": "dynamic", "factor": t.value}, layers=t.layers, max_positions=trained)
    try:
        yield t
    finally:
        lm.restore_rope(own)
