"""Every model experiment's wall time and peak memory over the bare forward of the same tokens.

Issue 9, part 4. Targets (representation and loss experiments): wall time at most 1.15x the bare
forward on a CPU and 1.10x on a GPU; peak memory at most 1.2x. The experiments implement seed
000 (ACCS, anisotropy, suffix perplexity, collapse modes: "How much do contextualized
representations encode long-range context?"), the intrinsic-entropy paper (loss vs visible length, intrinsic
entropy: "Intrinsic Entropy of Context Length Scaling in LLMs") and the rope-distance paper (RoPE dimensions,
dominant dimension, positional heads: "On the token distance modeling ability of higher RoPE
attention dimension").

Method, per experiment and length, all in one process on one random-init llama:

1. a warm-up ``run`` of every unit of the experiment (fresh cache) records, through a forward
   pre-hook on the base model, every batch of token ids the experiment forwards;
2. the bare baseline forwards exactly those batches with no hooks: ``LM.base_forward`` (the
   body, no LM head), or ``model(ids)`` (body + LM head on every position) for experiments that
   score every position (``token-loss``); the table says which;
3. wall time: median over ``--repeats`` interleaved pairs (experiment with a fresh cache, so it
   recomputes everything, its random windows included; then the bare batches);
4. peak memory: bytes allocated on top of what was live before, at the peak: the CUDA
   allocator's peak on a GPU; on a CPU the running sum of the torch profiler's allocation and
   free events (``profile_memory=True``: every tensor the CPU allocator hands out, including
   kernels' scratch buffers, independent of glibc's heap and of the resident set).

RoPE/q-k experiments (``kind`` qk: top-k keys of queries over every earlier key) have no target:
their extra logits work is the measurement itself (quadratic in length for all queries, so the
bench samples ``n_queries`` of them). Not here: the generation tasks (ruler, niah-*, ...; their
cost is the decoding backend's), head-masking (positional-heads plus masked perplexity, both
covered), and the sparse-parity MLP experiments (no language model).

CPU (default without CUDA): llama d=256, 4 layers, 8 heads (4 kv), vocab 4096 (the LM head
costs about 20% of the body, as in a 1B model), float32, at 1K, 4K and 16K tokens.
GPU: a 1B-class llama (Llama-3.2-1B's shape: d=2048, 16 layers, 32 heads, 8 kv heads, MLP 8192,
vocab 128256, tied embeddings) in bfloat16 with sdpa at 8K and 32K tokens, printing tokens per
second of the experiment and of the bare forward.

    python bench/experiment_overhead.py                    # CPU: 1K, 4K, 16K (about 15 min)
    python bench/experiment_overhead.py --quick            # CPU: 1K, representation + loss only
    python bench/experiment_overhead.py --only accs-layers,token-loss --lengths 2048
    python bench/experiment_overhead.py --device cuda      # GPU: 1B llama, bf16, 8K and 32K
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ctxlens.core.timing import timed

TARGET_TIME = {"cpu": 1.15, "cuda": 1.10}
TARGET_MEMORY = 1.2


@dataclass(frozen=True)
class Spec:
    """How the bench runs one experiment at ``length`` tokens with ``n`` sequences."""

    kind: str  # representation | loss | qk
    options: Callable[[int, int], dict]
    baseline: str = "body"  # body: base model only | logits: model(ids), LM head on every position


def _suffix(n: int) -> dict:
    return {"source": "random", "n_sequences": n, "batch_size": n, "suffix_len": 32}


SPECS: dict[str, Spec] = {
    # loss
    "token-loss": Spec("loss", lambda L, n: {"source": "random", "lengths": [L], "n_samples": n}, "logits"),
    "suffix-ppl": Spec("loss", lambda L, n: {**_suffix(n), "lengths": [L]}),
    "loss-vs-length": Spec("loss", lambda L, n: {"source": "random", "lengths": [L // 2, L], "n_samples": 1,
                                                 "n_scored": n, "batch_tokens": n * L}),
    "collapse-modes": Spec("loss", lambda L, n: {**_suffix(n), "length": L, "long_length": L,
                                                 "conditions": ["base", "shuffled"], "frequency_source": "random",
                                                 "frequency_tokens": 4096, "rank_bins": 16}),
    "intrinsic-entropy": Spec("loss", lambda L, n: {"source": "random", "lengths": [L // 2, L],
                                                    "n_samples": max(4, n), "entropy_n": [2],
                                                    "thresholds": [0.05], "kde_samples": 64,
                                                    "batch_tokens": max(4, n) * L}),
    "rope-theta-sweep": Spec("loss", lambda L, n: {**_suffix(n), "thetas": [500000.0], "ppl_lengths": [L],
                                                   "accs_lengths": [L], "needle_lengths": []}),
    # representation
    "accs-layers": Spec("representation", lambda L, n: {**_suffix(n), "lengths": [L], "layers": None}),
    "accs-boundary": Spec("representation", lambda L, n: {**_suffix(n), "lengths": [L], "boundaries": [0.5, 1.0]}),
    "accs-length": Spec("representation", lambda L, n: {**_suffix(n), "lengths": [L]}),
    "anisotropy-compression": Spec("representation", lambda L, n: {**_suffix(n), "lengths": [L],
                                                                   "windows": [1, 16, 0], "n_bins": 0}),
    # q/k analyses: no target (their logits work is the measurement)
    "rope-dims": Spec("qk", lambda L, n: {"source": "random", "lengths": [L], "n_samples": 1, "n_pairs": 1000}),
    "dominant-dimension": Spec("qk", lambda L, n: {"source": "random", "lengths": [L], "n_samples": 1,
                                                   "n_queries": 256}),
    "positional-heads": Spec("qk", lambda L, n: {"source": "random", "lengths": [L], "n_samples": 1,
                                                 "n_queries": 256}),
    "rope-dim-ablation": Spec("qk", lambda L, n: {"source": "random", "lengths": [L], "n_samples": 1,
                                                  "ablations": ["high:25%"], "n_queries": 64}),
}
QUICK = [name for name, spec in SPECS.items() if spec.kind != "qk"]


def model_config(device: str, args):
    """The llama config the bench runs: tiny on a CPU, 1B-class on a GPU (or as overridden)."""
    from ctxlens.lm.tiny import tiny_config

    gpu = device.startswith("cuda")
    hidden = args.hidden or (2048 if gpu else 256)
    heads = args.heads or (32 if gpu else 8)
    return tiny_config(
        "llama", hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=args.layers or (16 if gpu else 4),
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 4), head_dim=hidden // heads,
        vocab_size=args.vocab or (128256 if gpu else 4096), max_position_embeddings=1 << 17,
        tie_word_embeddings=gpu,  # the GPU model is Llama-3.2-1B's shape: tied embeddings, 1.24B parameters
    )


def build_lm(device: str, dtype: torch.dtype, args):
    """A random-init llama on ``device`` (built there directly: no CPU copy of 1B parameters)."""
    from transformers import AutoModelForCausalLM

    from ctxlens.lm import from_model

    torch.manual_seed(0)
    config = model_config(device, args)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return from_model(model.eval(), name="random-llama")


# -- measuring ---------------------------------------------------------------------------------

def peak_bytes(fn, device: str) -> int:
    """Peak bytes of tensors ``fn`` holds on top of what was allocated before it ran."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    return cpu_peak_bytes(fn)


def cpu_peak_bytes(fn) -> int:
    """Peak of the running sum of CPU allocations minus frees while ``fn`` runs (torch profiler
    memory events: every tensor storage and kernel scratch buffer from the CPU allocator)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


class Recorder:
    """Records the token ids of every forward of ``lm``'s base model while active."""

    def __init__(self, lm):
        self.lm, self.batches = lm, []

    def __enter__(self):
        def pre(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)  # [B, L]
            if ids is not None:
                self.batches.append(ids.detach().clone())

        self.handle = self.lm.model.base_model.register_forward_pre_hook(pre, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def measure(lm, name: str, length: int, n: int, device: str, repeats: int) -> dict:
    """Seconds, tokens and peak bytes of experiment ``name`` and of its bare forwards."""
    from ctxlens.experiments import get_experiment, make_config

    spec, exp = SPECS[name], get_experiment(name)
    config = make_config(exp.Config, spec.options(length, n))
    units = exp.plan(config)

    def experiment():
        cache = {}
        for unit in units:
            exp.run(lm, config, unit, cache)

    with Recorder(lm) as rec:
        experiment()  # warm-up; records the batches it forwards
    batches = rec.batches

    def bare():
        with torch.inference_mode():
            for ids in batches:
                if spec.baseline == "logits":
                    lm.model(input_ids=ids, use_cache=False)
                else:
                    lm.base_forward(ids)

    bare()  # warm-up
    t_exp, t_bare = [], []
    for _ in range(repeats):  # interleaved, so drift on a shared machine hits both alike
        t_bare.append(timed(bare, device))
        t_exp.append(timed(experiment, device))
    return {"experiment": name, "kind": spec.kind, "baseline": spec.baseline, "tokens": length,
            "forwarded_tokens": sum(int(b.numel()) for b in batches), "forwards": len(batches),
            "seconds": statistics.median(t_exp), "bare_seconds": statistics.median(t_bare),
            "peak_bytes": peak_bytes(experiment, device), "bare_peak_bytes": peak_bytes(bare, device)}


def rows_of(m: dict, device: str) -> list[dict]:
    """Tidy suite rows of one measurement: time ratio, peak-memory ratio (with targets)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    has_target = m["kind"] != "qk"
    base = {"bench": "experiment_overhead", "subject": m["experiment"], "tokens": m["tokens"], "device": kind}
    t_ratio = m["seconds"] / m["bare_seconds"]
    m_ratio = m["peak_bytes"] / max(1, m["bare_peak_bytes"])
    return [
        {**base, "metric": f"time / bare ({m['baseline']})", "value": t_ratio,
         "target": f"<= {TARGET_TIME[kind]}" if has_target else None,
         "ok": t_ratio <= TARGET_TIME[kind] if has_target else None,
         "seconds": m["seconds"], "bare_seconds": m["bare_seconds"],
         "tokens_per_s": m["forwarded_tokens"] / m["seconds"],
         "bare_tokens_per_s": m["forwarded_tokens"] / m["bare_seconds"]},
        {**base, "metric": "peak mem / bare", "value": m_ratio,
         "target": f"<= {TARGET_MEMORY}" if has_target else None,
         "ok": m_ratio <= TARGET_MEMORY if has_target else None,
         "peak_mib": m["peak_bytes"] / 2**20, "bare_peak_mib": m["bare_peak_bytes"] / 2**20},
    ]


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default=None, help="default: bfloat16 on a GPU, float32 on a CPU")
    p.add_argument("--lengths", default=None, help="default: 1024,4096,16384 on a CPU, 8192,32768 on a GPU")
    p.add_argument("--only", default=None, help="comma-separated experiments (default: all; --quick: no q/k ones)")
    p.add_argument("--tokens", type=int, default=None,
                   help="tokens per experiment per length: sequences = max(1, tokens // length) "
                        "(default 4096 on a CPU, 2048 with --quick, 65536 on a GPU)")
    p.add_argument("--repeats", type=int, default=None, help="default 3 (1 for lengths above 4K on a CPU)")
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--heads", type=int, default=None)
    p.add_argument("--vocab", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; --quick: 1)")
    p.add_argument("--quick", action="store_true",
                   help="1K tokens on a CPU (8K on a GPU), representation and loss experiments only")
    args = p.parse_args(argv)
    gpu = args.device.startswith("cuda")
    if gpu and not torch.cuda.is_available():
        from ctxlens.core.errors import CtxlensError

        raise CtxlensError("--device cuda was asked for but torch sees no CUDA GPU; run on a GPU or pass --device cpu.")
    if args.threads or (args.quick and not gpu):
        torch.set_num_threads(args.threads or 1)
    dtype = getattr(torch, args.dtype or ("bfloat16" if gpu else "float32"))
    default = ("8192" if gpu else "1024") if args.quick else ("8192,32768" if gpu else "1024,4096,16384")
    lengths = [int(x) for x in (args.lengths or default).split(",")]
    names = args.only.split(",") if args.only else (QUICK if args.quick else list(SPECS))
    unknown = [x for x in names if x not in SPECS]
    if unknown:
        raise SystemExit(f"unknown experiments {unknown}; known: {', '.join(SPECS)}")
    budget = args.tokens or (65536 if gpu else 2048 if args.quick else 4096)
    lm = build_lm(args.device, dtype, args)
    cfg = lm.config
    print(f"random llama d={cfg.hidden_size} layers={cfg.num_hidden_layers} heads={cfg.num_attention_heads} "
          f"vocab={cfg.vocab_size} on {args.device} {str(dtype).removeprefix('torch.')}, "
          f"{torch.get_num_threads()} threads", flush=True)
    print(f"{'experiment':24} {'tokens':>7} {'fwd':>4} {'exp s':>8} {'bare s':>8} {'time x':>7} "
          f"{'exp tok/s':>10} {'bare tok/s':>10} {'mem x':>6}  bare", flush=True)
    rows = []
    for length in lengths:
        n = max(1, budget // length)
        repeats = args.repeats or (3 if gpu or length <= 4096 else 1)
        for name in names:
            try:
                m = measure(lm, name, length, n, args.device, repeats)
            except Exception as err:  # one broken experiment must not hide the others' figures
                print(f"{name:24} {length:>7} FAILED: {type(err).__name__}: {err}", flush=True)
                rows.append({"bench": "experiment_overhead", "subject": name, "tokens": length,
                             "metric": "error", "value": float("nan"), "ok": False, "error": str(err)})
                continue
            got = rows_of(m, args.device)
            rows += got
            t, mem = got
            print(f"{name:24} {length:>7} {m['forwards']:>4} {m['seconds']:>8.3f} {m['bare_seconds']:>8.3f} "
                  f"{t['value']:>7.3f} {t['tokens_per_s']:>10.0f} {t['bare_tokens_per_s']:>10.0f} "
                  f"{mem['value']:>6.2f}  {m['baseline']}", flush=True)
    return rows


if __name__ == "__main__":
    main()
