"""The report's sections are ordered by the declarations, not by a hand list (issue 46, part 5): each
plotter declares the paper its experiment reproduces (checked here against the experiment registry),
and its section goes with that paper's, in the order the plotters were declared."""

from __future__ import annotations

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.report.build import build_report
from ctxlens.report.figures import Panel
from ctxlens.report.registry import PLOTTERS, plotter, plotters, section_order
from tests.report.conftest import ENV, config_of, write_run

# The order the report had before it was derived (a hand list), which the declarations keep; parity-table,
# missing from that list, went last: it now sits with its paper, after parity-dimension.
PAPERS_ORDER = [
    "accs-layers", "accs-boundary", "accs-length", "anisotropy-compression", "suffix-ppl", "rope-theta-sweep",
    "collapse-modes",  # geometry
    "loss-vs-length", "intrinsic-entropy", "parity-dimension", "parity-table", "optimal-context", "visible-fraction",
    "position-weighted-qa",  # intrinsic-entropy
    "ruler", "niah-depth", "niah-format",  # long-sequence
    "rope-dims", "dominant-dimension", "positional-heads", "head-masking", "rope-dim-ablation",  # rope-distance
    "token-loss",  # no paper: the core's smoke analysis
]


def test_the_sections_follow_the_papers_in_declaration_order():
    assert section_order(reversed(list(plotters()))) == PAPERS_ORDER


def test_every_experiment_declares_its_paper_on_its_plotter():
    """The report cannot import the experiments (it reads rows only), so each plotter repeats its
    experiment's paper; they must agree, and every experiment has a plotter (README: two files)."""
    from ctxlens.experiments.registry import experiments

    reg = plotters()
    missing = sorted(set(experiments()) - set(reg))
    assert not missing, f"experiments without a plotter in ctxlens.report.plots: {missing}"
    wrong = {name: (e.paper, reg[name].paper_id) for name, e in experiments().items() if e.paper != reg[name].paper_id}
    assert not wrong, f"plotters whose paper_id is not their experiment's paper (experiment, plotter): {wrong}"


@pytest.fixture
def new_plotters(monkeypatch):
    """The plotter registry, loaded, with what a test registers undone afterwards."""
    plotters()
    monkeypatch.setattr(PLOTTERS, "_entries", dict(PLOTTERS.as_dict()))


def test_a_new_experiment_lands_with_its_paper_not_last(tmp_path, new_plotters):
    @plotter("zz-geometry-probe", title="A new geometry measurement", paper="the geometry paper, Section 9",
             paper_id="geometry")
    def zz_geometry_probe(df, ctx):
        return [Panel("zz-geometry-probe", "its numbers", None, df[["series", "layer", "value"]])]

    names = ["token-loss", "aa-unplotted", "loss-vs-length", "zz-geometry-probe", "accs-layers"]
    assert section_order(names) == ["accs-layers", "zz-geometry-probe", "loss-vs-length", "token-loss",
                                    "aa-unplotted"]  # with its paper; no plotter: after every plotted one
    runs = [write_run(tmp_path / "runs" / name, [{"model": "m", "experiment": name, "layer": i, "value": 0.5}
                                                 for i in range(2)], config=config_of(name, ["m"]), env=ENV)
            for name in names]
    report = build_report(runs, tmp_path / "r.html")
    assert [s.experiment for s in report.sections] == section_order(names)
    html = (tmp_path / "r.html").read_text()
    at = [html.index(f'id="x-{name}"') for name in section_order(names)]
    assert at == sorted(at)  # the page shows them in that order


def test_a_plotter_naming_an_unknown_paper_is_refused(new_plotters):
    with pytest.raises(CtxlensError, match="Did you mean 'geometry'"):
        plotter("zz-typo", title="t", paper="p", paper_id="geometri")
