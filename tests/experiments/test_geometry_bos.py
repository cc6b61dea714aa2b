"""Issue 31 part 7: the geometry experiments put a BOS first where the tokenizer adds one, never perturb it,
and record it in their rows.

Independent truths: the token ids the model's embedding layer actually receives (a forward hook, not the
experiment's bookkeeping), the tokenizer's own BOS id, a plain transformers forward with
``output_hidden_states`` computed here, cosines by brute force, and the shuffle range written out by hand
from the convention (text prefix after the BOS: positions [1, 1 + round(b x (prefix_len - 1)))).
"""

from __future__ import annotations

import math

import pytest
import torch
from tokenizers import processors
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from ctxlens.data.tokenizer import byte_backend
from ctxlens.experiments import get_experiment, make_config
from ctxlens.lm.loading import from_model
from ctxlens.lm.tiny import tiny_config
from ctxlens.probes.perturb import Shuffle
from ctxlens.probes.windows import cut_windows

BOS, EOS = "<s>", "</s>"
TEXT = {"source": "builtin:test", "n_sequences": 3, "suffix_len": 8, "batch_size": 3}


def _lm(adds_bos: bool):
    """A tiny random llama (2 layers) with a byte tokenizer whose post-processor puts its BOS first (or not)."""
    backend = byte_backend()
    backend.add_special_tokens([BOS, EOS])
    if adds_bos:
        backend.post_processor = processors.TemplateProcessing(single=f"{BOS} $A",
                                                               special_tokens=[(BOS, backend.token_to_id(BOS))])
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS, pad_token=EOS)
    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=len(tok), num_hidden_layers=2)
    return from_model(AutoModelForCausalLM.from_config(config).eval(), tok, name=f"tiny-bos-{adds_bos}")


def _run(name, lm, **options) -> tuple[list[dict], list[torch.Tensor]]:
    """(every row, the ids [B, L] of every forward, as the embedding layer received them)."""
    exp = get_experiment(name)
    config = make_config(exp.Config, options)
    seen: list[torch.Tensor] = []
    hook = lm.model.get_input_embeddings().register_forward_pre_hook(lambda _m, args: seen.append(args[0].clone()))
    try:
        cache: dict = {}
        rows = [dict(unit, **r) for unit in exp.plan(config) for r in exp.run(lm, config, unit, cache)]
    finally:
        hook.remove()
    return rows, seen


def _end(prefix_len: int, boundary: float, bos: bool) -> int:
    """The convention by hand: the shuffle ends round-half-up(b x text prefix) after the first text token."""
    t0 = 1 if bos else 0
    return t0 + math.floor(boundary * (prefix_len - t0) + 0.5)


# ------------------------------------------------------------------------------------------------ (a)
def test_accs_layers_windows_start_with_the_bos_and_the_shuffle_leaves_it_alone():
    lm = _lm(True)
    bos = lm.tokenizer.bos_token_id
    rows, seen = _run("accs-layers", lm, **TEXT, lengths=[24, 40], boundary=1.0, layers=[0])
    assert len(seen) == 4  # per length: the originals, then their shuffled copies (one batch of 3)
    by_length = {}
    for original, perturbed in zip(seen[::2], seen[1::2]):
        length = original.shape[1]
        end = _end(length - 8, 1.0, True)  # b = 1: the whole text prefix, positions [1, length - 8)
        assert end == length - 8
        assert (original[:, 0] == bos).all() and (perturbed[:, 0] == bos).all()
        assert (original[:, 1:] != bos).all()  # the BOS appears once, first: nothing shuffled it elsewhere
        assert torch.equal(perturbed[:, end:], original[:, end:])
        for p, o in zip(perturbed, original):
            assert sorted(p[1:end].tolist()) == sorted(o[1:end].tolist())
        assert not torch.equal(perturbed[:, 1:end], original[:, 1:end])
        by_length[length] = original
    assert torch.equal(by_length[24][:, 1:], by_length[40][:, -23:])  # BOS, then the same last text tokens
    for r in rows:
        assert r["bos"] is True and r["perturb_start"] == 1 and r["perturb_end"] == r["length"] - 8


def test_accs_boundary_half_shuffles_the_distant_half_of_the_text_prefix_only():
    lm = _lm(True)
    rows, seen = _run("accs-boundary", lm, **TEXT, lengths=[40], boundaries=[0.5, 1.0], layers=[0])
    original, half, whole = seen  # the originals, then one copy per boundary
    for copy, b in ((half, 0.5), (whole, 1.0)):
        end = _end(32, b, True)
        assert (copy[:, 0] == lm.tokenizer.bos_token_id).all() and torch.equal(copy[:, end:], original[:, end:])
        for p, o in zip(copy, original):
            assert sorted(p[1:end].tolist()) == sorted(o[1:end].tolist())
    assert _end(32, 0.5, True) == 17  # 31 text prefix tokens: round(15.5) = 16 of them, positions 1..16
    got = {r["boundary"]: (r["perturb_start"], r["perturb_end"]) for r in rows if "level" not in r}
    assert got == {0.5: (1, 17), 1.0: (1, 32)}


# ------------------------------------------------------------------------------------------------ (b)
def test_accs_with_a_bos_equals_a_plain_transformers_forward_of_the_shuffled_text():
    lm = _lm(True)
    bos = lm.tokenizer.bos_token_id
    rows, seen = _run("accs-layers", lm, **TEXT, lengths=[40], boundary=0.5, layers=[0], streams=["block"])
    original, perturbed = seen
    end = _end(32, 0.5, True)
    expected = original.clone()
    for i in range(3):  # the experiment's seeded permutation, of the text positions [1, end) only
        expected[i, 1:end] = original[i, 1:end][torch.randperm(end - 1, generator=torch.Generator().manual_seed(
            _seed(0, i, 1, end)))]
    assert (original[:, 0] == bos).all() and torch.equal(perturbed, expected)
    with torch.no_grad():  # hidden_states[1]: the output of block 0
        h = lm.model(input_ids=original, output_hidden_states=True).hidden_states[1][:, 32:40].double()  # [3, 8, d]
        hp = lm.model(input_ids=perturbed, output_hidden_states=True).hidden_states[1][:, 32:40].double()
    cos = torch.nn.functional.cosine_similarity(h, hp, dim=-1)  # [3, 8]
    pool = torch.nn.functional.normalize(torch.cat([h, hp]).reshape(-1, h.shape[-1]), dim=1)  # [48, d]
    gram = pool @ pool.T
    aniso = (gram.sum() - gram.diagonal().sum()) / (48 * 47)
    (row,) = [r for r in rows if "level" not in r]
    assert row["bos"] is True and row["n"] == 24 and (row["perturb_start"], row["perturb_end"]) == (1, end)
    assert row["self_sim"] == pytest.approx(float(cos.mean()), abs=1e-6)
    assert row["anisotropy"] == pytest.approx(float(aniso), abs=1e-6)
    assert row["accs"] == pytest.approx(float(cos.mean() - aniso), abs=1e-6)
    windows = {r["sample"]: r["sample_self_sim"] for r in rows if r.get("level") == "window"}
    assert windows == pytest.approx({i: float(cos[i].mean()) for i in range(3)}, abs=1e-6)


def _seed(seed: int, sample: int, start: int, end: int) -> int:
    """The perturbation seed of ``ctxlens.probes.perturb`` written out: SHA-256 of the sample and range."""
    import hashlib

    digest = hashlib.sha256(f"ctxlens.perturb:{seed}:{sample}:{start}:{end}:0".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


# ------------------------------------------------------------------------------------------------ (c)
@pytest.fixture(scope="module")
def zoo():
    import ctxlens

    return ctxlens.load("zoo:rope")


def test_bos_false_on_a_zoo_model_gives_todays_accs_rows(zoo):
    """Today's rows by hand: the text windows, Shuffle(0, round(b x prefix_len)) on the ids, a plain forward."""
    rows, _ = _run("accs-boundary", zoo, **TEXT, lengths=[40], boundaries=[0.5, 1.0], layers=[1],
                   streams=["block"], bos=False)
    windows = cut_windows(zoo, "builtin:test", 40, 3, 0)  # [3, 40]
    with torch.no_grad():
        h = zoo.model(input_ids=windows, output_hidden_states=True).hidden_states[2][:, 32:40].double()  # [3, 8, d]
    pooled = {r["boundary"]: r for r in rows if "level" not in r}
    for b, end in ((0.5, 16), (1.0, 32)):
        shuffled = Shuffle(0, end).apply(windows, [0, 1, 2], 0)
        assert not torch.equal(shuffled[:, :end], windows[:, :end]) and torch.equal(shuffled[:, end:], windows[:, end:])
        with torch.no_grad():
            hp = zoo.model(input_ids=shuffled, output_hidden_states=True).hidden_states[2][:, 32:40].double()
        cos = torch.nn.functional.cosine_similarity(h, hp, dim=-1)  # [3, 8]
        pool = torch.nn.functional.normalize(torch.cat([h, hp]).reshape(-1, h.shape[-1]), dim=1)  # [48, d]
        gram = pool @ pool.T
        aniso = (gram.sum() - gram.diagonal().sum()) / (48 * 47)
        row = pooled[b]
        assert row["bos"] is False and (row["perturb_start"], row["perturb_end"], row["window"]) == (0, end, 0)
        assert row["prefix_len"] == 32 and row["n"] == 24
        assert row["self_sim"] == pytest.approx(float(cos.mean()), abs=1e-6)
        assert row["anisotropy"] == pytest.approx(float(aniso), abs=1e-6)


@pytest.mark.parametrize("name,options", [
    ("anisotropy-compression", {"lengths": [40], "windows": [4, 0], "n_bins": 0}),
    ("collapse-modes", {"length": 40, "conditions": ["shuffled"], "frequency_tokens": 2000, "rank_bins": 4}),
])
def test_bos_false_on_a_zoo_model_feeds_todays_ids(zoo, name, options):
    """The ids every forward receives are today's: the windows and Shuffle(0, prefix_len, window) of them."""
    rows, seen = _run(name, zoo, **TEXT, **options, bos=False)
    windows = cut_windows(zoo, "builtin:test", 40, 3, 0)  # [3, 40]
    local = [Shuffle(0, 32, w).apply(windows, [0, 1, 2], 0) for w in options.get("windows", [])]
    want = [windows, *local] if name == "anisotropy-compression" else [Shuffle(0, 32).apply(windows, [0, 1, 2], 0)]
    assert len(seen) == len(want) and all(torch.equal(a, b) for a, b in zip(seen, want))
    assert rows and all(r["bos"] is False for r in rows)


# ------------------------------------------------------------------------------------------------ (d)
SMALL = {
    "accs-layers": {"lengths": [24], "layers": [0]},
    "accs-boundary": {"lengths": [24], "boundaries": [0.5, 1.0]},
    "accs-length": {"lengths": [24, 40], "period_len": 8, "stride": 2, "source": "random"},
    "anisotropy-compression": {"lengths": [24], "windows": [4, 0], "n_bins": 1},
    "collapse-modes": {"length": 24, "long_length": 40, "frequency_tokens": 2000, "rank_bins": 4},
    "rope-theta-sweep": {"thetas": [5e4], "ppl_lengths": [24], "accs_lengths": [24], "needle_lengths": []},
}


@pytest.mark.parametrize("bos", [None, False, True], ids=["auto", "false", "true"])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_geometry_row_records_the_bos_every_forward_reads(name, bos):
    """Auto puts the BOS first on a model whose tokenizer adds one (not before accs-length's synthetic ids);
    true/false force it. Every forward (originals and perturbed copies) starts with it iff the rows say so."""
    lm = _lm(True)
    rows, seen = _run(name, lm, **{**TEXT, **SMALL[name], "bos": bos})
    used = bos if bos is not None else name != "accs-length"
    assert rows and seen
    assert {r["bos"] for r in rows if r.get("measure") != "needle"} == {used}
    first = torch.cat([ids[:, 0] for ids in seen])
    assert bool((first == lm.tokenizer.bos_token_id).all()) is used
    assert bool((first == lm.tokenizer.bos_token_id).any()) is used
    starts = {r["perturb_start"] for r in rows if "perturb_start" in r}
    assert starts <= {int(used)}


def test_auto_gives_no_bos_where_the_tokenizer_adds_none_and_true_forces_one():
    lm = _lm(False)
    bos = lm.tokenizer.bos_token_id
    rows, seen = _run("accs-layers", lm, **TEXT, lengths=[24], layers=[0])
    assert {r["bos"] for r in rows} == {False} and not any((ids[:, 0] == bos).any() for ids in seen)
    rows, seen = _run("accs-layers", lm, **TEXT, lengths=[24], layers=[0], bos=True)
    assert {r["bos"] for r in rows} == {True} and all((ids[:, 0] == bos).all() for ids in seen)


def test_head_masking_masks_the_heads_positional_heads_selects_on_a_model_that_adds_a_bos():
    """The masking's own detection reads the same windows as ``positional-heads`` given the same values,
    BOS included (issue 31: on Gemma-3 the masking detected without the BOS and shared 2 of 4 heads).
    Truth: positional-heads' own selection rows, and the ids the embedding layer received."""
    lm = _lm(True)
    shared = {"source": "builtin:test", "top_k": 6, "n_queries": 12, "fractions": [0.25, 0.5]}
    heads, _ = _run("positional-heads", lm, **shared, lengths=[40], n_samples=3)
    chosen = {r["fraction"]: [list(h) for h in r["heads"]] for r in heads if r.get("kind") == "selection"}
    masking, seen = _run("head-masking", lm, **shared, lengths=[32], tasks=["perplexity"], n_draws=1,
                         n_samples=1, detect_length=40, detect_samples=3)
    masked = {r["fraction"]: r["heads"] for r in masking if r["condition"] == "top"}
    assert masked == chosen
    assert all(bool((ids[:, 0] == lm.tokenizer.bos_token_id).all()) for ids in seen)
    forced, _ = _run("head-masking", lm, **shared, lengths=[32], tasks=["perplexity"], n_draws=1, n_samples=1,
                     detect_length=40, detect_samples=3, bos=False)
    assert {r["bos"] for r in forced} == {False}
