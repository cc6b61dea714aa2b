"""Issue 43, part 3 for a continuous line: the CE gain over the last doubling in a profile is tested
with an anytime-valid sign test over windows, so the profile may add windows in rounds until it
decides. The truth is simulation: on heavy-tailed nulls looked at after every doubling it fires at
most at its level (where the fixed-n t test, looked at the same way, does not), on a planted gain it
fires with the power the line states; and the profile's round re-runs the part with more windows only
while the line is undecided."""

from __future__ import annotations

import types

import numpy as np
import pytest

from ctxlens.findings.lines.loss import SIGN_ALPHA, SIGN_SHARE, paired_mean, sign_needs, sign_test, usable_context

LOOKS = (8, 16, 32, 64, 128)  # a profile's rounds at most double the windows: the pilot, then four rounds


def _looked(diffs: np.ndarray, fires) -> bool:
    """Whether ``fires`` decides at any of the looks (the windows so far, in order)."""
    return any(fires(list(diffs[:n])) for n in LOOKS)


@pytest.mark.parametrize("null", ["normal", "t2", "skewed"])
def test_under_the_null_the_sign_test_holds_its_level_however_the_rounds_stop(null):
    """2,000 null datasets of 128 windows each, looked at after the pilot and every doubling: the sign
    test's gain side fires in at most 2.5% (+ simulation error) however the rounds stop; the fixed-n t
    interval looked at the same way fires more often than its nominal 2.5% per side."""
    rng = np.random.default_rng(7)
    draw = {"normal": lambda: rng.normal(0, 0.3, 128), "t2": lambda: 0.3 * rng.standard_t(2, 128),
            "skewed": lambda: rng.exponential(0.3, 128) - 0.3 * np.log(2)}[null]  # median 0: a sign-test null
    sims = [draw() for _ in range(2000)]
    sign = np.mean([_looked(d, lambda x: sign_test(x)["fires"] == "up") for d in sims])
    assert sign <= SIGN_ALPHA + 3 * np.sqrt(SIGN_ALPHA * (1 - SIGN_ALPHA) / 2000), sign
    if null == "normal":  # mean 0 as well: the t test's null too, and peeking inflates it
        t = np.mean([_looked(d, lambda x: paired_mean(x)["fires"] == "up") for d in sims])
        assert t > 0.04, t


def test_at_the_stated_share_the_sign_test_decides_with_the_power_it_claims():
    """Windows gaining with probability ``SIGN_SHARE`` (heavy-tailed sizes): by ``sign_needs()`` windows,
    looked at after every window, at least 80% of 1,000 datasets decided a gain; a collapse-sized effect
    (95% of windows gain) decides within 16 windows in most."""
    rng = np.random.default_rng(11)
    n = sign_needs()
    assert n is not None and 100 < n < 250

    def gains(share: float, size: int) -> np.ndarray:
        sign = np.where(rng.random(size) < share, 1.0, -1.0)
        return sign * np.abs(rng.standard_t(2, size))

    decided = [sign_test(list(gains(SIGN_SHARE, n)))["fires"] == "up" for _ in range(1000)]
    assert np.mean(decided) >= 0.77, np.mean(decided)  # 80% up to simulation error
    fast = [sign_test(list(gains(0.95, 16)))["fires"] == "up" for _ in range(500)]
    assert np.mean(fast) >= 0.8


def _rows(diffs: list[float]) -> list[dict]:
    """loss-vs-length measure rows at 512 and 1024 whose per-window gains are ``diffs``."""
    out = []
    for i, d in enumerate(diffs):
        out += [{"stage": "measure", "length": 512, "sample": i, "ce": 3.0 + d},
                {"stage": "measure", "length": 1024, "sample": i, "ce": 3.0}]
    return out


def test_the_line_uses_the_sign_test_only_where_the_profile_declared_rounds():
    diffs = [0.3, -0.2, 0.5, 0.4, -0.1, 0.6, 0.2, 0.3]
    fixed = usable_context(_rows(diffs), "m", 1024)
    seq = usable_context(_rows(diffs), "m", 1024, sequential=True)
    assert "sign test" not in fixed.uncertainty and "sign test by betting" in seq.uncertainty
    assert seq.needs == sign_needs() and seq.effect == SIGN_SHARE and seq.null
    assert "75% of windows gain" in seq.uncertainty
    decided = usable_context(_rows([0.3] * 24), "m", 1024, sequential=True)
    assert decided.verdict.startswith("falls over the last doubling") and not decided.null


def test_a_round_runs_the_loss_part_again_with_more_windows_only_while_the_line_is_undecided(tmp_path, monkeypatch):
    """The round doubles the windows (the natural text's windows come one per document in a fixed order,
    so the larger run holds the smaller one's first), moves the earlier run to .superseded, and counts the
    look; a decided line gets no round."""
    import ctxlens.results as results
    from ctxlens.profile import parts

    where = tmp_path / "m"
    (where / "loss-vs-length").mkdir(parents=True)
    rec = {"name": "loss-vs-length", "experiment": "loss-vs-length", "status": "done", "sequential": True,
           "options": {"n_samples": 8, "lengths": [512, 1024]}, "spent_s": 80.0, "planned_s": 70.0, "tokens": 8192}
    state = {"label": "m", "size": {"length": 1024, "scale": 0.0}, "info": {}, "adjustments": [], "parts": [rec]}
    rows = {"now": _rows([0.3, -0.2, 0.5, 0.4, -0.1, 0.6, 0.2, 0.3])}
    monkeypatch.setattr(results, "read_run", lambda path: types.SimpleNamespace(rows=rows["now"]))
    assert parts.windows_round("m", state, where, left=10.0) is None  # no time for two more windows
    part = parts.windows_round("m", state, where, left=3600.0)
    assert part is rec and rec["status"] == "planned" and rec["options"]["n_samples"] == 16 and rec["looks"] == 2
    assert (where / ".superseded" / "loss-vs-length-1").is_dir() and not (where / "loss-vs-length").exists()
    assert rec["planned_s"] == pytest.approx(160.0) and "round 1, 16 windows (had 8)" in state["adjustments"][-1]
    (where / "loss-vs-length").mkdir()
    rec.update(status="done", spent_s=240.0)  # the round took 160 s, after the first run's 80
    rows["now"] = _rows([0.3, -0.2, 0.5, 0.4, -0.1, 0.6, 0.2, 0.3] * 2)  # still undecided: a second round
    assert parts.windows_round("m", state, where, left=3600.0) is rec and rec["options"]["n_samples"] == 32
    assert rec["planned_s"] == pytest.approx(320.0)  # the last run's 10 s per window, not the runs' sum's 15
    (where / "loss-vs-length").mkdir()
    rec.update(status="done", spent_s=560.0)
    rows["now"] = _rows([0.3] * 32)  # decided: no further round
    assert parts.windows_round("m", state, where, left=3600.0) is None
    rec["sequential"] = False  # a part not declared sequential when planned never gets a round
    rows["now"] = _rows([0.3, -0.2, 0.5, 0.4, -0.1, 0.6, 0.2, 0.3])
    assert parts.windows_round("m", state, where, left=3600.0) is None


def test_the_card_reads_which_parts_a_profile_declared_sequential():
    from ctxlens.findings.models import recorded_sequential

    runs = [types.SimpleNamespace(config={"experiment": "loss-vs-length", "models": ["m"],
                                          "meta": {"profile_length": 1024, "sequential": True, "looks": 2}}),
            types.SimpleNamespace(config={"experiment": "suffix-ppl", "models": ["m"],
                                          "meta": {"profile_length": 1024}})]
    assert recorded_sequential(runs) == {"m": frozenset({"loss-vs-length"})}
