"""``loss-vs-length`` (the intrinsic-entropy paper, Section 2.2.2 / Figure 2): exactly l tokens visible, the same
targets at every l, checked against the models' own full-logit forward and a sliding-window
model whose receptive field is known."""

import json
import math

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.experiments import loss_vs_length as E
from ctxlens.experiments.base import make_config
from tests.conftest import build_lm


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread (and do not fight other jobs for the cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run_all(lm, config):
    cache, rows = {}, []
    for unit in E.plan(config):
        rows += [{**unit, **r} for r in E.run(lm, config, unit, cache)]
    return rows, cache


def _config(**options):
    return make_config(E.Config, {"source": "random", "n_samples": 2, "n_scored": 3, **options})


@pytest.mark.parametrize("family", ["llama", "cohere"])  # cohere: logits scaled after the LM head
def test_each_score_is_the_models_own_loss_on_exactly_l_tokens(family):
    lm = build_lm(family)
    config = _config(lengths=[1, 5, 12])
    _, cache = _run_all(lm, config)
    ids = E.samples(lm, config, 12 + 3, cache)  # [2, 15]
    for length in (1, 5, 12):
        got = cache[("loss-vs-length", length)]  # [2, 3]
        for i in range(2):
            for k in range(3):
                window = ids[i : i + 1, 12 + k - length : 12 + k]
                with torch.no_grad():
                    logits = lm.model(input_ids=window).logits[0, -1]  # transformers' full-logit path
                want = -torch.log_softmax(logits.float(), -1)[ids[i, 12 + k]]
                assert float(got[i, k]) == pytest.approx(float(want), abs=1e-5)


def test_windows_end_right_before_the_same_targets_at_every_length():
    ids = torch.arange(2 * 20).view(2, 20)
    for length in (1, 4, 16):
        windows, targets = E.scored_windows(ids, length, n_scored=4, max_length=16)
        assert windows.shape == (8, length)
        assert targets.tolist() == [16, 17, 18, 19, 36, 37, 38, 39]
        assert (windows[:, -1] == targets - 1).all()
        assert (windows[:, 0] == targets - length).all()
    with pytest.raises(CtxlensError):
        E.scored_windows(ids, 17, n_scored=4, max_length=16)


def test_loss_is_flat_beyond_the_receptive_field_of_a_sliding_window_model():
    # transformers' sliding window lets query i see keys i-w+1 .. i, so after L layers the last
    # token depends on the last L*(w-1)+1 tokens and on nothing before them.
    w, layers = 6, 3
    field = layers * (w - 1) + 1  # 16
    lm = build_lm("mistral", sliding_window=w, num_hidden_layers=layers)
    lengths = [4, field - 1, field, field + 1, field + 7, 2 * field]
    _, cache = _run_all(lm, _config(lengths=lengths, n_samples=3, n_scored=4))
    at = {n: cache[("loss-vs-length", n)] for n in lengths}  # each [3, 4]
    flat = max(float((at[n] - at[field]).abs().max()) for n in lengths[2:])
    assert flat < 2e-5  # float32 rounding: positions shift with the window
    assert float((at[field - 1] - at[field]).abs().max()) > 10 * max(flat, 1e-5)  # one token less: it matters


def test_rows_are_tidy_and_the_fit_is_written():
    lm = build_lm("llama")
    rows, _ = _run_all(lm, _config(lengths=[2, 4, 8, 16, 32]))
    measure = [r for r in rows if r["stage"] == "measure"]
    assert len(measure) == 5 * 2
    assert {(r["length"], r["sample"]) for r in measure} == {(n, i) for n in (2, 4, 8, 16, 32) for i in (0, 1)}
    assert all(r["n_scored"] == 3 and r["ce"] > 0 and r["flag"] is None for r in measure)
    fit = [r for r in rows if r["stage"] == "fit"]
    assert [r["quantity"] for r in fit] == ["C0", "C", "gamma", "r2", "corr(C0, C)", "corr(C0, gamma)",
                                            "corr(C, gamma)"]
    assert all(r["fit"] == "power_law" and r["n_points"] == 5 for r in fit)
    json.dumps(rows, allow_nan=False)


def test_the_fit_unit_recomputes_after_a_resume():
    lm = build_lm("llama")
    config = _config(lengths=[2, 4, 8, 16])
    full, _ = _run_all(lm, config)
    resumed = E.run(lm, config, E.plan(config)[-1], {})  # fresh cache: nothing measured in this process
    fit_rows = [r for r in full if r["stage"] == "fit"]
    assert resumed == [{k: v for k, v in r.items() if k not in ("stage", "source")} for r in fit_rows]


@pytest.mark.parametrize("family", ["mamba2", "gpt2", "recurrent_gemma", "xlstm", "bamba"])
def test_runs_on_other_families(family):
    rows, _ = _run_all(build_lm(family), _config(lengths=[1, 3, 9, 17]))
    assert len([r for r in rows if r["stage"] == "measure" and r["ce"] > 0]) == 8
    fit = [r["quantity"] for r in rows if r["stage"] == "fit"]
    assert fit[:4] == ["C0", "C", "gamma", "r2"] and len(fit) in (4, 7)  # the correlations when the fit has them


def test_bad_options_and_lengths():
    with pytest.raises(CtxlensError, match="repeats"):
        _config(lengths=[4, 4])
    with pytest.raises(CtxlensError, match=r"Option .n_scored. must be in \[1, 100,000\], got 0"):
        _config(n_scored=0)
    lm = build_lm("gpt2", n_positions=16)
    with pytest.raises(CtxlensError, match="at most 16"):
        _run_all(lm, _config(lengths=[8, 32]))
    with pytest.raises(CtxlensError, match="tokenizer"):
        _run_all(build_lm("llama"), _config(lengths=[4], bos=True))


def test_cli_run_on_a_zoo_model(tmp_path):
    from ctxlens.cli import main
    from ctxlens.runner.store import read_rows

    out = tmp_path / "run"
    assert main(["run", "loss-vs-length", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
                 "--lengths", "4,8,16", "--n-samples", "2", "--n-scored", "4", "--bos", "true"]) == 0
    rows = read_rows(out)
    assert {r["model"] for r in rows} == {"zoo:random-llama"}
    assert len([r for r in rows if r["stage"] == "measure"]) == 6
    assert {"C0", "C", "gamma", "r2"} <= {r["quantity"] for r in rows if r["stage"] == "fit"}  # + corrs when identified
    assert all(r["bos"] for r in rows if r["stage"] == "measure")


def test_the_fit_is_weighted_constrained_and_bootstrapped_over_windows():
    """The fit rows from per-window CE: C0 >= 0, the point fit is the SE-weighted fit of the means, and
    each parameter carries the percentile interval of refits on windows resampled whole."""
    import numpy as np

    from ctxlens.metrics.fits import fit_power_law, power_law

    lengths = [4, 8, 16, 32, 64, 128]
    rng = np.random.default_rng(0)
    docs = power_law(np.array(lengths, float), 0.5, 6.0, 0.4)[None] + rng.normal(0, 0.4, (6, 1)) \
        + rng.normal(0, 0.05, (6, len(lengths)))  # [6 windows, 6 lengths]
    rows = {r["quantity"]: r for r in E.fit_rows(lengths, docs.T.tolist(), n_boot=50, seed=0)}
    want = fit_power_law(lengths, docs.mean(0), sigma=docs.std(0, ddof=1) / math.sqrt(6), c0_min=0.0)
    assert rows["gamma"]["value"] == pytest.approx(want["gamma"]) and rows["C0"]["value"] >= 0.0
    assert rows["gamma"]["n_docs"] == 6 and rows["gamma"]["n_boot"] == 50 and rows["gamma"]["weighted"]
    assert 0 < rows["gamma"]["ci_low"] <= rows["gamma"]["ci_high"] and rows["C0"]["ci_low"] >= 0.0
    drop = docs.copy()
    drop[2, 3] = float("nan")  # a window with a non-finite CE at one length leaves the paired design
    assert E.fit_rows(lengths, drop.T.tolist(), n_boot=5, seed=0)[0]["n_docs"] == 5


# ------------------------------------------------------------------------------- positions scoring
def test_band_offsets_by_hand():
    # l = 64 with band 16: w = min(8, 4) = 4 targets at offsets 61..64; l = 4: one target, offset 4
    assert E.band_offsets([4, 64, 512], n_scored=8, band=16) == {4: [4], 64: [61, 62, 63, 64],
                                                                 512: list(range(505, 513))}


@pytest.mark.parametrize("family,bos", [("llama", False), ("llama", True), ("cohere", False)])
def test_positions_equal_separate_forwards_of_exactly_p_tokens(family, bos):
    """One forward per window scores, for each length, the tokens at offsets l - w + 1 .. l; each must be
    the loss that a separate forward of exactly the p tokens before it gives (transformers' own logits)."""
    lm = build_lm(family)
    lengths = [1, 3, 8, 16]
    config = _config(lengths=lengths, n_scored=4, band=2, scoring="positions", bos=bos, source="random")
    if bos:
        lm.tokenizer = _FakeBos()
    rows, _ = _run_all(lm, config)
    ids = E.samples(lm, config, 16 + 1, {})  # [2, 17]: the run's windows
    measure = {(r["length"], r["sample"]): r for r in rows if r["stage"] == "measure"}
    for n in lengths:
        offsets = list(range(n - max(1, min(4, n // 2)) + 1, n + 1))
        for i in range(2):
            want = []
            for p in offsets:
                window = ids[i : i + 1, :p]
                if bos:
                    window = torch.cat([torch.tensor([[_FakeBos.bos_token_id]]), window], 1)
                with torch.no_grad():
                    logits = lm.model(input_ids=window).logits[0, -1]  # transformers' full-logit path
                want.append(float(-torch.log_softmax(logits.float(), -1)[ids[i, p]]))
            row = measure[(n, i)]
            assert row["n_scored"] == len(offsets) and row["visible_min"] == offsets[0] and row["bos"] is bos
            assert row["ce"] == pytest.approx(sum(want) / len(want), abs=1e-5)
    assert {r["quantity"] for r in rows if r["stage"] == "fit"} >= {"C0", "C", "gamma", "r2"}


class _FakeBos:
    """Just enough tokenizer for ``bos=True``: a BOS id (random ids need no text)."""

    bos_token_id = 3

    def encode(self, text, add_special_tokens=True):
        return [3, 4] if add_special_tokens else [4]


def test_positions_is_one_unit_that_resumes_from_its_checkpoint():
    from ctxlens.core import progress

    lm = build_lm("llama")
    config = _config(lengths=[2, 4, 8], n_scored=2, band=2, scoring="positions")
    assert E.plan(config) == [{"stage": "measure", "source": "random", "scoring": "positions"}]

    class Box:
        def __init__(self):
            self.kept = {}

        def saved(self):
            return dict(self.kept)

        def save(self, key, value):
            self.kept[key] = value

    box = Box()
    with progress.unit(None, box):
        first = E.run(lm, config, E.plan(config)[0], {})
    assert sorted(box.kept) == ["window 0", "window 1"]
    calls = []
    forward = lm.final_hidden
    lm.final_hidden = lambda ids: calls.append(ids.shape) or forward(ids)
    box.kept = {"window 0": box.kept["window 0"]}  # an interrupt after the first window
    with progress.unit(None, box):
        again = E.run(lm, config, E.plan(config)[0], {})
    assert again == first and len(calls) == 1  # only the unfinished window runs again
