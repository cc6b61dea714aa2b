"""Planning one model's suite (``ctxlens profile``): the throughput probe's share of the budget and its
re-timings (at L, at ``CALIBRATE`` tokens, the cost per (query, key) pair), the machine's load, a
planned part as the record keeps it (``part_record``), and the plan printed before any part runs
(``print_plan``, with what each card line needs to decide: ``profile.power``)."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING

import ctxlens.profile.budget as fitting
import ctxlens.profile.power as power
import ctxlens.profile.rounds as rounds
from ctxlens.core.progress import duration
from ctxlens.core.terminal import printable
from ctxlens.profile.record import model_info
from ctxlens.profile.suite import PARTS
from ctxlens.profile.types import ModelState, Options, PartRecord, Status

if TYPE_CHECKING:
    from ctxlens.lm.model import LM
    from ctxlens.probes.throughput import Throughput

REPORT_SECONDS = 0.05  # share of the budget kept for the report
PROBE_SHARE, PROBE_MIN, PROBE_MAX = 0.02, 3.0, 20.0  # the throughput probe: 2% of the budget, 3-20 s
CALIBRATE = 512  # tokens of the forward that re-times a probe that stopped shorter


def pairs_to_run(state: ModelState) -> bool:
    """Whether a part not yet run (planned, or left out and so able to come back) computes (query, key) pairs."""
    pairs = {p.name for p in PARTS if p.pairs}
    return any(p["name"] in pairs and p["status"] in ("planned", "left out") for p in state["parts"])


def time_pairs(lm: LM, state: ModelState) -> None:
    """Add the probe's cost per (query, key) pair (``probes.throughput.pair_cost``) to a recorded
    throughput that lacks it, and say so in ``adjustments``."""
    from ctxlens.probes.throughput import pair_cost

    state["throughput"]["pair"] = cost = pair_cost(lm)
    state.setdefault("adjustments", []).append(
        f"the recorded probe predates the cost per (query, key) pair: timed now, {cost * 1e3:.3g} ms per pair")


def at_length(lm: LM, speed: Throughput, length: int, allowed: float) -> tuple[Throughput, str] | None:
    """(``speed`` re-fitted to one forward of ``length`` tokens, timed; a note saying so) when the probe
    stopped short of ``length`` and that forward should take at most ``allowed`` seconds; else None.
    The short probe extrapolates the per-token cost linearly, which a long input's memory traffic
    outgrows (Gemma-3-270M on 2 CPU cores: the probe to 2155 tokens planned loss-vs-length at L = 8192
    at 4 min; it took 11)."""
    predicted = speed.prefill_seconds(length)
    if length <= speed.at or predicted > allowed:
        return None
    took = timed_forward(lm, length)
    note = (f"probe re-timed at L = {length}: one forward took {took:.1f} s where the probe to {speed.at} tokens "
            f"predicted {predicted:.1f} s; planned with the pace at L")
    return speed.through(length, took), note


def timed_forward(lm: LM, n: int) -> float:
    """Seconds of one forward of ``n`` random token ids (seeded) through ``lm``."""
    import torch

    ids = torch.randint(0, lm.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))  # [1, n]
    began = time.perf_counter()
    with torch.inference_mode():
        lm.final_hidden(ids)
    return time.perf_counter() - began


def calibrated(lm: LM, speed: Throughput) -> Throughput:
    """The probe's pace re-timed on one forward of ``CALIBRATE`` tokens when the probe stopped at
    fewer (on a busy machine it may stop at 32, where the cost of a forward, not of its tokens,
    sets the pace and every longer input would be estimated far too slow)."""
    n = min(CALIBRATE, lm.info.max_positions or CALIBRATE)
    if speed.at >= n:
        return speed
    took = timed_forward(lm, n)
    return dataclasses.replace(speed, prefill=n / took, at=n, seconds=speed.seconds + took)


def load_average() -> list[float] | None:
    """The machine's 1, 5 and 15-minute load averages (None where the system has none): timings
    on a shared machine are read with them."""

    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def part_record(p: fitting.Planned, status: Status) -> PartRecord:
    rec: PartRecord = {"name": p.name, "experiment": p.experiment, "options": p.options,
                       "model_options": p.model_options, "units": p.units, "tokens": p.tokens,
                       "planned_s": round(p.seconds, 1), "estimate_s": round(p.estimate, 1), "notes": p.notes,
                       "status": status}
    if p.name in rounds.SEQUENTIAL_PARTS:
        rec["sequential"] = True
    return rec


def print_plan(spec: str, state: ModelState, seconds: float) -> None:
    from ctxlens.probes.throughput import Throughput

    info = model_info(state["info"])
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


def _sizes(options: Options) -> str:
    show = {k: len(v) if isinstance(v, list) else v for k, v in options.items() if k in SIZE_KEYS}
    return " ".join(f"{k.removeprefix('n_')}={v}" for k, v in show.items())
