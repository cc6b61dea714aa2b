"""The needle grid in rounds: more haystacks only while a needle line is undecided (issue 43, part 3).

The long-sequence paper's two needle lines (retrieval at L vs 2L, lost in the middle; Section 4,
Tables 2-3) are tested per haystack with anytime-valid tests (``ctxlens.core.sequential``: a
betting martingale whose type-I error holds at any stopping time), so the profile may look after
every round and stop as soon as each line decides: the effect is shown, or shown to be smaller
than the paper's. After the suite's parts, while a needle line is open (``open_lines``) and time
is left, a round ``niah-depth+k`` runs the grid again with a new seed (new haystacks, the same at
every depth and length: they pool with the earlier rounds' as independent items) on only the
lengths and depths the open lines read, sized to what the open lines' planner says they still
need (at most doubling the haystacks so far, at least ``ROUND_MIN``), within the time left at the
pace the grid has run so far. A collapse like 0.86 -> 0.00 decides within a handful of haystacks;
the time a decided line does not use is left to the rest of the budget.
"""

from __future__ import annotations

import math
from pathlib import Path

import ctxlens.profile.budget as fitting
from ctxlens.findings.card import Line, undecided
from ctxlens.findings.lines.needle import middle_dip, retrieval_2l
from ctxlens.profile.suite import NEEDLE_DEPTHS
from ctxlens.profile.types import ModelState, PartRecord

GRID = "niah-depth"  # the part whose rounds these are; a round is GRID+k with seed base + k
WINDOWS = "loss-vs-length"  # the continuous part grown in rounds: its gain line tests sequentially (sign test)
SEQUENTIAL_PARTS = (WINDOWS,)  # parts declared sequential when planned (``meta.sequential`` in their runs)
MAX_WINDOWS = 1024  # the windows' rounds stop here: the line names what it would still need
ROUND_MIN = 2  # haystacks per round at least
MAX_HAYSTACKS = 200  # beyond this no round is planned: the line names what it would still need
ENDS = [0.0, 50.0, 100.0]  # the depths the lost-in-the-middle line reads


def grid_rows(where: Path, state: ModelState) -> list[dict]:
    """The committed rows of the grid and its rounds that ran (``where`` is the model's folder)."""
    from ctxlens.results import read_run

    rows: list[dict] = []
    for part in state["parts"]:
        if part["name"].split("+")[0] == GRID and part.get("status") == "done" and (where / part["name"]).is_dir():
            rows += read_run(where / part["name"]).rows
    return rows


def open_lines(rows: list[dict], model: str, L: int, train: int | None) -> dict[str, Line]:
    """{card line key: its line} of the needle lines the rows leave undecided; retrieval at L vs 2L
    only where it is a test of the paper (L at least the training length)."""
    lines = [middle_dip(rows, model, L)]
    if train is not None and L >= train:
        lines.append(retrieval_2l(rows, model, L, train))
    return {line.key: line for line in lines if undecided(line)}


def next_windows(spec: str, state: ModelState, where: Path, left: float) -> tuple[PartRecord, int] | None:
    """(the ``WINDOWS`` part's record, its new window count) while its gain line is undecided
    (``findings.lines.loss.usable_context`` with the sequential sign test), or None: the part not run,
    not declared sequential when planned, decided, at ``MAX_WINDOWS``, or no time in ``left`` seconds to
    run it again with at least ``ROUND_MIN`` more windows at its pace so far. The run is made again with
    more windows, at most doubling them: the natural text's windows come one per document in a fixed
    order, so the larger run holds the smaller one's windows first, in the same order, and the sign
    test's wealth continues along the same sequence; its type-I error holds however the rounds stop."""
    from ctxlens.findings.lines.loss import usable_context
    from ctxlens.results import read_run

    rec = next((p for p in state["parts"] if p["name"] == WINDOWS), None)
    if rec is None or rec.get("status") != "done" or not rec.get("sequential") or not (where / WINDOWS).is_dir():
        return None
    line = usable_context(read_run(where / WINDOWS).rows, spec, int(state["size"]["length"]), sequential=True)
    have = int(rec["options"].get("n_samples") or 0)
    if not undecided(line) or not have or have >= MAX_WINDOWS or last_run_seconds(rec) <= 0:
        return None
    per = last_run_seconds(rec) / have  # seconds per window of its last run (a round runs every window again)
    n = min(MAX_WINDOWS, line.needs or MAX_WINDOWS, 2 * have, int(fitting.TARGET * left / per))
    return (rec, n) if n >= have + ROUND_MIN else None


def last_run_seconds(rec: PartRecord) -> float:
    """The seconds of the part's last run: its ``spent_s`` adds every run of it, so a round's record keeps
    what the runs before it took (``round_from_s``) and its own time is the difference."""
    return max(float(rec["spent_s"]) - float(rec.get("round_from_s") or 0.0), 0.0)


def _haystacks(rows: list[dict]) -> int:
    return len({(r.get("seed", 0), r.get("sample")) for r in rows if r.get("sample") is not None})


def next_round(spec: str, state: ModelState, rows: list[dict], left: float) -> PartRecord | None:
    """The next round of the grid of model ``spec`` (its profile record ``state``, its grid's rows
    ``rows``) as a part record (appended to ``state["parts"]``), or None: the grid not run, a round
    not finished, no needle line open, ``MAX_HAYSTACKS`` reached, or no time for ``ROUND_MIN``
    haystacks in ``left`` seconds at the grid's pace so far. A line whose planner needs more than
    the cap for the paper's effect still gets rounds up to it: it may decide the reverse, or that
    the effect is smaller than the paper's, long before."""
    grid = [p for p in state["parts"] if p["name"].split("+")[0] == GRID]
    base = next((p for p in grid if p["name"] == GRID), None)
    if base is None or base.get("status") != "done" or any(p.get("status") != "done" for p in grid):
        return None
    L = int(state["size"]["length"])
    lines = open_lines(rows, spec, L, state["info"].get("train_length"))
    have = _haystacks(rows)
    # a line decides either way (the effect, the reverse, or an effect below the paper's), so rounds go on up
    # to the cap even where the planner's n for the paper's effect lies beyond it
    wanted = [min(MAX_HAYSTACKS, line.needs if line.needs is not None else MAX_HAYSTACKS) for line in lines.values()]
    if not wanted or have == 0 or have >= MAX_HAYSTACKS:
        return None
    spent = sum(float(p.get("spent_s") or 0) for p in grid)
    tokens = sum(int(p.get("tokens") or 0) for p in grid)
    if spent <= 0 or tokens <= 0:
        return None
    retrieval = "retrieval_2l" in lines
    lengths = [L, 2 * L] if retrieval else [L]
    depths = list(NEEDLE_DEPTHS) if retrieval else list(ENDS)
    per_haystack = sum(lengths) * len(depths)  # tokens, as the grid's own count (prompt tokens per cell)
    pace = spent / tokens  # seconds per token of the grid so far (answers included)
    afford = int(fitting.TARGET * left / (pace * per_haystack))
    n = min(max(ROUND_MIN, min(wanted) - have), max(ROUND_MIN, have), MAX_HAYSTACKS - have, afford)
    if n < ROUND_MIN:
        return None
    k = 1 + sum(1 for p in grid if p.get("top_up"))
    options = {**base["options"], "lengths": lengths, "depths": depths, "n_samples": n,
               "seed": int(base["options"].get("seed", 0)) + k}
    planned = round(n * per_haystack * pace, 1)
    needs = ", ".join(f"{key} needs {line.needs}" for key, line in lines.items())
    part: PartRecord = {
        "name": f"{GRID}+{k}", "experiment": base["experiment"], "options": options,
        "model_options": base.get("model_options", {}), "units": len(lengths) * len(depths),
        "tokens": n * per_haystack, "planned_s": planned, "estimate_s": planned, "status": "planned", "top_up": True,
        "notes": [f"round {k}: {n} new haystacks (seed {options['seed']}) at {', '.join(map(str, lengths))} "
                  f"for the undecided needle lines (have {have}; {needs}); {math.ceil(planned / 60)} min planned"]}
    state["parts"].append(part)
    print(f"  {part['notes'][0]}", flush=True)
    return part
