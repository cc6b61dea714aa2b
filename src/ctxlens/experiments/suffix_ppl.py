"""``suffix-ppl``: perplexity of the last N tokens given a long prefix, at several lengths.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section
4 (suffix perplexity, the intrinsic metric of Figure 2 and Table 8) and Appendix C (Table 3,
"token suffix ppl"): like sliding-window evaluation, only the last ``suffix_len`` tokens of each
window are scored, each given everything before it. The scored suffix tokens are the same at
every length (windows are cropped on the left), so lengths differ only in how much context
precedes them, and sequence i is the same suffix at every length. One unit per length, writing
one summary row (no ``stage``; ``nll`` the mean over sequences, ``nll_se`` its standard error,
``ppl``) and one ``stage="sequence"`` row per sequence with its mean suffix NLL
(``sequence_nll``), so that two lengths can be compared paired over sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.columns import Column
from ctxlens.core.options import Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import BOS, LENGTH, NLL, SEED, WINDOWS, declare
from ctxlens.experiments.registry import DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, register
from ctxlens.probes import suffix as sx
from ctxlens.probes.perplexity import suffix_nll

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.SuffixOptions):
    lengths: list[Tokens] = option(factory=lambda: [256, 512, 1024, 2048],
                                        help="sequence lengths (prefix + suffix), in tokens")
    bos: bool | None = option(None, "BOS first in every window; unset (auto): when the tokenizer adds one")

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.lengths)


plan = sx.units  # one unit per length


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    per = [float(v) for b0 in range(0, windows.shape[0], config.batch_size)
           for v in suffix_nll(lm, windows[b0:b0 + config.batch_size], config.suffix_len).double().mean(1)]  # [n]
    coords = sx.window_coords(config, cut, length, n_sequences=windows.shape[0])
    rows = [{**coords, **summary_of(per, config.suffix_len)}]
    return rows + [{**coords, "stage": "sequence", "sequence": i, "sequence_nll": v if math.isfinite(v) else None,
                    "flag": None if math.isfinite(v) else "non-finite NLL: the model's logits hold NaN or inf"}
                   for i, v in enumerate(per)]


def summary_of(per_sequence: list[float], suffix_len: int) -> dict:
    """{"n_tokens", "nll", "nll_se", "ppl", "flag"} from each sequence's mean suffix NLL: the mean
    over sequences (each scores ``suffix_len`` tokens: the mean over all tokens) and its standard
    error over sequences (None for one sequence)."""
    n = len(per_sequence)
    mean = sum(per_sequence) / n
    if not math.isfinite(mean):
        return {"n_tokens": n * suffix_len, "nll": None, "nll_se": None, "ppl": None, "flag": "non-finite loss"}
    se = math.sqrt(sum((x - mean) ** 2 for x in per_sequence) / (n - 1) / n) if n > 1 else None
    return {"n_tokens": n * suffix_len, "nll": mean, "nll_se": se, "ppl": math.exp(min(mean, 700.0)), "flag": None}


COLUMNS = declare(
    LENGTH, SEED, WINDOWS, BOS, NLL,
    Column("stage", str, "", "'sequence' rows per sequence, absent on the rows over all sequences",
           choices=("sequence",)),
    Column("sequence", int, "index", "index of the sequence (the same suffix tokens at every length)"),
    Column("sequence_nll", float, "nats", "mean NLL of the sequence's suffix tokens", low=0.0),
)


register(Experiment(
    "suffix-ppl", Config, plan, run, needs=("token_loss",), doc=summary(__doc__),
    paper="geometry", section="Section 4",
    smoke=Smoke({"lengths": [32, 64, 128], "n_sequences": 4, "suffix_len": 8},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L]}),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T // 4, T, 2 * T], "n_sequences": 4},
                   {**DEMO_GEOMETRY, "lengths": [T // 4, T], "n_sequences": 2}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
