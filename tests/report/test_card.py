"""The context-use card and the findings for any model: card numbers recomputed by hand from the
rows, each finding's applicability on every family kind, old runs without model info, and the
card first in the page with every row value escaped."""

from __future__ import annotations

import math

import numpy as np
import pytest

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
    accs += [{"length": L, "layer": i, "stream": "residual", "level": "window", "sample": w, "n": 4,
              "sample_self_sim": 0.95 - 0.05 * i + 0.01 * ((3 * w) % 5)} for i in range(6) for w in range(8)]
    accs += [{"length": L, "layer": i, "stream": "residual", "level": "pair", "sample": a, "other_sample": b, "n": 64,
              "cross_cos": 0.3 + 0.01 * ((a + b) % 3)} for i in range(6) for a in range(8) for b in range(a + 1, 8)]
    heads = [{"transform": "none", "kind": "head", "layer": 0, "head": h, "rho": 0.5, "p_value": p, "rank": h}
             for h, p in enumerate([1e-4, 0.02, 0.5, 0.9])]
    mask = [{"transform": "none", "task": "passkey", "condition": c, "fraction": f, "draw": d, "length": L,
             "score": s, "n": 10} for c, f, d, s in
            [("none", 0.0, 0, 0.9), ("top", 0.25, 0, 0.2)] + [("random", 0.25, d, s) for d, s in
                                                               enumerate([0.7, 0.8, 0.6, 0.9, 0.75])]]
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


def _anytime_p(items: list[float]) -> float:
    """min(1, 1 / max_t K_t) of the betting mixture that the needle lines' test is (``core.sequential``'s
    docstring): items in [-1, 1], H0 mean <= 0, 16 constant bets l_g = (g + 1/2) 0.9 / 16 with prior
    weights proportional to l_g, K_t = sum_g w_g prod_{i <= t} (1 + l_g x_i), written out by hand."""
    bets = [(g + 0.5) * 0.9 / 16 for g in range(16)]
    weights = [b / sum(bets) for b in bets]
    wealth, best = [1.0] * 16, 0.0
    for x in items:
        wealth = [w * (1 + b * x) for w, b in zip(wealth, bets)]
        best = max(best, sum(w * k for w, k in zip(weights, wealth)))
    return min(1.0, 1 / best) if best > 0 else 1.0


def test_card_needle_lines_match_an_independent_computation(tmp_path):
    import itertools

    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    rows = _rows()
    # RULER: 2 of the 13 tasks: the subset mean at the longest length with the most tasks, no effective length
    sub = np.mean([np.mean([r["score"] for r in rows["ruler"] if r["task"] == t and r["length"] == 256])
                   for t in ("niah_single_1", "vt")])
    eff = card["effective_length"]
    assert sub == 75.0 and eff.value is None and math.isclose(eff.numbers["score"], sub)
    assert "2 of 13 tasks" in eff.text and "effective length not determined" in eff.text
    assert eff.verdict.startswith("not tested") and eff.n == 4 and eff.unit == "samples"
    # retrieval at L vs 2L: per haystack (sample) accuracy over depths 0, 50, 100; sign-flip p by enumeration
    acc = {n: [np.mean([r["score"] > 0 for r in rows["niah-depth"] if r["length"] == n and r["sample"] == i])
               for i in range(12)] for n in (L, 2 * L)}
    drops = [a - b for a, b in zip(acc[L], acc[2 * L])]
    got = card["retrieval_2l"]
    assert math.isclose(got.numbers["at_L"], np.mean(acc[L]))
    assert math.isclose(got.numbers["at_2L"], np.mean(acc[2 * L]))
    assert math.isclose(got.value, np.mean(acc[2 * L]) - np.mean(acc[L])) and got.n == 12 and got.unit == "haystacks"
    flips = [sum(s * x for s, x in zip(signs, drops)) for signs in itertools.product((1, -1), repeat=12)]
    assert math.isclose(got.numbers["p_fixed"], sum(v >= sum(drops) - 1e-9 for v in flips) / 2 ** 12)
    assert math.isclose(got.numbers["p"], _anytime_p(drops))  # the verdict's test: the betting mixture by hand
    assert got.verdict.startswith("drops") == (got.numbers["p"] <= 0.05)  # L = the training length: a test
    # the middle at L: each end against depth 50 on haystack pairs, exact McNemar by hand
    cell = {(r["sample"], r["depth"]): r["score"] > 0 for r in rows["niah-depth"] if r["length"] == L}
    dip = card["middle_dip"]
    for name, end in (("start", 0.0), ("end", 100.0)):
        assert math.isclose(dip.numbers[name], np.mean([cell[i, end] for i in range(12)]))
        items = [float(cell[i, end]) - float(cell[i, 50.0]) for i in range(12)]
        assert math.isclose(dip.numbers[f"p_{name}"], _anytime_p(items))
    assert math.isclose(dip.numbers["middle"], np.mean([cell[i, 50.0] for i in range(12)])) and dip.n == 12
    assert -1 <= dip.interval[0] <= dip.value <= dip.interval[1] <= 1


def test_card_loss_lines_match_an_independent_computation(tmp_path):
    from ctxlens.core.stats import t_quantile

    # 5 windows at 128 and 256 (each window its own difficulty), a constrained, bootstrapped fit, and
    # suffix-ppl rows per sequence at L and 2L
    ce = {128: [5.0, 4.1, 3.3, 6.2, 4.4], 256: [4.9, 4.05, 3.1, 6.15, 4.3]}
    measure = [{"stage": "measure", "length": n, "sample": i, "ce": v}
               for n, vs in ce.items() for i, v in enumerate(vs)]
    fit = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": None, "ci_low": lo, "ci_high": hi,
            "n_docs": 5, "n_boot": 400} for q, v, lo, hi in (("C0", 2.0, 1.5, 2.4), ("C", 3.0, 2.0, 4.0),
                                                           ("gamma", 0.6, 0.4, 0.9), ("r2", 0.97, None, None))]
    rows = {"loss-vs-length": measure + fit, "suffix-ppl": [
        {"length": n, "stage": "sequence", "sequence": i, "sequence_nll": v}
        for n, vs in ((L, [3.0, 2.0, 4.0, 2.5]), (2 * L, [3.2, 2.1, 4.3, 2.6])) for i, v in enumerate(vs)]}
    for exp, rs in rows.items():
        config = {**config_of(exp, [M]), "model_info": {M: {**INFO, "train_length": L}}}
        write_run(tmp_path / exp, [{"model": M, "experiment": exp, **r} for r in rs], config=config, env=ENV)
    card = {line.key: line for line in card_of_runs(read_runs([tmp_path / e for e in rows]))[M]}
    # the gain over the last doubling, paired over windows: CE(128) - CE(256) per window
    d = np.array([0.1, 0.05, 0.2, 0.05, 0.1])
    half = t_quantile(4) * d.std(ddof=1) / math.sqrt(5)
    gain = card["usable_context"]
    assert math.isclose(gain.value, d.mean()) and gain.n == 5 and gain.unit == "windows"
    assert np.allclose(gain.interval, (d.mean() - half, d.mean() + half))
    assert gain.verdict == "falls over the last doubling" and gain.underpowered  # 0.01 nats is below its mde
    # the fit: C0 identified, gamma with its bootstrap interval; its gain 3 (128^-0.6 - 256^-0.6) shown beside
    assert math.isclose(gain.numbers["predicted"], 3.0 * (128 ** -0.6 - 256 ** -0.6))
    lstar = (3.0 * (1 - 2 ** -0.6) / 0.01) ** (1 / 0.6)  # about 7200: beyond 256, so not determined
    assert lstar > 256 and "beyond 256, not determined" in gain.text
    assert card["loss_fit"].interval == (0.4, 0.9) and card["loss_fit"].numbers["C0"] == 2.0
    # perplexity at 2L vs L, paired over sequences: differences 0.2, 0.1, 0.3, 0.1; T = L, so 2L is beyond it
    p = np.array([0.2, 0.1, 0.3, 0.1])
    ppl = card["ppl_2l"]
    assert math.isclose(ppl.value, math.exp(p.mean())) and ppl.n == 4
    h = t_quantile(3) * p.std(ddof=1) / 2
    assert np.allclose(ppl.interval, (math.exp(p.mean() - h), math.exp(p.mean() + h)))
    assert ppl.verdict == "rises beyond L"


def test_card_accs_lines_match_an_independent_computation(tmp_path):
    """Per-window rows of 8 windows: S per layer is the mean of the windows' self-similarities, A the mean
    of the pair cosines (equal weights), ACCS = S - A falls at every layer, so rho = -1 and every
    bootstrap resample keeps it (the interval is the point -1)."""
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    rows = _rows()["accs-layers"]
    s = [np.mean([r["sample_self_sim"] for r in rows if r.get("level") == "window" and r["layer"] == i])
         for i in range(6)]
    a = [np.mean([r["cross_cos"] for r in rows if r.get("level") == "pair" and r["layer"] == i]) for i in range(6)]
    accs = [x - y for x, y in zip(s, a)]
    assert all(accs[i + 1] < accs[i] for i in range(5))
    depth = card["accs_depth"]
    assert math.isclose(depth.value, -1.0) and depth.n == 8 and depth.unit == "windows"
    assert np.allclose(depth.interval, (-1.0, -1.0)) and depth.verdict == "falls with depth, as the paper reports"
    assert "ACCS rho = -1.00; S rho = -1.00; A rho = " in depth.text
    assert card["accs_plateau"].text.startswith("not measured")


def test_card_rope_lines_match_an_independent_computation(tmp_path):
    card = {line.key: line for line in card_of_runs(read_runs(_runs(tmp_path)))[M]}
    # positional heads: the rows hold pooled rho only (no per-prompt rho): the ranking, no test
    heads = card["positional_heads"]
    assert heads.value == 0.5 and heads.verdict == "untested" and "no rho per prompt" in heads.uncertainty
    assert "|rho| median 0.50" in heads.text and "top 5% (1 of 4 heads)" in heads.text
    # masking: top - mean(random) at the one fraction; 5 draws cannot give p < 1/6: not tested
    draws = np.array([0.7, 0.8, 0.6, 0.9, 0.75])
    mask = card["masking_effect"]
    assert math.isclose(mask.value, 0.2 - draws.mean()) and mask.n == 10 and mask.unit == "passkeys"
    assert mask.verdict.startswith("untested") and "cannot go below 1/6" in mask.uncertainty


def test_card_entropy_lines_match_an_independent_computation(tmp_path):
    lengths = [16, 32, 64, 128, 256, 512]
    eig = {n: [4.0, 1.0 + 0.1 * j, 0.5 + 0.05 * j] for j, n in enumerate(lengths)}  # raw eigenvalues: tails grow
    ce = {n: 4.0 - 0.2 * j + 0.01 * (j % 2) for j, n in enumerate(lengths)}
    rows = [{"stage": "measure", "length": n, "quantity": "ce", "value": ce[n], "n_samples": 50} for n in lengths]
    rows += [{"stage": "measure", "length": n, "quantity": "eigenvalue", "index": k + 1, "value": v}
             for n in lengths for k, v in enumerate(eig[n])]
    rows += [{"stage": "measure", "length": n, "quantity": "intrinsic_entropy", "n_eig": 3, "value": 0.0}
             for n in lengths]  # the rows' own S_n is not read when raw eigenvalues are there
    rng = np.random.default_rng(0)
    s_true = {n: sum(math.log(v / eig[n][0]) for v in eig[n]) for n in lengths}
    for stage in ("bootstrap", "permutation"):
        for b in range(40):  # bootstrap: the truth with jitter; permutation: every length a mix of all lengths
            for n in lengths:
                c, s3 = ((ce[n], s_true[n]) if stage == "bootstrap" else
                         (np.mean(list(ce.values())), np.mean(list(s_true.values()))))
                rows += [{"stage": stage, "replicate": b, "length": n, "quantity": "ce",
                          "value": c + rng.normal(0, 0.005)},
                         {"stage": stage, "replicate": b, "length": n, "quantity": "intrinsic_entropy", "n_eig": 3,
                          "norm": "max", "value": s3 + rng.normal(0, 0.005)}]
    write_run(tmp_path / "ie", [{"model": M, "experiment": "intrinsic-entropy", **r} for r in rows],
              config={**config_of("intrinsic-entropy", [M]), "model_info": {M: INFO}}, env=ENV)
    line = {x.key: x for x in card_of_runs(read_runs([tmp_path / "ie"]))[M]}["ce_entropy"]
    s = np.array([sum(math.log(v / eig[n][0]) for v in eig[n]) for n in lengths])  # S_3, relative to the largest
    c = np.array([ce[n] for n in lengths])
    assert math.isclose(line.value, float(np.corrcoef(c, s)[0, 1]), rel_tol=1e-9)
    assert math.isclose(line.numbers["slope"], float(np.polyfit(np.log2(lengths), s, 1)[0]), rel_tol=1e-9)
    assert line.n == 50 and line.unit == "windows" and -1 <= line.interval[0] <= line.interval[1] <= 1
    # S rises and CE falls: no permutation replicate reaches the observed slope or r (p = 1 / 41 < 0.05)
    assert line.verdict.startswith("S_n rises with l (ctxlens's test); r < 0 as Eq. 2 (stated for near-Bayes")


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
    rows = [{"model": M, "experiment": "niah-depth", "length": n, "depth": d, "sample": i, "score": s}
            for n, s in ((L, 100.0), (2 * L, 0.0)) for d in (0.0, 50.0, 100.0) for i in range(8)]
    write_run(tmp_path / "niah", rows, config={**config_of("niah-depth", [M]), "model_info": {M: INFO}}, env=ENV)
    table = {f["finding"]: f for f in compute_findings([tmp_path / "niah"])}
    collapse = table["retrieval collapses beyond the training length"]
    assert collapse["status"] == "reproduced" and collapse["models"] == M
    assert f"at {L}, " in collapse["measured"][M] and "(n = 8 haystacks" in collapse["measured"][M]


def test_old_runs_without_model_info_keep_the_zoo_findings(tmp_path):
    _runs(tmp_path / "zoo", model="zoo:rope", info=None)
    _runs(tmp_path / "other", model="hub/unknown", info=None)
    table = {f["finding"]: f for f in compute_findings([tmp_path / "zoo", tmp_path / "other"])}
    depth = table["ACCS falls with layer depth"]
    assert depth["status"] == "reproduced" and depth["models"] == "zoo:rope"
    assert "hub/unknown (the model's kind is not recorded" in depth["note"]
    card = card_of_runs(read_runs([tmp_path / "zoo", tmp_path / "other"]))
    zoo = {x.key: x for x in card["zoo:rope"]}
    assert zoo["effective_length"].value is None and "2 of 13 tasks" in zoo["effective_length"].text
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
    assert card["retrieval_2l"].n == 12 and card["retrieval_2l"].unit == "haystacks"
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
    C (1 - 2^-g) l^-g, is 0.0139 l^-0.0001: it falls below 0.01 only at l = e^3265, beyond any float;
    the line extrapolates nothing: beyond the measured lengths the usable context is "not determined"."""
    from ctxlens.findings.lines.loss import usable_context, usable_length

    assert math.isinf(usable_length(200.0, 1e-4))
    assert math.isclose(usable_length(2.0, 0.5), (2.0 * (1 - 2 ** -0.5) / 0.01) ** 2, rel_tol=1e-12)
    rows = [{"stage": "fit", "fit": "power_law", "quantity": q, "value": v, "stderr": se} for q, v, se in
            (("C0", 1.0, 0.1), ("C", 200.0, 5.0), ("gamma", 1e-4, 1e-3))]
    rows += [{"stage": "measure", "length": n, "sample": i, "ce": 3.0 + 0.1 * i}
             for n in (4096, 8192) for i in range(3)]
    line = usable_context(rows, "m", 8192)
    assert line.value == 0.0 and "beyond 8192, not determined" in line.text and line.numbers["usable"] is None


def test_a_fit_flagged_at_the_end_of_its_gamma_range_is_degenerate_not_a_fall():
    from ctxlens.findings.lines.loss import loss_fit, usable_context
    from ctxlens.metrics.fits import fit_power_law

    lengths = [4, 8, 16, 32, 64, 128, 256]
    straight = fit_power_law(lengths, [5.0 - 0.01 * n for n in lengths])  # a falling line: no power law in it
    assert straight.flag and "search range" in straight.flag  # the fit itself says so (the independent truth)
    rows = [{"stage": "fit", **r} for r in straight.rows()]
    assert loss_fit(rows, "m").verdict.startswith("degenerate fit (gamma reached the end of its search range")
    measured = [{"stage": "measure", "length": n, "sample": i, "ce": 5.0 - 0.01 * n + 0.1 * i}
                for n in (128, 256) for i in range(4)]
    assert "usable context: not determined" in usable_context(rows + measured, "m", 256).text
    clean = fit_power_law(lengths, [2.0 + 3.0 * n ** -0.6 for n in lengths])
    clean_line = loss_fit([{"stage": "fit", **r} for r in clean.rows()], "m")
    assert clean_line.verdict == "descriptive (the test is the gain line)"


def test_the_card_command_prints_a_profiles_card_as_markdown(tmp_path, capsys):
    from ctxlens.cli import main

    root = tmp_path / "profile" / "hub-tiny-rope"  # a profile's layout: DIR/<model>/<part>
    _runs(root)
    assert main(["card", str(tmp_path / "profile")]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0] == f"| question | paper's expectation | {M} |" and len(table) == 2 + 14  # weights, text
    want = {x.key: x for x in card_of_runs(read_runs([root / e for e in _rows()]))[M]}
    assert f"**{want['accs_depth'].text}**" in next(t for t in table if t.startswith("| ACCS depth trend"))
    assert main(["card", str(tmp_path)]) == 2  # no run two levels down from here: one sentence
    assert "holds no ctxlens run" in capsys.readouterr().err


def test_one_seed_of_suffix_perplexity_takes_its_se_from_the_sequences():
    from ctxlens.findings.lines.loss import ppl_2l

    rows = [{"length": L, "seed": 0, "nll": 2.0, "nll_se": 0.03, "n_sequences": 3},
            {"length": 2 * L, "seed": 0, "nll": 2.2, "nll_se": 0.04, "n_sequences": 3}]
    seqs = [{"length": n, "stage": "sequence", "sequence": i, "sequence_nll": v}
            for n, vs in ((L, [1.9, 2.0, 2.1]), (2 * L, [2.1, 2.15, 2.35])) for i, v in enumerate(vs)]
    line = ppl_2l(rows + seqs, "m", L, T=L)
    d = np.array([0.2, 0.15, 0.25])  # paired: the sequences' spread (0.1) cancels
    assert math.isclose(line.numbers["se"], d.std(ddof=1) / math.sqrt(3))
    assert "n = 3 sequences (paired)" in line.uncertainty
    assert line.verdict == "rises beyond L"
    assert ppl_2l(rows, "m", L, T=L).verdict.startswith("untested: no per-sequence NLL")  # old rows: what they lack
    assert ppl_2l(rows + seqs, "m", L, T=4 * L).verdict.startswith("inside the training length")


def test_a_correlation_over_two_lengths_is_untested():
    from ctxlens.findings.lines.entropy import ce_entropy

    points = ((16, "ce", 4.0), (64, "ce", 3.5), (16, "intrinsic_entropy", -90.0), (64, "intrinsic_entropy", -80.0))
    two = [{"stage": "measure", "length": n, "quantity": q, "n_eig": 64 if q == "intrinsic_entropy" else None,
            "value": v, "n_samples": 100} for n, q, v in points]
    line = ce_entropy(two, "m")
    assert line.verdict == "not tested: 2 lengths (the test needs >= 6); re-run the part" and line.interval is None
    assert line.value == -1.0  # two points: r is -1 whatever the model does, hence no test


def test_with_no_effective_length_the_card_shows_the_task_set_at_the_longest_complete_length():
    from ctxlens.findings.lines.needle import effective

    rows = [{"model": M, **r} for r in _rows()["ruler"]]
    rows += [{"model": M, "task": "cwe", "length": 256, "sample": i, "score": 50.0}  # none at 128
             for i in range(4)]
    line = effective(rows, M, L, threshold=99.0)
    assert line.value is None and line.numbers["at"] == 256
    assert math.isclose(line.numbers["score"], (90.0 + 60.0 + 50.0) / 3)  # niah_single_1, vt, cwe at 256


@pytest.mark.parametrize("hostile", ["\x1b[2J\x1b]0;owned\x07", "\x1b(0", "ab\b\b\bxy", "\u202eevil", "a\rb"])
def test_the_card_command_never_prints_a_control_sequence_from_a_file(monkeypatch, capsys, tmp_path, hostile):
    """Issue 45, item 11: a model name (or any text a run's files hold) with a terminal reset, a charset
    switch, backspaces, a carriage return or a right-to-left override prints escaped, never raw."""
    import ctxlens.findings.card as card
    import ctxlens.results as results
    from ctxlens.cli import main
    from ctxlens.findings.card import Line

    model = f"m{hostile}"
    monkeypatch.setattr(results, "read_runs", lambda paths: [])
    monkeypatch.setattr(card, "card_of_runs", lambda runs, threshold=None: {
        model: [Line("length", model, 1024, f"1024 tokens {hostile}", "", f"verdict {hostile}")]})
    assert main(["card", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\b\r\u202e"), repr(out)
    assert repr(hostile[0])[1:-1] in out  # written out as Python escapes it


@pytest.mark.parametrize("key, bad", [("nll", "x"), ("length", "abc"), ("sequence_nll", [1])])
def test_a_row_value_of_the_wrong_type_is_a_line_that_says_so_not_a_traceback(tmp_path, capsys, key, bad):
    """Issue 45, item 10: a string ``nll`` or ``length`` in a row (a file edited by hand) made ``ctxlens
    card`` trace back; the line reads "not computed: ... wrong type" and the rest of the card stands."""
    import shutil
    from pathlib import Path

    from ctxlens.cli import main
    from ctxlens.results import read_run
    from ctxlens.runner import RunStore

    run = tmp_path / "suffix-ppl"
    shutil.copytree(Path(__file__).parents[2] / "reference" / "profile" / "ref-smollm2-135m" / "suffix-ppl", run)
    rows = read_run(run).rows
    for f in run.iterdir():
        if f.name.startswith(("results", "units")):
            f.unlink()
    for row in rows:
        if key in row:
            row[key] = bad
    store = RunStore(run)
    store.commit("u", rows)
    store.close()
    assert main(["card", str(run)]) == 0
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if t.startswith("| suffix perplexity"))
    # a length that is no number matches no length: the line finds no rows at L, and says so
    assert ("not measured" if key == "length" else "not computed: the rows of suffix-ppl hold a value of the wrong "
            "type") in line, line
