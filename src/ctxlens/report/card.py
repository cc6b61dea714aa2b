"""The context-use card at the top of the report: one column per model, one line per question
(``ctxlens.findings.card``), each cell the number with its uncertainty and a verdict, the paper's
expectation beside each line; the depth x length heatmap and the loss curve drawn beside it
(the ``niah-depth`` and ``loss-vs-length`` figures of the report). Every value is escaped.
"""

from __future__ import annotations

from ctxlens.findings.card import Line, questions
from ctxlens.findings.lines.loss import USABLE_GAIN
from ctxlens.report.figures import data_uri
from ctxlens.report.html import Raw, el, text

BESIDE = ("niah-depth", "loss-vs-length")  # the figures drawn beside the card


def _by_key(card: dict[str, list[Line]]) -> dict[str, dict[str, Line]]:
    """{model: {line key: line}}."""
    return {m: {line.key: line for line in lines} for m, lines in card.items()}


def _cell(line: Line | None) -> Raw:
    if line is None:
        return el("td", "-")
    if line.value is None and not line.verdict:
        return el("td", el("span", line.text, class_="note"))
    return el("td", el("div", el("b", line.text)), el("div", line.uncertainty, class_="note") if line.uncertainty
              else "", el("div", line.verdict, class_="verdict") if line.verdict else "")


def card_table(card: dict[str, list[Line]], labels: dict[str, str] | None = None) -> Raw:
    """The card as an HTML table: lines down, models across."""
    labels = labels or {}
    models = list(card)
    head = el("tr", [el("th", "question"), el("th", "paper's expectation"),
                     *[el("th", labels.get(m, m)) for m in models]])
    by = _by_key(card)
    body = []
    for key, (question, paper, expected) in questions().items():
        body.append(el("tr", el("td", el("b", question), el("div", paper, class_="paper")), el("td", expected),
                       *[_cell(by[m].get(key)) for m in models]))
    return el("div", el("table", el("thead", head), el("tbody", body), class_="data card-table"), class_="scroll")


def card_section(card: dict[str, list[Line]], beside: list[tuple[str, bytes]], labels: dict[str, str] | None = None
                 ) -> Raw:
    """The card's section: the table, its uncertainty statement and the figures beside it
    (``beside``: (title, PNG bytes))."""
    figures = [el("figure", Raw(f'<img src="{data_uri(png)}" alt="{text(title)}">'), el("figcaption", title),
                  class_="plot card") for title, png in beside]
    note = el("p", "Uncertainties as each cell states: binomial standard errors (SE) and one-sided two-proportion "
                   "z-tests for accuracies, the fit's SEs (usable context: delta method), SEs over seeds, Fisher-z "
                   "95% intervals for correlations, a t interval over random draws for masking. L (the first line) is "
                   "the length a profile was built around, else the model's training length; usable context is where "
                   f"the fit gains less than {USABLE_GAIN} nats per doubling.", class_="note")
    return el("section", el("h2", "Context-use card"), note, card_table(card, labels),
              el("div", figures, class_="cols") if figures else "", id="card")


def _md(value: str) -> str:
    """``value`` as inert text inside a Markdown table cell: one line, ``<`` and ``&`` as entities (no
    HTML), and backslashes, pipes, brackets, backticks and asterisks backslash-escaped (no table break,
    link, image, code span or emphasis), so a model name ``<script>`` or ``![t](http://host/x.png)``
    prints as itself (issue 32). Markup the card adds goes around the escaped text."""
    text = " ".join(str(value).split())
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    for c in "|[]`*":
        text = text.replace(c, f"\\{c}")
    return text


def card_markdown(card: dict[str, list[Line]], labels: dict[str, str] | None = None) -> str:
    """The card as a Markdown table (the README's reference cards, ``ctxlens card``): lines down,
    models across, each cell the number, its uncertainty and the verdict."""
    labels = labels or {}
    models = list(card)
    by = _by_key(card)
    out = ["| question | paper's expectation | " + " | ".join(_md(labels.get(m, m)) for m in models) + " |",
           "|---|---|" + "---|" * len(models)]
    for key, (question, _paper, expected) in questions().items():
        cells = []
        for m in models:
            line = by[m].get(key)
            if line is None:
                cells.append("-")
                continue
            head = f"**{_md(line.text)}**" if line.verdict or line.value is not None else _md(line.text)
            cells.append("; ".join(p for p in [head, _md(line.uncertainty), _md(line.verdict)] if p) or "-")
        out.append(f"| {_md(question)} | {_md(expected)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _cost(cost: dict | None) -> str:
    """'3.2 min, 81,920 tokens (shared: niah-depth)' of one line's cost (``findings.card.line_costs``)."""
    if not cost:
        return "-"
    shared = f" (a share of {', '.join(cost['shared'])})" if cost["shared"] else ""
    return f"{cost['seconds'] / 60:.1f} min, {int(round(cost['tokens'])):,} tokens{shared}"


def cost_rows(card: dict[str, list[Line]], costs: dict[str, dict[str, dict]]) -> list[tuple[str, list[str]]]:
    """[(question, [cost per model])] of the lines with a cost on some model (``costs``: {model: {line
    key: cost}}), in card order."""
    models = list(card)
    return [(question, [_cost(costs.get(m, {}).get(key)) for m in models])
            for key, (question, _paper, _expected) in questions().items()
            if any(key in costs.get(m, {}) for m in models)]


def cost_markdown(card: dict[str, list[Line]], costs: dict[str, dict[str, dict]],
                  labels: dict[str, str] | None = None) -> str:
    """What each line of ``card`` cost on each model, as a Markdown table ('' when the runs record no
    cost: runs made outside a profile)."""
    rows = cost_rows(card, costs)
    if not rows:
        return ""
    labels = labels or {}
    out = ["| cost of the line (the profile's time and tokens) | " + " | ".join(_md(labels.get(m, m)) for m in card)
           + " |", "|---|" + "---|" * len(card)]
    out += [f"| {_md(q)} | " + " | ".join(_md(c) for c in cells) + " |" for q, cells in rows]
    return "\n".join(out)


def cost_table(card: dict[str, list[Line]], costs: dict[str, dict[str, dict]],
               labels: dict[str, str] | None = None) -> Raw | str:
    """``cost_markdown`` as an HTML table ('' without costs)."""
    rows = cost_rows(card, costs)
    if not rows:
        return ""
    labels = labels or {}
    head = el("tr", [el("th", "cost of the line"), *[el("th", labels.get(m, m)) for m in card]])
    body = [el("tr", el("td", q), *[el("td", c) for c in cells]) for q, cells in rows]
    return el("div", el("table", el("thead", head), el("tbody", body), class_="data"), class_="scroll")
