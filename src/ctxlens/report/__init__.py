"""The ctxlens report: one offline HTML page with the papers' figures for the experiments run.

    ctxlens report RUN_DIR [RUN_DIR ...] --out report.html
    from ctxlens.report import build_report; build_report(["runs/a", "runs/b"], "report.html")

Reads only result files (``ctxlens.results``); importing it or building a report never imports
torch. See ``ctxlens.report.build`` for the files written and ``ctxlens.report.findings`` for the
findings table that opens the page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxlens.report.build import build_report

__all__ = ["build_report"]


def __getattr__(name: str) -> object:
    """``build_report``, imported when first asked for (matplotlib and the plotters load only then)."""
    if name == "build_report":
        from ctxlens.report.build import build_report

        return build_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
