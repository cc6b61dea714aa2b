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
