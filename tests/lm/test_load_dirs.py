"""Every hand-written family loads from a ``save_pretrained`` directory, the path users take.

For each family a tiny random model is saved and loaded back with ``ctxlens.load(dir)``; the
loaded model must be the original one as far as every analysis can tell: the same logits, token
losses equal to the cross-entropy of the original's logits (which checks the family's logit
post-processing), and, where the family supports q/k capture, softmax(q k^T * scaling + mask)
from the captured post-RoPE q and k equals the original's eager attention probabilities
(transformers' own ``output_attentions``), whatever attention the loader chose (issue 22 part 4:
gemma2's class refuses sdpa, so the loader must fall back to eager and still record q/k).
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, Gemma3Config, Gemma3TextConfig

import ctxlens
from ctxlens.lm.families import FAMILIES
from tests.conftest import build_model

# Gemma 3 has no entry in ctxlens.lm.tiny: five sliding-window layers (window 16, RoPE base 1e4)
# then one global layer (RoPE base 1e6), the shape of the real models at a tiny width.
GEMMA3_TEXT = dict(
    vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, sliding_window=16, query_pre_attn_scalar=16,
    max_position_embeddings=2048, attention_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2,
)
# The multimodal checkpoint: the same text model behind a one-layer vision tower (unused by ctxlens).
# Real Gemma 3 leaves the final logit soft-cap unset; here it is small enough to bite (the tiny model's
# logits are below 1), so token_losses must find it in the nested text config. (transformers' Gemma 3
# attention never passes its config's attn_logit_softcapping to the attention function, so setting that
# would change nothing.)
GEMMA3_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                     image_size=28, patch_size=14)
GEMMA3_CAPS = dict(final_logit_softcapping=0.5)
# gemma2's default caps (50 on attention scores, 30 on logits) leave a tiny model's scores (|s| < 0.2)
# and logits untouched to 1e-7; caps that bite make the eager fallback's soft-capping observable.
OVERRIDES = {"gemma2": dict(attn_logit_softcapping=0.05, final_logit_softcapping=0.5)}


def _gemma3(name: str):
    """Seeded random gemma3_text / gemma3 model, initialised as ``tests.conftest.build_model`` does."""
    if name == "gemma3_text":
        config = Gemma3TextConfig(**GEMMA3_TEXT)
    else:
        config = Gemma3Config(text_config={**GEMMA3_TEXT, **GEMMA3_CAPS}, vision_config=GEMMA3_VISION,
                              mm_tokens_per_image=4)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.abs().max() == 0:
                p.normal_(0.0, 0.02)
    return model.eval()


def _build(name: str):
    return _gemma3(name) if name.startswith("gemma3") else build_model(name, **OVERRIDES.get(name, {}))


@pytest.fixture(scope="module")
def ids():
    return torch.randint(3, 256, (2, 40), generator=torch.Generator().manual_seed(1))  # [batch, seq]


def _eager_attentions(model, ids) -> tuple:
    """Attention probabilities [batch, heads, seq, seq] per attention layer, transformers' eager path."""
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    with torch.no_grad():
        return eager(ids, output_attentions=True, use_cache=False).attentions


def _probs_from_qk(lm, q, k, layer: int) -> torch.Tensor:
    """softmax(q k^T * scaling, soft-capped as eager does, causal and sliding-window masked)."""
    # q, k: [batch, heads, seq, head_dim] post-RoPE
    text = lm.config.get_text_config()
    module, seq = lm.attention(layer), q.shape[2]
    scores = (q @ k.transpose(-1, -2)) * module.scaling  # [batch, heads, seq, seq]
    cap = getattr(text, "attn_logit_softcapping", None)
    if cap:
        scores = torch.tanh(scores / cap) * cap
    qi, ki = torch.arange(seq)[:, None], torch.arange(seq)[None]
    allowed = ki <= qi
    window = getattr(module, "sliding_window", None)
    if window is None and getattr(text, "layer_types", None) is None:  # mistral: every layer slides
        window = getattr(text, "sliding_window", None)
    if window:
        allowed &= (qi - ki) < window
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def saved(request, tmp_path_factory):
    """(original model, LM loaded from its save_pretrained directory)."""
    model = _build(request.param)
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(path)
    return model, ctxlens.load(str(path))


def test_loads_with_its_family_and_the_same_logits(saved, ids):
    model, lm = saved
    assert lm.family.name == model.config.model_type and type(lm.model) is type(model)
    if lm.family.interface:  # q/k recording installed, over sdpa or over the eager fallback (gemma2)
        assert lm.model.config._attn_implementation.startswith("ctxlens-")
    with torch.no_grad():
        torch.testing.assert_close(lm.model(ids, use_cache=False).logits, model(ids, use_cache=False).logits,
                                   rtol=1e-5, atol=1e-5)


def test_token_losses_equal_cross_entropy_of_the_original(saved, ids):
    model, lm = saved
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits.float()  # [batch, seq, vocab]
    truth = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # [batch, seq-1]
    torch.testing.assert_close(lm.token_losses(ids), truth, rtol=1e-5, atol=1e-5)


def test_captured_qk_reproduce_eager_attention_of_the_original(saved, ids):
    model, lm = saved
    if "qk" not in lm.family.supports:
        pytest.skip(f"{lm.family.name} does not support q/k capture")
    layers = lm.attention_layers()
    eager = _eager_attentions(model, ids)  # hybrids report their attention layers only
    eager = dict(zip(layers, eager)) if len(eager) == len(layers) else dict(enumerate(eager))
    cap = lm.capture(ids, qk=layers)
    for layer in layers:
        probs = _probs_from_qk(lm, cap.queries[layer], cap.keys[layer], layer)
        torch.testing.assert_close(probs, eager[layer], rtol=1e-4, atol=1e-5,
                                   msg=lambda m, layer=layer: f"layer {layer}: {m}")


def test_gemma3_configs_have_sliding_and_global_layers_that_differ():
    """The q/k check above covers both layer kinds of Gemma 3 only if they really differ here."""
    for name in ("gemma3_text", "gemma3"):
        text = _gemma3(name).config.get_text_config()
        assert text.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
        assert text.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
        assert text.rope_parameters["full_attention"]["rope_theta"] == 1e6
        assert 40 > text.sliding_window  # the test sequence is longer than the window


# -- every decoder-only type, through the path users take ------------------------------------------

def _in_scope():
    from ctxlens.lm.tiny.every_type import in_scope_types

    return in_scope_types()


@pytest.mark.parametrize("model_type", _in_scope())
def test_every_decoder_type_loads_from_a_saved_directory(model_type, tmp_path):
    """save_pretrained, then ctxlens.load(dir): token losses equal the original's own cross-entropy."""
    from ctxlens.lm.tiny.every_type import build_tiny

    model = build_tiny(model_type)
    model.save_pretrained(tmp_path)
    lm = ctxlens.load(str(tmp_path))
    ids = torch.randint(3, 200, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.float()  # [1, seq, vocab]
    want = F.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")
    torch.testing.assert_close(lm.token_losses(ids)[0], want, atol=1e-4, rtol=1e-4)


def test_read_info_then_load_read_the_config_once_and_an_edit_reads_it_again(tmp_path, monkeypatch):
    """A run plans with ``read_info`` and then loads: one ``AutoConfig.from_pretrained`` per model and
    config.json (issue 34 part 5); each caller gets its own copy, and an edited config.json is read again."""
    import json

    from transformers import AutoConfig

    from ctxlens.lm.info import model_config, read_info

    build_model("llama").save_pretrained(tmp_path)
    reads = []
    real = AutoConfig.from_pretrained.__func__

    def counted(cls, *args, **kwargs):
        reads.append(args[0])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoConfig, "from_pretrained", classmethod(counted))
    info = read_info(str(tmp_path))
    lm = ctxlens.load(str(tmp_path), device="cpu")
    assert len(reads) == 1 and lm.info == info
    _, mine = model_config(str(tmp_path))
    mine.max_position_embeddings = 7  # a caller's change stays its own
    assert read_info(str(tmp_path)).max_positions == info.max_positions != 7 and len(reads) == 1
    config = json.loads((tmp_path / "config.json").read_text())
    config["max_position_embeddings"] = 4096  # a different size: the stamp changes even within one tick
    (tmp_path / "config.json").write_text(json.dumps(config, indent=3))
    assert read_info(str(tmp_path)).max_positions == 4096 and len(reads) == 2
