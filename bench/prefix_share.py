"""Prefix-shared prefill vs independent prefill of a needle depth sweep, in one run.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4,
Tables 2-3) sweeps one needle over depths 0-100 % of the same haystack. ``niah-depth`` runs one
unit per (length, depth), ``n`` prompts each; the prompts share their ids up to the needle, so
``TransformersBackend`` with ``share_prefix`` prefills that prefix once per depth (and reuses the
previous depth's prefix when the model's cache can be cut back). This script decodes the same
11-depth grid (depths 0, 10, ..., 100) of ``niah_single_2`` through the backend with and without
sharing, unit by unit as the experiment does (the two sides interleaved per unit), and prints per
length the prompt tokens run, the wall and CPU time of each, their ratios (target: at most 0.6)
and whether the greedy answers are identical. The CPU time of this process is the steadier
figure on a machine shared with other work.

    python bench/prefix_share.py                          # random llama (d=512, 4 layers), 2K and 4K
    python bench/prefix_share.py --quick                  # 1K, 2 prompts per depth: about 30 s on a CPU
    python bench/prefix_share.py --model ref:smollm2-135m --lengths 1024,2048 --n 2

What is compared is the prefill, so each prompt generates one token by default; ``--budget N``
adds the N - 1 decoding steps, the same on both sides (the random model never stops early), which
move the time ratio towards 1. The dataset generation is not timed.
"""

from __future__ import annotations

import argparse
import time

import torch

from ctxlens.tasks import generate
from ctxlens.tasks.backends import TransformersBackend

TARGET = 0.6
DEPTHS = [float(d) for d in range(0, 101, 10)]


def random_llama(device: str, max_length: int):
    """A random-init llama (d_model 512, 4 layers, 8 heads) on the zoo's byte tokenizer."""
    from transformers import AutoModelForCausalLM

    from ctxlens.lm import from_model
    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=257, hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, head_dim=64,
                         max_position_embeddings=max_length)
    lm = from_model(AutoModelForCausalLM.from_config(config).to(device).eval())
    lm.tokenizer = byte_tokenizer()
    return lm


def backend(lm, share: bool) -> TransformersBackend:
    b = TransformersBackend(lm, batch_size=8, share_prefix=share)
    b.eos = set()  # decode the whole budget on both sides
    return b


def timed(fn, *args) -> tuple[object, float, float]:
    """(result, wall seconds, CPU seconds of this process) of ``fn(*args)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def measure(lm, length: int, n: int, budget: int, seed: int) -> dict:
    """Both sides over the grid, unit by unit as the experiment runs them, interleaved (independent,
    then shared, per unit) so that a change of load on the machine falls on both alike."""
    units = [generate("niah_single_2", lm.tokenizer, length, n, seed, budget=budget,
                      options={"depths": [depth]}, cache=False) for depth in DEPTHS]
    backend(lm, True).generate([s.input_ids for s in units[0]], [1] * n)  # warm-up outside the timings
    sides = {share: backend(lm, share) for share in (False, True)}
    answers: dict[bool, list] = {False: [], True: []}
    wall, cpu = {False: 0.0, True: 0.0}, {False: 0.0, True: 0.0}
    for unit in units:
        for share, b in sides.items():
            out, w, c = timed(b.generate, [s.input_ids for s in unit], [s.budget for s in unit])
            answers[share].append(out)
            wall[share] += w
            cpu[share] += c
    return {"length": length, "tokens": sides[False].prefill_tokens, "tokens_shared": sides[True].prefill_tokens,
            "seconds": wall[False], "seconds_shared": wall[True], "cpu": cpu[False], "cpu_shared": cpu[True],
            "identical": answers[False] == answers[True], "why": sides[True].no_sharing or ""}


def main(argv=None) -> list[dict]:
    """Print the report; return its figures as rows for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="", help="a model spec (e.g. ref:smollm2-135m); default: a random llama")
    p.add_argument("--lengths", default="2048,4096", help="prompt lengths in tokens, comma-separated")
    p.add_argument("--n", type=int, default=4, help="samples (prompts) per depth")
    p.add_argument("--budget", type=int, default=1,
                   help="new tokens per prompt (1: the prefill and its first token)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--quick", action="store_true", help="1K tokens, 2 prompts per depth")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    lengths = [1024] if args.quick else [int(x) for x in args.lengths.split(",")]
    if args.quick:
        args.n = 2
    if args.model:
        import ctxlens

        lm = ctxlens.load(args.model, device=args.device)
    else:
        lm = random_llama(args.device, max(lengths) + args.budget)
    subject = f"{args.model or 'random llama d512x4'}: 11 depths x {args.n} niah_single_2 prompts, shared / independent"
    print(f"{subject} on {args.device}, {torch.get_num_threads()} threads, budget {args.budget}")
    rows = []
    for length in lengths:
        m = measure(lm, length, args.n, args.budget, args.seed)
        r_tok, r_time = m["tokens_shared"] / m["tokens"], m["seconds_shared"] / m["seconds"]
        r_cpu = m["cpu_shared"] / m["cpu"]
        print(f"L={length:6d}  prompt tokens {m['tokens']:8d} -> {m['tokens_shared']:8d} ({r_tok:.3f}x)  "
              f"wall {m['seconds']:7.2f} s -> {m['seconds_shared']:7.2f} s ({r_time:.3f}x)  "
              f"cpu {m['cpu']:7.2f} s -> {m['cpu_shared']:7.2f} s ({r_cpu:.3f}x)  "
              f"identical answers: {m['identical']}" + (f"  not shared: {m['why']}" if m["why"] else ""))
        row = {"bench": "prefix_share", "subject": subject, "tokens": length}
        rows += [
            {**row, "metric": "prompt tokens run: shared / independent", "value": r_tok, "target": f"<= {TARGET}",
             "ok": r_tok <= TARGET},
            {**row, "metric": "time: shared / independent", "value": r_time, "target": f"<= {TARGET}",
             "ok": r_time <= TARGET, "seconds": m["seconds_shared"], "independent_seconds": m["seconds"]},
            {**row, "metric": "CPU time: shared / independent", "value": r_cpu, "target": f"<= {TARGET}",
             "ok": r_cpu <= TARGET},
            {**row, "metric": "greedy answers identical", "value": float(m["identical"]), "target": "1", "ok":
             m["identical"]},
        ]
    return rows


if __name__ == "__main__":
    main()
