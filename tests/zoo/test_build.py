"""Zoo models train with the shared recipe, save as ordinary checkpoints and load as zoo:NAME."""

import dataclasses
import math

import pytest
import torch

import ctxlens
from ctxlens import CtxlensError
from ctxlens.cli import main
from ctxlens.zoo.build import train_zoo_model, unigram_baseline
from ctxlens.zoo.registry import home
from ctxlens.zoo.specs import RECIPE, ZOO, build_config

QUICK = dataclasses.replace(RECIPE, seq_len=192, batch=2, steps=4, warmup=2, eval_every=2, val_windows=2,
                            probe_distances=(120,), probes_per_distance=2)


def test_unigram_baseline_brute_force():
    train_ids = torch.tensor([0, 0, 1, 2])
    val = torch.tensor([[5, 0, 1]])  # targets 0 and 1 (the first token is never predicted)
    vocab = 4  # add-one: p(0) = 3/8, p(1) = 2/8
    expected = -(math.log(3 / 8) + math.log(2 / 8)) / 2
    assert unigram_baseline(train_ids, val, vocab) == pytest.approx(expected)


def test_zoo_specs_are_matched_in_size():
    from transformers import AutoModelForCausalLM

    params = {n: sum(p.numel() for p in AutoModelForCausalLM.from_config(build_config(s, 257, 256)).parameters())
              for n, s in ZOO.items()}
    assert all(0.7e6 <= p <= 1.2e6 for p in params.values()), params
    assert max(params.values()) / min(params.values()) < 1.5, params


def test_a_spec_learning_rate_overrides_the_recipe(tmp_path):
    spec = dataclasses.replace(ZOO["rope"], lr=4e-4)
    rec = train_zoo_model(spec, tmp_path / "rope", dataclasses.replace(QUICK, steps=2), log=lambda *_: None)
    assert rec["train"]["lr"] == 4e-4 and rec["recipe"]["lr"] == RECIPE.lr
    assert rec["history"][-1]["lr"] <= 4e-4


def test_train_save_and_load_as_zoo_model(capsys, monkeypatch, tmp_path):
    import ctxlens.zoo.registry as registry

    with monkeypatch.context() as m:
        m.setattr(registry, "SHIPPED", tmp_path / "no-shipped-checkpoints")
        with pytest.raises(CtxlensError, match="ctxlens zoo train rope"):
            ctxlens.load("zoo:rope")
    rec = train_zoo_model(ZOO["rope"], home() / "zoo" / "rope", QUICK, log=lambda *_: None)
    assert rec["steps_run"] == 4 and rec["params"] > 0 and len(rec["history"]) == 2
    assert rec["retrieval"][0]["n"] == 2 and 0 <= rec["retrieval"][0]["accuracy"] <= 1
    # the shipped checkpoints are back; the user's own training still comes first
    lm = ctxlens.load("zoo:rope")
    assert registry.trained_path("rope") == home() / "zoo" / "rope"
    assert lm.family.name == "llama" and lm.tokenizer is not None
    ids = torch.tensor([list(b"The code for the red door is 1234.")])
    assert lm.token_losses(ids).isfinite().all()
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{rec['val_loss']:.3f}" in out


def test_training_windows_follow_the_copy_schedule():
    from ctxlens.zoo.build import training_windows

    recipe = dataclasses.replace(RECIPE, seq_len=64, batch=4, copy_phases=((2, 16, "letters"), (3, 32, "printable")),
                                 phase_corpus_share=0.25, copy_share=0.5, copy_alphabet="alphanumeric")
    stream = torch.arange(1000) % 7  # corpus stand-in: period 7, never a copy window's bytes
    shapes = [tuple(training_windows(stream, recipe, step).shape) for step in range(4)]
    assert shapes == [(16, 16), (16, 16), (8, 32), (4, 64)]  # tokens per step constant
    for step, n in ((0, 16), (2, 8)):  # in the phases a quarter of the windows are corpus, the rest copies
        phase = training_windows(stream, recipe, step)
        corpus = (phase < 7).all(-1)
        assert corpus.sum() == n // 4 and (phase[~corpus] >= 33).all()
    assert (training_windows(stream, recipe, 0)[4:] >= ord("a")).all()  # letters in the first phase
    after = torch.cat([training_windows(stream, recipe, step) for step in range(3, 40)])  # [n, 64]
    copies = (after >= 33).all(-1)
    assert ((after < 7).all(-1) | copies).all()  # each row is wholly corpus or wholly copy
    assert 0.3 < copies.float().mean() < 0.7
    assert torch.equal(training_windows(stream, recipe, 5), training_windows(stream, recipe, 5))


def test_xlstm_trains_and_is_probed_at_lengths_off_its_chunk_size(tmp_path):
    """The mLSTM's chunked training kernel needs lengths divisible by its chunk; probes are not."""
    quick = dataclasses.replace(QUICK, seq_len=128, probe_distances=(104,))  # probes of 112 bytes, chunk 32
    rec = train_zoo_model(ZOO["mlstm"], tmp_path / "mlstm", quick, log=lambda *_: None)
    assert rec["retrieval"][0]["n"] == 2 and math.isfinite(rec["val_loss"])
