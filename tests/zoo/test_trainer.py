"""The trainer: learning, schedule, early stopping with best weights restored, exact resume."""

import math

import pytest
import torch

from ctxlens.zoo.trainer import TrainConfig, lm_targets, lr_at, train
from tests.conftest import build_model


def _pattern_batches(step: int):
    g = torch.Generator().manual_seed(step)
    start = torch.randint(0, 10, (8, 1), generator=g)
    ids = (start + torch.arange(32)) % 10 + 3  # counting sequences: fully predictable after one token
    return lm_targets(ids)


def test_learns_a_predictable_sequence():
    model = build_model("llama")
    val = [_pattern_batches(10_000)]
    res = train(model, _pattern_batches, TrainConfig(steps=120, lr=1e-2, warmup=10, eval_every=40), val=val)
    first, last = res.history[0]["val_loss"], res.best_val
    assert last < 0.1 * math.log(256) and last < first
    assert [h["step"] for h in res.history] == [40, 80, 120]


def test_schedule_warmup_then_cosine():
    cfg = TrainConfig(steps=110, lr=1.0, warmup=10, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
    assert lr_at(60, cfg) == pytest.approx(0.1 + 0.9 * 0.5)  # half way through the cosine
    assert lr_at(110, cfg) == pytest.approx(0.1)


class _Scalar(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))


def test_early_stopping_restores_best_weights():
    """Training pulls w to 1 while validation loss w^2 only rises: stop after `patience` evals."""
    def loss_fn(model, batch):
        return ((model.w - batch["input_ids"].float()) ** 2).mean()

    batches = lambda step: {"input_ids": torch.ones(1, 1), "targets": torch.zeros(1, 1, dtype=torch.long)}  # noqa: E731
    val = [{"input_ids": torch.zeros(1, 1), "targets": torch.zeros(1, 1, dtype=torch.long)}]
    res = train(_Scalar(), batches, TrainConfig(steps=100, lr=0.05, warmup=1, eval_every=5, patience=3,
                                                weight_decay=0.0), val=val, loss_fn=loss_fn)
    assert res.stopped_early and res.steps == 20 and res.best_step == 5
    assert float(res.model.w.detach()) ** 2 == pytest.approx(res.best_val)


def test_resume_from_checkpoint_equals_uninterrupted(tmp_path):
    cfg = dict(steps=30, lr=1e-2, warmup=5, eval_every=10)
    val = [_pattern_batches(10_000)]
    clean = train(build_model("llama"), _pattern_batches, TrainConfig(**cfg), val=val)

    def crashing(step):
        if step == 25:
            raise KeyboardInterrupt
        return _pattern_batches(step)

    ckpt = str(tmp_path / "state.pt")
    with pytest.raises(KeyboardInterrupt):
        train(build_model("llama"), crashing, TrainConfig(**cfg, checkpoint=ckpt), val=val)
    resumed = train(build_model("llama"), _pattern_batches, TrainConfig(**cfg, checkpoint=ckpt), val=val)
    assert resumed.history == clean.history
    for (k, a), b in zip(clean.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), k


def test_weight_decay_starts_at_decay_start():
    """With decay_start past the last step the run is the run without weight decay; with it at
    step k, the first k steps are that run's and the rest differ."""
    cfg = dict(steps=12, lr=1e-2, warmup=2, eval_every=4, weight_decay=0.5)
    val = [_pattern_batches(10_000)]
    none = train(build_model("llama"), _pattern_batches, TrainConfig(**{**cfg, "weight_decay": 0.0}), val=val)
    late = train(build_model("llama"), _pattern_batches, TrainConfig(**cfg, decay_start=12), val=val)
    mid = train(build_model("llama"), _pattern_batches, TrainConfig(**cfg, decay_start=4), val=val)
    for (k, a), b in zip(none.model.state_dict().items(), late.model.state_dict().values()):
        assert torch.equal(a, b), k
    assert mid.history[0] == none.history[0] and mid.history[-1] != none.history[-1]
