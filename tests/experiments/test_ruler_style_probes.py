"""The RULER-wording passkey of ``head-masking`` and needle of ``rope-theta-sweep`` (issue 25
part 6): RULER's niah_single_1 prompt, scored as RULER scores, flagged where it cannot fit."""

from __future__ import annotations

import torch

from ctxlens.probes import passkey
from ctxlens.zoo.tokenizer import byte_tokenizer


class _Echo:
    """A stand-in LM whose greedy generation is a fixed text (byte tokenizer)."""

    def __init__(self, text: str):
        self.tokenizer, self.text = byte_tokenizer(), text

    def greedy(self, ids, max_new_tokens, pad_token_id):
        new = self.tokenizer(self.text, add_special_tokens=False)["input_ids"][:max_new_tokens]
        return torch.cat([ids, torch.tensor([new])], dim=1)

    def require_tokenizer(self, what):
        pass


def test_ruler_passkey_is_rulers_niah_single_1_with_the_needle_at_the_depth():
    tok = byte_tokenizer()
    probes = passkey.probes(tok, 1024, [0.25, 0.75], 2, seed=3, style="ruler")
    assert [p.depth for p in probes] == [0.25, 0.25, 0.75, 0.75]
    for p in probes:
        text = tok.decode(p.ids.tolist())
        assert "special magic number" in text and text.count(p.answer) == 1 and p.answer.isdigit()
        assert p.n_tokens + p.budget <= 1024 and p.budget == passkey.RULER_BUDGET
        at = text.index(p.answer) / len(text)
        assert abs(at - p.depth) < 0.15, (at, p.depth)


def test_ruler_probe_counts_the_answer_anywhere_in_the_generation_as_ruler_does():
    probe = passkey.probes(byte_tokenizer(), 512, [0.5], 1, style="ruler")[0]
    assert passkey.retrieved(_Echo(f" is: {probe.answer}."), probe)
    assert not passkey.retrieved(_Echo(" is: 1234."), probe)
    corpus_style = passkey.Probe(probe.ids, probe.answer, 0.5)  # the corpus rule: the answer must come first
    assert not passkey.retrieved(_Echo(f" is: {probe.answer}."), corpus_style)


def test_a_length_rulers_template_cannot_fit_is_a_flag_not_an_error():
    row = passkey.ruler_needle_accuracy(_Echo("x"), 40, 0.5, 2, seed=0)
    assert row["accuracy"] is None and row["n"] == 0 and row["flag"]
    hit = passkey.ruler_needle_accuracy(_Echo("x"), 512, 0.5, 2, seed=0)
    assert hit["n"] == 2 and hit["accuracy"] == 0.0 and hit["flag"] is None


def test_head_masking_on_a_model_outside_the_zoo_asks_in_rulers_wording(tmp_path):
    import shutil

    from ctxlens.lm.loading import resolve
    from ctxlens.runner import read_rows
    from ctxlens.runner.execute import run

    hub = tmp_path / "not-zoo"  # the zoo's random llama under a plain path: not a zoo model
    shutil.copytree(resolve("zoo:random-llama"), hub)
    options = {"tasks": ["passkey"], "lengths": [110, 400], "depths": [0.5], "n_passkey": 1, "fractions": [0.25],
               "n_draws": 1, "detect_length": 64, "detect_samples": 1, "top_k": 8, "source": "random",
               "train_length": 128}
    run("head-masking", [str(hub), "zoo:random-llama"], tmp_path / "run", options, progress=False)
    rows = read_rows(tmp_path / "run")
    style = {(r["model"], r["passkey_style"]) for r in rows}
    assert style == {(str(hub), "ruler"), ("zoo:random-llama", "corpus")}
    short = [r for r in rows if r["model"] == str(hub) and r["length"] == 110]
    assert short and all(r["score"] is None and r["flag"] for r in short)  # RULER's template needs more than 110
    assert all(r["score"] is not None for r in rows if r["length"] == 400)
