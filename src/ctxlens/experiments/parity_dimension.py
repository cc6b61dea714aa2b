"""``parity-dimension``: PCA dimension of a sparse-parity MLP's context feature vs visible subtasks, and CE vs it.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), Appendix J.3 (Figures 16, 17)
with the data of Section 4.2 / Appendix C.4. A context MLP reads the visible bits, a head reads
its feature and the task (``ctxlens.zoo.parity_mlp.ParityMLP``); the best the encoder can do is
write the answer of every subtask it can see into the feature, one direction each. So the PCA
dimension of the feature at visible length ``l`` (the paper's ``ID(l)``) should equal the number
of subtasks whose two bits are both visible, ``t(l)``, and CE should fall linearly with it: each
visible subtask turns a coin flip (ln 2 nats) into a certainty. The paper reports the linear fit
of CE on ID as slope -0.693 +- 1e-5, intercept 0.0139, R² = 1 - 7e-9 (Appendix J.3); ctxlens
writes its own fit beside those figures and beside the same fit applied to the Bayes risk.

The model is not a transformers LM, so this experiment trains it itself (once, on the paper's
masking mixture: half the samples fully visible, half with the farthest bits masked, Section 4.3)
and caches the weights under ``$CTXLENS_HOME/parity/`` keyed by every training option. Its one
model spec is ``parity-mlp`` (the default: ``ctxlens run parity-dimension --out DIR``).

Defaults are a CPU-sized version of the task (16 bits, one subtask per farther bit from bit 4 on:
12 subtasks; about 15 s of training on one CPU thread). With them, at training seeds 0-7, the
smallest relative eigenvalue of a visible subtask stayed >= 0.08 and every other one <= 0.036.
``alpha = 0`` gives every subtask the same frequency, the
"uniform information gain" of Appendix J.1 under which CE is exactly linear in t(l); the
paper's frequency law (``alpha = 1.15``) makes the loss per dimension differ by subtask.
The threshold 0.05 is the 1/20 the paper quotes from earlier work (Appendix J.2).

Units: one per visible length, writing ``stage="measure"`` rows per quantity (``visible_tasks``,
``intrinsic_dimension`` per ``threshold``, ``ce`` with its standard error, ``bayes_risk``,
``relative_eigenvalue`` per ``index``); a last ``stage="fit"`` unit fits CE on the measured
dimension per threshold and writes slope, intercept, r2, pearson_r and ``slope_x_tasks`` (the
slope times the number of subtasks: -ln 2 when each subtask is worth ln 2 / T), each with
``paper`` (Appendix J.3's figure) and ``bayes`` (the same fit of the exact Bayes risk on t(l)).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Annotated

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import (
    Bits,
    Count,
    PositiveFloat,
    PositiveFraction,
    Seed,
    Steps,
    Threads,
    Width,
    between,
    option,
)
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.data.sparse_parity import SparseParity
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import FITS, declare, narrow, pick
from ctxlens.experiments.registry import register
from ctxlens.metrics.fits import fit_linear
from ctxlens.metrics.spectrum import eigen_spectrum, intrinsic_dimension
from ctxlens.zoo.parity_mlp import ParityMLP

PAPER = {"slope": -0.693, "intercept": 0.0139, "r2": 1 - 7e-9}  # Appendix J.3, CE & ID


@dataclass
class Config:
    n_bits: Annotated[int, between(1, 64)] = option(16, "sparse-parity bits per sample")
    first_max_bit: Bits = option(4, "the farther bit of the first subtasks")
    tasks_per_bit: Bits = option(1, "subtasks per farther bit")
    alpha: float = option(0.0, "subtask frequency ∝ (farther bit) ** -alpha; 0: every subtask equally often "
                               "(Appendix J.1)")
    data_seed: Seed = option(0, "seed placing the nearer bit of every subtask")
    lengths: list[Bits] | None = option(None, "visible context lengths l, in bits; unset: first_max_bit + 1 "
                                                     ".. n_bits")
    hidden: Width = option(128, "width of the context MLP")
    feature_dim: Width = option(32, "size of the context feature whose PCA dimension is measured")
    steps: Steps = option(6000, "training steps")
    batch: Count = option(256, "training batch size, in samples")
    lr: PositiveFloat = option(3e-3, "learning rate")
    weight_decay: float = option(0.1, "weight decay")
    seed: Seed = option(0, "training seed")
    n_eval: Count = option(4000, "evaluation samples per visible length")
    thresholds: list[PositiveFraction] = option(
        factory=lambda: [0.01, 0.05, 0.25], help="intrinsic-dimension thresholds on relative eigenvalues "
                                                 "(0.05: the paper's 1/20, Appendix J.2)")
    threads: Threads = option(1, "CPU threads while training (a tiny MLP runs fastest on one)")
    reuse: bool = option(True, "load a cached model trained with the same options")

    def validate(self) -> None:
        ds = dataset(self)
        for c in self.visible_lengths():
            ds.bayes_risk(c)  # validates the range

    def visible_lengths(self) -> list[int]:
        return sorted(self.lengths) if self.lengths else list(range(self.first_max_bit + 1, self.n_bits + 1))


def dataset(config: Config) -> SparseParity:
    return SparseParity(n_bits=config.n_bits, tasks_per_bit=config.tasks_per_bit, first_max_bit=config.first_max_bit,
                        alpha=config.alpha, seed=config.data_seed)


def plan(config: Config) -> list[Unit]:
    return [{"stage": "measure", "length": c} for c in config.visible_lengths()] + [{"stage": "fit"}]


def run(lm: str, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    """``lm`` is the model spec string, which must be ``parity-mlp`` (see the module docstring)."""
    if lm != "parity-mlp":
        raise CtxlensError(
            f"parity-dimension trains its own model; use --model parity-mlp (or no --model), not '{lm}'."
        )
    if unit["stage"] == "fit":
        return _fit_rows(config, [_measure(config, c, cache) for c in config.visible_lengths()])
    m = _measure(config, unit["length"], cache)
    rows = [{"quantity": "visible_tasks", "value": m["visible"]}]
    rows += [{"quantity": "intrinsic_dimension", "threshold": t, "value": v} for t, v in m["dimension"].items()]
    rows += [{"quantity": "ce", "value": m["ce"], "stderr": m["ce_stderr"]},
             {"quantity": "bayes_risk", "value": m["bayes"]}]
    rows += [{"quantity": "relative_eigenvalue", "index": i + 1, "value": v} for i, v in enumerate(m["relative"])]
    return [{"n_tasks": m["n_tasks"], **r} for r in rows]


# ------------------------------------------------------------------------------- training
def _train_key(config: Config) -> dict:
    keep = ("n_bits", "first_max_bit", "tasks_per_bit", "alpha", "data_seed", "hidden", "feature_dim", "steps",
            "batch", "lr", "weight_decay", "seed")
    return {"version": 1, **{k: v for k, v in asdict(config).items() if k in keep}}


def trained_mlp(config: Config, cache: Cache | None = None) -> ParityMLP:
    """The MLP for ``config``: from ``cache``, from ``$CTXLENS_HOME/parity``, or trained now."""
    from ctxlens.zoo.registry import home

    key = _train_key(config)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if cache is not None and ("parity-mlp", digest) in cache:
        return cache[("parity-mlp", digest)]
    ds = dataset(config)
    model = ParityMLP(config.n_bits, ds.n_tasks, hidden=config.hidden, feature_dim=config.feature_dim)
    path = home() / "parity" / f"mlp-{digest}.pt"
    if config.reuse and path.is_file():
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True)["state_dict"])
    else:
        _train(model, ds, config)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # ranks of a sharded run may race
        torch.save({"state_dict": model.state_dict(), "options": key}, tmp)
        tmp.replace(path)
    model.eval()
    if cache is not None:
        cache[("parity-mlp", digest)] = model
    return model


def _train(model: ParityMLP, ds: SparseParity, config: Config) -> None:
    """The paper's masking mixture (Section 4.3), fresh samples every step, on the CPU."""
    from ctxlens.zoo.trainer import TrainConfig, train

    base = 1_000_003 * (config.seed + 1)
    cfg = TrainConfig(steps=config.steps, lr=config.lr, warmup=min(100, config.steps // 10 + 1),
                      weight_decay=config.weight_decay, seed=config.seed, device="cpu")
    with _threads(config.threads), torch.enable_grad():
        train(model, lambda step: ds.sample(config.batch, seed=base + step), cfg,
              loss_fn=lambda _, batch: model.loss(batch))  # train passes ``model`` itself back


@contextmanager
def _threads(n: int) -> Iterator[None]:
    """Run with ``n`` torch CPU threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------------------- measurement
def _measure(config: Config, length: int, cache: Cache) -> dict:
    """Statistics of one visible length (memoised in ``cache``)."""
    key = ("parity-dimension", length)
    if key in cache:
        return cache[key]
    model, ds = trained_mlp(config, cache), dataset(config)
    batch = ds.sample(config.n_eval, ctl=length, seed=999_983 * (config.seed + 1) + length)  # never a training seed
    with _threads(config.threads), torch.no_grad():
        feature = model.features(batch["input_ids"])  # [n_eval, feature_dim]
        logits = model(batch["input_ids"]).double()  # [n_eval, 2]
    ce = torch.nn.functional.cross_entropy(logits, batch["targets"][:, -1], reduction="none")  # [n_eval]
    spec = eigen_spectrum(feature)
    cache[key] = {
        "visible": int((ds.task_bits[:, 1] < length).sum()), "n_tasks": ds.n_tasks,
        "dimension": dict(zip(config.thresholds, intrinsic_dimension(spec, config.thresholds))),
        "ce": float(ce.mean()), "ce_stderr": float(ce.std() / math.sqrt(len(ce))),
        "bayes": ds.bayes_risk(length), "relative": spec.relative.tolist(),
    }
    return cache[key]


def _fit_rows(config: Config, per_length: list[dict]) -> list[Row]:
    n_tasks = per_length[0]["n_tasks"]
    visible = [m["visible"] for m in per_length]
    bayes = fit_linear(visible, [m["bayes"] for m in per_length])
    rows = []
    for t in config.thresholds:
        fit = fit_linear([m["dimension"][t] for m in per_length], [m["ce"] for m in per_length])
        for r in fit.rows():
            q = r["quantity"]
            ref = bayes.r2 if q == "r2" else bayes.pearson_r if q == "pearson_r" else bayes.params[q]
            rows.append({"threshold": t, **r, "paper": PAPER.get(q), "bayes": ref})
        scaled = None if fit["slope"] is None else fit["slope"] * n_tasks
        rows.append({"threshold": t, "fit": "linear", "quantity": "slope_x_tasks", "value": scaled,
                     "stderr": None if fit.stderr["slope"] is None else fit.stderr["slope"] * n_tasks,
                     "n_points": fit.n_points, "flag": fit.flag, "paper": PAPER["slope"],
                     "bayes": None if bayes["slope"] is None else bayes["slope"] * n_tasks})
    return rows


COLUMNS = declare(
    narrow(FITS, stage=("measure", "fit"), fit=("linear",),
           quantity=("visible_tasks", "intrinsic_dimension", "ce", "bayes_risk", "relative_eigenvalue", "slope",
                     "intercept", "r2", "pearson_r", "slope_x_tasks")),
    pick("length"),
    Column("n_tasks", int, "count", "subtasks of the sparse-parity data"),
    Column("paper", float, "", "the paper's value of the fitted quantity, where it reports one", optional=True),
    Column("bayes", float, "", "the value the Bayes-optimal model gives the fitted quantity"),
)


register(Experiment(
    "parity-dimension", Config, plan, run, doc=summary(__doc__), loads_model=False, default_models=("parity-mlp",),
    paper="intrinsic-entropy", section="Appendix J.3, Figures 16-17",
    smoke=Smoke({"n_bits": 8, "first_max_bit": 3, "steps": 1500, "n_eval": 400, "hidden": 32, "feature_dim": 8},
                unmeasured="trains an MLP on sparse parity; no language model",
                fixture_model="parity-mlp"),
    demo=(DemoStep("own", {}, {"steps": 1500}),),
    columns=COLUMNS,
))
