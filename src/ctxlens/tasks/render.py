"""How a task's text becomes the model's prompt: plain text, or the tokenizer's chat template.

RULER (the benchmark of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?",
Section 4) wraps every prompt in one of a fixed list of hand-written model templates and then
appends the answer prefix as plain text. ctxlens instead asks the tokenizer itself:

* ``plain`` (base models): ``input + answer_prefix``, encoded with the tokenizer's own special
  tokens (a BOS where it adds one) -- RULER's ``base`` template;
* ``chat`` (instruction models): the tokenizer's chat template rendered for one user turn with
  the generation prompt, and the answer prefix (leading space removed) as the start of the
  assistant turn (a prefill); the template carries its own special tokens.

``auto`` picks ``chat`` when the tokenizer has a chat template and ``plain`` otherwise; every
sample records which one it used and its rendered prompt.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError, unknown

Template = typing.Literal["auto", "plain", "chat"]
TEMPLATES = typing.get_args(Template)
_SENTINEL = "CTXLENS_USER_CONTENT_7f3a"


@dataclass(frozen=True)
class Frame:
    """The text around a task's input: ``head + input + tail + prefix``."""

    template: str  # "plain" | "chat"
    head: str = ""
    tail: str = ""

    @property
    def specials(self) -> bool:
        """Whether the tokenizer's own special tokens (BOS ...) are added when encoding."""
        return self.template == "plain"

    def prefix(self, answer_prefix: str) -> str:
        """The answer prefix as it appears in the prompt (a chat prefill starts without a space)."""
        return answer_prefix.lstrip() if self.template == "chat" else answer_prefix

    def wrap(self, input_pieces: list[str], answer_prefix: str) -> tuple[list[str], int]:
        """Pieces of the whole prompt, and the index of the first input piece."""
        if self.template == "plain":
            return [*input_pieces, answer_prefix], 0
        return [self.head, *input_pieces, self.tail + self.prefix(answer_prefix)], 1


def frame_for(tokenizer, template: str = "auto") -> Frame:
    """The ``Frame`` for ``tokenizer`` under ``template`` (auto | plain | chat)."""
    if template not in TEMPLATES:
        raise unknown("prompt template", template, TEMPLATES)
    has_chat = bool(getattr(tokenizer, "chat_template", None))
    if template == "plain" or (template == "auto" and not has_chat):
        return Frame("plain")
    if not has_chat:
        raise CtxlensError(
            "The tokenizer has no chat template, so --template chat cannot be used; pass --template plain "
            "(base models) or use a tokenizer with a chat template."
        )
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": _SENTINEL}], tokenize=False, add_generation_prompt=True
    )
    if rendered.count(_SENTINEL) != 1:
        raise CtxlensError(
            "The tokenizer's chat template does not place the user message verbatim once, so prompts cannot "
            "be framed with it; pass --template plain."
        )
    head, tail = rendered.split(_SENTINEL)
    return Frame("chat", head, tail)
