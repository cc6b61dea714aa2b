"""Sparse-parity training step: the one-layer table form against transformers' forward, one run.

``ctxlens.zoo.parity_train.one_layer_label_logits`` computes the same logits as the model's own
forward (tests/zoo/test_parity_result.py checks values and gradients); this prints how many
training samples per second each gives (forward, backward and AdamW step of the label loss, same
model, same batches), and the general path of ``label_logits`` (last-position-only last layer)
as a middle row. Widths: the recorded CPU model (64, FFN 256) and Section 4.3's (208, FFN 832),
one layer each.

    python bench/parity_table_form.py [--steps 30] [--batch 512] [--threads 1]
    python bench/parity_table_form.py --quick         # 10 steps
"""

from __future__ import annotations

import argparse

import torch

import ctxlens.zoo.parity_train as pt
from ctxlens.core.timing import timed
from ctxlens.data.sparse_parity import SparseParity

PATHS = {
    "transformers forward": lambda model, ids: model(input_ids=ids).logits[:, -1],  # [n, V]
    "last-position forward": pt.last_position_label_logits,
    "table form": pt.one_layer_label_logits,
}


def samples_per_second(model, logits_fn, batches: list[dict], device: str) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def run():
        for b in batches:
            loss = torch.nn.functional.cross_entropy(logits_fn(model, b["input_ids"]), b["targets"][:, -1])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    run()  # warm-up (allocator, kernels)
    return sum(len(b["input_ids"]) for b in batches) / timed(run, device)


def main(argv=None) -> list[dict]:
    """Print the table; return one row per (width, path) for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="10 steps")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 10
    if not args.device.startswith("cuda"):
        torch.set_num_threads(args.threads)
    ds = SparseParity.paper()
    batches = [{k: v.to(args.device) for k, v in ds.sample(args.batch, seed=s).items()} for s in range(args.steps)]
    rows = []
    print(f"sparse parity, batch {args.batch}, {args.steps} steps on {args.device}, {torch.get_num_threads()} threads")
    print(f"{'width':>6} {'ffn':>5} {'path':>22} {'samples/s':>10} {'x forward':>10}")
    for hidden, ffn in ((64, 256), (208, 832)):
        base = None
        for name, fn in PATHS.items():
            model = pt.build_model(ds, pt.ParitySpec(hidden=hidden, ffn=ffn)).to(args.device).train()
            rate = samples_per_second(model, fn, batches, args.device)
            base = base or rate
            print(f"{hidden:>6} {ffn:>5} {name:>22} {rate:>10.0f} {rate / base:>10.2f}")
            rows.append({"bench": "parity_table_form", "subject": f"d={hidden} ffn={ffn} {name}",
                         "metric": "samples/s over transformers forward", "value": rate / base,
                         "samples_per_s": rate})
    return rows


if __name__ == "__main__":
    main()
