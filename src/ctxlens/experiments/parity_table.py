"""``parity-table``: a RoPE transformer's loss on sparse parity vs the exact Bayes risk, per context length.

Intrinsic Entropy of Context Length Scaling in LLMs, Section 4.3 and Appendix C.4, Table 1: a
small causal transformer trained on position-weighted multitask sparse parity (half the samples
fully visible, half with the bits from a random ``ctl`` in 10..60 on masked) should reach, at each
context length, the minimum cross-entropy a predictor can have there (the Bayes risk; the paper's
model is within about 0.001 nats). The model and its training are ``ctxlens.zoo.parity_train``
(one-layer Llama, exact table-form forward; ``size="paper"`` gives Section 4.3's 3 x 208 model,
which needs a GPU); the data is ``SparseParity.paper()``.

Units: one per training seed (one model trained, then evaluated at every ``ctls`` length). Rows:
one per (seed, ``ctl``) with ``loss`` (nats, mean over ``test_size`` fresh samples), the exact
``bayes_risk``, ``gap = loss - bayes_risk``, ``paired_gap`` (the same gap with the task mix's
sampling noise removed), ``n``, and the model's ``best_step``, ``best_val`` and ``parameters``.

The defaults are the recorded CPU run (120k steps of 512 samples, about 45 minutes on one CPU
thread; ``src/ctxlens/zoo/results/parity_table1.json``, within 0.0053 nats of the Bayes risk at
every Table 1 length). Smoke settings (``steps=40``) do not leave the ln 2 plateau.

    ctxlens run parity-table --out DIR --threads 1 [--seeds 0,1,2] [--size paper --device cuda]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, NonNegativeSteps, Seed, Steps, Threads, between, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.data.sparse_parity import SparseParity
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, positive, summary
from ctxlens.experiments.columns import SEED, N, declare
from ctxlens.experiments.registry import register
from ctxlens.zoo.parity_train import TABLE1_CTLS, ParitySpec, train_parity

MODEL = "parity-transformer"  # the one model spec: built and trained by the experiment
SIZES = ("cpu", "paper")
_D = ParitySpec  # its defaults are the options' defaults
Ctl = Annotated[int, between(0, SparseParity.paper().n_bits)]  # a context length, in bits of the paper's samples


@dataclass
class Config:
    seeds: list[Seed] = option(factory=lambda: [0], help="training seeds; one model (one unit) each")
    ctls: list[Ctl] = option(factory=lambda: list(TABLE1_CTLS), help="context lengths (bits) to evaluate at; "
                             "default Table 1's")
    size: str = option("cpu", "cpu: one layer, 64 wide (the recorded run); paper: Section 4.3's 3 x 208 model")
    steps: Steps = option(_D.steps, "training steps")
    batch: Count = option(_D.batch, "samples per step")
    lr: float = option(_D.lr, "peak learning rate")
    warmup: NonNegativeSteps = option(_D.warmup, "learning-rate warm-up steps")
    weight_decay: float = option(_D.weight_decay, "weight decay (decided how many tasks were learned)")
    decay_start: NonNegativeSteps = option(_D.decay_start, "step from which weight decay applies")
    eval_every: Steps = option(_D.eval_every, "steps between validations (the best one is kept)")
    train_ctl: Ctl | None = option(None, "train at this context length only; default the paper's mixture")
    val_size: Count = option(_D.val_size, "validation samples (model selection)")
    test_size: Count = option(_D.test_size, "test samples per evaluated context length")
    init_std: float = option(_D.init_std, "initialisation standard deviation")
    rope_theta: float = option(_D.rope_theta, "RoPE base (Section 4.3: 4000)")
    device: str = option("cpu", "device to train on (cpu, cuda, ...)")
    threads: Threads | None = option(None, "torch CPU threads while training; default torch's setting")

    def validate(self) -> None:
        if self.size not in SIZES:
            raise CtxlensError(f"Option 'size' must be one of {', '.join(SIZES)}, got {self.size!r}; pass size=cpu.")
        positive("ctls", self.ctls)
        for name in ("steps", "batch", "eval_every", "val_size", "test_size"):
            positive(name, getattr(self, name))
        if self.threads is not None:
            positive("threads", self.threads)
        if any(s < 0 for s in self.seeds) or not self.seeds:
            raise CtxlensError(f"Option 'seeds' must be non-negative and not empty, got {self.seeds}; pass e.g. 0.")
        for name in ("lr", "weight_decay", "init_std", "rope_theta"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise CtxlensError(f"Option '{name}' must be finite and >= 0, got {getattr(self, name)}.")
        ds = SparseParity.paper()
        for c in [*self.ctls, *([self.train_ctl] if self.train_ctl is not None else [])]:
            ds.bayes_risk(c)  # the dataset's own check of a context length

    def spec(self, seed: int) -> ParitySpec:
        """The model and training settings of the unit at ``seed``."""
        fields = {k: getattr(self, k) for k in ("steps", "batch", "lr", "warmup", "weight_decay", "decay_start",
                                                "eval_every", "train_ctl", "val_size", "test_size", "init_std",
                                                "rope_theta", "device", "threads")}
        return ParitySpec.paper(**fields, seed=seed) if self.size == "paper" else ParitySpec(**fields, seed=seed)


def plan(config: Config) -> list[Unit]:
    return [{"seed": s} for s in config.seeds]


def run(lm: str, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    """Train the model of ``unit["seed"]`` and evaluate it at every context length; ``lm`` is the model spec."""
    if lm != MODEL:
        raise CtxlensError(f"Unknown model {str(lm)!r} for parity-table; its one model is {MODEL}.")
    with torch.enable_grad():
        record = train_parity(config.spec(unit["seed"]), config.ctls)
    best = record["best_val"]
    common = {"best_step": record["best_step"], "best_val": best if best is not None and math.isfinite(best) else None,
              "parameters": record["model"]["parameters"]}
    return [{**r, **common} for r in record["rows"]]


COLUMNS = declare(
    SEED, N,
    Column("ctl", int, "bits", "context length: visible bits"),
    Column("loss", float, "nats", "test loss of the trained transformer", low=0.0),
    Column("bayes_risk", float, "nats", "exact Bayes risk at this context length", low=0.0),
    Column("gap", float, "nats", "loss - bayes_risk"),
    Column("paired_gap", float, "nats", "the gap with the task mix's sampling noise removed"),
    Column("best_step", int, "count", "step of the best validation loss"),
    Column("best_val", float, "nats", "best validation loss", low=0.0),
    Column("parameters", int, "count", "parameters of the model"),
)


register(Experiment(
    "parity-table", Config, plan, run, doc=summary(__doc__), loads_model=False, default_models=(MODEL,),
    paper="intrinsic-entropy", section="Section 4.3, Appendix C.4, Table 1",
    smoke=Smoke({"seeds": [0, 1], "ctls": [17, 30, 50], "steps": 40, "batch": 32, "eval_every": 20, "val_size": 256,
                 "test_size": 256, "lr": 3e-3, "warmup": 5, "threads": 1},
                unmeasured="trains a small transformer on sparse parity; no language model",
                fixture_model="parity-transformer"),
    demo=(DemoStep("own", {"steps": 500, "eval_every": 250, "test_size": 10000, "threads": 1},
                   {"steps": 40, "batch": 32, "eval_every": 20, "val_size": 256, "test_size": 256, "ctls": [17, 50],
                    "threads": 1}),),
    columns=COLUMNS,
))
