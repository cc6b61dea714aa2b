"""``loss-vs-length`` with ``scoring="positions"`` on the reference models: one forward per window
must give, for every scored offset p, the loss that a separate forward of exactly the p tokens before
it gives (with the model's BOS first when its tokenizer adds one: Gemma 3 does, SmolLM2 does not).

Independent truth: transformers' own full-logit forward of each shortened window, computed here.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.real


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_one_forward_equals_separate_forwards(name, request):
    from ctxlens.experiments.loss_vs_length import Config, band_offsets, run
    from ctxlens.probes.visible import samples
    from ctxlens.probes.windows import tokenizer_adds_bos

    lm = request.getfixturevalue(name)
    lengths = [4, 16, 64]
    config = Config(source="builtin:test", lengths=lengths, n_samples=2, n_scored=4, band=16, scoring="positions")
    rows = run(lm, config, {"stage": "measure", "source": "builtin:test", "scoring": "positions"}, {})
    ids = samples(lm, config, 64 + 1, {})  # [2, 65] the run's windows of text ids
    bos = tokenizer_adds_bos(lm.tokenizer)
    assert bos == (name == "gemma3")
    offsets = band_offsets(lengths, 4, 16)
    assert offsets == {4: [4], 16: [16], 64: [61, 62, 63, 64]}  # w = min(4, l // 16), at least 1
    got = {(r["length"], r["sample"]): r for r in rows if r["stage"] == "measure"}
    for n in lengths:
        for i in range(2):
            want = []
            for p in offsets[n]:
                window = ids[i : i + 1, :p]  # the p tokens before offset p
                if bos:
                    window = torch.cat([torch.tensor([[lm.tokenizer.bos_token_id]]), window], 1)
                with torch.no_grad():
                    logits = lm.model(input_ids=window).logits[0, -1].float()  # [vocab]
                want.append(float(-torch.log_softmax(logits, -1)[ids[i, p]]))
            assert got[(n, i)]["bos"] is bos
            assert got[(n, i)]["ce"] == pytest.approx(sum(want) / len(want), abs=2e-4)
