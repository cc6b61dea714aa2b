"""Criteria for the qualitative ACCS findings of the geometry paper, stated before any zoo model was measured.

The geometry paper ("How much do contextualized representations encode long-range context?"):

- Section 4, Figure 1: ACCS falls with layer depth (GPT+RoPE within its training length).
  Criterion: Spearman correlation between layer index and ACCS is negative, and the last layer's
  ACCS is below the first layer's.
- Section 5.2, Figure 4, Table 4: recurrent models (Mamba-2, mLSTM) and ALiBi show a flat ACCS
  plateau while only distant prefix is shuffled, then drop when the shuffle reaches the suffix;
  hybrids (Griffin, HybridMamba) and RoPE beyond its training length fall steadily instead.
  Criterion: the *plateau ratio*, the share of the total ACCS drop (smallest boundary to
  boundary 1.0) that has already happened at boundary 0.5,

      (ACCS(b_min) - ACCS(0.5)) / (ACCS(b_min) - ACCS(1.0)),

  is below ``PLATEAU_THRESHOLD`` = 0.25 for a plateau. On the paper's own Table 4 this ratio is
  about 0 for Mamba-2, mLSTM and ALiBi and 0.58-0.75 for Griffin, HybridMamba and GPT+RoPE; the
  threshold sits between the two groups and was fixed from those numbers alone. A model whose
  ACCS does not drop at all (denominator <= 0) has no plateau to speak of: undecided (None).

These are recorded results, not tests: ``ctxlens.findings.compute_findings`` (the demo's findings
table, or ``scripts/findings.py`` over any runs) writes the numbers and the verdicts, whatever they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxlens.core import stats

PLATEAU_THRESHOLD = 0.25
FAR_BOUNDARY = 0.5


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties, ``core.stats``); None when either side is
    constant or there are fewer than three points."""
    rho = stats.spearman(x, y)[0]
    return None if math.isnan(rho) else rho


def depth_trend(rows: Iterable[dict], stream: str = "residual") -> dict:
    """ACCS per layer from ``accs-layers`` rows of one model and length -> numbers + verdict."""
    pts = sorted((r["layer"], r["accs"]) for r in rows if r.get("stream") == stream and r.get("accs") is not None)
    if len(pts) < 2:
        return {"layers": [p[0] for p in pts], "accs": [p[1] for p in pts], "spearman": None, "reproduced": None}
    layers, values = [p[0] for p in pts], [p[1] for p in pts]
    rho = spearman([float(v) for v in layers], values)
    return {"layers": layers, "accs": values, "spearman": rho, "first": values[0], "last": values[-1],
            "reproduced": bool(rho is not None and rho < 0 and values[-1] < values[0])}


def plateau(rows: Iterable[dict], layer: int | None = None, stream: str = "residual") -> dict:
    """Plateau ratio of ACCS vs relative boundary from ``accs-boundary`` rows of one model,
    length and layer (the deepest present when ``layer`` is None) -> numbers + verdict."""
    rows = [r for r in rows if r.get("stream") == stream and r.get("accs") is not None]
    if not rows:
        return {"plateau_ratio": None, "plateau": None}
    layer = max(r["layer"] for r in rows) if layer is None else layer
    curve = dict(sorted((float(r["boundary"]), r["accs"]) for r in rows if r["layer"] == layer))
    out = {"layer": layer, "boundaries": list(curve), "accs": list(curve.values())}
    if 1.0 not in curve or FAR_BOUNDARY not in curve or min(curve) >= FAR_BOUNDARY:
        return {**out, "plateau_ratio": None, "plateau": None}
    start = curve[min(curve)]
    drop = start - curve[1.0]
    ratio = (start - curve[FAR_BOUNDARY]) / drop if drop > 0 else None
    return {**out, "total_drop": drop, "far_drop": start - curve[FAR_BOUNDARY], "plateau_ratio": ratio,
            "plateau": None if ratio is None else bool(ratio < PLATEAU_THRESHOLD)}


# --------------------------------------------------------------------------------------
# The window bootstrap (ctxlens's test; the paper reports point values only)
# --------------------------------------------------------------------------------------
#
# The sampling unit is the window (one text window, its m suffix positions under the original and
# the perturbed prefix): layers and positions of one window are correlated, windows are not. Rows
# with ``level="window"`` hold each window's self-similarity, rows with ``level="pair"`` the mean
# cosine between the vectors of two different windows (``ctxlens.probes.suffix.window_rows``).
# Anisotropy is the mean cosine of two representations drawn from D_hh' (the geometry paper,
# Section 2); the paper draws 500M pairs from a whole corpus, where pairs inside one sequence are a
# vanishing share, so here it is estimated from between-window pairs only (a U-statistic over
# windows). A bootstrap resample of windows recomputes S, A and ACCS at every layer (or boundary):
# pairs of two copies of one window are within-window pairs and are left out.

MIN_WINDOWS = 8  # fewer windows: a percentile bootstrap over windows is not trusted; no verdict
N_BOOT = 2000
MIN_RHO = 0.5  # the smallest depth trend (|Spearman rho|) the line is sized to detect
MIN_RATIO_GAP = 0.25  # the plateau ratio's distance from the threshold the line is sized to detect


@dataclass(frozen=True)
class WindowData:
    """Per-window values at K conditions (layers or boundaries) of one model, length and stream.

    keys [K]; samples [k]; n [k] positions per window; self_sim [K, k]; cross [K, k, k] mean cosine
    between windows a != b (diagonal 0, unused); weight [k, k] vector pairs 4 n_a n_b (diagonal 0)."""

    keys: list
    samples: list
    n: np.ndarray
    self_sim: np.ndarray
    cross: np.ndarray
    weight: np.ndarray

    @property
    def k(self) -> int:
        return len(self.samples)


def window_data(rows: Iterable[dict], key: str, stream: str = "residual") -> WindowData | None:
    """``WindowData`` over the values of column ``key`` ("layer" or "boundary") from the per-window
    rows of one model and length; None without per-window rows (old rows hold pooled values only)
    or when some condition misses a window or a pair."""
    rows = [r for r in rows if r.get("stream", "residual") == stream and r.get("level") in ("window", "pair")]
    wins = [r for r in rows if r["level"] == "window" and r.get("sample_self_sim") is not None]
    if not wins:
        return None
    keys = sorted({r[key] for r in wins})
    samples = sorted({r["sample"] for r in wins})
    at = {s: i for i, s in enumerate(samples)}
    ki = {v: i for i, v in enumerate(keys)}
    n = np.zeros(len(samples))
    self_sim = np.full((len(keys), len(samples)), np.nan)
    for r in wins:
        self_sim[ki[r[key]], at[r["sample"]]] = r["sample_self_sim"]
        n[at[r["sample"]]] = r["n"]
    cross = np.full((len(keys), len(samples), len(samples)), np.nan)
    for r in rows:
        if r["level"] == "pair" and r[key] in ki and r["sample"] in at and r["other_sample"] in at:
            a, b = at[r["sample"]], at[r["other_sample"]]
            cross[ki[r[key]], a, b] = cross[ki[r[key]], b, a] = r["cross_cos"]
    for i in range(len(samples)):
        cross[:, i, i] = 0.0
    if np.isnan(self_sim).any() or np.isnan(cross).any() or len(samples) < 2:
        return None
    weight = 4.0 * np.outer(n, n)
    np.fill_diagonal(weight, 0.0)
    return WindowData(keys, samples, n, self_sim, cross, weight)


def estimates(data: WindowData, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S, A), each [B, K], for B multisets of windows given as multiplicities ``counts`` [B, k]:
    S the position-weighted mean self-similarity, A the mean cosine over pairs of vectors from two
    different windows (copies of one window never pair). NaN where a multiset holds one window."""
    c = np.asarray(counts, dtype=float)  # [B, k]
    s = (c * data.n) @ data.self_sim.T / (c @ data.n)[:, None]  # [B, K]
    cw = c[:, None, :] * c[:, :, None]  # [B, k, k] multiplicity of each window pair
    wsum = np.einsum("bij,ij->b", cw, data.weight)  # [B]
    num = np.einsum("bij,ij,kij->bk", cw, data.weight, data.cross)  # [B, K]
    with np.errstate(invalid="ignore", divide="ignore"):
        a = num / wsum[:, None]
    return s, a


def resample_counts(k: int, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """[n_boot, k] multiplicities of k windows drawn with replacement (a whole-item bootstrap)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, k, (n_boot, k))  # [B, k]
    return np.stack([np.bincount(p, minlength=k) for p in picks])


def _rank_rows(x: np.ndarray) -> np.ndarray:
    """Ranks 1..K along the last axis of x [B, K], ties sharing their mean rank (``stats.rankdata``,
    called only on the rows that hold a tie)."""
    order = np.argsort(x, axis=1)
    ranks = np.empty_like(x, dtype=float)
    np.put_along_axis(ranks, order, np.arange(1, x.shape[1] + 1, dtype=float)[None, :].repeat(len(x), 0), axis=1)
    tied = (np.diff(np.take_along_axis(x, order, axis=1), axis=1) == 0).any(1)
    for i in np.flatnonzero(tied):
        ranks[i] = stats.rankdata(x[i])
    return ranks


def spearman_rows(x: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of x [B, K] with its index 0..K-1 -> [B] (NaN for a constant row)."""
    x = np.asarray(x, dtype=float)
    bad = ~np.isfinite(x).all(1)
    r = _rank_rows(np.where(bad[:, None], 0.0, x)) - (x.shape[1] + 1) / 2  # centred ranks [B, K]
    t = np.arange(x.shape[1]) - (x.shape[1] - 1) / 2  # centred index ranks [K]
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (r @ t) / np.sqrt((r * r).sum(1) * (t @ t))
    return np.where(bad, np.nan, rho)


def expanded_tail(k: int, alpha: float = 0.05) -> float:
    """The tail probability of the expanded percentile bootstrap for k items (Hesterberg, "What teachers
    should know about the bootstrap", 2015): the percentile interval undercovers with few items, so its
    quantiles are taken at Phi(-sqrt(k / (k - 1)) t_{k-1, 1-alpha/2}) instead of alpha / 2."""
    z = math.sqrt(k / (k - 1)) * stats.t_quantile(k - 1, alpha)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _interval(values: np.ndarray, k: int) -> tuple[float, float] | None:
    """95% expanded percentile interval of bootstrap ``values`` over k windows (NaN draws dropped)."""
    if np.isfinite(values).sum() < 10 or k < 2:
        return None
    return stats.percentile_interval(values, expanded_tail(k))


def trend_test(data: WindowData, n_boot: int = N_BOOT, seed: int = 0, layers: list | None = None) -> dict:
    """Depth trends of ACCS, S and A (Spearman over layers of the per-layer estimates, the geometry
    paper, Section 4, Figure 1), each with a 95% percentile interval from a bootstrap over windows
    (ctxlens's test). ``layers``: a subset of ``data.keys`` (e.g. one attention type); default all.
    The verdict on ACCS: -1 (falls: the interval lies below 0), +1 (rises: above 0), 0 (interval
    holds 0); None with fewer than ``MIN_WINDOWS`` windows or three layers."""
    idx = [i for i, v in enumerate(data.keys) if layers is None or v in layers]
    full = np.ones((1, data.k))
    s0, a0 = estimates(data, full)
    s0, a0 = s0[:, idx], a0[:, idx]
    out: dict = {"k": data.k, "layers": [data.keys[i] for i in idx], "S": s0[0].tolist(), "A": a0[0].tolist(),
                 "ACCS": (s0 - a0)[0].tolist()}
    for name, v in (("ACCS", s0 - a0), ("S", s0), ("A", a0)):
        rho = spearman_rows(v)[0] if len(idx) >= 3 else math.nan
        out[f"rho_{name}"] = None if math.isnan(rho) else float(rho)
    if len(idx) < 3 or data.k < 2:
        return {**out, "verdict": None}
    s, a = estimates(data, resample_counts(data.k, n_boot, seed))
    s, a = s[:, idx], a[:, idx]
    for name, v in (("ACCS", s - a), ("S", s), ("A", a)):
        rhos = spearman_rows(v)
        out[f"ci_{name}"], out[f"sd_{name}"] = _interval(rhos, data.k), stats.sample_sd(rhos)
    ci = out["ci_ACCS"]
    verdict = None if data.k < MIN_WINDOWS or ci is None else -1 if ci[1] < 0 else 1 if ci[0] > 0 else 0
    return {**out, "verdict": verdict}


def plateau_test(data: WindowData, n_boot: int = N_BOOT, seed: int = 0,
                 threshold: float = PLATEAU_THRESHOLD) -> dict:
    """The plateau ratio (ACCS(b_min) - ACCS(0.5)) / (ACCS(b_min) - ACCS(1.0)) of the geometry paper's
    Section 5.2 curves (one layer), with a bootstrap over windows (ctxlens's test): the total drop's
    95% interval must lie above 0 for the ratio to be determined; then the verdict is True (a
    plateau: the ratio's interval lies below ``threshold``), False (above it) or None (holds it,
    or fewer than ``MIN_WINDOWS`` windows)."""
    keys = [float(b) for b in data.keys]
    if 1.0 not in keys or FAR_BOUNDARY not in keys or min(keys) >= FAR_BOUNDARY:
        return {"k": data.k, "ratio": None, "verdict": None, "why": "the boundaries b_min < 0.5, 0.5 and 1.0"}
    cols = [keys.index(min(keys)), keys.index(FAR_BOUNDARY), keys.index(1.0)]

    def parts(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s, a = estimates(data, counts)
        acc = (s - a)[:, cols]  # [B, 3]: b_min, 0.5, 1.0
        return acc[:, 0] - acc[:, 1], acc[:, 0] - acc[:, 2]  # far drop, total drop

    far, total = parts(np.ones((1, data.k)))
    out: dict[str, Any] = {"k": data.k, "b_min": min(keys), "far_drop": float(far[0]), "total_drop": float(total[0]),
           "ratio": float(far[0] / total[0]) if total[0] > 0 else None}
    fb, tb = parts(resample_counts(data.k, n_boot, seed))
    out["ci_total"] = _interval(tb, data.k)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(tb > 0, fb / tb, np.nan)
    out["ci"], out["sd"] = _interval(ratios, data.k), stats.sample_sd(ratios)
    determined = out["ci_total"] is not None and out["ci_total"][0] > 0 and out["ratio"] is not None
    out["determined"] = determined
    if not determined or out["ci"] is None or data.k < MIN_WINDOWS:
        return {**out, "verdict": None}
    lo, hi = out["ci"]
    return {**out, "verdict": True if hi < threshold else False if lo > threshold else None}


def layer_steps(keys: list, values: list[float], types: dict) -> dict:
    """Where a per-layer curve moves: the layers whose type differs from the most common one (e.g.
    Gemma-3's global ``full_attention`` layers among sliding ones) and the share of the curve's total
    change first -> last layer made in the steps into those layers (descriptive)."""
    named = {k: types.get(k) for k in keys if types.get(k)}
    if len(set(named.values())) < 2 or len(values) != len(keys):
        return {}
    common = max(set(named.values()), key=list(named.values()).count)
    odd = [k for k in keys if named.get(k) not in (None, common)]
    total = values[-1] - values[0]
    steps = sum(values[i] - values[i - 1] for i, k in enumerate(keys) if i > 0 and k in odd)
    return {"common": common, "odd": odd, "odd_type": named[odd[0]] if odd else None,
            "share": steps / total if total else None}


# --------------------------------------------------------------------------------------
# What the card line and the findings table both read
# --------------------------------------------------------------------------------------


def _pooled_rho(pooled: list[dict], column: str) -> float | None:
    pts = sorted((r["layer"], r[column]) for r in pooled if r.get(column) is not None)
    return spearman([float(p[0]) for p in pts], [p[1] for p in pts]) if len(pts) >= 3 else None


def depth_result(rows: Iterable[dict], limit: int, types: dict | None = None, n_boot: int = N_BOOT,
                 stream: str = "residual") -> dict | None:
    """The depth trend at the longest length <= ``limit`` of one model's ``accs-layers`` rows: with
    per-window rows, ``trend_test`` over all layers (and, where ``types`` {layer: attention type} or the
    rows' ``layer_type`` name two types, within the most common type); with pooled rows only (old
    runs), the point trends of ACCS, S and A and verdict None. None without rows."""
    got = [r for r in rows if r.get("length", 0) <= limit and r.get("stream", stream) == stream]
    if not got:
        return None
    length = max(r["length"] for r in got)
    at = [r for r in got if r["length"] == length]
    pooled = [r for r in at if "level" not in r and r.get("accs") is not None]
    types = {**(types or {}), **{r["layer"]: r["layer_type"] for r in at if r.get("layer_type")}}
    k_pooled = max((r.get("n_sequences") or 0 for r in pooled), default=0) or None
    data = window_data(at, "layer", stream)
    if data is None:
        layers = sorted({r["layer"] for r in pooled})
        found = [next(r.get("self_sim") for r in pooled if r["layer"] == v) for v in layers]
        s = [float(v) for v in found if v is not None]
        s = s if len(s) == len(found) else []
        out = {"length": length, "k": k_pooled, "per_window": False, "layers": layers, "verdict": None,
               **{f"rho_{n}": _pooled_rho(pooled, c) for n, c in (("ACCS", "accs"), ("S", "self_sim"),
                                                                      ("A", "anisotropy"))}}
        return {**out, "steps": layer_steps(layers, s, types)}
    out = {"length": length, "per_window": True, **trend_test(data, n_boot)}
    out["steps"] = layer_steps(out["layers"], out["S"], types)
    common = out["steps"].get("common")
    if common:
        within = [v for v in data.keys if types.get(v) == common]
        out["within"] = {"type": common, **trend_test(data, n_boot, layers=within)}
    return out


def plateau_result(rows: Iterable[dict], length: int, n_boot: int = N_BOOT, stream: str = "residual") -> dict:
    """The plateau ratio at ``length`` of one model's ``accs-boundary`` rows (deepest layer): with
    per-window rows, ``plateau_test``; with pooled rows only, the point ratio (``plateau``) and verdict
    None."""
    at = [r for r in rows if r.get("length") == length and r.get("stream", stream) == stream]
    layer = max((r["layer"] for r in at), default=None)
    at = [r for r in at if r["layer"] == layer]
    pooled = [r for r in at if "level" not in r]
    data = window_data(at, "boundary", stream)
    if data is None:
        p = plateau(pooled, layer, stream)
        k = max((r.get("n_sequences") or 0 for r in pooled), default=0) or None
        return {"length": length, "layer": layer, "k": k, "per_window": False, "ratio": p["plateau_ratio"],
                "verdict": None, "determined": p["plateau_ratio"] is not None}
    return {"length": length, "layer": layer, "per_window": True, **plateau_test(data, n_boot)}
