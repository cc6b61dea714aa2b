"""What ``ctxlens profile`` hands down, unchanged, to the steps that profile each model
(``ProfileContext``): where it writes, what the plan is made for, the model options, and the clock,
probe and runner tests replace (``ctxlens.profile.command``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlens.core.texts import NATURAL
from ctxlens.profile.types import ProfileRecord

if TYPE_CHECKING:
    from ctxlens.lm.model import LM
    from ctxlens.probes.throughput import Throughput


@dataclasses.dataclass(frozen=True)
class ProfileContext:
    """What ``profile`` hands down, unchanged, to the steps that profile each of its models."""

    #: where it writes: the --out directory, and the record its profile.json holds (updated in place)
    out: Path
    record: ProfileRecord
    #: what the plan is made for: each model's budget in seconds, L (None: the budget chooses), the parts to redo
    seconds: float
    length: int | None
    redo: tuple[str, ...]
    #: every model option (parsed: ``runner.model_options.parse_model_options``, of its kinds), and those passed to
    #: ``load``
    model_options: dict[str, Any]
    load_options: dict[str, Any]
    #: whether the runner shows its progress bars and meters
    progress: bool
    #: replaceable for tests: the clock, the probe (lm -> Throughput; None: measured), the runner (``run``)
    clock: Callable[[], float]
    probe: Callable[[LM], Throughput] | None
    runner: Callable[..., object]  # ``ctxlens.runner.execute.run``'s parameters
    #: print the plan and stop before any part runs, writing nothing (``--plan``)
    plan_only: bool = False
    #: seconds per model the needle rounds may run beyond the budget in this run of the command (``--decide``)
    decide: float = 0.0
    #: the text source of every part that reads text (``--source``)
    source: str = NATURAL
