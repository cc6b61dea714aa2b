"""The runner's time estimate against the real time (issue 33 part 4, target: within 30 %).

For each of five experiments on SmolLM2-135M (``ref:smollm2-135m``), in one process with the
model loaded once: the plan's estimate from the throughput probe at the plan's lengths
(``ctxlens.runner.plans.estimate_seconds``, exactly what ``ctxlens run`` prints), then the run of
the same plan (``ctxlens.runner.execute.run`` into a fresh directory, no progress bar), timed.
The ratio estimate / actual is printed per experiment. A busy machine distorts both sides (the
probe's few seconds and the run's minutes see different contention): run it on an idle machine,
or with ``nice`` next to others and read the ratio as rough.

    python bench/estimate_accuracy.py --quick   # shorter plans, about 3 minutes on 2 cores
    python bench/estimate_accuracy.py           # 1-3 minutes per experiment on 2 idle cores
"""

from __future__ import annotations

import argparse
import tempfile
import time

MODEL = "ref:smollm2-135m"
PLANS = {  # experiment -> options (full, quick)
    "token-loss": ({"lengths": [512, 2048], "n_samples": 8, "source": "builtin"},
                   {"lengths": [256, 1024], "n_samples": 4, "source": "builtin"}),
    "loss-vs-length": ({"lengths": [64, 256, 1024, 2048], "n_samples": 8},
                       {"lengths": [64, 256, 1024], "n_samples": 4}),
    "ruler": ({"tasks": ["niah_single_1", "vt"], "lengths": [1024, 2048], "n_samples": 4, "max_new_tokens": 16},
              {"tasks": ["niah_single_1"], "lengths": [512, 1024], "n_samples": 4, "max_new_tokens": 8}),
    # the per-(query, key) pair work outweighs the forward at short lengths (the profile's heads at L = 256)
    "positional-heads": ({"lengths": [256], "n_samples": 8, "n_queries": 238, "top_k": 64, "control": "rope-zeroed"},
                         {"lengths": [256], "n_samples": 3, "n_queries": 128, "top_k": 64, "control": "rope-zeroed"}),
    "dominant-dimension": ({"lengths": [512, 2048], "n_samples": 2, "n_queries": 128, "top_k": 100},
                           {"lengths": [256, 1024], "n_samples": 1, "n_queries": 64, "top_k": 100}),
}
TARGET = 0.30  # |estimate / actual - 1|


def one(lm, name: str, options: dict) -> dict:
    """Estimate, then run and time, ``name`` with ``options`` on the loaded ``lm``."""
    from ctxlens.core.options import make_config
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.probes.throughput import measure
    from ctxlens.runner import plans
    from ctxlens.runner.execute import run

    exp = get_experiment(name)
    config = plans.for_model(exp, options, make_config(exp.Config, options), MODEL, {}, [], False).config
    units = exp.plan(config)
    speed = measure(lm, **plans.probe_shape(exp, config, units))
    estimate = plans.estimate_seconds(exp, config, units, speed)
    with tempfile.TemporaryDirectory() as out:
        began = time.perf_counter()
        run(name, [MODEL], f"{out}/run", options, progress=False, announce=False, loaded={MODEL: lm})
        actual = time.perf_counter() - began
    ratio = estimate / actual
    return {"bench": "estimate_accuracy", "subject": f"{name} on {MODEL}", "metric": "estimate / actual",
            "value": round(ratio, 3), "estimate_s": round(estimate, 1), "actual_s": round(actual, 1),
            "probe_s": round(speed.seconds, 1), "target": f"within {TARGET:.0%}", "ok": abs(ratio - 1) <= TARGET}


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="shorter plans")
    p.add_argument("--only", help="comma-separated experiments of: " + ", ".join(PLANS))
    args = p.parse_args(argv)
    import ctxlens

    lm = ctxlens.load(MODEL)
    names = args.only.split(",") if args.only else list(PLANS)
    rows = []
    for name in names:
        row = one(lm, name, PLANS[name][1 if args.quick else 0])
        print(f"{row['subject']}: estimate {row['estimate_s']} s, actual {row['actual_s']} s, "
              f"estimate/actual {row['value']} (probe {row['probe_s']} s){'' if row['ok'] else '  OUTSIDE 30 %'}",
              flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
