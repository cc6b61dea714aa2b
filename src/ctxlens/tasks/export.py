"""Write generated samples in RULER's JSONL shape, for RULER's own prediction and evaluation scripts.

RULER (the benchmark of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?")
reads ``<dir>/<length>/data/<task>/validation.jsonl``; its generators (``scripts/data/synthetic/*.py``)
write one object per line with exactly these fields:

* every task: ``index``, ``input`` (the rendered prompt up to the answer prefix), ``outputs``
  (references), ``length`` (tokens of input + answer prefix, no special tokens added, plus the
  generation budget), ``length_w_model_temp`` (the same), ``answer_prefix``;
* the needle tasks: ``index`` is the character offset of the first reference in ``input``
  (``input.find(outputs[0])``), and ``token_position_answer`` the tokens before it; the others keep
  ``index`` the sample's number.

``call_api.py`` sends ``input + answer_prefix`` and copies ``index``, ``outputs``, ``length`` and
``others`` to the predictions; ``evaluate.py`` reports ``others["id"]`` (else ``index``) as the
submission id. A record therefore holds nothing else: ctxlens's own fields (stable id, sample
number, realised tokens, depths, template, system turn) go to ``ctxlens.jsonl`` beside it, line by
line in the same order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctxlens.tasks.base import Sample

if TYPE_CHECKING:
    from ctxlens.tasks.tokenizer import TaskTokenizer
    from ctxlens.tasks.tokens import Encoder

SIDECAR = "ctxlens.jsonl"
_CUTS = re.compile(r"(?<=\n)|(?<=[.!?])(?= )")  # after a newline; before the space after a full stop


def ruler_record(sample: Sample, count: Callable[[str], int], family: str) -> dict:
    """The RULER JSONL object of ``sample``; ``count`` gives a text's tokens without added special
    tokens (RULER's ``len(tokenizer.tokenize(text))``), ``family`` is the task's (niah, vt, ...)."""
    prompt, prefix = sample.prompt, sample.answer_prefix
    if not prompt.endswith(prefix):
        raise AssertionError(f"{sample.id}: the prompt does not end in its answer prefix")
    head = prompt[:len(prompt) - len(prefix)]
    length = sample.n_tokens - sample.meta.get("added_tokens", 0) + sample.budget
    record = {"index": sample.index, "input": head, "outputs": sample.outputs, "length": length,
              "length_w_model_temp": length, "answer_prefix": prefix}
    if family == "niah":
        at = head.find(sample.outputs[0])
        record["index"] = at
        record["token_position_answer"] = count(head[:at])
    return record


def ctxlens_record(sample: Sample) -> dict:
    """ctxlens's fields of ``sample`` that RULER's records do not carry."""
    return {"id": sample.id, "sample": sample.index, "n_tokens": sample.n_tokens, "budget": sample.budget,
            "template": sample.template, "system_prompt": sample.system_prompt, "metric": sample.metric,
            "depths": sample.depths, "tokenization": sample.meta.get("tokenization")}


def export(samples: list[Sample], out: str | Path, tokenizer: TaskTokenizer) -> list[Path]:
    """Write ``samples`` under ``out`` in RULER's layout (``tokenizer``: the one they were made with);
    returns the RULER files written."""
    from ctxlens.tasks.base import get_task
    from ctxlens.tasks.dataset import encoder_for

    encoder = encoder_for(tokenizer)
    groups: dict[tuple[int, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.length, s.task), []).append(s)
    written = []
    for (length, task), batch in sorted(groups.items()):
        folder = Path(out) / str(length) / "data" / task
        folder.mkdir(parents=True, exist_ok=True)
        family = get_task(task).family
        count = Counter(encoder)
        _write(folder / "validation.jsonl", [ruler_record(s, count, family) for s in batch])
        _write(folder / SIDECAR, [ctxlens_record(s) for s in batch])
        written.append(folder / "validation.jsonl")
    return written


class Counter:
    """Tokens of a text without added special tokens, as one encoding of it gives.

    Summed over the text's lines and sentences (cut after a newline and before the space after a
    full stop, where the prompt's pieces are cut) from the encoder's piece cache, after checking on
    the first text of a batch that the sum equals one full encoding; where it does not (a tokenizer
    that merges across such a cut), every count is a full encoding.
    """

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.by_lines: bool | None = None if encoder.mode == "pieces" else False

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        if self.by_lines is False:
            return len(self.encoder.encode(text))
        lines = sum(self.encoder.costs(_CUTS.split(text)))
        if self.by_lines is None:
            full = len(self.encoder.encode(text))
            self.by_lines = lines == full
            return full
        return lines


def _write(path: Path, records: list[dict]) -> None:
    """One JSON object per line (ASCII-escaped, as RULER's write_manifest), replacing ``path``
    atomically through an exclusively created temporary file (``ctxlens.core.files``)."""
    from ctxlens.core import files

    files.atomic_write(path, "".join(json.dumps(r, allow_nan=False) + "\n" for r in records))  # strict JSON


def load_tokenizer(spec: str) -> TaskTokenizer:
    """``byte`` (the zoo's byte-level tokenizer), or the tokenizer of a model spec (hub id, dir, GGUF, zoo:NAME,
    ref:NAME): read from its files with ``tokenizers`` where they suffice (``ctxlens.tasks.tokenizer``; no
    transformers or torch import), else through transformers' ``AutoTokenizer``."""
    from ctxlens.core.errors import CtxlensError
    from ctxlens.tasks.tokenizer import FileTokenizer, check_tokenizer_json, from_files

    if spec == "byte":
        from ctxlens.data.tokenizer import EOS, byte_backend

        return FileTokenizer(byte_backend(), {"bos_token": EOS, "eos_token": EOS, "pad_token": EOS})
    from ctxlens.lm.specs import resolve

    folder = Path(spec).expanduser()
    where = str(folder) if folder.is_dir() else resolve(spec)  # a tokenizer's folder needs no config.json
    fast = from_files(where) if Path(where).is_dir() else None
    if fast is not None:
        return fast
    if Path(where).is_dir():
        import ctxlens.lm.model_files as model_files

        model_files.check_directory(where)  # transformers reads its files whole: each bounded first
        check_tokenizer_json(Path(where))
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(where)
    except Exception as err:  # noqa: BLE001 - the tokenizers package raises a bare Exception for a bad file
        if not isinstance(err, (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)) and \
                type(err) is not Exception:
            raise
        first = (str(err).splitlines() or [type(err).__name__])[0][:200]
        raise CtxlensError(f"Could not load a tokenizer for '{spec}' ({first}); "
                           "give a model directory, hub id, zoo:NAME or 'byte'.") from None


def task_table() -> list[dict]:
    """One row per task: name, family, budget, metric, RULER arguments, what it tests."""
    from ctxlens.tasks import tasks

    return [{"task": t.name, "family": t.family, "budget": t.budget, "metric": t.metric,
             "args": " ".join(f"{k}={v}" for k, v in t.options.items() if v not in (None, "builtin", 0)),
             "what": t.doc} for t in tasks().values()]


@dataclass(frozen=True)
class Prompting:
    """How ``export_tasks`` renders every task's prompts (``ctxlens.tasks.dataset.generate``'s options):
    ``template`` auto | plain | chat, the generation ``budget`` (None: each task's RULER budget), task
    ``options`` (``ctxlens.tasks.base.check_options``; each goes to the tasks that take it), a chat
    prompt's ``system_prompt``."""

    template: str = "auto"
    budget: int | None = None
    options: dict = field(default_factory=dict)
    system_prompt: str = "default"


def export_tasks(names: list[str], tokenizer: str, lengths: list[int], n: int, seed: int, out: str,
                 prompting: Prompting = Prompting(), cache: bool = True) -> list[Path]:
    """Generate ``names`` at ``lengths`` with ``tokenizer`` as ``prompting`` says and write them in
    RULER's layout; each task option must be taken by at least one of ``names``."""
    from ctxlens.tasks.base import check_options, taken_by
    from ctxlens.tasks.dataset import generate

    options = dict(prompting.options)
    check_options(names, options)
    tok = load_tokenizer(tokenizer)
    samples = [s for length in lengths for name in names
               for s in generate(name, tok, length, n, seed, template=prompting.template, budget=prompting.budget,
                                 options={k: v for k, v in options.items() if k in taken_by(name)},
                                 system_prompt=prompting.system_prompt, cache=cache)]
    return export(samples, out, tok)
