"""Assemble the report: read runs, draw each experiment's figures, write one HTML page.

Output, for ``--out DIR/report.html``::

    DIR/report.html            self-contained: figures inline as PNG data, no script, no network
    DIR/report-figures/NAME.png, NAME.pdf, NAME.csv    each figure and the numbers it plots

Models are compared on the same axes; each model (``series``) keeps one colour in every figure.
When one model appears in several runs of the same experiment its series is ``model (run)``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

import ctxlens.report.card as _card
import ctxlens.report.findings as _findings
import ctxlens.report.html as h
from ctxlens.core import files
from ctxlens.core.errors import CtxlensError
from ctxlens.findings import FINDINGS, Paths, compute_findings
from ctxlens.findings.card import Line, card_of_runs, line_costs
from ctxlens.findings.models import recorded_infos
from ctxlens.report.figures import RC, Palette, Panel, data_uri, save
from ctxlens.report.findings import Finding, FindingsSource
from ctxlens.report.registry import Context, Plotter, plotters, section_order
from ctxlens.report.style import CSS
from ctxlens.report.warnings import ReportWarning, row_warnings, run_warnings
from ctxlens.results import RUN_COLUMN, Run, frame, profile_costs, read_runs

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

GENERIC_ROWS = 200
DEFAULT_THRESHOLD = 85.6  # RULER: Llama-2-7B at 4K (ctxlens.tasks.scoring.THRESHOLD)


@dataclass
class Section:
    experiment: str
    title: str
    paper: str
    panels: list[Panel] = field(default_factory=list)
    note: str = ""


@dataclass
class Report:
    path: Path
    figure_dir: Path
    runs: list[Run]
    sections: list[Section]
    warnings: list[ReportWarning]
    findings: list[Finding]
    palette: Palette
    files: list[Path] = field(default_factory=list)
    card: dict[str, list[Line]] = field(default_factory=dict)  # the context-use card: model -> lines
    costs: dict[str, dict[str, dict]] = field(default_factory=dict)  # model -> line key -> its profile cost

    @property
    def panels(self) -> list[tuple[str, Panel]]:
        return [(s.experiment, p) for s in self.sections for p in s.panels]


LABEL_CHARS = 60  # longest model or run name drawn in a figure or table; the runs section keeps the full one


def short_label(name: str) -> str:
    """``name`` cut to ``LABEL_CHARS`` with a digest of the whole (so two long names stay apart)."""
    if len(name) <= LABEL_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:8]
    return f"{name[:LABEL_CHARS - 11]}...{digest}"


def _series(df: pd.DataFrame) -> list[str]:
    """Model label per row: the model, or ``model (run)`` where a model has several runs of an experiment."""
    runs_per = df.groupby(["experiment", "model"], dropna=False)[RUN_COLUMN].transform("nunique")
    names = df[RUN_COLUMN].map(lambda p: short_label(Path(p).name))
    return [f"{short_label(str(m))} ({r})" if n > 1 else short_label(str(m))
            for m, r, n in zip(df["model"], names, runs_per)]


def _experiments(df: pd.DataFrame) -> list[str]:
    """The experiments the rows hold, in the order of their sections (``registry.section_order``)."""
    return section_order(str(e) for e in df["experiment"].dropna())


def _threshold(runs: list[Run], given: float | None) -> float:
    if given is not None:
        return float(given)
    found = {float(r.config["options"]["threshold"]) for r in runs
             if r.config and r.config.get("experiment") == "ruler"
             and isinstance(r.config.get("options"), dict) and r.config["options"].get("threshold") is not None}
    return found.pop() if len(found) == 1 else DEFAULT_THRESHOLD


def _generic(sub: pd.DataFrame) -> Panel:
    keep = sub.drop(columns=[c for c in ("experiment", RUN_COLUMN) if c in sub]).dropna(axis=1, how="all")
    return Panel("rows", "Rows (no figure is registered for this experiment)", None, keep)


def build_report(runs: Paths, out: str | os.PathLike[str] = "report.html", *,
                 findings: FindingsSource | None = None, threshold: float | None = None, title: str = "ctxlens report",
                 strict: bool = False, card_models: Iterable[str] | None = None) -> Report:
    """Read ``runs`` (run directories or folders of them) and write the HTML report to ``out``.

    The report opens with the context-use card (``ctxlens.findings.card``; one column per model of
    ``card_models``, default every model the card's experiments measured), then the findings table.
    ``findings``: a list of dicts or a JSON file for the findings table (``findings.json`` files in
    the runs are read as well); without either, the findings are computed from the rows
    (``ctxlens.findings.compute_findings``, for whatever models they hold). ``strict``: raise when
    a figure or the card fails instead of reporting it.
    """
    read = read_runs(runs)
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise CtxlensError(f"The report is an HTML file; give --out a name ending in .html, not '{out.name}'.")
    fig_dir = out.with_name(f"{out.stem}-figures")
    found = _findings.discover([r.path for r in read])
    table = [] if findings is None else _findings.read_findings(_bounded_findings(findings))
    for f in found:
        table += _findings.read_findings(_bounded_findings(f))
    table = list({json.dumps(f, sort_keys=True, default=str): f for f in table}.values())  # given twice: shown once
    measured = {e for _, exps in FINDINGS for e in exps}
    if findings is None and not found and any(r.get("experiment") in measured for run in read for r in run.rows):
        table = compute_findings([r for run in read for r in run.rows], infos=recorded_infos(read))

    df = frame(read)
    reg = plotters()
    warnings = [w for r in read for w in run_warnings(r)]
    warnings += [w for r in read for w in row_warnings(r, lambda e: reg[e].metrics if e is not None and e in reg
                                                       else None)]
    palette, sections = Palette(), []
    if len(df):
        df = df.assign(series=_series(df), model=df["model"].map(lambda m: short_label(m) if isinstance(m, str) else m))
        for s in df["series"]:
            palette.color(s)
    ctx = Context(palette, _threshold(read, threshold))
    names: set[str] = set()
    for exp in (_experiments(df) if len(df) else []):
        sub = df[df["experiment"] == exp].dropna(axis=1, how="all").reset_index(drop=True)
        section = _draw(exp, sub, reg.get(exp), ctx, warnings, strict)
        for panel in section.panels:
            panel.name = _unique(panel.name if panel.name.startswith(exp) else f"{exp}-{panel.name}", names)
        sections.append(section)
    report = Report(out, fig_dir, read, sections, warnings, table, palette)
    try:
        report.card = card_of_runs(read, card_models, ctx.threshold)
        report.costs = {m: line_costs(parts) for m, parts in profile_costs(read).items()}
    except Exception as err:  # the card must not take the whole report down
        if strict:
            raise
        log.warning("the context-use card failed: %s", err)
        warnings.append(_warning("card", "card failed", f"{type(err).__name__}: {err}"))
    _write(report, title)
    return report


def _bounded_findings(source: FindingsSource) -> object:
    """A findings file parsed with bounded depth and size (``yaml_safe.load_json``: a deeply nested
    file is one sentence, not a RecursionError); a list of dicts, or a path that does not exist,
    as given (``read_findings`` words those)."""
    from ctxlens.core import yaml_safe

    if not isinstance(source, (str, os.PathLike)) or not Path(source).exists():
        return source
    raw = files.read_input(Path(source), yaml_safe.MAX_CHARS, "Findings file",  # a FIFO: one sentence; size first
                           "pass the findings JSON file ctxlens wrote")
    try:
        data = yaml_safe.load_json(raw.decode("utf-8"), f"Findings file '{source}'")
    except UnicodeDecodeError:
        raise CtxlensError(f"Findings file '{source}' is not UTF-8 text; pass a JSON file.") from None
    return data["findings"] if isinstance(data, dict) and "findings" in data else data


def _warning(exp: str, kind: str, detail: str, count: int = 1) -> ReportWarning:
    return {"run": "", "experiment": exp, "model": None, "kind": kind, "count": count, "detail": detail,
            "examples": ""}


def _draw(exp: str, sub: pd.DataFrame, plotter: Plotter | None, ctx: Context, warnings: list[ReportWarning],
          strict: bool) -> Section:
    """The panels of one experiment: its plotter's, or the rows as a table (with a warning when
    there is nothing to plot or the figure fails)."""
    section = Section(exp, plotter.title if plotter else exp, plotter.paper if plotter else "")
    if plotter is None:
        section.panels = [_generic(sub)]
        return section
    absent = [m for m in plotter.metrics if m not in sub.columns]
    if plotter.metrics and len(absent) == len(plotter.metrics):
        warnings.append(_warning(exp, "no figure", f"no row has a value for {', '.join(absent)}; nothing to plot",
                                 len(sub)))
        section.panels = [_generic(sub)]
        return section
    try:
        with matplotlib.rc_context(RC):
            section.panels = list(plotter.fn(sub, ctx))
    except Exception as err:  # a figure must not take the whole report down
        if strict:
            raise
        log.warning("figure of %s failed: %s", exp, err)
        warnings.append(_warning(exp, "figure failed", f"{type(err).__name__}: {err}"))
        section.panels = [_generic(sub)]
    return section


def _refuse_links(report: Report) -> None:
    """The page and the figure folder must not be links (nor the folder a file): the report never
    writes through a link, so a planted one cannot redirect it outside the chosen folder."""
    files.refuse_link_or_special(report.path)
    fig = report.figure_dir
    if fig.is_symlink() or (fig.exists() and not fig.is_dir()):
        raise CtxlensError(f"{fig} is a link or a file, not the report's figure folder; remove it or choose "
                           "another --out name.")
    for _, panel in report.panels:
        for ext in (".png", ".pdf", ".csv"):
            files.refuse_link_or_special(fig / f"{panel.name}{ext}")


def _write(report: Report, title: str) -> None:
    """PNG, PDF and CSV of every panel into the figure folder, then the page."""
    report.path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_links(report)
    images: dict[str, bytes] = {}
    for _, panel in report.panels:
        if panel.fig is not None:
            png, saved = save(panel.fig, report.figure_dir / panel.name)
            images[panel.name] = png
            report.files += saved
        if panel.table is not None and len(panel.table.columns):
            csv = report.figure_dir / f"{panel.name}.csv"
            csv.parent.mkdir(parents=True, exist_ok=True)
            files.atomic_write(csv, panel.table.to_csv(index=False))
            report.files.append(csv)
    html = page(report, images, title)
    files.atomic_write(report.path, html.encode("utf-8", errors="replace"))


def _unique(name: str, taken: set[str]) -> str:
    stem, i = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "-" for c in name)[:80], 2
    name = stem
    while name in taken:
        name, i = f"{stem}-{i}", i + 1
    taken.add(name)
    return name


# ------------------------------------------------------------------------------- page
def page(report: Report, images: dict[str, bytes], title: str) -> str:
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_rows = sum(len(r.rows) for r in report.runs)
    toc = [("card", "Context-use card")] if report.card else []
    toc += [("findings", "Findings")] if report.findings else []
    toc += [("warnings", f"Warnings ({len(report.warnings)})")]
    toc += [(h.anchor(s.experiment), s.experiment) for s in report.sections]
    toc += [("runs", "Runs: configuration and environment")]
    body: list[h.Raw | str] = [  # str: cost_table's '' when no run has costs
        h.el("header",
             h.el("h1", title),
             h.el("p", f"{len(report.runs)} run(s), {n_rows} rows, generated {when}.", class_="note"),
             _models(report.palette)),
        h.el("nav", h.el("ol", [h.el("li", h.el("a", label, href=f"#{a}")) for a, label in toc])),
    ]
    if report.card:
        beside = [(p.title, images[p.name]) for s in report.sections if s.experiment in _card.BESIDE
                  for p in s.panels[:1] if p.name in images]
        labels = {m: short_label(m) for m in report.card}
        body.append(_card.card_section(report.card, beside, labels))
        body.append(_card.cost_table(report.card, report.costs, labels))
    if report.findings:
        body.append(h.el("section", h.el("h2", "Findings"), _findings.findings_table(report.findings),
                         id="findings"))
    body.append(_warnings(report.warnings))
    body += [_section(s, images, report.figure_dir, report.path.parent) for s in report.sections]
    body.append(_runs(report.runs))
    head = h.join([
        h.Raw('<meta charset="utf-8">'),
        h.Raw(f'<meta http-equiv="Content-Security-Policy" content="{h.text(h.CSP)}">'),
        h.Raw('<meta name="viewport" content="width=device-width, initial-scale=1">'),
        h.el("title", title),
        h.Raw(f"<style>{CSS}</style>"),
    ])
    return f"<!DOCTYPE html>\n<html lang=\"en\"><head>{head}</head><body>{h.join(body)}</body></html>\n"


def _models(palette: Palette) -> h.Raw:
    items = [h.el("li", h.el("span", "", class_="swatch", style=f"background:{color}"), name)
             for name, color in palette.items()]
    return h.el("ul", items, class_="models") if items else h.Raw("")


def _warnings(warnings: list[ReportWarning]) -> h.Raw:
    import pandas as pd

    if not warnings:
        content = h.el("p", "None: every row has its values, no row is flagged, every run is complete.")
    else:
        content = h.table(pd.DataFrame(warnings)[["kind", "run", "experiment", "model", "count", "detail", "examples"]])
    return h.el("section", h.el("h2", f"Warnings ({len(warnings)})"), content, id="warnings",
                class_="warnings" if warnings else None)


def _section(section: Section, images: dict[str, bytes], fig_dir: Path, base: Path) -> h.Raw:
    parts = [h.el("h2", section.experiment), h.el("p", section.title, class_="lead")]
    if section.paper:
        parts.append(h.el("p", section.paper, class_="paper"))
    for panel in section.panels:
        parts.append(_panel(panel, images.get(panel.name), fig_dir, base))
    return h.el("section", parts, id=h.anchor(section.experiment), class_="experiment")


def _panel(panel: Panel, png: bytes | None, fig_dir: Path, base: Path) -> h.Raw:
    rel = os.path.relpath(fig_dir, base)
    figure = None
    if png is not None:
        links = h.el("span", " (", h.el("a", "PNG", href=f"{rel}/{panel.name}.png"), ", ",
                     h.el("a", "PDF", href=f"{rel}/{panel.name}.pdf"), ", ",
                     h.el("a", "CSV", href=f"{rel}/{panel.name}.csv"), ")", class_="files")
        figure = h.el("figure", h.Raw(f'<img src="{data_uri(png)}" alt="{h.text(panel.title)}">'),
                      h.el("figcaption", h.el("div", h.el("b", panel.title), links), h.el("div", panel.caption)),
                      class_="plot")
    tables = [h.table(panel.table, max_rows=2000)] if panel.table is not None and len(panel.table.columns) else []
    for title, t in panel.extra_tables:
        tables += [h.el("h4", title), h.table(t, max_rows=2000)]
    head = [] if figure is not None else [h.el("h3", panel.title)]
    return h.el("div", head, figure, h.el("div", tables, class_="tables"), class_="panel", id=f"p-{panel.name}")


def _runs(runs: list[Run]) -> h.Raw:
    """Each run's configuration; environments shown once per distinct environment."""
    parts = [h.el("h2", "Runs: configuration and environment")]
    envs: dict[str, list[Run]] = {}
    for r in runs:
        envs.setdefault(json.dumps(r.env, sort_keys=True, default=str), []).append(r)
    for members in envs.values():
        env = members[0].env
        which = "every run" if len(envs) == 1 else ", ".join(r.name for r in members)
        parts += [h.el("h3", f"Environment of {which}"),
                  h.kv_table(env) if env else h.el("p", "missing (no env.json)")]
    cards = [h.el("div", h.el("h4", r.name), h.el("p", str(r.path), class_="note"),
                  h.kv_table(r.config) if r.config else h.el("p", "missing (no config.yaml)"), class_="card")
             for r in runs]
    parts += [h.el("h3", "Configuration of each run"), h.el("div", cards, class_="cols")]
    return h.el("section", parts, id="runs")
