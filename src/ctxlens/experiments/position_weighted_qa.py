"""``position-weighted-qa``: document QA whose golden paragraph sits near the end with weight gamma.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.1, Figures 8-9):
samples of qa_1 are built at a maximum length L with the golden paragraph's distance x to the
end of the input drawn with P(x) ∝ (1 - x/L)^gamma (gamma = 0 is RULER's uniform placement,
larger gamma keeps it closer to the question); the model sees only the last ``ctl`` tokens, and
the accuracy-vs-ctl curve peaks at an optimal context length that shrinks as gamma grows. One
unit is a (gamma, fraction) batch; rows record the golden document's distance to the end.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from ctxlens.core.columns import Column
from ctxlens.core.options import NonNegativeFloat, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import FRACTION, TASK_ROWS, declare
from ctxlens.experiments.registry import DEMO_TASK, T, register
from ctxlens.probes.tasks import TaskOptions, decode_share, planned
from ctxlens.probes.visible_tasks import Fractions, fractions_option, visible_rows

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(TaskOptions):
    max_length: Tokens = option(8192, "L: the length, in tokens, the prompts are built at")
    gammas: list[NonNegativeFloat] = option(
        factory=lambda: [0.0, 0.5, 1.0, 2.0, 4.0],
        help="gamma of P(x) ∝ (1 - x/L)^gamma, x the golden paragraph's distance to the end (0: uniform)")
    fractions: Fractions = fractions_option()
    task: typing.Literal["qa_1", "qa_2"] = option("qa_1", "the document-QA task: qa_1 (SQuAD) or qa_2 (HotpotQA)")


def plan(config: Config) -> list[Unit]:
    return [{"task": config.task, "length": config.max_length, "gamma": g, "fraction": f, "seed": config.seed}
            for g in config.gammas for f in config.fractions]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    return visible_rows(lm, config, unit, cache, {"gamma": float(unit["gamma"])})


def work(config: Config, unit: Unit) -> list[Work]:
    return [Work(*planned(config, unit["task"], unit["length"], unit["fraction"]), decoded=decode_share(config))]


COLUMNS = declare(
    TASK_ROWS, FRACTION,
    Column("gamma", float, "", "position weighting exponent of the question's documents", low=0.0),
)


register(Experiment(
    "position-weighted-qa", Config, plan, run, doc=summary(__doc__), work=work,
    paper="intrinsic-entropy", section="Appendix A.1, Figures 8-9",
    smoke=Smoke({"max_length": 1024, "gammas": [0, 2], "fractions": [0.5, 1.0], "n_samples": 2,
                 "max_new_tokens": 6}, unmeasured="generation task"),
    demo=(DemoStep("zoo", {**DEMO_TASK, "max_length": 2 * T, "gammas": [0.0, 2.0], "fractions": [0.5, 1.0],
                           "n_samples": 2, "max_new_tokens": 16},
                   {**DEMO_TASK, "max_length": 2 * T, "gammas": [0.0], "fractions": [1.0], "n_samples": 2,
                    "max_new_tokens": 4}),),
    columns=COLUMNS,
))
