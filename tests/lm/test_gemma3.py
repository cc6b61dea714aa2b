"""Gemma 3 (issue 22 part 3): five sliding-window layers (RoPE base 1e4) per global layer (base 1e6).

Checked against independent truths: the RoPE the config asks for (closed-form inverse
frequencies, transformers' own rotary module), models built from an edited config with the
same weights, and transformers' eager attention probabilities.
"""

import copy
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, Gemma3Config, Gemma3TextConfig

from ctxlens import CtxlensError
from ctxlens.cli import main
from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm import from_model
from ctxlens.lm.analysis.selfextend import rotate
from ctxlens.probes.extrapolation import applied, parse_transform
from ctxlens.probes.qk import scan
from ctxlens.runner.store import read_rows
from tests.conftest import build_lm

TEXT = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, sliding_window=16, query_pre_attn_scalar=16,
            max_position_embeddings=128)
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
              patch_size=14)
SLIDING, GLOBAL = [0, 1, 2, 3, 4], [5]
L = 40  # longer than the window of 16


def _config(multimodal: bool = False, **text):
    cfg = Gemma3TextConfig(**{**TEXT, **text})
    if not multimodal:
        return cfg
    return Gemma3Config(text_config=cfg.to_dict(), vision_config=VISION, mm_tokens_per_image=4,
                        image_token_index=255, boi_token_index=253, eoi_token_index=254)


def _model(config, state=None, attn: str | None = None):
    torch.manual_seed(0)
    kwargs = {"attn_implementation": attn} if attn else {}
    model = AutoModelForCausalLM.from_config(copy.deepcopy(config), **kwargs).eval()
    with torch.no_grad():  # zero-initialised norm weights get values, so every branch contributes
        for p in model.parameters():
            if p.abs().max() == 0:
                p.normal_(0.0, 0.3)
    if state is not None:
        model.load_state_dict(state)
    return model


def _text(config):
    return config.get_text_config()


@pytest.fixture(params=[False, True], ids=["gemma3_text", "gemma3"])
def multimodal(request):
    return request.param


@pytest.fixture
def tokens():
    return torch.randint(3, 250, (1, L), generator=torch.Generator().manual_seed(1))


def test_layer_types_and_frequencies_follow_the_config(multimodal):
    config = _config(multimodal)
    lm = from_model(_model(config))
    text = _text(config)
    assert text.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    for layer in range(6):
        kind = text.layer_types[layer]
        base = text.rope_parameters[kind]["rope_theta"]
        assert base == (1e4 if layer in SLIDING else 1e6)
        closed_form = 1.0 / base ** (torch.arange(0, 16, 2, dtype=torch.float) / 16)  # [8]
        assert lm.layer_type(layer) == kind
        torch.testing.assert_close(lm.inv_freq(layer), closed_form)
        assert lm.layer_rotary_dims(layer) == 16


def test_per_layer_frequencies_without_transformers_nesting_method(monkeypatch):
    """transformers 5.17 (the GPU machine's) has no ``nested_rope_parameter_keys``; the per-layer
    frequencies must still be the closed form of each layer type's base (the profile's positional
    heads failed there with "no attribute 'inv_freq'")."""
    config = _config()
    lm = from_model(_model(config))
    with_method = [lm.inv_freq(layer).clone() for layer in range(6)]
    for klass in type(config).__mro__:
        if "nested_rope_parameter_keys" in vars(klass):
            monkeypatch.delattr(klass, "nested_rope_parameter_keys")
    assert not hasattr(config, "nested_rope_parameter_keys")
    for layer in range(6):
        base = 1e4 if layer in SLIDING else 1e6
        closed_form = 1.0 / base ** (torch.arange(0, 16, 2, dtype=torch.float) / 16)  # [8]
        torch.testing.assert_close(lm.inv_freq(layer), closed_form)
        torch.testing.assert_close(lm.inv_freq(layer), with_method[layer])


@pytest.mark.parametrize("layer", [0, 5])
def test_per_layer_frequencies_move_q_as_transformers_rotary_does(layer):
    """Rotating a post-RoPE vector at position p by s (with the layer's inv_freq) equals
    transformers' own RoPE of that layer type at p + s."""
    lm = from_model(_model(_config()))
    rotary = lm.model.model.rotary_emb
    from transformers.models.gemma3.modeling_gemma3 import apply_rotary_pos_emb

    x = torch.randn(1, 1, 5, 16, generator=torch.Generator().manual_seed(2))  # [B, H, n, d]
    pos = torch.tensor([[0, 3, 7, 20, 33]])

    def rope(p):
        cos, sin = rotary(x, p, lm.layer_type(layer))
        return apply_rotary_pos_emb(x, x, cos, sin)[0]

    moved = rotate(rope(pos), torch.full((5,), 50), lm.inv_freq(layer), "half", 16)
    torch.testing.assert_close(moved, rope(pos + 50), rtol=1e-4, atol=1e-4)
    other = 5 if layer == 0 else 0  # the other layer type's frequencies would not do
    wrong = rotate(rope(pos), torch.full((5,), 50), lm.inv_freq(other), "half", 16)
    assert (wrong - rope(pos + 50)).abs().max() > 1e-2


@pytest.mark.parametrize("layer", [0, 5])
def test_selfextend_uses_the_layers_own_frequencies(layer):
    """SelfExtend's grouped logits of a sliding and the global layer against brute force on
    transformers' own rotary code of that layer type (no mask: every key visible)."""
    from transformers.models.gemma3.modeling_gemma3 import apply_rotary_pos_emb

    import ctxlens.lm.analysis.selfextend as se_mod

    lm = from_model(_model(_config()))
    kind = lm.layer_type(layer)

    def rope(x, pos):  # x [B, heads, n, d] pre-RoPE at positions pos [n]
        cos, sin = lm.model.model.rotary_emb(x, pos[None], kind)
        return apply_rotary_pos_emb(x, x, cos, sin)[0]

    g = torch.Generator().manual_seed(3)
    n, group, window = 30, 3, 5
    qp, kp, v = (torch.randn(1, heads, n, 16, generator=g) for heads in (4, 2, 2))
    pos = torch.arange(n)
    near = rope(qp, pos) @ rope(kp, pos).repeat_interleave(2, 1).transpose(-1, -2)
    k_far = rope(kp, pos // group).repeat_interleave(2, 1)  # [B, H, n, d]
    far = rope(qp, pos // group + window - window // group) @ k_far.transpose(-1, -2)
    dist = pos[:, None] - pos[None]
    logits = torch.where(dist < window, near, far).masked_fill(dist < 0, float("-inf")) * 0.25
    truth = (torch.softmax(logits, -1) @ v.repeat_interleave(2, 1)).transpose(1, 2)  # [B, n, H, d]
    ov = se_mod._overrides(lm)[layer]
    ov.selfextend = se_mod.SelfExtend(group, window)
    assert ov.layer == layer
    ours, _ = se_mod._selfextend_attention(lm.attention(layer), rope(qp, pos), rope(kp, pos), v, None, ov, scaling=0.25)
    torch.testing.assert_close(ours, truth, rtol=1e-4, atol=1e-5)


def test_selfextend_group_one_or_window_beyond_the_input_is_the_model(tokens):
    """Sliding masks survive the SelfExtend attention path."""
    from ctxlens.lm.analysis.selfextend import self_extend

    lm = from_model(_model(_config()))
    with torch.no_grad():
        base = lm.model(tokens).logits
        for group, window in ((1, 4), (4, L)):
            with self_extend(lm, group, window):
                torch.testing.assert_close(lm.model(tokens).logits, base, rtol=1e-4, atol=1e-5)
        with self_extend(lm, 4, 8):
            assert (lm.model(tokens).logits - base).abs().max() > 1e-3


CHANGES = [
    ({"theta": 5e6}, None, ["full_attention"]),
    ({"theta": 5e6}, "global", ["full_attention"]),
    ({"theta": 2e3}, "sliding", ["sliding_attention"]),
    ({"scaling": {"rope_type": "linear", "factor": 4.0}}, "all", ["sliding_attention", "full_attention"]),
    ({"scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}}, None,
     ["full_attention"]),
]


@pytest.mark.parametrize("change,layers,changed", CHANGES, ids=lambda c: str(c))
def test_set_rope_equals_model_built_from_edited_config(multimodal, change, layers, changed, tokens):
    config = _config(multimodal)
    model = _model(config)
    lm = from_model(model)
    with torch.no_grad():
        before = model(tokens).logits
    params = lm.set_rope(**change, layers=layers)
    assert sorted(params) == sorted(changed)
    edited = copy.deepcopy(config)  # the truth: the config edited by hand, entry by entry
    for kind in changed:
        entry = _text(edited).rope_parameters[kind]
        if "theta" in change:
            entry["rope_theta"] = change["theta"]
        else:
            entry.clear()
            entry.update(rope_theta=_text(config).rope_parameters[kind]["rope_theta"], **change["scaling"])
    fresh = _model(edited, model.state_dict())
    with torch.no_grad():
        ours, truth = model(tokens).logits, fresh(tokens).logits
    torch.testing.assert_close(ours, truth, rtol=1e-5, atol=1e-5)
    assert (ours - before).abs().max() > 1e-4  # the change did something
    assert _text(model.config).rope_parameters == _text(edited).rope_parameters


def _qk(lm, tokens, layers) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    out = {}
    scan(lm, tokens, layers, lambda v: out.__setitem__(v.layer, (v.q.clone(), v.k.clone())))
    return out


def test_default_target_leaves_sliding_layers_bit_identical(tokens):
    lm = from_model(_model(_config()))
    before = _qk(lm, tokens, SLIDING + GLOBAL)
    lm.set_rope(theta=5e6)
    after = _qk(lm, tokens, SLIDING + GLOBAL)
    for layer in SLIDING:  # their inputs do not depend on the global layer after them
        assert torch.equal(before[layer][0], after[layer][0]) and torch.equal(before[layer][1], after[layer][1])
    assert not torch.equal(before[5][0], after[5][0])
    lm.set_rope(theta=2e4, layers="sliding")
    assert not torch.equal(before[0][0], _qk(lm, tokens, [0])[0][0])


@pytest.mark.parametrize("softcap", [None, 0.5])
def test_captured_qk_reproduce_eager_attention(multimodal, softcap, tokens):
    """Sliding layer 0 and global layer 5, 40 tokens > window 16. Gemma 3 keeps
    attn_logit_softcapping in its config but its attention does not apply it (transformers 5):
    eager's probabilities are the truth either way."""
    config = _config(multimodal, attn_logit_softcapping=softcap)
    model = _model(config)
    lm = from_model(model)
    eager = _model(config, model.state_dict(), attn="eager")
    with torch.no_grad():
        truth = eager(tokens, output_attentions=True).attentions  # per layer [1, H, L, L]
    views = {}
    scan(lm, tokens, [0, 5], lambda v: views.__setitem__(v.layer, v.probs(torch.arange(L))))
    for layer in (0, 5):
        torch.testing.assert_close(views[layer], truth[layer][0], rtol=1e-5, atol=1e-6)
    assert (truth[0][0][:, -1, :L - 16] == 0).all() and (truth[5][0][:, -1, :L - 16] > 0).all()  # the window bites


def test_token_losses_equal_the_models_cross_entropy(multimodal, tokens):
    config = _config(multimodal, final_logit_softcapping=3.0)
    model = _model(config)
    lm = from_model(model)
    with torch.no_grad():
        logits = model(tokens).logits[0, :-1].float()
    truth = torch.nn.functional.cross_entropy(logits, tokens[0, 1:], reduction="none")
    torch.testing.assert_close(lm.token_losses(tokens)[0], truth, rtol=1e-5, atol=1e-5)


def _rows(lm, name, **options):
    exp = get_experiment(name)
    config = make_config(exp.Config, {"source": "random", "lengths": [L], "n_samples": 1, "seed": 0, **options})
    return [r for unit in exp.plan(config) for r in exp.run(lm, config, unit, {})]


@pytest.mark.parametrize("name,options", [
    ("rope-dims", {"n_pairs": 30}),
    ("dominant-dimension", {"top_k": 8, "n_bins": 4}),
    ("positional-heads", {"top_k": 8}),
    ("rope-dim-ablation", {"top_k": 8, "n_bins": 4, "n_queries": 8, "ablations": ["high:2"]}),
])
def test_rope_experiment_rows_name_each_layers_rope(multimodal, name, options):
    config = _config(multimodal)
    lm = from_model(_model(config))
    text = _text(config)
    rows = [r for r in _rows(lm, name, train_length=64, **options) if "layer" in r]
    assert {r["layer"] for r in rows} == set(range(6))
    for r in rows:
        kind = text.layer_types[r["layer"]]
        assert r["layer_type"] == kind
        assert r["rope_theta"] == text.rope_parameters[kind]["rope_theta"] and r["n_dims"] == 8


def test_transforms_target_global_layers_by_default_and_restore():
    config = _config()
    lm = from_model(_model(config))
    own = copy.deepcopy(config.rope_parameters)
    for spec, yarn_types in [("yarn:4", ["full_attention"]), ("yarn:4@all", ["sliding_attention", "full_attention"]),
                             ("yarn:4@sliding", ["sliding_attention"])]:
        with applied(lm, spec, 32):
            for kind in ("sliding_attention", "full_attention"):
                rope_type = lm.config.rope_parameters[kind]["rope_type"]
                assert rope_type == ("yarn" if kind in yarn_types else "default"), (spec, kind)
        assert lm.config.rope_parameters == own and lm.config.max_position_embeddings == 128
    assert parse_transform("theta:5e5@all").layers == "all"
    for bad in ("none@all", "selfextend:2:8@all", "yarn:4@"):
        with pytest.raises(CtxlensError, match="only RoPE changes take"):
            parse_transform(bad)
    rows = _rows(lm, "rope-dims", n_pairs=10, transforms=["theta:5e5"], layers=[0, 5])
    assert {(r["layer"], r["rope_theta"]) for r in rows} == {(0, 1e4), (5, 5e5)}
    assert lm.config.rope_parameters == own


def test_theta_sweep_changes_global_layers_as_an_edited_config_does():
    config = _config()
    model = _model(config)
    lm = from_model(model)
    common = {"source": "random", "seed": 0, "suffix_len": 8, "n_sequences": 2}
    sweep = get_experiment("rope-theta-sweep")
    cfg = make_config(sweep.Config, {**common, "thetas": [5e6], "ppl_lengths": [L], "accs_lengths": [L],
                                     "needle_lengths": []})
    rows = [r for unit in sweep.plan(cfg) for r in sweep.run(lm, cfg, unit, {})]
    assert {(r["own_theta"], r["rope_layer_types"]) for r in rows} == {(1e6, "full_attention")}
    assert lm.config.rope_parameters == config.rope_parameters  # restored
    edited = copy.deepcopy(config)
    edited.rope_parameters["full_attention"]["rope_theta"] = 5e6
    suffix = get_experiment("suffix-ppl")
    cfg = make_config(suffix.Config, {**common, "lengths": [L]})
    truth = suffix.run(from_model(_model(edited, model.state_dict())), cfg, suffix.plan(cfg)[0], {})[0]
    ppl = next(r for r in rows if r["measure"] == "suffix-ppl")
    assert ppl["ppl"] == pytest.approx(truth["ppl"], rel=1e-6)


@pytest.mark.parametrize("family,kind", [("llama", "full_attention"), ("mistral", "sliding_attention"),
                                         ("gemma2", None)])
def test_one_rope_models_name_their_layer_types(family, kind):
    """Without layer_types every layer is global, or sliding when the config sets a window (mistral)."""
    lm = build_lm(family)
    rows = _rows(lm, "rope-dims", n_pairs=5, train_length=64)
    for r in rows:
        types = getattr(lm.config, "layer_types", None)
        assert r["layer_type"] == (types[r["layer"]] if kind is None else kind)
        assert r["rope_theta"] == lm.config.rope_parameters["rope_theta"]


def test_rope_layers_errors():
    lm = from_model(_model(_config()))
    with pytest.raises(CtxlensError, match="no RoPE layers of type 'local'.*global, sliding, all"):
        lm.set_rope(theta=1e5, layers="local")
    gemma2 = build_lm("gemma2")  # one RoPE shared by sliding and global layers
    with pytest.raises(CtxlensError, match="one RoPE shared by all its layers.*'global'"):
        gemma2.set_rope(theta=1e5, layers="global")
    assert gemma2.set_rope(theta=1e5)["rope_theta"] == 1e5
    llama = build_lm("llama")  # every layer is global: "global" is all of them
    assert llama.set_rope(theta=1e5, layers="global")["rope_theta"] == 1e5
    with pytest.raises(CtxlensError, match="cannot change only the 'sliding' ones"):
        llama.set_rope(theta=1e5, layers="sliding")


def test_cli_rope_dims_on_a_saved_gemma3(tmp_path):
    model = _model(_config())
    model.save_pretrained(tmp_path / "g3")
    out = tmp_path / "run"
    code = main(["run", "rope-dims", "--model", str(tmp_path / "g3"), "--out", str(out), "--no-progress",
                 "--rope-theta", "5e6", "--source", "random", "--lengths", "40", "--n-samples", "1",
                 "--n-pairs", "20", "--train-length", "64"])
    assert code == 0
    rows = read_rows(out)
    assert {(r["layer"], r["layer_type"], r["rope_theta"]) for r in rows} == \
        {(i, "sliding_attention", 1e4) for i in SLIDING} | {(5, "full_attention", 5e6)}
    assert len(rows) == 6 * 4 * 8  # layers x heads x pairs
    assert {json.dumps(r["rope_changed"], sort_keys=True) for r in rows} == \
        {json.dumps({"full_attention": {"rope_theta": 5e6, "rope_type": "default"}}, sort_keys=True)}
    saved = json.loads((tmp_path / "g3" / "config.json").read_text())
    assert saved["rope_parameters"]["full_attention"]["rope_theta"] == 1e6  # the files are untouched
    with pytest.raises(SystemExit):
        main(["run", "rope-dims", "--model", str(tmp_path / "g3"), "--out", str(tmp_path / "r2"),
              "--rope-layers"])
    assert main(["run", "rope-dims", "--model", str(tmp_path / "g3"), "--out", str(tmp_path / "r3"),
                 "--rope-layers", "sliding", "--source", "random"]) == 2  # names layers but no change
