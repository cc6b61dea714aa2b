"""What the progress meter costs: greedy decoding with and without the runner's token counter.

Issue 26 part 4. The runner counts the tokens every forward runs (hooks on the input embedding
and on each decoder layer, ``ctxlens.runner.meter.count_tokens``) into the unit's ``Meter``
(``ctxlens.core.progress``). The worst case is many small forwards: token-by-token greedy
decoding of a tiny model, where a forward takes about a millisecond and the hooks run once per
generated token. This script decodes
the same prompts with ``TransformersBackend`` bare and metered (interleaved, median of repeats)
and prints the time ratio (target: at most 1.03) and whether the answers are identical.

    python bench/progress_overhead.py            # zoo:random-llama (the zoo's random llama), 8 prompts x 64 new tokens
    python bench/progress_overhead.py --quick    # 3 repeats, one thread
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import ctxlens.zoo  # noqa: F401 - registers zoo: models
from ctxlens.core import progress
from ctxlens.lm.loading import load
from ctxlens.runner.meter import count_tokens
from ctxlens.tasks.backends import TransformersBackend

TARGET = 1.03


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser()
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    p.add_argument("--new", type=int, default=64, help="tokens generated per prompt")
    p.add_argument("--n", type=int, default=8, help="prompts (batch size 1: one forward per token)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="3 repeats, one CPU thread")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats = 3
        torch.set_num_threads(1)
    torch.manual_seed(0)
    lm = load("zoo:random-llama")
    lm.model.generation_config.eos_token_id = None  # never stop early: both sides run every step
    prompts = torch.randint(3, 250, (args.n, args.prompt)).tolist()
    budgets = [args.new] * args.n
    backend = TransformersBackend(lm, batch_size=1, share_prefix=False)
    backend.eos = set()

    def bare() -> list[str]:
        return backend.generate(prompts, budgets)

    def metered() -> list[str]:
        meter = progress.Meter("bench", args.n * (args.prompt + args.new), lambda line: None, quiet=0.0, every=0.5)
        with count_tokens(lm), progress.unit(meter):
            return backend.generate(prompts, budgets)

    same = bare() == metered()  # also the warm-up
    b, m = [], []
    for _ in range(args.repeats):  # interleaved, so drift hits both alike
        for fn, times in ((bare, b), (metered, m)):
            t = time.process_time()
            fn()
            times.append(time.process_time() - t)
    mb, mm = statistics.median(b), statistics.median(m)
    ratio = mm / mb
    per_call = _hook_seconds(lm)  # the steadier figure on a busy machine: the hook's own cost per forward
    forwards = args.n * args.new
    print(f"hook: {per_call * 1e6:.1f} us per forward x {forwards} forwards = {per_call * forwards / mb:.2%} of bare")
    print(f"zoo:random-llama, {args.n} prompts x ({args.prompt} + {args.new}) tokens, batch 1, "
          f"{torch.get_num_threads()} threads (CPU seconds, median of {args.repeats})")
    print(f"bare {mb:.3f} s, metered {mm:.3f} s, ratio {ratio:.3f} (target <= {TARGET}), same answers: {same}")
    return [{"bench": "progress_overhead", "subject": "token meter on greedy decoding, zoo:random-llama",
             "tokens": args.n * (args.prompt + args.new), "metric": "time / bare", "value": ratio,
             "target": f"<= {TARGET}", "ok": ratio <= TARGET and same, "seconds": mm, "bare_seconds": mb},
            {"bench": "progress_overhead", "subject": "token meter hook alone, zoo:random-llama",
             "tokens": args.n * (args.prompt + args.new), "metric": "hook time / bare",
             "value": per_call * forwards / mb, "target": "<= 0.01", "ok": per_call * forwards / mb <= 0.01}]


def _hook_seconds(lm, calls: int = 5000) -> float:
    """Seconds one forward spends in the counting hooks and the meter (the embedding's, then every layer's)."""
    embed = lm.model.get_input_embeddings()
    ids = torch.zeros(1, 1, dtype=torch.long)
    meter = progress.Meter("bench", None, lambda line: None, quiet=0.0, every=0.5)
    with count_tokens(lm), progress.unit(meter):
        hooks = [(embed, h) for h in embed._forward_hooks.values()]
        hooks += [(layer, h) for layer in lm.layers for h in layer._forward_hooks.values()]
        t = time.process_time()
        for _ in range(calls):
            for module, hook in hooks:
                hook(module, (ids,), None)
        return (time.process_time() - t) / calls


if __name__ == "__main__":
    main()
