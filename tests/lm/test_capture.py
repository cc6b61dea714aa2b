"""Residual-after-mixer and block captures against each family's own forward."""

import pytest
import torch

from ctxlens.lm.families import FAMILIES
from tests.conftest import build_lm

# One family of each kind (transformer, ssm, recurrent, hybrid): the first the registry lists.
ONE_PER_KIND = list({family.kind: name for name, family in reversed(FAMILIES.items())}.values())

# The module whose output is the MLP branch of a block: zeroing it makes the block output
# equal to the residual stream after the mixer (an independent route to the same quantity).
MLP_BRANCH = {
    "llama": "mlp", "mistral": "mlp", "qwen2": "mlp", "qwen3": "mlp", "cohere": "mlp", "gpt2": "mlp",
    "gemma2": "post_feedforward_layernorm", "gemma3_text": "post_feedforward_layernorm",
    "gemma3": "post_feedforward_layernorm", "olmo2": "post_feedforward_layernorm",
    "gpt_neox": "post_mlp_dropout", "bloom": "mlp.dense_4h_to_h", "mpt": "ffn.down_proj",
    "rwkv": "feed_forward", "xlstm": "ffn", "recurrent_gemma": "mlp_block",
    "jamba": "feed_forward", "bamba": "feed_forward", "falcon_h1": "feed_forward",
    "mamba": None, "mamba2": None, "falcon_mamba": None, "zamba2": None,
}


def _zero(module, args, out):
    if isinstance(out, tuple):
        return (torch.zeros_like(out[0]),) + out[1:]
    return torch.zeros_like(out)


def _block_outputs(lm, ids, zero_mlp_of: int | None = None) -> dict[int, torch.Tensor]:
    """Every block's output from a plain forward (test-side hooks), MLP of one layer zeroed."""
    outs, handles = {}, []
    for i, layer in enumerate(lm.layers):
        handles.append(layer.register_forward_hook(
            lambda m, a, o, i=i: outs.__setitem__(i, (o[0] if isinstance(o, tuple) else o).detach().clone())))
    branch = MLP_BRANCH[lm.family.name]
    if zero_mlp_of is not None and branch:
        handles.append(lm.layers[zero_mlp_of].get_submodule(branch).register_forward_hook(_zero))
    with torch.no_grad():
        lm.model(ids, use_cache=False)
    for h in handles:
        h.remove()
    return outs


def test_every_family_has_a_test():
    assert set(MLP_BRANCH) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_residual_after_mixer_matches_block_with_mlp_removed(family, ids):
    lm = build_lm(family)
    cap = lm.capture(ids, residual="all", block="all")  # all positions
    plain = _block_outputs(lm, ids)
    for layer in range(lm.n_layers):
        truth = _block_outputs(lm, ids, zero_mlp_of=layer)[layer]  # [batch, seq, d_model]
        torch.testing.assert_close(cap.residual[layer].float(), truth.float(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(cap.block[layer], plain[layer], rtol=0, atol=0)
    if MLP_BRANCH[family]:  # the mixer-only stream must differ from the block output
        assert not torch.allclose(cap.residual[0], cap.block[0])


@pytest.mark.parametrize("family", ONE_PER_KIND)
def test_positions_slice_and_shapes(family, ids):
    lm = build_lm(family)
    full = lm.capture(ids, residual="all")
    part = lm.capture(ids, residual=[0, -1], positions=[-1, 5, -8])
    idx = torch.tensor([39, 5, 32])
    assert sorted(part.residual) == [0, lm.n_layers - 1]
    for layer, x in part.residual.items():
        assert x.shape == (2, 3, lm.model.config.get_text_config().hidden_size)
        torch.testing.assert_close(x, full.residual[layer][:, idx])


def test_capture_stops_after_the_deepest_requested_layer(ids):
    lm = build_lm("llama", num_hidden_layers=4)
    calls = []
    handles = [layer.register_forward_pre_hook(lambda m, a, i=i: calls.append(i)) for i, layer in enumerate(lm.layers)]
    lm.capture(ids, residual=[1], positions=[-1])
    for h in handles:
        h.remove()
    assert calls == [0, 1]


def test_block_capture_equals_hidden_states_of_transformers(ids):
    lm = build_lm("qwen3", num_hidden_layers=3)
    cap = lm.capture(ids, block="all", positions=[0, 20, 39])
    with torch.no_grad():
        hs = lm.model(ids, output_hidden_states=True).hidden_states  # [layers+1] x [batch, seq, d]
    for layer in range(lm.n_layers - 1):  # the last entry has the final norm applied
        torch.testing.assert_close(cap.block[layer], hs[layer + 1][:, [0, 20, 39]])


def test_bad_requests_are_clear_errors(ids):
    from ctxlens import CtxlensError

    lm = build_lm("llama")
    with pytest.raises(CtxlensError, match="Layer 7 does not exist"):
        lm.capture(ids, residual=[7])
    with pytest.raises(CtxlensError, match="positions must lie"):
        lm.capture(ids, residual=[0], positions=[40])
    with pytest.raises(CtxlensError, match="Nothing to capture"):
        lm.capture(ids)
    with pytest.raises(CtxlensError, match="does not support the 'qk'"):
        build_lm("mamba").capture(ids, qk=[0])


def test_captures_hold_only_what_was_asked(ids):
    """Captured slices own their memory: nothing keeps the full [batch, seq, d] states alive."""
    lm = build_lm("llama", num_hidden_layers=3)
    cap = lm.capture(ids, residual="all", block=[1], positions=[-2, -1], qk=[2], query_positions=[-1],
                     key_positions=[0, 1, 2])
    tensors = [*cap.residual.values(), *cap.block.values(), *cap.queries.values(), *cap.kv_keys.values()]
    for x in tensors:
        assert x.untyped_storage().nbytes() == x.numel() * x.element_size()
    assert sum(x.numel() for x in tensors) == 3 * 2 * 2 * 64 + 2 * 2 * 64 + 2 * 4 * 1 * 16 + 2 * 2 * 3 * 16
