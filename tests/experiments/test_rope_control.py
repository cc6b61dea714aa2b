"""The positional-heads RoPE-zeroed control (ctxlens's negative control of the rope-distance paper's
Positional Heads, Sections 4.2-4.3): inside ``zero_rotation`` the q and k that reach attention are
bitwise the projections' own unrotated outputs (read by hooks on the projections, not through the
q/k scan under test), the model is bitwise as before afterwards, and the control rows are the
detection of a copy whose inverse-frequency buffers were zeroed by hand."""

import copy

import pytest
import torch

from ctxlens import CtxlensError
from ctxlens.experiments import get_experiment, make_config
from ctxlens.lm.analysis.rope import rotary_modules, zero_rotation
from ctxlens.probes.qk import scan
from tests.conftest import build_lm

OPTS = dict(lengths=[24], top_k=5, source="random", train_length=16, n_samples=3)


def _run(lm, **options) -> list[dict]:
    exp = get_experiment("positional-heads")
    config = make_config(exp.Config, {**OPTS, **options})
    cache: dict = {}
    return [{**u, **row} for u in exp.plan(config) for row in exp.run(lm, config, u, cache)]


def _projections(lm, ids) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
    """{layer: (q [H, L, d], k [KVH, L, d])} before RoPE, from forward hooks on each attention's q/k
    projection (its q_norm / k_norm where the family normalises q and k before rotating them)."""
    out: dict[int, dict] = {}
    handles = []
    for layer in lm.attention_layers():
        attn = lm.attention(layer)
        for name in ("q", "k"):
            mod = getattr(attn, f"{name}_norm", None) or getattr(attn, f"{name}_proj")

            def hook(_m, _i, y, layer=layer, name=name):
                if y.dim() == 4 and y.shape[2] == ids.shape[1]:  # gemma3 normalises [1, H, L, d] after the transpose
                    out.setdefault(layer, {})[name] = y[0].float()
                    return
                per_head = y[0].reshape(ids.shape[1], -1, lm.head_dim)  # [L, H, d]
                out.setdefault(layer, {})[name] = per_head.transpose(0, 1).float()  # [H, L, d]
            handles.append(mod.register_forward_hook(hook))
    try:
        with torch.no_grad():
            lm.model(ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return {layer: (v["q"], v["k"]) for layer, v in out.items()}


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_zero_rotation_hands_attention_the_unrotated_q_and_k_and_restores_the_model(family):
    lm = build_lm(family)
    ids = torch.randint(3, 200, (1, 20), generator=torch.Generator().manual_seed(0))
    buffers = [(m, n, b) for _, m in rotary_modules(lm.model) for n, b in m._buffers.items() if n.endswith("inv_freq")]
    with torch.no_grad():
        before = lm.model(ids, use_cache=False).logits
    seen: dict[int, tuple] = {}

    def record(view):
        seen[view.layer] = (view.q.clone(), view.k.clone())

    scan(lm, ids, lm.attention_layers(), record)
    rotated = dict(seen)
    with zero_rotation(lm.model):
        seen.clear()
        scan(lm, ids, lm.attention_layers(), record)
        plain = _projections(lm, ids)
    for layer in lm.attention_layers():
        q, k = seen[layer]
        assert torch.equal(q, plain[layer][0]) and torch.equal(k, plain[layer][1]), layer
        assert not torch.equal(rotated[layer][0], q)  # the real run's q is rotated: the check can fail
    with torch.no_grad():
        after = lm.model(ids, use_cache=False).logits
    assert torch.equal(before, after)
    assert all(m._buffers[n] is b for m, n, b in buffers) and all(b.abs().max() > 0 for _, _, b in buffers)


def test_zero_rotation_restores_the_model_when_the_block_raises():
    lm = build_lm("llama")
    ids = torch.randint(3, 200, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = lm.model(ids, use_cache=False).logits
    with pytest.raises(RuntimeError), zero_rotation(lm.model):
        raise RuntimeError("inside")
    with torch.no_grad():
        assert torch.equal(lm.model(ids, use_cache=False).logits, before)


def test_zero_rotation_refuses_a_model_without_rope():
    lm = build_lm("mamba")
    with pytest.raises(CtxlensError, match="no rotary embedding"), zero_rotation(lm.model):
        pass


def test_the_control_rows_are_the_detection_of_a_hand_zeroed_copy_and_leave_the_real_rows_alone():
    lm = build_lm("llama")
    with torch.no_grad():
        ids = torch.randint(3, 200, (1, 16), generator=torch.Generator().manual_seed(2))
        before = lm.model(ids, use_cache=False).logits
    plain = _run(lm)
    rows = _run(lm, control="rope-zeroed")
    with torch.no_grad():
        assert torch.equal(lm.model(ids, use_cache=False).logits, before)  # RoPE back after the control
    real = [r for r in rows if r["condition"] == "none"]
    zeroed = [r for r in rows if r["condition"] == "rope-zeroed"]
    assert real == [{**r, "condition": "none"} for r in plain]  # the control changes no real row
    assert {r["kind"] for r in zeroed} == {"head", "prompt"}  # no selection: the masked heads are the real ones
    # the independent route: a copy whose inv_freq buffers are zeroed in place, detected as the real model
    twin = copy.deepcopy(lm)
    for _, m in rotary_modules(twin.model):
        for name, buf in m._buffers.items():
            if name.endswith("inv_freq"):
                buf.zero_()
    expected = [r for r in _run(twin) if r["kind"] != "selection"]
    assert [{k: v for k, v in r.items() if k != "condition"} for r in zeroed] == \
        [{k: v for k, v in r.items() if k != "condition"} for r in expected]
    assert any(a["rho"] != b["rho"] for a, b in zip(real, zeroed) if a["kind"] == "prompt")  # rotation matters here


@pytest.mark.parametrize("control", ["none", "rope-zeroed"])
def test_the_planned_tokens_count_the_control_forwards(control):
    from ctxlens.runner.plans import unit_work

    lm = build_lm("llama")
    seen: list[int] = []
    hook = lm.model.get_input_embeddings().register_forward_hook(lambda _m, a, _o: seen.append(int(a[0].numel())))
    try:
        _run(lm, control=control)
    finally:
        hook.remove()
    exp = get_experiment("positional-heads")
    config = make_config(exp.Config, {**OPTS, "control": control})
    planned = sum(w.prompt_tokens for u in exp.plan(config) for w in unit_work(exp, config, u))
    assert sum(seen) == planned == 24 * 3 * (2 if control == "rope-zeroed" else 1)
