"""What ``ctxlens profile`` hands down, unchanged, to the steps that profile each model
(``ProfileContext``): where it writes, what the plan is made for, the model options, and the clock,
probe and runner tests replace (``ctxlens.profile.command``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from ctxlens.core.texts import NATURAL


@dataclasses.dataclass(frozen=True)
class ProfileContext:
    """What ``profile`` hands down, unchanged, to the steps that profile each of its models."""

    #: where it writes: the --out directory, and the record its profile.json holds (updated in place)
    out: Path
    record: dict
    #: what the plan is made for: each model's budget in seconds, L (None: the budget chooses), the parts to redo
    seconds: float
    length: int | None
    redo: tuple[str, ...]
    #: every model option (parsed), and those passed to ``load``
    model_options: dict
    load_options: dict
    #: whether the runner shows its progress bars and meters
    progress: bool
    #: replaceable for tests: the clock, the probe (lm -> Throughput; None: measured), the runner (``run``)
    clock: Callable[[], float]
    probe: Callable | None
    runner: Callable
    #: print the plan and stop before any part runs, writing nothing (``--plan``)
    plan_only: bool = False
    #: seconds per model the needle rounds may run beyond the budget in this run of the command (``--decide``)
    decide: float = 0.0
    #: the text source of every part that reads text (``--source``)
    source: str = NATURAL
