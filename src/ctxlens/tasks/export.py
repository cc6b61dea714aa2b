"""Write generated samples in RULER's JSONL shape, so other harnesses can run ctxlens data.

RULER (the benchmark of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?")
reads ``<dir>/<length>/data/<task>/validation.jsonl`` with one object per line:
``index``, ``input`` (the prompt up to the answer prefix), ``outputs`` (references), ``length``
(prompt tokens + budget), ``length_w_model_temp``, ``answer_prefix``, and ``others.id`` as the
prediction id. ctxlens keeps ``index`` the sample's position (RULER's needle generator overwrites
it with a character offset) and adds its own fields under ``others`` (stable id, realised
tokens, depths, template).
"""

from __future__ import annotations

import json
from pathlib import Path

from ctxlens.tasks.base import Sample


def ruler_record(sample: Sample) -> dict:
    """One RULER JSONL object for ``sample``."""
    prompt, prefix = sample.prompt, sample.answer_prefix
    head = prompt[: len(prompt) - len(prefix)] if prefix and prompt.endswith(prefix) else prompt
    length = sample.n_tokens + sample.budget
    return {
        "index": sample.index,
        "input": head,
        "outputs": sample.outputs,
        "length": length,
        "length_w_model_temp": length,
        "answer_prefix": prefix,
        "others": {"id": sample.id, "n_tokens": sample.n_tokens, "budget": sample.budget, "template": sample.template,
                   "metric": sample.metric, "depths": sample.depths},
    }


def export(samples: list[Sample], out: str | Path) -> list[Path]:
    """Write ``samples`` under ``out`` in RULER's layout; returns the files written."""
    groups: dict[tuple[int, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.length, s.task), []).append(s)
    written = []
    for (length, task), batch in sorted(groups.items()):
        path = Path(out) / str(length) / "data" / task / "validation.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for s in batch:
                f.write(json.dumps(ruler_record(s)) + "\n")
        written.append(path)
    return written


def load_tokenizer(spec: str):
    """``byte`` (the zoo's byte-level tokenizer), or the tokenizer of a model spec (hub id, dir, zoo:NAME)."""
    if spec == "byte":
        from ctxlens.data.tokenizer import byte_tokenizer

        return byte_tokenizer()
    from transformers import AutoTokenizer

    from ctxlens.core.errors import CtxlensError
    from ctxlens.lm.loading import resolve

    try:
        return AutoTokenizer.from_pretrained(resolve(spec))
    except (OSError, ValueError) as err:
        raise CtxlensError(f"Could not load a tokenizer for '{spec}' ({str(err).splitlines()[0]}); "
                           "give a model directory, hub id, zoo:NAME or 'byte'.") from None


def task_table() -> list[dict]:
    """One row per task: name, family, budget, metric, RULER arguments, what it tests."""
    from ctxlens.tasks import tasks

    return [{"task": t.name, "family": t.family, "budget": t.budget, "metric": t.metric,
             "args": " ".join(f"{k}={v}" for k, v in t.options.items() if v not in (None, "builtin", 0)),
             "what": t.doc} for t in tasks().values()]


def export_tasks(names: list[str], tokenizer: str, lengths: list[int], n: int, seed: int, out: str,
                 template: str = "auto", budget: int | None = None, options: dict | None = None) -> list[Path]:
    """Generate ``names`` at ``lengths`` with ``tokenizer`` and write them in RULER's layout."""
    from ctxlens.tasks.dataset import generate

    tok = load_tokenizer(tokenizer)
    samples = [s for length in lengths for name in names
               for s in generate(name, tok, length, n, seed, template=template, budget=budget, options=options)]
    return export(samples, out)
