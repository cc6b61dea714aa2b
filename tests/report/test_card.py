"""The context-use card and the findings for any model: card numbers recomputed by hand from the
rows, each finding's applicability on every family kind, old runs without model info, and the
card first in the page with every row value escaped."""

from __future__ import annotations

import math

import numpy as np

from ctxlens.findings import compute_findings
from ctxlens.findings.card import card_of_runs
from ctxlens.report import build_report
from ctxlens.results import read_runs
from tests.report.conftest import ENV, config_of, write_run

L = 256
M = "hub/tiny-rope"
INFO = {"model_type": "llama", "kind": "transformer", "position": "rope", "max_positions": 2048, "hard_limit": False,
        "train_length": L, "sliding_window": None, "d_model": 64, "origin": "", "zoo": False}


def _rows() -> dict[str, list[dict]]:
    """One small model's rows of every card experiment, written by hand."""
    ruler = [{"task": t, "length": n, "sample": i, "score": s} for t, per in
             (("niah_single_1", {128: [100, 100, 100, 80], 256: [100, 100, 60, 100]}),
              ("vt", {128: [100, 100, 80, 100], 256: [40, 100, 100, 0]})) for n, ss in per.items()
             for i, s in enumerate(ss)]
    niah = [{"task": "niah_single_2", "length": n, "depth": d, "sample": i, "score": 100.0 * ((i + int(d)) % k != 0)}
            for n, k in ((L, 3), (2 * L, 2)) for d in (0.0, 50.0, 100.0) for i in range(12)]
    fit = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": se, "n_points": 8}
           for q, v, se in (("C0", 2.0, 0.05), ("C", 3.0, 0.4), ("gamma", 0.6, 0.08), ("r2", 0.97, None),
                                ("corr(C, gamma)", 0.9, None))]
    ppl = [{"length": n, "seed": s, "nll": v}
           for n, s, v in ((L, 0, 3.1), (L, 1, 3.3), (2 * L, 0, 3.6), (2 * L, 1, 3.5))]
    accs = [{"length": L, "layer": i, "stream": "residual", "accs": a}
            for i, a in enumerate([0.9, 0.8, 0.85, 0.6, 0.5, 0.4])]
    heads = [{"transform": "none", "kind": "head", "layer": 0, "head": h, "rho": 0.5, "p_value": p, "rank": h}
             for h, p in enumerate([1e-4, 0.02, 0.5, 0.9])]
    mask = [{"transform": "none", "task": "passkey", "condition": c, "fraction": f, "draw": d, "length": L,
             "score": s, "n": 10} for c, f, d, s in
            [("none", 0.0, 0, 90.0), ("top", 0.25, 0, 20.0)] + [("random", 0.25, d, s) for d, s in
                                                                 enumerate([70.0, 80.0, 60.0, 90.0, 75.0])]]
    ie = [{"stage": "fit", "x": "intrinsic_entropy", "n_eig": 2, "quantity": "pearson_r", "value": -0.99,
           "n_points": 7}]
    return {"ruler": ruler, "niah-depth": niah, "loss-vs-length": fit, "suffix-ppl": ppl, "accs-layers": accs,
            "positional-heads": heads, "head-masking": mask, "intrinsic-entropy": ie}


def _runs(root, model: str = M, info: dict | None = INFO, only: tuple[str, ...] | None = None):
    for exp, rows in _rows().items():
        if only is not None and exp not in only:
            continue
        config = config_of(exp, [model])
        if info is not None:
            config["model_info"] = {model: info}
        write_run(root / exp, [{"model": model, "experiment": exp, **r} for r in rows], config=config, env=ENV)
    return root


def _spearman(x, y) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def test_card_needle_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    rows = _rows()
    # RULER effective length: mean over tasks per length, largest length above 85.6
    means = {n: np.mean([np.mean([r["score"] for r in rows["ruler"] if r["task"] == t and r["length"] == n])
                         for t in ("niah_single_1", "vt")]) for n in (128, 256)}
    assert means == {128: 95.0, 256: 75.0} and card["effective_length"].value == 128
    ses = [np.std([r["score"] for r in rows["ruler"] if r["task"] == t and r["length"] == 128], ddof=1) / 2
           for t in ("niah_single_1", "vt")]
    assert math.isclose(card["effective_length"].numbers["se"], math.hypot(*ses) / 2)
    assert card["effective_length"].verdict.startswith("below L")
    # retrieval at L vs 2L: pooled accuracy over depths, and the pooled z
    acc = {n: np.mean([r["score"] > 0 for r in rows["niah-depth"] if r["length"] == n]) for n in (L, 2 * L)}
    got = card["retrieval_2l"].numbers
    assert math.isclose(got["at_L"], acc[L]) and math.isclose(got["at_2L"], acc[2 * L])
    p = (acc[L] + acc[2 * L]) / 2
    assert math.isclose(got["z"], (acc[L] - acc[2 * L]) / math.sqrt(p * (1 - p) * (2 / 36)))
    # the middle dip at L: ends (0, 100) vs middle (50)
    at = [r for r in rows["niah-depth"] if r["length"] == L]
    ends = np.array([r["score"] > 0 for r in at if r["depth"] in (0.0, 100.0)], float)
    mid = np.array([r["score"] > 0 for r in at if r["depth"] == 50.0], float)
    dip = card["middle_dip"]
    assert math.isclose(dip.value, ends.mean() - mid.mean())
    assert math.isclose(dip.numbers["se"], math.sqrt(ends.var() / len(ends) + mid.var() / len(mid)))


def test_card_loss_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    # usable context: C / l^g - C / (2l)^g = 0.01, solved numerically
    lo, hi = 1.0, 1e9
    for _ in range(200):
        mid_l = math.sqrt(lo * hi)
        lo, hi = (mid_l, hi) if 3.0 / mid_l ** 0.6 - 3.0 / (2 * mid_l) ** 0.6 > 0.01 else (lo, mid_l)
    assert math.isclose(card["usable_context"].value, lo, rel_tol=1e-6)
    assert card["usable_context"].verdict == ("within L" if lo <= L else "beyond L")

    def log_l(c, g):  # finite-difference delta method on log l*
        return math.log((c * (1 - 2 ** -g) / 0.01) ** (1 / g))
    h = 1e-6
    dc, dg = (log_l(3 + h, 0.6) - log_l(3 - h, 0.6)) / 2 / h, (log_l(3, 0.6 + h) - log_l(3, 0.6 - h)) / 2 / h
    var = (0.4 * dc) ** 2 + (0.08 * dg) ** 2 + 2 * 0.9 * (0.4 * dc) * (0.08 * dg)  # with corr(C, gamma) = 0.9
    assert math.isclose(card["usable_context"].numbers["se_log"], math.sqrt(var), rel_tol=1e-5)
    assert card["loss_fit"].numbers["C0"] == 2.0 and card["loss_fit"].numbers["gamma_se"] == 0.08
    # perplexity at 2L vs L: NLL difference and its SE over seeds
    ppl = card["ppl_2l"].numbers
    assert math.isclose(ppl["diff"], 3.55 - 3.2)
    assert math.isclose(ppl["se"], math.sqrt(np.var([3.1, 3.3], ddof=1) / 2 + np.var([3.6, 3.5], ddof=1) / 2))
    assert card["ppl_2l"].verdict == "rises beyond L"


def test_card_accs_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    rows = _rows()
    # ACCS depth trend
    accs = [r["accs"] for r in rows["accs-layers"]]
    rho = _spearman(list(range(6)), accs)
    assert math.isclose(card["accs_depth"].value, rho)
    half = 1.959963984540054 * math.sqrt(1.06 / 3)
    assert np.allclose(card["accs_depth"].numbers["ci"], (math.tanh(math.atanh(rho) - half),
                                                          math.tanh(math.atanh(rho) + half)))
    assert card["accs_plateau"].text.startswith("not measured")


def test_card_rope_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    # positional heads (p < 0.05 / 4) and masking: top - mean(random), t interval with t(4, 0.975) = 2.776
    assert card["positional_heads"].value == 1
    draws = np.array([70.0, 80.0, 60.0, 90.0, 75.0])
    mask = card["masking_effect"].numbers
    assert math.isclose(card["masking_effect"].value, 20.0 - draws.mean())
    assert math.isclose(mask["half"], 2.7764451051977987 * draws.std(ddof=1) / math.sqrt(5), rel_tol=1e-6)
    assert card["masking_effect"].verdict.startswith("top heads hurt more")


def test_card_entropy_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    assert card["ce_entropy"].value == -0.99 and card["ce_entropy"].verdict.startswith("linear")


FAMILIES = {  # ModelInfo dicts of every family kind
    "ssm": {"kind": "ssm", "position": "none", "train_length": L},
    "recurrent": {"kind": "recurrent", "position": "none", "train_length": L},
    "alibi": {"kind": "transformer", "position": "alibi", "train_length": L},
    "rope": {"kind": "transformer", "position": "rope", "train_length": L},
    "local-global": {"kind": "transformer", "position": "rope", "train_length": L, "sliding_window": 64},
    "hybrid": {"kind": "hybrid", "position": "rope", "train_length": L},
    "learned": {"kind": "transformer", "position": "learned", "train_length": L, "max_positions": L,
                "hard_limit": True},
}
APPLIES = {  # finding -> the families it is about (the papers' model groups)
    "ACCS falls with layer depth": {"rope", "local-global"},
    "recurrent and ALiBi models plateau on distant perturbations": {"ssm", "recurrent", "alibi"},
    "hybrids contextualise the whole prefix (no plateau)": {"hybrid"},
    "RoPE beyond its training length uses the whole prefix": {"rope", "local-global"},
    "retrieval collapses beyond the training length": set(FAMILIES) - {"learned"},
    "lost in the middle": set(FAMILIES),
    "CE is linear in intrinsic entropy": set(FAMILIES),
    "positional heads matter more than random heads": {"rope", "local-global", "hybrid"},
}


def test_each_finding_applies_by_kind_position_and_length():
    for family, info in FAMILIES.items():
        spec = f"m/{family}"
        table = {f["finding"]: f for f in compute_findings([], models={spec: spec}, infos={spec: info})}
        for finding, fams in APPLIES.items():
            row = table[finding]
            if family in fams:
                assert row["status"] == "not measured", (family, finding, row)
            else:
                assert row["status"] == "not applicable" and f"not applicable to m/{family} (" in row["note"], \
                    (family, finding, row)
    learned = {f["finding"]: f for f in compute_findings([], models={"g": "gpt"}, infos={"gpt": FAMILIES["learned"]})}
    assert "learned positions end at 256 tokens" in learned["retrieval collapses beyond the training length"]["note"]


def test_findings_use_each_model_recorded_training_length(tmp_path):
    rows = [{"model": M, "experiment": "niah-depth", "length": n, "depth": d, "score": s}
            for n, s in ((L, 100.0), (2 * L, 0.0)) for d in (0.0, 50.0, 100.0) for _ in range(5)]
    write_run(tmp_path / "niah", rows, config={**config_of("niah-depth", [M]), "model_info": {M: INFO}}, env=ENV)
    table = {f["finding"]: f for f in compute_findings([tmp_path / "niah"])}
    collapse = table["retrieval collapses beyond the training length"]
    assert collapse["status"] == "reproduced" and collapse["models"] == M
    assert f"at {L} (n=15)" in collapse["measured"][M]


def test_old_runs_without_model_info_keep_the_zoo_findings(tmp_path):
    _runs(tmp_path / "zoo", model="zoo:rope", info=None)
    _runs(tmp_path / "other", model="hub/unknown", info=None)
    table = {f["finding"]: f for f in compute_findings([tmp_path / "zoo", tmp_path / "other"])}
    depth = table["ACCS falls with layer depth"]
    assert depth["status"] == "reproduced" and depth["models"] == "zoo:rope"
    assert "hub/unknown (the model's kind is not recorded" in depth["note"]
    card = card_of_runs(read_runs([tmp_path / "zoo", tmp_path / "other"]))
    zoo = {x.key: x for x in card["zoo:rope"]}
    assert zoo["effective_length"].value == 128  # the zoo's 512 bytes: RULER lengths 128 and 256 both below
    assert zoo["length"].value == 512 and zoo["length"].verdict == "the training length"
    assert all(line.text.startswith("not measured: the model's training length") for line in card["hub/unknown"])


def test_the_card_reads_its_lines_at_the_profile_length_its_runs_record(tmp_path):
    """A profile capped below the training length: L/2L lines at the recorded L, and the first line says so."""
    trained = {**INFO, "train_length": 4 * L}
    for exp, rows in _rows().items():
        config = {**config_of(exp, [M]), "model_info": {M: trained}, "meta": {"profile_length": L}}
        write_run(tmp_path / exp, [{"model": M, "experiment": exp, **r} for r in rows], config=config, env=ENV)
    card = {x.key: x for x in card_of_runs(read_runs([tmp_path / e for e in _rows()]))[M]}
    assert card["length"].value == L and card["length"].verdict.startswith(f"below the training length ({4 * L})")
    assert card["retrieval_2l"].numbers["n_L"] == 36 and card["retrieval_2l"].numbers["n_2L"] == 36
    assert card["ppl_2l"].value is not None
    without = tmp_path / "plain"  # the same rows outside a profile: read at the training length, where none are
    for exp, rows in _rows().items():
        config = {**config_of(exp, [M]), "model_info": {M: trained}}
        write_run(without / exp, [{"model": M, "experiment": exp, **r} for r in rows], config=config, env=ENV)
    plain = {x.key: x for x in card_of_runs(read_runs([without / e for e in _rows()]))[M]}
    assert plain["length"].value == 4 * L and plain["retrieval_2l"].value is None and plain["ppl_2l"].value is None


def test_card_opens_the_report_and_escapes_row_values(tmp_path):
    evil = "<script>alert(1)</script>"
    _runs(tmp_path / "runs", model=evil, info=INFO, only=("niah-depth", "accs-layers"))
    report = build_report(tmp_path / "runs", tmp_path / "r.html", strict=True)
    html = report.path.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    order = [html.index(f'id="{i}"') for i in ("card", "findings", "warnings")]
    assert order == sorted(order)
    card = html[order[0]:order[1]]
    assert "RULER effective length" in card and "not applicable" not in card
    assert card.count("<img") == 1  # the depth x length heatmap beside it (no loss-vs-length run here)
    assert report.findings and {f["status"] for f in report.findings} >= {"reproduced"}


def test_card_says_what_a_model_cannot_have():
    from ctxlens.findings.card import compute_card

    rows = [{"model": m, "experiment": exp, **r} for m in ("ssm", "gpt") for exp, rs in _rows().items() for r in rs]
    infos = {"ssm": FAMILIES["ssm"], "gpt": FAMILIES["learned"]}
    got = compute_card(rows, infos, {"ssm": L, "gpt": L})
    card = {m: {line.key: line for line in lines} for m, lines in got.items()}
    for key in ("positional_heads", "masking_effect"):
        assert card["ssm"][key].text == "not applicable: no RoPE: none positions" and card["ssm"][key].value is None
        assert card["gpt"][key].text == "not applicable: no RoPE: learned positions"
    assert card["gpt"]["retrieval_2l"].text.startswith("not applicable: learned positions end at 256 tokens")
    assert card["ssm"]["retrieval_2l"].value is not None and card["ssm"]["accs_depth"].value is not None


def test_a_fit_with_gamma_near_zero_gives_an_unbounded_usable_context_not_an_overflow():
    """SmolLM2's 10-minute profile fitted gamma near 0 on two samples: (C (1 - 2^-g) / 0.01)^(1/g)
    overflowed and took the whole card down. With C = 200 and gamma = 1e-4 the gain per doubling,
    C (1 - 2^-g) l^-g, is 0.0139 l^-0.0001: it falls below 0.01 only at l = e^3265, beyond any float."""
    from ctxlens.findings.lines.loss import usable_context, usable_length

    assert math.isinf(usable_length(200.0, 1e-4))
    assert math.isclose(usable_length(2.0, 0.5), (2.0 * (1 - 2 ** -0.5) / 0.01) ** 2, rel_tol=1e-12)
    rows = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": se} for q, v, se in
            (("C0", 1.0, 0.1), ("C", 200.0, 5.0), ("gamma", 1e-4, 1e-3))]
    line = usable_context(rows, "m", 8192)
    assert line.value is None and "unbounded" in line.text and line.verdict == "beyond L"


def test_a_fit_flagged_at_the_end_of_its_gamma_range_is_degenerate_not_a_fall():
    from ctxlens.findings.lines.loss import loss_fit, usable_context
    from ctxlens.metrics.fits import fit_power_law

    lengths = [4, 8, 16, 32, 64, 128, 256]
    straight = fit_power_law(lengths, [5.0 - 0.01 * n for n in lengths])  # a falling line: no power law in it
    assert straight.flag and "search range" in straight.flag  # the fit itself says so (the independent truth)
    rows = [{"stage": "fit", **r} for r in straight.rows()]
    assert loss_fit(rows, "m").verdict.startswith("degenerate fit (gamma reached the end of its search range")
    assert usable_context(rows, "m", 256).verdict == "untested"
    clean = fit_power_law(lengths, [2.0 + 3.0 * n ** -0.6 for n in lengths])
    assert loss_fit([{"stage": "fit", **r} for r in clean.rows()], "m").verdict == "falls with context, as expected"


def test_the_card_command_prints_a_profiles_card_as_markdown(tmp_path, capsys):
    from ctxlens.cli import main

    root = tmp_path / "profile" / "hub-tiny-rope"  # a profile's layout: DIR/<model>/<part>
    _runs(root)
    assert main(["card", str(tmp_path / "profile")]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0] == f"| question | paper's expectation | {M} |" and len(table) == 2 + 12
    want = {x.key: x for x in card_of_runs(read_runs([root / e for e in _rows()]))[M]}
    assert f"**{want['accs_depth'].text}**" in next(t for t in table if t.startswith("| ACCS depth trend"))
    assert main(["card", str(tmp_path)]) == 2  # no run two levels down from here: one sentence
    assert "holds no ctxlens run" in capsys.readouterr().err


def test_one_seed_of_suffix_perplexity_takes_its_se_from_the_sequences():
    from ctxlens.findings.lines.loss import ppl_2l, usable_context

    rows = [{"length": L, "seed": 0, "nll": 2.0, "nll_se": 0.03, "n_sequences": 8},
            {"length": 2 * L, "seed": 0, "nll": 2.2, "nll_se": 0.04, "n_sequences": 8}]
    line = ppl_2l(rows, "m", L)
    assert math.isclose(line.numbers["se"], 0.05) and "SE over 8 sequences" in line.uncertainty
    assert line.verdict == "rises beyond L"  # 0.2 > 1.96 x 0.05
    old = [{k: v for k, v in r.items() if k != "nll_se"} for r in rows]  # rows written before nll_se existed
    assert ppl_2l(old, "m", L).numbers["se"] is None and ppl_2l(old, "m", L).verdict == "rises (untested)"
    fit = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": None}
           for q, v in (("C0", -2.4), ("C", 6.0), ("gamma", 0.13))]
    assert usable_context(fit, "m", 1024).text.startswith("1.") and "e+" in usable_context(fit, "m", 1024).text


def test_a_correlation_over_two_lengths_is_untested():
    from ctxlens.findings.lines.entropy import ce_entropy

    two = [{"stage": "fit", "x": "intrinsic_entropy", "n_eig": 64, "quantity": "pearson_r", "value": 1.0,
            "n_points": 2}]
    line = ce_entropy(two, "m")
    assert line.verdict == "untested" and "any two points give r = ±1" in line.uncertainty
    three = [{**two[0], "value": -0.99, "n_points": 3}]
    assert ce_entropy(three, "m").verdict == "linear, as expected"


def test_with_no_effective_length_the_card_shows_the_task_set_at_the_longest_complete_length():
    from ctxlens.findings.lines.needle import effective

    rows = [{"model": M, **r} for r in _rows()["ruler"]]
    rows += [{"model": M, "task": "cwe", "length": 256, "sample": i, "score": 50.0}  # none at 128
             for i in range(4)]
    line = effective(rows, M, L, threshold=99.0)
    assert line.value is None and line.numbers["at"] == 256
    assert math.isclose(line.numbers["score"], (90.0 + 60.0 + 50.0) / 3)  # niah_single_1, vt, cwe at 256
