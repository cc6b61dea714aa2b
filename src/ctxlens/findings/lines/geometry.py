"""The ACCS lines: ACCS by depth and the distant-perturbation plateau (the geometry paper,
Section 4, Figure 1; Section 5.2, Figure 4, Table 4).

The paper's quantities come first: self-similarity S, anisotropy A and ACCS = S - A per layer (or per
boundary), anisotropy estimated from pairs of representations of two different windows. The tests
are ctxlens's: the sampling unit is the window, and every interval comes from a bootstrap over
windows (``ctxlens.findings.accs``), never from layers or positions counted as independent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ctxlens.core import stats
from ctxlens.core.papers import named
from ctxlens.findings.accs import (
    MIN_RATIO_GAP,
    MIN_RHO,
    MIN_WINDOWS,
    PLATEAU_THRESHOLD,
    depth_result,
    plateau_result,
)
from ctxlens.findings.card import Context, Line, absent, card_line, needs_by_se
from ctxlens.findings.models import local_model, recurrent_hybrid

RERUN = f"re-run the part with >= {MIN_WINDOWS} windows"


@card_line("accs_depth", "ACCS depth trend", named("geometry", "Section 4, Figure 1"),
           "Spearman(layer, ACCS) < 0: ACCS falls with depth", order=7, reads=("accs-layers",))
def _accs_depth(ctx: Context) -> Line:
    return accs_depth(ctx.of("accs-layers"), ctx.model, ctx.L, layer_types(ctx.of("positional-heads")))


@card_line("accs_plateau", "distant-perturbation plateau ratio (at L)", named("geometry", "Section 5.2, Table 4"),
           f"< {PLATEAU_THRESHOLD} for recurrent and ALiBi models, >= {PLATEAU_THRESHOLD} for hybrids",
           order=8, reads=("accs-boundary",))
def _accs_plateau(ctx: Context) -> Line:
    return accs_plateau(ctx.of("accs-boundary"), ctx.model, ctx.L, ctx.info or {})


def layer_types(rows: list[dict]) -> dict:
    """{layer: attention type} named by any rows of the model (``positional-heads`` rows carry ``layer_type``)."""
    return {r["layer"]: r["layer_type"] for r in rows if r.get("layer") is not None and r.get("layer_type")}


def _rho(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f}"


def _ci(ci: Sequence[float] | None) -> str:
    return "-" if ci is None else f"{ci[0]:+.2f} to {ci[1]:+.2f}"


def _steps(steps: dict, curve: str = "S") -> str:
    """'; full_attention layers 5, 11, 17 make 80% of S's change' (empty without two layer types)."""
    if not steps.get("odd"):
        return ""
    share = "" if steps.get("share") is None else f" sum to {100 * steps['share']:.0f}% of {curve}'s net change"
    return f"; the steps into {steps['odd_type']} layers {', '.join(str(v) for v in steps['odd'])}{share}"


def _k(k: int | None) -> str:
    return "an unrecorded number of" if k is None else str(k)


def _mde(sd: float | None) -> float | None:
    return None if sd is None or not math.isfinite(sd) else stats.mde(sd, sides=2)


def accs_depth(rows: list[dict], model: str, L: int, types: dict | None = None) -> Line:
    """Spearman(layer, ACCS) at the longest length <= L, beside those of S and A, each with a 95%
    bootstrap interval over windows; "falls with depth" only when ACCS's interval lies below 0."""
    t = depth_result(rows, L, types)
    if t is None:
        return absent("accs_depth", model, f"not measured: no accs-layers rows at or below {L}")
    rho = t.get("rho_ACCS")
    text = (f"ACCS rho = {_rho(rho)}; S rho = {_rho(t.get('rho_S'))}; A rho = {_rho(t.get('rho_A'))} "
            f"at {t['length']}{_steps(t.get('steps', {}))}")
    numbers = {k: t.get(k) for k in ("length", "k", "rho_ACCS", "rho_S", "rho_A", "ci_ACCS", "ci_S", "ci_A",
                                    "verdict", "per_window")}
    if not t["per_window"]:
        return Line("accs_depth", model, rho, text + " (pooled; A over all pairs, within-window ones included)",
                    f"n = {_k(t['k'])} windows, pooled in the rows; no per-window values, so no interval",
                    f"not tested: the rows hold {_k(t['k'])} windows pooled; the window bootstrap needs per-window "
                    f"rows; {RERUN}", numbers, n=t["k"], unit="windows", bounds=(-1.0, 1.0), underpowered=True)
    mde = _mde(t.get("sd_ACCS"))
    within = t.get("within")
    extra = ("" if not within else f"; within {within['type']} layers ACCS rho = {_rho(within.get('rho_ACCS'))} "
             f"(95% CI {_ci(within.get('ci_ACCS'))})")
    unc = (f"n = {t['k']} windows; 95% CI of ACCS rho {_ci(t.get('ci_ACCS'))}, S {_ci(t.get('ci_S'))}, "
           f"A {_ci(t.get('ci_A'))} (bootstrap over windows, ctxlens's test); "
           f"detects |rho| >= {'-' if mde is None else f'{mde:.2f}'}{extra}")
    verdict = {None: f"not tested: {t['k']} windows; the window bootstrap needs >= {MIN_WINDOWS}",
               -1: "falls with depth, as the paper reports",
               1: "rises with depth, unlike the paper",
               0: "no depth trend shown: the interval holds 0"}[t["verdict"]]
    return Line("accs_depth", model, rho, text, unc, verdict, {**numbers, "within": within},
                n=t["k"], unit="windows", interval=t.get("ci_ACCS"), bounds=(-1.0, 1.0), mde=mde,
                underpowered=t["verdict"] is None or mde is None or mde > MIN_RHO, null=t["verdict"] == 0,
                effect=MIN_RHO, needs=needs_by_se(t["k"], mde, MIN_RHO))


def accs_plateau(rows: list[dict], model: str, L: int, info: dict) -> Line:
    """Plateau ratio at the longest length <= L (last layer) with a 95% bootstrap interval over windows;
    a verdict only when the total drop's interval lies above 0 and the ratio's is clear of 0.25."""
    lengths = sorted({r["length"] for r in rows if r.get("length") is not None and r["length"] <= L})
    got = [p for p in (plateau_result(rows, n) for n in lengths) if p.get("ratio") is not None or p["per_window"]]
    if not got:
        return absent("accs_plateau", model, f"not measured: no accs-boundary curve at or below {L}")
    p = got[-1]
    ratio = p.get("ratio")
    text = f"plateau ratio = {'-' if ratio is None else f'{ratio:.2f}'} at {p['length']}"
    numbers = {k: p.get(k) for k in ("length", "k", "ratio", "ci", "ci_total", "far_drop", "total_drop", "verdict")}
    unbounded = (-math.inf, math.inf)
    if not p["per_window"]:
        return Line("accs_plateau", model, ratio, text + " (pooled)",
                    f"n = {_k(p['k'])} windows, pooled in the rows; no per-window values, so no interval",
                    f"not tested: the rows hold {_k(p['k'])} windows pooled; the window bootstrap needs "
                    f"per-window rows; {RERUN}", numbers, n=p["k"], unit="windows", bounds=unbounded, underpowered=True)
    mde = _mde(p.get("sd"))
    unc = (f"n = {p['k']} windows; 95% CI {_ci(p.get('ci'))}, total drop {_ci(p.get('ci_total'))} "
           f"(bootstrap over windows, ctxlens's test); detects a distance >= "
           f"{'-' if mde is None else f'{mde:.2f}'} from {PLATEAU_THRESHOLD}")
    want = True if local_model(info) is None else False if recurrent_hybrid(info) is None else None
    if p["k"] < MIN_WINDOWS:
        verdict = f"not tested: {p['k']} windows; the window bootstrap needs >= {MIN_WINDOWS}"
    elif not p.get("determined"):
        verdict = "not determined: the total drop's interval reaches 0"
    elif p["verdict"] is None:
        verdict = f"undecided: the interval holds {PLATEAU_THRESHOLD}"
    else:
        verdict = ("a plateau" if p["verdict"] else "no plateau") + (
            "" if want is None else ", as expected" if p["verdict"] == want else ", unlike the paper")
    return Line("accs_plateau", model, ratio, text, unc, verdict, numbers, n=p["k"], unit="windows",
                interval=p.get("ci") if p.get("determined") else None, bounds=unbounded, mde=mde,
                underpowered=p["verdict"] is None and (mde is None or mde > MIN_RATIO_GAP),
                null=p["k"] >= MIN_WINDOWS and p["verdict"] is None, effect=MIN_RATIO_GAP,
                needs=needs_by_se(p["k"], mde, MIN_RATIO_GAP))
