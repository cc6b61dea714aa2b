"""``niah-format``: needle retrieval across haystack, key and value formats at three depths.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Table 4)
compares Essay-Word-Num, Essay-Word-UUID and Repeat-Word-Num needles at depths 0, 50 and 100 %.
One unit is a (length, haystack, key, value, depth) batch of single-needle prompts; ``repeat``
is RULER's noise haystack (one sentence group repeated), ``essay`` running prose.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from ctxlens.core.columns import Column
from ctxlens.core.options import Percent, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import TASK_ROWS, declare
from ctxlens.experiments.registry import DEMO_TASK, T, register
from ctxlens.probes.tasks import TaskOptions, decode_share, flagged, needle_options, planned, rows_for, samples
from ctxlens.tasks.base import TooShort

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Haystack = typing.Literal["essay", "repeat", "needle"]
HAYSTACKS = {"essay": "essay", "repeat": "noise", "needle": "needle"}  # this experiment's name -> the task's
Kind = typing.Literal["words", "numbers", "uuids"]  # the keys of ctxlens.tasks.words.KINDS


@dataclass
class Config(TaskOptions):
    lengths: list[Tokens] = option(factory=lambda: [4096], help="prompt lengths, in tokens")
    haystacks: list[Haystack] = option(factory=lambda: ["essay", "repeat"],
                                       help="haystacks: essay (running prose), repeat (RULER's noise: one "
                                            "sentence group repeated) or needle (distractor needles)")
    keys: list[Kind] = option(factory=lambda: ["words"], help="needle key formats")
    values: list[Kind] = option(factory=lambda: ["numbers", "uuids", "words"], help="needle value formats")
    depths: list[Percent] = option(factory=lambda: [0.0, 50.0, 100.0],
                                   help="needle depths, in percent of the haystack (Table 4: 0, 50, 100)")


def plan(config: Config) -> list[Unit]:
    return [{"length": length, "haystack": h, "key": k, "value": v, "depth": d, "seed": config.seed}
            for length in config.lengths for h in config.haystacks for k in config.keys for v in config.values
            for d in config.depths]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    extra = needle_options(HAYSTACKS[unit["haystack"]], unit["key"], unit["value"], unit["depth"])
    try:
        batch = samples(lm, config, "niah_single_2", unit["length"], cache, extra)
    except TooShort as err:
        return flagged(err)
    return rows_for(lm, config, cache, batch)


def work(config: Config, unit: Unit) -> list[Work]:
    return [Work(*planned(config, "niah_single_2", unit["length"]), decoded=decode_share(config))]


COLUMNS = declare(
    tuple(c for c in TASK_ROWS if c.name != "task"),  # one task, niah_single_2: its rows do not name it
    Column("depth", float, "percent", "depth of the needle asked for, in percent of the haystack (0: start, 100: end)"),
    Column("haystack", str, "", "haystack type: essay (prose), repeat (RULER's noise) or needle (distractors)",
           choices=typing.get_args(Haystack)),
    Column("key", str, "", "needle key type", choices=typing.get_args(Kind)),
    Column("value", str, "", "needle value type", choices=typing.get_args(Kind)),
)


register(Experiment(
    "niah-format", Config, plan, run, doc=summary(__doc__), work=work,
    paper="long-sequence", section="Table 4",
    smoke=Smoke({"lengths": [512], "depths": [0, 100], "values": ["numbers", "words"], "n_samples": 1,
                 "max_new_tokens": 6}, unmeasured="generation task"),
    demo=(DemoStep("zoo", {**DEMO_TASK, "lengths": [T], "haystacks": ["essay", "repeat"], "values": ["numbers"],
                           "n_samples": 2, "max_new_tokens": 10},
                   {**DEMO_TASK, "lengths": [T], "haystacks": ["repeat"], "values": ["numbers"], "depths": [50.0],
                    "n_samples": 2, "max_new_tokens": 4}),),
    columns=COLUMNS,
))
