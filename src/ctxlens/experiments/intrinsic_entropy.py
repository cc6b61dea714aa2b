"""``intrinsic-entropy``: spectrum, intrinsic entropy / dimension, KDE entropy of features vs CE per length.

Last-token features per context length: their PCA eigen-spectrum, intrinsic entropy, intrinsic
dimension and KDE entropy, and the cross-entropy (CE) fitted linearly against each of them.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"): Section 2.2.2 and Figures 1, 3
(PCA of last-token features over many samples per context length; intrinsic entropy
S_n = sum of the first n log relative eigenvalues; CE linear in S_n), Appendix J.2 and Figure 15
(intrinsic dimension at thresholds 0.002 .. 0.25; CE linear in it), Appendix C.2 and Figure 10
(Gaussian-KDE entropy), Appendix G and Figure 13 (the same on other architectures).

Every sample is a window of ``max(lengths) + 1`` tokens. At length l the model reads its tokens
``max - l .. max - 1`` (a fresh window, nothing earlier visible): the feature is the last
position's hidden state and CE is the loss of the sample's last token, the same token at every
length. The feature is the final hidden state after the model's final norm (what the LM head
reads; ``layer`` unset), or the output of block ``layer`` (before any final norm); rows say which
(``layer``, ``after_final_norm``). Covariances stream in float64 (``CovarianceAccumulator``); the
KDE uses the first ``kde_samples`` features.

Units: one per length, writing ``stage="measure"`` rows, one per quantity: ``ce`` (mean nats, with
its standard error), ``intrinsic_entropy`` per ``n_eig``, ``intrinsic_dimension`` per
``threshold``, ``kde_entropy`` (with the components kept and the bandwidth) and
``relative_eigenvalue`` and the raw covariance ``eigenvalue`` per ``index`` (1-based, at most
``eigen_rows`` of each: a reader can normalise by the largest, the paper's choice, or by the trace).
A last ``stage="fit"`` unit fits CE linearly against each of those measures across lengths and
writes slope, intercept (with standard errors), r2 and pearson_r, keyed by ``x`` (and ``n_eig`` or
``threshold``); with ``n_boot`` > 0 it also writes a bootstrap over windows: sample i is the same
window at every length (one array of ids, cropped on the left), so each replicate resamples windows
once for every length and writes ``stage="bootstrap"`` rows (``replicate``, ``length``) of ``ce``
and of ``intrinsic_entropy`` per ``n_eig`` and ``norm`` ("max": divided by the largest eigenvalue;
"trace": by their sum). Readers compute any statistic across lengths per replicate (the slope of
S_n on log l, r(CE, S_n)) and take its percentile interval.

Unless given, ``n_samples`` comes from the model's feature width d (``defaults``): max(512, 2 d),
so that the d x d sample covariance has full rank with d / n <= 1/2 (the Marchenko-Pastur spread
of its eigenvalues stays bounded; the paper uses >= 10000 samples); every measure row says
``underpowered`` when n < 2 d (given on the command line or by a budget). Lengths beyond the
model's positions are left out of the default lengths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import torch

from ctxlens.core.columns import Column
from ctxlens.core.options import (
    MAX_COUNT,
    Count,
    Layer,
    NonNegativeCount,
    PositiveFraction,
    Tokens,
    Width,
    between,
    option,
)
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import Defaults, DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import FITS, declare, narrow, pick
from ctxlens.experiments.registry import T, register
from ctxlens.metrics.fits import fit_linear
from ctxlens.metrics.spectrum import (
    NORMS,
    CovarianceAccumulator,
    bootstrap_spectra,
    eigen_spectrum,
    entropy_of,
    intrinsic_dimension,
    intrinsic_entropy,
    kde_entropy,
    permuted_spectra,
)
from ctxlens.probes.source import LengthSweepOptions
from ctxlens.probes.visible import iter_last_states, next_token_nll, samples, uses_bos, with_bos

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM


@dataclass
class Config(LengthSweepOptions):
    lengths: list[Tokens] = option(factory=lambda: [4, 8, 16, 32, 64, 128, 256, 512],
                                        help="context lengths, in tokens (each once)")
    n_samples: Annotated[int, between(2, MAX_COUNT)] = option(
        512, "windows per length, whose last-token features make the covariance (the paper uses >= 10000); "
             "unset: max(512, 2 x the model's feature width)")
    layer: Layer | None = option(None, "features from this block's output; unset: the final hidden state after "
                                     "the final norm (what the LM head reads)")
    entropy_n: list[Count] = option(factory=lambda: [8, 16, 32, 64],
                                          help="n of the intrinsic entropy S_n: leading relative eigenvalues summed")
    thresholds: list[PositiveFraction] = option(
        factory=lambda: [0.002, 0.01, 0.05, 0.25],
        help="intrinsic-dimension thresholds on relative eigenvalues (Appendix J.2's range)")
    kde: bool = option(True, "also the Gaussian-KDE entropy of the features (Appendix C.2)")
    kde_samples: Count = option(2048, "features kept for the KDE (the spectrum uses every window)")
    kde_components: Width | None = option(None, "principal components the KDE uses; unset: every component with "
                                               "relative eigenvalue >= 1e-8")
    eigen_rows: NonNegativeCount = option(4096, "relative-eigenvalue rows written per length")
    n_boot: Annotated[int, between(0, MAX_COUNT)] = option(
        200, "bootstrap replicates over windows (paired across lengths) written by the fit unit; 0: none")


def plan(config: Config) -> list[Unit]:
    units = [{"stage": "measure", "source": config.source, "length": n} for n in sorted(config.lengths)]
    return units + [{"stage": "fit", "source": config.source}]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    site = {**_site(lm, config), "bos": uses_bos(lm, config)}
    if unit["stage"] == "fit":
        per_length = [_measure(lm, config, n, cache) for n in sorted(config.lengths)]
        rows = _fit_rows(per_length)
        if config.n_boot:
            rows += bootstrap_rows(sorted(config.lengths), per_length, config.entropy_n, config.n_boot, config.seed)
        return [{**site, **r} for r in rows]
    m = _measure(lm, config, unit["length"], cache)
    rows = [{"quantity": "ce", "value": m["ce"], "stderr": m["ce_stderr"], "flag": m["flag"]}]
    rows += [{"quantity": "intrinsic_entropy", "n_eig": k, "value": v, "flag": f}
             for k, (v, f) in m["entropy"].items()]
    rows += [{"quantity": "intrinsic_dimension", "threshold": t, "value": v, "flag": m["flag"]}
             for t, v in m["dimension"].items()]
    if m["kde"] is not None:
        k = m["kde"]
        rows.append({"quantity": "kde_entropy", "value": k.entropy, "n_components": k.n_components,
                     "bandwidth": k.bandwidth, "n_kde": k.n_samples, "flag": m["flag"]})
    rows += [{"quantity": "relative_eigenvalue", "index": i + 1, "value": float(v)}
             for i, v in enumerate(m["relative"][: config.eigen_rows])]
    rows += [{"quantity": "eigenvalue", "index": i + 1, "value": float(v)}
             for i, v in enumerate(m["eigenvalues"][: config.eigen_rows])]
    power = {"n_samples": m["n_samples"], "dim": m["dim"], "underpowered": underpowered(m["n_samples"], m["dim"])}
    return [{**site, **power, **r} for r in rows]


def underpowered(n_samples: int, dim: int | None) -> bool:
    """Fewer samples than ``SAMPLES_PER_FEATURE`` x the feature width: the sample covariance's
    eigenvalues spread too far (see the module docstring)."""
    return bool(dim and n_samples < SAMPLES_PER_FEATURE * dim)


def _site(lm: LM, config: Config) -> dict:
    if config.layer is None:
        return {"layer": lm.n_layers - 1, "after_final_norm": True}
    (layer,) = lm.layer_indices([config.layer])
    return {"layer": layer, "after_final_norm": False}


# ------------------------------------------------------------------------------- measurement
def _measure(lm: LM, config: Config, length: int, cache: Cache) -> dict:
    """Every statistic of one length (memoised in ``cache``)."""
    key = ("intrinsic-entropy", length)
    if key in cache:
        return cache[key]
    max_len = max(config.lengths)
    ids = samples(lm, config, max_len + 1, cache)  # [n, max_len + 1]
    windows, targets = ids[:, max_len - length : max_len], ids[:, max_len]  # [n, length], [n]
    windows = with_bos(lm, windows, config)
    lm.check_length(windows.shape[1])
    layer = _site(lm, config)["layer"] if config.layer is not None else None
    acc, start, dropped = CovarianceAccumulator(), 0, 0
    kept: list[torch.Tensor] = []  # features [b', d] kept for the KDE
    losses: list[torch.Tensor] = []  # nats [b'] of the finite samples
    boot: list[tuple] = []  # per batch: features [b, d], nats [b], finite [b] (zeros where not), for the bootstrap
    for final, block in iter_last_states(lm, windows, config.batch_tokens, layer=layer):
        feature = final if block is None else block  # [b, d]
        loss = next_token_nll(lm, final, targets[start : start + len(final)]).cpu()  # [b]
        start += len(final)
        ok = (torch.isfinite(feature).all(-1) & torch.isfinite(final).all(-1)).cpu() & torch.isfinite(loss)  # [b]
        dropped += int((~ok).sum())
        if config.n_boot:
            clean = torch.where(ok[:, None].to(feature.device), feature, 0).float().cpu()  # [b, d]
            boot.append((clean, torch.where(ok, loss, 0.0), ok))
        if not ok.any():
            continue
        feature = feature[ok.to(feature.device)]
        acc.update(feature)
        if config.kde and sum(len(k) for k in kept) < config.kde_samples:
            kept.append(feature.float().cpu())
        losses.append(loss[ok])
    flag = (f"{dropped} of {start} samples had non-finite features or loss and were left out"
            if dropped else None)
    if start - dropped < 2:
        cache[key] = _unmeasured(config, start, flag or "fewer than 2 samples")
        return cache[key]
    nll = torch.cat(losses).double()  # [n]
    spec = eigen_spectrum(acc)
    entropy: dict[int, tuple[float | None, str | None]] = {}  # n -> (entropy, flag)
    for k in config.entropy_n:
        if k <= spec.rank:
            entropy[k] = (intrinsic_entropy(spec, k), flag)
        else:
            entropy[k] = (None, f"the features span only {spec.rank} directions ({spec.n_samples} samples)")
    kde = None
    if config.kde:
        feats = torch.cat(kept)[: config.kde_samples]
        kde = kde_entropy(feats, n_components=(min(config.kde_components, feats.shape[0] - 1)
                                               if config.kde_components else None))
    cache[key] = {
        "ce": float(nll.mean()), "ce_stderr": float(nll.std() / math.sqrt(len(nll))) if len(nll) > 1 else None,
        "entropy": entropy, "dimension": dict(zip(config.thresholds, intrinsic_dimension(spec, config.thresholds))),
        "kde": kde, "relative": spec.relative.tolist(), "eigenvalues": spec.eigenvalues.tolist(),
        "n_samples": spec.n_samples, "dim": spec.dim, "flag": flag,
        # ([n, d] features, [n] nats, [n] finite) for the bootstrap
        "windows": tuple(torch.cat(part) for part in zip(*boot)) if boot else None,
    }
    return cache[key]


def _unmeasured(config: Config, n: int, flag: str) -> dict:
    """A length whose features could not be measured: every value None, with the reason."""
    return {"ce": None, "ce_stderr": None, "entropy": {k: (None, flag) for k in config.entropy_n},
            "dimension": {t: None for t in config.thresholds}, "kde": None, "relative": [], "eigenvalues": [],
            "n_samples": 0, "dim": None, "flag": flag, "windows": None}


def _fit_rows(per_length: list[dict]) -> list[Row]:
    """CE against each measure across lengths: linear fits, one row per fit quantity."""
    ce = [m["ce"] for m in per_length]
    series: list[tuple[dict, list]] = []
    for k in per_length[0]["entropy"]:
        series.append(({"x": "intrinsic_entropy", "n_eig": k}, [m["entropy"][k][0] for m in per_length]))
    for t in per_length[0]["dimension"]:
        series.append(({"x": "intrinsic_dimension", "threshold": t}, [m["dimension"][t] for m in per_length]))
    if any(m["kde"] is not None for m in per_length):
        series.append(({"x": "kde_entropy"}, [m["kde"].entropy if m["kde"] else None for m in per_length]))
    rows = []
    for coords, xs in series:
        pts = [(x, y) for x, y in zip(xs, ce) if x is not None and y is not None and math.isfinite(y)]
        fit = fit_linear([x for x, _ in pts], [y for _, y in pts])
        rows += [{**coords, **r} for r in fit.rows()]
    return rows


def bootstrap_rows(lengths: list[int], per_length: list[dict], entropy_n: list[int], n_boot: int, seed: int
                   ) -> list[Row]:
    """``stage="bootstrap"`` rows: per replicate (one resample of the windows finite at every length,
    shared by all lengths) and length, the mean CE and S_n per n and normalisation
    (``metrics.spectrum.bootstrap_spectra``, ``entropy_of``); and as many ``stage="permutation"``
    rows, each window's lengths shuffled (``permuted_spectra``: the null of no length effect, for
    a randomization test). None when a length kept no windows."""
    if any(m["windows"] is None for m in per_length):
        return []
    ok = torch.stack([m["windows"][2] for m in per_length]).all(0)  # [n] finite at every length
    if int(ok.sum()) < 2:
        return []
    feats = [m["windows"][0][ok] for m in per_length]  # each [n_ok, d]
    nll = torch.stack([m["windows"][1][ok].double() for m in per_length], 1)  # [n_ok, n_lengths]
    idx, eig = bootstrap_spectra(feats, n_boot, seed)  # [B, n_ok], [B, n_lengths, d]
    n_ok = int(ok.sum())
    rows = _replicate_rows("bootstrap", lengths, nll[idx].mean(1), eig, entropy_n, n_ok)  # ce [B, n_lengths]
    perm, eig = permuted_spectra(feats, n_boot, seed + 1)  # [P, n_ok, n_lengths], [P, n_lengths, d]
    ce = torch.gather(nll.expand(n_boot, -1, -1), 2, perm).mean(1)  # [P, n_lengths]
    return rows + _replicate_rows("permutation", lengths, ce, eig, entropy_n, n_ok)


def _replicate_rows(stage: str, lengths: list[int], ce: torch.Tensor, eig: torch.Tensor, entropy_n: list[int],
                    n_windows: int) -> list[Row]:
    """Rows of ``stage`` per replicate and length: ``ce`` [R, n_lengths] and S_n of eig [R, n_lengths, d]
    per n and normalisation."""
    s_n = {(k, norm): entropy_of(eig, k, norm).tolist() for k in entropy_n if k <= eig.shape[-1]
           for norm in NORMS}  # each [R][n_lengths]
    ce_l, rows = ce.tolist(), []
    for b in range(len(ce_l)):
        for j, length in enumerate(lengths):
            rows.append({"stage": stage, "replicate": b, "length": length, "quantity": "ce", "value": ce_l[b][j],
                         "n_windows": n_windows})
            rows += [{"stage": stage, "replicate": b, "length": length, "quantity": "intrinsic_entropy",
                      "n_eig": k, "norm": norm, "value": v[b][j]} for (k, norm), v in s_n.items()]
    return rows


MIN_SAMPLES = 512
SAMPLES_PER_FEATURE = 2  # d / n <= 1/2


def defaults(info: ModelInfo, config: Config, given: frozenset[str], extrapolate: bool) -> Defaults:
    """Samples by feature width, lengths within the positions (see the module docstring)."""
    values: dict = {}
    if "n_samples" not in given and info.d_model:
        values["n_samples"] = max(MIN_SAMPLES, SAMPLES_PER_FEATURE * info.d_model)
    if "lengths" not in given:
        fit = [n for n in config.lengths if info.allows(n + 1, extrapolate)]
        if fit and fit != config.lengths:
            values["lengths"] = fit
    notes = (f"n_samples {values['n_samples']}: max({MIN_SAMPLES}, {SAMPLES_PER_FEATURE} x d_model {info.d_model})",
             ) if "n_samples" in values else ()
    return Defaults(values, notes)


def work(config: Config, unit: Unit) -> list[Work]:
    """A measure unit reads ``n_samples`` windows at its length; the fit reuses them."""
    return [Work(config.n_samples, unit["length"])] if unit["stage"] == "measure" else []


COLUMNS = declare(
    narrow(FITS, stage=("measure", "fit", "bootstrap", "permutation"), fit=("linear",),
           quantity=("ce", "intrinsic_entropy", "intrinsic_dimension", "kde_entropy", "relative_eigenvalue",
                     "eigenvalue", "slope", "intercept", "r2", "pearson_r")),
    pick("source", "length", "layer", "bos"),
    Column("after_final_norm", bool, "", "whether the features are read after the final norm"),
    Column("n_samples", int, "count", "windows whose last-token features make the covariance"),
    Column("dim", int, "count", "feature dimension", optional=True),
    Column("underpowered", bool, "", "fewer samples than the feature dimension: the spectrum's tail is unreliable"),
    Column("n_eig", int, "count", "eigenvalues summed in the intrinsic entropy S_n"),
    Column("n_components", int, "count", "mixture components of the KDE", when="--kde on (the default)"),
    Column("bandwidth", float, "", "bandwidth of the KDE", low=0.0, when="--kde on (the default)"),
    Column("n_kde", int, "count", "samples of the KDE entropy", when="--kde on (the default)"),
    Column("x", str, "", "the quantity CE is fitted against",
           choices=("intrinsic_entropy", "intrinsic_dimension", "kde_entropy")),
    Column("replicate", int, "index", "bootstrap replicate over windows", when="--n-boot above 0 (the default)"),
    Column("n_windows", int, "count", "windows of the bootstrap", when="--n-boot above 0 (the default)"),
    Column("norm", str, "", "how the eigenvalues are normalised before S_n: by the largest ('max') or by their sum "
                            "('trace')", choices=("max", "trace"), when="--n-boot above 0 (the default)"),
)


register(Experiment(
    "intrinsic-entropy", Config, plan, run, needs=("token_loss",), doc=summary(__doc__), defaults=defaults,
    work=work,
    paper="intrinsic-entropy", section="Sections 2.2, 4; Figures 1, 3, 10, 13, 15",
    smoke=Smoke({"lengths": [4, 8, 16], "n_samples": 48, "entropy_n": [2, 4], "thresholds": [0.01, 0.1],
                 "kde_samples": 48, "eigen_rows": 24, "n_boot": 20},
                at_length=lambda L: {"source": "random", "lengths": [L // 2, L], "n_samples": 4, "entropy_n": [2],
                                     "thresholds": [0.05], "kde_samples": 4}),
    demo=(DemoStep("zoo", {"source": "builtin:test", "lengths": [16, 32, 64, 128, 256, T], "n_samples": 96,
                           "entropy_n": [8, 16, 32], "kde_samples": 96},
                   {"source": "builtin:test", "lengths": [16, 64, T], "n_samples": 24, "entropy_n": [8, 16],
                    "kde_samples": 24}),),
    columns=COLUMNS,
))
