"""loss-vs-length cost: wall time over a bare forward of the same windows, and peak memory against
the naive full-logits computation at a 128K vocabulary (the intrinsic-entropy paper, Section 2.2.2 / Figure 2).

Time: every measure unit of ``loss-vs-length`` (fresh cache) against the base model's forward of
exactly the windows it scores, in the same batches, with no LM head (target <= 1.10). Memory: one
batch of windows scored by the experiment's path (LM head on the last positions only, chunked
log-softmax) against ``model(windows).logits`` + log-softmax over every position, the naive way
(target: at least 4x less). Peak memory is the CUDA allocator's peak on a GPU, and the process'
peak resident set on a CPU (VmHWM, reset through /proc/self/clear_refs, with glibc told to mmap
blocks >= 64 KiB so that freed tensors leave the resident set). The LM head runs once per window,
so the time ratio is worst for short windows of a small model with a large vocabulary.

    python bench/loss_vs_length.py --quick          # CPU, one thread, about 30 s
    python bench/loss_vs_length.py                  # CPU: d=256, 1K, 4K, 16K, about 7 min on 2 cores
    python bench/loss_vs_length.py --device cuda    # GPU: d=1024, 256 to 16K
"""

from __future__ import annotations

import argparse
import statistics

import torch
from transformers import AutoModelForCausalLM

from ctxlens.core.timing import timed as _timed
from ctxlens.experiments import loss_vs_length as E
from ctxlens.experiments.base import make_config
from ctxlens.lm import from_model
from ctxlens.lm.tiny import tiny_config


def _peak_bytes(fn, device: str) -> int:
    """Peak memory fn adds over what is held before it runs."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    _release_freed_memory()
    with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS
        f.write("5")
    before = _status_kb("VmRSS")
    fn()
    return (_status_kb("VmHWM") - before) * 1024


def _release_freed_memory() -> None:
    """Make glibc serve blocks >= 64 KiB with mmap, so a freed tensor leaves the resident set and
    a later peak is not hidden by memory reused from the heap."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD
    libc.malloc_trim(0)


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def main(argv=None) -> list[dict]:
    """Print the report; return its figures as rows for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="small CPU-sized run (about 30 s)")
    p.add_argument("--lengths", default=None)
    p.add_argument("--n-samples", type=int, default=None)
    p.add_argument("--n-scored", type=int, default=None)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--memory-tokens", type=int, default=2048,
                   help="tokens in the batch whose peak memory is compared (naive logits: 2 x 4 bytes x vocab each)")
    args = p.parse_args(argv)
    quick, gpu = args.quick, args.device.startswith("cuda")
    # full size: 1K-16K tokens; a d=256 body on a CPU (d=1024 with 4 x 16 windows took over 10 minutes
    # at 16K on 2 cores), d=1024 on a GPU
    lengths = args.lengths or ("128,256,512" if quick else "256,1024,4096,16384" if gpu else "1024,4096,16384")
    hidden = args.hidden or (1024 if gpu and not quick else 256)
    layers = args.layers or 4
    n_samples = args.n_samples or (4 if gpu and not quick else 2)
    n_scored = args.n_scored or (16 if gpu and not quick else 4)
    repeats = args.repeats or (5 if gpu and not quick else 3)
    if args.threads or quick:  # a small model on a shared CPU runs fastest on one thread
        torch.set_num_threads(args.threads or 1)

    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=args.vocab, hidden_size=hidden, intermediate_size=4 * hidden,
                         num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=4,
                         head_dim=hidden // 8, max_position_embeddings=1 << 17)
    model = AutoModelForCausalLM.from_config(config).to(args.device, getattr(torch, args.dtype)).eval()
    lm = from_model(model)
    cfg = make_config(E.Config, {"source": "random", "lengths": lengths, "n_samples": n_samples,
                                 "n_scored": n_scored, "batch_tokens": 1 << 11 if quick else 1 << 16})
    units = [u for u in E.plan(cfg) if u["stage"] == "measure"]
    ids = E.samples(lm, cfg, max(cfg.lengths) + cfg.n_scored, {})
    key = ("samples", cfg.source, cfg.seed, max(cfg.lengths) + cfg.n_scored, cfg.n_samples)
    batches = {}  # length -> the batches of windows the experiment forwards
    for u in units:
        windows, _ = E.scored_windows(ids, u["length"], cfg.n_scored, max(cfg.lengths))
        rows = max(1, cfg.batch_tokens // u["length"])
        batches[u["length"]] = [windows[s : s + rows].to(args.device) for s in range(0, len(windows), rows)]

    def experiment(unit):
        E.run(lm, cfg, unit, {key: ids})  # fresh cache: the unit measures from scratch

    def bare(unit):
        with torch.inference_mode():
            for b in batches[unit["length"]]:
                lm.base_forward(b)

    print(f"llama d={hidden} layers={layers} vocab={args.vocab} on {args.device} {args.dtype}, "
          f"{torch.get_num_threads()} threads; {n_samples} samples x {n_scored} scored positions per length")
    total_exp = total_bare = 0.0
    out = []
    row = {"bench": "loss_vs_length", "subject": "loss-vs-length"}
    for u in units:
        experiment(u), bare(u)  # warm-up
        t_exp, t_bare = [], []
        for _ in range(repeats):  # interleaved, so drift hits both alike
            t_bare.append(_timed(lambda u=u: bare(u), args.device))  # u=u binds this iteration's unit (B023)
            t_exp.append(_timed(lambda u=u: experiment(u), args.device))
        me, mb = statistics.median(t_exp), statistics.median(t_bare)
        total_exp, total_bare = total_exp + me, total_bare + mb
        print(f"  length {u['length']:>6}: experiment {me:.4f} s, bare forward {mb:.4f} s, ratio {me / mb:.3f}")
        out.append({**row, "tokens": u["length"], "metric": "time / bare (body)", "value": me / mb,
                    "seconds": me, "bare_seconds": mb})
    print(f"time: experiment {total_exp:.4f} s, bare forward {total_bare:.4f} s, "
          f"ratio {total_exp / total_bare:.3f} (target <= 1.10)")
    out.append({**row, "tokens": None, "metric": "time / bare (body), all lengths", "value": total_exp / total_bare,
                "target": "<= 1.1", "ok": total_exp / total_bare <= 1.10})

    # memory: the largest batch of windows, scored both ways
    longest = batches[max(batches)][0]  # the longest windows, as many as fit the memory budget
    big = longest[: max(1, args.memory_tokens // longest.shape[1])]
    targets = torch.randint(0, args.vocab, (big.shape[0],), device=args.device)

    def ours():
        finals = [f for f, _ in E.iter_last_states(lm, big, big.numel())]
        E.next_token_nll(lm, torch.cat(finals), targets)

    def naive():
        with torch.inference_mode():
            logits = lm.model(input_ids=big).logits  # [b, l, vocab]
            logp = torch.log_softmax(logits.float(), -1)
            -logp[:, -1].gather(-1, targets[:, None])

    ours(), naive()  # warm-up
    m_ours, m_naive = _peak_bytes(ours, args.device), _peak_bytes(naive, args.device)
    print(f"memory for {big.shape[0]} windows of {big.shape[1]} tokens: experiment {m_ours / 2**20:.1f} MiB, "
          f"naive full logits {m_naive / 2**20:.1f} MiB, {m_naive / max(m_ours, 1):.1f}x less (target >= 4)")
    saving = m_naive / max(m_ours, 1)
    out.append({**row, "tokens": int(big.shape[1]), "metric": "peak mem: naive logits / experiment", "value": saving,
                "target": ">= 4", "ok": saving >= 4})
    return out


if __name__ == "__main__":
    main()
