"""RULER-style long-context tasks: generators, scorers, exact-length fitting, cache and export.

Implements the task suite of the long-sequence paper ("How Well Can a Long Sequence Model Model Long
Sequences?", Section 4, Tables 1-4 and 6-18) -- the 13 RULER tasks with RULER's templates,
key/value spaces, haystacks, budgets and metrics -- and the QA data behind the intrinsic-entropy paper ("Intrinsic
Entropy of Context Length Scaling in LLMs", Appendix A). Importing this package does not import
torch; ``ctxlens.tasks.backends`` holds the model-side decoding.

    from ctxlens.tasks import generate, get_task, tasks
    samples = generate("niah_single_1", tokenizer, length=4096, n=100, seed=0)

A task is registered by its module (``register(Task(...))``, ``ctxlens.tasks.base``). On first
use the registry imports every module of this package but ``HELPERS`` (found with ``pkgutil``,
none listed by hand) and checks that each registered at least one task (one whose ``build`` it
defines): a new module that registers none stops every lookup with one sentence naming it.
RULER's 13 tasks are a fact of the long-sequence paper, ``ctxlens.core.papers.RULER_TASKS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxlens.core.papers import RULER_TASKS
from ctxlens.tasks.base import HELPERS, load_builtin  # noqa: F401 - re-exported (defined by the registry's module)

if TYPE_CHECKING:
    from ctxlens.tasks.base import Sample, Task

__all__ = ["generate", "get_task", "tasks", "score", "RULER_TASKS"]


def tasks() -> dict[str, Task]:
    """Every registered task by name."""
    from ctxlens.tasks.base import TASKS

    return TASKS.as_dict()


def get_task(name: str) -> Task:
    from ctxlens.tasks.base import get_task as _get

    return _get(name)


def generate(*args: Any, **kwargs: Any) -> list[Sample]:  # ctxlens.tasks.dataset.generate's arguments
    from ctxlens.tasks.dataset import generate as _generate

    return _generate(*args, **kwargs)


def score(*args: Any, **kwargs: Any) -> float:  # ctxlens.tasks.scoring.score's arguments
    from ctxlens.tasks.scoring import score as _score

    return _score(*args, **kwargs)
