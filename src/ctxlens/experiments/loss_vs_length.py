"""``loss-vs-length``: next-token cross-entropy with exactly l tokens visible, and its power-law fit.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"), Section 2.2.2 (Eq. 3, Figure 2)
and Appendix E (Figure 11): the Bayes risk at context length l is approximated by a trained LM's
cross-entropy with l visible tokens, and fitted with CE(l) = C0 + C / l^gamma.

The same token positions are scored at every l, so the curve reflects visible context alone.
Each sample is a window of ``max(lengths) + n_scored`` tokens whose last ``n_scored`` tokens are
the targets. For the target at index p + 1 and a length l, the model reads exactly tokens
p - l + 1 .. p, as a fresh window of its own (so nothing earlier reaches it through attention,
recurrent state or positions). Only each window's last hidden state goes through the LM head,
in chunks (``ctxlens.lm.analysis.losses``): no full-vocabulary logits for every position.

Units: one per length (all samples, in forwards of about ``batch_tokens`` tokens), writing one
row per (length, sample) with ``stage="measure"`` and ``ce``, the sample's mean loss in nats over
its scored positions; then one ``stage="fit"`` unit writing one row per quantity of the fit to the
mean CE per length (C0, C, gamma with standard errors, r2). The fit reuses the measurements made
in this process and recomputes them after a resume.

``sample`` i is the same document window at every length (the windows of every length are cut
from one array of ids, ``scored_windows``), so lengths can be compared paired over samples.

``scoring="positions"`` reads every length from ONE forward per window instead: in a causal model
the token at offset p of a window cut from inside the text stream is predicted from exactly the p
tokens before it, so a forward over the window's first ``max(lengths)`` tokens scores, for each
length l, the targets at offsets l - w + 1 .. l (each sees between l - w + 1 and l tokens, w =
``band_width``: at most ``n_scored`` and l / ``band``, so the spread stays within 1/``band`` of l).
Lengths then score different targets of the same window, so they are paired over windows (the
independent items), not over targets; the cost per window is one forward of max(lengths) tokens
instead of ``n_scored`` forwards per length (about 2 x max(lengths) x ``n_scored`` tokens). It is one
unit (windows checkpointed as they finish) writing the measure rows and the fit rows; the rows add
``visible_min`` (the fewest tokens a target of the band saw). ``tests/real/test_loss_positions.py``
checks it against separate forwards on a real model. The fit
weights each length's mean by its standard error over samples, keeps C0 >= 0 (a cross-entropy's
floor; a fit whose C0 ends at 0 says "C0 at its bound" in its flag), and is bootstrapped over
samples (whole windows resampled, then refitted): ``ci_low`` / ``ci_high`` are the 95% percentile
interval of each parameter, ``n_boot`` the refits, ``c0_at_bound`` the share of them with C0 at 0.
"""

from __future__ import annotations

import json
import math
import typing
from dataclasses import dataclass

import torch

from ctxlens.core import progress
from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import declare, narrow, pick
from ctxlens.experiments.registry import T, register
from ctxlens.metrics.fits import fit_documents
from ctxlens.probes.source import LengthSweepOptions
from ctxlens.probes.visible import iter_last_states, next_token_nll, samples, uses_bos, with_bos

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Scoring = typing.Literal["targets", "positions"]


@dataclass
class Config(LengthSweepOptions):
    lengths: list[Tokens] = option(factory=lambda: [4, 8, 16, 32, 64, 128, 256, 512],
                                        help="visible context lengths l, in tokens (each once)")
    n_samples: Count = option(8, "windows, each scored at every length")
    n_scored: Count = option(32, "target positions per window, the same at every length")
    n_boot: Count = option(400, "bootstrap refits of the power law over samples (whole windows resampled)")
    scoring: Scoring = option("targets", "targets: the same targets at every length, a fresh window per target "
                                         "and length (the paper's masking); positions: one forward per window, "
                                         "length l read at the targets l tokens into it")
    band: Tokens = option(64, "positions scoring: a length's targets lie within l / band tokens of l")


def plan(config: Config) -> list[Unit]:
    if config.scoring == "positions":
        return [{"stage": "measure", "source": config.source, "scoring": "positions"}]
    units = [{"stage": "measure", "source": config.source, "length": n} for n in sorted(config.lengths)]
    return units + [{"stage": "fit", "source": config.source}]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    lengths = sorted(config.lengths)
    if config.scoring == "positions":
        return positions_rows(lm, config)
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


def fit_rows(lengths: list[int], per_length: list[list[float]], n_boot: int, seed: int) -> list[Row]:
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


def work(config: Config, unit: Unit) -> list[Work]:
    """A measure unit reads every sample's ``n_scored`` windows of its length (the fit reuses them);
    with positions scoring, one window of max(lengths) tokens per sample."""
    if unit["stage"] != "measure":
        return []
    if config.scoring == "positions":
        return [Work(config.n_samples, max(config.lengths) + int(bool(config.bos)))]
    return [Work(config.n_samples * config.n_scored, unit["length"] + int(bool(config.bos)))]  # auto: estimated without


# ------------------------------------------------------------------------------- measurement
def _measure(lm: LM, config: Config, length: int, cache: Cache) -> torch.Tensor:
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


# ------------------------------------------------------------------------------- positions scoring
def band_width(length: int, n_scored: int, band: int) -> int:
    """Targets read for ``length`` in one forward: at most ``n_scored`` and length / ``band``, at least 1."""
    return max(1, min(n_scored, length // band))


def band_offsets(lengths: list[int], n_scored: int, band: int) -> dict[int, list[int]]:
    """{l: the offsets p of its targets, l - w + 1 .. l}: the token at offset p sees exactly p tokens."""
    return {n: list(range(n - band_width(n, n_scored, band) + 1, n + 1)) for n in lengths}


def position_nll(lm: LM, config: Config, window: torch.Tensor, offsets: list[int]) -> torch.Tensor:
    """window [B, Lmax + 1] of text ids -> [B, len(offsets)] nats of the token at each offset p given
    exactly the p tokens before it (one forward of the first max(offsets) tokens, BOS first when the
    model reads one; the BOS is not counted as a visible token)."""
    top = max(offsets)
    inputs = with_bos(lm, window[:, :top], config)  # [B, top (+1)]
    lm.check_length(inputs.shape[1])
    shift = inputs.shape[1] - top  # 1 with a BOS
    hidden = lm.final_hidden(inputs)  # [B, top (+1), d]
    at = torch.tensor([p - 1 + shift for p in offsets])  # the hidden state that predicts offset p
    return lm.nll_from_hidden(hidden[:, at], window[:, offsets]).cpu()  # [B, n_offsets]


def positions_rows(lm: LM, config: Config) -> list[Row]:
    """The measure rows (one per length and window) and the fit rows of ``scoring="positions"``;
    finished windows are checkpointed, so an interrupted unit resumes where it stopped."""
    lengths = sorted(config.lengths)
    offsets = band_offsets(lengths, config.n_scored, config.band)
    flat = sorted({p for ps in offsets.values() for p in ps})
    ids = samples(lm, config, max(lengths) + 1, {})  # [n, Lmax + 1]
    saved = progress.saved()
    per: list[dict[int, float | None]] = []  # per window: {offset: nats}
    for i in range(ids.shape[0]):
        key = f"window {i}"
        if key in saved:
            per.append({int(k): v for k, v in json.loads(saved[key]).items()})
            progress.skip(max(lengths))
            continue
        nll = position_nll(lm, config, ids[i : i + 1], flat)[0]  # [n_offsets]
        got = {p: float(v) if math.isfinite(float(v)) else None for p, v in zip(flat, nll.tolist())}
        progress.save(key, json.dumps(got))
        per.append(got)
    rows, table = [], []  # table [n_windows][n_lengths] of CE
    for i, got in enumerate(per):
        ces = []
        for n in lengths:
            vals = [got[p] for p in offsets[n]]
            finite = [v for v in vals if v is not None]
            ok = len(finite) == len(vals)
            ce = sum(finite) / len(finite) if ok else None
            ces.append(ce if ce is not None else math.nan)
            rows.append({"stage": "measure", "length": n, "sample": i, "n_scored": len(vals),
                         "visible_min": offsets[n][0], "bos": uses_bos(lm, config), "ce": ce,
                         "flag": None if ok else "non-finite loss"})
        table.append(ces)
    per_length = [[table[i][j] for i in range(len(table))] for j in range(len(lengths))]
    return rows + [{"stage": "fit", **r} for r in fit_rows(lengths, per_length, config.n_boot, config.seed)]


COLUMNS = declare(
    narrow(pick("stage", "quantity", "value", "stderr", "fit", "n_points", "flag", "source", "length", "sample", "bos"),
           stage=("measure", "fit"), fit=("power_law",),
           quantity=("C0", "C", "gamma", "r2", "corr(C0, C)", "corr(C0, gamma)", "corr(C, gamma)")),
    Column("n_scored", int, "tokens", "target tokens scored per window"),
    Column("visible_min", int, "tokens", "scoring='positions': the fewest tokens a target of the band saw",
           when="--scoring positions"),
    Column("scoring", str, "", "'positions': every length read from one forward per window (a unit coordinate)",
           choices=typing.get_args(Scoring), when="--scoring positions"),
    Column("ce", float, "nats", "mean next-token cross-entropy of the window's targets with length tokens visible",
           low=0.0),
    Column("n_docs", int, "count", "windows the fit's bootstrap resamples"),
    Column("n_boot", int, "count", "bootstrap replicates of the fit"),
    Column("weighted", bool, "", "whether the fit weights lengths by their standard errors"),
    Column("c0_min", float, "nats", "lower bound of C0 in the fit"),
    Column("c0_at_bound", float, "fraction", "share of bootstrap fits with C0 at its bound"),
    Column("ci_low", float, "", "lower end of the value's 95% bootstrap interval", optional=True),
    Column("ci_high", float, "", "upper end of the value's 95% bootstrap interval", optional=True),
)


register(Experiment(
    "loss-vs-length", Config, plan, run, needs=("token_loss",), doc=summary(__doc__), work=work,
    paper="intrinsic-entropy", section="Section 2.2.2, Figure 2, Appendix E, Figure 11",
    smoke=Smoke({"lengths": [2, 4, 8, 16, 32], "n_samples": 3, "n_scored": 4},
                at_length=lambda L: {"source": "random", "lengths": [L // 2, L], "n_samples": 1, "n_scored": 2}),
    demo=(DemoStep("zoo", {"source": "builtin:test", "lengths": [4, 16, 64, 256], "n_samples": 4, "n_scored": 4},
                   {"source": "builtin:test", "lengths": [4, 64, T], "n_samples": 2, "n_scored": 4}),),
    columns=COLUMNS,
))
