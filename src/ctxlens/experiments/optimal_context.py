"""``optimal-context``: optimal context length vs training-set size, on sparse parity.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), Section 3 (Eq. 5-6, Figure 4)
and Appendix F (Figure 12). With a finite training set of ``D`` samples the validation loss at
context length ``l`` is a Bayes risk that falls with ``l`` plus an approximation loss that grows
with ``l`` and falls with ``D``; so for each ``D`` there is an optimal ``l``, and it grows with
``D``. Appendix F checks this on the synthetic sparse-parity data with MLPs: fix the training-set
size, train for many epochs until the model overfits, and take the best validation loss as the
loss of that (training-set size, context length) pair. On parity the mechanism is plain: every
visible bit that a sample's task does not use is a chance to fit a spurious pattern, so a small
training set learns the few near tasks best when the far bits are hidden, and a larger one can
afford to see more.

For every pair ``(n_train, ctl)`` of the grid and every seed (one unit each):

- the training set is ``n_train`` samples of ``SparseParity`` with every bit at index ``>= ctl``
  masked; at one seed its bits and tasks are the same for every ``ctl``, so along a row of the
  grid only the visible context changes;
- a fresh model (the run's model spec: ``parity-mlp``, the context-MLP model of Appendix J.3, the
  default; or ``parity-transformer``, the small RoPE Llama of ``ctxlens.zoo.parity_train``) is
  trained on it for whole epochs in a seeded order at a constant learning rate, evaluated every
  ``eval_epochs`` epochs on a fresh validation set masked at the same ``ctl`` (the paper validates
  at the training context length), and stopped once ``patience`` evaluations in a row have not
  improved on the best, or after ``max_epochs``;
- one row: ``best_val_loss`` (nats), the ``best_epoch`` / ``best_step`` it was reached at, the
  ``epochs`` and ``steps`` run, ``stopped_early``, and the exact ``bayes_risk`` at that ``ctl``
  (the loss of a model that learned every visible task).

``optimal_lengths(rows)`` gives, per model and training-set size, the ``ctl`` with the lowest best
validation loss averaged over seeds (ties: the shorter).

    ctxlens run optimal-context --out DIR [--grid full] [--model parity-transformer] [--threads 1]

The paper gives neither its grid, its MLP, nor its optimiser, and its Appendix F dataset has more
than 500 bits. The defaults here are a CPU-sized instance with the paper's frequency law (20 bits,
one task per farther bit from bit 2 on: 18 tasks, frequency ∝ (farther bit) ** -1.15) and a
64-wide MLP; ``grid="reduced"`` (the default: 3 sizes x 6 lengths, one seed; about 20 s on a free
CPU thread, 2-3 minutes on a busy 2-core machine) and ``grid="full"`` (8 sizes x 9 lengths x 3
seeds) pick sizes, lengths and seeds unless they are given. On the reduced grid the optimum was
ctl 4, 6 and 8 at 500, 2000 and 8000 samples (seed 0), and it grew with the size at each of seeds
0-4 (at 500 samples: 3 at seed 1, 4 at the others; 6 and 8 at every seed at 2000 and 8000). The
full grid (about 6 CPU-minutes) gave, averaged over its seeds, ctl 3, 3, 5, 5, 6, 8, 8 and 12 at
250, 500, ..., 32000 samples; 4 of its 216 runs were still improving at ``max_epochs``.
"""

from __future__ import annotations

import math
import time
import typing
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import (
    Bits,
    Count,
    Finite,
    NonNegativeFloat,
    PositiveFloat,
    Seed,
    Steps,
    Threads,
    Width,
    option,
)
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.data.sparse_parity import SparseParity
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import FLAG, SEED, declare
from ctxlens.experiments.registry import register
from ctxlens.zoo.trainer import Batch, TrainConfig, train

MODELS = ("parity-mlp", "parity-transformer")
GRIDS = {  # training-set sizes, visible context lengths, seeds
    "reduced": {"sizes": [500, 2000, 8000], "lengths": [3, 4, 6, 8, 12, 20], "seeds": [0]},
    "full": {"sizes": [250, 500, 1000, 2000, 4000, 8000, 16000, 32000], "lengths": [3, 4, 5, 6, 8, 10, 12, 16, 20],
             "seeds": [0, 1, 2]},
}
Grid = typing.Literal["reduced", "full"]


@dataclass
class Config:
    grid: Grid = option("reduced", "preset of sizes, lengths and seeds: reduced (3 x 6, one seed) or full "
                                   "(8 x 9, three seeds)")
    sizes: list[Count] | None = option(None, "training-set sizes D, in samples; unset: the grid's")
    lengths: list[Bits] | None = option(None, "visible context lengths l, in bits (at most n_bits); unset: "
                                                     "the grid's")
    seeds: list[Seed] | None = option(None, "one training run per seed and (size, length); unset: the "
                                                      "grid's")
    # dataset: SparseParity(n_bits, tasks_per_bit, first_max_bit, alpha)
    n_bits: Bits = option(20, "sparse-parity bits per sample")
    tasks_per_bit: Bits = option(1, "subtasks per farther bit")
    first_max_bit: Bits = option(2, "the farther bit of the first subtasks")
    alpha: Annotated[float, Finite] = option(1.15, "subtask frequency ∝ (farther bit) ** -alpha (1.15: the law "
                                                   "fitted to Table 1)")
    # model and training
    hidden: Width = option(64, "MLP width and feature size / transformer width")
    batch: Count = option(128, "training batch size, in samples")
    lr: PositiveFloat = option(1e-3, "learning rate (constant)")
    weight_decay: NonNegativeFloat = option(0.0, "weight decay")
    max_epochs: Steps = option(100, "training epochs at most")
    eval_epochs: Steps = option(1, "evaluate every this many epochs")
    patience: Steps = option(5, "evaluations in a row without improvement before stopping")
    val_size: Count = option(2000, "validation samples")
    threads: Threads | None = option(None, "torch CPU threads while training; unset: torch's setting")

    def __post_init__(self) -> None:
        preset = GRIDS.get(self.grid, {})
        for key in ("sizes", "lengths", "seeds"):
            if getattr(self, key) is None:
                setattr(self, key, list(preset.get(key, [])))

    def validate(self) -> None:
        assert self.lengths is not None  # set by __post_init__
        if any(c > self.n_bits for c in self.lengths):
            raise CtxlensError(f"Option 'lengths' must not exceed n_bits={self.n_bits}; drop the longer lengths.")
        self.dataset()  # the dataset's own checks (bit and task counts)

    def dataset(self) -> SparseParity:
        return SparseParity(n_bits=self.n_bits, tasks_per_bit=self.tasks_per_bit,
                            first_max_bit=self.first_max_bit, alpha=self.alpha)


def plan(config: Config) -> list[Unit]:
    assert config.sizes is not None and config.lengths is not None and config.seeds is not None  # __post_init__
    return [{"n_train": n, "ctl": c, "seed": s} for n in config.sizes for c in config.lengths for s in config.seeds]


def build(spec: str, ds: SparseParity, ctl: int, hidden: int,
          seed: int) -> tuple[torch.nn.Module, Callable[[Any, Batch], torch.Tensor]]:
    """(model, loss_fn) for a model spec, freshly initialised with ``seed``; loss_fn(model, batch)
    is the label's mean CE (nats) with batch input_ids / targets LongTensor[n, L+1] (loss_fn takes the
    model it came with: a ``ParityMLP`` or a transformers Llama, hence ``Any`` for its first argument)."""
    torch.manual_seed(seed)
    if spec == "parity-mlp":
        from ctxlens.zoo.parity_mlp import ParityMLP

        return ParityMLP(ds.n_bits, ds.n_tasks, hidden=hidden, feature_dim=hidden, ctl=ctl), ParityMLP.loss
    if spec == "parity-transformer":
        from ctxlens.zoo.parity_train import ParitySpec, build_model, last_token_loss

        heads = max(1, hidden // 16)
        return build_model(ds, ParitySpec(hidden=hidden, heads=heads, ffn=4 * hidden, seed=seed)), last_token_loss
    raise CtxlensError(f"Unknown model {spec!r} for optimal-context; choose one of: {', '.join(MODELS)}.")


def epoch_batches(data: dict[str, torch.Tensor], batch: int,
                  seed: int) -> tuple[Callable[[int], dict[str, torch.Tensor]], int]:
    """(batches, steps_per_epoch): ``batches(step)`` walks a fixed set in epochs, each a seeded
    permutation of every sample once. data: input_ids / targets LongTensor[n, L+1]."""
    n = data["input_ids"].shape[0]
    per_epoch = math.ceil(n / batch)
    order: dict[int, torch.Tensor] = {}

    def batches(step: int) -> dict[str, torch.Tensor]:
        epoch, i = divmod(step, per_epoch)
        if epoch not in order:
            order.clear()
            order[epoch] = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))  # [n]
        idx = order[epoch][i * batch:(i + 1) * batch]  # [<= batch]
        return {"input_ids": data["input_ids"][idx], "targets": data["targets"][idx]}

    return batches, per_epoch


def run(lm: str, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    """Train one model at (n_train, ctl, seed); ``lm`` is the model spec string (no pretrained LM)."""
    if lm not in MODELS:
        raise CtxlensError(f"Unknown model {str(lm)!r} for optimal-context; choose one of: {', '.join(MODELS)}.")
    if "dataset" not in cache:
        cache["dataset"] = config.dataset()
    ds: SparseParity = cache["dataset"]
    n, ctl, seed = unit["n_train"], unit["ctl"], unit["seed"]
    base = 7_919 * (seed + 1)  # the training and validation sets never share a seed
    data = ds.sample(n, ctl=ctl, seed=base)  # [n, L+1]; same bits and tasks for every ctl at this seed
    val = ds.sample(config.val_size, ctl=ctl, seed=base + 1)  # [val_size, L+1]
    before = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    try:
        model, loss_fn = build(lm, ds, ctl, config.hidden, seed)
        batches, per_epoch = epoch_batches(data, config.batch, seed)
        cfg = TrainConfig(steps=config.max_epochs * per_epoch, lr=config.lr, min_lr_ratio=1.0, warmup=0,
                          weight_decay=config.weight_decay, eval_every=config.eval_epochs * per_epoch,
                          patience=config.patience, seed=seed)
        start = time.perf_counter()
        with torch.enable_grad():
            res = train(model, batches, cfg, val=[val], loss_fn=loss_fn)
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(before)
    finite = res.best_val is not None and math.isfinite(res.best_val)
    return [{
        "bayes_risk": ds.bayes_risk(ctl),
        "best_val_loss": res.best_val if finite else None,
        "best_epoch": res.best_step // per_epoch if finite and res.best_step is not None else None,
        "best_step": res.best_step if finite else None,
        "epochs": res.steps // per_epoch,
        "steps": res.steps,
        "stopped_early": res.stopped_early,
        "seconds": seconds,
        "flag": None if finite else "non-finite validation loss",
    }]


def optimal_lengths(rows: list[Row]) -> list[dict]:
    """One row per (model, n_train): ``optimal_ctl``, the ctl with the lowest best validation loss
    averaged over seeds (ties: the shorter), its mean loss and the number of seeds. Rows without a
    loss are ignored."""
    losses: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("best_val_loss") is not None:
            losses[(r.get("model"), r["n_train"])][r["ctl"]].append(float(r["best_val_loss"]))
    out = []
    for (model, n), by_ctl in sorted(losses.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        mean = {c: sum(v) / len(v) for c, v in by_ctl.items()}
        best = min(mean, key=lambda c: (mean[c], c))
        out.append({"model": model, "n_train": n, "optimal_ctl": best, "best_val_loss": mean[best],
                    "n_seeds": len(by_ctl[best])})
    return out


COLUMNS = declare(
    SEED, FLAG,
    Column("n_train", int, "count", "training-set size D"),
    Column("ctl", int, "bits", "context length l: visible bits"),
    Column("bayes_risk", float, "nats", "exact Bayes risk at this context length", low=0.0),
    Column("best_val_loss", float, "nats", "lowest validation loss during training", low=0.0),
    Column("best_epoch", int, "count", "epoch of the lowest validation loss", optional=True),
    Column("best_step", int, "count", "step of the lowest validation loss", optional=True),
    Column("epochs", float, "", "epochs trained", low=0.0),
    Column("steps", int, "count", "optimiser steps taken"),
    Column("stopped_early", bool, "", "whether early stopping ended training"),
    Column("seconds", float, "s", "training time"),
)


register(Experiment(
    "optimal-context", Config, plan, run, doc=summary(__doc__), loads_model=False, default_models=MODELS[:1],
    paper="intrinsic-entropy", section="Section 3, Appendix F",
    smoke=Smoke({"sizes": [200, 800], "lengths": [5, 7, 9], "n_bits": 10, "tasks_per_bit": 1, "first_max_bit": 3,
                 "max_epochs": 15, "patience": 3, "val_size": 400, "hidden": 32},
                unmeasured="trains MLPs on sparse parity; no language model", fixture_model="parity-mlp"),
    demo=(DemoStep("own", {"grid": "reduced", "threads": 1},
                   {"sizes": [200, 800], "lengths": [3, 6, 20], "max_epochs": 2, "val_size": 200, "threads": 1}),),
    columns=COLUMNS,
))
