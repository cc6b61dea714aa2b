"""PCA eigen-spectrum of features, intrinsic entropy, intrinsic dimension and Gaussian-KDE entropy.

The intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs"):

- Section 2.2.2, Figures 1 and 3: eigenvalues of the covariance of last-token features over many
  samples, each divided by the largest ("relative eigenvalues"); the intrinsic entropy of the
  first ``n`` directions is ``S_n = sum_{i <= n} log rel_eig_i`` (a log-volume, up to a constant).
- Appendix J.2, Figure 15: the intrinsic dimension at a threshold is the largest index whose
  relative eigenvalue is at least the threshold (the paper uses 0.002 to 0.25).
- Appendix C.2, Figure 10: differential entropy from a Gaussian kernel density estimate. Here the
  features are first projected onto their leading principal components (never failing on d > n
  or a singular covariance) and the number kept is reported.

Covariances accumulate in float64, batch by batch (``CovarianceAccumulator``), so 10K+ samples
of d = 4096 never need to sit in memory at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any, Union, overload

import torch

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    import numpy as np


# ------------------------------------------------------------------------------- accumulation
class CovarianceAccumulator:
    """Streaming float64 mean and covariance of feature rows, merged batch by batch.

    ``update(x)`` with x [n, d] in any float dtype; batches merge with the pairwise formula of
    Chan, Golub and LeVeque (exact up to float64 rounding, stable for large means).
    """

    def __init__(self) -> None:
        self.n = 0
        self.mean: torch.Tensor | None = None  # [d] float64
        self.m2: torch.Tensor | None = None  # [d, d] float64, sum of centred outer products

    def update(self, x: torch.Tensor) -> CovarianceAccumulator:
        """Add rows x [n, d]; returns self."""
        x = _matrix(x, "features").double()  # [n, d]
        if self.mean is not None and x.shape[1] != self.mean.numel():
            raise CtxlensError(
                f"Feature batch has {x.shape[1]} columns but earlier batches had {self.mean.numel()}; "
                "accumulate features of one layer at a time."
            )
        nb = x.shape[0]
        mean_b = x.mean(0)  # [d]
        xc = x - mean_b
        m2_b = xc.T @ xc  # [d, d]
        if self.mean is None or self.m2 is None:
            self.n, self.mean, self.m2 = nb, mean_b, m2_b
            return self
        n = self.n + nb
        delta = mean_b.to(self.mean.device) - self.mean  # [d]
        self.mean = self.mean + delta * (nb / n)
        self.m2 = self.m2 + m2_b.to(self.m2.device) + torch.outer(delta, delta) * (self.n * nb / n)
        self.n = n
        return self

    def covariance(self, ddof: int = 1) -> torch.Tensor:
        """[d, d] float64 covariance of everything seen (``ddof=1``: the unbiased estimate)."""
        if self.m2 is None or self.n - ddof < 1:
            raise CtxlensError(f"A covariance needs more than {ddof} samples (got {self.n}); add more samples.")
        return self.m2 / (self.n - ddof)


# ------------------------------------------------------------------------------- spectrum
@dataclass(frozen=True)
class Spectrum:
    """Covariance eigenvalues [d] float64, descending, clamped at 0, and the sample count."""

    eigenvalues: torch.Tensor
    n_samples: int

    @property
    def dim(self) -> int:
        return int(self.eigenvalues.numel())

    @property
    def rank(self) -> int:
        """Number of eigenvalues above float64 rounding of the largest (d * eps * max)."""
        top = float(self.eigenvalues[0])
        tol = self.dim * torch.finfo(torch.float64).eps * top
        return int((self.eigenvalues > tol).sum()) if top > 0 else 0

    @property
    def relative(self) -> torch.Tensor:
        """[d] eigenvalues divided by the largest (the paper's relative eigenvalues)."""
        top = float(self.eigenvalues[0])
        if not top > 0:
            raise CtxlensError(
                "The features do not vary across samples (all eigenvalues are zero), so relative "
                "eigenvalues are undefined; use samples that differ."
            )
        return self.eigenvalues / top



Features = Union[torch.Tensor, CovarianceAccumulator, Spectrum, "np.ndarray"]
"""What the spectral measures take: features as rows [n, d] (a tensor or an array), a
``CovarianceAccumulator`` of them, or their ``Spectrum``."""


def eigen_spectrum(x: Features) -> Spectrum:
    """Eigen-spectrum of features: x is rows [n, d], a ``CovarianceAccumulator`` or a ``Spectrum``.

    Rows with n < d use the n x n Gram matrix (same non-zero eigenvalues, zeros appended).
    """
    if isinstance(x, Spectrum):
        return x
    if isinstance(x, CovarianceAccumulator):
        eig = torch.linalg.eigvalsh(x.covariance())  # [d] ascending
        return Spectrum(eig.flip(0).clamp_min(0.0).cpu(), x.n)
    x = _matrix(x, "features").double()  # [n, d]
    n, d = x.shape
    if n < 2:
        raise CtxlensError(f"An eigen-spectrum needs at least 2 samples (got {n}); add more samples.")
    xc = x - x.mean(0)
    if n < d:
        eig = torch.linalg.eigvalsh(xc @ xc.T / (n - 1))  # [n]
        eig = torch.cat([eig, eig.new_zeros(d - n)])
    else:
        eig = torch.linalg.eigvalsh(xc.T @ xc / (n - 1))  # [d]
    return Spectrum(eig.sort(descending=True).values.clamp_min(0.0).cpu(), n)


# ------------------------------------------------------------------------------- entropy, dimension
def _listed(value: Any, scalar: type) -> list[Any]:
    """[value] for one ``scalar`` (a number type), else the values as a list."""
    return [value] if isinstance(value, scalar) else list(value)


@overload
def intrinsic_entropy(x: Features, n: int) -> float: ...
@overload
def intrinsic_entropy(x: Features, n: Sequence[int]) -> list[float]: ...
def intrinsic_entropy(x: Features, n: int | Sequence[int]) -> float | list[float]:
    """Sum of log relative eigenvalues over the first ``n`` (Section 2.2.2), for one n or many.

    ``x`` is anything ``eigen_spectrum`` takes. Asking for more directions than the features
    span (their numerical rank) is an error: those logs are -inf.
    """
    spec = eigen_spectrum(x)
    ns = _listed(n, Integral)
    logs = torch.log(spec.relative.clamp_min(torch.finfo(torch.float64).tiny))  # [d]
    out = []
    for k in ns:
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= int(k) <= spec.dim:
            raise CtxlensError(f"Intrinsic entropy needs n in 1..{spec.dim} (got {k!r}); pass a count of eigenvalues.")
        if int(k) > spec.rank:
            raise CtxlensError(
                f"Intrinsic entropy over {k} eigenvalues is -inf: the features span only {spec.rank} directions "
                f"({spec.n_samples} samples, dimension {spec.dim}); use n <= {spec.rank} or more samples."
            )
        out.append(float(logs[: int(k)].sum()))
    return out[0] if isinstance(n, Integral) else out


@overload
def intrinsic_dimension(x: Features, threshold: float) -> int: ...
@overload
def intrinsic_dimension(x: Features, threshold: Sequence[float]) -> list[int]: ...
def intrinsic_dimension(x: Features, threshold: float | Sequence[float]) -> int | list[int]:
    """Largest index (1-based) whose relative eigenvalue is >= threshold (Appendix J.2); one
    threshold or many. It is always >= 1, since the largest relative eigenvalue is 1."""
    spec = eigen_spectrum(x)
    ts = _listed(threshold, Real)
    rel = spec.relative  # [d], descending
    out = []
    for t in ts:
        if isinstance(t, bool) or not isinstance(t, Real) or not 0 < float(t) <= 1:
            raise CtxlensError(f"Intrinsic-dimension thresholds must lie in (0, 1] (got {t!r}); e.g. 0.05.")
        out.append(int((rel >= float(t)).sum()))
    return out[0] if isinstance(threshold, Real) else out


# ------------------------------------------------------------------------------- KDE entropy
@dataclass(frozen=True)
class KDEEntropy:
    """A Gaussian-KDE entropy estimate (nats) and how it was made."""

    entropy: float
    n_components: int  # principal components kept
    bandwidth: float  # kernel std as a multiple of each component's std (scipy's "factor")
    n_samples: int
    dim: int  # feature dimension before projection


def kde_entropy(
    x: torch.Tensor,
    *,
    n_components: int | None = None,
    min_relative: float = 1e-8,
    bandwidth: float | str = "scott",
    leave_one_out: bool = False,
    chunk: int = 1024,
) -> KDEEntropy:
    """Differential entropy -mean_i log p(x_i) of rows x [n, d] under a Gaussian KDE (Appendix C.2).

    The rows are projected onto their leading principal components: ``n_components`` of them, or
    by default every component whose relative eigenvalue is >= ``min_relative`` (at most n - 1).
    The kernel covariance is ``bandwidth**2`` times the sample covariance in that subspace, as in
    ``scipy.stats.gaussian_kde``; ``bandwidth`` is a number or "scott" (n^(-1/(k+4))) or
    "silverman" ((n (k+2) / 4)^(-1/(k+4))). The default scores each sample under the full
    estimate, itself included (the usual resubstitution estimate); ``leave_one_out`` drops it.
    """
    x = _matrix(x, "features").double()  # [n, d]
    n, d = x.shape
    if n < 3:
        raise CtxlensError(f"A KDE entropy needs at least 3 samples (got {n}); add more samples.")
    eig, scores = _principal_scores(x)  # [r] descending, [n, r]
    if not eig.numel() or not float(eig[0]) > 0:
        raise CtxlensError("The features do not vary across samples, so their KDE entropy is -inf; "
                           "use samples that differ.")
    rank = int((eig > eig[0] * max(n, d) * torch.finfo(torch.float64).eps).sum())
    if n_components is None:
        k = min(rank, int((eig / eig[0] >= min_relative).sum()))
    elif isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1:
        raise CtxlensError(f"n_components must be a positive integer (got {n_components!r}).")
    elif n_components > rank:
        raise CtxlensError(
            f"Asked for {n_components} principal components but the features span only {rank} directions "
            f"({n} samples, dimension {d}); ask for at most {rank}."
        )
    else:
        k = n_components
    eig, z = eig[:k], scores[:, :k] / eig[:k].sqrt()  # z: [n, k] whitened
    f = _bandwidth(bandwidth, n, k)
    m = n - 1 if leave_one_out else n
    sq = (z * z).sum(1)  # [n]
    logp = torch.empty(n, dtype=torch.float64)
    for s in range(0, n, chunk):
        d2 = (sq[s : s + chunk, None] + sq[None, :] - 2 * z[s : s + chunk] @ z.T).clamp_min(0.0)  # [c, n]
        if leave_one_out:
            rows = torch.arange(d2.shape[0], device=d2.device)
            d2[rows, rows + s] = math.inf
        logp[s : s + chunk] = torch.logsumexp(-0.5 * d2 / f**2, dim=1).cpu()
    log_norm = math.log(m) + 0.5 * k * math.log(2 * math.pi * f**2) + 0.5 * float(eig.log().sum())
    return KDEEntropy(float(-(logp - log_norm).mean()), k, f, n, d)


def _principal_scores(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [n, d] float64 -> (covariance eigenvalues [r] descending, scores [n, r]), r = min(n, d)."""
    n, d = x.shape
    xc = x - x.mean(0)
    if n <= d:
        eig, u = torch.linalg.eigh(xc @ xc.T)  # Gram [n, n]; scores = u * sqrt(eig)
        eig, u = eig.flip(0).clamp_min(0.0), u.flip(1)
        return eig / (n - 1), u * eig.sqrt()
    eig, v = torch.linalg.eigh(xc.T @ xc / (n - 1))  # [d], [d, d]
    return eig.flip(0).clamp_min(0.0), xc @ v.flip(1)


def _bandwidth(bandwidth: float | str, n: int, k: int) -> float:
    if bandwidth == "scott":
        return n ** (-1.0 / (k + 4))
    if bandwidth == "silverman":
        return (n * (k + 2) / 4.0) ** (-1.0 / (k + 4))
    if isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool) and bandwidth > 0:
        return float(bandwidth)
    raise CtxlensError(f"KDE bandwidth must be 'scott', 'silverman' or a positive number (got {bandwidth!r}).")


def _matrix(x: Any, what: str) -> torch.Tensor:
    x = torch.as_tensor(x)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise CtxlensError(f"{what.capitalize()} must be a non-empty [samples, dim] matrix "
                           f"(got shape {list(x.shape)}).")
    if not x.is_floating_point():
        x = x.double()
    if not bool(torch.isfinite(x).all()):
        raise CtxlensError(f"{what.capitalize()} contain NaN or inf; check the model's dtype or the inputs.")
    return x


# ------------------------------------------------------------------------------- bootstrap over windows
NORMS = ("max", "trace")  # relative eigenvalues: divided by the largest (the paper's), or by their sum


def entropy_of(eigenvalues: torch.Tensor, n: int, norm: str = "max") -> torch.Tensor:
    """S_n = sum_{i <= n} log(lambda_i / scale) of descending eigenvalues [..., d], with scale the
    largest (``norm="max"``, the intrinsic-entropy paper's relative eigenvalues, Section 2.2.2) or
    their sum (``"trace"``): [...]."""
    scale = eigenvalues[..., :1] if norm == "max" else eigenvalues.sum(-1, keepdim=True)  # [..., 1]
    rel = (eigenvalues[..., :n] / scale).clamp_min(torch.finfo(torch.float64).tiny)  # [..., n]
    return torch.log(rel).sum(-1)


def bootstrap_spectra(features: list[torch.Tensor], n_boot: int, seed: int = 0, chunk: int = 8
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Window-bootstrap eigen-spectra: features per length, each [n, d] with row i the same window
    at every length; one resample of windows (with replacement) per replicate, shared by every
    length (the lengths stay paired). Returns (indices [n_boot, n], eigenvalues [n_boot,
    n_lengths, d] float64 descending, clamped at 0). ``chunk`` replicates are formed at a time."""
    n = features[0].shape[0]
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, n, (n_boot, n), generator=gen)  # [B, n]
    out = torch.empty(n_boot, len(features), features[0].shape[1], dtype=torch.float64)
    for j, f in enumerate(features):
        f = f.double().cpu()  # [n, d]
        for b0 in range(0, n_boot, chunk):
            x = f[idx[b0:b0 + chunk]]  # [c, n, d]
            x = x - x.mean(1, keepdim=True)
            cov = x.transpose(1, 2) @ x / (n - 1)  # [c, d, d]
            out[b0:b0 + chunk, j] = torch.linalg.eigvalsh(cov).flip(-1).clamp_min(0.0)
    return idx, out


def permuted_spectra(features: list[torch.Tensor], n_perm: int, seed: int = 0, chunk: int = 8
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Length-permutation spectra: features per length, each [n, d] with row i the same window at
    every length; each permutation shuffles, within every window independently, which length its
    features are filed under, then takes each length's spectrum. Under the null that a window's
    features are exchangeable across lengths (context length changes nothing), the observed
    statistic is one draw of this distribution: a randomization test. Returns (perm [n_perm, n,
    n_lengths], the source length of window i filed under length j; eigenvalues [n_perm,
    n_lengths, d] float64 descending, clamped at 0)."""
    stack = torch.stack([f.double().cpu() for f in features], 1)  # [n, L, d]
    n, n_len, d = stack.shape
    gen = torch.Generator().manual_seed(seed)
    perm = torch.rand(n_perm, n, n_len, generator=gen).argsort(-1)  # [P, n, L]
    out = torch.empty(n_perm, n_len, d, dtype=torch.float64)
    rows = torch.arange(n)[None, :]  # [1, n]
    for p0 in range(0, n_perm, chunk):
        for j in range(n_len):
            x = stack[rows, perm[p0:p0 + chunk, :, j]]  # [c, n, d]
            x = x - x.mean(1, keepdim=True)
            out[p0:p0 + chunk, j] = torch.linalg.eigvalsh(x.transpose(1, 2) @ x / (n - 1)).flip(-1).clamp_min(0.0)
    return perm, out
