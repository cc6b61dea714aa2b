"""A plain PyTorch training loop for any transformers causal-LM config (or any module).

AdamW (weight decay from step ``decay_start``), linear warmup then cosine decay to
``min_lr_ratio * lr``, gradient clipping, fp32 on
CPU and bf16 autocast on GPU, seeded data order (the caller's ``batches(step)`` is a pure
function of the step), periodic evaluation, early stopping on validation loss, and
checkpoint/resume. Used to train the zoo (the geometry paper, Section 3 / Appendix B: matched models
trained identically) and the sparse-parity models (the intrinsic-entropy paper, Section 4.2).

A batch is ``{"input_ids": [B, T], "targets": [B, T]}``: ``targets[b, t]`` is the token to
predict after reading position t, ``-100`` where nothing is scored.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Generic, Literal, TypedDict, TypeVar

import torch

from ctxlens.core import files, progress

Batch = dict[str, torch.Tensor]
M = TypeVar("M", bound=torch.nn.Module)


@dataclass
class TrainConfig:
    steps: int = 1000
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 50
    weight_decay: float = 0.1
    decay_start: int = 0  # weight decay is 0 before this step (lets a model leave a plateau first)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    eval_every: int = 100
    patience: int | None = None  # evaluations without improvement before stopping; None: never
    seed: int = 0
    device: str = "cpu"
    bf16: bool | None = None  # None: bf16 autocast on CUDA, fp32 elsewhere
    checkpoint: str | None = None  # file to save training state to at every evaluation (resume)
    log: Callable[[dict], None] | None = None


@dataclass
class TrainResult(Generic[M]):
    model: M  # the trained module itself (best-validation weights restored)
    best_val: float | None
    best_step: int | None
    steps: int
    stopped_early: bool
    seconds: float
    history: list[dict] = field(default_factory=list)


class _State(TypedDict):
    """Training state kept between evaluations and saved in the checkpoint (a plain dict on disk)."""

    step: int
    best_val: float | None
    best_step: int | None
    bad_evals: int
    history: list[dict]
    best_weights: dict[str, torch.Tensor] | None
    seconds: float  # training time over resumes; train() fills 0.0 where a checkpoint lacks it


def lm_targets(input_ids: torch.Tensor) -> Batch:
    """Next-token targets for plain language modelling: targets[:, t] = input_ids[:, t+1]."""
    targets = torch.full_like(input_ids, -100)
    targets[:, :-1] = input_ids[:, 1:]
    return {"input_ids": input_ids, "targets": targets}


def causal_lm_loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over scored positions; logits [B, T, V] vs targets [B, T]."""
    logits = model(input_ids=batch["input_ids"], use_cache=False).logits
    targets = batch["targets"].flatten()  # [n * S]
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets, ignore_index=-100)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warmup over ``cfg.warmup`` steps, then cosine from lr to min_lr_ratio * lr."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _to(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def _optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


@torch.no_grad()
def evaluate(model: M, val: list[Batch], loss_fn: Callable[[M, Batch], torch.Tensor], device: torch.device,
             autocast: Callable[[], AbstractContextManager[object]]) -> float:
    """Mean loss over validation batches, weighted by their number of scored targets."""
    model.eval()
    total, count = 0.0, 0
    for batch in val:
        batch = _to(batch, device)
        n = int((batch["targets"] != -100).sum())
        with autocast():
            total += float(loss_fn(model, batch)) * n
        count += n
    model.train()
    return total / max(1, count)


def train(
    model: M,
    batches: Callable[[int], Batch],
    cfg: TrainConfig,
    *,
    val: list[Batch] | None = None,
    loss_fn: Callable[[M, Batch], torch.Tensor] | None = None,
) -> TrainResult[M]:
    """Train ``model`` for ``cfg.steps`` steps on ``batches(step)``; the best-validation weights are
    restored at the end when ``val`` is given."""
    loss_fn = loss_fn or causal_lm_loss
    device = torch.device(cfg.device)
    use_bf16 = cfg.bf16 if cfg.bf16 is not None else device.type == "cuda"
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if use_bf16 else _null
    torch.manual_seed(cfg.seed)
    model.to(device).train()
    opt = _optimizer(model, cfg)
    state: _State = {"step": 0, "best_val": None, "best_step": None, "bad_evals": 0, "history": [],
                     "best_weights": None, "seconds": 0.0}
    if cfg.checkpoint and Path(cfg.checkpoint).is_file():
        state = {"seconds": 0.0, **_resume(cfg.checkpoint, model, opt)}
    start, stopped = time.perf_counter() - state["seconds"], False  # seconds: training time over resumes
    step = state["step"]
    while step < cfg.steps:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        opt.param_groups[0]["weight_decay"] = cfg.weight_decay if step >= cfg.decay_start else 0.0  # [decay, no_decay]
        batch = _to(batches(step), device)
        with autocast():
            loss = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        step += 1
        progress.at(step, cfg.steps, "training steps")
        if val and (step % cfg.eval_every == 0 or step == cfg.steps):
            v = evaluate(model, val, loss_fn, device, autocast)
            row = {"step": step, "train_loss": float(loss.detach()), "val_loss": v, "lr": lr_at(step - 1, cfg)}
            state["history"].append(row)
            if cfg.log:
                cfg.log(row)
            if state["best_val"] is None or v < state["best_val"]:
                state.update({"best_val": v, "best_step": step, "bad_evals": 0,
                              "best_weights": {k: t.detach().clone() for k, t in model.state_dict().items()}})
            else:
                state["bad_evals"] += 1
            state["step"], state["seconds"] = step, time.perf_counter() - start
            if cfg.checkpoint:
                _save(cfg.checkpoint, model, opt, state)
            if cfg.patience is not None and state["bad_evals"] >= cfg.patience:
                stopped = True
                break
    if state["best_weights"] is not None:
        model.load_state_dict(state["best_weights"])
    model.eval()
    return TrainResult(model, state["best_val"], state["best_step"], step, stopped,
                       time.perf_counter() - start, state["history"])


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


def _save(path: str, model: torch.nn.Module, opt: torch.optim.Optimizer, state: _State) -> None:
    """Write the checkpoint through a new temporary file (``tempfile.mkstemp``: a random name created
    exclusively, so a planted ``*.tmp`` link is never written through) renamed over ``path``; a full
    disk or read-only folder is one sentence and leaves the previous checkpoint as it was."""
    target = Path(path)
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as err:
        raise files.user_error(err, target, "write") or err from None
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state,
                        "rng": torch.get_rng_state()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(name, target)
    except BaseException as err:
        Path(name).unlink(missing_ok=True)
        user = files.user_error(err, target, "write") if isinstance(err, OSError) else None
        if user is not None:
            raise user from None
        raise


def _resume(path: str, model: torch.nn.Module, opt: torch.optim.Optimizer) -> _State:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    torch.set_rng_state(ckpt["rng"])
    return ckpt["state"]


def config_dict(cfg: TrainConfig) -> dict[str, object]:
    """The JSON-able part of a TrainConfig, for recording how a model was made."""
    return {k: v for k, v in asdict(cfg).items() if k != "log"}
