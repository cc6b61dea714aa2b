"""A short throughput probe of a loaded model on this machine: prefill and decode tokens/s.

The runner prints a time estimate before a run from it, and ``ctxlens profile`` sizes its suite
with it. Prefill is timed on random token ids at doubling lengths (32, 64, ...) until one forward
takes a sizeable share of the budget or the model's positions run out; the last two lengths give
the growth of the per-token cost with length (attention's quadratic term), so longer prompts are
estimated slower than the probe's. Decode is timed as the extra time of a longer greedy
generation over a one-token one from the same short prompt (neither may stop early). Batch 1
throughout: an estimate, not a benchmark (``bench/`` holds those).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

START = 32  # tokens of the first timed prefill
MAX_PROBE = 4096  # longest prefill the probe times
DECODE_PROMPT, DECODE_NEW = 32, 16


@dataclass(frozen=True)
class Throughput:
    """Prefill tokens/s of one forward over ``at`` tokens, the growth ``slope`` of the per-token
    seconds per token of length (>= 0), decode tokens/s, and what the probe took."""

    prefill: float
    at: int
    slope: float
    decode: float
    seconds: float

    def prefill_seconds(self, length: int, sequences: int = 1) -> float:
        """Estimated seconds of ``sequences`` forwards of ``length`` tokens each."""
        per_token = 1.0 / self.prefill + self.slope * (length - self.at)
        return sequences * length * max(per_token, 0.5 / self.prefill)  # never below half the measured cost

    def decode_seconds(self, new_tokens: int) -> float:
        return new_tokens / self.decode

    def describe(self) -> str:
        return (f"prefill {self.prefill:,.0f} tokens/s at {self.at} tokens, decode {self.decode:,.1f} tokens/s "
                f"(probe {self.seconds:.1f} s)")


def _timed(lm, fn) -> float:
    sync = torch.cuda.synchronize if lm.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def _best(lm, fn, cheap: float) -> float:
    """Seconds of ``fn``: the best of two runs when one is cheaper than ``cheap`` (a busy machine's
    spikes would otherwise set the pace)."""
    first = _timed(lm, fn)
    return min(first, _timed(lm, fn)) if first < cheap else first


@torch.inference_mode()
def measure(lm, budget: float = 3.0, seed: int = 0) -> Throughput:
    """Probe ``lm`` (an ``LM``) for about ``budget`` seconds (after two warm-up forwards); see the
    module docstring."""
    limit = min(MAX_PROBE, lm.info.max_positions or MAX_PROBE)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, lm.vocab_size, (1, limit), generator=gen)  # [1, limit]
    for _ in range(2):  # warm-up: the first forwards of a process are several times slower
        lm.final_hidden(ids[:, :min(16, limit)])
    began = time.perf_counter()
    points: list[tuple[int, float]] = []
    n = min(START, limit)
    while True:
        window = ids[:, :n]  # [1, n]
        points.append((n, _best(lm, lambda: lm.final_hidden(window), budget / 12)))  # noqa: B023 - called at once
        if n >= limit or points[-1][1] > budget / 6 or time.perf_counter() - began > budget / 2:
            break
        n = min(2 * n, limit)
    (n1, t1), (n2, t2) = points[-2] if len(points) > 1 else points[-1], points[-1]
    slope = max(0.0, (t2 / n2 - t1 / n1) / (n2 - n1)) if n2 > n1 else 0.0
    prompt = ids[:, :min(DECODE_PROMPT, limit - DECODE_NEW)] if limit > DECODE_NEW + 1 else ids[:, :1]
    pad = 0
    warm = _timed(lm, lambda: lm.greedy(prompt, 2, pad, 2))  # warm-up of the generation path, and its pace
    new = max(2, min(DECODE_NEW, limit - prompt.shape[1], int(budget / 3 / max(warm / 2, 1e-6))))
    # decode = the extra tokens over the extra time of a longer generation from the same prompt; both
    # generate exactly their count (no end-of-text stop), and the shared prefill cancels out
    t_one = _best(lm, lambda: lm.greedy(prompt, 1, pad, 1), budget / 12)
    t_new = _timed(lm, lambda: lm.greedy(prompt, new, pad, new))
    extra = t_new - t_one
    decode = (new - 1) / extra if extra > 0 else new / t_new  # a noisy machine: at least the whole call's pace
    return Throughput(prefill=n2 / max(t2, 1e-9), at=n2, slope=slope, decode=decode,
                      seconds=time.perf_counter() - began)
