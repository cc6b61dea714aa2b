"""The ctxlens report: one offline HTML page with the papers' figures for the experiments run.

    ctxlens report RUN_DIR [RUN_DIR ...] --out report.html
    from ctxlens.report import build_report; build_report(["runs/a", "runs/b"], "report.html")

Reads only result files (``ctxlens.results``); importing it or building a report never imports
torch. See ``ctxlens.report.build`` for the files written and ``ctxlens.report.findings`` for the
findings table that opens the page.
"""

from __future__ import annotations

__all__ = ["build_report"]


def build_report(*args, **kwargs):
    from ctxlens.report.build import build_report as _build

    return _build(*args, **kwargs)


build_report.__doc__ = "See ctxlens.report.build.build_report."
