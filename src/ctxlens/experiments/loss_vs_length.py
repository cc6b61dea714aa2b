"""``loss-vs-length``: next-token cross-entropy with exactly l tokens visible, and its power-law fit.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), Section 2.2.2 (Eq. 3, Figure 2)
and Appendix E (Figure 11): the Bayes risk at context length l is approximated by a trained LM's
cross-entropy with l visible tokens, and fitted with CE(l) = C0 + C / l^gamma.

The same token positions are scored at every l, so the curve reflects visible context alone.
Each sample is a window of ``max(lengths) + n_scored`` tokens whose last ``n_scored`` tokens are
the targets. For the target at index p + 1 and a length l, the model reads exactly tokens
p - l + 1 .. p, as a fresh window of its own (so nothing earlier reaches it through attention,
recurrent state or positions). Only each window's last hidden state goes through the LM head,
in chunks (``ctxlens.lm.losses``): no full-vocabulary logits for every position.

Units: one per length (all samples, in forwards of about ``batch_tokens`` tokens), writing one
row per (length, sample) with ``stage="measure"`` and ``ce``, the sample's mean loss in nats over
its scored positions; then one ``stage="fit"`` unit writing one row per quantity of the fit to the
mean CE per length (C0, C, gamma with standard errors, r2). The fit reuses the measurements made
in this process and recomputes them after a resume.

``sample`` i is the same document window at every length (the windows of every length are cut
from one array of ids, ``scored_windows``), so lengths can be compared paired over samples. The fit
weights each length's mean by its standard error over samples, keeps C0 >= 0 (a cross-entropy's
floor; a fit whose C0 ends at 0 says "C0 at its bound" in its flag), and is bootstrapped over
samples (whole windows resampled, then refitted): ``ci_low`` / ``ci_high`` are the 95% percentile
interval of each parameter, ``n_boot`` the refits, ``c0_at_bound`` the share of them with C0 at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, PositiveInt, option
from ctxlens.experiments.base import Experiment, Work
from ctxlens.experiments.registry import DemoStep, Smoke, T, register, summary
from ctxlens.metrics.fits import fit_documents
from ctxlens.probes.source import LengthSweepOptions
from ctxlens.probes.visible import iter_last_states, next_token_nll, samples, uses_bos, with_bos


@dataclass
class Config(LengthSweepOptions):
    lengths: list[PositiveInt] = option(factory=lambda: [4, 8, 16, 32, 64, 128, 256, 512],
                                        help="visible context lengths l, in tokens (each once)")
    n_samples: Count = option(8, "windows, each scored at every length")
    n_scored: PositiveInt = option(32, "target positions per window, the same at every length")
    n_boot: PositiveInt = option(400, "bootstrap refits of the power law over samples (whole windows resampled)")


def plan(config: Config) -> list[dict]:
    units = [{"stage": "measure", "source": config.source, "length": n} for n in sorted(config.lengths)]
    return units + [{"stage": "fit", "source": config.source}]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    lengths = sorted(config.lengths)
    if unit["stage"] == "fit":
        return fit_rows(lengths, [_measure(lm, config, n, cache).double().mean(1).tolist() for n in lengths],
                        config.n_boot, config.seed)
    nll = _measure(lm, config, unit["length"], cache)  # [n_samples, n_scored]
    rows = []
    for i, per_sample in enumerate(nll):
        ok = bool(per_sample.isfinite().all())
        rows.append({"sample": i, "n_scored": config.n_scored, "bos": uses_bos(lm, config),
                     "ce": float(per_sample.double().mean()) if ok else None,
                     "flag": None if ok else "non-finite loss"})
    return rows


def fit_rows(lengths: list[int], per_length: list[list[float]], n_boot: int, seed: int) -> list[dict]:
    """The fit rows from each length's per-sample CE (per_length [n_lengths][n_samples]): samples with
    a non-finite CE at any length are left out (the design is paired), lengths are then fitted
    together (``metrics.fits.fit_documents``)."""
    docs = [[per_length[j][i] for j in range(len(lengths))] for i in range(len(per_length[0]))]
    docs = [d for d in docs if all(math.isfinite(v) for v in d)]  # [n_docs][n_lengths]
    if not docs:
        return [{"fit": "power_law", "quantity": k, "value": None, "stderr": None, "n_points": 0,
                 "flag": "no sample has a finite CE at every length"} for k in ("C0", "C", "gamma")]
    fit, ci, at_bound = fit_documents(lengths, docs, n_boot=n_boot, seed=seed)
    extra = {"n_docs": len(docs), "n_boot": n_boot, "weighted": True, "c0_min": 0.0,
             "c0_at_bound": None if math.isnan(at_bound) else at_bound}
    rows = []
    for r in fit.rows():
        lo_hi = ci.get(r["quantity"])
        rows.append({**r, **extra, "ci_low": lo_hi[0] if lo_hi else None, "ci_high": lo_hi[1] if lo_hi else None})
    return rows


def work(config: Config, unit: dict) -> list[Work]:
    """A measure unit reads every sample's ``n_scored`` windows of its length (the fit reuses them)."""
    if unit["stage"] != "measure":
        return []
    return [Work(config.n_samples * config.n_scored, unit["length"] + int(bool(config.bos)))]  # auto: estimated without


# ------------------------------------------------------------------------------- measurement
def _measure(lm, config: Config, length: int, cache: dict) -> torch.Tensor:
    """[n_samples, n_scored] nats of the scored targets with ``length`` tokens visible (memoised)."""
    key = ("loss-vs-length", length)
    if key not in cache:
        ids = samples(lm, config, max(config.lengths) + config.n_scored, cache)  # [n, Lmax + K]
        windows, targets = scored_windows(ids, length, config.n_scored, max(config.lengths))
        windows = with_bos(lm, windows, config)
        lm.check_length(windows.shape[1])
        finals = [final for final, _ in iter_last_states(lm, windows, config.batch_tokens)]
        nll = next_token_nll(lm, torch.cat(finals), targets)  # [n * K]
        cache[key] = nll.view(ids.shape[0], config.n_scored).cpu()
    return cache[key]


def scored_windows(ids: torch.Tensor, length: int, n_scored: int, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [n, max_length + n_scored] -> windows [n * n_scored, length], targets [n * n_scored].

    Window k of sample i holds ids[i, max_length + k - length : max_length + k]; its target is
    ids[i, max_length + k], so every length scores the same targets.
    """
    if length > max_length:
        raise CtxlensError(f"Length {length} exceeds the samples' context of {max_length} tokens; list it in lengths.")
    n = ids.shape[0]
    span = ids[:, max_length - length : max_length + n_scored - 1]  # [n, length + n_scored - 1]
    windows = span.unfold(1, length, 1)  # [n, n_scored, length]
    return windows.reshape(n * n_scored, length), ids[:, max_length : max_length + n_scored].reshape(-1)


register(Experiment(
    "loss-vs-length", Config, plan, run, needs=("token_loss",), doc=summary(__doc__), work=work,
    paper="intrinsic-entropy", section="Section 2.2.2, Figure 2, Appendix E, Figure 11",
    smoke=Smoke({"lengths": [2, 4, 8, 16, 32], "n_samples": 3, "n_scored": 4},
                at_length=lambda L: {"source": "random", "lengths": [L // 2, L], "n_samples": 1, "n_scored": 2}),
    demo=(DemoStep("zoo", {"source": "builtin:test", "lengths": [4, 16, 64, 256], "n_samples": 4, "n_scored": 4},
                   {"source": "builtin:test", "lengths": [4, 64, T], "n_samples": 2, "n_scored": 4}),),
))
