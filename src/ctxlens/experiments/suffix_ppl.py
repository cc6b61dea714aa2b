"""``suffix-ppl``: perplexity of the last N tokens given a long prefix, at several lengths.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section
4 (suffix perplexity, the intrinsic metric of Figure 2 and Table 8) and Appendix C (Table 3,
"token suffix ppl"): like sliding-window evaluation, only the last ``suffix_len`` tokens of each
window are scored, each given everything before it. The scored suffix tokens are the same at
every length (windows are cropped on the left), so lengths differ only in how much context
precedes them. One unit per length, one row per length.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxlens.core.options import PositiveInt, option
from ctxlens.experiments.base import Experiment
from ctxlens.experiments.registry import (
    DEMO_GEOMETRY,
    EXTRAPOLATE,
    SMOKE_SEQUENCES,
    DemoStep,
    Smoke,
    T,
    register,
    summary,
)
from ctxlens.probes import suffix as sx
from ctxlens.probes.perplexity import suffix_perplexity


@dataclass
class Config(sx.SuffixOptions):
    lengths: list[PositiveInt] = option(factory=lambda: [256, 512, 1024, 2048],
                                        help="sequence lengths (prefix + suffix), in tokens")

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.lengths)


def plan(config: Config) -> list[dict]:
    return [{"length": length, "seed": config.seed} for length in config.lengths]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    return [{"source": config.source, "cut_length": cut.cut_length,
             "prefix_len": length - config.suffix_len, "suffix_len": config.suffix_len,
             "n_sequences": windows.shape[0],
             **suffix_perplexity(lm, windows, config.suffix_len, config.batch_size)}]


register(Experiment(
    "suffix-ppl", Config, plan, run, needs=("token_loss",), doc=summary(__doc__),
    paper="geometry", section="Section 4",
    smoke=Smoke({"lengths": [32, 64, 128], "n_sequences": 4, "suffix_len": 8},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L]}),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T // 4, T, 2 * T], "n_sequences": 4},
                   {**DEMO_GEOMETRY, "lengths": [T // 4, T], "n_sequences": 2}, model_options=EXTRAPOLATE),),
))
