"""``niah-depth``: one needle at fixed depths, at and beyond the training length.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 2-3)
places a single needle at depths 0-100 % of the haystack at the training length (Table 2) and
twice it (Table 3). One unit is a (length, depth) batch of ``n_samples`` prompts of ``task``
(default ``niah_single_2``: word key, number value, essay haystack) with the needle at the
sentence or line boundary nearest the depth in tokens; rows record target and realised depth.
Unless ``lengths`` is given they come from the model: its training length and twice it, or half
and once it when twice is beyond its positions (without --allow-extrapolation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Percent, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import Defaults, DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import TASK_ROWS, declare
from ctxlens.experiments.registry import DEMO_TASK, T, register
from ctxlens.probes.tasks import TaskOptions, decode_share, flagged, needle_options, rows_for, samples
from ctxlens.tasks import get_task
from ctxlens.tasks.base import TooShort

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM


@dataclass
class Config(TaskOptions):
    lengths: list[Tokens] = option(factory=lambda: [4096, 8192],
                                        help="prompt lengths, in tokens; unset: the model's training length and twice "
                                             "it (half and once it where twice is beyond its positions)")
    depths: list[Percent] = option(factory=lambda: [float(d) for d in range(0, 101, 10)],
                                   help="needle depths, in percent of the haystack (0: start, 100: end)")
    task: str = option("niah_single_2", "the needle task (niah_*)")
    haystack: str = option("", "override the task's haystack: noise, essay or needle; empty: the task's")
    key: str = option("", "override the key type: words, numbers or uuids; empty: the task's")
    value: str = option("", "override the value type: words, numbers or uuids; empty: the task's")

    def validate(self) -> None:
        if get_task(self.task).family != "niah":
            raise CtxlensError(f"Option 'task' must be a needle task (niah_*), got '{self.task}'.")


def plan(config: Config) -> list[Unit]:
    return [{"task": config.task, "length": length, "depth": depth, "seed": config.seed}
            for length in config.lengths for depth in config.depths]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    extra = needle_options(config.haystack, config.key, config.value, unit["depth"])
    try:
        batch = samples(lm, config, unit["task"], unit["length"], cache, extra)
    except TooShort as err:
        return flagged(err)
    return rows_for(lm, config, cache, batch)


def defaults(info: ModelInfo, config: Config, given: frozenset[str], extrapolate: bool) -> Defaults:
    """The training length T and 2T (Tables 2-3), or T/2 and T when 2T is beyond the positions."""
    trained = info.train_length
    if "lengths" in given or not trained:
        return Defaults()
    if info.allows(2 * trained, extrapolate):
        return Defaults({"lengths": [trained, 2 * trained]})
    return Defaults({"lengths": [trained // 2, trained]},
                    (f"{2 * trained} (twice the training length) is beyond the model's positions: planned "
                     f"{trained // 2} and {trained}; pass --allow-extrapolation for {2 * trained}",))


def work(config: Config, unit: Unit) -> list[Work]:
    new = config.max_new_tokens or get_task(unit["task"]).budget
    return [Work(config.n_samples, max(1, unit["length"] - new), config.n_samples * new, config.batch_size,
                 decoded=decode_share(config))]


COLUMNS = declare(TASK_ROWS, Column("depth", float, "percent",
                                    "depth of the needle asked for, in percent of the haystack (0: start, 100: end)"))


register(Experiment(
    "niah-depth", Config, plan, run, doc=summary(__doc__), defaults=defaults, work=work,
    paper="long-sequence", section="Tables 2-3",
    smoke=Smoke({"lengths": [512, 768], "depths": [0, 50, 100], "n_samples": 2, "max_new_tokens": 6},
                unmeasured="generation task"),
    # the zoo retrieves nothing in RULER's wording, so the demo asks in the corpus's (niah_corpus)
    demo=(DemoStep("zoo", {**DEMO_TASK, "task": "niah_corpus", "lengths": [T, 2 * T], "depths": [0.0, 50.0, 100.0],
                           "n_samples": 48, "max_new_tokens": 6},
                   {**DEMO_TASK, "task": "niah_corpus", "lengths": [T, 2 * T], "depths": [0.0, 50.0, 100.0],
                    "n_samples": 2, "max_new_tokens": 6}),),
    columns=COLUMNS,
))
