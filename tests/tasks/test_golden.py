"""Golden files pin the rendered prompt of every task (byte tokenizer, 2048 tokens, seed 0).

The files were generated once and checked by hand against RULER's templates
(``scripts/data/synthetic/constants.py``, ``niah.py``, ``variable_tracking.py``,
``common_words_extraction.py``, ``freq_words_extraction.py``, ``qa.py``); any change to a
prompt must be a deliberate change of the golden file (``CTXLENS_UPDATE_GOLDEN=1``) and of
``GENERATOR_VERSION``. ``test_templates.py`` checks the same prompts against RULER's template
strings directly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxlens.tasks import RULER_TASKS, generate

GOLDEN = Path(__file__).parent / "golden"
LENGTH = 2048
CHAT = ("{% for m in messages %}<|user|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def _check(name: str, sample) -> None:
    text = GOLDEN / f"{name}.txt"
    meta = GOLDEN / f"{name}.json"
    record = {"outputs": sample.outputs, "answer_prefix": sample.answer_prefix, "n_tokens": sample.n_tokens,
              "depths": sample.depths}
    if os.environ.get("CTXLENS_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        text.write_text(sample.prompt)
        meta.write_text(json.dumps(record, indent=1) + "\n")
    assert sample.prompt == text.read_text()
    assert record == json.loads(meta.read_text())


@pytest.mark.parametrize("task", RULER_TASKS)
def test_prompt_matches_golden(task, byte_tok):
    # the golden prompts are RULER's formats on the synthetic corpus's fact-free essays (the natural-text
    # haystack is tested in test_haystack.py)
    _check(task, generate(task, byte_tok, LENGTH, 1, seed=0, template="plain", cache=False,
                          options={"haystack_source": "builtin"})[0])


def test_chat_prompt_matches_golden(byte_tok):
    tok = byte_tok.__class__(tokenizer_object=byte_tok.backend_tokenizer, eos_token="<|endoftext|>")
    tok.chat_template = CHAT
    _check("niah_single_1_chat", generate("niah_single_1", tok, LENGTH, 1, seed=0, template="chat", cache=False)[0])
