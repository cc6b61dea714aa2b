"""``token-loss``: mean next-token loss of windows of a text source at several lengths.

The core's smoke analysis: one forward per (length, sample) window through the chunked loss
(``LM.token_losses``), one row per window. It checks that a model, a source and the run
directory work end to end; the paper-grade loss-vs-visible-context curve (seed 001, Section
2.2.2) is the ``loss-vs-length`` experiment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register
from ctxlens.probes.windows import source_windows


@dataclass
class Config:
    source: str = "random"  # text source spec (file, folder, hf:ID) or "random" token ids
    lengths: list[int] = field(default_factory=lambda: [128, 256])
    n_samples: int = 4
    seed: int = 0
    text_field: str = "text"

    def validate(self) -> None:
        positive("lengths", self.lengths)
        positive("n_samples", self.n_samples)


def plan(config: Config) -> list[dict]:
    return [
        {"source": config.source, "length": length, "sample": i, "seed": config.seed}
        for length in config.lengths
        for i in range(config.n_samples)
    ]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    length = unit["length"]
    lm.check_length(length)
    windows = source_windows(lm, config.source, [length], config.n_samples, config.seed, cache,
                             text_field=config.text_field)  # ids [n_samples, length]
    ids = windows.ids[unit["sample"]][None]  # [1, length]
    nll = lm.token_losses(ids)[0]  # [length - 1]
    finite = bool(nll.isfinite().all())
    mean = float(nll.mean()) if finite else None
    return [{
        "n_tokens": length - 1,
        "nll": mean,
        "ppl": math.exp(mean) if finite else None,
        "nll_last": float(nll[-1]) if finite else None,
        "flag": None if finite else "non-finite loss",
    }]


register(Experiment("token-loss", Config, plan, run, needs=("token_loss",), doc=__doc__.splitlines()[0]))
