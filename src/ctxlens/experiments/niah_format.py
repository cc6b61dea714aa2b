"""``niah-format``: needle retrieval across haystack, key and value formats at three depths.

Seed 002 ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Table 4)
compares Essay-Word-Num, Essay-Word-UUID and Repeat-Word-Num needles at depths 0, 50 and 100 %.
One unit is a (length, haystack, key, value, depth) batch of single-needle prompts; ``repeat``
is RULER's noise haystack (one sentence group repeated), ``essay`` running prose.
"""

from __future__ import annotations

from ctxlens.tasks.base import TooShort

from dataclasses import dataclass, field

from ctxlens.core.errors import CtxlensError
from ctxlens.probes.tasks import TaskOptions, flagged, needle_options, rows_for, samples
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register
from ctxlens.tasks.words import KINDS

HAYSTACKS = {"essay": "essay", "repeat": "noise", "needle": "needle"}


@dataclass
class Config(TaskOptions):
    lengths: list[int] = field(default_factory=lambda: [4096])
    haystacks: list[str] = field(default_factory=lambda: ["essay", "repeat"])
    keys: list[str] = field(default_factory=lambda: ["words"])
    values: list[str] = field(default_factory=lambda: ["numbers", "uuids", "words"])
    depths: list[float] = field(default_factory=lambda: [0.0, 50.0, 100.0])

    def validate(self) -> None:
        self.validate_tasks()
        positive("lengths", self.lengths)
        for name, got, allowed in (("haystacks", self.haystacks, HAYSTACKS), ("keys", self.keys, KINDS),
                                   ("values", self.values, KINDS)):
            bad = [g for g in got if g not in allowed]
            if bad:
                raise CtxlensError(f"Option '{name}' has unknown {bad}; use some of: {', '.join(allowed)}.")
        if any(not 0 <= d <= 100 for d in self.depths):
            raise CtxlensError(f"Option 'depths' must lie in 0..100 percent, got {self.depths}.")


def plan(config: Config) -> list[dict]:
    return [{"length": length, "haystack": h, "key": k, "value": v, "depth": d, "seed": config.seed}
            for length in config.lengths for h in config.haystacks for k in config.keys for v in config.values
            for d in config.depths]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    extra = needle_options(HAYSTACKS[unit["haystack"]], unit["key"], unit["value"], unit["depth"])
    try:
        batch = samples(lm, config, "niah_single_2", unit["length"], cache, extra)
    except TooShort as err:
        return flagged(err)
    return rows_for(lm, config, cache, batch)


register(Experiment("niah-format", Config, plan, run, doc=__doc__.splitlines()[0]))
