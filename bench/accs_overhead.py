"""accs-layers wall time over the bare forward time of the same original and perturbed sequences.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section 4:
ACCS per layer needs one forward of every original and one of every perturbed sequence; the
rest (seeded shuffles, suffix-only captures of every layer, streaming float64 accumulators) should
cost little on top. Measured in one process: ``accs-layers``' ``run`` for one length (windows
cached by a warm-up run) vs ``LM.base_forward`` over the same originals and perturbed copies in
the same batches, no hooks, no LM head. Prints the median-time ratio per length; target <= 1.15.

    python bench/accs_overhead.py [--lengths 1024,4096] [--n 16] [--repeats 3] [--device cuda]
    python bench/accs_overhead.py --quick          # length 512, 8 sequences: ~30 s on a CPU
"""

from __future__ import annotations

import argparse
import statistics

import torch
from transformers import AutoModelForCausalLM

from ctxlens.core.timing import timed
from ctxlens.experiments import accs_layers, make_config
from ctxlens.lm import from_model
from ctxlens.lm.tiny import tiny_config
from ctxlens.probes import suffix as sx


def main(argv=None) -> list[dict]:
    """Print the table; return one row per length (ratio and seconds) for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="1024,4096")
    p.add_argument("--n", type=int, default=16, help="sequences")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--suffix", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quick", action="store_true", help="one length of 512, 8 sequences, 3 repeats")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.lengths, args.n = "512", 8
    torch.manual_seed(0)
    config = tiny_config("llama", hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=8, num_key_value_heads=4,
                         head_dim=args.hidden // 8, max_position_embeddings=1 << 17)
    lm = from_model(AutoModelForCausalLM.from_config(config).to(args.device))
    print(f"tiny llama d={args.hidden} layers={args.layers} on {args.device}, {torch.get_num_threads()} threads, "
          f"{args.n} sequences, batch {args.batch}, {args.suffix} suffix positions x every layer")
    print(f"{'tokens':>7} {'bare s':>9} {'accs s':>9} {'ratio':>6}")
    out = []
    for length in (int(x) for x in args.lengths.split(",")):
        cfg = make_config(accs_layers.Config, {"source": "random", "lengths": [length], "n_sequences": args.n,
                                               "suffix_len": args.suffix, "batch_size": args.batch})
        unit, cache = accs_layers.plan(cfg)[0], {}
        accs_layers.run(lm, cfg, unit, cache)  # warm-up; caches the windows
        windows = sx.suffix_windows(lm, cfg, [length], cache).at(length).to(args.device)  # [n, length]
        shuffle = sx.prefix_shuffle(length - args.suffix, cfg.boundary)
        batches = []
        for b0 in range(0, args.n, args.batch):
            batch = windows[b0:b0 + args.batch]
            batches += [batch, shuffle.apply(batch, list(range(b0, b0 + batch.shape[0])), cfg.seed)]

        def bare(batches=batches):  # defaults bind this iteration's values (B023)
            with torch.inference_mode():
                for ids in batches:
                    lm.base_forward(ids)

        def accs(cfg=cfg, unit=unit, cache=cache):
            accs_layers.run(lm, cfg, unit, cache)

        b, a = [], []
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            b.append(timed(bare, args.device))
            a.append(timed(accs, args.device))
        mb, ma = statistics.median(b), statistics.median(a)
        print(f"{length:>7} {mb:>9.3f} {ma:>9.3f} {ma / mb:>6.3f}")
        out.append({"bench": "accs_overhead", "subject": "accs-layers", "tokens": length,
                    "metric": "time / bare (body)", "value": ma / mb, "target": "<= 1.15", "ok": ma / mb <= 1.15,
                    "seconds": ma, "bare_seconds": mb})
    return out


if __name__ == "__main__":
    main()
