"""``profile.json`` read back as data, never as authority (issue 32 part 1).

A profile directory may come from someone else. What its record says is checked against the shape
``ctxlens profile`` writes before any of it is used: every key known, every value of its type;
labels and part names plain names (no path separator, no ``..``, not absolute), each part one of
the suite's (``ctxlens.profile.suite.PARTS``) or a top-up of ``niah-depth``; experiment options
among those the suite plans, their strings plain names; and of model options only
``allow_extrapolation`` (which the plan sets for lengths beyond the model's positions). Remote
code, revisions, devices and paths come from the command line alone. Anything else is one
sentence naming the file and the key. The fields and their kinds are declared with every other file
ctxlens writes, in ``ctxlens.core.schema`` (``PROFILE``: a record without a version is version 1, the
committed reference profiles); this module adds the checks that read the suite (``_suite``). What a
checked record is, key for key, mypy knows from ``ctxlens.profile.types`` (``ProfileRecord``).

``read_record`` reads the record of an --out directory through that check; ``write`` replaces it
atomically, its version first (``ctxlens profile`` writes it after every step).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ctxlens.core import files, schema, yaml_safe
from ctxlens.core.errors import CtxlensError, clip
from ctxlens.core.schema import Mismatch
from ctxlens.lm.info import ModelInfo
from ctxlens.profile.suite import PARTS
from ctxlens.profile.types import InfoRecord, PartRecord, ProfileRecord

RECORD = "profile.json"  # the record of an --out directory
TOP_UP = re.compile(r"niah-depth\+[0-9]{1,6}")
STATUSES = ("planned", "done", "failed", "left out")
PART_MODEL_OPTIONS = {"allow_extrapolation": bool}  # all a plan may add to the command line's model options
OPTION_KEYS = frozenset({
    "task", "tasks", "lengths", "depths", "n_samples", "batch_size", "max_new_tokens", "n_scored", "n_sequences",
    "boundaries", "n_queries", "top_k", "fractions", "n_draws", "n_passkey", "detect_length", "detect_samples",
    "kde_samples", "batch_tokens", "seed", "n_boot", "band", "scoring", "control", "source"})
PROVENANCE = schema.PROVENANCE  # profile.provenance
MAX_SOURCE = schema.MAX_SOURCE  # characters of a text source's spec (a path, or a name such as sotu)


def validate(record: object, path: Path) -> ProfileRecord:
    """``record`` (parsed ``path``) if it has the shape ``ctxlens profile`` writes, else the
    CtxlensError naming what is wrong (see the module docstring)."""
    # the boundary: the JSON read from the file is a ProfileRecord once the declaration (which the
    # TypedDicts state key for key: tests/test_profile_record_types.py) and _suite have checked it
    checked: ProfileRecord = schema.validate("profile.json", record, path, refine=_suite)
    return checked


def _suite(record: ProfileRecord) -> None:
    """What the declaration (``ctxlens.core.schema.PROFILE``) cannot say: each model's plan holds what
    the command reads back, and its parts, options and counts are the suite's."""
    for spec, state in record["models"].items():
        at = schema.child("models", spec)
        if "parts" in state and not {"throughput", "size"} <= set(state):
            raise Mismatch(at, "a plan (parts) without its throughput or size", "parts only beside both")
        if "parts" in state:  # a plan: every key the command reads back is there
            missing = [k for k in ("notes", "skipped", "left_out", "adjustments")
                       if not isinstance(state.get(k), (list, dict))]
            if missing:
                raise Mismatch(at, "a plan without " + ", ".join(missing), "notes, skipped, left_out and adjustments")
        size = state.get("size")
        _counts((size.get("counts") if size else None) or {}, schema.child(schema.child(at, "size"), "counts"))
        for i, part in enumerate(state.get("parts") or []):
            _part(part, schema.child(schema.child(at, "parts"), i))


def _counts(counts: dict[str, dict[str, int]], at: str) -> None:
    """The power plan's counts: {suite part: {planned option: n}} (n's range is declared)."""
    suite = {p.name for p in PARTS}
    for part, given in counts.items():
        if part not in suite:
            raise Mismatch(at, f"counts of {clip(part, 40)}", "counts of the profile suite's parts")
        for option in given:
            if option not in OPTION_KEYS:
                raise Mismatch(schema.child(at, part), f"the count {clip(option, 40)}", "counts of planned options")


def _part(part: PartRecord, at: str) -> None:
    """One planned part: a suite part (or a top-up), plain options, no model option but the plan's."""
    if part["status"] != "left out":
        for key in ("units", "tokens", "notes"):
            if part.get(key) is None:
                raise Mismatch(schema.child(at, key), "nothing", f"its {key} (the part is {part['status']})")
    suite = {p.name: p.experiment for p in PARTS}
    expected = "niah-depth" if TOP_UP.fullmatch(part["name"]) else suite.get(part["name"])
    if expected is None or part["experiment"] != expected:
        raise Mismatch(at, f"{clip(part['name'], 40)} of experiment {clip(part['experiment'], 40)}",
                       "a part of the profile's suite")
    for key, value in (part.get("model_options") or {}).items():
        if key not in PART_MODEL_OPTIONS or not isinstance(value, PART_MODEL_OPTIONS[key]):
            raise Mismatch(schema.child(at, "model_options"), f"the model option {clip(key, 40)}",
                           "no model option but allow_extrapolation: true or false (the command line sets the others)")
    for key, value in part["options"].items():
        where = schema.child(schema.child(at, "options"), key)
        if key not in OPTION_KEYS:
            raise Mismatch(where, "an option the profile never plans", ", ".join(sorted(OPTION_KEYS)))
        if key == "source":
            schema.SOURCE.check(value, where)
        elif key.startswith("n_"):
            schema.WHOLE.only(lambda v: v >= 1, "a whole number of at least 1").check(value, where)
        for item in value if isinstance(value, list) else [value]:
            if key != "source":
                _OPTION_VALUE.check(item, where)


_OPTION_VALUE = schema.Kind("a plain name, a number or true/false",
                            lambda v: (schema.PLAIN.test(v) if isinstance(v, str) else schema.NUMBER.test(v)
                                       or isinstance(v, bool)))


def model_info(info: InfoRecord) -> ModelInfo:
    """The ``ModelInfo`` a record's ``info`` holds (``as_dict`` adds ``zoo``, which its ``origin`` says)."""
    fields: dict[str, Any] = {k: v for k, v in info.items() if k != "zoo"}  # of the kinds schema.MODEL_INFO checked
    return ModelInfo(**fields)


def read_record(out: Path) -> ProfileRecord | None:
    """The record in ``out`` (None when none), checked as data (``ctxlens.profile.record``)."""
    path = out / RECORD
    try:
        text = files.read_text(path)
    except UnicodeDecodeError:
        text = "\ufffd"
    if not text:
        return None
    try:
        return validate(yaml_safe.load_json(text, str(path)), path)
    except CtxlensError as err:
        if "profile record" in str(err):
            raise
        raise CtxlensError(f"{path} is not a profile record this version can read; use a new --out "
                           "directory.") from None


def write(out: Path, record: ProfileRecord) -> None:
    """``profile.json`` replaced atomically, its temporary file created exclusively (``files.atomic_write``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, out, "create") or err from None
    files.atomic_write(out / RECORD, json.dumps(schema.stamp(RECORD, record), indent=1, default=str, allow_nan=False)
                       + "\n")
