"""The geometry paper experiments on tiny models: structure-based truths, brute force, tidy rows."""

import collections
import math

import pytest
import torch

from ctxlens import CtxlensError
from ctxlens.experiments import get_experiment, make_config
from ctxlens.lm import from_model
from ctxlens.lm.families import FAMILIES
from ctxlens.metrics.geometry import anisotropy
from ctxlens.probes.perturb import Shuffle
from tests.conftest import build_lm, build_model


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest on one thread; two threads stall on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TINY = {"source": "random", "n_sequences": 3, "suffix_len": 8, "batch_size": 2}


def _run(name, lm, per_window=False, **options):
    """The experiment's rows; the pooled ones only unless ``per_window`` (then every row)."""
    exp = get_experiment(name)
    config = make_config(exp.Config, {**TINY, **options})
    cache = {}
    rows = [row for unit in exp.plan(config) for row in (dict(unit, **r) for r in exp.run(lm, config, unit, cache))]
    return rows if per_window else [r for r in rows if "level" not in r]


# --------------------------------------------------------------------------------------
# Truths from model structure
# --------------------------------------------------------------------------------------


def test_sliding_window_model_ignores_prefix_beyond_its_receptive_field():
    """2 layers of window w=8: a suffix token sees at most 2 x 8 tokens back, so shuffling tokens
    further away than that leaves every suffix representation unchanged at every layer."""
    w, layers, length, suffix = 8, 2, 64, 8
    lm = build_lm("mistral", sliding_window=w, num_hidden_layers=layers)
    prefix = length - suffix
    boundary = (prefix - layers * w - 1) / prefix  # perturbed tokens end > layers * w before the suffix
    far = _run("accs-boundary", lm, lengths=[length], suffix_len=suffix, boundaries=[boundary, 1.0], layers=None,
               streams=["residual", "block"], n_sequences=2)
    assert {(r["stream"], r["layer"]) for r in far} == {(s, i) for s in ("residual", "block") for i in range(layers)}
    for row in far:
        if row["boundary"] == boundary:
            assert prefix - row["perturb_end"] >= layers * w
            assert row["self_sim"] == pytest.approx(1.0, abs=1e-6)
        else:  # control: shuffling the tokens right before the suffix does change it
            assert row["self_sim"] < 1 - 1e-4
    full = build_lm("mistral", sliding_window=None, num_hidden_layers=layers)  # same weights, global attention
    rows = _run("accs-boundary", full, lengths=[length], suffix_len=suffix, boundaries=[boundary], n_sequences=2)
    assert rows[0]["self_sim"] < 1 - 1e-4  # the same far shuffle reaches the suffix without the window


def test_no_perturbation_gives_self_similarity_one_and_accs_one_minus_anisotropy():
    lm = build_lm("llama")
    rows = _run("accs-boundary", lm, lengths=[40], boundaries=[0.0, 1.0], layers=None)
    none = [r for r in rows if r["boundary"] == 0.0]
    assert len(none) == lm.n_layers and all(r["perturb_end"] == 0 for r in none)
    for r in none:
        assert r["self_sim"] == pytest.approx(1.0, abs=1e-12)
        assert r["accs"] == pytest.approx(1.0 - r["anisotropy"], abs=1e-12)
    assert all(r["self_sim"] < 1 for r in rows if r["boundary"] == 1.0)


def test_accs_rows_equal_the_pure_metrics_on_directly_captured_states():
    lm = build_lm("llama")
    (row,) = [r for r in _run("accs-layers", lm, lengths=[40], layers=[1]) if r["layer"] == 1]
    windows = torch.randint(0, lm.vocab_size, (3, 40), generator=torch.Generator().manual_seed(0))
    shuffled = windows.clone()
    for i in range(3):  # the experiment's seeded shuffle of tokens [0, 16) (half of the 32-token prefix)
        shuffled[i] = Shuffle(0, 16).apply(windows[i:i + 1], [i], 0)[0]
    h = lm.capture(windows, residual=[1], positions=range(32, 40)).residual[1].reshape(-1, 64)
    hp = lm.capture(shuffled, residual=[1], positions=range(32, 40)).residual[1].reshape(-1, 64)
    cos = torch.nn.functional.cosine_similarity(h.double(), hp.double(), dim=1).mean()
    assert row["n"] == 24
    assert row["self_sim"] == pytest.approx(float(cos), abs=1e-9)
    assert row["anisotropy"] == pytest.approx(anisotropy(torch.cat([h, hp])), abs=1e-9)


def test_per_window_rows_equal_brute_force_cosines_of_directly_captured_states():
    """Window rows: each sample's mean cos(h_i, h'_i); pair rows: the mean cosine between the 2m vectors of
    one window and the 2m of another, by brute force over every pair; their weighted mean is the
    between-window anisotropy, which excludes the pairs inside one window the pooled estimate holds."""
    lm = build_lm("llama")
    rows = _run("accs-layers", lm, per_window=True, lengths=[40], layers=[1])
    windows = torch.randint(0, lm.vocab_size, (3, 40), generator=torch.Generator().manual_seed(0))
    shuffled = windows.clone()
    for i in range(3):
        shuffled[i] = Shuffle(0, 16).apply(windows[i:i + 1], [i], 0)[0]
    h = lm.capture(windows, residual=[1], positions=range(32, 40)).residual[1].double()  # [3, 8, d]
    hp = lm.capture(shuffled, residual=[1], positions=range(32, 40)).residual[1].double()
    pool = [torch.cat([h[i], hp[i]]) for i in range(3)]  # [16, d] per window: its share of D_hh'
    got = {r["sample"]: r for r in rows if r.get("level") == "window"}
    assert sorted(got) == [0, 1, 2] and all(r["layer_type"] == "full_attention" for r in rows)
    for i in range(3):
        cos = torch.nn.functional.cosine_similarity(h[i], hp[i], dim=1).mean()
        assert got[i]["n"] == 8 and got[i]["sample_self_sim"] == pytest.approx(float(cos), abs=1e-9)
    pairs = {(r["sample"], r["other_sample"]): r for r in rows if r.get("level") == "pair"}
    assert sorted(pairs) == [(0, 1), (0, 2), (1, 2)]
    for (a, b), r in pairs.items():
        brute = [float(torch.nn.functional.cosine_similarity(x, y, dim=0)) for x in pool[a] for y in pool[b]]
        assert r["n"] == 256 and r["cross_cos"] == pytest.approx(sum(brute) / len(brute), abs=1e-9)


# --------------------------------------------------------------------------------------
# Brute force against transformers' own forward
# --------------------------------------------------------------------------------------


def test_suffix_ppl_equals_cross_entropy_of_the_full_logits():
    lm = build_lm("qwen2")
    rows = _run("suffix-ppl", lm, lengths=[30])
    (row,) = [r for r in rows if "stage" not in r]  # the summary; one stage="sequence" row per sequence
    ids = torch.randint(0, lm.vocab_size, (3, 30), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = lm.model(ids).logits[:, 21:29]  # predictions of tokens 22..29, the 8-token suffix
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, lm.vocab_size), ids[:, 22:].reshape(-1))
    per = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 22:], reduction="none").mean(1)  # [3]
    seq = sorted((r for r in rows if r.get("stage") == "sequence"), key=lambda r: r["sequence"])
    assert [r["sequence_nll"] for r in seq] == pytest.approx(per.tolist(), rel=1e-5)
    assert row["n_tokens"] == 24
    assert row["nll"] == pytest.approx(float(nll), rel=1e-5)
    assert row["ppl"] == pytest.approx(math.exp(float(nll)), rel=1e-5)


def test_collapse_modes_rank_curve_equals_brute_force():
    lm = build_lm("gpt2")
    rows = _run("collapse-modes", lm, length=24, long_length=40, conditions=["base", "long"],
                frequency_source="random", frequency_tokens=500)
    freq_ids = torch.randint(0, 256, (1, 500), generator=torch.Generator().manual_seed(0))  # the random source, seed 0
    counts = collections.Counter(freq_ids[0].tolist())
    ranked = sorted(range(256), key=lambda v: (-counts[v], v))
    windows = torch.randint(0, 256, (3, 40), generator=torch.Generator().manual_seed(0))
    for condition, length in (("base", 24), ("long", 40)):
        ids = windows[:, 40 - length:]  # the same suffix tokens in both conditions
        with torch.no_grad():
            nll = -torch.log_softmax(lm.model(ids).logits[:, length - 8:].double(), -1).mean((0, 1))  # [vocab]
        got = [r for r in rows if r["condition"] == condition]
        assert [r["rank_low"] for r in got] == list(range(1, 257))
        for r in got[:5] + got[-5:]:
            token = ranked[r["rank_low"] - 1]
            assert r["token"] == token and r["count"] == counts[token]
            assert r["nll"] == pytest.approx(float(nll[token]), rel=1e-6)
        assert got[0]["uniform_nll"] == pytest.approx(math.log(256))


def test_needle_scorer_agrees_with_greedy_generation(monkeypatch):
    """Teacher-forced argmax scoring equals transformers' greedy decoding: a probe whose answer is
    the model's own greedy continuation is a hit, the corpus answer of a random model a miss."""
    from ctxlens.probes import passkey as needles
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    model = build_model("llama", vocab_size=257)
    with torch.no_grad():  # greedy picks ASCII bytes only, so answers round-trip through text
        model.get_output_embeddings().weight[128:] = 0
    lm = from_model(model, tokenizer=tok)
    real = needles.retrieval_probes

    def greedy_answers(seed, n, **kw):
        probes = real(seed, n, **kw)
        out = []
        for p in probes:
            ids = torch.tensor([tok.encode(p.prompt, add_special_tokens=False)[-(160 - 4):]])
            gen = lm.model.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=tok.eos_token_id)
            out.append(type(p)(p.prompt, tok.decode(gen[0, ids.shape[1]:]), p.key, p.distance_bytes))
        return out

    baseline = needles.needle_accuracy(lm, 160, 0.5, 3, 0, 2, {})  # depth, n_needles, seed, batch_size
    assert baseline["n"] == 3 and baseline["accuracy"] == 0.0 and baseline["needles_lost"] == 0
    assert baseline["prompt_tokens"] <= 160 - 4
    monkeypatch.setattr(needles, "retrieval_probes", greedy_answers)
    assert needles.needle_accuracy(lm, 160, 0.5, 3, 0, 2, {})["accuracy"] == 1.0


def test_rope_theta_sweep_changes_only_the_rope_and_restores_it():
    lm = build_lm("llama")
    ids = torch.randint(0, 256, (1, 30), generator=torch.Generator().manual_seed(3))
    before = lm.token_losses(ids)
    rows = _run("rope-theta-sweep", lm, thetas=[10000.0, 50.0], ppl_lengths=[30], accs_lengths=[30],
                needle_lengths=[])
    (own,) = [r for r in _run("suffix-ppl", lm, lengths=[30]) if "stage" not in r]  # the summary row
    ppl = {r["theta"]: r for r in rows if r["measure"] == "suffix-ppl"}
    assert ppl[10000.0]["nll"] == pytest.approx(own["nll"], rel=1e-6)  # the model's own theta
    assert ppl[50.0]["nll"] != pytest.approx(own["nll"], abs=1e-7)  # a random model barely cares, but does
    assert {r["layer"] for r in rows if r["measure"] == "accs"} == {lm.n_layers - 1}
    assert lm.config.rope_parameters["rope_theta"] == 10000.0 and not lm.extrapolate
    torch.testing.assert_close(lm.token_losses(ids), before, rtol=0, atol=0)
    assert "rope" in get_experiment("rope-theta-sweep").needs  # the runner refuses non-RoPE families


# --------------------------------------------------------------------------------------
# Every experiment on several families: tidy rows
# --------------------------------------------------------------------------------------

EXPERIMENTS = {
    "accs-layers": {"lengths": [24, 32]},
    "accs-boundary": {"lengths": [32], "boundaries": [0.5, 1.0]},
    "accs-length": {"lengths": [40], "period_len": 10, "stride": 3},
    "anisotropy-compression": {"lengths": [32], "windows": [1, 4, 0], "n_bins": 2},
    "suffix-ppl": {"lengths": [24, 32]},
    "collapse-modes": {"length": 24, "long_length": 32, "frequency_source": "random", "frequency_tokens": 300,
                       "rank_bins": 6},
}
GEOMETRY_COLUMNS = {"length", "seed", "layer", "stream", "n", "anisotropy", "flag"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_experiment_writes_tidy_rows_on_every_family(family):
    lm = build_lm(family)
    runs = dict(EXPERIMENTS)
    if "rope" in lm.family.supports:
        runs["rope-theta-sweep"] = {"thetas": [500.0], "ppl_lengths": [24], "accs_lengths": [24], "needle_lengths": []}
    for name, options in runs.items():
        rows = _run(name, lm, **options)
        assert rows, name
        keys = {k for r in rows for k in r}
        assert not any(k.startswith(("accs_", "self_sim_", "anisotropy_")) for k in keys)  # no coordinate in a name
        geometry = [r for r in rows if "accs" in r]
        if name.startswith("accs") or name == "rope-theta-sweep":
            want = GEOMETRY_COLUMNS | {"boundary", "self_sim", "accs", "perturb_start", "perturb_end"}
            assert want | ({"period_len"} if name == "accs-length" else {"cut_length"}) <= set(geometry[0])
            assert all(r["flag"] is None and -1 <= r["accs"] <= 2 for r in geometry), geometry
        if name == "anisotropy-compression":
            assert GEOMETRY_COLUMNS <= keys
            assert {r["perturbation"] for r in rows} == {"local-shuffle", "none"}
            assert sum(r["n_sequences"] for r in rows if r["perturbation"] == "none") == 3
        if name in ("suffix-ppl", "collapse-modes"):
            assert all(r["flag"] is None and r.get("nll", r.get("sequence_nll")) > 0 for r in rows)


def test_cli_runs_accs_layers_on_the_zoo(tmp_path):
    from ctxlens.cli import main
    from ctxlens.runner import read_rows

    out = tmp_path / "run"
    assert main(["run", "accs-layers", "--model", "zoo:random-llama", "--out", str(out), "--lengths", "48",
                 "--n-sequences", "2", "--suffix-len", "8", "--streams", "residual,block", "--no-progress"]) == 0
    rows = read_rows(out)
    assert {(r["stream"], r["layer"]) for r in rows} == {(s, i) for s in ("residual", "block") for i in range(2)}
    assert all(r["model"] == "zoo:random-llama" and r["source"] == "sotu" for r in rows)  # the natural text


@pytest.mark.parametrize("name,options,message", [
    ("accs-boundary", {"boundaries": [1.5]}, r"Option 'boundaries' must be in \[0, 1\], got 1.5"),
    ("accs-layers", {"streams": ["mlp"]}, "Option 'streams' must be one of residual, block, got 'mlp'"),
    ("accs-layers", {"lengths": [8]}, "too short"),
    ("accs-layers", {"suffix_positions": 99}, "suffix_positions"),
    ("accs-length", {"suffix_len": 300}, "longer than period_len"),
    ("collapse-modes", {"conditions": ["odd"]}, "Option 'conditions' must be one of base, shuffled, long"),
    ("rope-theta-sweep", {"needle_depth": 2.0}, "needle_depth"),
])
def test_bad_options_are_one_sentence_errors(name, options, message):
    with pytest.raises(CtxlensError, match=message):
        make_config(get_experiment(name).Config, options)


def test_bad_layer_is_a_clear_error():
    with pytest.raises(CtxlensError, match="Layer 5 does not exist"):
        build_lm("llama").layer_indices([5])
