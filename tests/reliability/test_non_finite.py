"""Issue 10, part 3: non-finite hidden states and losses are flagged in the row, never averaged in.

A tiny llama gets a NaN in layer 1's MLP output weights, so the residual after layer 1's mixer
is still finite and everything after its MLP is NaN (an independent, known structure). Each
experiment's rows must say so row by row: values None with a reason in ``flag``, and untouched
layers measured normally.
"""

import math

import pytest
import torch

from ctxlens.cli import main
from ctxlens.runner import read_rows

RUNS = {
    "token-loss": (["--lengths", "16", "--n-samples", "2"], ["nll", "ppl"]),
    "accs-layers": (["--lengths", "64", "--n-sequences", "2", "--suffix-len", "8"], ["self_sim", "anisotropy", "accs"]),
    "loss-vs-length": (["--lengths", "4,8", "--n-samples", "2"], ["ce", "value"]),
    "intrinsic-entropy": (["--lengths", "4,8", "--n-samples", "16", "--entropy-n", "2", "--eigen-rows", "2"],
                          ["value"]),
    "suffix-ppl": (["--lengths", "64", "--n-sequences", "2", "--suffix-len", "8"], ["nll", "ppl"]),
}


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    from ctxlens.zoo.tokenizer import byte_tokenizer
    from tests.conftest import build_model

    path = tmp_path_factory.mktemp("nan") / "model"
    model = build_model("llama", vocab_size=257, num_hidden_layers=3)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    model.save_pretrained(path)
    byte_tokenizer().save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_non_finite_values_are_flagged_not_averaged(name, nan_model, tmp_path):
    options, metrics = RUNS[name]
    assert main(["run", name, "--model", nan_model, "--out", str(tmp_path / "r"), "--no-progress", *options]) == 0
    rows = read_rows(tmp_path / "r")
    assert rows
    for row in rows:
        values = [row[m] for m in metrics if m in row]
        if any(v is None for v in values):
            assert row.get("flag"), row  # a missing number always comes with its reason
        else:
            assert all(math.isfinite(v) for v in values)
    if name == "accs-layers":  # layers 0 and 1 (residual after the mixer) are finite; layer 2 is not
        by_layer = {r["layer"]: r for r in rows if "level" not in r}  # the pooled rows (not per window)
        assert by_layer[0]["flag"] is None and by_layer[1]["flag"] is None and by_layer[2]["flag"]
        assert by_layer[2]["accs"] is None
    else:  # the final states are NaN everywhere: no value may be reported as a number
        assert all(row.get("flag") for row in rows if row.get("stage") != "fit" or row.get("value") is None)
