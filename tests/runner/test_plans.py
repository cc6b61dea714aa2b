"""Issue 25 part 6: defaults that fit the model, and the plan printed before a run.

A tiny random llama with 8K positions stands for an 8K model (no real forward is needed to
plan); ``zoo:random-llama`` is the zoo model. Expected lengths and sample counts are RULER's
grid and the stated rules, typed here."""

from __future__ import annotations

import dataclasses
import io

import pytest
import yaml

from ctxlens.core.options import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm.info import ModelInfo, info_from_config, read_info
from ctxlens.runner import plans
from ctxlens.runner.execute import run

RULER = [4096, 8192, 16384, 32768, 65536, 131072]


@pytest.fixture(scope="module")
def llama8k(tmp_path_factory) -> str:
    """A tiny random llama with max_position_embeddings 8192 and the byte tokenizer, not a zoo model."""
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    path = tmp_path_factory.mktemp("llama8k") / "model"
    tok = byte_tokenizer()
    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=len(tok), max_position_embeddings=8192, bos_token_id=tok.eos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def planned(name: str, spec: str, options: dict | None = None, extrapolate: bool = False) -> plans.ModelPlan:
    exp = get_experiment(name)
    options = dict(options or {})
    return plans.for_model(exp, options, make_config(exp.Config, options), spec, {}, [], extrapolate)


def test_ruler_on_an_8k_model_plans_only_the_lengths_its_positions_allow(llama8k):
    mp = planned("ruler", llama8k)
    assert mp.config.lengths == [4096, 8192] and mp.filled == {"lengths": [4096, 8192]}
    assert len(get_experiment("ruler").plan(mp.config)) == 13 * 2
    assert any("16384, 32768, 65536, 131072 left out" in note and "--allow-extrapolation" in note
               for note in mp.notes)


def test_allow_extrapolation_plans_the_rest_and_says_so(llama8k):
    mp = planned("ruler", llama8k, extrapolate=True)
    assert mp.config.lengths == RULER
    units = [{"model": llama8k, **u} for u in get_experiment("ruler").plan(mp.config)]
    text = "\n".join(plans.describe(get_experiment("ruler"), mp, mp.info, units, len(units), True))
    assert "units: 78 to run" in text and "extrapolating" in text and "8192 positions" in text


def test_given_lengths_are_kept_and_checked_at_run_time_as_before(llama8k):
    mp = planned("ruler", llama8k, {"lengths": [16384]})
    assert mp.config.lengths == [16384] and mp.filled == {}


def test_defaults_differ_for_a_zoo_model_and_a_hub_model(llama8k):
    zoo, hub = read_info("zoo:random-llama"), read_info(llama8k)
    assert zoo.zoo and not hub.zoo
    assert planned("head-masking", "zoo:random-llama").config.passkey_style == "corpus"
    hub_heads = planned("head-masking", llama8k)
    assert hub_heads.config.passkey_style == "ruler"
    assert hub_heads.config.lengths == [4096, 8192] and hub_heads.config.detect_length == 8192
    assert planned("rope-theta-sweep", "zoo:random-llama").config.needle_style == "corpus"
    assert planned("rope-theta-sweep", llama8k).config.needle_style == "ruler"
    assert planned("head-masking", llama8k, {"passkey_style": "classic"}).config.passkey_style == "classic"
    told = planned("head-masking", llama8k, {"train_length": 1024}).config  # --train-length wins over the config
    assert told.lengths == [512, 1024, 2048] and told.detect_length == 1024


def test_intrinsic_entropy_samples_scale_with_the_feature_width():
    exp = get_experiment("intrinsic-entropy")
    base = make_config(exp.Config, {})

    def samples(d_model: int) -> int:
        info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, d_model)
        return exp.defaults(info, base, frozenset(), False).values["n_samples"]

    assert [samples(d) for d in (64, 256, 576, 4096)] == [512, 512, 1152, 8192]  # max(512, 2 d)
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 4096)
    assert "n_samples" not in exp.defaults(info, base, frozenset({"n_samples"}), False).values


def test_info_reads_the_original_length_of_a_scaled_rope_and_the_sliding_window():
    from ctxlens.lm.tiny import tiny_config

    scaled = tiny_config("llama", max_position_embeddings=32768,
                         rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192})
    info = info_from_config(scaled)
    assert (info.max_positions, info.train_length) == (32768, 8192)
    assert info_from_config(tiny_config("mistral")).sliding_window == 16
    assert info_from_config(tiny_config("gpt2")).hard_limit


def test_a_recorded_resolution_is_used_without_reading_the_model(monkeypatch):
    exp = get_experiment("ruler")
    monkeypatch.setattr(plans, "read_info", lambda *a, **k: pytest.fail("read the model"))
    config = make_config(exp.Config, {})
    mp = plans.for_model(exp, {}, config, "m", {"m": {"lengths": [4096]}}, ["m"], False)
    assert mp.config.lengths == [4096]
    old = plans.for_model(exp, {}, config, "m", {}, ["m"], False)  # a run from before the records
    assert old.config.lengths == RULER and old.filled == {}


def test_the_plan_prints_before_any_forward_and_the_run_records_and_resumes(llama8k, tmp_path, monkeypatch):
    from transformers.models.llama import modeling_llama

    events: list[str] = []

    class Err(io.StringIO):
        def write(self, text):
            if text.strip():
                events.append(text)
            return len(text)

    forward = modeling_llama.LlamaModel.forward

    def recording(self, *args, **kwargs):
        events.append("<forward>")
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(modeling_llama.LlamaModel, "forward", recording)
    monkeypatch.setattr("sys.stderr", Err())
    options = {"lengths": [4, 8], "entropy_n": [2], "thresholds": [0.1], "kde": False, "source": "random"}
    run("intrinsic-entropy", [llama8k], tmp_path / "run", options, progress=False, announce=True)
    first = events.index("<forward>")
    plan = "".join(events[:first])
    assert "intrinsic-entropy on" in plan and "units: 3 to run" in plan and "tokens: 6,144 prompt" in plan
    assert "n_samples 512: max(512, 2 x d_model 64)" in plan
    assert any("estimate: about" in e for e in events[first:])
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["resolved"] == {llama8k: {"n_samples": 512}} and "n_samples" not in saved["options"]
    info = saved["model_info"][llama8k]  # what the model is, for the torch-free findings
    assert (info["kind"], info["position"], info["train_length"]) == ("transformer", "rope", 8192)

    monkeypatch.setattr("ctxlens.runner.execute._ready", lambda *a: pytest.fail("loaded a finished run"))
    monkeypatch.setattr(plans, "read_info", lambda *a, **k: pytest.fail("read the model of a finished run"))
    run("intrinsic-entropy", [llama8k], tmp_path / "run", options, progress=False, announce=True)


def test_info_of_a_loaded_model_equals_the_config_read():
    import ctxlens

    lm = ctxlens.load("zoo:random-llama")
    assert lm.info == read_info("zoo:random-llama")
    assert dataclasses.asdict(lm.info)["origin"] == "zoo"


def test_explicit_lengths_beyond_the_positions_stay_an_error_without_allow_extrapolation(llama8k, tmp_path):
    from ctxlens.core.errors import CtxlensError

    options = {"tasks": ["niah_single_1"], "lengths": [9000], "n_samples": 1, "max_new_tokens": 2}
    with pytest.raises(CtxlensError, match="8192 positions but .* --allow-extrapolation"):
        run("ruler", [llama8k], tmp_path / "run", options, progress=False)
    assert not (tmp_path / "run").exists()


def test_estimate_arithmetic_and_a_probe_on_a_loaded_model():
    import ctxlens
    from ctxlens.experiments.base import Work
    from ctxlens.probes.throughput import Throughput, measure

    speed = Throughput(prefill=100.0, at=100, slope=1e-4, decode=10.0, seconds=0.0)
    assert speed.prefill_seconds(200) == pytest.approx(200 * (0.01 + 1e-4 * 100))  # 4 s: slower per token
    assert speed.prefill_seconds(50, sequences=2) == pytest.approx(2 * 50 * 0.005)  # floored at half the cost
    assert speed.decode_seconds(20) == pytest.approx(2.0)
    exp = get_experiment("ruler")
    config = make_config(exp.Config, {"tasks": ["niah_single_1"], "n_samples": 2, "max_new_tokens": 10,
                                      "forced": False})
    assert exp.work(config, {"task": "niah_single_1", "length": 110}) == [Work(2, 100, 20, 8)]
    line = plans.estimate(exp, config, [{"task": "niah_single_1", "length": 110}], speed)
    assert "about 3 s" in line  # 2 x 100 tokens at 100/s (2 s) + one batch of 2 decoding 10 steps at 10/s (1 s)
    assert "answers that end early take less" in line  # the decoding is an upper bound, and the line says so
    # forced scoring (the default): the items the forward proves are not decoded; the plan counts half of them
    forced = make_config(exp.Config, {"tasks": ["niah_single_1"], "n_samples": 2, "max_new_tokens": 10})
    work = exp.work(forced, {"task": "niah_single_1", "length": 110})
    assert work == [Work(2, 100, 20, 8, decoded=0.5)] and work[0].decode_steps == 5
    assert "forced scoring: 50% of the answers" in plans.estimate(exp, forced, [{"task": "niah_single_1",
                                                                                "length": 110}], speed)
    masking = get_experiment("head-masking")
    mconfig = make_config(masking.Config, {"lengths": [256], "tasks": ["passkey"], "n_passkey": 4,
                                           "depths": [0.5], "detect_length": None})
    unit = next(u for u in masking.plan(mconfig) if u["condition"] == "random")
    (passkeys,) = masking.work(mconfig, unit)
    assert passkeys.decoded == 0.5 and passkeys.decode_steps == 4 * 8 // 2  # 8 tokens each, always forced
    loss = get_experiment("token-loss")
    loss_config = make_config(loss.Config, {"lengths": [100], "n_samples": 2})
    assert "end early" not in plans.estimate(loss, loss_config, loss.plan(loss_config), speed)
    assert Work(5, 100, 50, 4).decode_steps == 2 * 10  # batches of 4 and 1, ten tokens each
    assert Work(5, 100, 50).decode_steps == 50 and Work(3, 100).decode_steps == 0
    got = measure(ctxlens.load("zoo:random-llama"), budget=0.5)
    assert got.prefill > 0 and got.decode > 0 and got.slope >= 0 and 32 <= got.at <= 4096


def test_the_decode_probe_measures_the_pace_of_new_tokens_even_when_generation_would_stop_early():
    """A model whose prefill costs 50 ms (the first new token comes with it) and every further token
    20 ms, and whose generation would end after one token (an end-of-text token, as random prompts
    often give): the probe reads about 50 tokens/s, not one token over a near-zero difference."""
    import time
    import types

    import torch

    from ctxlens.probes.throughput import measure

    def greedy(ids, max_new, pad, min_new=0):
        made = max(min_new, 1)  # stops at the first token unless told not to
        time.sleep(0.05 + 0.02 * (made - 1))
        return torch.zeros(1, ids.shape[-1] + made, dtype=torch.long)

    lm = types.SimpleNamespace(info=types.SimpleNamespace(max_positions=256), vocab_size=50,
                               device=torch.device("cpu"), final_hidden=lambda ids: time.sleep(0.05), greedy=greedy)
    got = measure(lm, budget=1.0)
    assert 30 < got.decode < 60


def test_niah_depth_plans_the_training_length_and_twice_it_where_positions_allow(llama8k):
    assert planned("niah-depth", llama8k).config.lengths == [4096, 8192]  # 16384 is beyond 8192 positions
    assert planned("niah-depth", llama8k, extrapolate=True).config.lengths == [8192, 16384]
    assert planned("niah-depth", llama8k, {"lengths": [512]}).config.lengths == [512]


def test_a_failing_throughput_probe_leaves_the_run_going(llama8k, tmp_path, monkeypatch, capsys):
    def broken(lm, *a, **k):
        raise RuntimeError("no generate here")

    monkeypatch.setattr("ctxlens.probes.throughput.measure", broken)
    options = {"lengths": [4], "entropy_n": [2], "thresholds": [0.1], "kde": False, "source": "random",
               "n_samples": 8}
    run("intrinsic-entropy", [llama8k], tmp_path / "run", options, progress=False, announce=True)
    assert "no time estimate: the throughput probe failed (no generate here)" in capsys.readouterr().err
    assert (tmp_path / "run" / "results.jsonl").stat().st_size > 0
