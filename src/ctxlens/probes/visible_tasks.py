"""Task prompts of which the model sees only the last part: the shared unit of ``visible-fraction``
and ``position-weighted-qa``.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendices A.1
and A.3): samples are built at a maximum length and the model sees only the closest ``ctl``
tokens of each; accuracy against ctl peaks at an optimal context length. A unit is one batch of
prompts at ``unit["length"]`` and one visible ``unit["fraction"]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxlens.core.options import PositiveFraction, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.probes.tasks import TaskOptions, flagged, rows_for, samples
from ctxlens.tasks.base import TooShort

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


def fractions_option() -> Any:
    """The ``fractions`` option: the visible fractions, one unit each (0.1 ... 1.0 by default)."""
    return option(factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
                  help="visible fractions: the model sees the last fraction x (max_length - budget) tokens (ctl)")


Fractions = list[PositiveFraction]


def visible_rows(lm: LM, config: TaskOptions, unit: Unit, cache: Cache, extra: dict | None = None) -> list[Row]:
    """The scored rows of one unit: the samples of ``unit["task"]`` built at ``unit["length"]``
    (with the task options ``extra``), each prompt cut to its last ``fraction x (length - budget)``
    tokens; one flagged row when the prompts cannot be built at that length (``TooShort``)."""
    try:
        batch = samples(lm, config, unit["task"], unit["length"], cache, extra)
    except TooShort as err:
        return flagged(err)
    # the same visible count for every sample, so that the truncated prompts batch together
    visible = max(1, round(unit["fraction"] * (unit["length"] - batch[0].budget)))
    return rows_for(lm, config, cache, batch, visible)
