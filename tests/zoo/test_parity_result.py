"""The recorded parity-transformer result vs the exact Bayes risk (Intrinsic Entropy of Context Length
Scaling in LLMs, Section 4.3, Appendix C.4, Table 1), and the ``parity-table`` experiment that makes it.

``src/ctxlens/zoo/results/parity_table1.json`` was written by ``train_parity`` with the defaults that
``ctxlens run parity-table`` uses (about 45 minutes on one CPU thread, so it is recorded, not rerun
here). These tests recompute
everything they compare from the current code and the paper, never from the file: the Bayes risk of
every row from ``SparseParity.paper()`` (itself checked against Table 1's printed column), the
dataset and training settings from the current defaults.
"""

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

import ctxlens.zoo.parity_train as pt
from ctxlens.data.sparse_parity import SparseParity

RESULT = Path(pt.__file__).parent / "results" / "parity_table1.json"
# the intrinsic-entropy paper, Appendix C.4, Table 1, "Minimum CE Loss Calculated"
TABLE1_MIN_CE = {17: 0.4643, 20: 0.3988, 23: 0.3437, 25: 0.3116, 28: 0.2686, 30: 0.2429, 35: 0.1864,
                 40: 0.1387, 50: 0.0612}
TOLERANCE = 0.01  # issue 3 part 4: within 0.01 nats of the Bayes risk at every listed length


@pytest.fixture(scope="module")
def record():
    return json.loads(RESULT.read_text())


def test_record_is_of_the_current_dataset_and_settings(record):
    ds = SparseParity.paper()
    assert record["dataset"] == {k: getattr(ds, k) for k in record["dataset"]}
    assert set(record["dataset"]) == {"n_bits", "tasks_per_bit", "first_max_bit", "alpha", "mask_fraction",
                                      "min_ctl", "seed"}
    spec = asdict(pt.ParitySpec())
    recorded = dict(record["spec"])
    assert recorded.pop("threads") == 1  # the run used one CPU thread; the default leaves torch's
    spec.pop("threads")
    assert recorded == spec
    assert record["spec"]["train_ctl"] is None  # trained on the paper's masking mixture
    assert [r["ctl"] for r in record["rows"]] == list(pt.TABLE1_CTLS) == sorted(TABLE1_MIN_CE)


def test_recorded_rows_are_the_exact_bayes_risk_and_an_honest_loss(record):
    ds = SparseParity.paper()
    for row in record["rows"]:
        ctl = row["ctl"]
        risk = ds.bayes_risk(ctl)  # recomputed, not read from the file
        assert risk == pytest.approx(TABLE1_MIN_CE[ctl], abs=5e-4)  # and it is the paper's column
        assert row["bayes_risk"] == pytest.approx(risk, abs=1e-12)
        assert row["gap"] == pytest.approx(row["loss"] - risk, abs=1e-12)
        assert row["n"] >= 10_000
        # a loss far below the minimum would mean the test data leaked; the task-mix sampling
        # noise of the mean over n samples is below 0.004 nats (std of CE <= ln2 / 2)
        assert row["loss"] - risk > -4 * (math.log(2) / 2) / math.sqrt(row["n"]), ctl


def test_recorded_loss_is_within_tolerance_of_the_bayes_risk_at_every_table1_length(record):
    ds = SparseParity.paper()
    gaps = {row["ctl"]: row["loss"] - ds.bayes_risk(row["ctl"]) for row in record["rows"]}
    assert sorted(gaps) == sorted(TABLE1_MIN_CE)
    assert all(g <= TOLERANCE for g in gaps.values()), {c: round(g, 4) for c, g in gaps.items()}


def test_shipped_model_is_within_tolerance_on_fresh_samples_through_transformers_own_forward(record):
    """The saved model, loaded as any transformers checkpoint and run through its own forward (not
    the training script's table form), on samples the script never drew, against the exact risk.

    The loss at each length is estimated per task and weighted by the exact task frequencies
    (stratified), so the sampling noise of the task mix, up to 0.0035 nats at this n, is not in it."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(RESULT.parent / "parity_model").eval()
    assert sum(p.numel() for p in model.parameters()) == record["model"]["parameters"]
    ds = SparseParity.paper()
    n = 10_000  # per length; the rarest task (0.4%) gets about 40 samples
    gaps = {}
    with torch.no_grad():
        for ctl in TABLE1_MIN_CE:
            batch = ds.sample(n, ctl=ctl, seed=424_242 + ctl)  # [n, 61]; the script's seeds are near 1e6
            logits = torch.cat([model(input_ids=ids, logits_to_keep=1).logits[:, -1]
                                for ids in batch["input_ids"].split(256)])  # [n, V]
            ce = torch.nn.functional.cross_entropy(logits, batch["targets"][:, -1], reduction="none").double()  # [n]
            count = torch.bincount(batch["task"], minlength=ds.n_tasks)  # [T]
            assert count.min() > 0
            per_task = torch.zeros(ds.n_tasks, dtype=torch.float64).index_add_(0, batch["task"], ce) / count  # [T]
            gaps[ctl] = float((ds.task_probs * per_task).sum()) - ds.bayes_risk(ctl)
    assert all(abs(g) <= TOLERANCE for g in gaps.values()), {c: round(g, 4) for c, g in gaps.items()}


@pytest.mark.parametrize("layers", [1, 2])
def test_label_logits_equal_the_full_forward(layers):
    """The training forward skips work the label does not need; it must equal transformers' own."""
    ds = SparseParity.paper()
    model = pt.build_model(ds, pt.ParitySpec(layers=layers, ffn=64)).eval()
    ids = ds.sample(16, seed=3)["input_ids"]  # [16, 61]
    with torch.no_grad():
        full = model(input_ids=ids).logits[:, -1]  # [16, V]
        torch.testing.assert_close(pt.label_logits(model, ids), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("ctl", [None, 0, 17, 60])
def test_one_layer_table_form_equals_transformers_forward_and_its_gradients(ctl):
    """The table form of a one-layer model (scores looked up, attention as token masses) must be the
    same function as transformers' own forward, with the same gradients, masked bits included."""
    ds = SparseParity.paper()
    spec = pt.ParitySpec(hidden=48, heads=3, ffn=40, init_std=0.5, seed=2)  # large init: peaked attention
    fast, full = pt.build_model(ds, spec), pt.build_model(ds, spec)
    batch = ds.sample(64, ctl=ctl, seed=7)  # [64, 61]
    labels = batch["targets"][:, -1]  # [64]
    loss_fast = torch.nn.functional.cross_entropy(pt.one_layer_label_logits(fast, batch["input_ids"]), labels)
    logits = full(input_ids=batch["input_ids"]).logits[:, -1]  # [64, V]
    loss_full = torch.nn.functional.cross_entropy(logits, batch["targets"][:, -1])
    loss_fast.backward()
    loss_full.backward()
    torch.testing.assert_close(loss_fast, loss_full, atol=1e-5, rtol=1e-5)
    for (name, a), b in zip(fast.named_parameters(), full.parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_label_logits_takes_the_general_path_when_the_context_is_not_bits():
    ds = SparseParity.paper()
    model = pt.build_model(ds, pt.ParitySpec(ffn=64)).eval()
    ids = ds.sample(8, seed=3)["input_ids"]  # [8, 61]
    ids[:, 5] = pt.N_CONTEXT_TOKENS + 4  # a task token inside the context: no table entry for it
    with torch.no_grad():
        full = model(input_ids=ids).logits[:, -1]  # [8, V]
        torch.testing.assert_close(pt.label_logits(model, ids), full, atol=1e-5, rtol=1e-5)


def test_a_brief_run_of_the_experiment_reduces_the_loss(tmp_path):
    """Runs ``parity-table`` end to end (train, evaluate, one row per length). A brief run does not
    leave the parity plateau; it learns that the answer is one of the two bit tokens, which takes the
    loss from the untrained model's (measured here, independently of the experiment) to near ln 2."""
    from ctxlens.runner.execute import run
    from ctxlens.runner.store import read_rows

    options = {"steps": 40, "batch": 32, "eval_every": 20, "val_size": 256, "test_size": 256, "lr": 3e-3,
               "warmup": 5, "ctls": [17, 50], "threads": 1}
    run("parity-table", ["parity-transformer"], tmp_path / "run", options, progress=False)
    rows = read_rows(tmp_path / "run")
    spec = pt.ParitySpec(**{**asdict(pt.ParitySpec()), "steps": 40, "batch": 32, "val_size": 256})
    ds = SparseParity.paper()
    untrained = pt.build_model(ds, spec).eval()
    val = ds.sample(512, seed=12_345)  # [512, 61], mixture
    with torch.no_grad():
        before = float(pt.last_token_loss(untrained, val))
    assert before > 1.0  # logits spread over the whole vocabulary
    assert [(r["seed"], r["ctl"]) for r in rows] == [(0, 17), (0, 50)]
    assert rows[0]["best_val"] < math.log(2) + 0.05 < before and rows[0]["best_step"] in (20, 40)
    assert all(r["gap"] == pytest.approx(r["loss"] - ds.bayes_risk(r["ctl"]), abs=1e-12) for r in rows)
    run("parity-table", ["parity-transformer"], tmp_path / "run", options, progress=False)  # resumes: nothing new
    assert read_rows(tmp_path / "run") == rows
