"""Calibration of the loss side of the card (the intrinsic-entropy paper, Section 2.2; the geometry
paper, Sections 4-5): each verdict, on simulated rows shaped like the experiments' rows, fires at
about its nominal 5% under the null and most of the time under a planted effect of the size the
line says it can detect; and the constrained power-law fit against closed-form truth."""

import math

import numpy as np
import pytest
import torch

from ctxlens.core.stats import normal_quantile, t_quantile
from ctxlens.experiments.intrinsic_entropy import bootstrap_rows
from ctxlens.findings.lines.entropy import ce_entropy, entropy_test
from ctxlens.findings.lines.loss import loss_fit, ppl_2l, usable_context
from ctxlens.metrics.fits import fit_documents, fit_power_law, power_law

SIMS = 300
LENGTHS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]


# ------------------------------------------------------------------------------- observed gain
def _loss_rows(rng, n_docs: int, gain: float, noise: float = 0.12) -> list[dict]:
    """``loss-vs-length`` measure rows: each document its own difficulty, shared by every length
    (the paired structure), a curve that falls to 512 and then by ``gain`` to 1024, and noise per
    (document, length)."""
    difficulty = rng.normal(0.0, 0.5, n_docs)  # [n_docs]
    curve = {n: 3.0 + 4.0 * min(n, 512) ** -0.5 for n in LENGTHS}
    curve[1024] -= gain
    return [{"stage": "measure", "length": n, "sample": i, "n_scored": 32, "bos": True,
             "ce": float(curve[n] + difficulty[i] + rng.normal(0.0, noise)), "flag": None}
            for n in LENGTHS for i in range(n_docs)]


def _mde(n: int, sd: float) -> float:
    """The line's detectable effect for n items of difference SD ``sd``: (t_{n-1} + z_0.8) sd / sqrt(n)."""
    return (t_quantile(n - 1) + normal_quantile(0.8)) * sd / math.sqrt(n)


def test_the_gain_test_fires_at_its_nominal_rate_under_no_gain_and_detects_its_mde():
    rng = np.random.default_rng(0)
    n_docs, noise = 8, 0.12
    null = [usable_context(_loss_rows(rng, n_docs, 0.0, noise), "m", 1024).verdict for _ in range(SIMS)]
    assert sum(v == "falls over the last doubling" for v in null) / SIMS <= 0.025 + 0.03  # one side of the 95% CI
    assert sum(v != "no significant gain" for v in null) / SIMS <= 0.05 + 0.04
    planted = _mde(n_docs, noise * math.sqrt(2))
    hits = [usable_context(_loss_rows(rng, n_docs, planted, noise), "m", 1024) for _ in range(SIMS)]
    assert sum(h.verdict == "falls over the last doubling" for h in hits) / SIMS >= 0.7
    assert np.median([h.mde for h in hits]) == pytest.approx(planted, rel=0.3)  # the line states its own power


def test_the_gain_line_pairs_windows_and_states_its_interval_by_hand():
    rows = [{"stage": "measure", "length": n, "sample": i, "ce": ce}
            for n, ces in ((256, [5.0, 4.0, 3.0, 2.0]), (512, [4.8, 3.9, 2.7, 1.9])) for i, ce in enumerate(ces)]
    line = usable_context(rows, "m", 512)
    d = [0.2, 0.1, 0.3, 0.1]  # per window: CE(256) - CE(512)
    mean, sd = sum(d) / 4, np.std(d, ddof=1)
    half = t_quantile(3) * sd / 2
    assert line.value == pytest.approx(mean) and line.n == 4 and line.unit == "windows"
    assert line.interval == pytest.approx((mean - half, mean + half))
    assert line.verdict == "falls over the last doubling"  # paired: the 1-nat spread between windows cancels
    assert "beyond 512, not determined" in line.text or "not determined" in line.text


# ------------------------------------------------------------------------------- suffix ppl
def _ppl_rows(rng, n_seq: int, diff: float, L: int = 1024, noise: float = 0.1) -> list[dict]:
    """``suffix-ppl`` rows at L and 2L: one summary row per length and one row per sequence, each
    sequence its own difficulty at both lengths."""
    difficulty = rng.normal(0.0, 0.8, n_seq)
    rows = []
    for length, shift in ((L, 0.0), (2 * L, diff)):
        per = [2.5 + difficulty[i] + shift + rng.normal(0.0, noise) for i in range(n_seq)]
        mean = sum(per) / n_seq
        rows.append({"length": length, "n_sequences": n_seq, "nll": mean, "ppl": math.exp(mean)})
        rows += [{"length": length, "stage": "sequence", "sequence": i, "sequence_nll": v} for i, v in enumerate(per)]
    return rows


def test_the_ppl_test_is_calibrated_beyond_the_training_length_and_detects_its_mde():
    rng = np.random.default_rng(1)
    n_seq, noise = 8, 0.1
    fired = [ppl_2l(_ppl_rows(rng, n_seq, 0.0, noise=noise), "m", 1024, T=1024).verdict for _ in range(SIMS)]
    assert sum(v != "no significant change" for v in fired) / SIMS <= 0.05 + 0.04
    planted = _mde(n_seq, noise * math.sqrt(2))
    hits = [ppl_2l(_ppl_rows(rng, n_seq, planted, noise=noise), "m", 1024, T=1024).verdict for _ in range(SIMS)]
    assert sum(v == "rises beyond L" for v in hits) / SIMS >= 0.7


def test_the_ppl_line_inside_the_training_length_is_no_test_and_old_rows_say_what_they_lack():
    rng = np.random.default_rng(2)
    line = ppl_2l(_ppl_rows(rng, 6, 0.5), "m", 1024, T=8192)
    assert line.verdict.startswith("inside the training length") and line.n == 6
    assert 0 < line.interval[0] < line.value < line.interval[1]
    old = [r for r in _ppl_rows(rng, 6, 0.5) if r.get("stage") is None]
    assert ppl_2l(old, "m", 1024, T=1024).verdict.startswith("untested: no per-sequence NLL")


# ------------------------------------------------------------------------------- entropy rises
def _entropy_rows(seed: int, step: float, n: int = 60, d: int = 5, n_boot: int = 40) -> list[dict]:
    """``intrinsic-entropy`` rows over 6 doublings from rows of features shaped like the
    experiment's: window i shares a latent with itself at every length (paired), eigenvalue k of
    the population covariance at the j-th length is base_k * 2^(step (k - 1) j), so the
    population S_d (divided by the largest) rises by step ln2 d (d - 1) / 2 per doubling."""
    gen = torch.Generator().manual_seed(seed)
    lengths = [16, 32, 64, 128, 256, 512]
    latent = torch.randn(n, d, generator=gen, dtype=torch.float64)  # [n, d]
    base = torch.tensor([4.0 ** -k for k in range(d)], dtype=torch.float64)  # [d]
    difficulty = torch.randn(n, generator=gen, dtype=torch.float64)
    per_length, rows = [], []
    for j, length in enumerate(lengths):
        scale = (base * 2.0 ** (step * torch.arange(d) * j)).sqrt()  # [d]
        feats = (0.8 * latent + 0.6 * torch.randn(n, d, generator=gen, dtype=torch.float64)) * scale  # [n, d]
        nll = 3.0 + 0.5 * difficulty + 0.3 * torch.randn(n, generator=gen, dtype=torch.float64)  # [n]
        per_length.append({"windows": (feats.float(), nll.float(), torch.ones(n, dtype=torch.bool))})
        xc = feats - feats.mean(0)
        eig = torch.linalg.eigvalsh(xc.T @ xc / (n - 1)).flip(0)  # [d]
        rows.append({"stage": "measure", "length": length, "quantity": "ce", "value": float(nll.mean()),
                     "n_samples": n})
        rows += [{"stage": "measure", "length": length, "quantity": "eigenvalue", "index": k + 1, "value": float(v)}
                 for k, v in enumerate(eig)]
    return rows + bootstrap_rows(lengths, per_length, [d], n_boot, seed)


def test_the_entropy_rise_test_is_calibrated_and_detects_its_mde():
    sims, planted_sims = 200, 100
    null = [entropy_test(_entropy_rows(s, 0.0)) for s in range(sims)]
    assert sum(bool(t["rises"]) for t in null) / sims <= 0.05 + 0.04  # one-sided randomization tests at 5%
    assert sum(bool(t["negative"]) for t in null) / sims <= 0.05 + 0.04  # r(CE, S) < 0 with no relation
    mde = float(np.median([t["slope_mde"] for t in null]))  # the rise the line says it detects
    step = mde / (math.log(2) * 5 * 4 / 2)  # population slope of S_5 per doubling = step ln2 d (d - 1) / 2
    planted = [entropy_test(_entropy_rows(1000 + s, step)) for s in range(planted_sims)]
    assert sum(bool(t["rises"]) for t in planted) / planted_sims >= 0.7


def test_fewer_than_six_lengths_is_not_tested():
    rows = [r for r in _entropy_rows(0, 0.3, n_boot=30) if r["length"] in (16, 64, 256)]
    line = ce_entropy(rows, "m")
    assert line.verdict.startswith("not tested: 3 lengths") and line.interval is None


# ------------------------------------------------------------------------------- the constrained fit
def test_the_constrained_fit_recovers_known_parameters_and_never_reports_c0_below_zero():
    x = np.array(LENGTHS, dtype=float)
    for c0, c, g in ((1.5, 4.0, 0.5), (0.3, 8.0, 0.3), (2.0, 2.0, 1.0)):
        fit = fit_power_law(x, power_law(x, c0, c, g), c0_min=0.0, sigma=np.full(x.size, 0.01))
        assert fit.params["C0"] == pytest.approx(c0, abs=1e-5) and fit.params["gamma"] == pytest.approx(g, rel=1e-5)
        assert fit.params["C"] == pytest.approx(c, rel=1e-5) and fit.flag is None
    # a curve whose best unconstrained floor is negative (a slowly falling power law shifted down)
    y = power_law(x, -2.0, 10.0, 0.13)
    free, bound = fit_power_law(x, y), fit_power_law(x, y, c0_min=0.0)
    assert free.params["C0"] == pytest.approx(-2.0, abs=1e-4)
    assert bound.params["C0"] == 0.0 and "C0 at its bound" in bound.flag
    # with C0 fixed at 0, y = C l^-gamma: log-linear least squares on the same points is a check
    best = min((float(((y - c * x ** -g) ** 2).sum()), g) for g in np.linspace(0.01, 1, 991)
                for c in [float((y * x ** -g).sum() / (x ** (-2 * g)).sum())])
    assert bound.params["gamma"] == pytest.approx(best[1], abs=2e-3)
    rng = np.random.default_rng(3)
    for _ in range(10):
        docs = power_law(x, 0.2, 5.0, 0.4)[None] + rng.normal(0, 0.3, (6, 1)) + rng.normal(0, 0.2, (6, x.size))
        fit, ci, _ = fit_documents(x, docs, n_boot=20, seed=0)
        assert fit.params["C0"] >= 0.0 and ci["C0"][0] >= 0.0


def test_the_weighted_fit_uses_each_lengths_standard_error():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    y = power_law(x, 1.0, 2.0, 0.7)
    y_bad = y.copy()
    y_bad[0] += 0.5  # one point off; with a huge SE it should barely move the fit
    sigma = np.array([1e3, 1e-3, 1e-3, 1e-3, 1e-3])
    fit = fit_power_law(x, y_bad, sigma=sigma, c0_min=0.0)
    # the remaining four points determine the three parameters with one to spare: exact truth
    assert fit.params["gamma"] == pytest.approx(0.7, rel=1e-3) and fit.params["C0"] == pytest.approx(1.0, rel=1e-3)


def test_the_loss_fit_line_says_c0_is_not_identified_on_old_rows():
    rows = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": None}
            for q, v in (("C0", -2.4), ("C", 10.4), ("gamma", 0.13), ("r2", 0.99))]
    line = loss_fit(rows, "m")
    assert "C0 not identified" in line.text and line.interval is None and "re-run" in line.uncertainty
