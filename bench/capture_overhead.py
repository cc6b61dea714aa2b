"""Capture overhead: a forward with captures over a bare sdpa forward, same process.

Captures: residual-after-mixer at 64 suffix positions on every layer, plus post-RoPE q (at the
same 64 positions) and k (all positions) on one layer. Baseline: the base model's forward with
no hooks and no LM head. Prints the median-time ratio per length; target <= 1.10.

    python bench/capture_overhead.py [--lengths 1024,4096,16384] [--repeats 5] [--device cpu]
    python bench/capture_overhead.py --quick        # 1K tokens, 3 repeats, one thread
"""

from __future__ import annotations

import argparse
import statistics

import torch
from transformers import AutoModelForCausalLM

from ctxlens.core.timing import timed
from ctxlens.lm import from_model
from ctxlens.lm.tiny import tiny_config


def main(argv=None) -> list[dict]:
    """Print the table; return one row per length (ratio and seconds) for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="1024,4096,16384")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; --quick: 1)")
    p.add_argument("--quick", action="store_true", help="1024 tokens, 3 repeats, one CPU thread")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.repeats = "1024", 3
    if args.threads or (args.quick and not args.device.startswith("cuda")):
        torch.set_num_threads(args.threads or 1)
    torch.manual_seed(0)
    config = tiny_config("llama", hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=8, num_key_value_heads=4,
                         head_dim=args.hidden // 8, max_position_embeddings=1 << 17)
    model = AutoModelForCausalLM.from_config(config).to(args.device, getattr(torch, args.dtype))
    lm = from_model(model)
    print(f"tiny llama d={args.hidden} layers={args.layers} on {args.device} {args.dtype}, "
          f"{torch.get_num_threads()} threads")
    print(f"{'tokens':>7} {'bare s':>9} {'capture s':>10} {'ratio':>6}")
    out = []
    for n in (int(x) for x in args.lengths.split(",")):
        ids = torch.randint(0, config.vocab_size, (1, n), device=args.device)
        suffix = list(range(n - 64, n))

        def bare(ids=ids):  # defaults bind this iteration's values (B023)
            with torch.inference_mode():
                lm.base_forward(ids)

        def capture(ids=ids, suffix=suffix):
            lm.capture(ids, residual="all", positions=suffix, qk=[args.layers // 2], query_positions=suffix)

        bare(), capture()  # warm-up
        b, c = [], []
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            b.append(timed(bare, args.device))
            c.append(timed(capture, args.device))
        mb, mc = statistics.median(b), statistics.median(c)
        print(f"{n:>7} {mb:>9.4f} {mc:>10.4f} {mc / mb:>6.3f}")
        out.append({"bench": "capture_overhead", "subject": "capture: residual x all layers + q/k x 1 layer",
                    "tokens": n, "metric": "time / bare (body)", "value": mc / mb, "target": "<= 1.1",
                    "ok": mc / mb <= 1.10, "seconds": mc, "bare_seconds": mb})
    return out


if __name__ == "__main__":
    main()
