"""A short throughput probe of a loaded model on this machine: prefill and decode tokens/s.

The runner prints a time estimate before a run from it (and refuses a plan longer than
``--max-hours``), and ``ctxlens profile`` sizes its suite with it. Prefill is timed at the plan's
own lengths (issue 33 part 4: a probe at 32 tokens only measured the per-forward overhead, and
estimates ran 3.5-7.5x long): one forward on random token ids at the shortest and one at the
longest length the plan uses, the longest capped so that the probe stays within its budget. The
per-token cost is linear in the length between the two (``a + b n``: the weights' cost per token
and attention's quadratic term), so a forward of ``n`` tokens costs ``n (a + b n)`` seconds.
Decode is timed at the plan's batch, as the extra time of a longer greedy generation over a
one-token one from the same prompts (neither may stop early). A plan that takes the dominant
RoPE dimension or the top pairs of (query, key) pairs (the rope-distance paper, Sections 4.1-4.2:
per pair, every layer's and head's per-frequency contributions) pays for each pair beside its
forwards: on SmolLM2-135M at 256 tokens with 238 queries and 64 keys each, several times the
forward itself; the probe times it as the extra time of ``probes.dominant.accumulate`` on a
short window over the same window's q/k scan. An estimate, not a benchmark (``bench/`` holds
those; ``bench/estimate_accuracy.py`` compares estimates with real runs).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

START = 32  # tokens of the first timed prefill
MAX_PROBE = 4096  # longest prefill the probe times
DECODE_PROMPT, DECODE_NEW = 32, 16
PAIR_WINDOW, PAIR_QUERIES, PAIR_TOP = 128, 64, 32  # the window, queries and top-k keys the pair cost is timed on


@dataclass(frozen=True)
class Throughput:
    """Prefill tokens/s of one forward over ``at`` tokens, the growth ``slope`` of the per-token
    seconds per token of length (>= 0), decoding steps/s (at the probed batch), what the probe took,
    and the seconds of one (query, key) pair's RoPE contributions at every layer and head (0: not timed)."""

    prefill: float
    at: int
    slope: float
    decode: float
    seconds: float
    pair: float = 0.0

    def prefill_seconds(self, length: int, sequences: int = 1) -> float:
        """Estimated seconds of ``sequences`` forwards of ``length`` tokens each."""
        per_token = 1.0 / self.prefill + self.slope * (length - self.at)
        return sequences * length * max(per_token, 0.5 / self.prefill)  # never below half the measured cost

    def through(self, length: int, took: float) -> Throughput:
        """This pace with its slope re-fitted so that one forward of ``length`` (> ``at``) tokens takes
        ``took`` seconds, as timed: the per-token cost at ``at`` stays, the growth between is linear.
        Its ``prefill_seconds(length)`` is then ``took``, up to the floor of half the measured cost."""
        if length <= self.at:
            return self
        slope = max(0.0, (took / length - 1.0 / self.prefill) / (length - self.at))
        return dataclasses.replace(self, slope=slope, seconds=self.seconds + took)

    def decode_seconds(self, new_tokens: int) -> float:
        return new_tokens / self.decode

    def pair_seconds(self, pairs: int) -> float:
        """Estimated seconds of ``pairs`` (query, key) pairs' contributions beyond their forwards."""
        return pairs * self.pair

    def describe(self) -> str:
        pace = f"decode {self.decode:,.1f} steps/s" if math.isfinite(self.decode) else "no decoding"
        pairs = f", {self.pair * 1e3:.3g} ms per (query, key) pair" if self.pair else ""
        return (f"prefill {self.prefill:,.0f} tokens/s at {self.at} tokens, {pace}{pairs} "
                f"(probe {self.seconds:.1f} s)")


def _timed(lm: LM, fn: Callable[[], object]) -> float:
    sync = torch.cuda.synchronize if lm.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def _best(lm: LM, fn: Callable[[], object], cheap: float) -> float:
    """Seconds of ``fn``: the best of two runs when one is cheaper than ``cheap`` (a busy machine's
    spikes would otherwise set the pace)."""
    first = _timed(lm, fn)
    return min(first, _timed(lm, fn)) if first < cheap else first


@torch.inference_mode()
def measure(lm: LM, budget: float = 3.0, seed: int = 0, lengths: Sequence[int] | None = None, batch: int = 1,
            decode: bool = True, pairs: bool = False) -> Throughput:
    """Probe ``lm`` (an ``LM``) for about ``budget`` seconds (after two warm-up forwards) at the
    shortest and longest of ``lengths`` (default: 32 and the model's positions, up to 4096) and,
    with ``decode``, decoding at ``batch`` (else its pace is left infinite: the plan generates
    nothing), and with ``pairs`` the cost of one (query, key) pair's RoPE contributions (a model
    with RoPE); see the module docstring."""
    limit = max(lengths) if lengths else MAX_PROBE
    if lm.info.max_positions and not (lengths and getattr(lm, "extrapolate", False)):
        limit = min(limit, lm.info.max_positions)
    low = max(1, min(min(lengths) if lengths else START, limit))
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, lm.vocab_size, (max(1, batch), limit), generator=gen)  # [batch, limit]
    for _ in range(2):  # warm-up: the first forwards of a process are several times slower
        lm.final_hidden(ids[:1, :min(16, limit)])
    began = time.perf_counter()
    t_low = _best(lm, lambda: lm.final_hidden(ids[:1, :low]), budget / 12)
    high = _longest(low, t_low, limit, budget / 3)
    t_high = _best(lm, lambda: lm.final_hidden(ids[:1, :high]), budget / 12) if high > low else t_low
    slope = max(0.0, (t_high / high - t_low / low) / (high - low)) if high > low else 0.0
    pace = _decode_rate(lm, ids, limit, batch, budget - (time.perf_counter() - began)) if decode else math.inf
    pair = pair_cost(lm, ids[:1, :PAIR_WINDOW]) if pairs else 0.0
    return Throughput(prefill=high / max(t_high, 1e-9), at=high, slope=slope, decode=pace,
                      seconds=time.perf_counter() - began, pair=pair)


@torch.inference_mode()
def pair_cost(lm: LM, ids: torch.Tensor | None = None) -> float:
    """Seconds per (query, key) pair of ``probes.dominant.accumulate`` on ids [1, n] (default: ``PAIR_WINDOW``
    seeded random ids, fewer for a model with fewer positions; ``PAIR_QUERIES`` queries, ``PAIR_TOP`` keys
    each, every attention layer): its time over a bare q/k scan of the same ids, the better of two of each,
    divided by its pairs (``query_key_pairs``); at least 0."""
    from ctxlens.probes.dominant import DistanceSums, accumulate, query_key_pairs

    if ids is None:
        n = min(PAIR_WINDOW, lm.info.max_positions or PAIR_WINDOW)
        ids = torch.randint(0, lm.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))  # [1, n]
    layers = lm.layer_indices(None, attention=True)
    n = ids.shape[1]
    scanned = min(_timed(lm, lambda: lm.scan_qk(ids, layers, lambda view: None)) for _ in range(2))
    sums = DistanceSums(layers, lm.n_heads, n, lm.device)
    both = min(_timed(lm, lambda: accumulate(lm, ids, layers, sums, PAIR_TOP, PAIR_QUERIES)) for _ in range(2))
    return max(0.0, both - scanned) / query_key_pairs(n, PAIR_QUERIES, PAIR_TOP)


def _longest(low: int, t_low: float, limit: int, allowed: float) -> int:
    """The longest length up to ``limit`` whose forward should take at most ``allowed`` seconds,
    from one forward of ``low`` tokens taking ``t_low`` (the cost grows at least linearly); at least ``low``."""
    if t_low <= 0 or limit * t_low / low <= allowed:
        return limit
    return max(low, min(limit, int(low * allowed / t_low)))


def _decode_rate(lm: LM, ids: torch.Tensor, limit: int, batch: int, budget: float) -> float:
    """Decoding steps per second of ``batch`` sequences after a short prompt: the extra steps over
    the extra time of a longer generation from the same prompts; both generate exactly their count
    (no end-of-text stop), and the shared prefill cancels out. The cost of a step's attention over a
    long context is left out (the prefill's quadratic term dominates such prompts)."""
    prompt_len = max(1, min(DECODE_PROMPT, limit - DECODE_NEW - 1)) if limit > DECODE_NEW + 1 else 1
    prompt = ids[:max(1, batch), :prompt_len]  # [batch, prompt_len]
    pad = 0
    warm = _timed(lm, lambda: lm.greedy(prompt, 2, pad, 2))  # warm-up of the generation path, and its pace
    new = max(2, min(DECODE_NEW, limit - prompt_len, int(max(budget, 0.3) / 3 / max(warm / 2, 1e-6))))
    t_one = _best(lm, lambda: lm.greedy(prompt, 1, pad, 1), max(budget, 0.3) / 12)
    t_new = _timed(lm, lambda: lm.greedy(prompt, new, pad, new))
    extra = t_new - t_one
    return (new - 1) / extra if extra > 0 else new / t_new  # a noisy machine: at least the whole call's pace
