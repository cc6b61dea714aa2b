"""The ``TypedDict``s of ``profile.json`` (``ctxlens.profile.types``) state what its declaration
(``ctxlens.core.schema.PROFILE``) declares (issue 46: typed boundaries): both are walked together,
and at every level they name the same keys, the same required keys, the same nesting (a ``Shape`` is a
``TypedDict``, a ``ListOf`` a ``list``, a ``MapOf`` a ``dict`` of names) and kinds that agree (a whole
number is an ``int``, a number a ``float``, true/false a ``bool``, text a ``str``, the statuses a
``Literal`` of them). A key added to one and not the other, or of another kind, fails here."""

from __future__ import annotations

import types
import typing

import pytest

from ctxlens.core import schema
from ctxlens.profile import types as records

SAMPLES: dict[type, list[object]] = {bool: [True, False], int: [1, 2, 128], float: [0.5, 1.5, 0.25],
                                     str: ["a", "ab", "planned", ""]}


def _without_none(tp: object) -> tuple[object, bool]:
    """(``tp`` without ``None``, whether it allowed ``None``)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(rest) == 1, f"{tp}: one kind or None"
        return rest[0], len(rest) < len(typing.get_args(tp))
    return tp, False


def _scalar(kind: schema.Kind, tp: object, at: str) -> None:
    """A declared scalar ``kind`` and the type ``tp`` agree: it accepts what ``tp`` holds and nothing of another."""
    origin = typing.get_origin(tp)
    if origin is list:
        assert kind.test([]) and not kind.test({}), f"{at}: declared {kind.expected}, typed {tp}"
    elif origin is dict:
        assert kind.test({}) and not kind.test([]), f"{at}: declared {kind.expected}, typed {tp}"
    elif origin is typing.Literal:
        values = typing.get_args(tp)
        assert all(kind.test(v) for v in values) and not kind.test("none of them"), f"{at}: {kind.expected}, {tp}"
    else:
        assert tp in SAMPLES, f"{at}: typed {tp}, not a kind the schema declares"
        assert any(kind.test(v) for v in SAMPLES[tp]), f"{at}: declared {kind.expected}, typed {tp}"
        others = [v for t, vs in SAMPLES.items() if t is not tp and not (tp is float and t is int) for v in vs]
        wrong = [v for v in others if kind.test(v)]
        assert not wrong, f"{at}: declared {kind.expected} (accepts {wrong!r}), typed {tp}"


def _walk(spec: schema.Spec, tp: object, at: str, extra: dict[str, schema.Spec] | None = None) -> list[str]:
    """Check ``spec`` against ``tp`` below ``at``; the paths of the shapes walked."""
    tp, _ = _without_none(tp)
    if isinstance(spec, schema.OrNull):
        return _walk(spec.spec, tp, at)
    if isinstance(spec, schema.Shape):
        assert isinstance(tp, type) and typing.is_typeddict(tp), f"{at}: declared a shape, typed {tp}"
        fields = {**spec.fields, **(extra or {})}
        typed = set(tp.__required_keys__) | set(tp.__optional_keys__)
        assert typed == set(fields), (f"{at or 'the record'} ({tp.__name__}): only declared "
                                      f"{sorted(set(fields) - typed)}, only typed {sorted(typed - set(fields))}")
        assert tp.__required_keys__ == frozenset(spec.required), (
            f"{at or 'the record'} ({tp.__name__}): declared required {sorted(spec.required)}, typed required "
            f"{sorted(tp.__required_keys__)}")
        hints = typing.get_type_hints(tp)
        walked = [at]
        for key, field in fields.items():
            nullable = _without_none(hints[key])[1]
            assert not (nullable and key in spec.required), f"{at}.{key}: required, so never null, typed {hints[key]}"
            walked += _walk(field, hints[key], f"{at}.{key}" if at else key)
        return walked
    if isinstance(spec, schema.ListOf):
        assert typing.get_origin(tp) is list, f"{at}: declared {spec.expected}, typed {tp}"
        return _walk(spec.item, typing.get_args(tp)[0], f"{at}[]")
    if isinstance(spec, schema.MapOf):
        assert typing.get_origin(tp) is dict and typing.get_args(tp)[0] is str, f"{at}: {spec.expected}, typed {tp}"
        return _walk(spec.value, typing.get_args(tp)[1], f"{at}[name]")
    assert isinstance(spec, schema.Kind), f"{at}: a spec this test does not know: {spec!r}"
    _scalar(spec, tp, at)
    return []


def test_the_record_types_name_the_declared_keys_at_every_level():
    walked = _walk(schema.PROFILE.shape, records.ProfileRecord, "", extra={schema.VERSION_KEY: schema.WHOLE})
    assert set(walked) == {"", "models[name]", "models[name].info", "models[name].throughput", "models[name].size",
                           "models[name].parts[]", "models[name].parts[].provenance", "models[name].provenance"}


def test_the_walk_finds_a_key_only_one_side_names():
    class Part(records.PartRequired, total=False):  # PartRecord with one key misspelled
        spent: float

    with pytest.raises(AssertionError, match=r"only declared \[.*'spent_s'.*\], only typed \['spent'\]"):
        _walk(schema.PART, Part, "part")
    with pytest.raises(AssertionError, match="declared a whole number"):
        _walk(schema.Shape({"units": schema.WHOLE}), typing.TypedDict("Units", {"units": float}, total=False), "x")
    with pytest.raises(AssertionError, match="declared required"):
        _walk(schema.Shape({"units": schema.WHOLE}, required=("units",)),
              typing.TypedDict("Units", {"units": int}, total=False), "x")
