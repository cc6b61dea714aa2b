"""The HTML report: a figure and a table for every experiment, numbers that match the rows,
one colour per model, warnings and findings shown, self-contained, and no torch."""

import json
import math
import statistics
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.report.build import build_report
from ctxlens.report.registry import plotters
from tests.report.conftest import DATA, ENV, config_of, write_run


def experiment_names() -> list[str]:
    """Every registered experiment. This imports torch (the experiments do); that the report
    itself never does is checked in a fresh process (``test_reading_and_reporting_never_import_torch``)."""
    from ctxlens.experiments.registry import experiments

    return sorted(experiments())


def raw_rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name / "results.jsonl").read_text().splitlines()]


def panel(report, name: str):
    return next(p for _, p in report.panels if p.name == name)


def handles(fig) -> list[tuple[str, object, str]]:
    """(label, artist, hex colour) of every legend entry of a figure."""
    out = []
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if hasattr(h, "lines"):  # errorbar container: its data line
                color = h.lines[0].get_color()
            elif hasattr(h, "patches"):  # bar container
                color = h.patches[0].get_facecolor()
            else:
                color = h.get_color()
            out.append((label, h, to_hex(color, keep_alpha=False)))
    return out


# ------------------------------------------------------------------------------- coverage
def test_every_experiment_has_a_plotter_and_a_fixture():
    names = experiment_names()
    assert len(names) >= 22
    assert set(names) <= set(plotters()), f"no figure for {set(names) - set(plotters())}"
    fixtures = {p.name for p in DATA.iterdir()}
    assert set(names) <= fixtures, f"no fixture for {set(names) - fixtures}"


def test_full_report_draws_and_writes_every_figure(full_report):
    sections = {s.experiment: s for s in full_report.sections}
    assert set(sections) == {p.name for p in DATA.iterdir() if p.is_dir()}
    for name, section in sections.items():
        figs = [p for p in section.panels if p.fig is not None]
        assert figs, f"{name} has no figure"
        for p in figs:
            stem = full_report.figure_dir / p.name
            assert stem.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert stem.with_suffix(".pdf").read_bytes()[:5] == b"%PDF-"
            assert len(pd.read_csv(stem.with_suffix(".csv"))) == len(p.table) > 0
            for ax in p.fig.axes:
                if ax.get_visible() and not ax.get_label() == "<colorbar>":
                    assert ax.get_xlabel() and ax.get_ylabel(), f"{p.name}: unlabelled axis"
    assert not full_report.warnings or all(w["kind"] != "figure failed" for w in full_report.warnings)


def test_one_colour_per_model_across_all_figures(full_report):
    colors = dict(full_report.palette.items())
    # zoo:random-llama, other-llama, parity-mlp, parity-transformer
    assert len(set(colors.values())) == len(colors) == 4
    checked = 0
    for _, p in full_report.panels:
        if p.fig is None:
            continue
        for label, _, color in handles(p.fig):
            for model, expected in colors.items():
                if label == model or label.startswith((f"{model} (", f"{model}:")):
                    assert color == expected, f"{p.name}: {label} drawn in {color}, not {expected}"
                    checked += 1
        for ax in p.fig.axes:  # facets titled with a model carry its colour
            if ax.get_title() in colors:
                assert to_hex(ax.title.get_color()) == colors[ax.get_title()]
                checked += 1
    assert checked > 60


# ------------------------------------------------------------------------------- numbers
def test_token_loss_means_and_errors_match_the_rows(full_report):
    p = panel(full_report, "token-loss")
    rows = raw_rows("token-loss")
    for model in {r["model"] for r in rows}:
        for length in {r["length"] for r in rows}:
            nll = [r["nll"] for r in rows if r["model"] == model and r["length"] == length]
            got = p.table[(p.table["series"] == model) & (p.table["length"] == length)].iloc[0]
            assert got["nll"] == pytest.approx(statistics.mean(nll), rel=1e-12)
            assert got["sem"] == pytest.approx(statistics.stdev(nll) / math.sqrt(len(nll)), rel=1e-12)
        line = next(h for label, h, _ in handles(p.fig) if label == model).lines[0]
        expected = [statistics.mean(r["nll"] for r in rows if r["model"] == model and r["length"] == n)
                    for n in sorted({r["length"] for r in rows})]
        assert line.get_ydata().tolist() == pytest.approx(expected, rel=1e-12)


def test_accs_lines_are_the_rows(full_report):
    p = panel(full_report, "accs-layers")
    rows = raw_rows("accs-layers")
    acc_ax = p.fig.axes[0]
    for h, label in zip(*acc_ax.get_legend_handles_labels()):
        model, length = label.split(" (length=")
        want = sorted((r["layer"], r["accs"]) for r in rows
                      if r["model"] == model and r["length"] == int(length[:-1]) and "level" not in r)
        assert h.lines[0].get_xydata().tolist() == [list(map(float, w)) for w in want]
    assert acc_ax.get_ylabel().startswith("ACCS")


def _ruler_rows(model, means_by_length):
    """Two tasks, two samples each; the per-length mean over task means is given."""
    rows = []
    for length, (a, b) in means_by_length.items():
        for task, scores in (("task_a", a), ("task_b", b)):
            rows += [{"model": model, "experiment": "ruler", "task": task, "length": length, "sample": i, "score": s,
                      "pred": "x", "outputs": ["y"]} for i, s in enumerate(scores)]
    return rows


@pytest.mark.parametrize("threshold,effective,sustained", [(None, 8000, 2000), (95.0, 1000, 1000),
                                                            (70.0, 8000, 8000), (100.0, None, None)])
def test_effective_length_of_hand_made_scores(tmp_path, threshold, effective, sustained):
    # per-length means over tasks: m 100, 90, 80, 95; n 50, 100. RULER's effective length: the
    # largest length whose mean exceeds the threshold; sustained: no length up to it at or below
    rows = _ruler_rows("m", {1000: ([100, 100], [100, 100]), 2000: ([100, 80], [90, 90]),
                             4000: ([80, 80], [80, 80]), 8000: ([100, 90], [95, 95])})
    rows += _ruler_rows("n", {1000: ([50, 50], [50, 50]), 2000: ([100, 100], [100, 100])})
    run = write_run(tmp_path / "ruler", rows, config=config_of("ruler", ["m", "n"]), env=ENV)
    report = build_report(run, tmp_path / "r.html", threshold=threshold, strict=True)
    p = panel(report, "ruler-length")
    table = p.extra_tables[0][1].set_index("series")
    none = lambda v: v is None or np.isnan(v)  # noqa: E731
    assert (none(table.loc["m", "effective_length"]) if effective is None
            else table.loc["m", "effective_length"] == effective)
    assert (none(table.loc["m", "sustained_length"]) if sustained is None
            else table.loc["m", "sustained_length"] == sustained)
    n_effective = table.loc["n", "effective_length"]  # 50 then 100: RULER counts 2000 although 1000 fails
    assert none(n_effective) if threshold == 100.0 else n_effective == 2000
    assert none(table.loc["n", "sustained_length"])
    line = next(h for label, h, _ in handles(p.fig) if label == "m").lines[0]
    assert line.get_ydata().tolist() == [100, 90, 80, 95]


def test_a_task_that_does_not_fit_a_length_leaves_that_length_without_a_mean(tmp_path):
    # task_b does not fit at 2000 (a flagged row): 2000's mean over {a, b} is unknown, not task_a's 100
    rows = _ruler_rows("m", {1000: ([90, 90], [90, 90]), 4000: ([88, 88], [88, 88])})
    rows += [{"model": "m", "experiment": "ruler", "task": "task_a", "length": 2000, "sample": i, "score": 100.0,
              "pred": "x", "outputs": ["y"]} for i in range(2)]
    rows += [{"model": "m", "experiment": "ruler", "task": "task_b", "length": 2000, "sample": None, "score": None,
              "flag": "does not fit"}]
    run = write_run(tmp_path / "ruler", rows, config=config_of("ruler", ["m"]), env=ENV)
    report = build_report(run, tmp_path / "r.html", strict=True)
    p = panel(report, "ruler-length")
    per_length = p.table.set_index("length")
    assert np.isnan(per_length.loc[2000, "score"]) and per_length.loc[2000, "missing"] == "task_b"
    assert per_length.loc[2000, "scored_mean"] == 100.0 and per_length.loc[4000, "score"] == 88.0
    eff = p.extra_tables[0][1].iloc[0]
    assert eff["effective_length"] == 4000 and eff["sustained_length"] == 1000
    tasks = panel(report, "ruler-tasks").table
    flagged = tasks[(tasks["task"] == "task_b") & (tasks["length"] == 2000)]
    assert len(flagged) == 1 and np.isnan(flagged["score"].iloc[0]) and flagged["flag"].iloc[0] == "does not fit"


def test_threshold_comes_from_the_ruler_config(tmp_path):
    rows = _ruler_rows("m", {1000: ([100, 100], [100, 100]), 2000: ([100, 80], [90, 90])})
    run = write_run(tmp_path / "ruler", rows, config=config_of("ruler", ["m"], threshold=95), env=ENV)
    eff = panel(build_report(run, tmp_path / "r.html", strict=True), "ruler-length").extra_tables[0][1]
    assert eff["threshold"].tolist() == [95.0] and eff["effective_length"].tolist() == [1000]


def test_optimum_of_hand_made_accuracy_is_starred(tmp_path):
    rows = [{"model": "m", "experiment": "visible-fraction", "task": "vt", "length": 1000, "fraction": f,
             "visible": v, "sample": i, "score": s}
            for f, v, scores in ((0.25, 100, [0, 40]), (0.5, 200, [60, 60]), (1.0, 400, [40, 40]))
            for i, s in enumerate(scores)]
    run = write_run(tmp_path / "vf", rows, config=config_of("visible-fraction", ["m"]), env=ENV)
    p = panel(build_report(run, tmp_path / "r.html", strict=True), "visible-fraction")
    assert p.table.loc[p.table["optimum"], "visible"].tolist() == [200]
    stars = [line.get_xydata().tolist() for ax in p.fig.axes for line in ax.get_lines() if line.get_marker() == "*"]
    assert stars == [[[200.0, 60.0]]]


def test_power_law_fit_curve_is_the_closed_form(tmp_path):
    rows = [{"model": "m", "experiment": "loss-vs-length", "stage": "measure", "length": n, "sample": 0,
             "ce": 2 + 3 / math.sqrt(n)} for n in (2, 4, 8, 16, 32)]
    rows += [{"model": "m", "experiment": "loss-vs-length", "stage": "fit", "fit": "power_law", "quantity": q,
              "value": v, "stderr": 0.01, "n_points": 5, "flag": None}
             for q, v in (("C0", 2.0), ("C", 3.0), ("gamma", 0.5), ("r2", 1.0))]
    run = write_run(tmp_path / "lvl", rows, config=config_of("loss-vs-length", ["m"]), env=ENV)
    p = panel(build_report(run, tmp_path / "r.html", strict=True), "loss-vs-length")
    assert p.table["fitted"].astype(float).tolist() == pytest.approx([2 + 3 / math.sqrt(n) for n in (2, 4, 8, 16, 32)])
    fit = next(h for label, h, _ in handles(p.fig) if label.startswith("fit"))
    x, y = fit.get_xdata(), fit.get_ydata()
    assert y == pytest.approx(2 + 3 * x ** -0.5) and x.min() == 2 and x.max() == 32
    params = p.extra_tables[0][1].iloc[0]
    assert (params["C0"], params["C"], params["gamma"], params["C0 stderr"]) == (2.0, 3.0, 0.5, 0.01)


# ------------------------------------------------------------------------------- warnings
def test_warnings_show_flags_missing_values_and_incomplete_runs(tmp_path):
    rows = [{"model": "m", "experiment": "token-loss", "length": 16, "sample": 0, "nll": 5.0, "flag": None},
            {"model": "m", "experiment": "token-loss", "length": 16, "sample": 1, "nll": None,
             "flag": "non-finite loss"},
            {"model": "m", "experiment": "token-loss", "length": 32, "sample": 0, "nll": None, "flag": None}]
    run = write_run(tmp_path / "tl", rows, config=config_of("token-loss", ["m"]))  # no env.json
    nan = b'{"model":"m","experiment":"token-loss","length":32,"sample":1,"nll":NaN,"flag":null}\n'
    with open(run / "results.jsonl", "ab") as f:  # a hand-written non-finite number, committed
        f.write(nan)
    size = (run / "results.jsonl").stat().st_size
    with open(run / "units.jsonl", "a") as f:
        f.write(json.dumps({"unit": "nan", "rows": 1, "end": size}) + "\n")
    with open(run / "results.jsonl", "ab") as f:  # and a row of a unit that never committed
        f.write(b'{"model":"m","experiment":"token-loss","length":64,"sample":0,"nll":1.0}\n')
    report = build_report(run, tmp_path / "r.html", strict=True)
    kinds = {(w["kind"], w["detail"].split(" (")[0], w["count"]) for w in report.warnings}
    assert ("flag", "non-finite loss", 1) in kinds
    assert ("missing value", "no finite value for 'nll'", 2) in kinds
    assert ("no environment", "env.json is missing", 1) in kinds
    assert any(w["kind"] == "uncommitted" and w["detail"].startswith("1 result line") for w in report.warnings)
    html = (tmp_path / "r.html").read_text()
    warnings = html[html.index('id="warnings"'):html.index('id="x-token-loss"')]
    expected = ("non-finite loss", "no finite value for &#x27;nll&#x27;", "env.json is missing", "length=32, sample=0")
    assert all(text in warnings for text in expected)


def test_unknown_experiment_gets_a_table(tmp_path):
    rows = [{"model": "m", "experiment": "my-probe", "depth": d, "hits": d * 2} for d in range(3)]
    report = build_report(write_run(tmp_path / "p", rows, config=config_of("my-probe", ["m"]), env=ENV),
                          tmp_path / "r.html", strict=True)
    (section,) = report.sections
    (p,) = section.panels
    assert p.fig is None and p.table["hits"].tolist() == [0, 2, 4]
    assert 'id="x-my-probe"' in (tmp_path / "r.html").read_text()


def test_rows_without_values_or_a_failing_figure_become_a_warning_and_a_table(tmp_path, monkeypatch):
    rows = [{"model": "m", "experiment": "accs-layers", "layer": i, "accs": None, "note": "nothing measured"}
            for i in range(2)]
    run = write_run(tmp_path / "empty", rows, config=config_of("accs-layers", ["m"]), env=ENV)
    report = build_report(run, tmp_path / "r.html", strict=True)
    (none,) = [w for w in report.warnings if w["kind"] == "no figure"]
    assert none["experiment"] == "accs-layers" and "accs" in none["detail"]
    (p,) = report.sections[0].panels
    assert p.fig is None and p.table["note"].tolist() == ["nothing measured"] * 2

    def broken(df, ctx):
        raise ZeroDivisionError("a plotting bug")

    import ctxlens.report.build

    patched = {**plotters(), "token-loss": replace(plotters()["token-loss"], fn=broken)}
    monkeypatch.setattr(ctxlens.report.build, "plotters", lambda: patched)
    with pytest.raises(ZeroDivisionError):
        build_report(DATA / "token-loss", tmp_path / "r.html", strict=True)
    report = build_report(DATA / "token-loss", tmp_path / "r.html")
    (failed,) = [w for w in report.warnings if w["kind"] == "figure failed"]
    assert failed["detail"] == "ZeroDivisionError: a plotting bug"
    assert len(report.sections[0].panels[0].table) == len(raw_rows("token-loss"))


# ------------------------------------------------------------------------------- page
class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_page_is_self_contained_and_opens_with_the_findings(full_report):
    html = full_report.path.read_text()
    parser = Tags()
    parser.feed(html)
    tags = parser.tags
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object", "embed")]
    imgs = [a["src"] for t, a in tags if t == "img"]
    beside = sum(1 for s in full_report.sections if s.experiment in ("niah-depth", "loss-vs-length")
                 and s.panels and s.panels[0].fig is not None)  # the card's figures, drawn again beside it
    assert len(imgs) == sum(p.fig is not None for _, p in full_report.panels) + beside
    assert all(src.startswith("data:image/png;base64,") for src in imgs)
    for _, attrs in tags:
        for key, value in attrs.items():
            assert not key.startswith("on")
            assert not str(value).lower().startswith(("http:", "https:", "javascript:", "//"))
    csp = [a for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]
    order = [html.index(f'id="{i}"') for i in ("card", "findings", "warnings", "x-accs-layers", "runs")]
    assert order == sorted(order)
    findings = html[order[1]:order[2]]
    for cls in ("status reproduced", "status not-reproduced", "status not-measured"):
        assert f'class="{cls}"' in findings
    assert "ACCS falls with depth" in findings and "1 reproduced, 1 not reproduced, 1 not measured" in findings


def test_findings_are_checked_and_found_in_run_folders(tmp_path):
    run = write_run(tmp_path / "demo" / "tl", [{"model": "m", "experiment": "token-loss", "length": 16, "nll": 1.0}],
                    config=config_of("token-loss", ["m"]), env=ENV)
    finding = {"finding": "f", "paper": "p", "expected": "e", "measured": 1.5, "status": "Not_Reproduced"}
    (tmp_path / "demo" / "findings.json").write_text(json.dumps({"findings": [finding]}))
    report = build_report(tmp_path / "demo", tmp_path / "r.html", strict=True)
    assert report.findings == [{**finding, "status": "not reproduced"}]
    again = build_report(tmp_path / "demo", tmp_path / "r.html", findings=[finding], strict=True)  # file + list
    assert again.findings == report.findings
    for bad, match in (({**finding, "status": "maybe"}, "status 'maybe'"), ({"finding": "f"}, "lacks paper")):
        with pytest.raises(CtxlensError, match=match):
            build_report(run, tmp_path / "r.html", findings=[bad])
    with pytest.raises(CtxlensError, match="ending in .html"):
        build_report(run, tmp_path / "r.txt")


def test_cli_report_writes_the_page_and_errors_in_one_sentence(tmp_path, capsys):
    out = tmp_path / "out" / "rep.html"
    assert main(["report", str(DATA / "token-loss"), str(DATA / "suffix-ppl"), "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    assert out.is_file() and (tmp_path / "out" / "rep-figures" / "suffix-ppl.pdf").is_file()
    assert main(["report", str(tmp_path / "nope"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxlens: error:") and "not a directory" in err and "\n" not in err


NO_TORCH = """
import sys
from ctxlens.cli import main
import ctxlens.results
from ctxlens.report import build_report
df = ctxlens.results.load(sys.argv[1])
build_report([sys.argv[1], sys.argv[2]], sys.argv[3], strict=True)
assert main(["report", sys.argv[1], "--out", sys.argv[3]]) == 0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "ctxlens.lm"))
heavy += sorted(m for m in sys.modules if m.startswith(("ctxlens.experiments", "ctxlens.lm")))
print("HEAVY", heavy, len(df))
"""


def test_reading_and_reporting_never_import_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", NO_TORCH, str(DATA / "ruler"), str(DATA / "loss-vs-length"),
                          str(tmp_path / "r.html")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY [] " in out.stdout
    assert (tmp_path / "r.html").is_file()
