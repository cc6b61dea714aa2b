"""The token meter of a unit in flight (``ctxlens.core.progress``): its total from the experiment's
``work`` hook (``unit_meter``), moved by the tokens every forward of the model embeds and each decoder
layer runs (``count_tokens``), so a long prefill shows its progress as it goes."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from ctxlens.core import progress as progress_channel
from ctxlens.core.units import Unit
from ctxlens.runner import plans

if TYPE_CHECKING:
    import torch
    from _typeshed import DataclassInstance

    from ctxlens.experiments.base import Experiment
    from ctxlens.lm.model import LM


def unit_meter(exp: Experiment, config: DataclassInstance, unit: Unit, label: str) -> progress_channel.Meter:
    """The unit's token meter: its total from the experiment's ``work`` hook (None: not known)."""
    works = plans.unit_work(exp, config, unit)
    total = sum(w.prompt_tokens + w.new_tokens for w in works) if works else None
    return progress_channel.Meter(label, total, lambda line: tqdm.write(line, file=sys.stderr))


@contextmanager
def count_tokens(lm: LM | None) -> Iterator[None]:
    """Count the tokens every forward of ``lm`` runs into the current unit's meter: the input
    embedding sees ``[B, L]`` ids per call (one call per generated token), and each of the
    ``n_layers`` decoder layers then adds ``B * L / n_layers``, so a long prefill (one forward)
    moves the meter as it goes; without decoder layers the embedding adds all. No-op without a model."""
    embed = getattr(getattr(lm, "model", None), "get_input_embeddings", None)
    module = embed() if callable(embed) else None
    layers = list(getattr(lm, "layers", None) or [])
    share = [0.0]  # the tokens of the forward in flight, per layer

    def embedded(_m: torch.nn.Module, args: tuple[object, ...], _out: object) -> None:
        n = int(args[0].numel()) if args and hasattr(args[0], "numel") else 0
        if layers:
            share[0] = n / len(layers)
        else:
            progress_channel.advance(n)

    handles = [module.register_forward_hook(embedded)] if module is not None else []
    if handles:
        handles += [layer.register_forward_hook(lambda _m, _a, _o: progress_channel.advance(share[0]))
                    for layer in layers]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
