"""``ctxlens profile MODEL [MODEL ...] --budget MINUTES --out DIR``: the context-use profile.

For each model in turn: read what it is (``ctxlens.lm.info``), load it once, probe its prefill and
decode throughput (``ctxlens.probes.throughput``), fit the suite (``ctxlens.profile.suite``) to the
budget (``ctxlens.profile.budget``; MINUTES per model) and print the plan before any forward of
the suite, then run it part by part, each an ordinary run directory ``DIR/<model>/<part>``
through the runner (resumable by unit). After each part the time spent is compared with the
plan; when behind, the parts not started are shrunk (or left out) to what is left, and that is
recorded. ``DIR/profile.json`` holds per model its info, the measured throughput, the budget,
the plan, what was skipped or left out and why, and each part's planned and spent seconds; the
same command again resumes from it (the recorded plan, never a new one). ``redo`` names parts to
bring up to the suite's current design in a resume (``profile.resume.redo``): each is planned again
at the recorded size, its earlier run directory moved to ``DIR/<model>/.superseded/``, and run beyond
the budget, which the record says. ``profile`` returns the
run directories written; the command line then writes their report to ``DIR/report.html``
(``ctxlens.cli``: this layer sits below the report).

This module checks the input, holds the lock and plans each model; the steps live beside it:
``planning`` (the probe's re-timings, a part's record, the printed plan), ``parts`` (running the
parts and the rounds), ``pacing`` (spent against planned, the needle rounds' reserve, the refit),
``resume`` (recovered time, ``--redo``, superseded runs), ``provenance`` (what the parts measure
with), ``record`` (``profile.json`` read, checked and written; its shapes as ``TypedDict``s in ``types``),
``context`` (what every step gets).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import ctxlens.profile.budget as fitting
import ctxlens.profile.record as records
import ctxlens.profile.resume as resume
from ctxlens.core import files
from ctxlens.core.errors import CtxlensError
from ctxlens.core.terminal import printable
from ctxlens.core.texts import NATURAL
from ctxlens.profile.context import ProfileContext
from ctxlens.profile.parts import run_parts
from ctxlens.profile.planning import (
    PROBE_MAX,
    PROBE_MIN,
    PROBE_SHARE,
    REPORT_SECONDS,
    at_length,
    calibrated,
    load_average,
    pairs_to_run,
    part_record,
    print_plan,
    time_pairs,
)
from ctxlens.profile.provenance import provenance, same_setup
from ctxlens.profile.record import read_record, write
from ctxlens.profile.suite import MIN_TASK_LENGTH as MIN_LENGTH  # a shorter L cannot hold a RULER prompt
from ctxlens.profile.suite import PARTS, skip_reason
from ctxlens.profile.types import InfoRecord, ModelState, ProfileRecord, ThroughputRecord

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM
    from ctxlens.lm.specs import Resolved
    from ctxlens.probes.throughput import Throughput
    from ctxlens.runner.lock import WriterLock

LOCK = ".ctxlens-profile-lock"  # one profile writes an --out at a time (ctxlens.runner.lock)
MAX_MINUTES = 7 * 24 * 60  # --budget: a week per model; larger values overflowed the top-up's sample count
MAX_LENGTH = 1 << 22  # --length: 4M tokens, beyond any model's context


def label(spec: str) -> str:
    """A folder name for model ``spec``: 'ref:smollm2-135m' -> 'ref-smollm2-135m', a path -> its last part."""
    name = Path(spec).name if ("/" in spec or "\\" in spec) and Path(spec).exists() else spec
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"


def check(models: list[str], minutes: float, out: Path, length: int | None = None, redo: tuple[str, ...] = (),
          source: str = NATURAL) -> ProfileRecord | None:
    """Raise for bad input before anything is written; returns the record already in ``out`` (None: none)."""
    if not models:
        raise CtxlensError("No model given; pass one or more model specs, e.g. `ctxlens profile ref:smollm2-135m`.")
    if not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or not 0 < minutes <= MAX_MINUTES:
        raise CtxlensError(f"--budget must be a positive number of minutes, at most {MAX_MINUTES} (a week), got "
                           f"{minutes}; e.g. --budget 10.")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int)
                               or not MIN_LENGTH <= length <= MAX_LENGTH):
        raise CtxlensError(f"--length must be a whole number of tokens of at least {MIN_LENGTH} and at most "
                           f"{MAX_LENGTH}, got {length}; e.g. --length 1024, or leave it out to let the budget "
                           "choose L.")
    if out.exists() and not out.is_dir():
        raise CtxlensError(f"--out {out} is a file, not a directory; pass a directory for the profile.")
    old = read_record(out)
    if old and old.get("budget_minutes") != minutes:
        raise CtxlensError(f"{out} holds a profile planned for a {old.get('budget_minutes')}-minute budget; run with "
                           f"--budget {old.get('budget_minutes')} to resume it, or use a new --out directory.")
    if old and old.get("length") != length:
        how = "without --length" if old.get("length") is None else f"with --length {old['length']}"
        raise CtxlensError(f"{out} holds a profile planned {how}; run {how} to resume it, or use a new --out "
                           "directory.")
    if old and old.get("source", "builtin") != source:  # a record without one predates the natural text
        given = old.get("source", "builtin")
        raise CtxlensError(f"{out} holds a profile whose parts read the text source {printable(given)!r}; run with "
                           f"--source {printable(given)} to resume it, or use a new --out directory.")
    _check_redo(models, redo, out, old)
    return old


def _check_redo(models: list[str], redo: tuple[str, ...], out: Path, old: ProfileRecord | None) -> None:
    """``redo``: names of the suite's parts, for models whose plan ``out`` already holds."""
    from ctxlens.core.errors import unknown

    for name in redo:
        if name not in {p.name for p in PARTS}:
            raise unknown("profile part", name, [p.name for p in PARTS])
    for spec in models if redo else []:
        if "parts" not in ((old["models"] if old else {}).get(spec) or {}):
            raise CtxlensError(f"--redo brings parts of an existing profile up to date, but {out} holds no plan for "
                               f"{spec}; run the profile without --redo first.")


@dataclasses.dataclass
class Profiled:
    """What a profile wrote: its run directories (``dirs``), the record, and the parts that failed."""

    dirs: list[Path]
    record: ProfileRecord
    failed: int



def profile(models: list[str], minutes: float = 10.0, out: str | Path = "ctxlens-profile",
            model_options: dict[str, Any] | None = None, progress: bool = True, *, length: int | None = None,
            redo: tuple[str, ...] = (), clock: Callable[[], float] = time.monotonic,
            probe: Callable[[LM], Throughput] | None = None, runner: Callable[..., object] | None = None,
            plan_only: bool = False,
            decide: float = 0.0, source: str = NATURAL) -> Profiled:
    """Profile each model of ``models`` in ``minutes`` each into ``out`` (see the module docstring).
    ``length``: L for every model (default: the training length, capped by the budget); ``redo``:
    parts to bring up to the suite's current design in a resume (``redo``).
    ``clock``, ``probe`` (lm -> Throughput) and ``runner`` (``ctxlens.runner.execute.run``) are
    replaceable for tests. ``plan_only``: print each model's plan (after its throughput probe, before
    any part: no suite forward) and write nothing; a resume prints the recorded plan. ``decide``:
    minutes per model that the needle grid's rounds (``profile.rounds``) may run beyond the budget in
    this run of the command, while a needle line is undecided (recorded in ``adjustments``). ``source``:
    the text every part that reads text reads (default the natural text, ``ctxlens.core.texts``), opened
    (and, for the natural text, its digests checked) before anything is written."""
    from ctxlens.lm.info import read_info
    from ctxlens.lm.specs import resolved
    from ctxlens.runner.execute import run
    from ctxlens.runner.model_options import LOAD_KEYS, parse_model_options

    out, models, redo = Path(out), list(dict.fromkeys(models)), tuple(dict.fromkeys(redo))
    check(models, minutes, out, length, redo, source)
    _check_source(source)
    if isinstance(decide, bool) or not isinstance(decide, int | float) or not 0 <= decide <= MAX_MINUTES:
        raise CtxlensError(f"--decide must be a number of minutes from 0 to {MAX_MINUTES}, got {decide}; e.g. "
                           "--decide 30.")
    model_options = parse_model_options(model_options or {})
    if not progress:  # as ``run`` does, before a zoo model built on first use writes transformers' bar
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    read = {k: model_options[k] for k in ("trust_remote_code", "revision") if k in model_options}
    where = {spec: resolved(spec) for spec in models}  # each spec resolved once: an unknown model fails here
    infos = {spec: read_info(where[spec], **read) for spec in models}  # nothing written yet
    if plan_only:
        old = check(models, minutes, out, length, redo, source)
        record: ProfileRecord = {"budget_minutes": minutes, "source": source,
                                 "models": dict(old["models"]) if old else {}}
        ctx = ProfileContext(out, record, minutes * 60, length, redo, model_options,
                             {k: model_options[k] for k in LOAD_KEYS if k in model_options}, progress, clock, probe,
                             runner or run, plan_only=True, source=source)
        return _profile_all(ctx, models, infos, where)
    held = _lock(out)
    try:
        old = check(models, minutes, out, length, redo, source)  # the record read under the lock
        known = dict(old["models"]) if old else {}
        record = ({"budget_minutes": minutes, "source": source, "length": length, "models": known}
                  if length is not None else {"budget_minutes": minutes, "source": source, "models": known})
        load_options = {k: model_options[k] for k in LOAD_KEYS if k in model_options}
        ctx = ProfileContext(out, record, minutes * 60, length, redo, model_options, load_options, progress, clock,
                             probe, runner or run, decide=60.0 * decide, source=source)
        return _profile_all(ctx, models, infos, where)
    finally:
        held.release()


def _check_source(source: str) -> None:
    """The text source opens (a missing or altered natural-text package, a missing file: one sentence)."""
    from ctxlens.data.sources import open_source

    if not isinstance(source, str) or not source.strip() or len(source) > records.MAX_SOURCE:
        raise CtxlensError("--source must name a text source, e.g. --source sotu (the default) or --source builtin.")
    if not source.strip().startswith("hf:"):  # a hub dataset is checked by its part: that needs the network
        open_source(source)


def _lock(out: Path) -> WriterLock:
    """The profile's own lock on ``out`` (a second profile into it is refused, naming the first's process)."""
    from ctxlens.runner.lock import WriterLock

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, out, "create") or err from None
    held = WriterLock(out, name=LOCK)
    held.acquire()
    return held


def _profile_all(ctx: ProfileContext, models: list[str], infos: dict[str, ModelInfo],
                 where: dict[str, Resolved]) -> Profiled:
    """``profile`` once its input is checked and its lock held: each model in turn (``where`` it resolved,
    once, in ``profile``), its state in ``ctx.record``."""
    record = ctx.record
    labels = _labels(models, record)
    failed = 0
    for spec in models:
        # lm.info's as_dict is an untyped dict: the keys schema.MODEL_INFO declares (tests/test_schema.py)
        state = record["models"].get(spec) or {"label": labels[spec], "info": cast(InfoRecord, infos[spec].as_dict())}
        record["models"][spec] = state
        failed += _profile_one(ctx, spec, state, where[spec])
    return Profiled(run_dirs(ctx.out, record), record, failed)


def _labels(models: list[str], record: ProfileRecord) -> dict[str, str]:
    taken = {m: s["label"] for m, s in record["models"].items()}
    for spec in models:
        if spec not in taken:
            base, n = label(spec), 2
            name = base
            while name in taken.values():
                name, n = f"{base}-{n}", n + 1
            taken[spec] = name
    return taken


def _profile_one(ctx: ProfileContext, spec: str, state: ModelState, where: Resolved) -> int:
    """Load ``spec`` (resolved to ``where``: the loaded LM carries it down to the runner, so no part
    resolves it again), plan its suite into ``state`` (its part of the record) unless a resume holds one,
    redo ``ctx.redo``, print the plan and run it; the number of parts that failed."""
    from ctxlens.lm.loading import load
    from ctxlens.probes.throughput import Throughput, measure

    clock, seconds, probe = ctx.clock, ctx.seconds, ctx.probe
    started = clock()
    lm = load(where, **ctx.load_options)
    measured_with = provenance(lm)
    if "parts" in state:  # a resume: the parts still to run must measure what the recorded ones measured
        same_setup(spec, state.get("provenance"), measured_with, bool(ctx.redo))
    state["provenance"] = measured_with
    if "parts" not in state:  # a new plan; a resume keeps the recorded one
        skipped = {p.name: why for p in PARTS if (why := skip_reason(p, lm.family.supports, lm.tokenizer is not None))}
        pairs = any(p.pairs and p.name not in skipped for p in PARTS)  # a part that times (query, key) pairs runs
        allowed = min(PROBE_MAX, max(PROBE_MIN, PROBE_SHARE * seconds))
        speed = probe(lm) if probe else calibrated(lm, measure(lm, allowed, pairs=pairs))
        info = lm.info
        keep = [p for p in PARTS if p.name not in skipped]
        available = seconds * (1 - REPORT_SECONDS) - (clock() - started)
        fit = fitting.fit(keep, info, speed, max(available, 0.0), lm.tokenizer is not None, ctx.length, ctx.source)
        if probe is None and (timed := at_length(lm, speed, fit.size.length, PROBE_SHARE * seconds)):
            speed, note = timed  # the pace at L itself: plan again with it
            available = seconds * (1 - REPORT_SECONDS) - (clock() - started)
            fit = fitting.fit(keep, info, speed, max(available, 0.0), lm.tokenizer is not None, ctx.length,
                              ctx.source)
            fit.notes.insert(0, note)
        state.update({"throughput": cast(ThroughputRecord, dataclasses.asdict(speed)),  # its fields: the record's
                      "setup_s": round(clock() - started, 1), "load_average": load_average(),
                      "size": fit.size.as_dict(), "notes": fit.notes, "skipped": skipped,
                      "left_out": dict(fit.left_out), "adjustments": [],
                      "parts": [part_record(p, "planned") for p in fit.parts]
                      + [{"name": n, "experiment": n, "options": {}, "status": "left out", "planned_s": 0.0}
                         for n in fit.left_out]})
        state["parts"].sort(key=lambda p: [q.name for q in PARTS].index(p["name"]))
        if not ctx.plan_only:
            write(ctx.out, ctx.record)
    elif "pair" not in state["throughput"] and pairs_to_run(state) and not ctx.plan_only:
        time_pairs(lm, state)  # a plan recorded before the probe timed pairs: the refits need their cost
        write(ctx.out, ctx.record)
    if ctx.redo and not ctx.plan_only:
        resume.redo(spec, state, ctx.redo, ctx.out / state["label"])
        write(ctx.out, ctx.record)
    print_plan(spec, state, seconds)
    if ctx.plan_only:
        return 0
    return run_parts(ctx, spec, lm, state, started, Throughput(**state["throughput"]))


def run_dirs(out: Path, record: ProfileRecord) -> list[Path]:
    """The run directories of every model's parts that hold results."""
    from ctxlens.results import is_run_dir

    dirs = [out / s["label"] / p["name"] for s in record["models"].values() for p in s.get("parts", [])]
    return [d for d in dirs if d.is_dir() and is_run_dir(d)]
