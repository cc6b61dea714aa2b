"""``collapse-modes``: mean negative log-probability of every vocabulary entry, by token frequency rank.

The geometry paper ("How much do contextualized representations encode long-range context?"), Appendix
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
A model whose tokenizer adds a BOS reads it first in every condition (``bos``, unset: auto); the
shuffled condition shuffles the text prefix after it (``probes.suffix.prefix_shuffle``), and rows
record ``bos``.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Annotated

import torch

from ctxlens.core.columns import Column
from ctxlens.core.options import NonEmpty, NonNegativeCount, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import BOS, CONDITION, LENGTH, SEED, WINDOWS, declare, narrow, pick
from ctxlens.experiments.registry import DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, register
from ctxlens.metrics.geometry import AnisotropyAccumulator
from ctxlens.probes import suffix as sx
from ctxlens.probes.perplexity import suffix_hidden
from ctxlens.probes.windows import cut_windows

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Condition = typing.Literal["base", "shuffled", "long"]
CONDITIONS = typing.get_args(Condition)


@dataclass
class Config(sx.SuffixOptions):
    length: Tokens = option(512, "sequence length (prefix + suffix) of the base and shuffled conditions, "
                                      "in tokens")
    long_length: Tokens = option(2048, "sequence length of the long condition, in tokens (e.g. beyond the "
                                            "training length)")
    conditions: Annotated[list[Condition], NonEmpty] = option(
        factory=lambda: list(CONDITIONS), help="base (text windows), shuffled (the whole text prefix shuffled), "
                                               "long (windows of long_length)")
    frequency_source: str = option("builtin:train", "text source whose token frequencies rank the vocabulary "
                                                    "(the zoo's training text is builtin:train)")
    frequency_tokens: Tokens = option(1_000_000, "tokens of frequency_source counted")
    rank_bins: NonNegativeCount = option(0, "log-spaced frequency-rank bins of the rows; 0: one row per rank")

    def validate(self) -> None:
        super().validate()
        self.check_lengths([self.length], "length")
        self.check_lengths([self.long_length], "long_length")


def plan(config: Config) -> list[Unit]:
    return [{"condition": c, "length": config.long_length if c == "long" else config.length, "seed": config.seed}
            for c in config.conditions]


def token_counts(lm: LM, config: Config, cache: Cache) -> torch.Tensor:
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
def mean_neg_logprob(lm: LM, windows: torch.Tensor, suffix_len: int, batch_size: int) -> tuple[torch.Tensor, dict]:
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


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    condition, length = unit["condition"], unit["length"]
    cut = sx.suffix_windows(lm, config, [config.length] + [config.long_length] * ("long" in config.conditions), cache)
    windows = cut.at(length)  # [n, length]
    if condition == "shuffled":
        shuffle = sx.prefix_shuffle(length - config.suffix_len, 1.0, bos=cut.bos)
        windows = shuffle.apply(windows, list(range(windows.shape[0])), config.seed)
    nll, geometry = mean_neg_logprob(lm, windows, config.suffix_len, config.batch_size)  # [vocab]
    counts = token_counts(lm, config, cache)  # [vocab]
    order = torch.argsort(-counts, stable=True)  # [vocab] token ids, rank 1 (most frequent) first; ties by id
    unigram = -torch.log((counts + 1) / (counts.sum() + lm.vocab_size))  # add-one smoothed prior, nats
    base = sx.window_coords(config, cut, length, n_sequences=windows.shape[0], anisotropy=geometry.get("anisotropy"),
                            flag=geometry["flag"], uniform_nll=math.log(lm.vocab_size))
    rows = []
    for first, last in rank_edges(lm.vocab_size, config.rank_bins):
        ids = order[first - 1:last]
        rows.append({**base, "rank_low": first, "rank_high": last,
                     "token": int(ids[0]) if first == last else None, "count": int(counts[ids].sum()),
                     "nll": float(nll[ids].mean()), "unigram_nll": float(unigram[ids].mean())})
    return rows


COLUMNS = declare(
    narrow(CONDITION, condition=CONDITIONS), LENGTH, SEED, WINDOWS, BOS, pick("anisotropy"),
    Column("uniform_nll", float, "nats", "-log p of a uniform distribution over the vocabulary (reference curve)",
           low=0.0),
    Column("rank_low", int, "rank", "first frequency rank of the bin (1 = most frequent entry)"),
    Column("rank_high", int, "rank", "last frequency rank of the bin"),
    Column("token", int, "index", "the bin's token id when the bin holds one entry", optional=True),
    Column("count", int, "count", "occurrences of the bin's entries in the source"),
    Column("nll", float, "nats", "mean -log p the model gives the bin's entries", low=0.0),
    Column("unigram_nll", float, "nats", "-log p of the bin's entries under the source's unigram distribution",
           low=0.0),
)


register(Experiment(
    "collapse-modes", Config, plan, run, needs=("token_loss",), doc=summary(__doc__),
    paper="geometry", section="Appendix D, Figure 9",
    smoke=Smoke({"length": 32, "long_length": 64, "suffix_len": 4, "n_sequences": 2, "frequency_tokens": 4000,
                 "rank_bins": 16},
                at_length=lambda L: {**SMOKE_SEQUENCES, "length": L, "long_length": L,
                                     "conditions": ["base", "shuffled"], "frequency_source": "random",
                                     "frequency_tokens": 2048, "rank_bins": 8}),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "length": T, "long_length": 2 * T, "n_sequences": 4,
                           "frequency_tokens": 100_000, "rank_bins": 32},
                   {**DEMO_GEOMETRY, "length": T, "long_length": 2 * T, "n_sequences": 2, "frequency_tokens": 20_000,
                    "rank_bins": 16}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
