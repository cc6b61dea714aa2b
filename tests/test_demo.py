"""``ctxlens demo --quick`` end to end, and each finding of ``ctxlens.findings`` on hand-made rows.

The finding tests build rows whose verdict is known by applying the stated criterion by hand
(the arithmetic is in the comments), one set that reproduces the finding and one that does not.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ctxlens import demo
from ctxlens import findings as fd
from ctxlens.cli import main
from ctxlens.experiments.registry import experiments
from ctxlens.report.findings import STATUSES, check, discover
from ctxlens.runner.store import read_rows

ROPE = {"rope": "zoo:rope"}


# ------------------------------------------------------------------------------- the demo
def test_suites_cover_every_experiment():
    """The suite is read from the declarations; each must give a full and a quick step, into its own run directory."""
    names = set(experiments())
    suite = demo.suite()
    assert {s.experiment for s in suite} == names
    assert {s.experiment for s in suite if s.quick is not None} == names
    assert len({s.run_name for s in suite}) == len(suite)  # no two steps write one directory
    assert {s.run_name for s in suite} >= names  # each experiment's main step is named after it
    trains_own = {n for n, e in experiments().items() if not e.loads_model}
    assert {s.experiment for s in suite if s.models == "own"} == trains_own
    assert all(set(s.controls) <= set(demo.ZOO_NAMES) for s in suite)


def test_quick_demo_writes_rows_findings_and_report(tmp_path, monkeypatch, capsys):
    trained, missing = demo.trained_zoo()
    if not trained:  # no checkpoint shipped: random weights stand in for zoo:rope
        trained, missing = {"rope": "zoo:random-llama"}, [n for n in demo.ZOO_NAMES if n != "rope"]
        monkeypatch.setattr(demo, "trained_zoo", lambda: (dict(trained), list(missing)))
    used = demo._quick_models(trained)
    out = tmp_path / "demo"

    assert main(["demo", "--quick", "--out", str(out)]) == 0

    printed = capsys.readouterr().out
    assert Path(printed.strip().splitlines()[-1]) == out / "report.html"
    for name in missing:
        assert f"zoo:{name} is not trained; `ctxlens zoo train {name}`" in printed
    for step in (s for s in demo.suite() if s.quick is not None):
        names = demo._names(step, used)
        if step.models != "own" and not names:
            assert f"{step.run_name}" in printed and "skipped" in printed
            continue
        rows = read_rows(out / step.run_name)
        assert rows, step.run_name
        assert {r["experiment"] for r in rows} == {step.experiment}
        if step.models != "own":
            assert {r["model"] for r in rows} == {used[n] for n in names}
    data = json.loads((out / "findings.json").read_text())
    table = check(data["findings"])  # raises on a missing key or an unknown status
    assert [f["finding"] for f in table] == [f(fd.Rows([]), {}, {})["finding"] for f, _ in fd.FINDINGS]
    assert all(f["status"] in STATUSES for f in table)
    assert not [s for s in data["steps"] if s.get("errors")]
    if "griffin" not in used and "hybrid" not in used:
        hybrids = next(f for f in table if f["finding"].startswith("hybrids"))
        assert hybrids["status"] == "not measured"
    html = (out / "report.html").read_text()
    assert all(html.count(f"<td>{f['finding']}</td>") == 1 for f in table)  # each finding shown once
    assert discover([out / "accs-layers"]) == [out / "findings.json"]  # `ctxlens report DIR` finds them again


def test_one_failing_model_does_not_stop_the_others(tmp_path):
    failed = demo.run_models("token-loss", ["zoo:not-a-model", "zoo:random-llama"], tmp_path / "r",
                             {"lengths": [16], "n_samples": 1}, {})
    assert list(failed) == ["zoo:not-a-model"] and failed["zoo:not-a-model"].startswith("CtxlensError")
    assert {r["model"] for r in read_rows(tmp_path / "r")} == {"zoo:random-llama"}


def test_findings_module_reads_rows_without_torch():
    code = ("import sys; from ctxlens.findings import compute_findings; "
            "rows = compute_findings([{'experiment': 'accs-layers', 'model': 'zoo:rope', 'length': 512, "
            "'stream': 'residual', 'layer': 0, 'accs': 0.5}]); "
            "assert 'torch' not in sys.modules and len(rows) == 10")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------- hand-made rows
def _windows(key: str, curve: dict, base: dict, windows: int) -> list[dict]:
    """Per-window rows of an ACCS curve {layer or boundary: ACCS} as ``probes.suffix.window_rows`` writes them:
    the pair cosines at the j-th point are A_j = 0.302 + 0.002 j with a jitter of +-0.01 per pair of windows (the
    same at every point), window w's self-similarity A_j + ACCS_j + 0.01 ((3w + j) % 5). The window jitter spans
    0.04 at most, so a resample of windows moves S - A by less than 0.05 between two points: every step of the
    curves below (and their plateau ratios' side of 0.25) survives every bootstrap resample."""
    rows = []
    for j, (v, accs) in enumerate(curve.items()):
        at, a_j = {**base, key: v}, 0.302 + 0.002 * j
        rows += [{**at, "level": "window", "sample": w, "n": 4,
                  "sample_self_sim": a_j + accs + 0.01 * ((3 * w + j) % 5)} for w in range(windows)]
        rows += [{**at, "level": "pair", "sample": a, "other_sample": b, "n": 64,
                  "cross_cos": a_j + 0.01 * ((a + b) % 3 - 1)} for a in range(windows) for b in range(a + 1, windows)]
    return rows


def _layers(values, model="zoo:rope", length=512, windows=8):
    """accs-layers rows: the pooled ACCS per layer and, unless ``windows`` = 0, per-window rows of ``windows``
    windows (the findings need >= 8 for a verdict)."""
    base = {"experiment": "accs-layers", "model": model, "length": length, "stream": "residual"}
    return ([{**base, "layer": i, "accs": v} for i, v in enumerate(values)]
            + _windows("layer", dict(enumerate(values)), base, windows))


def _boundary(curve: dict, model: str, length=512, layer=3, windows=8):
    """accs-boundary rows of one layer: pooled and, unless ``windows`` = 0, per window (as ``_layers``)."""
    base = {"experiment": "accs-boundary", "model": model, "length": length, "stream": "residual", "layer": layer}
    return [{**base, "boundary": b, "accs": v} for b, v in curve.items()] + _windows("boundary", curve, base, windows)


def _run(finding, rows, models, controls=None):
    return finding(fd.Rows(rows), models, controls or {})


def test_accs_depth_reproduced_only_when_accs_falls():
    falls = _run(fd.accs_falls_with_depth, _layers([0.9, 0.8, 0.75, 0.6]), ROPE)
    rises = _run(fd.accs_falls_with_depth, _layers([0.6, 0.7, 0.8, 0.9]), ROPE)
    # 8 windows, each falling monotonically by >= 0.05 a layer with a jitter < 0.05 (``_windows``): spearman is
    # -1 in every resample of windows, so the bootstrap interval lies below 0: reproduced; a rise: +1, not
    assert falls["status"] == "reproduced" and rises["status"] == "not reproduced"
    # the same fall over 7 windows, or pooled rows alone, is not tested
    assert _run(fd.accs_falls_with_depth, _layers([0.9, 0.8, 0.75, 0.6], windows=7), ROPE)["status"] == "undecided"
    assert _run(fd.accs_falls_with_depth, _layers([0.9, 0.8, 0.75, 0.6], windows=0), ROPE)["status"] == "undecided"
    # rows beyond the training length are not read: only the 512 rows decide
    mixed = _layers([0.9, 0.8, 0.75, 0.6]) + _layers([0.1, 0.5, 0.9, 1.0], length=2048)
    assert _run(fd.accs_falls_with_depth, mixed, ROPE)["status"] == "reproduced"
    control = _run(fd.accs_falls_with_depth, _layers([0.9, 0.8, 0.75, 0.6]) + _layers([0.6, 0.7, 0.8, 0.9], "u"),
                   ROPE, {"rope": "u"})
    assert control["status"] == "reproduced" and control[fd.CONTROL] == "zoo:rope: does not show it"


def test_accs_depth_not_measured_without_the_model():
    row = _run(fd.accs_falls_with_depth, _layers([0.9, 0.6]), {})
    assert row["status"] == "not measured" and "zoo:rope (not trained)" in row["note"]


# plateau ratios; the window jitter (< 0.04 between two boundaries) keeps every resample's on the same side of 0.25:
PLATEAU = {0.1: 0.90, 0.3: 0.90, 0.5: 0.88, 0.7: 0.80, 0.9: 0.70, 1.0: 0.50}  # 0.02/0.40 = 0.05; at most 0.06/0.36
STEADY = {0.1: 0.90, 0.3: 0.80, 0.5: 0.70, 0.7: 0.65, 0.9: 0.55, 1.0: 0.50}  # 0.20/0.40 = 0.5; at least 0.16/0.44
FLAT = {0.1: 0.90, 0.5: 0.90, 1.0: 0.95}  # no drop at all (-0.05 +- 0.04): undecided


def test_local_plateau_needs_every_measured_model_to_plateau():
    models = {"mamba2": "m", "alibi": "a"}
    yes = _run(fd.local_plateau, _boundary(PLATEAU, "m") + _boundary(PLATEAU, "a"), models)
    no = _run(fd.local_plateau, _boundary(PLATEAU, "m") + _boundary(STEADY, "a"), models)
    undecided = _run(fd.local_plateau, _boundary(FLAT, "m"), {"mamba2": "m"})
    assert yes["status"] == "reproduced" and "zoo:mlstm (not trained)" in yes["note"]
    assert no["status"] == "not reproduced"
    assert undecided["status"] == "undecided" and "undecided" in undecided["note"]
    few = _run(fd.local_plateau, _boundary(PLATEAU, "m", windows=7) + _boundary(PLATEAU, "a"), models)
    assert few["status"] == "undecided"  # a plateau over 7 windows is not tested
    # one model failing outweighs another being undecided
    mixed = _run(fd.local_plateau, _boundary(FLAT, "m") + _boundary(STEADY, "a"), models)
    assert mixed["status"] == "not reproduced"


def test_hybrid_and_rope_beyond_training_need_a_steady_fall():
    hybrids = {"griffin": "g", "hybrid": "h"}
    assert _run(fd.hybrid_no_plateau, _boundary(STEADY, "g") + _boundary(STEADY, "h"), hybrids)["status"] == \
        "reproduced"
    assert _run(fd.hybrid_no_plateau, _boundary(STEADY, "g") + _boundary(PLATEAU, "h"), hybrids)["status"] == \
        "not reproduced"
    # zoo:rope: only lengths above the training length count; a plateau at 512 is not read
    rows = _boundary(PLATEAU, "zoo:rope", 512) + _boundary(STEADY, "zoo:rope", 2048)
    assert _run(fd.rope_no_plateau_beyond_training, rows, ROPE)["status"] == "reproduced"
    rows = _boundary(STEADY, "zoo:rope", 512) + _boundary(PLATEAU, "zoo:rope", 2048)
    assert _run(fd.rope_no_plateau_beyond_training, rows, ROPE)["status"] == "not reproduced"
    assert _run(fd.rope_no_plateau_beyond_training, _boundary(STEADY, "zoo:rope", 512), ROPE)["status"] == \
        "not measured"


def _needles(model: str, length: int, depth: float, hits: int, n: int, hit=None):
    """niah-depth rows of haystacks (seed 0, sample i) 0..n-1 at one length and depth: haystack i retrieves its
    needle when ``hit(i)``, by default when i < ``hits`` (so a haystack found at a harder cell is found at an
    easier one: the cells of one haystack are paired)."""
    hit = hit or (lambda i: i < hits)
    return [{"experiment": "niah-depth", "model": model, "length": length, "depth": depth, "seed": 0, "sample": i,
             "score": 100.0 if hit(i) else 0.0} for i in range(n)]


def test_retrieval_collapse_needs_a_significant_drop():
    def rows(hits_at, hits_beyond, beyond=None):
        return (_needles("zoo:rope", 512, 50.0, hits_at, 10)
                + _needles("zoo:rope", 1024, 50.0, hits_beyond, 10, hit=beyond))

    # per haystack (in the order sampled), found at 512 minus found at 1024, tested by the anytime-valid betting
    # test (core.sequential; the profile adds haystacks in rounds): 10 drops of 1 decide
    assert _run(fd.retrieval_collapses, rows(10, 0), ROPE)["status"] == "reproduced"
    # 7/10 vs 4/10: 3 drops of 1, 7 zeros: neither a drop nor a drop below the paper's 0.2 is shown: undecided
    # (the fixed-n sign test's p would be 1/2^3 = 0.125)
    assert _run(fd.retrieval_collapses, rows(7, 4), ROPE)["status"] == "undecided"
    # 8/10 vs 2/10: 6 drops of 1 (haystacks 2-7), 4 zeros: the wealth reaches 1 / 0.05 (p 0.048)
    assert _run(fd.retrieval_collapses, rows(8, 2), ROPE)["status"] == "reproduced"
    # 8 drops and 2 rises (sum 6; the fixed-n sign-flip p = 56 / 1024 = 0.055): pairing and order matter. With the
    # two rises first the wealth never reaches 20 (p 0.20): undecided; with them last it crossed 20 after the
    # 8 drops, and evidence once reached stands (the test is valid at any stopping time)
    rises_first = (_needles("zoo:rope", 512, 50.0, 10, 10, hit=lambda i: i >= 2)
                   + _needles("zoo:rope", 1024, 50.0, 0, 10, hit=lambda i: i < 2))
    assert _run(fd.retrieval_collapses, rises_first, ROPE)["status"] == "undecided"
    assert _run(fd.retrieval_collapses, rows(8, 0, beyond=lambda i: i >= 8), ROPE)["status"] == "reproduced"
    nothing = _run(fd.retrieval_collapses, rows(0, 0), ROPE)
    assert nothing["status"] == "undecided" and "undecided" in nothing["note"]
    flagged = [{"experiment": "niah-depth", "model": "zoo:rope", "length": 1024, "depth": 50.0, "seed": 0,
                "sample": 0, "score": None}]
    assert _run(fd.retrieval_collapses, _needles("zoo:rope", 512, 50.0, 5, 10) + flagged, ROPE)["status"] == \
        "not measured"
    # rows that do not name their haystack cannot be paired
    unnamed = [{k: v for k, v in r.items() if k != "sample"} for r in rows(10, 0)]
    assert _run(fd.retrieval_collapses, unnamed, ROPE)["status"] == "not measured"


def test_lost_in_the_middle_needs_both_ends_above_the_middle():
    def rows(start, middle, end, n=10):
        return (_needles("zoo:rope", 512, 0.0, start, n) + _needles("zoo:rope", 512, 50.0, middle, n)
                + _needles("zoo:rope", 512, 100.0, end, n) + _needles("zoo:rope", 1024, 50.0, n, n))

    # each end against the haystack's depth-50 cell, per haystack end - middle in {-1, 0, 1}, anytime-valid betting
    # tests of a dip, of the reverse and of a dip below the paper's 0.25, Holm over the two ends (0.025, then 0.05)
    # 12 and 12 vs 2 of 14: 10 dips at each end: p 0.005 < 0.025 at both
    assert _run(fd.lost_in_the_middle, rows(12, 2, 12, n=14), ROPE)["status"] == "reproduced"
    # 9 and 9 vs 2 of 10: 7 dips at each end (the fixed-n McNemar p would be 1/2^7): the anytime p 0.028 > 0.025
    assert _run(fd.lost_in_the_middle, rows(9, 2, 9), ROPE)["status"] == "undecided"
    # one end below the middle is not a U although the start's dip is large: start 20 vs middle 6 of 20 (14
    # dips), end 5 vs 6 (one haystack found at the middle only): the end's dip is shown below 0.25
    assert _run(fd.lost_in_the_middle, rows(20, 6, 5, n=20), ROPE)["status"] == "not reproduced"
    # 6 and 6 vs 5 of 10: one dip at each end: nothing shown either way
    assert _run(fd.lost_in_the_middle, rows(6, 5, 6), ROPE)["status"] == "undecided"
    nothing = _run(fd.lost_in_the_middle, rows(0, 0, 0), ROPE)
    assert nothing["status"] == "undecided" and "undecided" in nothing["note"]


def _parity_losses(table: dict[int, dict[int, float]]):
    return [{"experiment": "optimal-context", "model": "parity-mlp", "n_train": n, "ctl": c, "seed": 0,
             "best_val_loss": v} for n, by in table.items() for c, v in by.items()]


def test_optimal_context_must_be_interior_and_grow():
    grows = {500: {12: 0.50, 20: 0.40, 30: 0.45, 60: 0.60},  # optimum 20
             2000: {12: 0.50, 20: 0.35, 30: 0.30, 60: 0.40},  # optimum 30
             8000: {12: 0.50, 20: 0.30, 30: 0.20, 60: 0.25}}  # optimum 30: never shrinks, 30 > 20
    assert _run(fd.optimal_context_grows, _parity_losses(grows), {})["status"] == "reproduced"
    shrinks = {500: {12: 0.50, 20: 0.45, 30: 0.40, 60: 0.60}, 2000: {12: 0.50, 20: 0.30, 30: 0.40, 60: 0.45}}
    assert _run(fd.optimal_context_grows, _parity_losses(shrinks), {})["status"] == "not reproduced"
    at_edge = {500: {12: 0.5, 20: 0.4, 60: 0.3}, 2000: {12: 0.5, 20: 0.4, 60: 0.2}}  # optimum at the longest
    assert _run(fd.optimal_context_grows, _parity_losses(at_edge), {})["status"] == "not reproduced"
    assert _run(fd.optimal_context_grows, [], {})["status"] == "not measured"


def _fit(experiment: str, model: str, r: float, **coords):
    return [{"experiment": experiment, "model": model, "stage": "fit", **coords, "quantity": "pearson_r",
             "value": r}, {"experiment": experiment, "model": model, "stage": "fit", **coords, "quantity": "r2",
                           "value": r * r}]


def test_ce_linear_in_intrinsic_entropy_needs_every_n():
    """The card's test (``findings.lines.entropy.entropy_test``): >= 6 lengths, S_n rising and r(CE, S_n) < 0
    against the permutation replicates; fewer lengths: undecided."""
    def rows(sign: float, lengths=(16, 32, 64, 128, 256, 512)):
        out = []
        for j, n in enumerate(lengths):
            s_n, ce = -10.0 + j, 4.0 - sign * 0.1 * j
            out += [{"stage": "measure", "length": n, "quantity": "ce", "value": ce},
                    {"stage": "measure", "length": n, "quantity": "intrinsic_entropy", "n_eig": 8, "value": s_n}]
            for stage in ("bootstrap", "permutation"):  # permutation: every length a mix of all (flat, jittered)
                for b in range(30):
                    jit = 0.01 * ((b * 7 + j * 3) % 11)
                    v = (ce + jit, s_n + jit) if stage == "bootstrap" else (4.0 + jit, -7.5 + jit)
                    out += [{"stage": stage, "replicate": b, "length": n, "quantity": "ce", "value": v[0]},
                            {"stage": stage, "replicate": b, "length": n, "quantity": "intrinsic_entropy",
                             "n_eig": 8, "norm": "max", "value": v[1]}]
        return [{"experiment": "intrinsic-entropy", "model": "zoo:rope", **r} for r in out]

    assert _run(fd.ce_linear_in_intrinsic_entropy, rows(1.0), ROPE)["status"] == "reproduced"
    assert _run(fd.ce_linear_in_intrinsic_entropy, rows(-1.0), ROPE)["status"] == "not reproduced"  # CE rises
    few = [r for r in rows(1.0) if r["length"] in (16, 64, 256)]
    assert _run(fd.ce_linear_in_intrinsic_entropy, few, ROPE)["status"] == "undecided"


def test_parity_dimension_fit_at_threshold_one_twentieth():
    other = _fit("parity-dimension", "parity-mlp", -0.2, threshold=0.25)
    assert _run(fd.ce_linear_in_dimension_parity, _fit("parity-dimension", "parity-mlp", -0.995, threshold=0.05)
                + other, {})["status"] == "reproduced"
    assert _run(fd.ce_linear_in_dimension_parity, _fit("parity-dimension", "parity-mlp", -0.8, threshold=0.05)
                + other, {})["status"] == "not reproduced"
    assert _run(fd.ce_linear_in_dimension_parity, other, {})["status"] == "not measured"


PROMPTS, PASSKEYS = 17, 30


def _heads(means: list[float]):
    """positional-heads rows per (head, prompt) of 16 heads: head i's rho over the 17 prompts is
    ``means[i]`` + 0.3 (p - 8) / 8, p = 0..16 (mean ``means[i]``, sd 0.189, SE 0.0459 across prompts)."""
    return [{"experiment": "positional-heads", "model": "zoo:rope", "transform": "none", "kind": "prompt",
             "layer": i // 4, "head": i % 4, "prompt": p, "rho": m + 0.3 * (p - 8) / 8}
            for i, m in enumerate(means) for p in range(PROMPTS)]


def _masking(none: int, top: int, random: list[int], top_nll: float = 3.0):
    """head-masking rows at fraction 0.1: one row per passkey (probe 0..29, the same under every condition) with
    passkey i found when i < the condition's count, and one perplexity row per condition (random draw d: NLL
    2.9 + 0.01 d; the top heads: ``top_nll``)."""
    def rows(condition, fraction, draw, found, nll):
        base = {"experiment": "head-masking", "model": "zoo:rope", "transform": "none", "condition": condition,
                "fraction": fraction, "draw": draw, "length": 512, "n": 1}
        return [{**base, "task": "passkey", "depth": 0.5, "probe": i, "score": float(i < found)}
                for i in range(PASSKEYS)] + [{**base, "task": "perplexity", "ppl": math.exp(nll), "nll": nll}]

    return [*rows("none", 0.0, 0, none, 2.9), *rows("top", 0.1, 0, top, top_nll),
            *(r for d, found in enumerate(random) for r in rows("random", 0.1, d, found, 2.9 + 0.01 * d))]


def test_positional_heads_need_a_significant_head_and_a_bigger_hurt():
    significant = _heads([0.5] + [0.0] * 15)  # head 0: t = 0.5 / 0.0153, p = 4e-16 < 0.05 / 16
    none_significant = _heads([0.1] * 16)  # each: t = 0.1 / 0.0459 = 2.18, p = 0.045 > 0.05 / 16 = 0.003125
    draws = [24 + d % 4 for d in range(19)]  # random draws find 24-27 of 30 passkeys
    hurts = _masking(30, 6, draws)  # top 6/30 below all 19 draws: randomization p = 1 / 20 = 0.05
    spares = _masking(30, 27, [15 + d % 4 for d in range(19)])  # top 27/30 above every draw: p = 20 / 20
    assert _run(fd.positional_heads_matter, significant + hurts, ROPE)["status"] == "reproduced"
    assert _run(fd.positional_heads_matter, significant + spares, ROPE)["status"] == "not reproduced"
    assert _run(fd.positional_heads_matter, none_significant + hurts, ROPE)["status"] == "not reproduced"
    # the top heads' perplexity above every random draw's (e^3.5 > e^3.08): a general collapse, not a bigger hurt
    collapse = _masking(30, 6, draws, top_nll=3.5)
    assert _run(fd.positional_heads_matter, significant + collapse, ROPE)["status"] == "not reproduced"
    blind = _run(fd.positional_heads_matter, significant + _masking(0, 0, [0] * 19), ROPE)
    assert blind["status"] == "undecided" and "undecided" in blind["note"]
    # 18 draws cannot reach p <= 0.05 (1 / 19 = 0.053): untested, undecided
    assert _run(fd.positional_heads_matter, significant + _masking(30, 6, draws[:18]), ROPE)["status"] == \
        "undecided"


def test_compute_findings_reports_failed_runs_in_the_notes():
    table = fd.compute_findings([], models={}, failures={"niah-depth": "CtxlensError: boom"})
    assert len(table) == len(fd.FINDINGS) and all(f["status"] == "not measured" for f in table)
    notes = {f["finding"]: f["note"] for f in table}
    assert "the niah-depth run failed (CtxlensError: boom)" in notes["lost in the middle"]
    assert "failed" not in notes["ACCS falls with layer depth"]
    check(table)


@pytest.mark.parametrize("finding", [f for f, _ in fd.FINDINGS])
def test_every_finding_cites_its_paper_and_criterion(finding):
    doc = finding.__doc__
    assert any(f"The {p} paper" in doc for p in ("geometry", "intrinsic-entropy", "long-sequence", "RoPE-distance"))
    assert "Criterion" in doc
