"""What the profile's suite costs against the bare forwards it needs (issue 33, part 6; target: at most 1.15x).

In one process: ``ctxlens profile MODEL --length L --budget B`` into a temporary directory (the parts
as its plan sizes them), then, on the same loaded weights, the bare cost of every part's work: for
each unit's ``Work`` (``ctxlens.runner.plans.unit_work``: ``sequences`` prompts of ``length`` tokens
and ``new_tokens`` generated ``batch`` at a time), one timed forward at each distinct length and one
timed decoding step after a prompt of that length, times the counts. The ratio spent / bare per
part (from ``profile.json``'s ``spent_s``) and for the whole suite is printed. Parts that capture
states or score per query (ACCS, positional heads) do more than forwards by design; the ratio shows
how much. A busy machine distorts both sides: run it on idle cores.

    python bench/suite_overhead.py --quick                       # L = 512, 3-minute budget
    python bench/suite_overhead.py --length 8192 --budget 120    # at SmolLM2's training length
    python bench/suite_overhead.py --device cuda --record DIR/profile.json   # a profile already run
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

MODEL = "ref:smollm2-135m"
TARGET = 1.15


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(fn) -> float:
    _sync()
    began = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - began


class Bare:
    """Seconds of one bare forward of n tokens and of one decoding step after n tokens, timed once per n."""

    def __init__(self, lm):
        import torch

        self.lm, self.forward, self.step = lm, {}, {}
        self.ids = lambda n: torch.randint(100, 1000, (1, n), generator=torch.Generator().manual_seed(n)).to(lm.device)

    def forward_s(self, n: int) -> float:
        if n not in self.forward:
            ids = self.ids(n)
            self.lm.final_hidden(ids[:, :8])  # warm
            self.forward[n] = _timed(lambda: self.lm.final_hidden(ids))
        return self.forward[n]

    def step_s(self, n: int) -> float:
        """One more greedy token after a prompt of n tokens: greedy(9) - greedy(1), over 8."""
        if n not in self.step:
            ids = self.ids(n)
            one = _timed(lambda: self.lm.greedy(ids, 1, 0, 1))
            nine = _timed(lambda: self.lm.greedy(ids, 9, 0, 9))
            self.step[n] = max(nine - one, 0.0) / 8
        return self.step[n]


def part_bare(part: dict, spec: str, bare: Bare) -> float:
    """Bare seconds of one profile part's work (its recorded options, planned as the runner plans them)."""
    from ctxlens.core.options import make_config
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.runner import plans

    exp = get_experiment(part["experiment"])
    options = part["options"]
    extrapolate = bool((part.get("model_options") or {}).get("allow_extrapolation"))
    config = plans.for_model(exp, options, make_config(exp.Config, options), spec, {}, [], extrapolate).config
    seconds = 0.0
    for unit in exp.plan(config):
        for w in plans.unit_work(exp, config, unit) or []:
            seconds += w.sequences * bare.forward_s(w.length)
            if w.new_tokens:
                seconds += (w.new_tokens / max(1, w.batch)) * bare.step_s(w.length)
    return seconds


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="L = 512 and a 3-minute budget")
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--budget", type=float, default=6.0, help="minutes")
    p.add_argument("--model", default=MODEL)
    p.add_argument("--device", default=None, help="cpu | cuda (default: the profile's own choice)")
    p.add_argument("--record", help="a profile.json of a profile already run on this model: time its bare forwards "
                                    "only (on the device it ran on)")
    args = p.parse_args(argv)
    import ctxlens
    from ctxlens.profile import profile

    length, minutes = (512, 3.0) if args.quick else (args.length, args.budget)
    if args.record:
        record = json.loads(Path(args.record).read_text())
        length = record.get("length") or record["models"][args.model]["size"]["length"]
    else:
        with tempfile.TemporaryDirectory() as out:
            options = {"device": args.device} if args.device else None
            profile([args.model], minutes, out, model_options=options, progress=False, length=length)
            record = json.loads((Path(out) / "profile.json").read_text())
    lm = ctxlens.load(args.model, device=args.device)
    lm.allow_extrapolation()  # the needle and ACCS parts read 2L
    bare = Bare(lm)
    rows, spent_all, bare_all = [], 0.0, 0.0
    for part in record["models"][args.model]["parts"]:
        if part.get("status") != "done" or not part.get("spent_s"):
            continue
        need = part_bare(part, args.model, bare)
        spent_all, bare_all = spent_all + part["spent_s"], bare_all + need
        rows.append({"bench": "suite_overhead", "subject": part["name"], "metric": "spent / bare forwards",
                     "value": round(part["spent_s"] / need, 3) if need else None, "tokens": part.get("tokens")})
        print(f"{part['name']:<22} spent {part['spent_s']:8.1f} s   bare forwards {need:8.1f} s   "
              f"x{part['spent_s'] / need if need else float('nan'):.2f}", flush=True)
    total = spent_all / bare_all if bare_all else None
    rows.append({"bench": "suite_overhead", "subject": f"suite at L = {length}", "metric": "spent / bare forwards",
                 "value": round(total, 3) if total else None, "target": f"<= {TARGET}",
                 "ok": total is not None and total <= TARGET})
    print(f"suite at L = {length} on {args.model}: spent {spent_all:.1f} s, bare forwards {bare_all:.1f} s, "
          f"x{total:.2f} (target <= {TARGET})" if total else "no part finished", flush=True)
    return rows


if __name__ == "__main__":
    main()
