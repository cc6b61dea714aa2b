"""``collapse-modes``: mean negative log-probability of every vocabulary entry, by token frequency rank.

Seed 000 ("How much do contextualized representations encode long-range context?"), Appendix
D, *Two modes of collapse*, Figure 9: for the suffix tokens of a set of prefixes, the model's
full next-token distribution is averaged (as -log p(v) for every vocabulary entry v) and plotted
against v's frequency rank in the training data. Anisotropic representations were seen to
collapse towards a uniform distribution (a flat curve at log |V|) or towards the unigram prior
(a curve following -log of the unigram frequency). Conditions:

- ``base``: text windows of ``length`` tokens (low anisotropy);
- ``shuffled``: the same windows with the whole prefix shuffled (less compressible);
- ``long``: windows of ``long_length`` tokens, e.g. beyond the training length.

All conditions score the same suffix tokens. Frequencies are counted over ``frequency_tokens``
tokens of ``frequency_source`` (the zoo's training text is ``builtin:train``). Rows per
(condition, rank bin), with the two reference curves (``uniform_nll``, ``unigram_nll``) and
the anisotropy of the condition's final hidden states, so the collapse mode can be read off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.probes import suffix as sx
from ctxlens.probes.perplexity import suffix_hidden
from ctxlens.probes.perturb import Shuffle
from ctxlens.probes.windows import cut_windows
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register
from ctxlens.metrics.geometry import AnisotropyAccumulator

CONDITIONS = ("base", "shuffled", "long")


@dataclass
class Config(sx.SuffixOptions):
    length: int = 512
    long_length: int = 2048
    conditions: list[str] = field(default_factory=lambda: list(CONDITIONS))
    frequency_source: str = "builtin:train"
    frequency_tokens: int = 1_000_000
    rank_bins: int = 0  # 0: one row per rank; else that many log-spaced rank bins

    def validate(self) -> None:
        super().validate()
        self.check_lengths([self.length], "length")
        self.check_lengths([self.long_length], "long_length")
        positive("frequency_tokens", self.frequency_tokens)
        bad = [c for c in self.conditions if c not in CONDITIONS]
        if bad or not self.conditions:
            raise CtxlensError(
                f"conditions must be a non-empty list of {', '.join(CONDITIONS)}, got {self.conditions}; "
                "fix --conditions."
            )
        if self.rank_bins < 0:
            raise CtxlensError(f"rank_bins must be 0 (every rank) or positive, got {self.rank_bins}.")


def plan(config: Config) -> list[dict]:
    return [{"condition": c, "length": config.long_length if c == "long" else config.length, "seed": config.seed}
            for c in config.conditions]


def token_counts(lm, config: Config, cache: dict) -> torch.Tensor:
    """[vocab] float64 counts of each token id over ``frequency_tokens`` tokens of the source."""
    if "counts" not in cache:
        ids = cut_windows(lm, config.frequency_source, config.frequency_tokens, 1, config.seed,
                          text_field=config.text_field, role="frequency source")[0]  # [frequency_tokens]
        cache["counts"] = torch.bincount(ids, minlength=lm.vocab_size)[: lm.vocab_size].double()
    return cache["counts"]


def rank_edges(vocab: int, bins: int) -> list[tuple[int, int]]:
    """[(first, last)] 1-based inclusive rank ranges: every rank, or log-spaced bins."""
    if bins == 0 or bins >= vocab:
        return [(r, r) for r in range(1, vocab + 1)]
    cuts = sorted({int(round(vocab ** (i / bins))) for i in range(bins + 1)} | {1, vocab})
    edges = [(1, cuts[1])] + [(cuts[i] + 1, cuts[i + 1]) for i in range(1, len(cuts) - 1)]
    return [(a, b) for a, b in edges if a <= b]


@torch.inference_mode()
def mean_neg_logprob(lm, windows: torch.Tensor, suffix_len: int, batch_size: int) -> tuple[torch.Tensor, dict]:
    """([vocab] float64 mean over suffix positions of -log p(v), anisotropy dict of the final
    hidden states) for windows [n, L]; the distribution at position t predicts token t + 1."""
    length = windows.shape[1]
    total = torch.zeros(lm.vocab_size, dtype=torch.float64)
    count = 0
    geometry = sx.Guarded(AnisotropyAccumulator())
    for b0 in range(0, windows.shape[0], batch_size):
        hidden = suffix_hidden(lm, windows[b0:b0 + batch_size], length - suffix_len, length)  # [B, N, d]
        geometry.update(hidden.reshape(-1, hidden.shape[-1]))
        for s in range(hidden.shape[1]):  # one position at a time: [B, vocab] logits
            logits = lm.head_logits(hidden[:, s])  # [B, vocab]
            total -= torch.log_softmax(logits.double(), -1).sum(0).cpu()
            count += logits.shape[0]
    return total / count, geometry.result()


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    condition, length = unit["condition"], unit["length"]
    cut = sx.suffix_windows(lm, config, [config.length] + [config.long_length] * ("long" in config.conditions), cache)
    windows = cut.at(length)  # [n, length]
    if condition == "shuffled":
        windows = Shuffle(0, length - config.suffix_len).apply(windows, list(range(windows.shape[0])), config.seed)
    nll, geometry = mean_neg_logprob(lm, windows, config.suffix_len, config.batch_size)  # [vocab]
    counts = token_counts(lm, config, cache)  # [vocab]
    order = torch.argsort(-counts, stable=True)  # [vocab] token ids, rank 1 (most frequent) first; ties by id
    unigram = -torch.log((counts + 1) / (counts.sum() + lm.vocab_size))  # add-one smoothed prior, nats
    base = {"source": config.source, "cut_length": cut.cut_length,
            "prefix_len": length - config.suffix_len, "suffix_len": config.suffix_len,
            "n_sequences": windows.shape[0], "anisotropy": geometry.get("anisotropy"), "flag": geometry["flag"],
            "uniform_nll": math.log(lm.vocab_size)}
    rows = []
    for first, last in rank_edges(lm.vocab_size, config.rank_bins):
        ids = order[first - 1:last]
        rows.append({**base, "rank_low": first, "rank_high": last,
                     "token": int(ids[0]) if first == last else None, "count": int(counts[ids].sum()),
                     "nll": float(nll[ids].mean()), "unigram_nll": float(unigram[ids].mean())})
    return rows


register(Experiment("collapse-modes", Config, plan, run, needs=("token_loss",), doc=__doc__.splitlines()[0]))
