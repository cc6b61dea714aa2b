"""The intrinsic-entropy line: CE against the intrinsic entropy of the final features (the
intrinsic-entropy paper, Section 2.2.2, Figure 1)."""

from __future__ import annotations

import math

from ctxlens.core.stats import Z95
from ctxlens.findings.card import Context, Line, absent, card_line
from ctxlens.findings.verdicts import PAPERS


def _absent(key: str, model: str, why: str) -> Line:
    return absent(key, model, why)


def _fisher(r: float, n: int, spearman: bool = False) -> tuple[float, float] | None:
    """95% interval of a correlation by Fisher's z (Spearman: variance 1.06 / (n - 3))."""
    if n < 4 or abs(r) >= 1:
        return None
    half = Z95 * math.sqrt((1.06 if spearman else 1.0) / (n - 3))
    return math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)


@card_line("ce_entropy", "CE vs intrinsic entropy", PAPERS["001"] + ", Section 2.2.2, Figure 1",
           "Pearson r(CE, intrinsic entropy) <= -0.97", order=11)
def _ce_entropy(ctx: Context) -> Line:
    return ce_entropy(ctx.of("intrinsic-entropy"), ctx.model)


def ce_entropy(rows: list[dict], model: str) -> Line:
    """Pearson r of CE on the intrinsic entropy (the fit over lengths, largest n measured) with
    its Fisher-z 95% interval over the fit's points, and R^2 = r^2; untested on fewer than three
    lengths."""
    fits = [r for r in rows if r.get("stage") == "fit" and r.get("x") == "intrinsic_entropy"
            and r.get("quantity") == "pearson_r" and r.get("value") is not None]
    if not fits:
        return _absent("ce_entropy", model, "not measured: no intrinsic-entropy fit rows")
    row = max(fits, key=lambda r: r.get("n_eig") or 0)
    r, n = float(row["value"]), int(row.get("n_points") or 0)
    if n < 3:  # a line through two points: r is +-1 whatever the model does
        return Line("ce_entropy", model, r, f"r = {r:.3f} (n = {row.get('n_eig')} eigenvalues)",
                    f"{n} lengths: any two points give r = ±1", "untested", {"r": r, "n": n, "ci": None})
    ci = _fisher(r, n)
    unc = "-" if ci is None else f"95% CI {ci[0]:.2f} to {ci[1]:.2f} (Fisher z, n = {n} lengths)"
    return Line("ce_entropy", model, r, f"r = {r:.3f}, R^2 = {r * r:.3f} (n = {row.get('n_eig')} eigenvalues)",
                unc, "linear, as expected" if r <= -0.97 else "not linear enough", {"r": r, "n": n, "ci": ci})
