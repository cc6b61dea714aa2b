"""``ctxlens demo``: the curated suite on tiny models, end to end on a laptop CPU.

For now it runs the core's smoke analysis (``token-loss``) on ``zoo:random-llama``; later
experiments and the trained zoo join it as they land.
"""

from __future__ import annotations

from pathlib import Path

from ctxlens.runner.execute import run

SUITE = [
    ("token-loss", {"source": "random", "lengths": [128, 512], "n_samples": 2}),
]
MODELS = ["zoo:random-llama"]


def demo(out: str | Path = "ctxlens-demo") -> int:
    out = Path(out)
    for experiment, options in SUITE:
        store = run(experiment, MODELS, out / experiment, options)
        rows = store.rows()
        print(f"\n{experiment}: {len(rows)} rows in {out / experiment / 'results.jsonl'}")
        for row in rows:
            print(f"  {row['model']:<18} length={row['length']:<5} sample={row['sample']}  nll={row['nll']:.4f} nats")
    print("\nctxlens demo finished; a random-weight model's loss is near log(vocab) by design.")
    return 0
