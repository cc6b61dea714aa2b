"""Representation geometry: self-similarity, anisotropy, ACCS, and the Appendix A alternatives.

The geometry paper ("How much do contextualized representations encode long-range context?"):

- Section 2, *Perturbation & self-similarity*: the mean cosine between each suffix
  representation h_i and its counterpart h'_i computed under a perturbed prefix.
- Section 2, *Calibration with anisotropy*: the expected cosine between two representations
  drawn from D_hh', the pool that holds the representations under both the original and the
  perturbed prefix; ACCS = self-similarity - anisotropy.
- Appendix A (Figure 6): the mean pairwise dot product and the condition number of the sample
  covariance, two geometry measures that also see magnitudes.

The paper estimates anisotropy from 500M sampled pairs. Here it is exact over *all* ordered
pairs i != j of the pool, in O(n d): with unit vectors u_i,

    sum_{i != j} u_i . u_j = |sum_i u_i|^2 - sum_i |u_i|^2 = |sum_i u_i|^2 - n,

so the mean is (|sum u|^2 - n) / (n (n - 1)). The mean dot product uses the same identity on the
raw vectors. Everything is accumulated in float64.

The streaming accumulators keep only O(d) numbers (O(d^2) when the covariance is asked for):
sums of unit vectors, of raw vectors and of squared norms, never the vectors themselves, so
100K pairs cost the memory of one batch. Zero vectors and non-finite values raise
``CtxlensError`` instead of turning the result into NaN.
"""

from __future__ import annotations

import math

import torch

from ctxlens.core.errors import CtxlensError

__all__ = [
    "self_similarity",
    "anisotropy",
    "pooled_anisotropy",
    "accs",
    "mean_dot",
    "covariance_condition_number",
    "AnisotropyAccumulator",
    "AccsAccumulator",
]


# --------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------


def _matrix(x: torch.Tensor, name: str) -> torch.Tensor:
    """x [n, d] -> float64 [n, d], after checking its shape and that every value is finite."""
    x = torch.as_tensor(x)
    if x.ndim != 2 or x.shape[1] == 0:
        raise CtxlensError(
            f"{name} must be a [n, d] matrix of row vectors, got shape {tuple(x.shape)}; "
            "flatten the batch and position axes into rows first."
        )
    x = x.detach().to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        raise CtxlensError(
            f"{name} holds non-finite values (NaN or inf); check the model's dtype and input "
            "length (float16 overflow, lengths beyond what it can take) before measuring geometry."
        )
    return x


def _unit(x: torch.Tensor, name: str) -> torch.Tensor:
    """float64 rows [n, d] -> unit rows [n, d]; a zero row has no direction and is an error."""
    norms = x.norm(dim=1, keepdim=True)  # [n, 1]
    zero = int((norms == 0).sum())
    if zero:
        raise CtxlensError(
            f"{name} has {zero} zero vector(s), whose cosine is undefined; drop them or measure "
            "a stream where representations are non-zero."
        )
    return x / norms


def _pair(h: torch.Tensor, hp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h, hp = _matrix(h, "H"), _matrix(hp, "H_perturbed")
    if h.shape != hp.shape:
        raise CtxlensError(
            f"H {tuple(h.shape)} and H_perturbed {tuple(hp.shape)} must have the same shape, row i "
            "of one being the counterpart of row i of the other; pass matching rows."
        )
    return h, hp


def _enough(n: int, what: str) -> None:
    if n < 2:
        raise CtxlensError(f"{what} needs at least 2 vectors, got {n}; measure more positions or sequences.")


# --------------------------------------------------------------------------------------
# Pure functions
# --------------------------------------------------------------------------------------


def self_similarity(h: torch.Tensor, h_perturbed: torch.Tensor) -> float:
    """Mean cosine between row i of ``h`` [n, d] and row i of ``h_perturbed`` [n, d]."""
    h, hp = _pair(h, h_perturbed)
    if h.shape[0] == 0:
        raise CtxlensError("self_similarity needs at least one pair of vectors; measure some positions.")
    return float((_unit(h, "H") * _unit(hp, "H_perturbed")).sum(1).mean())


def anisotropy(x: torch.Tensor) -> float:
    """Exact mean cosine over all pairs i != j of the rows of ``x`` [n, d], in O(n d)."""
    x = _matrix(x, "X")
    _enough(x.shape[0], "anisotropy")
    return _mean_offdiagonal(_unit(x, "X").sum(0), float(x.shape[0]), x.shape[0])


def pooled_anisotropy(h: torch.Tensor, h_perturbed: torch.Tensor) -> float:
    """Anisotropy over D_hh': the 2n rows of ``h`` [n, d] and ``h_perturbed`` [n, d] together."""
    h, hp = _pair(h, h_perturbed)
    return anisotropy(torch.cat([h, hp]))


def accs(h: torch.Tensor, h_perturbed: torch.Tensor) -> float:
    """Anisotropy-calibrated cosine similarity: self_similarity - pooled_anisotropy."""
    return self_similarity(h, h_perturbed) - pooled_anisotropy(h, h_perturbed)


def mean_dot(x: torch.Tensor) -> float:
    """Exact mean dot product over all pairs i != j of the rows of ``x`` [n, d], in O(n d)."""
    x = _matrix(x, "X")
    _enough(x.shape[0], "mean_dot")
    return _mean_offdiagonal(x.sum(0), float((x * x).sum()), x.shape[0])


def covariance_condition_number(x: torch.Tensor) -> float:
    """Condition number (largest / smallest eigenvalue) of the sample covariance of ``x`` [n, d].

    ``math.inf`` when the covariance is singular (for instance n <= d).
    """
    x = _matrix(x, "X")
    _enough(x.shape[0], "covariance_condition_number")
    centred = x - x.mean(0)
    return _condition(centred.T @ centred / (x.shape[0] - 1))


def _mean_offdiagonal(total: torch.Tensor, diagonal: float, n: int) -> float:
    """(|total|^2 - diagonal) / (n (n - 1)): the mean of v_i . v_j over i != j, total = sum v."""
    return (float(total @ total) - diagonal) / (n * (n - 1))


def _condition(cov: torch.Tensor) -> float:
    eig = torch.linalg.eigvalsh(cov)  # ascending, float64
    top, low = float(eig[-1]), float(eig[0])
    if top <= 0 or low <= top * cov.shape[0] * torch.finfo(torch.float64).eps:
        return math.inf
    return top / low


# --------------------------------------------------------------------------------------
# Streaming accumulators
# --------------------------------------------------------------------------------------


class _Moments:
    """Sums over a growing pool of vectors: unit vectors, raw vectors, squared norms and
    (optionally) the centred second moment, merged batch by batch (Chan et al.'s update)."""

    def __init__(self, covariance: bool = False) -> None:
        self.n = 0
        self.unit_sum: torch.Tensor | None = None  # [d] float64
        self.sum: torch.Tensor | None = None  # [d] float64
        self.sq_norms = 0.0
        self.covariance = covariance
        self.mean: torch.Tensor | None = None  # [d] float64, only with covariance
        self.m2: torch.Tensor | None = None  # [d, d] float64, only with covariance

    def add(self, x: torch.Tensor, u: torch.Tensor) -> None:
        """x [b, d] float64 checked rows, u [b, d] their unit vectors."""
        if self.unit_sum is None or self.sum is None:
            self.unit_sum, self.sum = u.new_zeros(u.shape[1]), u.new_zeros(u.shape[1])
        elif x.shape[1] != self.sum.shape[0]:
            raise CtxlensError(
                f"A batch of {x.shape[1]}-dim vectors cannot join a pool of {self.sum.shape[0]}-dim ones; "
                "use one accumulator per layer and stream."
            )
        self.unit_sum += u.sum(0)
        self.sum += x.sum(0)
        self.sq_norms += float((x * x).sum())
        if self.covariance:
            self._add_covariance(x)
        self.n += x.shape[0]

    def _add_covariance(self, x: torch.Tensor) -> None:
        b = x.shape[0]
        mean_b = x.mean(0)
        centred = x - mean_b
        m2_b = centred.T @ centred  # [d, d]
        if self.mean is None or self.m2 is None:
            self.mean, self.m2 = mean_b, m2_b
            return
        delta = mean_b - self.mean
        total = self.n + b
        self.m2 = self.m2 + m2_b + torch.outer(delta, delta) * (self.n * b / total)
        self.mean = self.mean + delta * (b / total)

    def anisotropy(self) -> float:
        _enough(self.n, "anisotropy")
        assert self.unit_sum is not None  # set by the first add
        return _mean_offdiagonal(self.unit_sum, float(self.n), self.n)

    def mean_dot(self) -> float:
        _enough(self.n, "mean_dot")
        assert self.sum is not None  # set by the first add
        return _mean_offdiagonal(self.sum, self.sq_norms, self.n)

    def condition_number(self) -> float:
        _enough(self.n, "covariance_condition_number")
        assert self.m2 is not None  # kept when covariance=True, the only caller
        return _condition(self.m2 / (self.n - 1))


class AnisotropyAccumulator:
    """Anisotropy (and mean dot product, optionally covariance condition number) of a pool of
    vectors given batch by batch: ``update(x [b, d])`` then ``result()``."""

    def __init__(self, covariance: bool = False) -> None:
        self._pool = _Moments(covariance)

    @property
    def n(self) -> int:
        return self._pool.n

    def update(self, x: torch.Tensor) -> None:
        x = _matrix(x, "X")
        self._pool.add(x, _unit(x, "X"))

    def result(self) -> dict:
        """{"n", "anisotropy", "mean_dot"[, "condition_number"]} over every vector seen."""
        out = {"n": self.n, "anisotropy": self._pool.anisotropy(), "mean_dot": self._pool.mean_dot()}
        if self._pool.covariance:
            out["condition_number"] = self._pool.condition_number()
        return out


class AccsAccumulator:
    """Self-similarity, anisotropy over D_hh' and ACCS from pairs given batch by batch.

    ``update(h [b, d], h_perturbed [b, d])``: row i of ``h_perturbed`` is the representation of
    the same suffix token as row i of ``h``, under the perturbed prefix. Both rows join the
    anisotropy pool, as in the paper's D_hh'.
    """

    def __init__(self, covariance: bool = False) -> None:
        self._pool = _Moments(covariance)
        self._cos_sum = 0.0
        self.pairs = 0

    def update(self, h: torch.Tensor, h_perturbed: torch.Tensor) -> None:
        h, hp = _pair(h, h_perturbed)
        u, up = _unit(h, "H"), _unit(hp, "H_perturbed")
        self._pool.add(h, u)
        self._pool.add(hp, up)
        self._cos_sum += float((u * up).sum())
        self.pairs += h.shape[0]

    def result(self) -> dict:
        """{"n" (pairs), "self_sim", "anisotropy", "accs", "mean_dot"[, "condition_number"]}."""
        if self.pairs == 0:
            raise CtxlensError("No pairs were measured; give at least one sequence with suffix positions.")
        self_sim = self._cos_sum / self.pairs
        aniso = self._pool.anisotropy()
        out = {"n": self.pairs, "self_sim": self_sim, "anisotropy": aniso, "accs": self_sim - aniso,
               "mean_dot": self._pool.mean_dot()}
        if self._pool.covariance:
            out["condition_number"] = self._pool.condition_number()
        return out
