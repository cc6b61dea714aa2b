"""The ACCS lines: ACCS by depth and the distant-perturbation plateau (the geometry paper,
Section 4, Figure 1; Section 5.2, Table 4)."""

from __future__ import annotations

import math

from ctxlens.core.stats import Z95
from ctxlens.findings.accs import PLATEAU_THRESHOLD, depth_trend, plateau
from ctxlens.findings.card import Context, Line, absent, card_line
from ctxlens.findings.models import local_model, recurrent_hybrid
from ctxlens.findings.verdicts import PAPERS


def _absent(key: str, model: str, why: str) -> Line:
    return absent(key, model, why)


def _fisher(r: float, n: int, spearman: bool = False) -> tuple[float, float] | None:
    """95% interval of a correlation by Fisher's z (Spearman: variance 1.06 / (n - 3))."""
    if n < 4 or abs(r) >= 1:
        return None
    half = Z95 * math.sqrt((1.06 if spearman else 1.0) / (n - 3))
    return math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)


@card_line("accs_depth", "ACCS depth trend", PAPERS["000"] + ", Section 4, Figure 1",
           "Spearman(layer, ACCS) < 0: ACCS falls with depth", order=7)
def _accs_depth(ctx: Context) -> Line:
    return accs_depth(ctx.of("accs-layers"), ctx.model, ctx.L)


@card_line("accs_plateau", "distant-perturbation plateau ratio (at L)", PAPERS["000"] + ", Section 5.2, Table 4",
           f"< {PLATEAU_THRESHOLD} for recurrent and ALiBi models, >= {PLATEAU_THRESHOLD} for hybrids", order=8)
def _accs_plateau(ctx: Context) -> Line:
    return accs_plateau(ctx.of("accs-boundary"), ctx.model, ctx.L, ctx.info or {})


def accs_depth(rows: list[dict], model: str, L: int) -> Line:
    """Spearman(layer, ACCS) at the longest length <= L, with its Fisher-z 95% interval."""
    got = [r for r in rows if r.get("length", 0) <= L]
    if not got:
        return _absent("accs_depth", model, f"not measured: no accs-layers rows at or below {L}")
    length = max(r["length"] for r in got)
    t = depth_trend([r for r in got if r["length"] == length])
    rho = t["spearman"]
    if rho is None:
        return _absent("accs_depth", model, "not measured: too few layers for a rank correlation")
    ci = _fisher(rho, len(t["layers"]), spearman=True)
    unc = "-" if ci is None else f"95% CI {ci[0]:.2f} to {ci[1]:.2f} (Fisher z, n = {len(t['layers'])} layers)"
    return Line("accs_depth", model, rho, f"rho = {rho:.2f} at {length}", unc,
                "falls with depth, as expected" if t["reproduced"] else "does not fall with depth",
                {"rho": rho, "length": length, "ci": ci, "n": len(t["layers"])})


def accs_plateau(rows: list[dict], model: str, L: int, info: dict) -> Line:
    """Plateau ratio at the longest length <= L (last layer); the spread over other lengths shown."""
    lengths = sorted({r["length"] for r in rows if r.get("length") is not None})
    ratios = {n: plateau([r for r in rows if r["length"] == n])["plateau_ratio"] for n in lengths}
    within = [n for n in lengths if n <= L and ratios[n] is not None]
    if not within:
        return _absent("accs_plateau", model, f"not measured: no accs-boundary curve at or below {L}")
    at = within[-1]
    ratio = ratios[at]
    others = [v for v in ratios.values() if v is not None]
    unc = (f"range {min(others):.2f} to {max(others):.2f} over {len(others)} lengths" if len(others) > 1
           else "no per-sample values in the rows")
    flat = ratio < PLATEAU_THRESHOLD
    want = True if local_model(info) is None else False if recurrent_hybrid(info) is None else None
    verdict = ("a plateau" if flat else "no plateau") + ("" if want is None else ", as expected" if flat == want
                                                          else ", unlike the paper")
    return Line("accs_plateau", model, ratio, f"{ratio:.2f} at {at}", unc, verdict, {"ratio": ratio, "length": at})
