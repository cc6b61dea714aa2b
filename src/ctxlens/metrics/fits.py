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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

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


def power_law(l: ArrayLike, c0: float, c: float, gamma: float) -> np.ndarray:  # noqa: E741 - l: the paper's context length
    """C0 + C / l^gamma for l [n] (> 0)."""
    return c0 + c * np.asarray(l, dtype=np.float64) ** -gamma


def fit_power_law(l: ArrayLike, ce: ArrayLike, *,  # noqa: E741 - as above
                  gamma_range: tuple[float, float] = (1e-4, 20.0), sigma: ArrayLike | None = None,
                  c0_min: float | None = None) -> Fit:
    """Fit ce [n] = C0 + C / l^gamma over l [n] > 0, with gamma searched in ``gamma_range``.

    For each gamma the best (C0, C) is (weighted) linear least squares, so the fit is a 1-D search
    over gamma (log grid, then golden section) polished by Gauss-Newton on all three parameters.
    ``sigma`` [n]: each point's standard error (weights 1 / sigma^2; the covariance then scales
    by the weighted residual variance, as ``curve_fit`` without ``absolute_sigma``). ``c0_min``:
    a lower bound on C0 (0 for a cross-entropy, whose floor cannot be negative); when the best C0
    for a gamma lies below it, C0 sits at the bound and only C is fitted, and a fit whose C0
    ends at the bound says so in its flag ("C0 at its bound": C0 is not identified by the points).
    """
    x, y = _xy(l, ce, "lengths", "values")
    if (x <= 0).any():
        raise CtxlensError("Power-law fits need positive lengths; drop lengths <= 0.")
    w = _weights(sigma, x.size)
    none: dict[str, float | None] = dict.fromkeys(POWER_PARAMS)
    n = x.size
    if np.unique(x).size < 3:
        return Fit("power_law", none, dict(none), None, n,
                   flag=f"needs at least 3 distinct lengths (got {np.unique(x).size}); measure more lengths")
    ybar = float((w * y).sum() / w.sum())
    ss_tot = float((w * (y - ybar) ** 2).sum())
    if ss_tot == 0.0:
        return Fit("power_law", {"C0": float(y[0]), "C": 0.0, "gamma": None}, dict(none), None, n, rmse=0.0,
                   flag="the values are constant, so gamma is undetermined")
    lo, hi = (math.log(g) for g in gamma_range)

    def profile(u: float) -> float:
        return _linear_given_gamma(x, y, math.exp(u), w, c0_min)[1]

    grid = np.linspace(lo, hi, 401)
    i = int(np.argmin(_profile(x, y, np.exp(grid), w, c0_min)[2]))
    u = _golden(profile, grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)])
    (c0, c), _ = _linear_given_gamma(x, y, math.exp(u), w, c0_min)
    at_bound = c0_min is not None and c0 <= c0_min
    theta = np.array([c0, c, math.exp(u)])
    if not at_bound:
        polished = _gauss_newton(x, y, theta, w)
        theta = polished if c0_min is None or polished[0] >= c0_min else theta
    resid = y - power_law(x, *theta)
    ss = float((w * resid * resid).sum())
    params: dict[str, float | None] = dict(zip(POWER_PARAMS, (float(v) for v in theta)))
    flags = []
    if not lo + 1e-6 < math.log(theta[2]) < hi - 1e-6:
        flags.append(f"gamma reached the end of its search range {gamma_range}")
    if at_bound:
        flags.append(f"C0 at its bound {c0_min:g}: the unconstrained optimum lies below it, so C0 is not identified")
    sw = np.sqrt(w)[:, None]
    jac = _power_jacobian(x, theta) * sw  # [n, 3], weighted
    cov, why = (_covariance(jac[:, 1:], ss, n) if at_bound else _covariance(jac, ss, n))
    if at_bound and cov is not None:  # C0 fixed at the bound: no variance of its own
        full = np.zeros((3, 3))
        full[1:, 1:] = cov
        cov = full
    if why:
        flags.append(why)
    return Fit("power_law", params, _errors(cov, POWER_PARAMS, none), 1.0 - ss / ss_tot, n,
               rmse=math.sqrt(float((resid * resid).mean())), flag="; ".join(flags) or None,
               correlation=_correlations(cov, POWER_PARAMS))


def _weights(sigma: ArrayLike | None, n: int) -> np.ndarray:
    """[n] weights 1 / sigma^2 normalised to mean 1 (all ones without ``sigma``)."""
    if sigma is None:
        return np.ones(n)
    s = np.asarray(sigma, dtype=np.float64).ravel()
    if s.size != n or not (np.isfinite(s).all() and (s > 0).all()):
        raise CtxlensError("Fit weights need one positive, finite standard error per point.")
    w = 1.0 / s**2
    return w / w.mean()


def _linear_given_gamma(x: np.ndarray, y: np.ndarray, gamma: float, w: np.ndarray | None = None,
                        c0_min: float | None = None) -> tuple[tuple[float, float], float]:
    """Best (C0, C) for fixed gamma (weighted by ``w`` [n], C0 >= ``c0_min`` when given) and its
    weighted residual sum of squares."""
    c0, c, ss = _profile(x, y, np.array([gamma]), np.ones_like(x) if w is None else w, c0_min)
    return (float(c0[0]), float(c[0])), float(ss[0])


def _profile(x: np.ndarray, y: np.ndarray, gammas: np.ndarray, w: np.ndarray, c0_min: float | None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each gamma [G]: the weighted least-squares (C0, C) of y [n] = C0 + C x^-gamma (C0 held at
    ``c0_min`` where its best value lies below it) and the weighted residual sum of squares: 3 x [G]."""
    p = x[None, :] ** -gammas[:, None]  # [G, n]
    sw = w.sum()
    pm = (p * w).sum(1) / sw  # [G] weighted mean of x^-gamma
    ym = float((w * y).sum() / sw)
    pc, yc = p - pm[:, None], y - ym  # [G, n], [n]
    spp = (w * pc * pc).sum(1)  # [G]
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(spp > 0, (pc * (w * yc)).sum(1) / spp, 0.0)
    c0 = ym - c * pm
    if c0_min is not None:
        low = c0 < c0_min
        with np.errstate(divide="ignore", invalid="ignore"):
            c_bound = (p * (w * (y - c0_min))).sum(1) / (w * p * p).sum(1)
        c, c0 = np.where(low, c_bound, c), np.where(low, c0_min, c0)
    r = y[None, :] - c0[:, None] - c[:, None] * p  # [G, n]
    return c0, c, (w * r * r).sum(1)


def _golden(f: Callable[[float], float], a: float, b: float, iters: int = 200) -> float:
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


def _power_jacobian(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """d model / d (C0, C, gamma): [n, 3]."""
    _, c, gamma = theta
    p = x**-gamma
    return np.stack([np.ones_like(x), p, -c * p * np.log(x)], 1)


def _gauss_newton(x: np.ndarray, y: np.ndarray, theta: np.ndarray, w: np.ndarray | None = None,
                  iters: int = 50) -> np.ndarray:
    """Polish (C0, C, gamma) by (weighted) Gauss-Newton steps, keeping only steps that lower the residual."""
    sw = np.ones_like(x) if w is None else np.sqrt(w)
    ss = float(((sw * (y - power_law(x, *theta))) ** 2).sum())
    for _ in range(iters):
        step, *_ = np.linalg.lstsq(_power_jacobian(x, theta) * sw[:, None], sw * (y - power_law(x, *theta)),
                                   rcond=None)
        new = theta + step
        if not new[2] > 0:
            break
        new_ss = float(((sw * (y - power_law(x, *new))) ** 2).sum())
        if not new_ss < ss:
            break
        theta, ss = new, new_ss
    return theta


def fit_documents(lengths: ArrayLike, ce: ArrayLike, *, c0_min: float | None = 0.0, n_boot: int = 400, seed: int = 0
                  ) -> tuple[Fit, dict[str, tuple[float, float] | None], float]:
    """The power law fitted to per-document losses ce [n_docs, n_lengths] (the same document
    windows at every length): the mean per length weighted by its standard error over documents,
    C0 >= ``c0_min``; and a bootstrap over documents (whole rows resampled, then refitted):
    ({parameter: 95% percentile interval or None}, the fraction of refits with C0 at its bound)."""
    x = np.asarray(lengths, dtype=np.float64)
    y = np.asarray(ce, dtype=np.float64)  # [n_docs, n_lengths]
    fit = fit_power_law(x, y.mean(0), sigma=_sem(y), c0_min=c0_min)
    if y.shape[0] < 2 or not fit.ok:
        return fit, dict.fromkeys(POWER_PARAMS), math.nan
    rng = np.random.default_rng(seed)
    draws, bound = [], 0
    for _ in range(n_boot):
        pick = y[rng.integers(0, y.shape[0], y.shape[0])]  # [n_docs, n_lengths]
        f = fit_power_law(x, pick.mean(0), sigma=_sem(pick), c0_min=c0_min)
        if f.ok:
            draws.append([f.params[k] for k in POWER_PARAMS])
            bound += bool(f.flag and "C0 at its bound" in f.flag)
    if not draws:
        return fit, dict.fromkeys(POWER_PARAMS), math.nan
    d = np.asarray(draws)  # [B, 3]
    ci: dict[str, tuple[float, float] | None] = {
        k: (float(np.quantile(d[:, i], 0.025)), float(np.quantile(d[:, i], 0.975))) for i, k in enumerate(POWER_PARAMS)}
    return fit, ci, bound / len(draws)


def _sem(y: np.ndarray) -> np.ndarray:
    """[n_lengths] standard error of the mean over documents of y [n_docs, n_lengths]; a floor of
    1e-6 of the mean keeps identical documents (zero spread) from giving infinite weights."""
    if y.shape[0] < 2:
        return np.ones(y.shape[1])
    se = y.std(0, ddof=1) / math.sqrt(y.shape[0])
    return np.maximum(se, 1e-6 * np.maximum(np.abs(y.mean(0)), 1e-12))


# ------------------------------------------------------------------------------- straight line
def fit_linear(x: ArrayLike, y: ArrayLike) -> Fit:
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


def _xy(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.size != y.size:
        raise CtxlensError(f"Fit inputs differ in length ({x.size} {name_a}, {y.size} {name_b}); "
                           "pass one value per point.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise CtxlensError("Fit inputs contain NaN or inf; drop those points before fitting.")
    return x, y
