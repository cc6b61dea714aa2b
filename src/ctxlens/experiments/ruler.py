"""``ruler``: the 13 RULER tasks at several lengths, one scored row per sample.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Table 1 and
Appendix B Tables 6-18) evaluates every model on RULER's tasks at 1K-16K. One unit is a (task,
length) batch of ``n_samples`` fitted prompts (``ctxlens.tasks``), decoded greedily and scored
with RULER's metric. A (task, length) whose prompt cannot fit gets one row with a ``flag``.
The report reads the rows: mean per task and length, mean over the same tasks at every length (a
task that did not fit a length leaves it without a mean), RULER's effective length (the largest
length whose mean exceeds ``threshold``) and the stricter sustained length (every length up to
it exceeds it; ``ctxlens.tasks.scoring``).

Unless ``lengths`` is given, the lengths come from the model (``defaults``): RULER's 4K-128K up to
what its positions allow (all of them with --allow-extrapolation; a model with fewer than 4K
positions gets its training length and its half and quarter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.options import Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import RULER_LENGTHS, Defaults, Experiment, Work, lengths_that_fit
from ctxlens.experiments.registry import DEMO_TASK, TASK_ROWS, DemoStep, Smoke, T, register, summary
from ctxlens.probes.tasks import TaskOptions, decode_share, flagged, rows_for, samples
from ctxlens.tasks import RULER_TASKS, get_task
from ctxlens.tasks.base import TooShort
from ctxlens.tasks.scoring import THRESHOLD

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM


@dataclass
class Config(TaskOptions):
    tasks: list[str] = option(factory=lambda: list(RULER_TASKS), help="tasks run (ctxlens tasks lists them); "
                                                                       "default: RULER's 13")
    lengths: list[Tokens] = option(factory=lambda: list(RULER_LENGTHS),
                                        help="prompt lengths, in tokens; unset: RULER's lengths up to what the "
                                             "model's positions allow")
    threshold: float = option(THRESHOLD, "RULER's effective length: the largest length whose mean score (0-100) "
                                         "exceeds this")

    def validate(self) -> None:
        for task in self.tasks:
            get_task(task)


def plan(config: Config) -> list[Unit]:
    return [{"task": task, "length": length, "seed": config.seed} for length in config.lengths for task in config.tasks]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    try:
        batch = samples(lm, config, unit["task"], unit["length"], cache)
    except TooShort as err:
        return flagged(err)
    return rows_for(lm, config, cache, batch)


def defaults(info: ModelInfo, config: Config, given: frozenset[str], extrapolate: bool) -> Defaults:
    """RULER's lengths that the model's positions allow (see the module docstring)."""
    if "lengths" in given:
        return Defaults()
    lengths = lengths_that_fit(info, RULER_LENGTHS, extrapolate)
    left = [n for n in RULER_LENGTHS if n not in lengths]
    notes = []
    if not set(lengths) <= set(RULER_LENGTHS):
        notes.append(f"the model takes fewer positions ({info.max_positions}) than RULER's shortest length: "
                     "lengths are its training length and its half and quarter")
    elif left:
        notes.append(f"RULER's lengths {', '.join(map(str, left))} left out: beyond the model's {info.max_positions} "
                     "positions; pass --allow-extrapolation or --lengths to run them")
    return Defaults({"lengths": lengths}, tuple(notes))


def budget(config: TaskOptions, task: str) -> int:
    """Tokens generated per sample of ``task``."""
    return config.max_new_tokens or get_task(task).budget


def work(config: Config, unit: Unit) -> list[Work]:
    """``n_samples`` prompts of the length less the generation budget, and that budget each."""
    new = budget(config, unit["task"])
    return [Work(config.n_samples, max(1, unit["length"] - new), config.n_samples * new, config.batch_size,
                 decoded=decode_share(config))]


COLUMNS = TASK_ROWS


register(Experiment(
    "ruler", Config, plan, run, doc=summary(__doc__), defaults=defaults, work=work,
    paper="long-sequence", section="Tables 1, 6-18",
    smoke=Smoke({"tasks": ["niah_single_1", "vt", "qa_1"], "lengths": [512, 1024], "n_samples": 2,
                 "max_new_tokens": 6}, unmeasured="generation task"),
    demo=(DemoStep("zoo", {**DEMO_TASK, "tasks": ["niah_single_1", "niah_single_2", "fwe"], "lengths": [T, 2 * T],
                           "n_samples": 2, "max_new_tokens": 24},
                   {**DEMO_TASK, "tasks": ["niah_single_1", "fwe"], "lengths": [T], "n_samples": 2,
                    "max_new_tokens": 4}),),
    columns=COLUMNS,
))
