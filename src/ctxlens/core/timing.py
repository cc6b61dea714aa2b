"""Wall-clock timing that waits for the GPU, shared by the ``bench/`` scripts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


def sync(device: str) -> None:
    """Wait for queued CUDA work on ``device`` (no-op on the CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timed_value(fn: Callable, device: str) -> tuple[Any, float]:
    """(fn(), seconds), with the device synchronised before and after."""
    sync(device)
    t = time.perf_counter()
    value = fn()
    sync(device)
    return value, time.perf_counter() - t


def timed(fn: Callable, device: str) -> float:
    """Seconds ``fn()`` takes on ``device``."""
    return timed_value(fn, device)[1]
