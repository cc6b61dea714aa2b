"""Greedy decoding backends: the transformers path equals a no-cache argmax loop (also for SSM and
hybrid models), batches equal singles, only generated text comes back; HTTP and vLLM backends."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.lm import from_model
from ctxlens.tasks import generate
from ctxlens.tasks.backends import OpenAIBackend, TransformersBackend, backend_for
from tests.conftest import build_model


def _lm(family: str, byte_tok):
    lm = from_model(build_model(family, vocab_size=257))
    lm.tokenizer = byte_tok
    return lm


def _greedy_without_cache(model, ids: list[int], n: int) -> list[int]:
    x = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(n):
            nxt = model(x, use_cache=False).logits[0, -1].argmax()
            x = torch.cat([x, nxt.view(1, 1)], 1)
    return x[0, len(ids):].tolist()


@pytest.mark.parametrize("family", ["llama", "mamba2", "bamba"])
def test_transformers_backend_is_greedy_decoding_of_the_prompt(family, byte_tok):
    """Same path for attention, SSM and hybrid models; two equal-length prompts share a batch."""
    lm = _lm(family, byte_tok)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(32, 127, (n,), generator=g).tolist() for n in (24, 24, 17)]
    backend = TransformersBackend(lm, batch_size=2)
    backend.eos = set()  # random weights may emit the end-of-text id; compare full budgets
    got = backend.generate(prompts, [4, 4, 3])
    for p, n, text in zip(prompts, (4, 4, 3), got):
        assert text == byte_tok.decode(_greedy_without_cache(lm.model, p, n))
    assert backend.generate([prompts[1]], [4]) == got[1:2]


def test_task_prompts_generate_only_new_text(byte_tok):
    lm = _lm("llama", byte_tok)
    samples = generate("niah_single_1", byte_tok, 384, 2, budget=5, cache=False)
    backend = TransformersBackend(lm)
    backend.eos = set()
    got = backend.generate([s.input_ids for s in samples], [5, 5])
    assert got == [byte_tok.decode(_greedy_without_cache(lm.model, s.input_ids, 5)) for s in samples]


def test_generation_stops_at_end_of_sequence(byte_tok):
    backend = TransformersBackend(_lm("llama", byte_tok))
    backend.eos = {ord("c")}
    assert backend._decode([ord("a"), ord("b"), ord("c"), ord("d")]) == "ab"


def test_openai_backend_sends_ids_greedy_and_returns_the_completion(byte_tok):
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            seen.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            body = json.dumps({"choices": [{"text": " 1234567"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        backend = OpenAIBackend(f"http://127.0.0.1:{server.server_port}/v1", "m", byte_tok)
        assert backend.generate([[72, 105]], [7]) == [" 1234567"]
        path, body = seen[0]
        assert path == "/v1/completions" and body == {"model": "m", "prompt": [72, 105], "max_tokens": 7,
                                                       "temperature": 0.0}
        text = OpenAIBackend(f"http://127.0.0.1:{server.server_port}/v1", "m", byte_tok, send="text")
        text.generate([[72, 105]], [3])
        assert seen[1][1]["prompt"] == "Hi"
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(CtxlensError, match="failed"):
        OpenAIBackend(f"http://127.0.0.1:{server.server_port}/v1", "m", timeout=2).generate([[1]], [1])


def test_vllm_backend_without_vllm_is_a_clear_error(byte_tok):
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(CtxlensError, match="needs the vllm package"):
            backend_for(_lm("llama", byte_tok), "vllm")
    with pytest.raises(CtxlensError, match="api-base"):
        backend_for(_lm("llama", byte_tok), "openai")
