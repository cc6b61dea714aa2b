"""What a resume of ``ctxlens profile`` does to the record before it runs on: the time of parts a killed
run of the command was inside recovered from their committed units (``recover``), parts named in
``--redo`` planned again at the recorded size (``redo``), and earlier run directories moved aside to
``.superseded`` (``supersede``), never deleted."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import ctxlens.profile.budget as fitting
from ctxlens.core import files
from ctxlens.core.env import source_digest
from ctxlens.core.errors import CtxlensError
from ctxlens.core.progress import duration
from ctxlens.core.terminal import printable
from ctxlens.lm.info import ModelInfo
from ctxlens.profile.planning import part_record
from ctxlens.profile.record import model_info
from ctxlens.profile.suite import PARTS, Part, Size
from ctxlens.profile.types import ModelState, Options, PartRecord

RECOVER_MAX = 7 * 24 * 3600.0  # seconds: a part's recovered time is never more than a week


def committed_seconds(run_dir: Path) -> list[float]:
    """The measured seconds of each unit committed in ``run_dir`` ([] when it holds no run)."""
    from ctxlens.runner.store import unit_seconds

    if not run_dir.is_dir() or run_dir.is_symlink():
        return []
    try:
        return unit_seconds(run_dir)
    except (CtxlensError, OSError):
        return []


def recover(state: ModelState, where: Path) -> None:
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
        done = committed_seconds(where / part["name"])
        start = before if isinstance(before, int) and not isinstance(before, bool) and before >= 0 else len(done)
        lost = round(min(sum(done[start:]), RECOVER_MAX), 1)
        part["spent_s"] = round(part.get("spent_s", 0) + lost, 1)
        state["spent_s"] = round(state.get("spent_s", 0.0) + lost, 1)
        state.setdefault("adjustments", []).append(
            f"{part['name']}: an earlier run of the command ended inside it; {duration(lost)} of its time "
            "recovered from its committed units' measured times")


SUPERSEDED = ".superseded"  # DIR/<model>/.superseded/<part>-<k>: a redone part's earlier run (readers skip dot folders)


def redo(spec: str, state: ModelState, names: tuple[str, ...], where: Path) -> None:
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
    from ctxlens.probes.throughput import Throughput

    info = model_info(state["info"])
    speed = Throughput(**state["throughput"])
    code = source_digest()
    size = Size.of(state["size"])
    for name in names:
        if name in state["skipped"]:
            raise CtxlensError(f"{spec} cannot run the {name} part ({state['skipped'][name]}); leave it out of --redo.")
        rec = next((p for p in state["parts"] if p["name"] == name), None)
        part = next(p for p in PARTS if p.name == name)
        at = ran_at(part, size, info, (rec.get("options") if rec else None) or {})
        plan = fitting.plan_part(part, at, info, speed)
        if rec is not None and rec.get("redo") and rec["options"] == plan.options and rec.get("code") == code:
            continue  # redone already by this code with these options: finished, or left by a kill to resume
        k = int((rec.get("redo") if rec else None) or 0) + 1
        was = ("not planned" if rec is None else f"{rec.get('status', 'not planned')}"
               + (f", {duration(rec['spent_s'])}" if rec.get("spent_s") else ""))
        moved = supersede(where / name, where / SUPERSEDED, name)
        redone: PartRecord = {**part_record(plan, "planned"), "redo": k, "code": code, "spent_s": 0.0}
        if rec is None:
            state["parts"].append(redone)
            state["parts"].sort(key=lambda p: [q.name for q in PARTS].index(p["name"].split("+")[0]))
        else:  # the part's record replaced in its place (the first of its name: the one ``rec`` is)
            state["parts"][state["parts"].index(rec)] = redone
        state["left_out"].pop(name, None)
        note = (f"{name} redone with the suite's current design at the recorded size (L = {size.length}, scale "
                f"{at.scale:.2f}{', the part as it ran' if at.scale != size.scale else ''}), beyond the budget; "
                f"before: {was}"
                + (f", its run directory moved to {moved.relative_to(where).as_posix()}" if moved else ""))
        state["adjustments"].append(note)
        print(f"  {printable(note)}", flush=True)


def ran_at(part: Part, size: Size, info: ModelInfo, recorded: Options) -> Size:
    """``size`` at the scale the part ran at: a refit after the first plan may have scaled a part up or down
    (``profile.budget.refit``), and only its options record that, so a redo reads as many items as the run
    it replaces. The smallest scale in [0, 1] at which each of the part's recorded counts (``n_*`` options)
    is reached, found by bisection (counts grow with the scale); ``size`` itself when the record holds no
    count or the counts are not reached at scale 1."""
    counts = {k: v for k, v in recorded.items() if k.startswith("n_") and type(v) is int}
    at = lambda scale: dataclasses.replace(size, scale=scale).options(part, info)  # noqa: E731
    reached = lambda scale: all((at(scale).get(k) or 0) >= v for k, v in counts.items())  # noqa: E731
    if not counts or all(at(size.scale).get(k) == v for k, v in counts.items()) or not reached(1.0):
        return size
    low, high = 0.0, 1.0
    for _ in range(fitting.STEPS):
        mid = (low + high) / 2
        low, high = (low, mid) if reached(mid) else (mid, high)
    return dataclasses.replace(size, scale=high)


def supersede(run_dir: Path, keep: Path, name: str) -> Path | None:
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
