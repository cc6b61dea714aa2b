"""Measure the Positional Heads finding of seed 003 on a RoPE model and record whether it holds.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension"),
Sections 4.2-4.3, Figure 8: heads whose dominant dimension correlates with relative distance
exist, and masking the top 5% / 10% of them hurts passkey retrieval more than masking as many
random heads (several draws). The criteria are in ``ctxlens.findings.positional``
(fixed before any zoo run). Both runs go through the ordinary runner into ``--runs``
(resumable): ``positional-heads`` at the training length, then ``head-masking`` on passkey
retrieval at lengths around it. The JSON written to OUT holds the settings, every measured
number and ``reproduced``: true, false, or null when undecided.

    python scripts/positional_heads_findings.py findings.json                 # zoo:rope
    python scripts/positional_heads_findings.py /tmp/f.json --model zoo:random-llama --train-length 128 \\
        --lengths 128 --n-samples 1 --n-passkey 1 --n-draws 2                   # logic only
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ctxlens.findings.positional import masking_summary, significant_heads, verdict
from ctxlens.runner.execute import run


def _args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="JSON file to write")
    p.add_argument("--model", default="zoo:rope")
    p.add_argument("--runs", default=None, help="run directories (default: OUT without suffix + '-runs')")
    p.add_argument("--train-length", type=int, default=512, help="the model's training length (detection length)")
    p.add_argument("--lengths", default=None, help="passkey lengths (default: 0.5x, 1x and 2x the training length)")
    p.add_argument("--source", default="builtin:test")
    p.add_argument("--n-samples", type=int, default=8, help="detection inputs")
    p.add_argument("--top-k", type=int, default=100)
    p.add_argument("--fractions", default="0.05,0.1")
    p.add_argument("--n-draws", type=int, default=5)
    p.add_argument("--n-passkey", type=int, default=10, help="probes per depth and length")
    p.add_argument("--depths", default="0.1,0.5,0.9")
    p.add_argument("--transform", default="none")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    a = _args(argv)
    out = Path(a.out)
    runs = Path(a.runs) if a.runs else out.with_name(out.stem + "-runs")
    t = a.train_length
    lengths = [int(x) for x in a.lengths.split(",")] if a.lengths else [t // 2, t, 2 * t]
    model_options = {"device": a.device, "allow_extrapolation": True}
    common = {"source": a.source, "top_k": a.top_k, "transforms": [a.transform], "train_length": t,
              "seed": a.seed, "fractions": [float(f) for f in a.fractions.split(",")]}
    started = time.time()
    heads = run("positional-heads", [a.model], runs / "positional-heads",
                {**common, "lengths": [t], "n_samples": a.n_samples, "alpha": a.alpha},
                model_options, progress=False).rows()
    masking = run("head-masking", [a.model], runs / "head-masking",
                  {**common, "lengths": lengths, "tasks": ["passkey"], "detect_length": t,
                   "detect_samples": a.n_samples, "n_draws": a.n_draws, "n_passkey": a.n_passkey, "depths": [float(d) for d in a.depths.split(",")]},
                  model_options, progress=False).rows()
    significance = significant_heads(heads, a.alpha)
    summary = masking_summary(masking)
    record = {
        "finding": "positional heads exist and masking them hurts passkey retrieval more than masking random heads",
        "paper": "seed 003, Sections 4.2-4.3, Figure 8",
        "model": a.model, "settings": vars(a), "lengths": lengths,
        "significance": significance, "passkey": summary, **verdict(significance, summary),
        "seconds": round(time.time() - started, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))
    print(json.dumps({k: record[k] for k in ("model", "significant", "masking_hurts_more", "reproduced")}))
    return record


if __name__ == "__main__":
    main()
