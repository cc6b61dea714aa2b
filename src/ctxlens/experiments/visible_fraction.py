"""``visible-fraction``: accuracy when the model sees only the last part of a long task prompt.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.3, Figures A.3-1
and A.3-2) builds qa_1, fwe, cwe and vt samples at a maximum length M and lets the model see
only the closest ``ctl`` tokens; accuracy first rises with ctl and, for most tasks, falls again,
so an optimal context length exists. One unit is a (task, fraction) batch: the prompts fitted to
``max_length`` keep their last ``fraction * (max_length - budget)`` tokens (plus a leading BOS). The report
takes the optimal length per task from the rows (``ctxlens.tasks.scoring.optimal_length``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.options import Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import FRACTION, TASK_ROWS, declare
from ctxlens.experiments.registry import DEMO_TASK, T, register
from ctxlens.probes.tasks import TaskOptions, decode_share, planned
from ctxlens.probes.visible_tasks import Fractions, fractions_option, visible_rows
from ctxlens.tasks import get_task

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(TaskOptions):
    tasks: list[str] = option(factory=lambda: ["qa_1", "fwe", "cwe", "vt"], help="tasks run (Appendix A.3's four)")
    max_length: Tokens = option(8192, "M: the length, in tokens, the prompts are built at")
    fractions: Fractions = fractions_option()

    def validate(self) -> None:
        for task in self.tasks:
            get_task(task)


def plan(config: Config) -> list[Unit]:
    return [{"task": t, "length": config.max_length, "fraction": f, "seed": config.seed}
            for t in config.tasks for f in config.fractions]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    return visible_rows(lm, config, unit, cache)


def work(config: Config, unit: Unit) -> list[Work]:
    return [Work(*planned(config, unit["task"], unit["length"], unit["fraction"]), decoded=decode_share(config))]


COLUMNS = declare(TASK_ROWS, FRACTION)


register(Experiment(
    "visible-fraction", Config, plan, run, doc=summary(__doc__), work=work,
    paper="intrinsic-entropy", section="Appendix A.3",
    smoke=Smoke({"tasks": ["vt", "qa_1"], "max_length": 1024, "fractions": [0.25, 0.5, 1.0], "n_samples": 2,
                 "max_new_tokens": 6}, unmeasured="generation task"),
    demo=(DemoStep("zoo", {**DEMO_TASK, "tasks": ["qa_1", "fwe"], "max_length": 2 * T,
                           "fractions": [0.25, 0.5, 1.0], "n_samples": 2, "max_new_tokens": 16},
                   {**DEMO_TASK, "tasks": ["fwe"], "max_length": T, "fractions": [0.5, 1.0], "n_samples": 2,
                    "max_new_tokens": 4}),),
    columns=COLUMNS,
))
