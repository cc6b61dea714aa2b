"""Trainer throughput against a bare forward+backward+step loop, same model and batch, one run.

    python bench/train_throughput.py [--steps 30] [--seq 512] [--batch 8]
    python bench/train_throughput.py --quick        # 10 steps of 4 x 256 tokens

Prints tokens/s of both and their ratio (target >= 0.95).
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM

from ctxlens.lm.tiny import tiny_config
from ctxlens.zoo.trainer import TrainConfig, causal_lm_loss, lm_targets, train


def main(argv=None) -> list[dict]:
    """Print the figures; return them as one row for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="10 steps of 4 x 256 tokens")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.seq, args.batch = 10, 256, 4
    torch.manual_seed(0)
    config = tiny_config("llama", hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32)
    batch = lm_targets(torch.randint(0, config.vocab_size, (args.batch, args.seq)))
    tokens = args.steps * args.batch * args.seq

    def bare() -> float:
        model = AutoModelForCausalLM.from_config(config).to(args.device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        b = {k: v.to(args.device) for k, v in batch.items()}
        t = time.perf_counter()
        for _ in range(args.steps):
            loss = causal_lm_loss(model, b)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return tokens / (time.perf_counter() - t)

    def ours() -> float:
        model = AutoModelForCausalLM.from_config(config)
        cfg = TrainConfig(steps=args.steps, warmup=5, device=args.device, bf16=False)
        t = time.perf_counter()
        train(model, lambda step: batch, cfg)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        return tokens / (time.perf_counter() - t)

    bare(), ours()  # warm-up
    b, o = [], []
    for _ in range(3):
        b.append(bare())
        o.append(ours())
    b, o = sorted(b)[1], sorted(o)[1]
    print(f"tiny llama, batch {args.batch} x {args.seq} tokens on {args.device}")
    print(f"bare loop {b:,.0f} tok/s   trainer {o:,.0f} tok/s   ratio {o / b:.3f}")
    return [{"bench": "train_throughput", "subject": "zoo trainer vs bare loop", "tokens": args.seq,
             "metric": "throughput: trainer / bare", "value": o / b, "target": ">= 0.95", "ok": o / b >= 0.95,
             "tokens_per_s": o, "bare_tokens_per_s": b}]


if __name__ == "__main__":
    main()
