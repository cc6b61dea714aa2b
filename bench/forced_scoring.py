"""Known answers scored in one teacher-forced forward vs decoding every item, in one run.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4)
scores RULER's tasks by greedy decoding and string match. Their answers are known, so
``TaskOptions.forced`` (``ctxlens.tasks.forced``) first runs one teacher-forced forward over prompt
+ gold answer per decoding batch, from the same shared-prefix cache, and decodes only the items
that forward does not prove. This script scores one grid of tasks and lengths both ways, unit by
unit as the experiments run them (the two sides interleaved per unit, each with a fresh backend),
and prints: items, items proven by the forced forward, decode steps saved (the budgets of the
proven items, which decoding may stop short of at an end token), whether every score is equal,
and the wall and CPU time of each side with their ratios (target: forced / decoded <= 1, never
slower). The CPU time of this process is the steadier figure on a machine shared with other work.

    python bench/forced_scoring.py                          # ref:smollm2-135m, 6 needle tasks at 512 and 1024
    python bench/forced_scoring.py --quick                  # niah_single_2 and vt at 512, 2 samples each
    python bench/forced_scoring.py --model ref:gemma3-270m --tasks niah_single_1 --lengths 1024 --n 8

The dataset generation is not timed.
"""

from __future__ import annotations

import argparse
import time

import torch

from ctxlens.probes.tasks import TaskOptions, rows_for, samples

TARGET = 1.0
TASKS = "niah_single_1,niah_single_2,niah_single_3,niah_multikey_1,niah_multivalue,vt"


def timed(fn, *args) -> tuple[object, float, float]:
    """(result, wall seconds, CPU seconds of this process) of ``fn(*args)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def unit(lm, task: str, length: int, n: int, seed: int, forced: bool) -> tuple[list[dict], float, float]:
    """(rows, wall s, CPU s) of one unit scored one way, with a fresh backend (its own prefix store)."""
    config = TaskOptions(n_samples=n, seed=seed, cache=False, forced=forced)
    cache: dict = {}
    batch = samples(lm, config, task, length, cache)  # not timed
    rows, wall, cpu = timed(rows_for, lm, config, cache, batch)
    return rows, wall, cpu  # type: ignore[return-value]


def measure(lm, tasks: list[str], lengths: list[int], n: int, seed: int) -> dict:
    """Both sides over the grid, unit by unit, decoded first then forced per unit."""
    unit(lm, tasks[0], lengths[0], 1, seed, True)  # warm-up outside the timings
    out = {"items": 0, "proven": 0, "steps_saved": 0, "equal": True, "budget": 0,
           "wall": {False: 0.0, True: 0.0}, "cpu": {False: 0.0, True: 0.0}}
    for length in lengths:
        for task in tasks:
            got = {}
            for forced in (False, True):
                got[forced], wall, cpu = unit(lm, task, length, n, seed, forced)
                out["wall"][forced] += wall
                out["cpu"][forced] += cpu
            proven = [r for r in got[True] if r["scored_by"] == "forced"]
            out["items"] += len(got[True])
            out["proven"] += len(proven)
            out["budget"] += sum(r["budget"] for r in got[True])
            out["steps_saved"] += sum(r["budget"] for r in proven)
            out["equal"] &= [r["score"] for r in got[True]] == [r["score"] for r in got[False]]
            print(f"  {task:16s} L={length:5d}: {len(proven)}/{len(got[True])} proven", flush=True)
    return out


def main(argv=None) -> list[dict]:
    """Print the report; return its figures as rows for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="ref:smollm2-135m", help="a model spec")
    p.add_argument("--tasks", default=TASKS, help="comma-separated task names")
    p.add_argument("--lengths", default="512,1024", help="prompt lengths in tokens, comma-separated")
    p.add_argument("--n", type=int, default=4, help="samples per (task, length)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    p.add_argument("--quick", action="store_true", help="niah_single_2 and vt at 512 tokens, 2 samples each")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    tasks = ["niah_single_2", "vt"] if args.quick else args.tasks.split(",")
    lengths = [512] if args.quick else [int(x) for x in args.lengths.split(",")]
    n = 2 if args.quick else args.n

    import ctxlens

    lm = ctxlens.load(args.model, device=args.device)
    subject = f"{args.model}: {','.join(tasks)} x {n} at {','.join(map(str, lengths))}, forced / decoded"
    print(f"{subject} on {args.device}, {torch.get_num_threads()} threads")
    m = measure(lm, tasks, lengths, n, args.seed)
    r_wall, r_cpu = m["wall"][True] / m["wall"][False], m["cpu"][True] / m["cpu"][False]
    print(f"items {m['items']}, proven by the forced forward {m['proven']} ({m['proven'] / m['items']:.0%}), "
          f"decode steps saved {m['steps_saved']} of {m['budget']} budgeted, scores equal: {m['equal']}")
    print(f"wall {m['wall'][False]:.1f} s decoded -> {m['wall'][True]:.1f} s forced ({r_wall:.3f}x)  "
          f"cpu {m['cpu'][False]:.1f} s -> {m['cpu'][True]:.1f} s ({r_cpu:.3f}x)")
    row = {"bench": "forced_scoring", "subject": subject}
    return [
        {**row, "metric": "items proven by the forced forward (fraction)", "value": m["proven"] / m["items"],
         "items": m["items"], "proven": m["proven"], "steps_saved": m["steps_saved"]},
        {**row, "metric": "time: forced / decoded", "value": r_wall, "target": f"<= {TARGET}",
         "ok": r_wall <= TARGET, "seconds": m["wall"][True], "decoded_seconds": m["wall"][False]},
        {**row, "metric": "CPU time: forced / decoded", "value": r_cpu, "target": f"<= {TARGET}",
         "ok": r_cpu <= TARGET},
        {**row, "metric": "scores equal on every item", "value": float(m["equal"]), "target": "1",
         "ok": m["equal"]},
    ]


if __name__ == "__main__":
    main()
