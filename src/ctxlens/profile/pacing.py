"""Pacing a profile against its budget: how the parts run so far compare with their estimates (``paces``,
``ratios``, per kind: parts that generate answers, parts that only run forwards), the time reserved
for the needle rounds and its release once the grid decides (``reserve``), and the refit of the parts
not started to the time left (``recalibrate``), each change said in the record's ``adjustments``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import ctxlens.profile.budget as fitting
import ctxlens.profile.rounds as rounds
from ctxlens.core.progress import duration
from ctxlens.profile.planning import part_record
from ctxlens.profile.suite import PARTS, Size
from ctxlens.profile.types import ModelState

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.probes.throughput import Throughput

RATIO = (0.25, 4.0)  # the spent / planned ratio that rescales the rest is clamped to this range


def generates(experiment: str) -> bool:
    return next(p.generates for p in PARTS if p.experiment == experiment)


def paces(state: ModelState) -> dict[bool, list[float]]:
    """{generates: [estimated, spent] seconds} of the parts run to their end, in this run of the command
    or an earlier one: a part resumed after a kill counts its whole time against its whole estimate
    (a resume that counted only its own share read a part as faster than it was)."""
    paces: dict[bool, list[float]] = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for part in state["parts"]:
        if part["status"] in ("done", "failed") and part.get("spent_s"):
            pace = paces[generates(part["experiment"])]
            pace[0] += part.get("estimate_s", part["planned_s"])  # records before estimate_s: the plan
            pace[1] += part["spent_s"]
    return paces


def ratios(paces: dict[bool, list[float]]) -> dict[bool, float]:
    """Spent / estimated seconds of the parts run so far, per kind (those that generate answers, those
    that only run forwards), clamped to ``RATIO``. A kind not yet run takes the ratio of all parts,
    except that forwards never take a faster one from answers (answers that stop early say nothing
    of a forward's pace); answers take the forwards' either way (their prompts are forwards too)."""
    est, spent = sum(e for e, _ in paces.values()), sum(s for _, s in paces.values())
    clamp = lambda x: min(RATIO[1], max(RATIO[0], x))  # noqa: E731
    every = clamp(spent / est) if est > 0 else 1.0
    unseen = {True: every, False: max(1.0, every)}
    return {kind: clamp(s / e) if e > 0 else unseen[kind] for kind, (e, s) in paces.items()}


def reserve(state: ModelState, where: Path) -> float:
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


def recalibrate(state: ModelState, where: Path, ratios: dict[bool, float], left: float, info: ModelInfo,
                speed: Throughput) -> None:
    """Refit the parts not started (no run directory yet, planned or left out by the budget) to the
    time ``left`` when the parts run so far took ``ratios`` times their estimates (per kind: see
    ``ratios``) and what remains would overrun it (shrink) or leave much of it unused (grow);
    recorded in ``adjustments``."""
    fresh = [p for p in state["parts"] if p["status"] in ("planned", "left out") and not (where / p["name"]).exists()
             and not p.get("redo")]  # a redo runs as planned, beyond the budget (redo)
    left -= reserve(state, where)  # the needle rounds' time, kept for them while their lines are open
    need = sum(p.get("estimate_s", p["planned_s"]) * ratios[generates(p["experiment"])]
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
            rec.update(part_record(kept[rec["name"]], "planned"))
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
