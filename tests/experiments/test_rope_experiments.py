"""The seed-003 experiments (rope-dims, dominant-dimension, positional-heads, head-masking,
rope-dim-ablation) against brute force from full eager attention, weight surgery and
identities; extrapolation transforms against models built from edited configs; the runner
end to end on every RoPE family; the findings script's logic on a random model."""

import copy
import math
from collections import defaultdict

import pytest
import torch
from transformers import AutoModelForCausalLM

from ctxlens import CtxlensError
from ctxlens.data.sources import open_source
from ctxlens.data.windows import token_windows
from ctxlens.experiments import get_experiment, make_config
from ctxlens.experiments.head_masking import masked_heads, masking
from ctxlens.experiments.rope_dim_ablation import pairs_of
from ctxlens.experiments.rope_dims import sample_pairs
from ctxlens.findings import masking as masking_findings
from ctxlens.findings import positional as findings
from ctxlens.lm import from_model
from ctxlens.lm.analysis.selfextend import self_extend
from ctxlens.lm.families import FAMILIES
from ctxlens.metrics.rope import dominant_dimension, rope_pair_contributions, spearman
from ctxlens.probes.extrapolation import applied, parse_transform, train_length
from ctxlens.probes.qk import scan
from ctxlens.zoo.tokenizer import byte_tokenizer
from tests.conftest import build_lm, build_model

ROPE_FAMILIES = sorted(f for f, fam in FAMILIES.items() if "rope" in fam.supports)
RANDOM = {"source": "random", "n_samples": 2, "train_length": 16}


def _run(lm, name: str, **options) -> list[dict]:
    exp = get_experiment(name)
    config = make_config(exp.Config, options)
    cache: dict = {}
    return [{**u, **row} for u in exp.plan(config) for row in exp.run(lm, config, u, cache)]


def _windows(lm, length: int, n: int = 2) -> torch.Tensor:
    return token_windows(open_source("random"), None, length, n, seed=0, vocab_size=lm.vocab_size)


def _eager_probs(lm, ids) -> tuple:
    model = copy.deepcopy(lm.model)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        return model(ids, use_cache=False, output_attentions=True).attentions  # per layer [1, H, L, L]


# -- transforms ----------------------------------------------------------------------------------


def test_transform_specs():
    assert parse_transform("none").kind == "none"
    assert parse_transform("theta:500000").value == 500000.0
    assert parse_transform("yarn:4").kind == "yarn"
    se = parse_transform("selfextend:4:128")
    assert (se.group, se.window) == (4, 128)
    for bad, msg in [("yarn", "takes 1"), ("yarn:x", "positive number"), ("linear:0.5", "below 1"),
                     ("selfextend:4", "takes 2"), ("selfextend:0:4", "whole number"),
                     ("yarm:4", "Did you mean 'yarn'")]:
        with pytest.raises(CtxlensError, match=msg):
            parse_transform(bad)


def _fresh(family: str, **config_changes):
    """A model built from an edited config with the original weights (independent truth)."""
    model = build_model(family)
    config = copy.deepcopy(model.config)
    for key, value in config_changes.items():
        setattr(config, key, value)
    fresh = AutoModelForCausalLM.from_config(config).eval()
    fresh.load_state_dict(model.state_dict())
    return fresh


@pytest.mark.parametrize("spec,truth", [
    ("yarn:4", dict(rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                     "original_max_position_embeddings": 16}, max_position_embeddings=64)),
    ("dynamic:4", dict(rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
                       max_position_embeddings=16)),
    ("theta:500", dict(rope_parameters={"rope_type": "default", "rope_theta": 500.0})),
    ("linear:4", dict(rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0})),
])
def test_applied_transforms_equal_models_built_from_the_edited_config_and_undo(spec, truth, ids):
    lm = build_lm("llama")
    with torch.no_grad():
        before = lm.model(ids, use_cache=False).logits
        with applied(lm, spec, 16):
            inside = lm.model(ids, use_cache=False).logits
        after = lm.model(ids, use_cache=False).logits
        expected = _fresh("llama", **truth)(ids, use_cache=False).logits
    torch.testing.assert_close(inside, expected, rtol=1e-5, atol=1e-5)
    assert (inside - before).abs().max() > 1e-5
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    assert lm.config.max_position_embeddings == 2048 and not lm.extrapolate


def test_train_length():
    lm = build_lm("llama", max_position_embeddings=300)
    assert train_length(lm) == 300 and train_length(lm, 64) == 64
    lm.train_length = 512  # what a resolver records, e.g. the zoo's recipe
    assert train_length(lm) == 512 and train_length(lm, 64) == 64


# -- rope-dims -------------------------------------------------------------------------------------


def test_rope_dims_counts_equal_brute_force_top_pairs():
    lm = build_lm("llama")
    rows = _run(lm, "rope-dims", lengths=[24], n_pairs=50, top_k=3, **RANDOM)
    ids = _windows(lm, 24)
    g = torch.Generator().manual_seed(0)
    truth = defaultdict(int)
    for sample in range(2):
        m, n = sample_pairs(24, 50, g)
        assert bool((n <= m).all())
        cap = lm.capture(ids[sample:sample + 1], qk=lm.attention_layers())
        for layer in lm.attention_layers():
            q, k = cap.queries[layer][0], cap.keys[layer][0]  # [H, L, d]
            for h in range(lm.n_heads):
                for mi, ni in zip(m.tolist(), n.tolist()):
                    contrib = [float(q[h, mi, i] * k[h, ni, i] + q[h, mi, i + 8] * k[h, ni, i + 8]) for i in range(8)]
                    for i in sorted(range(8), key=lambda i: -contrib[i])[:3]:
                        truth[(layer, h, i)] += 1
    assert len(rows) == 2 * 4 * 8
    for r in rows:
        assert r["count"] == truth[(r["layer"], r["head"], r["dim"])]
        assert r["share"] == pytest.approx(r["count"] / (2 * 50 * 3))
        assert r["beyond_train"] is True


def test_uniform_causal_pair_sampling():
    m, n = sample_pairs(4, 20000, torch.Generator().manual_seed(1))
    counts = torch.zeros(4, 4)
    counts.index_put_((m, n), torch.ones(20000), accumulate=True)
    lower = counts[torch.ones(4, 4, dtype=torch.bool).tril()]
    assert counts.triu(1).sum() == 0
    assert (lower / 20000 - 0.1).abs().max() < 0.015  # 10 causal pairs, each ~1/10 (3.5 sigma)


# -- dominant-dimension ---------------------------------------------------------------------------


def test_dominant_dimension_rows_equal_brute_force_from_eager_attention():
    lm = build_lm("llama")
    rows = _run(lm, "dominant-dimension", lengths=[24], top_k=5, n_bins=4, **RANDOM)
    ids = _windows(lm, 24)
    per = defaultdict(lambda: defaultdict(list))  # (layer, head) -> distance -> dominant dims
    for sample in range(2):
        x = ids[sample:sample + 1]
        eager = _eager_probs(lm, x)
        cap = lm.capture(x, qk=lm.attention_layers())
        for layer in lm.attention_layers():
            q, k = cap.queries[layer][0], cap.keys[layer][0]
            for h in range(lm.n_heads):
                for m in range(24):
                    for n in eager[layer][0, h, m, :m + 1].topk(min(5, m + 1)).indices.tolist():
                        pairs, _ = rope_pair_contributions(q[h, m], k[h, n], "half", lm.rotary_dims)
                        per[(layer, h)][m - n].append(float(dominant_dimension(pairs)))
    corr = {(r["layer"], r["head"]): r for r in rows if r["kind"] == "correlation"}
    assert len(corr) == 8
    for key, by_dist in per.items():
        dist = torch.tensor(sorted(by_dist), dtype=torch.float64)
        mean = torch.tensor([sum(by_dist[d]) / len(by_dist[d]) for d in sorted(by_dist)], dtype=torch.float64)
        rho, p = spearman(dist, mean)
        assert corr[key]["rho"] == pytest.approx(rho, abs=1e-6)
        assert corr[key]["p_value"] == pytest.approx(p, rel=1e-5, abs=1e-12)
        assert corr[key]["n_pairs"] == sum(len(v) for v in by_dist.values())
        curve = [r for r in rows if r["kind"] == "curve" and (r["layer"], r["head"]) == key]
        first = [d for d in sorted(by_dist) if d < 6]
        assert curve[0]["distance_lo"] == 0 and curve[0]["distance_hi"] == 6
        assert curve[0]["dominant_dim"] == pytest.approx(sum(float(mean[int(d)]) for d in first) / len(first))


def test_selfextend_identity_inside_the_experiment():
    lm = build_lm("llama")
    rows = _run(lm, "dominant-dimension", lengths=[24], top_k=5,
                transforms=["none", "selfextend:1:4", "selfextend:3:24"], **RANDOM)
    corr = defaultdict(dict)
    for r in rows:
        if r["kind"] == "correlation":
            corr[r["transform"]][(r["layer"], r["head"])] = r["rho"]
    for t in ("selfextend:1:4", "selfextend:3:24"):
        assert corr[t] == pytest.approx(corr["none"], abs=1e-6)


def test_pair_contributions_under_selfextend_sum_to_the_logits_the_model_uses():
    lm = build_lm("llama")
    ids = _windows(lm, 30, 1)
    checked = []

    def check(view):
        qpos = torch.arange(10, 30)
        logits = view.logits(qpos)  # [H, c, n]
        keys = logits.topk(6, dim=-1).indices
        pairs = view.pair_contributions(qpos, keys)  # [H, c, 6, P]
        torch.testing.assert_close(pairs.sum(-1), logits.gather(-1, keys), rtol=1e-4, atol=1e-4)
        checked.append(view.layer)

    with self_extend(lm, 4, 5):
        scan(lm, ids, [0, 1], check)
    assert checked == [0, 1]


# -- positional-heads ----------------------------------------------------------------------------


def test_positional_heads_rank_the_dominant_dimension_correlations():
    lm = build_lm("llama")
    opts = dict(lengths=[24], top_k=5, **RANDOM)
    corr = {(r["layer"], r["head"]): r["rho"]
            for r in _run(lm, "dominant-dimension", **opts) if r["kind"] == "correlation"}
    rows = _run(lm, "positional-heads", fractions=[0.1, 0.5], **opts)
    heads = [r for r in rows if r["kind"] == "head"]
    assert [r["rank"] for r in heads] == list(range(1, 9))
    assert [abs(r["rho"]) for r in heads] == sorted((abs(v) for v in corr.values()), reverse=True)
    sel = {r["fraction"]: r for r in rows if r["kind"] == "selection"}
    assert sel[0.1]["n_selected"] == 1 and sel[0.5]["n_selected"] == 4
    assert sel[0.5]["heads"] == [[r["layer"], r["head"]] for r in heads[:4]]
    positive = [r for r in _run(lm, "positional-heads", rank_by="positive", **opts) if r["kind"] == "head"]
    assert [r["rho"] for r in positive] == sorted(corr.values(), reverse=True)


def test_positional_heads_write_one_rho_per_prompt_and_test_across_prompts():
    lm = build_lm("llama")
    opts = dict(lengths=[24], top_k=5, source="random", train_length=16)
    one = _run(lm, "positional-heads", n_samples=1, **opts)
    pooled = {(r["layer"], r["head"]): r["rho"] for r in one if r["kind"] == "head"}
    alone = {(r["layer"], r["head"]): r["rho"] for r in one if r["kind"] == "prompt"}
    assert alone == pooled  # one input: its own rho is the pooled one
    rows = _run(lm, "positional-heads", n_samples=3, **opts)
    prompts = [r for r in rows if r["kind"] == "prompt"]
    assert len(prompts) == 8 * 3 and {r["prompt"] for r in prompts} == {0, 1, 2}
    for head in (r for r in rows if r["kind"] == "head"):
        rhos = [r["rho"] for r in prompts if (r["layer"], r["head"]) == (head["layer"], head["head"])]
        m = sum(rhos) / 3
        sd = math.sqrt(sum((x - m) ** 2 for x in rhos) / 2)
        assert head["rho_mean"] == pytest.approx(m) and head["n_prompts"] == 3
        if sd > 0:  # two-sided t with 2 df: p = 1 - |t| / sqrt(t^2 + 2) (closed form)
            t = m / (sd / math.sqrt(3))
            assert head["p_value"] == pytest.approx(1 - abs(t) / math.sqrt(t * t + 2), rel=1e-6, abs=1e-12)


# -- head-masking --------------------------------------------------------------------------------


def _zero_columns(lm, heads) -> torch.nn.Module:
    """Weight surgery: zero the output projection's inputs of (layer, head) pairs."""
    model = copy.deepcopy(lm.model)
    with torch.no_grad():
        for layer, h in heads:
            proj = model.get_submodule(lm.family.layers)[layer].get_submodule(f"{lm.family.attn}.{lm.family.out_proj}")
            proj.weight[:, h * lm.head_dim:(h + 1) * lm.head_dim] = 0
    return model


def test_head_masking_equals_zeroing_output_projection_slices_in_scoring_and_generation():
    lm = from_model(build_model("llama", vocab_size=257), byte_tokenizer())
    exp = get_experiment("head-masking")
    config = make_config(exp.Config, dict(source="random", lengths=[100], n_samples=1, fractions=[0.25], n_draws=2,
                                          n_passkey=1, depths=[0.5], detect_length=24, detect_samples=1, top_k=5,
                                          tasks=["perplexity"]))
    units = {(u["condition"], u["draw"]): u for u in exp.plan(config)}
    assert len(units) == 4  # none, top, 2 random draws
    cache: dict = {}
    top = masked_heads(lm, config, units[("top", 0)], cache)
    assert len(top) == 2
    surgery = from_model(_zero_columns(lm, top), byte_tokenizer())
    masked_row = exp.run(lm, config, units[("top", 0)], cache)[0]
    truth_row = exp.run(surgery, config, units[("none", 0)], {})[0]
    assert masked_row["heads"] == [list(h) for h in top]
    assert masked_row["ppl"] == pytest.approx(truth_row["ppl"], rel=1e-6) and "score" not in masked_row
    assert masked_row["ppl"] != pytest.approx(exp.run(lm, config, units[("none", 0)], cache)[0]["ppl"], rel=1e-6)
    prompt = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(3))
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad(), masking(lm, top):
        ours = lm.model.generate(prompt, **kw)
    with torch.no_grad():
        assert torch.equal(ours, surgery.model.generate(prompt, **kw))
    draws = [masked_heads(lm, config, units[("random", d)], cache) for d in (0, 1)]
    assert all(len(d) == 2 for d in draws) and draws[0] != draws[1]
    assert draws[0] == masked_heads(lm, config, units[("random", 0)], {})


def test_head_masking_scores_the_same_passkeys_one_row_each_under_every_condition():
    lm = from_model(build_model("llama", vocab_size=257), byte_tokenizer())
    rows = _run(lm, "head-masking", source="random", lengths=[256], tasks=["passkey"], passkey_style="classic",
                depths=[0.2, 0.8], n_passkey=2, fractions=[0.25], n_draws=2, detect_length=24, detect_samples=1,
                top_k=5)
    by = defaultdict(list)
    for r in rows:
        by[(r["condition"], r["draw"])].append(r)
    assert sorted(by) == [("none", 0), ("random", 0), ("random", 1), ("top", 0)]
    for cell in by.values():
        assert [(r["depth"], r["probe"]) for r in cell] == [(0.2, 0), (0.2, 1), (0.8, 2), (0.8, 3)]
        assert all(r["n"] == 1 and r["score"] in (0.0, 1.0) for r in cell)


def test_passkey_probes_hold_their_answer_at_the_depth_and_score_greedy_continuations():
    from types import SimpleNamespace

    from ctxlens.probes import passkey as _passkey

    tok = byte_tokenizer()
    for style in ("corpus", "classic"):
        probes = _passkey.probes(tok, 256, [0.2, 0.8], 2, style=style)
        assert [p.n_tokens for p in probes] == [256] * 4
        where = [tok.decode(p.ids.tolist()).find(p.answer) / 256 for p in probes]
        assert all(0 <= w < 1 for w in where) and max(where[:2]) < min(where[2:])  # needle deeper at depth 0.8

    def fake(continuation):
        def greedy(ids, max_new_tokens, pad_token_id):
            return torch.cat([ids, torch.tensor([tok.encode(continuation)[:max_new_tokens]])], 1)
        return SimpleNamespace(tokenizer=tok, greedy=greedy)

    probe = probes[0]
    assert _passkey.retrieved(fake(probe.answer + "."), probe)
    assert not _passkey.retrieved(fake("x" + probe.answer), probe)


# -- rope-dim-ablation ---------------------------------------------------------------------------


def test_ablation_specs():
    assert pairs_of("high:2", 8) == [6, 7] and pairs_of("low:25%", 8) == [0, 1]
    assert pairs_of("pairs:2-4", 8) == [2, 3, 4]
    for bad in ("high:8", "pairs:5-9", "mid:2"):
        with pytest.raises(CtxlensError):
            pairs_of(bad, 8)


def test_rope_dim_ablation_rows_equal_brute_force():
    lm = build_lm("llama")
    rows = _run(lm, "rope-dim-ablation", lengths=[20], ablations=["high:3"], measures=["loss", "attention"],
                n_queries=0, **RANDOM)
    ids = _windows(lm, 20)
    loss = [r for r in rows if r["kind"] == "loss"][0]
    dims = torch.tensor([5, 6, 7, 13, 14, 15])  # pairs 5..7 of a 16-dim head (half layout)
    surgery = copy.deepcopy(lm.model)
    with torch.no_grad():
        for layer in lm.attention_layers():
            w = surgery.model.layers[layer].self_attn.q_proj.weight
            for h in range(lm.n_heads):
                w[h * 16 + dims] = 0
        truth = torch.nn.functional.cross_entropy(surgery(ids).logits[:, :-1].transpose(1, 2), ids[:, 1:])
    assert loss["nll_ablated"] == pytest.approx(float(truth), rel=1e-5)
    assert loss["nll_base"] == pytest.approx(float(lm.token_losses(ids).mean()), rel=1e-6)
    tv = defaultdict(float)
    causal = torch.ones(20, 20, dtype=torch.bool).tril()
    for s in range(2):
        cap = lm.capture(ids[s:s + 1], qk=lm.attention_layers())
        for layer in lm.attention_layers():
            q, k = cap.queries[layer][0], cap.keys[layer][0]
            qa, ka = q.clone(), k.clone()
            qa[..., dims], ka[..., dims] = 0, 0
            scaling = lm.attention(layer).scaling
            p = torch.softmax((q @ k.transpose(-1, -2) * scaling).masked_fill(~causal, float("-inf")), -1)
            pa = torch.softmax((qa @ ka.transpose(-1, -2) * scaling).masked_fill(~causal, float("-inf")), -1)
            for h in range(lm.n_heads):
                tv[(layer, h)] += float(0.5 * (p[h] - pa[h]).abs().sum(-1).mean()) / 2
    for r in (r for r in rows if r["kind"] == "attention"):
        assert r["tv"] == pytest.approx(tv[(r["layer"], r["head"])], rel=1e-4)
        assert r["pairs"] == [5, 6, 7]


# -- every RoPE family, through the runner ---------------------------------------------------------


@pytest.mark.parametrize("family", ROPE_FAMILIES)
def test_experiments_run_on_every_rope_family(family):
    lm = build_lm(family)
    opts = dict(lengths=[20], source="random", n_samples=1, train_length=10, transforms=["none", "selfextend:2:4"])
    rows = _run(lm, "dominant-dimension", top_k=4, n_bins=2, **opts)
    corr = [r for r in rows if r["kind"] == "correlation"]
    assert len(corr) == len(lm.attention_layers()) * lm.n_heads * 2
    assert any(r["rho"] is not None and math.isfinite(r["rho"]) for r in corr)
    dims = _run(lm, "rope-dims", n_pairs=10, **opts)
    assert {r["dim"] for r in dims} == set(range(lm.rotary_dims // 2))
    assert len(_run(lm, "rope-dim-ablation", ablations=["low:1"], measures=["loss", "dominant"], top_k=3, **opts)) > 0
    hm = _run(lm, "head-masking", tasks=["perplexity"], fractions=[0.25], n_draws=1, detect_samples=1, top_k=3,
              **{**opts, "transforms": ["none"]})
    assert len(hm) == 3 and all(r["ppl"] and math.isfinite(r["ppl"]) for r in hm)


def test_every_experiment_through_the_runner_on_the_random_zoo_model(tmp_path):
    from ctxlens.runner.execute import run
    from ctxlens.runner.store import read_rows

    small = dict(lengths=[128], n_samples=1, train_length=64, transforms=["none", "yarn:2"])
    options = {
        "rope-dims": dict(small, n_pairs=20),
        "dominant-dimension": dict(small, top_k=8, n_queries=16),
        "positional-heads": dict(small, top_k=8, n_queries=16),
        "head-masking": dict(small, top_k=8, n_queries=16, n_passkey=1, depths=[0.5], n_draws=1, fractions=[0.25],
                             detect_samples=1, transforms=["none"]),
        "rope-dim-ablation": dict(small, n_queries=16, top_k=8, ablations=["high:25%"]),
    }
    for name, opts in options.items():
        run(name, ["zoo:random-llama"], tmp_path / name, opts, progress=False)
        rows = read_rows(tmp_path / name)
        assert rows and all(r["model"] == "zoo:random-llama" and r["experiment"] == name for r in rows), name
    with pytest.raises(CtxlensError, match="does not support the 'rope'"):
        lm = build_lm("mamba")
        _run(lm, "dominant-dimension", lengths=[8], **RANDOM)


# -- findings script -------------------------------------------------------------------------------


def test_findings_verdict_follows_the_stated_criteria():
    # head 0: per-prompt rho 0.9 +- 0.05 over 4 prompts (t = 0.9 / (0.0577 / 2) = 31.2, p ~ 7e-5 < 0.05 / 2);
    # head 1: +-0.1 around 0 (mean 0, p = 1)
    prompts = [{"kind": "prompt", "layer": 0, "head": h, "prompt": p, "rho": (0.9 if h == 0 else 0.0) + 0.05 * s * (
        1 if h == 0 else 2)} for h in (0, 1) for p, s in enumerate((1, -1, 1, -1))]
    presence = findings.presence_test(prompts)
    assert (presence["n_heads"], presence["n_pass"], presence["positive"]) == (2, 1, 1)
    assert presence["heads"][(0, 1)]["p"] == pytest.approx(1.0)

    def rows(none, top, randoms, ppl_top=20.0):
        row = {"task": "passkey", "length": 64, "n": 4}
        out = [{**row, "condition": "none", "fraction": 0.0, "draw": 0, "score": none}]
        out += [{**row, "condition": "top", "fraction": 0.25, "draw": 0, "score": top}]
        out += [{**row, "condition": "random", "fraction": 0.25, "draw": d, "score": s} for d, s in enumerate(randoms)]
        ppl = {"task": "perplexity", "length": 64, "n": 1}
        out += [{**ppl, "condition": "top", "fraction": 0.25, "draw": 0, "nll": math.log(ppl_top)}]
        out += [{**ppl, "condition": "random", "fraction": 0.25, "draw": d, "nll": math.log(20.0 + d)}
                for d in range(len(randoms))]
        return out

    # 19 draws all above the top heads: p = 1 / 20 = 0.05
    hurts = masking_findings.masking_test(rows(1.0, 0.25, [0.75] * 19))
    assert hurts["fractions"]["0.25"]["p"] == pytest.approx(1 / 20) and hurts["verdict"] == "hurts"
    assert findings.verdict(presence, hurts)["reproduced"] is True
    tie = masking_findings.masking_test(rows(1.0, 0.75, [0.75] * 19))  # ties count against: p = 20 / 20
    assert tie["fractions"]["0.25"]["p"] == 1.0 and findings.verdict(presence, tie)["reproduced"] is False
    collapse = masking_findings.masking_test(rows(1.0, 0.25, [0.75] * 19, ppl_top=200.0))  # above every draw's 20..38
    assert collapse["verdict"] == "collapse" and findings.verdict(presence, collapse)["reproduced"] is False
    few = masking_findings.masking_test(rows(1.0, 0.25, [0.75] * 5))  # p >= 1/6: cannot be tested
    assert few["verdict"] == "untestable" and findings.verdict(presence, few)["reproduced"] is None
    assert masking_findings.masking_test(rows(0.0, 0.0, [0.0] * 19))["verdict"] == "nothing"
    assert findings.verdict(findings.presence_test([]), hurts)["reproduced"] is None


def test_rope_rows_record_whether_their_windows_start_with_a_bos():
    """The rows' ``bos`` column says what ``windows`` put first (issue 31: the RoPE experiments' rows had none)."""
    from ctxlens.probes import rope as common
    from ctxlens.probes.rope import RopeOptions
    from tests.conftest import build_lm

    class Bos:  # a tokenizer that adds BOS id 3 to any text it encodes
        bos_token_id = 3

        def encode(self, text, add_special_tokens=True):
            return [3, 4] if add_special_tokens else [4]

    lm = build_lm("llama")
    unit = {"length": 8}
    assert common.coordinates(lm, RopeOptions(source="random"), unit)["bos"] is False  # random ids: never
    lm.tokenizer = Bos()
    windows = common.windows(lm, RopeOptions(source="random", bos=True, lengths=[8]), 8, {}, n=2)
    assert windows[:, 0].tolist() == [3, 3]  # what the column must then say
    assert common.coordinates(lm, RopeOptions(source="random", bos=True), unit)["bos"] is True
    assert common.coordinates(lm, RopeOptions(source="random", bos=False), unit)["bos"] is False
