"""``intrinsic-entropy`` and ``parity-dimension`` (the intrinsic-entropy paper, Section 2.2.2, Appendices C.2, J.2,
J.3): features and losses against the models' own outputs, and the sparse-parity MLP whose
intrinsic dimension is known (one direction per visible subtask)."""

import math

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.experiments import intrinsic_entropy as IE
from ctxlens.experiments import parity_dimension as PD
from ctxlens.experiments.base import make_config
from ctxlens.metrics.fits import fit_linear
from ctxlens.metrics.spectrum import intrinsic_dimension, intrinsic_entropy, kde_entropy
from tests.conftest import build_lm


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread (and do not fight other jobs for the cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run_all(module, lm, config):
    cache, rows = {}, []
    for unit in module.plan(config):
        rows += [{**unit, **r} for r in module.run(lm, config, unit, cache)]
    return rows, cache


def _value(rows, length, quantity, **coords):
    (row,) = [r for r in rows if r["stage"] == "measure" and r["length"] == length and r["quantity"] == quantity
              and all(r.get(k) == v for k, v in coords.items())]
    return row["value"]


# ------------------------------------------------------------------------------- intrinsic-entropy
@pytest.mark.parametrize("layer", [None, 0])
def test_rows_match_the_models_own_features_and_losses(layer):
    lm = build_lm("llama")
    config = make_config(IE.Config, {"source": "random", "lengths": [3, 9], "n_samples": 40, "layer": layer,
                                     "entropy_n": [4, 16], "thresholds": [0.01, 0.1], "batch_tokens": 50})
    rows, cache = _run_all(IE, lm, config)
    ids = IE.samples(lm, config, 10, cache)  # [40, 10]: 9 context tokens and the target
    for length in (3, 9):
        with torch.no_grad():
            out = lm.model(input_ids=ids[:, 9 - length : 9], output_hidden_states=True)
        # transformers' hidden_states: [-1] is after the final norm, [k + 1] is block k's output
        feats = out.hidden_states[-1 if layer is None else layer + 1][:, -1]  # [40, d]
        ce = -torch.log_softmax(out.logits[:, -1].float(), -1).gather(1, ids[:, 9:]).squeeze(1)  # [40]
        assert _value(rows, length, "ce") == pytest.approx(float(ce.double().mean()), abs=1e-5)
        for n, want in zip((4, 16), intrinsic_entropy(feats, [4, 16])):
            assert _value(rows, length, "intrinsic_entropy", n_eig=n) == pytest.approx(want, rel=1e-4)
        for t, want in zip((0.01, 0.1), intrinsic_dimension(feats, [0.01, 0.1])):
            assert _value(rows, length, "intrinsic_dimension", threshold=t) == want
        assert _value(rows, length, "kde_entropy") == pytest.approx(kde_entropy(feats).entropy, rel=1e-4)
        rel = [r["value"] for r in rows if r["stage"] == "measure" and r["length"] == length
               and r["quantity"] == "relative_eigenvalue"]
        assert len(rel) == 64 and rel[0] == 1.0 and rel == sorted(rel, reverse=True)
    site = {(r["layer"], r["after_final_norm"]) for r in rows}
    assert site == ({(1, True)} if layer is None else {(0, False)})


def test_fit_rows_fit_ce_against_each_measure():
    lm = build_lm("llama")
    config = make_config(IE.Config, {"source": "random", "lengths": [2, 4, 8, 16], "n_samples": 24,
                                     "entropy_n": [4, 64], "thresholds": [0.05], "eigen_rows": 2})
    rows, _ = _run_all(IE, lm, config)
    fits = [r for r in rows if r["stage"] == "fit"]
    ce = [_value(rows, n, "ce") for n in (2, 4, 8, 16)]
    dims = [_value(rows, n, "intrinsic_dimension", threshold=0.05) for n in (2, 4, 8, 16)]
    want = fit_linear(dims, ce)
    got = {r["quantity"]: r["value"] for r in fits if r["x"] == "intrinsic_dimension"}
    assert got["slope"] == pytest.approx(want["slope"]) and got["r2"] == pytest.approx(want.r2)
    assert {(r["x"], r.get("n_eig")) for r in fits} == {
        ("intrinsic_entropy", 4), ("intrinsic_entropy", 64), ("intrinsic_dimension", None), ("kde_entropy", None)}
    # 24 samples span at most 23 directions: n_eig = 64 is flagged, never -inf
    flagged = [r for r in rows if r["stage"] == "measure" and r.get("n_eig") == 64]
    assert all(r["value"] is None and "span only" in r["flag"] for r in flagged)
    assert all("at least 2 distinct" in r["flag"] for r in fits if r.get("n_eig") == 64)


@pytest.mark.parametrize("family", ["mamba2", "recurrent_gemma", "gpt2", "rwkv"])
def test_runs_on_other_families(family):
    lm = build_lm(family)
    config = make_config(IE.Config, {"source": "random", "lengths": [2, 6], "n_samples": 20, "entropy_n": [4],
                                     "layer": -1})
    rows, _ = _run_all(IE, lm, config)
    assert {r["after_final_norm"] for r in rows} == {False}
    assert all(math.isfinite(_value(rows, n, "kde_entropy")) for n in (2, 6))
    assert any(r["stage"] == "fit" for r in rows)


def test_bad_options():
    with pytest.raises(CtxlensError, match=r"must be in \(0, 1\], got 2.0"):
        make_config(IE.Config, {"thresholds": [0.5, 2]})
    with pytest.raises(CtxlensError, match=r"must be in \[2, 100,000\], got 1"):
        make_config(IE.Config, {"n_samples": 1})
    config = make_config(IE.Config, {"source": "random", "lengths": [2], "n_samples": 4, "layer": 7})
    with pytest.raises(CtxlensError, match=r"Layer 7 does not exist .*\[-2, 1\]"):
        IE.run(build_lm("llama"), config, IE.plan(config)[0], {})


# ------------------------------------------------------------------------------- parity-dimension
def test_parity_mlp_dimension_counts_visible_subtasks_and_ce_is_linear_in_it(monkeypatch):
    config = make_config(PD.Config, {})  # the defaults: 16 bits, 12 subtasks, trained on the CPU in seconds
    rows, cache = _run_all(PD, "parity-mlp", config)
    lengths = config.visible_lengths()
    assert lengths == list(range(5, 17))
    ds = PD.dataset(config)
    for c in lengths:
        visible = _value(rows, c, "visible_tasks")
        assert visible == int((ds.task_bits[:, 1] < c).sum()) == c - 4
        # Appendix J.3 / Figure 17: at the 1/20 threshold the PCA dimension is the subtask count
        assert _value(rows, c, "intrinsic_dimension", threshold=0.05) == visible
        # the premise: the trained model is close to the Bayes model (Table 1 for the transformer)
        assert _value(rows, c, "ce") - _value(rows, c, "bayes_risk") < 0.05
    fit = {r["quantity"]: r for r in rows if r["stage"] == "fit" and r["threshold"] == 0.05}
    assert fit["r2"]["value"] > 0.99
    assert fit["r2"]["paper"] == pytest.approx(1 - 7e-9) and fit["slope"]["paper"] == -0.693
    assert fit["slope_x_tasks"]["bayes"] == pytest.approx(-math.log(2))  # uniform subtask frequencies
    # the weights are cached: a new process loads them instead of training again
    monkeypatch.setattr(PD, "_train", lambda *a: pytest.fail("trained again"))
    again = PD.trained_mlp(config, {})
    first = next(v for k, v in cache.items() if k[0] == "parity-mlp")
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


def test_parity_options_are_checked():
    with pytest.raises(CtxlensError, match="Context length"):
        make_config(PD.Config, {"lengths": [5, 17]})
    with pytest.raises(CtxlensError, match=r"Option .steps. must be in \[1, 100,000,000\], got 0"):
        make_config(PD.Config, {"steps": 0})


def test_cli_runs_both_experiments(tmp_path):
    from ctxlens.cli import main
    from ctxlens.runner.store import read_rows

    out = tmp_path / "ie"
    assert main(["run", "intrinsic-entropy", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
                 "--lengths", "4,8", "--n-samples", "16", "--entropy-n", "4,8", "--eigen-rows", "4"]) == 0
    rows = read_rows(out)
    assert {r["model"] for r in rows} == {"zoo:random-llama"} and any(r["stage"] == "fit" for r in rows)
    out = tmp_path / "parity"
    assert main(["run", "parity-dimension", "--out", str(out), "--no-progress",  # no --model: its own MLP
                 "--lengths", "6,10,14", "--n-eval", "500"]) == 0
    rows = read_rows(out)
    assert {r["model"] for r in rows} == {"parity-mlp"}
    assert main(["run", "parity-dimension", "--model", "zoo:random-llama", "--out", str(tmp_path / "wrong"),
                 "--no-progress", "--lengths", "6", "--n-eval", "500"]) == 2  # a pretrained LM is refused
    assert sorted({r["length"] for r in rows if r["stage"] == "measure"}) == [6, 10, 14]
    assert {r["quantity"] for r in rows if r["stage"] == "fit"} == {"slope", "intercept", "r2", "pearson_r",
                                                                  "slope_x_tasks"}


def test_bootstrap_and_permutation_spectra_match_numpy_on_the_resampled_windows():
    from ctxlens.metrics.spectrum import bootstrap_spectra, entropy_of, permuted_spectra

    gen = torch.Generator().manual_seed(0)
    feats = [torch.randn(12, 4, generator=gen) * (j + 1) for j in range(3)]  # 3 lengths, 12 windows, d = 4

    def spectrum(x):  # descending eigenvalues of the sample covariance, by numpy
        import numpy as np
        return np.sort(np.linalg.eigvalsh(np.cov(np.asarray(x, dtype=float), rowvar=False)))[::-1]

    idx, eig = bootstrap_spectra(feats, 5, seed=1, chunk=2)  # [5, 12], [5, 3, 4]
    for b in range(5):
        for j in range(3):
            assert eig[b, j].numpy() == pytest.approx(spectrum(feats[j][idx[b]].double()), rel=1e-9, abs=1e-12)
    perm, eig = permuted_spectra(feats, 4, seed=2, chunk=3)  # [4, 12, 3], [4, 3, 4]
    assert all(sorted(p.tolist()) == [0, 1, 2] for p in perm.reshape(-1, 3))  # each window: a shuffle of lengths
    for p in range(4):
        for j in range(3):
            filed = torch.stack([feats[int(perm[p, i, j])][i] for i in range(12)]).double()  # [12, 4]
            assert eig[p, j].numpy() == pytest.approx(spectrum(filed), rel=1e-9, abs=1e-12)
    lam = torch.tensor([4.0, 2.0, 1.0], dtype=torch.float64)
    assert float(entropy_of(lam, 3, "max")) == pytest.approx(math.log(0.5) + math.log(0.25))
    assert float(entropy_of(lam, 2, "trace")) == pytest.approx(math.log(4 / 7) + math.log(2 / 7))


def test_rows_hold_raw_eigenvalues_and_the_replicates_over_windows():
    lm = build_lm("llama")
    config = make_config(IE.Config, {"source": "random", "lengths": [2, 4, 8], "n_samples": 16, "entropy_n": [3],
                                     "thresholds": [0.05], "kde": False, "eigen_rows": 5, "n_boot": 7})
    rows, _ = _run_all(IE, lm, config)
    for n in (2, 4, 8):
        raw = [r["value"] for r in rows if r["stage"] == "measure" and r["length"] == n
               and r["quantity"] == "eigenvalue"]
        rel = [r["value"] for r in rows if r["stage"] == "measure" and r["length"] == n
               and r["quantity"] == "relative_eigenvalue"]
        assert len(raw) == 5 and rel == pytest.approx([v / raw[0] for v in raw])
        s3 = sum(math.log(v / raw[0]) for v in raw[:3])
        assert _value(rows, n, "intrinsic_entropy", n_eig=3) == pytest.approx(s3, rel=1e-4)
    for stage in ("bootstrap", "permutation"):
        got = [r for r in rows if r["stage"] == stage]
        assert {(r["replicate"], r["length"]) for r in got} == {(b, n) for b in range(7) for n in (2, 4, 8)}
        assert {(r["quantity"], r.get("norm")) for r in got} == {("ce", None), ("intrinsic_entropy", "max"),
                                                                ("intrinsic_entropy", "trace")}
        assert all(r["n_windows"] == 16 for r in got if r["quantity"] == "ce")
    # a permutation replicate files each window under some length: its mean CE lies within the lengths' range
    ce = [_value(rows, n, "ce") for n in (2, 4, 8)]
    perm_ce = [r["value"] for r in rows if r["stage"] == "permutation" and r["quantity"] == "ce"]
    assert sum(perm_ce) / len(perm_ce) == pytest.approx(sum(ce) / 3, rel=1e-6)  # every window's CEs, shuffled
