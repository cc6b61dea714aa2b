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
bring up to the suite's current design in a resume (``_redo``): each is planned again at the
recorded size, its earlier run directory moved to ``DIR/<model>/.superseded/``, and run beyond the
budget, which the record says. ``profile`` returns the
run directories written; the command line then writes their report to ``DIR/report.html``
(``ctxlens.cli``: this layer sits below the report).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import ctxlens.profile.budget as fitting
import ctxlens.profile.power as power
import ctxlens.profile.record as records
import ctxlens.profile.rounds as rounds
from ctxlens.core import files, yaml_safe
from ctxlens.core.env import source_digest
from ctxlens.core.errors import CtxlensError
from ctxlens.core.progress import duration
from ctxlens.core.terminal import printable
from ctxlens.core.texts import NATURAL
from ctxlens.profile.suite import MIN_TASK_LENGTH as MIN_LENGTH  # a shorter L cannot hold a RULER prompt
from ctxlens.profile.suite import PARTS, Size, skip_reason

RECORD = "profile.json"
LOCK = ".ctxlens-profile-lock"  # one profile writes an --out at a time (ctxlens.runner.lock)
MAX_MINUTES = 7 * 24 * 60  # --budget: a week per model; larger values overflowed the top-up's sample count
MAX_LENGTH = 1 << 22  # --length: 4M tokens, beyond any model's context
REPORT_SECONDS = 0.05  # share of the budget kept for the report
PROBE_SHARE, PROBE_MIN, PROBE_MAX = 0.02, 3.0, 20.0  # the throughput probe: 2% of the budget, 3-20 s
CALIBRATE = 512  # tokens of the forward that re-times a probe that stopped shorter
RATIO = (0.25, 4.0)  # the spent / planned ratio that rescales the rest is clamped to this range


def label(spec: str) -> str:
    """A folder name for model ``spec``: 'ref:smollm2-135m' -> 'ref-smollm2-135m', a path -> its last part."""
    name = Path(spec).name if ("/" in spec or "\\" in spec) and Path(spec).exists() else spec
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"


def check(models: list[str], minutes: float, out: Path, length: int | None = None, redo: tuple[str, ...] = (),
          source: str = NATURAL) -> dict:
    """Raise for bad input before anything is written; returns the record already in ``out``."""
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


def _check_redo(models: list[str], redo: tuple[str, ...], out: Path, old: dict) -> None:
    """``redo``: names of the suite's parts, for models whose plan ``out`` already holds."""
    from ctxlens.core.errors import unknown

    for name in redo:
        if name not in {p.name for p in PARTS}:
            raise unknown("profile part", name, [p.name for p in PARTS])
    for spec in models if redo else []:
        if "parts" not in ((old.get("models") or {}).get(spec) or {}):
            raise CtxlensError(f"--redo brings parts of an existing profile up to date, but {out} holds no plan for "
                               f"{spec}; run the profile without --redo first.")


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
        return records.validate(yaml_safe.load_json(text, str(path)), path)
    except CtxlensError as err:
        if "profile record" in str(err):
            raise
        raise CtxlensError(f"{path} is not a profile record this version can read; use a new --out "
                           "directory.") from None


@dataclasses.dataclass
class Profiled:
    """What a profile wrote: its run directories (``dirs``), the record, and the parts that failed."""

    dirs: list[Path]
    record: dict
    failed: int


@dataclasses.dataclass(frozen=True)
class ProfileContext:
    """What ``profile`` hands down, unchanged, to the steps that profile each of its models."""

    #: where it writes: the --out directory, and the record its profile.json holds (updated in place)
    out: Path
    record: dict
    #: what the plan is made for: each model's budget in seconds, L (None: the budget chooses), the parts to redo
    seconds: float
    length: int | None
    redo: tuple[str, ...]
    #: every model option (parsed), and those passed to ``load``
    model_options: dict
    load_options: dict
    #: whether the runner shows its progress bars and meters
    progress: bool
    #: replaceable for tests: the clock, the probe (lm -> Throughput; None: measured), the runner (``run``)
    clock: Callable[[], float]
    probe: Callable | None
    runner: Callable
    #: print the plan and stop before any part runs, writing nothing (``--plan``)
    plan_only: bool = False
    #: seconds per model the needle rounds may run beyond the budget in this run of the command (``--decide``)
    decide: float = 0.0
    #: the text source of every part that reads text (``--source``)
    source: str = NATURAL


def profile(models: list[str], minutes: float = 10.0, out: str | Path = "ctxlens-profile",
            model_options: dict | None = None, progress: bool = True, *, length: int | None = None,
            redo: tuple[str, ...] = (), clock=time.monotonic, probe=None, runner=None, plan_only: bool = False,
            decide: float = 0.0, source: str = NATURAL) -> Profiled:
    """Profile each model of ``models`` in ``minutes`` each into ``out`` (see the module docstring).
    ``length``: L for every model (default: the training length, capped by the budget); ``redo``:
    parts to bring up to the suite's current design in a resume (``_redo``).
    ``clock``, ``probe`` (lm -> Throughput) and ``runner`` (``ctxlens.runner.execute.run``) are
    replaceable for tests. ``plan_only``: print each model's plan (after its throughput probe, before
    any part: no suite forward) and write nothing; a resume prints the recorded plan. ``decide``:
    minutes per model that the needle grid's rounds (``profile.rounds``) may run beyond the budget in
    this run of the command, while a needle line is undecided (recorded in ``adjustments``). ``source``:
    the text every part that reads text reads (default the natural text, ``ctxlens.core.texts``), opened
    (and, for the natural text, its digests checked) before anything is written."""
    from ctxlens.lm.info import read_info
    from ctxlens.runner.execute import LOAD_KEYS, parse_model_options, run

    out, models, redo = Path(out), list(dict.fromkeys(models)), tuple(dict.fromkeys(redo))
    check(models, minutes, out, length, redo, source)
    _check_source(source)
    if isinstance(decide, bool) or not isinstance(decide, int | float) or not 0 <= decide <= MAX_MINUTES:
        raise CtxlensError(f"--decide must be a number of minutes from 0 to {MAX_MINUTES}, got {decide}; e.g. "
                           "--decide 30.")
    model_options = parse_model_options(model_options or {})
    read = {k: model_options[k] for k in ("trust_remote_code", "revision") if k in model_options}
    infos = {spec: read_info(spec, **read) for spec in models}  # an unknown model fails here, nothing written
    if plan_only:
        old = check(models, minutes, out, length, redo, source)
        record = {"budget_minutes": minutes, "source": source, "models": dict(old.get("models") or {})}
        ctx = ProfileContext(out, record, minutes * 60, length, redo, model_options,
                             {k: model_options[k] for k in LOAD_KEYS if k in model_options}, progress, clock, probe,
                             runner or run, plan_only=True, source=source)
        return _profile_all(ctx, models, infos)
    held = _lock(out)
    try:
        old = check(models, minutes, out, length, redo, source)  # the record read under the lock
        record = {"budget_minutes": minutes, "source": source, **({"length": length} if length is not None else {}),
                  "models": dict(old.get("models") or {})}
        load_options = {k: model_options[k] for k in LOAD_KEYS if k in model_options}
        ctx = ProfileContext(out, record, minutes * 60, length, redo, model_options, load_options, progress, clock,
                             probe, runner or run, decide=60.0 * decide, source=source)
        return _profile_all(ctx, models, infos)
    finally:
        held.release()


def _check_source(source: str) -> None:
    """The text source opens (a missing or altered natural-text package, a missing file: one sentence)."""
    from ctxlens.data.sources import open_source

    if not isinstance(source, str) or not source.strip() or len(source) > records.MAX_SOURCE:
        raise CtxlensError("--source must name a text source, e.g. --source sotu (the default) or --source builtin.")
    if not source.strip().startswith("hf:"):  # a hub dataset is checked by its part: that needs the network
        open_source(source)


def _lock(out: Path):
    """The profile's own lock on ``out`` (a second profile into it is refused, naming the first's process)."""
    from ctxlens.runner.lock import WriterLock

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, out, "create") or err from None
    held = WriterLock(out, name=LOCK)
    held.acquire()
    return held


def _profile_all(ctx: ProfileContext, models: list[str], infos: dict) -> Profiled:
    """``profile`` once its input is checked and its lock held: each model in turn, its state in ``ctx.record``."""
    record = ctx.record
    labels = _labels(models, record)
    failed = 0
    for spec in models:
        state = record["models"].get(spec) or {"label": labels[spec], "info": infos[spec].as_dict()}
        record["models"][spec] = state
        failed += _profile_one(ctx, spec, state)
    return Profiled(run_dirs(ctx.out, record), record, failed)


def _labels(models: list[str], record: dict) -> dict[str, str]:
    taken = {m: s["label"] for m, s in record["models"].items()}
    for spec in models:
        if spec not in taken:
            base, n = label(spec), 2
            name = base
            while name in taken.values():
                name, n = f"{base}-{n}", n + 1
            taken[spec] = name
    return taken


def _profile_one(ctx: ProfileContext, spec: str, state: dict) -> int:
    """Load ``spec``, plan its suite into ``state`` (its part of the record) unless a resume holds one,
    redo ``ctx.redo``, print the plan and run it; the number of parts that failed."""
    from ctxlens.lm.loading import load
    from ctxlens.probes.throughput import Throughput, measure

    clock, seconds, probe = ctx.clock, ctx.seconds, ctx.probe
    started = clock()
    lm = load(spec, **ctx.load_options)
    measured_with = provenance(lm)
    if "parts" in state:  # a resume: the parts still to run must measure what the recorded ones measured
        _same_setup(spec, state.get("provenance"), measured_with, bool(ctx.redo))
    state["provenance"] = measured_with
    if "parts" not in state:  # a new plan; a resume keeps the recorded one
        skipped = {p.name: why for p in PARTS if (why := skip_reason(p, lm.family.supports, lm.tokenizer is not None))}
        pairs = any(p.pairs and p.name not in skipped for p in PARTS)  # a part that times (query, key) pairs runs
        allowed = min(PROBE_MAX, max(PROBE_MIN, PROBE_SHARE * seconds))
        speed = probe(lm) if probe else _calibrated(lm, measure(lm, allowed, pairs=pairs))
        info = lm.info
        keep = [p for p in PARTS if p.name not in skipped]
        available = seconds * (1 - REPORT_SECONDS) - (clock() - started)
        fit = fitting.fit(keep, info, speed, max(available, 0.0), lm.tokenizer is not None, ctx.length, ctx.source)
        if probe is None and (timed := _at_length(lm, speed, fit.size.length, PROBE_SHARE * seconds)):
            speed, note = timed  # the pace at L itself: plan again with it
            available = seconds * (1 - REPORT_SECONDS) - (clock() - started)
            fit = fitting.fit(keep, info, speed, max(available, 0.0), lm.tokenizer is not None, ctx.length,
                              ctx.source)
            fit.notes.insert(0, note)
        state.update(throughput=dataclasses.asdict(speed), setup_s=round(clock() - started, 1),
                     load_average=_load(),
                     size=fit.size.as_dict(), notes=fit.notes, skipped=skipped, left_out=dict(fit.left_out),
                     adjustments=[], parts=[_part_record(p, "planned") for p in fit.parts]
                     + [{"name": n, "experiment": n, "options": {}, "status": "left out", "planned_s": 0.0}
                        for n in fit.left_out])
        state["parts"].sort(key=lambda p: [q.name for q in PARTS].index(p["name"]))
        if not ctx.plan_only:
            _write(ctx.out, ctx.record)
    elif "pair" not in state["throughput"] and _pairs_to_run(state) and not ctx.plan_only:
        _time_pairs(lm, state)  # a plan recorded before the probe timed pairs: the refits need their cost
        _write(ctx.out, ctx.record)
    if ctx.redo and not ctx.plan_only:
        _redo(spec, state, ctx.redo, ctx.out / state["label"])
        _write(ctx.out, ctx.record)
    _print_plan(spec, state, seconds)
    if ctx.plan_only:
        return 0
    return _run_parts(ctx, spec, lm, state, started, Throughput(**state["throughput"]))


PROVENANCE = records.PROVENANCE


def provenance(lm) -> dict[str, str | None]:
    """What the parts of a profile measure with: the weights' digest (the GGUF file's own sha256, else
    ctxlens's fingerprint of the directory), the tokenizer's (every rule that turns text into ids and
    frames a chat prompt: ``tasks.tokens.fingerprint``), the dtype, device and attention implementation
    the model runs with, and the transformers and torch versions."""
    import torch
    import transformers

    from ctxlens.tasks.tokens import fingerprint

    weights = (lm.info.weights or {}).get("digest") if getattr(lm, "info", None) is not None else None
    model = getattr(lm, "model", None)
    return {"weights": weights,
            "tokenizer": fingerprint(lm.tokenizer) if getattr(lm, "tokenizer", None) is not None else None,
            "dtype": str(getattr(model, "dtype", None)).removeprefix("torch."),
            "device": str(getattr(model, "device", None)),
            "attention": getattr(getattr(model, "config", None), "_attn_implementation", None),
            "transformers": transformers.__version__, "torch": torch.__version__}


def _same_setup(spec: str, recorded: dict | None, now: dict, redo: bool) -> None:
    """Refuse a resume whose setup differs from the one the recorded parts measured with (``provenance``),
    naming what changed; a record from before provenance was kept is taken as it is. With ``--redo`` the
    parts named run with the new setup and every part keeps the setup it ran with (``part["provenance"]``)."""
    if not recorded:
        return
    changed = [f"{key} {printable(str(recorded.get(key)))} -> {printable(str(now.get(key)))}" for key in PROVENANCE
               if key in recorded and recorded.get(key) != now.get(key)]
    if changed and not redo:
        raise CtxlensError(f"{spec} was profiled with another setup than now ({'; '.join(changed)}); resume with the "
                           "same weights, tokenizer, dtype and device, or re-measure parts with --redo PART, or use a "
                           "new --out directory.")


def _pairs_to_run(state: dict) -> bool:
    """Whether a part not yet run (planned, or left out and so able to come back) computes (query, key) pairs."""
    pairs = {p.name for p in PARTS if p.pairs}
    return any(p["name"] in pairs and p["status"] in ("planned", "left out") for p in state["parts"])


def _time_pairs(lm, state: dict) -> None:
    """Add the probe's cost per (query, key) pair (``probes.throughput.pair_cost``) to a recorded
    throughput that lacks it, and say so in ``adjustments``."""
    from ctxlens.probes.throughput import pair_cost

    state["throughput"]["pair"] = cost = pair_cost(lm)
    state.setdefault("adjustments", []).append(
        f"the recorded probe predates the cost per (query, key) pair: timed now, {cost * 1e3:.3g} ms per pair")


def _at_length(lm, speed, length: int, allowed: float):
    """(``speed`` re-fitted to one forward of ``length`` tokens, timed; a note saying so) when the probe
    stopped short of ``length`` and that forward should take at most ``allowed`` seconds; else None.
    The short probe extrapolates the per-token cost linearly, which a long input's memory traffic
    outgrows (Gemma-3-270M on 2 CPU cores: the probe to 2155 tokens planned loss-vs-length at L = 8192
    at 4 min; it took 11)."""
    predicted = speed.prefill_seconds(length)
    if length <= speed.at or predicted > allowed:
        return None
    took = _timed_forward(lm, length)
    note = (f"probe re-timed at L = {length}: one forward took {took:.1f} s where the probe to {speed.at} tokens "
            f"predicted {predicted:.1f} s; planned with the pace at L")
    return speed.through(length, took), note


def _timed_forward(lm, n: int) -> float:
    """Seconds of one forward of ``n`` random token ids (seeded) through ``lm``."""
    import torch

    ids = torch.randint(0, lm.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))  # [1, n]
    began = time.perf_counter()
    with torch.inference_mode():
        lm.final_hidden(ids)
    return time.perf_counter() - began


def _calibrated(lm, speed):
    """The probe's pace re-timed on one forward of ``CALIBRATE`` tokens when the probe stopped at
    fewer (on a busy machine it may stop at 32, where the cost of a forward, not of its tokens,
    sets the pace and every longer input would be estimated far too slow)."""
    n = min(CALIBRATE, lm.info.max_positions or CALIBRATE)
    if speed.at >= n:
        return speed
    took = _timed_forward(lm, n)
    return dataclasses.replace(speed, prefill=n / took, at=n, seconds=speed.seconds + took)


def _load() -> list[float] | None:
    """The machine's 1, 5 and 15-minute load averages (None where the system has none): timings
    on a shared machine are read with them."""

    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _part_record(p: fitting.Planned, status: str) -> dict:
    return {"name": p.name, "experiment": p.experiment, "options": p.options, "model_options": p.model_options,
            "units": p.units, "tokens": p.tokens, "planned_s": round(p.seconds, 1),
            "estimate_s": round(p.estimate, 1), "notes": p.notes,
            "status": status, **({"sequential": True} if p.name in rounds.SEQUENTIAL_PARTS else {})}


def _run_parts(ctx: ProfileContext, spec: str, lm, state: dict, started: float, speed) -> int:
    """Run the planned parts of ``spec`` (loaded: ``lm``) in turn, each refitting the rest to the time
    left, then rounds of the needle grid while a needle line is undecided and time is left
    (``profile.rounds``); the number of parts that failed."""
    from ctxlens.lm.info import ModelInfo

    out, record, seconds, clock = ctx.out, ctx.record, ctx.seconds, ctx.clock
    info = ModelInfo(**{k: v for k, v in state["info"].items() if k != "zoo"})
    where = out / state["label"]
    _recover(state, where)
    deadline = started + seconds * (1 - REPORT_SECONDS) - sum(p.get("spent_s", 0) for p in state["parts"])
    mark = started  # state["spent_s"] grows after each part, so a kill loses at most the part in flight
    failed = 0
    ran: set[str] = set()
    while True:
        paces = _paces(state)  # of the parts run so far, in this run of the command and earlier ones
        if any(est > 0 for est, _ in paces.values()):  # after each part, and at a resume: rescale what is left
            _recalibrate(state, where, _ratios(paces), deadline - clock(), info, speed)
            _write(out, record)
        part = next((p for p in state["parts"] if p["status"] in ("planned", "failed") and p["name"] not in ran), None)
        if part is None:  # the needle grid's next round while a needle line is undecided (``profile.rounds``)
            left = max(deadline - clock(), started + ctx.decide - clock())
            part = rounds.next_round(spec, state, rounds.grid_rows(where, state), left)
            if part is not None and deadline - clock() < left:
                state["adjustments"].append(f"{part['name']}: run beyond the budget under --decide "
                                            f"{ctx.decide / 60:g} (for the undecided needle lines)")
            _write(out, record)
        if part is None:  # more windows for the loss part while its gain line is undecided (``profile.rounds``)
            part = _windows_round(spec, state, where, max(deadline - clock(), started + ctx.decide - clock()))
            _write(out, record)
        if part is None:
            break
        ran.add(part["name"])
        files.inside(where / part["name"], out, "a part's run")  # a planted link would send the run elsewhere
        t0 = clock()
        part["running_since"] = time.time()  # a kill leaves it: the next run recovers the part's time (_recover)
        part["units_before"] = len(_unit_seconds(where / part["name"]))  # the units whose time is counted already
        part["provenance"] = dict(state.get("provenance") or {})  # what this part measures with
        _write(out, record)
        try:
            planned = {k: v for k, v in (part.get("model_options") or {}).items() if k in records.PART_MODEL_OPTIONS}
            ctx.runner(part["experiment"], [spec], where / part["name"], part["options"],
                       {**ctx.model_options, **planned}, progress=ctx.progress, announce=False, loaded={spec: lm},
                       meta={"profile_length": state["size"]["length"],
                             **({"sequential": True, "looks": int(part.get("looks") or 1)}
                                if part.get("sequential") else {})})
            part.update(status="done", error=None)
        except Exception as err:  # noqa: BLE001 - one part's failure must not end the profile; printed, recorded
            part.update(status="failed", error=f"{type(err).__name__}: {' '.join(str(err).split())[:300]}")
            failed += 1
        spent = clock() - t0
        part.pop("running_since", None)
        part.pop("units_before", None)
        part["spent_s"] = round(part.get("spent_s", 0) + spent, 1)
        state["spent_s"], mark = round(state.get("spent_s", 0.0) + clock() - mark, 1), clock()
        _write(out, record)
        print(f"[{len(ran):>2}] {part['name']:<20} {duration(spent):>7} (planned {duration(part['planned_s'])})"
              + (f"  FAILED: {part['error']}" if part["status"] == "failed" else ""), flush=True)
    state["spent_s"] = round(state.get("spent_s", 0.0) + clock() - mark, 1)  # over every run of the command
    state["load_average_after"] = _load()
    _write(out, record)
    return failed


def _windows_round(spec: str, state: dict, where: Path, left: float) -> dict | None:
    """The loss part planned again with more windows (``rounds.next_windows``), its earlier run moved to
    ``.superseded`` (its rows are the new run's first windows), or None."""
    got = rounds.next_windows(spec, state, where, left)
    if got is None:
        return None
    rec, n = got
    have, looks = int(rec["options"]["n_samples"]), int(rec.get("looks") or 1) + 1
    moved = _supersede(where / rec["name"], where / SUPERSEDED, rec["name"])
    planned = round(float(rec["spent_s"]) * n / have, 1)
    rec.update(options={**rec["options"], "n_samples": n}, status="planned", looks=looks, planned_s=planned,
               estimate_s=planned, tokens=int(rec.get("tokens") or 0) * n // have)
    note = (f"{rec['name']}: round {looks - 1}, {n} windows (had {have}) while the gain line is undecided (its "
            f"anytime-valid sign test); about {duration(planned)}" + (f"; the earlier run moved to "
                                                                    f"{moved.relative_to(where).as_posix()}"
                                                                    if moved else ""))
    state["adjustments"].append(note)
    print(f"  {printable(note)}", flush=True)
    return rec


RECOVER_MAX = 7 * 24 * 3600.0  # seconds: a part's recovered time is never more than a week


def _unit_seconds(run_dir: Path) -> list[float]:
    """The measured seconds of each unit committed in ``run_dir`` ([] when it holds no run)."""
    from ctxlens.runner.store import unit_seconds

    if not run_dir.is_dir() or run_dir.is_symlink():
        return []
    try:
        return unit_seconds(run_dir)
    except (CtxlensError, OSError):
        return []


def _recover(state: dict, where: Path) -> None:
    """Add to each part a killed run of the command left running (``running_since``) the measured time
    of the units that run committed (``units.jsonl``'s ``seconds`` of the units past ``units_before``: a
    lower bound of what it spent, the unit in flight lost), to the part's and the model's ``spent_s``,
    and say so in ``adjustments``. Never file times: a copy of the directory (``cp -r``) gives every
    file the time of the copy."""
    for part in state.get("parts", []):
        since = part.pop("running_since", None)
        before = part.pop("units_before", None)
        if not isinstance(since, int | float) or isinstance(since, bool):
            continue
        done = _unit_seconds(where / part["name"])
        start = before if isinstance(before, int) and not isinstance(before, bool) and before >= 0 else len(done)
        lost = round(min(sum(done[start:]), RECOVER_MAX), 1)
        part["spent_s"] = round(part.get("spent_s", 0) + lost, 1)
        state["spent_s"] = round(state.get("spent_s", 0.0) + lost, 1)
        state.setdefault("adjustments", []).append(
            f"{part['name']}: an earlier run of the command ended inside it; {duration(lost)} of its time "
            "recovered from its committed units' measured times")


SUPERSEDED = ".superseded"  # DIR/<model>/.superseded/<part>-<k>: a redone part's earlier run (readers skip dot folders)


def _redo(spec: str, state: dict, names: tuple[str, ...], where: Path) -> None:
    """Plan each part of ``names`` again at the recorded size (``state["size"]``) with the suite's current
    options, even when they equal the recorded ones (a design change need not change an option: a BOS
    put first by default), unless the part was redone already with these options by this code (the
    package's ``source_digest``, recorded as ``code``): so the same command resumes a redo a kill
    interrupted and does not run a finished redo twice, while a fix to the code since (a design change
    no option shows) is redone when named again; a new --out redoes everything. Its earlier run
    directory, if any, moves to
    ``where/.superseded/<part>-<k>`` (kept, never deleted); its earlier time goes to ``adjustments``; the part
    is marked ``redo`` (the k-th), which keeps the budget's refit from dropping it: a redo runs beyond
    the budget, and the record's times say by how much."""
    from ctxlens.lm.info import ModelInfo
    from ctxlens.probes.throughput import Throughput

    info = ModelInfo(**{k: v for k, v in state["info"].items() if k != "zoo"})
    speed = Throughput(**state["throughput"])
    code = source_digest()
    size = Size.of(state["size"])
    for name in names:
        if name in state["skipped"]:
            raise CtxlensError(f"{spec} cannot run the {name} part ({state['skipped'][name]}); leave it out of --redo.")
        plan = fitting.plan_part(next(p for p in PARTS if p.name == name), size, info, speed)
        rec = next((p for p in state["parts"] if p["name"] == name), None)
        if rec is not None and rec.get("redo") and rec["options"] == plan.options and rec.get("code") == code:
            continue  # redone already by this code with these options: finished, or left by a kill to resume
        if rec is None:
            rec = {"name": name}
            state["parts"].append(rec)
            state["parts"].sort(key=lambda p: [q.name for q in PARTS].index(p["name"].split("+")[0]))
        k = int(rec.get("redo") or 0) + 1
        was = f"{rec.get('status', 'not planned')}" + (f", {duration(rec['spent_s'])}" if rec.get("spent_s") else "")
        moved = _supersede(where / name, where / SUPERSEDED, name)
        rec.clear()
        rec.update(**_part_record(plan, "planned"), redo=k, code=code, spent_s=0.0)
        state["left_out"].pop(name, None)
        note = (f"{name} redone with the suite's current design at the recorded size (L = {size.length}, scale "
                f"{size.scale:.2f}), beyond the budget; before: {was}"
                + (f", its run directory moved to {moved.relative_to(where).as_posix()}" if moved else ""))
        state["adjustments"].append(note)
        print(f"  {printable(note)}", flush=True)


def _supersede(run_dir: Path, keep: Path, name: str) -> Path | None:
    """Move ``run_dir`` (when it exists) to ``keep/<name>-<k>``, the first k free; the new path."""
    files.inside(run_dir, run_dir.parent.parent, "a run")  # the part's directory and the model's: no planted link
    files.inside(keep, keep.parent.parent, "a superseded run")
    if not run_dir.exists():
        return None
    try:
        keep.mkdir(exist_ok=True)
        k = 1
        while (keep / f"{name}-{k}").exists() or (keep / f"{name}-{k}").is_symlink():
            k += 1
        run_dir.rename(keep / f"{name}-{k}")
    except OSError as err:
        raise files.user_error(err, run_dir, "move") or err from None
    return keep / f"{name}-{k}"


def _generates(experiment: str) -> bool:
    return next(p.generates for p in PARTS if p.experiment == experiment)


def _paces(state: dict) -> dict[bool, list[float]]:
    """{generates: [estimated, spent] seconds} of the parts run to their end, in this run of the command
    or an earlier one: a part resumed after a kill counts its whole time against its whole estimate
    (a resume that counted only its own share read a part as faster than it was)."""
    paces: dict[bool, list[float]] = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for part in state["parts"]:
        if part["status"] in ("done", "failed") and part.get("spent_s"):
            pace = paces[_generates(part["experiment"])]
            pace[0] += part.get("estimate_s", part["planned_s"])  # records before estimate_s: the plan
            pace[1] += part["spent_s"]
    return paces


def _ratios(paces: dict[bool, list[float]]) -> dict[bool, float]:
    """Spent / estimated seconds of the parts run so far, per kind (those that generate answers, those
    that only run forwards), clamped to ``RATIO``. A kind not yet run takes the ratio of all parts,
    except that forwards never take a faster one from answers (answers that stop early say nothing
    of a forward's pace); answers take the forwards' either way (their prompts are forwards too)."""
    est, spent = sum(e for e, _ in paces.values()), sum(s for _, s in paces.values())
    clamp = lambda x: min(RATIO[1], max(RATIO[0], x))  # noqa: E731
    every = clamp(spent / est) if est > 0 else 1.0
    unseen = {True: every, False: max(1.0, every)}
    return {kind: clamp(s / e) if e > 0 else unseen[kind] for kind, (e, s) in paces.items()}


def _reserve(state: dict, where: Path) -> float:
    """The seconds the plan reserved for the needle rounds (``Size.reserve``, ``profile.budget``), or 0 once
    the grid has run and left no needle line open: then the reserve is released to the parts not started
    (recorded in ``adjustments``)."""
    reserve = float(state["size"].get("reserve_s") or 0.0)
    grid = next((p for p in state["parts"] if p["name"] == rounds.GRID), None)
    if reserve <= 0 or grid is None or grid.get("status") != "done":
        return reserve
    if rounds.open_lines(rounds.grid_rows(where, state), state["label"], int(state["size"]["length"]),
                         state["info"].get("train_length")):
        return reserve
    state["size"]["reserve_s"] = 0.0
    state["adjustments"].append(f"the needle lines decided on the grid: the {duration(reserve)} reserved for their "
                                "rounds go to the parts not started")
    return 0.0


def _recalibrate(state: dict, where: Path, ratios: dict[bool, float], left: float, info, speed) -> None:
    """Refit the parts not started (no run directory yet, planned or left out by the budget) to the
    time ``left`` when the parts run so far took ``ratios`` times their estimates (per kind: see
    ``_ratios``) and what remains would overrun it (shrink) or leave much of it unused (grow);
    recorded in ``adjustments``."""
    fresh = [p for p in state["parts"] if p["status"] in ("planned", "left out") and not (where / p["name"]).exists()
             and not p.get("redo")]  # a redo runs as planned, beyond the budget (_redo)
    left -= _reserve(state, where)  # the needle rounds' time, kept for them while their lines are open
    need = sum(p.get("estimate_s", p["planned_s"]) * ratios[_generates(p["experiment"])]
               for p in fresh if p["status"] == "planned")
    behind = need > fitting.TARGET * max(left, 0.0)
    ahead = need < 0.6 * left or any(p["status"] == "left out" for p in fresh)  # the refit keeps what fits
    if not fresh or not (behind or ahead):
        return
    size = Size.of(state["size"])
    parts = [p for p in PARTS if p.name in {f["name"] for f in fresh}]
    fit = fitting.refit(parts, size, info, speed, max(left, 0.0), ratios)
    kept = {p.name: p for p in fit.parts}
    before = [(r["name"], r["status"], r["options"]) for r in fresh]
    for rec in fresh:
        if rec["name"] in kept:
            rec.update(_part_record(kept[rec["name"]], "planned"))
            state["left_out"].pop(rec["name"], None)
        else:
            rec["status"] = "left out"
            state["left_out"][rec["name"]] = fit.left_out.get(rec["name"], "the budget cannot afford it") + (
                " (refitted to the time left after earlier parts)")
    if before == [(r["name"], r["status"], r["options"]) for r in fresh]:
        return
    note = (f"{'behind' if behind else 'ahead of'} the plan (parts took x{ratios[True]:.2f} their estimate when "
            f"generating, x{ratios[False]:.2f} when not): the "
            f"{len(fresh)} parts not started refitted to the {duration(left)} left (scale {fit.size.scale:.2f}; "
            f"planned: {', '.join(kept) or 'none'})")
    state["adjustments"].append(note)
    print(f"  {note}", flush=True)


def _print_plan(spec: str, state: dict, seconds: float) -> None:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.probes.throughput import Throughput

    info = ModelInfo(**{k: v for k, v in state["info"].items() if k != "zoo"})
    total = sum(p["planned_s"] for p in state["parts"] if p["status"] != "left out")
    lines = [f"ctxlens profile: {spec} ({info.describe()})",
             f"  throughput: {Throughput(**state['throughput']).describe()}",
             f"  budget: {duration(seconds)} for this model; suite planned at about {duration(total)}, "
             f"L = {state['size']['length']}"]
    lines += [f"  {note}" for note in state["notes"] + state["adjustments"]]
    lines.append(f"  {'part':<20} {'lengths':<34} {'sizes':<38} {'units':>5} {'tokens':>10} {'time':>7}")
    for p in state["parts"]:
        if p["status"] == "left out":
            continue
        lengths = ",".join(map(str, p["options"].get("lengths", [])))
        lines.append(f"  {p['name']:<20} {lengths[:34]:<34} {_sizes(p['options'])[:38]:<38} {p['units']:>5} "
                     f"{p['tokens']:>10,} {duration(p['planned_s']):>7}" + (f"  [{p['status']}]" if p["status"] not in
                                                                           ("planned",) else ""))
        lines += [f"    {note}" for note in p["notes"]]
    if not any(p["status"] != "left out" for p in state["parts"]):
        lines.append("  nothing fits this budget at this machine's pace: raise --budget")
    lines += [f"  skipped {name}: {why}" for name, why in state["skipped"].items()]
    lines += [f"  left out {name}: {why}" for name, why in state["left_out"].items()]
    leftover = max(0.0, seconds * (1 - REPORT_SECONDS) - sum(p.get("spent_s", 0) for p in state["parts"]) - total)
    lines.append("  what each card line needs to decide (80% power at the paper's effect; needle lines run in rounds "
                 "until they decide, their n planned includes what the time left buys):")
    lines += power.table(power.line_needs(state, leftover))
    print("\n".join(printable(line) for line in lines), flush=True)  # notes may come from a resumed record


SIZE_KEYS = ("tasks", "depths", "boundaries", "n_samples", "n_sequences", "n_scored", "n_passkey", "n_draws",
             "n_queries", "detect_samples")


def _sizes(options: dict) -> str:
    show = {k: len(v) if isinstance(v, list) else v for k, v in options.items() if k in SIZE_KEYS}
    return " ".join(f"{k.removeprefix('n_')}={v}" for k, v in show.items())


def _write(out: Path, record: dict) -> None:
    """``profile.json`` replaced atomically, its temporary file created exclusively (``files.atomic_write``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise files.user_error(err, out, "create") or err from None
    files.atomic_write(out / RECORD, json.dumps(record, indent=1, default=str, allow_nan=False) + "\n")


def run_dirs(out: Path, record: dict) -> list[Path]:
    """The run directories of every model's parts that hold results."""
    from ctxlens.results import is_run_dir

    dirs = [out / s["label"] / p["name"] for s in record["models"].values() for p in s.get("parts", [])]
    return [d for d in dirs if d.is_dir() and is_run_dir(d)]
