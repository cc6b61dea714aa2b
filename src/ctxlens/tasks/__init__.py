"""RULER-style long-context tasks: generators, scorers, exact-length fitting, cache and export.

Implements the task suite of the long-sequence paper ("How Well Can a Long Sequence Model Model Long
Sequences?", Section 4, Tables 1-4 and 6-18) -- the 13 RULER tasks with RULER's templates,
key/value spaces, haystacks, budgets and metrics -- and the QA data behind the intrinsic-entropy paper ("Intrinsic
Entropy of Context Length Scaling in LLMs", Appendix A). Importing this package does not import
torch; ``ctxlens.tasks.backends`` holds the model-side decoding.

    from ctxlens.tasks import generate, get_task, tasks
    samples = generate("niah_single_1", tokenizer, length=4096, n=100, seed=0)
"""

from __future__ import annotations

__all__ = ["generate", "get_task", "tasks", "score", "RULER_TASKS"]

RULER_TASKS = (
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
)
_MODULES = ("niah", "niah_corpus", "vt", "cwe", "fwe", "qa")


def _load_builtin() -> None:
    import importlib

    for name in _MODULES:
        importlib.import_module(f"ctxlens.tasks.{name}")


def tasks() -> dict:
    """Every registered task by name."""
    from ctxlens.tasks.base import TASKS

    return TASKS.as_dict()


def get_task(name: str):
    from ctxlens.tasks.base import get_task as _get

    return _get(name)


def generate(*args, **kwargs):
    from ctxlens.tasks.dataset import generate as _generate

    return _generate(*args, **kwargs)


def score(*args, **kwargs):
    from ctxlens.tasks.scoring import score as _score

    return _score(*args, **kwargs)
