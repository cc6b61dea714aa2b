"""``tasks.backends.Decoder``: the one interface of the decoding backends (issue 34 part 1).

Truth: a backend whose answer is a closed form of its prompt (the prompt's ids reversed, cut to the budget),
so what ``generate`` returns, skips and reports can be written out by hand."""

from __future__ import annotations

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.backends import BACKENDS, Decoder, OpenAIBackend, TransformersBackend, VLLMBackend


class Reversing(Decoder):
    name = "reversing"

    def __init__(self):
        self.asked: list[int] = []

    def _answer(self, prompts, budgets, todo, finished):
        for i in todo:
            self.asked.append(i)
            finished(i, " ".join(map(str, list(prompts[i])[::-1][:budgets[i]])))


def test_generate_answers_in_prompt_order_takes_kept_answers_and_reports_each_new_one():
    prompts, budgets = [[1, 2, 3], [4, 5], [6]], [2, 5, 1]
    heard: list[tuple[int, str]] = []
    d = Reversing()
    assert d.generate(prompts, budgets) == ["3 2", "5 4", "6"]
    d = Reversing()
    got = d.generate(prompts, budgets, done={1: "kept"}, on_done=lambda i, t: heard.append((i, t)))
    assert got == ["3 2", "kept", "6"]
    assert d.asked == [0, 2] and heard == [(0, "3 2"), (2, "6")]  # the kept answer is neither decoded nor reported
    d = Reversing()
    assert d.generate(prompts, budgets, done={0: "a", 1: "b", 2: "c"}) == ["a", "b", "c"] and d.asked == []
    assert Reversing().generate([], []) == []


def test_generate_refuses_a_budget_count_that_differs_from_the_prompts():
    with pytest.raises(CtxlensError, match="3 prompts were given 2 budgets"):
        Reversing().generate([[1], [2], [3]], [1, 1])


def test_every_backend_is_a_decoder_named_as_the_command_line_calls_it():
    backends = (TransformersBackend, VLLMBackend, OpenAIBackend)
    assert all(issubclass(b, Decoder) for b in backends)
    assert sorted(b.name for b in backends) == sorted(BACKENDS)
    with pytest.raises(TypeError):
        Decoder()  # abstract: a backend must say how it answers
