"""BOS by default on the reference models, and the weights record of their GGUF files.

Independent truths: each tokenizer's own encoding of "a", a plain transformers forward on
[BOS] + window computed here, the gguf package's tensor list, and the file's sha256 (hashlib).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from ctxlens.lm import gguf

pytestmark = pytest.mark.real


def _adds(tokenizer) -> bool:
    return tokenizer.encode("a", add_special_tokens=True)[0] == tokenizer.bos_token_id


def test_gemma3_default_puts_bos_first_and_ce_equals_a_plain_forward(gemma3):
    from ctxlens.experiments.loss_vs_length import Config, run
    from ctxlens.probes.visible import samples

    assert _adds(gemma3.tokenizer)  # Gemma's tokenizer adds a BOS to text
    config = Config(source="builtin:test", lengths=[4, 8, 16], n_samples=2, n_scored=2)
    cache: dict = {}
    ids = samples(gemma3, config, 16 + 2, cache)[0].tolist()  # sample 0: [16 + 2] text ids
    bos = gemma3.tokenizer.bos_token_id
    assert bos not in ids[:1]
    for length in (4, 16):
        rows = run(gemma3, config, {"stage": "measure", "source": "builtin:test", "length": length}, cache)
        assert all(r["bos"] is True for r in rows)
        nll = []
        with torch.no_grad():
            for k in range(2):
                window = torch.tensor([[bos, *ids[16 + k - length : 16 + k]]], device=gemma3.device)
                logits = gemma3.model(window).logits[0, -1].double()
                nll.append(float(torch.logsumexp(logits, 0) - logits[ids[16 + k]]))
        assert math.isclose(rows[0]["ce"], sum(nll) / 2, rel_tol=1e-3)


def test_smollm2_default_follows_its_tokenizer(smollm2):
    from ctxlens.experiments.loss_vs_length import Config
    from ctxlens.probes.visible import uses_bos

    config = Config(source="builtin:test", lengths=[4], n_samples=1, n_scored=1)
    assert uses_bos(smollm2, config) is _adds(smollm2.tokenizer)


def _gguf_file(lm) -> Path:
    return Path(json.loads((Path(lm.model.config._name_or_path) / gguf.SOURCE_FILE).read_text())["path"])


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_weights_record_agrees_with_the_gguf_file(name, request):
    import gguf as gg

    lm = request.getfixturevalue(name)
    path = _gguf_file(lm)
    if not path.is_file():
        pytest.skip(f"{path} was removed after conversion")
    record = lm.info.weights
    reader = gg.GGUFReader(path)  # the package's own parser of the whole file
    field = reader.fields["general.file_type"]
    stated = gg.LlamaFileType(int(field.parts[field.data[0]][0])).name.removeprefix("MOSTLY_")
    tensors = Counter(t.tensor_type.name for t in reader.tensors if len(t.shape) > 1)
    base = stated.removesuffix("_M").removesuffix("_S").removesuffix("_L")  # Q4_K_M -> Q4_K
    assert record["format"] == "GGUF" and record["file"] == path.name
    assert record["quantization"] == stated and stated in path.name.upper() and base in tensors
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["digest"] == f"sha256:{digest}"


def test_gguf_file_type_without_the_package_is_none(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gguf" else real(n, *a))
    assert gguf.file_type(tmp_path / "x.gguf") is None
