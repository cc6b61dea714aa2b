"""Running one model's planned parts (``ctxlens profile``): each an ordinary run directory through the
runner, the rest refitted to the time left after each (``profile.pacing``), then rounds of the needle
grid and of the loss part's windows while their lines are undecided (``profile.rounds``), the record
written after every step so a kill loses at most the part in flight."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import ctxlens.profile.pacing as pacing
import ctxlens.profile.record as records
import ctxlens.profile.rounds as rounds
from ctxlens.core import files
from ctxlens.core.progress import duration
from ctxlens.core.terminal import printable
from ctxlens.profile.context import ProfileContext
from ctxlens.profile.planning import REPORT_SECONDS, load_average
from ctxlens.profile.record import write
from ctxlens.profile.resume import SUPERSEDED, committed_seconds, recover, supersede
from ctxlens.profile.types import ModelState, PartRecord

if TYPE_CHECKING:
    from ctxlens.lm.model import LM
    from ctxlens.probes.throughput import Throughput


def run_parts(ctx: ProfileContext, spec: str, lm: LM, state: ModelState, started: float, speed: Throughput) -> int:
    """Run the planned parts of ``spec`` (loaded: ``lm``) in turn, each refitting the rest to the time
    left, then rounds of the needle grid while a needle line is undecided and time is left
    (``profile.rounds``); the number of parts that failed."""
    out, record, seconds, clock = ctx.out, ctx.record, ctx.seconds, ctx.clock
    info = records.model_info(state["info"])
    where = out / state["label"]
    recover(state, where)
    deadline = started + seconds * (1 - REPORT_SECONDS) - sum(p.get("spent_s", 0) for p in state["parts"])
    mark = started  # state["spent_s"] grows after each part, so a kill loses at most the part in flight
    failed = 0
    ran: set[str] = set()
    while True:
        paces = pacing.paces(state)  # of the parts run so far, in this run of the command and earlier ones
        if any(est > 0 for est, _ in paces.values()):  # after each part, and at a resume: rescale what is left
            pacing.recalibrate(state, where, pacing.ratios(paces), deadline - clock(), info, speed)
            write(out, record)
        part = next((p for p in state["parts"] if p["status"] in ("planned", "failed") and p["name"] not in ran), None)
        if part is None:  # the needle grid's next round while a needle line is undecided (``profile.rounds``)
            left = max(deadline - clock(), started + ctx.decide - clock())
            part = rounds.next_round(spec, state, rounds.grid_rows(where, state), left)
            if part is not None and deadline - clock() < left:
                state["adjustments"].append(f"{part['name']}: run beyond the budget under --decide "
                                            f"{ctx.decide / 60:g} (for the undecided needle lines)")
            write(out, record)
        if part is None:  # more windows for the loss part while its gain line is undecided (``profile.rounds``)
            part = windows_round(spec, state, where, max(deadline - clock(), started + ctx.decide - clock()))
            write(out, record)
        if part is None:
            break
        ran.add(part["name"])
        files.inside(where / part["name"], out, "a part's run")  # a planted link would send the run elsewhere
        t0 = clock()
        part["running_since"] = time.time()  # a kill leaves it: the next run recovers the part's time (recover)
        part["units_before"] = len(committed_seconds(where / part["name"]))  # the units whose time is counted already
        part["provenance"] = (state.get("provenance") or {}).copy()  # what this part measures with
        write(out, record)
        try:
            planned = {k: v for k, v in (part.get("model_options") or {}).items() if k in records.PART_MODEL_OPTIONS}
            ctx.runner(part["experiment"], [spec], where / part["name"], part["options"],
                       {**ctx.model_options, **planned}, progress=ctx.progress, announce=False, loaded={spec: lm},
                       meta={"profile_length": state["size"]["length"],
                             **({"sequential": True, "looks": int(part.get("looks") or 1)}
                                if part.get("sequential") else {})})
            part.update({"status": "done", "error": None})
        except Exception as err:  # noqa: BLE001 - one part's failure must not end the profile; printed, recorded
            part.update({"status": "failed", "error": f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"})
            failed += 1
        spent = clock() - t0
        part.pop("running_since", None)
        part.pop("units_before", None)
        part["spent_s"] = round(part.get("spent_s", 0) + spent, 1)
        state["spent_s"], mark = round(state.get("spent_s", 0.0) + clock() - mark, 1), clock()
        write(out, record)
        print(f"[{len(ran):>2}] {part['name']:<20} {duration(spent):>7} (planned {duration(part['planned_s'])})"
              + (f"  FAILED: {part['error']}" if part["status"] == "failed" else ""), flush=True)
    state["spent_s"] = round(state.get("spent_s", 0.0) + clock() - mark, 1)  # over every run of the command
    state["load_average_after"] = load_average()
    write(out, record)
    return failed


def windows_round(spec: str, state: ModelState, where: Path, left: float) -> PartRecord | None:
    """The loss part planned again with more windows (``rounds.next_windows``), its earlier run moved to
    ``.superseded`` (its rows are the new run's first windows), or None."""
    got = rounds.next_windows(spec, state, where, left)
    if got is None:
        return None
    rec, n = got
    have, looks = int(rec["options"]["n_samples"]), int(rec.get("looks") or 1) + 1
    moved = supersede(where / rec["name"], where / SUPERSEDED, rec["name"])
    planned = round(rounds.last_run_seconds(rec) * n / have, 1)
    rec.update({"options": {**rec["options"], "n_samples": n}, "status": "planned", "looks": looks,
                "planned_s": planned, "round_from_s": float(rec["spent_s"]),
                "estimate_s": planned, "tokens": int(rec.get("tokens") or 0) * n // have})
    note = (f"{rec['name']}: round {looks - 1}, {n} windows (had {have}) while the gain line is undecided (its "
            f"anytime-valid sign test); about {duration(planned)}" + (f"; the earlier run moved to "
                                                                    f"{moved.relative_to(where).as_posix()}"
                                                                    if moved else ""))
    state["adjustments"].append(note)
    print(f"  {printable(note)}", flush=True)
    return rec
