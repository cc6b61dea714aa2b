"""dominant-dimension cost: wall time and peak memory against a bare forward and a naive baseline.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.2.1: top-k keys of every query, per layer and head. Ours (``ctxlens.experiments.
_dominant.accumulate``) computes logit rows from captured q/k in chunks of queries inside
one forward: target memory = the forward's plus a bounded working set (``_qk.WORK_BYTES``)
and the [layers, heads, L] distance sums. Baseline: transformers' eager attention returning
every layer's full L x L attention matrix, top-k taken from those (run only where its
estimated size fits ``--naive-max-gb``). All three run on the same random llama-shaped model
and input; each measurement runs in a fresh process (forked on CPU: peak = max RSS over the
level after loading the model; spawned on CUDA: peak allocated over the level after loading).

    python bench/dominant_dimension.py                       # 4K, 16K, 32K (GPU advised)
    python bench/dominant_dimension.py --quick               # small model, 1K and 2K, ~30 s on CPU
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time

import torch


def _model(args):
    from transformers import AutoModelForCausalLM

    from ctxlens.lm import from_model
    from ctxlens.lm.tiny import tiny_config

    torch.manual_seed(0)
    config = tiny_config("llama", hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=max(1, args.heads // 4),
                         head_dim=args.hidden // args.heads, max_position_embeddings=1 << 17)
    model = AutoModelForCausalLM.from_config(config).to(args.device, getattr(torch, args.dtype))
    return from_model(model)


def _naive(lm, ids, top_k: int) -> None:
    """Full L x L attention of every layer from eager attention, then top-k and dominant dims."""
    from ctxlens.metrics.rope import dominant_dimension, rope_pair_contributions

    lm.model.set_attn_implementation("eager")
    layers = lm.attention_layers()
    with torch.inference_mode():
        probs = lm.model.base_model(ids, output_attentions=True, use_cache=False).attentions  # [1, H, L, L] each
    lm.model.set_attn_implementation("ctxlens-sdpa")
    cap = lm.capture(ids, qk=layers)
    n = ids.shape[1]
    for layer in layers:
        keys = probs[layer][0].topk(min(top_k, n), dim=-1).indices  # [H, L, t]
        q, k = cap.queries[layer][0], cap.keys[layer][0]  # [H, L, d]
        for h in range(q.shape[0]):
            pairs, _ = rope_pair_contributions(q[h][:, None], k[h][keys[h]], "half", lm.rotary_dims)
            dominant_dimension(pairs)


def _one(args, kind: str, n: int, out) -> None:
    """Measure one (kind, length) in this process; send (seconds, peak bytes) through ``out``."""
    from ctxlens.probes.dominant import DistanceSums, accumulate

    torch.set_num_threads(args.threads)
    lm = _model(args)
    ids = torch.randint(0, lm.vocab_size, (1, n), generator=torch.Generator().manual_seed(0)).to(args.device)
    cuda = args.device.startswith("cuda")

    def work():
        if kind == "bare":
            with torch.inference_mode():
                lm.base_forward(ids)
        elif kind == "ours":
            sums = DistanceSums(lm.attention_layers(), lm.n_heads, n, lm.device)
            accumulate(lm, ids, lm.attention_layers(), sums, args.top_k)
        else:
            _naive(lm, ids, args.top_k)

    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.perf_counter()
    work()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    if cuda:
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    out.send((seconds, peak))


def measure(args, kind: str, n: int) -> tuple[float, float]:
    ctx = mp.get_context("spawn" if args.device.startswith("cuda") else "fork")  # fork: no re-import on CPU
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_one, args=(args, kind, n, send))
    proc.start()
    proc.join()
    if proc.exitcode != 0 or not recv.poll():
        return float("nan"), float("nan")
    return recv.recv()


def main(argv=None) -> list[dict]:
    """Print the table; return one row per (length, figure) for ``python -m bench``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="4096,16384,32768")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--top-k", type=int, default=100)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--naive-max-gb", type=float, default=8.0, help="skip the baseline above this estimated size")
    p.add_argument("--quick", action="store_true", help="small model at 1K and 2K")
    args = p.parse_args(argv)
    if args.quick:
        args.lengths, args.hidden, args.layers, args.heads, args.top_k = "1024,2048", 128, 2, 4, 32
    print(f"random llama d={args.hidden} layers={args.layers} heads={args.heads} top_k={args.top_k} "
          f"on {args.device} {args.dtype}, {args.threads} threads")
    print(f"{'tokens':>7} {'bare s':>8} {'ours s':>8} {'x bare':>7} {'naive s':>8} {'bare MB':>8} {'ours MB':>8} "
          f"{'naive MB':>9} {'ours/naive mem':>15}")
    itemsize = torch.finfo(getattr(torch, args.dtype)).bits // 8
    out = []
    for n in (int(x) for x in args.lengths.split(",")):
        bt, bm = measure(args, "bare", n)
        ot, om = measure(args, "ours", n)
        naive_bytes = args.layers * args.heads * n * n * itemsize
        fits = naive_bytes <= args.naive_max_gb * 2**30
        nt, nm = measure(args, "naive", n) if fits else (float("nan"), float("nan"))
        mb = 2 ** 20
        print(f"{n:>7} {bt:>8.3f} {ot:>8.3f} {ot / bt:>7.2f} {nt:>8.3f} {bm / mb:>8.0f} {om / mb:>8.0f} "
              f"{nm / mb:>9.0f} {om / nm:>15.3f}", flush=True)
        row = {"bench": "dominant_dimension", "subject": "dominant-dimension (every query)", "tokens": n}
        out += [{**row, "metric": "time / bare (body)", "value": ot / bt, "seconds": ot, "bare_seconds": bt},
                {**row, "metric": "peak mem / naive L x L", "value": om / nm}]
    sys.stdout.flush()
    return out


if __name__ == "__main__":
    main()
