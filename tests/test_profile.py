"""Issue 26 part 1: ``ctxlens profile`` plans a suite that fits the budget, prints the plan before
any forward of the suite, plans around what a model cannot do, resumes, and refuses bad input.

Tiny random models stand for real ones; the throughput is a fixed fake (no probe forward) and the
budget is checked against a fake clock that a fake runner advances by each part's planned time
times a slowdown, so the budget rules are tested without timing anything."""

from __future__ import annotations

import json

import pytest
import yaml

import ctxlens.profile.record as records
from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.core.progress import duration
from ctxlens.lm.info import ModelInfo
from ctxlens.probes.throughput import Throughput
from ctxlens.profile import budget, command, pacing, planning, resume, suite
from ctxlens.profile.command import profile

SPEED = Throughput(prefill=2000.0, at=512, slope=1e-8, decode=20.0, seconds=0.0)  # a small CPU model's pace


def _save(path, family: str, **overrides) -> str:
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(0)
    ids = {"bos_token_id": tok.eos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.eos_token_id}
    AutoModelForCausalLM.from_config(tiny_config(family, vocab_size=len(tok), **ids, **overrides)).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> str:
    return _save(tmp_path_factory.mktemp("llama") / "m", "llama", max_position_embeddings=1024)


@pytest.fixture(scope="module")
def mamba(tmp_path_factory) -> str:
    return _save(tmp_path_factory.mktemp("mamba") / "m", "mamba")


class FakeRun:
    """Stands for the runner: creates the run directory, advances the fake clock by the part's
    planned seconds times ``slow``, and records each call."""

    def __init__(self, slow: float = 1.0):
        self.now, self.slow, self.calls, self.metas = 0.0, slow, [], []

    def clock(self) -> float:
        return self.now

    def __call__(self, experiment, models, out, options, model_options, **kw):
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text("experiment: x\n")
        record = json.loads((out.parent.parent / records.RECORD).read_text())
        part = next(p for s in record["models"].values() for p in s["parts"] if p["name"] == out.name)
        self.now += part["planned_s"] * (1.0 if part.get("top_up") else self.slow)  # a top-up's plan is a measured pace
        self.calls.append((experiment, options))
        self.metas.append(kw.get("meta"))


def _fake_profile(spec, minutes, out, slow=1.0):
    fake = FakeRun(slow)
    done = profile([spec], minutes, out, progress=False, clock=fake.clock, probe=lambda lm: SPEED, runner=fake)
    return fake, done


@pytest.mark.parametrize("minutes", [2, 10, 30, 120])
def test_the_fitted_suite_fills_the_budget_without_exceeding_it(minutes):
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    seconds = 60.0 * minutes
    fit = budget.fit(list(suite.PARTS), info, SPEED, seconds)
    full = fit.size.scale == 1.0 and fit.size.length == 8192
    assert fit.seconds <= budget.TARGET * seconds
    assert full or fit.seconds >= 0.8 * budget.TARGET * seconds  # within 20% of what it aims at
    if fit.size.length < 8192:
        assert f"L capped to {fit.size.length} by the budget (training length 8192)" in fit.notes
    assert all(p.seconds > 0 for p in fit.parts)


def _smallest_seconds(parts, length: int, info) -> list[float]:
    """Each part's estimate at ``length`` with the smallest samples (brute force over the parts)."""
    return [budget.plan_part(p, suite.Size(length, 0.0, True), info, SPEED, 1.0).seconds for p in parts]


@pytest.mark.parametrize("minutes", [45, 90, 180])
def test_L_stays_at_the_training_length_when_the_first_lines_fit_there(minutes):
    """Issue 33: the later parts (masking, entropy, RoPE analyses) must not pull L below T. L is
    the longest halving of T at which the four lines-first parts fit half the plan's time, each
    within a short budget's third; the parts left out are later ones."""
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    seconds = 60.0 * minutes
    first = [p for p in suite.PARTS if p.drop_order <= 4]
    assert {p.name for p in first} == {"loss-vs-length", "niah-depth", "ruler", "accs-layers"}
    goal = budget.TARGET * seconds
    expected = next(n for n in (8192, 4096, 2048, 1024, 512, 256)
                    if sum(_smallest_seconds(first, n, info)) <= 0.5 * goal or n == 256)
    fit = budget.fit(list(suite.PARTS), info, SPEED, seconds)
    assert fit.size.length == expected
    assert {p.name for p in first} <= {p.name for p in fit.parts}
    assert set(fit.left_out) <= {p.name for p in suite.PARTS if p.drop_order > 4}


def test_a_budget_that_holds_the_first_lines_at_T_but_not_the_whole_suite_keeps_T():
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    first = [p for p in suite.PARTS if p.drop_order <= 4]
    need_first, need_all = sum(_smallest_seconds(first, 8192, info)), sum(_smallest_seconds(suite.PARTS, 8192, info))
    assert need_all > 1.5 * need_first  # the premise: the later parts cost more than the first lines
    seconds = 1.02 * need_first / (0.5 * budget.TARGET)
    assert seconds >= budget.SHORT  # no third-of-budget cap in play
    fit = budget.fit(list(suite.PARTS), info, SPEED, seconds)
    assert fit.size.length == 8192 and fit.left_out  # T kept; later parts planned out instead
    assert budget.fit(list(suite.PARTS), info, SPEED, 0.9 * seconds).size.length == 4096


@pytest.mark.parametrize(("minutes", "slow"), [(3, 1.0), (3, 1.6), (10, 0.5), (10, 1.6)])
def test_a_profile_meets_its_budget_within_20_percent_even_when_parts_run_slow(llama, tmp_path, minutes, slow):
    fake, done = _fake_profile(llama, minutes, tmp_path / "p", slow)
    assert fake.now <= 1.2 * 60 * minutes
    state = done.record["models"][llama]
    assert all(p["status"] in ("done", "left out") for p in state["parts"])
    if slow > 1:  # behind the plan after the first part: what is left was shrunk, and that is recorded
        assert state["adjustments"] and "behind the plan" in state["adjustments"][0]


def test_an_ssm_plans_around_the_rope_parts_and_says_why(mamba, tmp_path, capsys):
    fake, done = _fake_profile(mamba, 5, tmp_path / "p")
    state = done.record["models"][mamba]
    rope_parts = {"rope-dims", "dominant-dimension", "positional-heads", "head-masking"}
    assert set(state["skipped"]) == rope_parts
    assert all("no rotary position embedding" in why for why in state["skipped"].values())
    assert not rope_parts & {e for e, _ in fake.calls} and fake.calls  # the rest ran
    printed = capsys.readouterr().out
    assert all(f"skipped {name}: the model has no rotary position embedding" in printed for name in rope_parts)
    assert json.loads((tmp_path / "p" / "profile.json").read_text())["models"][mamba]["skipped"] == state["skipped"]


def test_the_plan_is_printed_before_any_forward_and_a_rerun_resumes(llama, tmp_path, monkeypatch):
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    events: list[str] = []
    forward, show = LlamaDecoderLayer.forward, command.print_plan
    monkeypatch.setattr(LlamaDecoderLayer, "forward", lambda self, *a, **k: (events.append("forward"),
                                                                             forward(self, *a, **k))[1])
    monkeypatch.setattr(command, "print_plan", lambda *a: (events.append("plan"), show(*a))[1])
    small = [p for p in suite.PARTS if p.name in ("loss-vs-length", "suffix-ppl")]
    monkeypatch.setattr(command, "PARTS", small)
    done = profile([llama], 1, tmp_path / "p", progress=False, probe=lambda lm: SPEED,  # both parts within a third
                   clock=lambda: 0.0)  # real forwards, a clock that a busy machine cannot make drop a part
    assert events[0] == "plan" and "forward" in events
    assert {d.name for d in done.dirs} == {"loss-vs-length", "suffix-ppl"}
    assert all(p["status"] == "done" for p in done.record["models"][llama]["parts"])
    L = done.record["models"][llama]["size"]["length"]
    sequential = {"sequential": True, "looks": 1}  # the loss part is declared sequential before it runs
    assert all(yaml.safe_load((d / "config.yaml").read_text())["meta"] == {"profile_length": L, **(
        sequential if d.name == "loss-vs-length" else {})} for d in done.dirs)
    events.clear()
    again = profile([llama], 1, tmp_path / "p", progress=False, probe=lambda lm: 1 / 0,  # no new probe either
                    clock=lambda: 0.0)
    assert events == ["plan"]  # every unit was finished: nothing is computed again
    assert [p["options"] for p in again.record["models"][llama]["parts"]] == \
        [p["options"] for p in done.record["models"][llama]["parts"]]  # the recorded plan, not a new one


def test_several_models_profile_one_after_another_into_folders_of_their_own(llama, mamba, tmp_path):
    fake = FakeRun()
    done = profile([llama, mamba], 2, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake)
    labels = [done.record["models"][m]["label"] for m in (llama, mamba)]
    assert len(set(labels)) == 2  # both saved as .../m: the second gets a suffix
    assert {d.parent.name for d in done.dirs} == set(labels)
    assert fake.now <= 1.2 * 2 * 60 * 2  # each model its own budget


def test_length_sets_L_for_every_model_and_each_part_records_it(llama, tmp_path, capsys):
    fake = FakeRun()
    done = profile([llama], 3, tmp_path / "p", progress=False, length=256, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake)
    state = done.record["models"][llama]
    assert state["size"]["length"] == 256 and done.record["length"] == 256
    assert "L = 256 as --length sets it (training length 1024)" in state["notes"]
    niah = next(p for p in state["parts"] if p["name"] == "niah-depth")
    assert max(niah["options"]["lengths"]) == 512 and min(niah["options"]["lengths"]) == 128  # 2L .. L/2 (>= 128)
    assert fake.metas and all(m == {"profile_length": 256, **({"sequential": True, "looks": 1} if e ==
                                                               "loss-vs-length" else {})}
                              for m, (e, _) in zip(fake.metas, fake.calls))
    assert fake.now <= 1.2 * 3 * 60
    with pytest.raises(CtxlensError, match="planned with --length 256; run with --length 256 to resume"):
        profile([llama], 3, tmp_path / "p", progress=False, length=512, clock=fake.clock, probe=lambda lm: SPEED,
                runner=fake)
    with pytest.raises(CtxlensError, match="planned with --length 256"):
        profile([llama], 3, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED, runner=fake)


def _planted_grid(fake, retrieved):
    """Rows of every needle-grid run the fake runner was asked for: haystack (seed, sample i) retrieved
    at (length, depth) when ``retrieved(length, depth, i)``."""
    def rows(where, state):
        out = []
        for experiment, options in fake.calls:
            if experiment != "niah-depth":
                continue
            out += [{"length": n, "depth": d, "seed": options.get("seed", 0), "sample": i,
                     "score": 100.0 * retrieved(n, d, i)} for i in range(options["n_samples"])
                    for n in options["lengths"] for d in options["depths"]]
        return out
    return rows


def test_an_undecided_needle_line_gets_rounds_of_new_haystacks_until_it_decides(llama, tmp_path, monkeypatch):
    """Issue 43, part 3: the ends found in every haystack, the middle in every second one (a dip of
    0.5): the grid's first haystacks cannot decide it, so rounds with new seeds add haystacks (at most
    doubling) on the ends and the middle only, until the anytime-valid test decides (both ends, Holm),
    and then stop, the rest of the budget unused."""
    from ctxlens.findings.lines.needle import middle_dip
    from ctxlens.profile import rounds

    fake = FakeRun()
    dip = lambda n, d, i: d != 50.0 or i % 2 == 0  # noqa: E731
    monkeypatch.setattr(rounds, "grid_rows", _planted_grid(fake, dip))
    done = profile([llama], 6, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake, length=256)
    state = done.record["models"][llama]
    extra = [p for p in state["parts"] if p.get("top_up")]
    first = next(p for p in state["parts"] if p["name"] == "niah-depth")
    assert extra and all(p["status"] == "done" for p in extra)
    assert [p["options"]["seed"] for p in extra] == list(range(1, len(extra) + 1))  # new haystacks each round
    assert all(p["options"]["depths"] == [0.0, 50.0, 100.0] and p["options"]["lengths"] == [256] for p in extra)
    sizes = [first["options"]["n_samples"]] + [p["options"]["n_samples"] for p in extra]
    assert all(b <= sum(sizes[:i + 1]) for i, b in enumerate(sizes[1:]))  # a round at most doubles what there is
    line = middle_dip(rounds.grid_rows(None, state), llama, 256)
    assert line.verdict.startswith("the middle dips below both ends") and line.n == sum(sizes)
    before = middle_dip(_planted_grid(type("F", (), {"calls": fake.calls[:-1]})(), dip)(None, state), llama, 256)
    assert not before.verdict.startswith("the middle dips")  # the last round was needed: it stopped at the decision
    assert fake.now < 0.9 * 360  # the time a decided line does not need is not spent


def test_no_round_when_the_needle_lines_decide_on_the_first_haystacks(llama, tmp_path, monkeypatch):
    from ctxlens.profile import rounds

    fake = FakeRun()
    monkeypatch.setattr(rounds, "grid_rows", lambda where, state: [])  # no rows: no line to decide, no round
    done = profile([llama], 10, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake, length=256)
    assert not [p for p in done.record["models"][llama]["parts"] if p.get("top_up")]


def test_parts_left_out_come_back_when_the_first_parts_run_fast(llama, tmp_path):
    """A probe taken on a busy machine (decoding at a tenth of its pace) leaves the answer parts out;
    the forward parts then run at a third of their estimates, and the refit takes them back."""
    slow_probe = Throughput(prefill=SPEED.prefill, at=SPEED.at, slope=SPEED.slope, decode=2.0, seconds=0.0)
    fake = FakeRun(slow=0.3)
    done = profile([llama], 3, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: slow_probe,
                   runner=fake)
    state = done.record["models"][llama]
    assert any("ahead of the plan" in note for note in state["adjustments"])
    assert any(e in ("niah-depth", "ruler", "head-masking") for e, _ in fake.calls)  # an answer part came back
    assert fake.now <= 1.2 * 180


def test_parts_that_generate_and_parts_that_do_not_are_rescaled_by_their_own_pace():
    ratios = pacing.ratios({True: [100.0, 70.0], False: [0.0, 0.0]})
    assert ratios == {True: pytest.approx(0.7), False: 1.0}  # early stops say nothing of a forward's pace
    assert pacing.ratios({True: [100.0, 150.0], False: [0.0, 0.0]})[False] == pytest.approx(1.5)  # a busy machine
    assert pacing.ratios({True: [0.0, 0.0], False: [100.0, 50.0]})[True] == pytest.approx(0.5)  # prompts are forwards
    assert pacing.ratios({True: [100.0, 70.0], False: [50.0, 80.0]}) == {True: pytest.approx(0.7),
                                                                            False: pytest.approx(1.6)}
    assert pacing.ratios({True: [10.0, 100.0], False: [10.0, 1.0]}) == {True: 4.0, False: 0.25}  # clamped
    assert {p.name for p in suite.PARTS if p.generates} == {"niah-depth", "ruler", "head-masking"}


def test_the_needle_depths_always_include_the_middle():
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    for scale in (0.0, 0.1, 0.2, 0.33, 0.5, 0.7, 1.0):
        depths = suite._niah(suite.Size(1024, scale), info)["depths"]
        assert len(depths) % 2 == 1 and 50.0 in depths and depths[0] == 0.0 and depths[-1] == 100.0


@pytest.mark.parametrize(("args", "words"), [
    (["ref:smollm2-135m", "--length", "64"], "--length must be a whole number of tokens of at least 128"),
    (["ref:nope"], "Unknown reference model 'nope'"),
    (["ref:smollm2-135m", "--budget", "0"], "--budget must be a positive number"),
    (["ref:smollm2-135m", "--budget", "-3"], "--budget must be a positive number"),
    (["ref:smollm2-135m", "--out", "FILE"], "is a file, not a directory"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, capsys, args, words):
    (tmp_path / "FILE").write_text("x")
    args = [a.replace("FILE", str(tmp_path / "FILE")) for a in args]
    out = [] if "--out" in args else ["--out", str(tmp_path / "p")]
    assert main(["profile", *args, *out]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "p").exists()


def test_positional_heads_bonferroni_column():
    from ctxlens.experiments.positional_heads import significance

    assert significance(0.001, 20, 0.05) == {"significant": True, "p_bonferroni": pytest.approx(0.02),
                                             "significant_bonferroni": True}
    assert significance(0.004, 20, 0.05) == {"significant": True, "p_bonferroni": pytest.approx(0.08),
                                             "significant_bonferroni": False}
    assert significance(0.3, 10, 0.05)["p_bonferroni"] == 1.0
    assert significance(None, 10, 0.05)["significant_bonferroni"] is False


def test_loss_vs_length_work_counts_the_windows_it_scores():
    import torch

    from ctxlens.core.options import make_config
    from ctxlens.experiments import loss_vs_length as lvl

    config = make_config(lvl.Config, {"lengths": [4, 16], "n_samples": 3, "n_scored": 5})
    ids = torch.zeros(3, 16 + 5, dtype=torch.long)
    windows, _ = lvl.scored_windows(ids, 4, 5, 16)  # what a measure unit at l = 4 forwards: [n * K, 4]
    [w] = lvl.work(config, {"stage": "measure", "length": 4})
    assert (w.sequences, w.length) == tuple(windows.shape)
    assert lvl.work(config, {"stage": "fit"}) == []


# SmolLM2-135M's pace on this project's 2-core machine, idle: 450 tokens/s at 512, 2048 tokens in 3.7 s and
# 8192 in 24 s (the per-token cost grows about 1.8e-7 s per token of length), 17 decoding steps/s
SMOLLM2_CPU = Throughput(prefill=450.0, at=512, slope=1.8e-7, decode=17.0, seconds=0.0)
SMOLLM2_INFO = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)


@pytest.mark.parametrize("minutes", [5, 10, 20])
def test_under_30_minutes_no_part_takes_over_a_third_of_the_budget(minutes):
    fit = budget.fit(list(suite.PARTS), SMOLLM2_INFO, SMOLLM2_CPU, 60.0 * minutes)
    assert len(fit.parts) > 1
    assert max(p.seconds for p in fit.parts) <= 60.0 * minutes / 3
    assert fit.seconds <= budget.TARGET * 60.0 * minutes
    for why in fit.left_out.values():  # the reason names the part's smallest time and the time fitted
        if "third" in why:
            assert f"over a third of the {duration(60.0 * minutes)} it was fitted to" in why, why
            assert "a budget under" not in why


@pytest.mark.parametrize("minutes", [5, 30])
def test_a_part_left_out_says_what_deciding_its_lines_would_take(minutes):
    """Issue 43: a line the budget leaves out names the n its test needs and the minutes: the passkeys the
    masking design needs a priori (90, from its simulation), or the pilot whose spread gives the n."""
    from ctxlens.profile.power import LINES

    fit = budget.fit(list(suite.PARTS), SMOLLM2_INFO, SMOLLM2_CPU, 60.0 * minutes)
    assert fit.left_out
    for part, why in fit.left_out.items():
        lines = [(key, unit, need) for key, p, _o, unit, need, _h in LINES if p == part and key != "retrieval_2l"]
        assert why.startswith("to decide, ") or not lines, why
        for key, unit, need in lines:
            said = why.split(f"{key}: ")[1].split(";")[0]
            if need is None:
                assert said.startswith("a pilot of ") and f" {unit} (about " in said, said
            else:
                assert said.startswith(f"{need()} {unit} at the paper's effect (about "), said
    if "head-masking" in fit.left_out:
        assert "masking_effect: 90 passkeys at the paper's effect" in fit.left_out["head-masking"]


def test_a_ten_minute_budget_plans_at_least_eight_of_the_cards_lines():
    """Issue 33: a 10-minute budget on a small model buys most of the card, each line's parts planned
    (the lines' parts come from the card's own registry: ``CardLine.reads``)."""
    from ctxlens.findings.card import ordered

    fit = budget.fit(list(suite.PARTS), SMOLLM2_INFO, SMOLLM2_CPU, 600.0)
    planned = {p.experiment for p in fit.parts}
    lines = [c.key for c in ordered() if c.reads and set(c.reads) <= planned]
    assert len(lines) >= 8, (lines, fit.left_out)
    assert {"retrieval_2l", "middle_dip", "loss_fit", "usable_context"} <= set(lines)  # the first lines come first


def test_a_long_budget_has_no_share_cap():
    fit = budget.fit(list(suite.PARTS), SMOLLM2_INFO, SMOLLM2_CPU, 3600.0 * 3)
    assert not any("third" in why for why in fit.left_out.values())


class Killed(BaseException):
    """Stands for a SIGKILL inside a part: nothing after it runs (not even ``except Exception``)."""


def _commit_unit(out, seconds: float) -> None:
    """A run directory with one committed unit that took ``seconds`` (as the runner's store writes it)."""
    from ctxlens.runner import RunStore

    store = RunStore(out)
    store.commit("u", [{"x": 1}], seconds=seconds)
    store.close()


@pytest.mark.parametrize("copied", [False, True])
def test_a_part_killed_midway_keeps_the_measured_time_of_its_committed_units(llama, tmp_path, copied):
    """Issue 32, item 10, and issue 45, item 4: the time of the part in flight at a kill was lost; the next run
    adds the measured time of the units that run committed (here one unit of 40 s), never file times: a
    profile copied with ``cp -r`` (every file's time the copy's) recovers the same 40 s. The model's total
    counts every finished part of the killed run too."""
    import shutil
    import time as clock_time

    class KillSecond(FakeRun):
        def __call__(self, experiment, models, out, options, model_options, **kw):
            if len(self.calls) == 1:  # the second part: commit one 40-second unit, then die
                out.mkdir(parents=True, exist_ok=True)
                _commit_unit(out, 40.0)
                raise Killed
            super().__call__(experiment, models, out, options, model_options, **kw)

    first = KillSecond()
    with pytest.raises(Killed):
        profile([llama], 10, tmp_path / "p", progress=False, clock=first.clock, probe=lambda lm: SPEED, runner=first)
    record = json.loads((tmp_path / "p" / records.RECORD).read_text())
    state = record["models"][llama]
    done = [p for p in state["parts"] if p["status"] == "done"]
    killed = next(p for p in state["parts"] if "running_since" in p)
    assert len(done) == 1 and state["spent_s"] == pytest.approx(done[0]["spent_s"], abs=0.2)  # kept as it went
    assert clock_time.time() - killed["running_since"] < 60
    where = tmp_path / "p"
    if copied:  # the whole profile copied elsewhere: new file times, the same measured units
        clock_time.sleep(1.1)
        shutil.copytree(where, tmp_path / "copy", copy_function=shutil.copy)  # as cp -r: times not kept
        where = tmp_path / "copy"
    again = FakeRun()
    again.now = first.now
    resumed = profile([llama], 10, where, progress=False, clock=again.clock, probe=lambda lm: SPEED,
                      runner=again)
    state = resumed.record["models"][llama]
    part = next(p for p in state["parts"] if p["name"] == killed["name"])
    assert part["spent_s"] == pytest.approx(40.0 + part["planned_s"], abs=0.5)  # recovered, then run again
    assert any(killed["name"] in a and "recovered" in a for a in state["adjustments"])
    assert all("running_since" not in p for p in state["parts"])


def test_redo_brings_named_parts_up_to_the_current_design_and_keeps_the_earlier_run(llama, tmp_path, capsys,
                                                                                   monkeypatch):
    from ctxlens.results import read_runs

    fake, done = _fake_profile(llama, 3, tmp_path / "p")
    parts = done.record["models"][llama]["parts"]
    ran = next(p for p in parts if p["status"] == "done" and p["name"] == "positional-heads")
    absent = next((p for p in parts if p["status"] == "left out"), None) or next(p for p in parts if p is not ran)
    record = json.loads((tmp_path / "p" / records.RECORD).read_text())  # an older design: no RoPE-zeroed control
    old = next(p for p in record["models"][llama]["parts"] if p["name"] == "positional-heads")
    old["options"].pop("control")
    (tmp_path / "p" / records.RECORD).write_text(json.dumps(record))
    where = tmp_path / "p" / record["models"][llama]["label"]
    (where / "positional-heads" / "rows").write_text("the earlier run's rows\n")

    again = FakeRun()
    again.now = fake.now
    same = next(p for p in parts if p["status"] == "done" and p["name"] not in ("positional-heads", absent["name"]))
    redone = profile([llama], 3, tmp_path / "p", progress=False, clock=again.clock, probe=lambda lm: 1 / 0,
                     runner=again, redo=("positional-heads", absent["name"], same["name"]))
    assert sorted(e for e, _ in again.calls) == sorted({"positional-heads", absent["experiment"], same["experiment"]})
    assert dict(again.calls)[same["experiment"]] == same["options"]  # same options, redone (the code may differ)
    assert dict(again.calls)["positional-heads"]["control"] == "rope-zeroed"  # the suite's current design
    kept = where / ".superseded" / "positional-heads-1"
    assert (kept / "rows").read_text() == "the earlier run's rows\n"  # moved, never deleted
    state = redone.record["models"][llama]
    now = {p["name"]: p for p in state["parts"]}
    assert now["positional-heads"]["redo"] == 1 and now["positional-heads"]["status"] == "done"
    assert now[absent["name"]]["status"] == "done" and absent["name"] not in state["left_out"]
    assert sum("redone with the suite's current design" in a for a in state["adjustments"]) == 3
    assert ".superseded" not in {d.parent.name for d in redone.dirs}
    assert all(".superseded" not in str(r.path) for r in read_runs([tmp_path / "p"]))

    third = FakeRun()
    profile([llama], 3, tmp_path / "p", progress=False, clock=third.clock, probe=lambda lm: 1 / 0, runner=third,
            redo=("positional-heads", same["name"]))
    assert third.calls == []  # redone already with these options: the same command does not run them twice
    assert not (where / ".superseded" / "positional-heads-2").exists()

    monkeypatch.setattr(resume, "source_digest", lambda: "a-later-fix")  # the code changed, no option did
    fourth = FakeRun()
    fourth.now = third.now
    later = profile([llama], 3, tmp_path / "p", progress=False, clock=fourth.clock, probe=lambda lm: 1 / 0,
                    runner=fourth, redo=("positional-heads",))
    assert [e for e, _ in fourth.calls] == ["positional-heads"]  # redone again: the design may differ
    assert (where / ".superseded" / "positional-heads-2").exists()
    part = next(p for p in later.record["models"][llama]["parts"] if p["name"] == "positional-heads")
    assert part["redo"] == 2 and part["code"] == "a-later-fix" and part["status"] == "done"


def test_redo_refuses_an_unknown_part_and_a_profile_never_planned(llama, tmp_path, capsys):
    assert main(["profile", llama, "--out", str(tmp_path / "p"), "--redo", "positional-head"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Did you mean 'positional-heads'" in err and len(err.splitlines()) == 1
    assert main(["profile", llama, "--out", str(tmp_path / "p"), "--redo", "suffix-ppl,head-masking"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no plan for" in err and "without --redo first" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "p").exists()


def test_a_pace_refitted_to_one_timed_forward_predicts_that_forward_and_keeps_the_probe_point():
    """``Throughput.through``: closed form. After re-fitting to a forward of L tokens that took t seconds,
    the estimate at L is t, the estimate at the probe's own length is unchanged, and the slope never
    goes negative (a forward faster than the probe's pace keeps the per-token cost flat)."""
    speed = Throughput(prefill=500.0, at=2000, slope=1e-8, decode=15.0, seconds=5.0)
    slower = speed.through(8000, 40.0)
    assert slower.prefill_seconds(8000) == pytest.approx(40.0)
    assert slower.prefill_seconds(2000) == pytest.approx(speed.prefill_seconds(2000))
    assert slower.seconds == pytest.approx(45.0) and slower.slope > speed.slope
    assert speed.through(8000, 1.0).slope == 0.0  # faster than linear: flat, never negative
    assert speed.through(1000, 9.0) is speed  # at or below the probe's length: nothing to learn


def test_the_profile_times_one_forward_at_l_when_the_probe_stopped_short(monkeypatch):
    """``_at_length``: one forward of exactly L tokens, timed, and a note with both numbers; none when the
    probe reached L, or when the forward would take more than the share of the budget allowed."""
    now = [0.0]

    class Quadratic:  # a forward of n tokens takes (n / 1000)^2 seconds on a fake clock
        vocab_size = 50
        shapes: list = []

        def final_hidden(self, ids):
            self.shapes.append(tuple(ids.shape))
            now[0] += (ids.shape[1] / 1000) ** 2

    monkeypatch.setattr(planning.time, "perf_counter", lambda: now[0])
    lm = Quadratic()
    speed = Throughput(prefill=1000.0, at=1000, slope=0.0, decode=15.0, seconds=2.0)  # predicts 8 s at 8000
    timed, note = planning.at_length(lm, speed, 8000, allowed=60.0)
    assert lm.shapes == [(1, 8000)]
    assert timed.prefill_seconds(8000) == pytest.approx(64.0)  # what the forward took
    assert "took 64.0 s" in note and "predicted 8.0 s" in note and "L = 8000" in note
    assert planning.at_length(lm, speed, 1000, allowed=60.0) is None  # the probe reached L
    assert planning.at_length(lm, speed, 8000, allowed=5.0) is None  # 8 s predicted: over the share
    assert lm.shapes == [(1, 8000)]  # neither ran a forward


def test_a_resume_reads_the_pace_of_every_part_run_so_far_and_a_resumed_parts_whole_time(llama, tmp_path):
    """Every part takes twice its estimate; the second part is killed 40 s in and resumed. The resume's
    refit must read x2 for both kinds: the parts of the killed run count, and the resumed part's 40 s
    before the kill count with the rest (a resume that read only its own share saw it as faster)."""

    class ByEstimate(FakeRun):  # the clock moves by twice each part's estimate, minus what ran before a kill
        def __init__(self, kill: bool):
            super().__init__(2.0)
            self.kill = kill

        def __call__(self, experiment, models, out, options, model_options, **kw):
            record = json.loads((out.parent.parent / records.RECORD).read_text())
            part = next(p for s in record["models"].values() for p in s["parts"] if p["name"] == out.name)
            out.mkdir(parents=True, exist_ok=True)
            if self.kill and len(self.calls) == 1:
                _commit_unit(out, 40.0)
                raise Killed
            self.now += 2.0 * part["estimate_s"] - part.get("spent_s", 0.0)
            self.calls.append((experiment, options))

    first = ByEstimate(kill=True)
    with pytest.raises(Killed):
        profile([llama], 60, tmp_path / "p", progress=False, clock=first.clock, probe=lambda lm: SPEED, runner=first)
    again = ByEstimate(kill=False)
    again.now = first.now
    resumed = profile([llama], 60, tmp_path / "p", progress=False, clock=again.clock, probe=lambda lm: SPEED,
                      runner=again)
    refits = [a for a in resumed.record["models"][llama]["adjustments"] if "their estimate" in a]
    assert refits and all("x2.00 their estimate when generating, x2.00 when not" in a for a in refits), refits


def test_a_resumed_record_from_before_the_pair_probe_times_the_pair_cost_once(llama, tmp_path):
    """A profile.json whose probe has no cost per (query, key) pair (written before the probe timed it)
    resumes with it timed on the loaded model, said in ``adjustments``; a record with it is not timed again."""
    class KillFirst(FakeRun):
        def __call__(self, *a, **kw):
            raise Killed

    with pytest.raises(Killed):
        profile([llama], 10, tmp_path / "p", progress=False, clock=KillFirst().clock, probe=lambda lm: SPEED,
                runner=KillFirst())
    path = tmp_path / "p" / records.RECORD
    record = json.loads(path.read_text())
    del record["models"][llama]["throughput"]["pair"]
    path.write_text(json.dumps(record))
    fake = FakeRun()
    resumed = profile([llama], 10, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                      runner=fake).record["models"][llama]
    assert resumed["throughput"]["pair"] >= 0
    assert sum("predates the cost per (query, key) pair" in a for a in resumed["adjustments"]) == 1


def test_plan_prints_what_each_card_line_needs_and_writes_nothing(llama, tmp_path, capsys):
    """``--plan`` (issue 43, part 2): the parts and, per card line, n planned, n needed and minutes,
    after the probe and before any part; nothing written, no part run. The a-priori needs are the
    planners' (RULER: (z_0.975 + z_0.8)^2 50^2 / (13 x 10^2) = 15.1 -> 16 samples per task)."""
    fake = FakeRun()
    done = profile([llama], 10, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake, length=256, plan_only=True)
    out = capsys.readouterr().out
    assert fake.calls == [] and not (tmp_path / "p").exists() and done.dirs == []
    assert "what each card line needs to decide" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith("  ") and len(line.split()) > 4}
    assert rows["effective_length"][1] == "ruler" and rows["effective_length"][3] == "16"
    assert rows["middle_dip"][1] == "niah-depth" and int(rows["middle_dip"][3]) > 20
    assert "retrieval_2l" not in rows  # L = 256 is below the training length 1024: not a test of the paper
    assert rows["usable_context"][3] == "161"  # the sequential sign test's windows for a share of 0.65 gaining
    assert rows["accs_depth"][3] == "pilot"
    assert main(["profile", llama, "--budget", "1", "--out", str(tmp_path / "q"), "--plan", "--no-progress"]) == 0
    assert not (tmp_path / "q").exists()


def test_decide_gives_the_needle_rounds_time_beyond_the_budget_in_a_resume(llama, tmp_path, monkeypatch):
    """A profile whose budget runs out leaves the dip undecided after its rounds; the same command with
    --decide 30 runs more rounds beyond the budget (said in the record) until the line decides, and
    nothing else."""
    from ctxlens.profile import rounds

    fake = FakeRun()
    dip = lambda n, d, i: d != 50.0 or i % 2 == 0  # noqa: E731
    monkeypatch.setattr(rounds, "grid_rows", _planted_grid(fake, dip))
    first = profile([llama], 3, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                    runner=fake, length=256)
    from ctxlens.findings.lines.needle import middle_dip

    before = len(fake.calls)
    rounds_before = len([p for p in first.record["models"][llama]["parts"] if p.get("top_up")])
    state = first.record["models"][llama]
    assert not middle_dip(rounds.grid_rows(None, state), llama, 256).verdict.startswith("the middle dips")  # budget out
    done = profile([llama], 3, tmp_path / "p", progress=False, clock=fake.clock, probe=lambda lm: SPEED,
                   runner=fake, length=256, decide=30)
    state = done.record["models"][llama]
    extra = [p for p in state["parts"] if p.get("top_up")]
    assert len(extra) > rounds_before and {e for e, _ in fake.calls[before:]} == {"niah-depth"}
    assert any("beyond the budget under --decide 30" in note for note in state["adjustments"])
    assert middle_dip(rounds.grid_rows(None, state), llama, 256).verdict.startswith("the middle dips below both")
    with pytest.raises(CtxlensError, match="--decide must be"):
        profile([llama], 3, tmp_path / "p", progress=False, runner=fake, length=256, decide=-1)


def test_rounds_go_on_when_the_papers_effect_needs_more_than_the_cap(monkeypatch):
    """The start lost and the middle found in both of 2 haystacks (SmolLM2 at 8192, Gemma at 4096): the
    dip's planner needs 254 haystacks at that discordance, beyond the cap, yet a round is planned (the
    line may decide the reverse, or a dip below the paper's, long before), doubling the haystacks."""
    from ctxlens.profile import rounds

    monkeypatch.setattr(rounds, "MAX_HAYSTACKS", 100)
    base = {"name": "niah-depth", "experiment": "niah-depth", "status": "done", "spent_s": 60.0, "tokens": 42 * 256,
            "options": {"task": "niah_single_1", "lengths": [128, 256, 512], "depths": list(suite.NEEDLE_DEPTHS),
                        "n_samples": 2, "seed": 0}}
    state = {"parts": [base], "size": {"length": 256}, "info": {"train_length": 1024}}
    rows = [{"length": 256, "depth": d, "seed": 0, "sample": i, "score": 0.0 if d == 0.0 else 100.0}
            for i in range(2) for d in suite.NEEDLE_DEPTHS]
    part = rounds.next_round("m", state, rows, left=3600.0)
    assert part is not None and part["options"]["n_samples"] == 2 and part["options"]["seed"] == 1
    assert part["options"]["depths"] == [0.0, 50.0, 100.0] and "middle_dip needs 254" in part["notes"][0]
    assert rounds.next_round("m", {**state, "parts": [base]}, rows * 1, left=1.0) is None  # no time: no round


def _extra(info: ModelInfo, speed: Throughput, size: suite.Size) -> dict[str, float]:
    """Seconds each a-priori decision adds at ``size``, computed by hand from the parts' plans: RULER's
    16 samples per task against its floor, the needle grid's 39 haystacks (the dip's need; retrieval at L vs
    2L needs fewer) at the grid's own pace per haystack."""
    parts = {p.name: p for p in suite.PARTS}
    ruler = budget.plan_part(parts["ruler"], size, info, speed).seconds
    raised = budget.plan_part(parts["ruler"], budget._with(size, "ruler", "n_samples", 16), info, speed).seconds
    grid = budget.plan_part(parts["niah-depth"], size, info, speed)
    return {"ruler": raised - ruler, "niah-depth": (39 - grid.options["n_samples"]) * grid.seconds
            / grid.options["n_samples"]}


def test_the_plan_buys_the_cheapest_decisions_first_and_names_the_rest():
    """Issue 43, part 2: the parts whose lines need a known n (RULER's 16 samples per task for a 10-point
    gap; the needle grid's haystacks, which come in rounds and so are reserved, not planned up front) are
    raised in order of the seconds each adds: with room for one, the cheaper is bought and the other named
    with its minutes; with room for both, both; the sample knob fits what is left after the reserve."""
    from ctxlens.profile.power import a_priori

    assert {(n.part, n.n) for n in a_priori(8192, 8192)} >= {("ruler", 16), ("niah-depth", 39)}
    slow = Throughput(prefill=60.0, at=512, slope=1.8e-7, decode=3.0, seconds=0.0)  # budgets past SHORT: no cap
    floor = budget.fit(list(suite.PARTS), SMOLLM2_INFO, slow, 1.0, length=1024).size
    extra = _extra(SMOLLM2_INFO, slow, suite.Size(1024, 0.0, True))
    kept = [p for p in suite.PARTS if p.name != "head-masking"]  # the masking design's own n is fixed
    base = sum(budget.plan_part(p, suite.Size(1024, 0.0, True), SMOLLM2_INFO, slow).seconds for p in kept)
    cheap, dear = sorted(extra, key=extra.get)
    between = (base + extra[cheap] + 0.5 * (extra[dear] - extra[cheap]) + 1.0) / budget.TARGET
    fit = budget.fit(kept, SMOLLM2_INFO, slow, between, length=1024)
    bought = {c[0] for c in fit.size.counts} | ({"niah-depth"} if fit.size.reserve else set())
    assert bought == {cheap}, (extra, fit.notes)
    assert any(n.startswith("not decided by the plan") and dear in n for n in fit.notes)
    both = budget.fit(kept, SMOLLM2_INFO, slow, (base + sum(extra.values()) + 60.0) / budget.TARGET, length=1024)
    assert ("ruler", "n_samples", 16) in both.size.counts
    assert both.size.reserve == pytest.approx(extra["niah-depth"])
    assert next(p for p in both.parts if p.name == "ruler").options["n_samples"] >= 16
    assert both.seconds + both.size.reserve <= budget.TARGET * (base + sum(extra.values()) + 60.0) / budget.TARGET
    assert floor.counts == () and floor.reserve == 0.0  # a budget that buys nothing plans no decision
    assert suite.Size.of(both.size.as_dict()).as_dict() == both.size.as_dict()  # the record keeps counts, reserve


def test_the_reserve_is_released_once_the_grid_decides_the_needle_lines(tmp_path, monkeypatch):
    """The time reserved for the needle rounds goes to the parts not started as soon as the grid's rows
    decide every needle line, and stays reserved while one is open."""
    from ctxlens.profile import rounds

    state = {"label": "m", "size": {"length": 256, "scale": 0.0, "reserve_s": 300.0},
             "info": {"train_length": 1024}, "adjustments": [], "parts": [{"name": "niah-depth", "status": "done"}]}
    monkeypatch.setattr(rounds, "grid_rows", lambda where, state: [])
    monkeypatch.setattr(rounds, "open_lines", lambda rows, model, L, train: {"middle_dip": object()})
    assert pacing.reserve(state, tmp_path) == 300.0 and not state["adjustments"]
    monkeypatch.setattr(rounds, "open_lines", lambda rows, model, L, train: {})
    assert pacing.reserve(state, tmp_path) == 0.0 and state["size"]["reserve_s"] == 0.0
    assert "5 min reserved for their rounds go to the parts not started" in state["adjustments"][0]


def test_a_resume_with_another_tokenizer_dtype_or_weights_is_refused_by_name(tmp_path):
    """Issue 45, items 2-3: a profile records what its parts measured with (weights digest, tokenizer
    fingerprint, dtype, device, attention, versions); a resume after the tokenizer, the dtype or the weights
    changed is refused naming what changed, before any part runs; with --redo the named parts run with
    the new setup and each part keeps the setup it ran with."""
    from transformers import AutoTokenizer

    model = _save(tmp_path / "m", "llama", max_position_embeddings=1024)
    out = tmp_path / "p"
    fake = FakeRun()
    done = profile([model], 1, out, progress=False, clock=fake.clock, probe=lambda lm: SPEED, runner=fake,
                   length=256)
    state = done.record["models"][model]
    assert state["provenance"]["dtype"] == "float32" and state["provenance"]["tokenizer"]
    assert all(p["provenance"] == state["provenance"] for p in state["parts"] if p["status"] == "done")
    again = FakeRun()
    with pytest.raises(CtxlensError, match=r"another setup than now \(dtype float32 -> bfloat16\)"):
        profile([model], 1, out, {"dtype": "bfloat16"}, progress=False, clock=again.clock, probe=lambda lm: SPEED,
                runner=again, length=256)
    tok = AutoTokenizer.from_pretrained(model)
    tok.add_tokens(["<planted>"])
    tok.save_pretrained(model)  # the tokenizer changed between two runs of the command
    with pytest.raises(CtxlensError, match=r"\(tokenizer [0-9a-f]+ -> [0-9a-f]+\)"):
        profile([model], 1, out, progress=False, clock=again.clock, probe=lambda lm: SPEED, runner=again, length=256)
    assert again.calls == []
    redone = profile([model], 1, out, progress=False, clock=again.clock, probe=lambda lm: SPEED, runner=again,
                     length=256, redo=("suffix-ppl",))
    parts = {p["name"]: p for p in redone.record["models"][model]["parts"]}
    assert parts["suffix-ppl"]["provenance"]["tokenizer"] != parts["loss-vs-length"]["provenance"]["tokenizer"]


def test_a_refit_of_a_reduced_plan_brings_the_part_back_to_its_floor_when_it_fits():
    """A plan that ran the entropy below its floor, refitted to ample time: the part goes back to its floor
    (the refit once failed here: it looked for a note of its own reduction that only the first fit wrote)."""
    reduced = suite.Size(1024, 0.0, True, frozenset({"intrinsic-entropy"}))
    parts = [p for p in suite.PARTS if p.name == "intrinsic-entropy"]
    fit = budget.refit(parts, reduced, SMOLLM2_INFO, SMOLLM2_CPU, 3600.0 * 24, 1.0)
    assert fit.size.reduced == frozenset()
    assert fit.parts[0].options["n_samples"] == suite.entropy_samples(SMOLLM2_INFO, False)


@pytest.mark.parametrize("name", ["accs-layers", "suffix-ppl", "positional-heads", "intrinsic-entropy"])
def test_a_redo_reads_as_many_items_as_the_run_it_replaces(name):
    """A refit may have scaled a part above the record's base size; ``--redo`` plans it at the scale it ran
    at (found from its recorded counts), not at the base scale (the sotu redo read 19 windows for 32)."""
    import dataclasses

    from ctxlens.profile.resume import ran_at

    part = next(p for p in suite.PARTS if p.name == name)
    base = suite.Size(1024, 0.36, True)
    ran = dataclasses.replace(base, scale=0.9).options(part, SMOLLM2_INFO)
    counts = {k: v for k, v in ran.items() if k.startswith("n_")}
    again = ran_at(part, base, SMOLLM2_INFO, ran).options(part, SMOLLM2_INFO)
    assert {k: again[k] for k in counts} == counts
    assert ran_at(part, base, SMOLLM2_INFO, {}) == base  # nothing recorded: the base size
    assert ran_at(part, base, SMOLLM2_INFO, {k: 10**9 for k in counts}) == base  # not reachable: the base size
