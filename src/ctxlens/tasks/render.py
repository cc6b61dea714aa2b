"""How a task's text becomes the model's prompt: plain text, or the tokenizer's chat template.

RULER (the benchmark of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?",
Section 4) wraps every prompt in one of a fixed list of hand-written model templates and then
appends the answer prefix as plain text (``prepare.py``: ``model_template.format(task_template=...)
+ answer_prefix``). ctxlens asks the tokenizer itself for the template:

* ``plain`` (base models): ``input + answer_prefix``, encoded with the tokenizer's own special
  tokens (a BOS where it adds one) -- RULER's ``base`` template;
* ``chat`` (instruction models): the tokenizer's chat template rendered for one user turn with
  the generation prompt, then the answer prefix exactly as RULER appends it (its leading space
  kept) as the start of the assistant turn; the template carries its own special tokens.

``auto`` picks ``chat`` when the tokenizer has a chat template and ``plain`` otherwise. The system
turn of a chat prompt is ``system_prompt``: ``default`` (what the template renders for a lone user
message: SmolLM2's injects "You are a helpful AI assistant named SmolLM ..."), ``none`` (no system
turn at all, the one a template injects removed), or the text of the system turn. Every sample
records its template, its system turn and its rendered prompt.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass
from typing import Any

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.tasks.sandbox import TemplateLimit

if typing.TYPE_CHECKING:
    from ctxlens.tasks.tokenizer import TaskTokenizer

Template = typing.Literal["auto", "plain", "chat"]
TEMPLATES = typing.get_args(Template)
_SENTINEL = "CTXLENS_USER_CONTENT_7f3a"
_SYSTEM, _SYSTEM2 = "CTXLENS_SYSTEM_CONTENT_1c9e", "CTXLENS_SYSTEM_CONTENT_2b4d"


@dataclass(frozen=True)
class Frame:
    """The text around a task's input: ``head + input + tail + answer prefix``."""

    template: str  # "plain" | "chat"
    head: str = ""
    tail: str = ""
    system: str | None = None  # the system turn's text inside ``head``; None: no system turn

    @property
    def specials(self) -> bool:
        """Whether the tokenizer's own special tokens (BOS ...) are added when encoding."""
        return self.template == "plain"

    def prefix(self, answer_prefix: str) -> str:
        """The answer prefix as it appears in the prompt: verbatim, as RULER appends it."""
        return answer_prefix

    def wrap(self, input_pieces: list[str], answer_prefix: str) -> tuple[list[str], int]:
        """Pieces of the whole prompt, and the index of the first input piece."""
        if self.template == "plain":
            return [*input_pieces, answer_prefix], 0
        return [self.head, *input_pieces, self.tail + answer_prefix], 1


def frame_for(tokenizer: TaskTokenizer, template: str = "auto", system_prompt: str = "default") -> Frame:
    """The ``Frame`` for ``tokenizer`` under ``template`` (auto | plain | chat) and ``system_prompt``
    (default | none | the system turn's text)."""
    if template not in TEMPLATES:
        raise unknown("prompt template", template, TEMPLATES)
    has_chat = bool(getattr(tokenizer, "chat_template", None))
    if template == "plain" or (template == "auto" and not has_chat):
        if system_prompt not in SYSTEM_KEYWORDS:
            raise CtxlensError("A system prompt needs a chat template, but the prompts are plain text; use "
                               "--template chat with a tokenizer that has one, or drop the system prompt.")
        return Frame("plain")
    if not has_chat:
        raise CtxlensError(
            "The tokenizer has no chat template, so --template chat cannot be used; pass --template plain "
            "(base models) or use a tokenizer with a chat template."
        )
    if system_prompt == "default":
        head, tail = _split(tokenizer, [])
        return Frame("chat", head, tail, _default_system(tokenizer, head))
    if system_prompt == "none":
        head, tail = _split(tokenizer, [])
        return Frame("chat", _without_system(tokenizer, head), tail, None)
    head, tail = _split(tokenizer, [{"role": "system", "content": system_prompt}])
    if system_prompt not in head:
        raise CtxlensError("The tokenizer's chat template drops the system prompt; use system_prompt default or none.")
    return Frame("chat", head, tail, system_prompt)


SYSTEM_KEYWORDS = ("default", "none")


def _render(tokenizer: TaskTokenizer, messages: list[dict[str, Any]]) -> str:
    """The tokenizer's chat template rendered for ``messages`` with the generation prompt, always in
    ctxlens' bounded sandbox (``ctxlens.tasks.sandbox``: time, size and output bounds, one sentence
    naming the template's file), whether the tokenizer was read from its files or by transformers."""
    from ctxlens.tasks.tokenizer import FileTokenizer, render_chat

    template = getattr(tokenizer, "chat_template", None)
    if isinstance(tokenizer, FileTokenizer) or not isinstance(template, str):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    where = f"the tokenizer of {getattr(tokenizer, 'name_or_path', '') or 'the model'}"
    return render_chat(template, where, messages, True, dict(getattr(tokenizer, "special_tokens_map", {}) or {}))


def _split(tokenizer: TaskTokenizer, before: list[dict[str, Any]]) -> tuple[str, str]:
    """(head, tail) around the user message rendered after the messages ``before``."""
    rendered = _render(tokenizer, [*before, {"role": "user", "content": _SENTINEL}])
    if rendered.count(_SENTINEL) != 1:
        raise CtxlensError(
            "The tokenizer's chat template does not place the user message verbatim once, so prompts cannot "
            "be framed with it; pass --template plain."
        )
    head, tail = rendered.split(_SENTINEL)
    return head, tail


def _system_parts(tokenizer: TaskTokenizer) -> tuple[str, str] | None:
    """(P, Q) with ``P + S + Q`` the head before the user message when the system turn holds S; None
    when the template takes no system message."""
    try:
        head, _ = _split(tokenizer, [{"role": "system", "content": _SYSTEM}])
    except TemplateLimit:
        raise
    except Exception:  # noqa: BLE001 - a template that rejects a system role
        return None
    if head.count(_SYSTEM) != 1:
        return None
    p, q = head.split(_SYSTEM)
    return p, q


def _default_system(tokenizer: TaskTokenizer, head: str) -> str | None:
    """The system turn the template puts into ``head`` (rendered for a lone user message), or None."""
    parts = _system_parts(tokenizer)
    if parts is None:
        return None
    p, q = parts
    if head.startswith(p) and head.endswith(q) and len(head) >= len(p) + len(q):
        return head[len(p):len(head) - len(q)]
    return None


def _without_system(tokenizer: TaskTokenizer, head: str) -> str:
    """``head`` with the template's default system turn removed (``head`` itself when it has none).

    With P = prefix + system start and Q = system end + user start (``_system_parts``), and
    J = system end + system start (between two system messages), the system start is the longest
    common suffix of P and J; prefix + user start is then P and Q without it, whatever the markers.
    """
    if _default_system(tokenizer, head) is None:
        return head
    p, q = _system_parts(tokenizer) or ("", "")
    try:
        two = _render(tokenizer, [{"role": "system", "content": _SYSTEM}, {"role": "system", "content": _SYSTEM2},
                                  {"role": "user", "content": _SENTINEL}])
    except TemplateLimit:
        raise
    except Exception:  # noqa: BLE001 - a template that takes one system message only
        two = ""
    if two.count(_SYSTEM) != 1 or two.count(_SYSTEM2) != 1 or two.index(_SYSTEM) > two.index(_SYSTEM2):
        raise CtxlensError("Cannot remove the default system turn of this tokenizer's chat template; pass the "
                           "system prompt's text instead of none.")
    j = two[two.index(_SYSTEM) + len(_SYSTEM):two.index(_SYSTEM2)]
    common = len(os.path.commonprefix([p[::-1], j[::-1]]))
    end = j[:len(j) - common]
    if not q.startswith(end):
        raise CtxlensError("Cannot remove the default system turn of this tokenizer's chat template; pass the "
                           "system prompt's text instead of none.")
    return p[:len(p) - common] + q[len(end):]
