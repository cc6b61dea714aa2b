"""Least-squares fits with uncertainties: CE(l) = C0 + C / l^gamma, and straight lines.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"): Section 2.2.2 (Eq. 3, Figure 2)
and Appendix E (Figure 11) fit the cross-entropy at visible context length ``l`` with
``C0 + C / l^gamma``; Figures 1, 10, 13, 15 and Appendix J.3 fit CE linearly against intrinsic
entropy / dimension and report R² and correlations.

Every fit returns a ``Fit``: parameters, 1-sigma standard errors (``s² (JᵀJ)⁻¹`` with ``s²`` the
residual variance, as ``scipy.optimize.curve_fit`` reports by default), R², and a ``flag`` that
says in words when something could not be estimated (too few points, a flat curve, no residual
degrees of freedom). Missing numbers are ``None`` with a flag, never a silent NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxlens.core.errors import CtxlensError


@dataclass(frozen=True)
class Fit:
    """One fitted model. ``params``/``stderr`` map parameter names to values (None if unknown)."""

    model: str  # "power_law" | "linear"
    params: dict[str, float | None]
    stderr: dict[str, float | None]
    r2: float | None
    n_points: int
    rmse: float | None = None
    pearson_r: float | None = None  # linear fits only
    flag: str | None = None  # why something is missing or unreliable; None when all is well
    correlation: dict[str, float] | None = None  # power law: {"C,gamma": the estimates' correlation}, each pair


    def __getitem__(self, name: str) -> float | None:
        return self.params[name]

    @property
    def ok(self) -> bool:
        return all(v is not None for v in self.params.values())

    def rows(self) -> list[dict]:
        """Tidy rows, one per quantity: {fit, quantity, value, stderr, n_points, flag}."""
        out = [{"quantity": k, "value": v, "stderr": self.stderr.get(k)} for k, v in self.params.items()]
        out.append({"quantity": "r2", "value": self.r2, "stderr": None})
        out += [{"quantity": f"corr({pair.replace(',', ', ')})", "value": v, "stderr": None}
                for pair, v in (self.correlation or {}).items()]
        if self.model == "linear":
            out.append({"quantity": "pearson_r", "value": self.pearson_r, "stderr": None})
        return [{"fit": self.model, **r, "n_points": self.n_points, "flag": self.flag} for r in out]


# ------------------------------------------------------------------------------- power law
POWER_PARAMS = ("C0", "C", "gamma")


def power_law(l, c0: float, c: float, gamma: float) -> np.ndarray:  # noqa: E741 - l: the paper's context length
    """C0 + C / l^gamma for l [n] (> 0)."""
    return c0 + c * np.asarray(l, dtype=np.float64) ** -gamma


def fit_power_law(l, ce, *, gamma_range: tuple[float, float] = (1e-4, 20.0)) -> Fit:  # noqa: E741 - as above
    """Fit ce [n] = C0 + C / l^gamma over l [n] > 0, with gamma searched in ``gamma_range``.

    For each gamma the best (C0, C) is linear least squares, so the fit is a 1-D search over
    gamma (log grid, then golden section) polished by Gauss-Newton on all three parameters.
    """
    x, y = _xy(l, ce, "lengths", "values")
    if (x <= 0).any():
        raise CtxlensError("Power-law fits need positive lengths; drop lengths <= 0.")
    none: dict[str, float | None] = dict.fromkeys(POWER_PARAMS)
    n = x.size
    if np.unique(x).size < 3:
        return Fit("power_law", none, dict(none), None, n,
                   flag=f"needs at least 3 distinct lengths (got {np.unique(x).size}); measure more lengths")
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if ss_tot == 0.0:
        return Fit("power_law", {"C0": float(y[0]), "C": 0.0, "gamma": None}, dict(none), None, n, rmse=0.0,
                   flag="the values are constant, so gamma is undetermined")
    lo, hi = (math.log(g) for g in gamma_range)

    def profile(u: float) -> float:
        return _linear_given_gamma(x, y, math.exp(u))[1]

    grid = np.linspace(lo, hi, 401)
    i = int(np.argmin(_profile_grid(x, y, np.exp(grid))))
    u = _golden(profile, grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)])
    (c0, c), _ = _linear_given_gamma(x, y, math.exp(u))
    theta = _gauss_newton(x, y, np.array([c0, c, math.exp(u)]))
    resid = y - power_law(x, *theta)
    ss = float(resid @ resid)
    params: dict[str, float | None] = dict(zip(POWER_PARAMS, (float(v) for v in theta)))
    flags = []
    if not lo + 1e-6 < math.log(theta[2]) < hi - 1e-6:
        flags.append(f"gamma reached the end of its search range {gamma_range}")
    cov, why = _covariance(_power_jacobian(x, theta), ss, n)
    if why:
        flags.append(why)
    return Fit("power_law", params, _errors(cov, POWER_PARAMS, none), 1.0 - ss / ss_tot, n, rmse=math.sqrt(ss / n),
               flag="; ".join(flags) or None, correlation=_correlations(cov, POWER_PARAMS))


def _linear_given_gamma(x, y, gamma: float) -> tuple[tuple[float, float], float]:
    """Best (C0, C) for fixed gamma and its residual sum of squares."""
    a = np.stack([np.ones_like(x), x**-gamma], 1)  # [n, 2]
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    r = y - a @ coef
    return (float(coef[0]), float(coef[1])), float(r @ r)


def _profile_grid(x, y, gammas: np.ndarray) -> np.ndarray:
    """Residual sum of squares of the best (C0, C) for each gamma [G] at once: [G]."""
    p = x[None, :] ** -gammas[:, None]  # [G, n]
    p = p - p.mean(1, keepdims=True)
    yc = y - y.mean()
    spp = (p * p).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ss = (yc @ yc) - (p @ yc) ** 2 / spp
    return np.where(spp > 0, ss, yc @ yc)


def _golden(f, a: float, b: float, iters: int = 200) -> float:
    """Minimiser of a unimodal f on [a, b] by golden-section search."""
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if abs(b - a) <= 1e-15 * (1 + abs(a)):
            break
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def _power_jacobian(x, theta) -> np.ndarray:
    """d model / d (C0, C, gamma): [n, 3]."""
    _, c, gamma = theta
    p = x**-gamma
    return np.stack([np.ones_like(x), p, -c * p * np.log(x)], 1)


def _gauss_newton(x, y, theta: np.ndarray, iters: int = 50) -> np.ndarray:
    """Polish (C0, C, gamma) by Gauss-Newton steps, keeping only steps that lower the residual."""
    ss = float(((y - power_law(x, *theta)) ** 2).sum())
    for _ in range(iters):
        step, *_ = np.linalg.lstsq(_power_jacobian(x, theta), y - power_law(x, *theta), rcond=None)
        new = theta + step
        if not new[2] > 0:
            break
        new_ss = float(((y - power_law(x, *new)) ** 2).sum())
        if not new_ss < ss:
            break
        theta, ss = new, new_ss
    return theta


# ------------------------------------------------------------------------------- straight line
def fit_linear(x, y) -> Fit:
    """Ordinary least squares y [n] = slope * x [n] + intercept, with R² and Pearson r."""
    x, y = _xy(x, y, "x", "y")
    n = x.size
    none: dict[str, float | None] = {"slope": None, "intercept": None}
    if np.unique(x).size < 2:
        return Fit("linear", none, dict(none), None, n,
                   flag=f"needs at least 2 distinct x values (got {np.unique(x).size}); measure more points")
    xm, ym = x.mean(), y.mean()
    sxx, syy, sxy = float(((x - xm) ** 2).sum()), float(((y - ym) ** 2).sum()), float(((x - xm) * (y - ym)).sum())
    slope = sxy / sxx
    intercept = float(ym - slope * xm)
    resid = y - (slope * x + intercept)
    ss = float(resid @ resid)
    flags = []
    if syy == 0.0:
        r2 = r = None
        flags.append("y is constant, so R² and r are undefined")
    else:
        r2, r = 1.0 - ss / syy, sxy / math.sqrt(sxx * syy)
    jac = np.stack([x, np.ones_like(x)], 1)  # [n, 2]
    cov, why = _covariance(jac, ss, n)
    if why:
        flags.append(why)
    return Fit("linear", {"slope": slope, "intercept": intercept}, _errors(cov, ("slope", "intercept"), none),
               r2, n, rmse=math.sqrt(ss / n), pearson_r=r, flag="; ".join(flags) or None)


# ------------------------------------------------------------------------------- shared
def _covariance(jac: np.ndarray, ss: float, n: int) -> tuple[np.ndarray | None, str | None]:
    """The estimates' covariance s² (JᵀJ)⁻¹ [p, p] from the Jacobian ``jac`` [n, p], or (None, reason)."""
    p = jac.shape[1]
    if n <= p:
        return None, f"{n} points for {p} parameters leave no residual degrees of freedom, so no uncertainties"
    jtj = jac.T @ jac
    scale = np.sqrt(np.diag(jtj))
    if not (scale > 0).all():
        return None, "a parameter does not affect the fit, so its uncertainty is undefined"
    corr = jtj / np.outer(scale, scale)
    if np.linalg.cond(corr) > 1e12:
        return None, "the parameters are not separately identifiable from these points, so no uncertainties"
    return np.linalg.inv(corr) / np.outer(scale, scale) * (ss / (n - p)), None


def _errors(cov: np.ndarray | None, names: tuple[str, ...], none: dict) -> dict[str, float | None]:
    """1-sigma standard errors, the square roots of ``cov``'s [p, p] diagonal, by parameter name."""
    if cov is None:
        return dict(none)
    return {k: float(math.sqrt(max(v, 0.0))) for k, v in zip(names, np.diag(cov))}


def _correlations(cov: np.ndarray | None, names: tuple[str, ...]) -> dict[str, float] | None:
    """{"a,b": corr(a, b)} for every pair of parameters (a before b in ``names``), from ``cov`` [p, p]."""
    if cov is None:
        return None
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))  # [p]
    return {f"{names[i]},{names[j]}": float(cov[i, j] / (sd[i] * sd[j])) if sd[i] > 0 and sd[j] > 0 else 0.0
            for i in range(len(names)) for j in range(i + 1, len(names))}


def _xy(a, b, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size != y.size:
        raise CtxlensError(f"Fit inputs differ in length ({x.size} {name_a}, {y.size} {name_b}); "
                           "pass one value per point.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise CtxlensError("Fit inputs contain NaN or inf; drop those points before fitting.")
    return x, y
