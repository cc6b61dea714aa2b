"""``niah-depth``: one needle at fixed depths, at and beyond the training length.

Seed 002 ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 2-3)
places a single needle at depths 0-100 % of the haystack at the training length (Table 2) and
twice it (Table 3). One unit is a (length, depth) batch of ``n_samples`` prompts of ``task``
(default ``niah_single_2``: word key, number value, essay haystack) with the needle at the
sentence or line boundary nearest the depth in tokens; rows record target and realised depth.
"""

from __future__ import annotations

from ctxlens.tasks.base import TooShort

from dataclasses import dataclass, field

from ctxlens.core.errors import CtxlensError
from ctxlens.probes.tasks import TaskOptions, flagged, needle_options, rows_for, samples
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register
from ctxlens.tasks import get_task


@dataclass
class Config(TaskOptions):
    lengths: list[int] = field(default_factory=lambda: [4096, 8192])
    depths: list[float] = field(default_factory=lambda: [float(d) for d in range(0, 101, 10)])
    task: str = "niah_single_2"
    haystack: str = ""  # override the task's haystack: noise | essay | needle
    key: str = ""  # override the key type: words | numbers | uuids
    value: str = ""  # override the value type: words | numbers | uuids

    def validate(self) -> None:
        self.validate_tasks()
        positive("lengths", self.lengths)
        if any(not 0 <= d <= 100 for d in self.depths):
            raise CtxlensError(f"Option 'depths' must lie in 0..100 percent, got {self.depths}.")
        if get_task(self.task).family != "niah":
            raise CtxlensError(f"Option 'task' must be a needle task (niah_*), got '{self.task}'.")


def plan(config: Config) -> list[dict]:
    return [{"task": config.task, "length": length, "depth": depth, "seed": config.seed}
            for length in config.lengths for depth in config.depths]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    extra = needle_options(config.haystack, config.key, config.value, unit["depth"])
    try:
        batch = samples(lm, config, unit["task"], unit["length"], cache, extra)
    except TooShort as err:
        return flagged(err)
    return rows_for(lm, config, cache, batch)


register(Experiment("niah-depth", Config, plan, run, doc=__doc__.splitlines()[0]))
