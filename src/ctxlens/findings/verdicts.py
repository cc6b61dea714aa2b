"""The findings table's rows and the verdict rules every finding shares (no torch).

``Rows`` groups result rows by (experiment, model); ``_verdicts`` turns a per-model check into
one table row: "reproduced" when the criterion holds on every measured model, "not reproduced"
when it fails on one, "undecided" when it fails on none but some model shows nothing to test,
"not measured" when no model has rows, with absent models listed in the note and the untrained
control's verdict in its own column. Also the names of the zoo models the findings are about,
their training length, and the four papers as the table cites them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

ZOO_NAMES = ("rope", "alibi", "mamba2", "mlstm", "griffin", "hybrid")  # the models findings are about, by name
TRAIN_LENGTH = 512  # the zoo recipe's training context in bytes, when the rows record none (tests keep them equal)
CONTROL = "untrained control"  # column: does the untrained copy show the pattern too?

PAPERS = {
    "000": "the geometry paper, How much do contextualized representations encode long-range context?",
    "001": "the intrinsic-entropy paper, Intrinsic Entropy of Context Length Scaling in LLMs",
    "002": "the long-sequence paper, How Well Can a Long Sequence Model Model Long Sequences?",
    "003": "the RoPE-distance paper, On the token distance modeling ability of higher RoPE attention dimension",
}


class Rows:
    """Result rows grouped by (experiment, model)."""

    def __init__(self, rows: Iterable[dict]):
        self.by: dict[tuple, list[dict]] = defaultdict(list)
        for r in rows:
            self.by[(r.get("experiment"), r.get("model"))].append(r)

    def of(self, experiment: str, model: str | None) -> list[dict]:
        return self.by.get((experiment, model), []) if model is not None else []


def _row(finding: str, paper: str, expected: str, measured, status: str, models: list[str], note: str = "",
         **extra) -> dict:
    return {"finding": finding, "paper": paper, "expected": expected, "measured": measured, "status": status,
            "models": ", ".join(models) or "-", "note": note, **extra}


def _verdicts(finding: str, paper: str, expected: str, names: Iterable[str], models: dict[str, str],
              check: Callable[[str], tuple[str, bool | None] | None], why_missing: str,
              control: Callable[[str], str] | None = None) -> dict:
    """The table row of a finding checked per model: ``check(name)`` gives (numbers in words,
    verdict True / False / None = undecided), or None when that model has no rows."""
    measured, verdicts, absent, controls = {}, {}, [], {}
    for name in names:
        got = check(name) if name in models else None
        if got is None:
            absent.append(f"zoo:{name} ({'no rows' if name in models else 'not trained'})")
            continue
        text, ok = got
        verdicts[name] = ok
        measured[f"zoo:{name}"] = f"{text} -> {_word(ok)}"
        if control is not None:
            controls[f"zoo:{name}"] = control(name)
    notes = []
    if not verdicts:
        return _row(finding, paper, expected, "-", "not measured", [], f"not measured: {why_missing}; missing "
                    + ", ".join(absent))
    undecided = [n for n, v in verdicts.items() if v is None]
    if undecided:
        notes.append("undecided on " + ", ".join(f"zoo:{n}" for n in undecided) + " (nothing to test; see measured)")
    if absent:
        notes.append("not measured on " + ", ".join(absent))
    status = _status(list(verdicts.values()))
    extra = {CONTROL: "; ".join(f"{k}: {v}" for k, v in controls.items())} if control is not None else {}
    return _row(finding, paper, expected, measured, status, [f"zoo:{n}" for n in verdicts], "; ".join(notes),
                **extra)


def _status(verdicts: list[bool | None]) -> str:
    """One model failing decides "not reproduced"; otherwise any undecided model leaves it undecided."""
    if any(v is False for v in verdicts):
        return "not reproduced"
    return "undecided" if any(v is None for v in verdicts) else "reproduced"


def _word(ok: bool | None) -> str:
    return "yes" if ok else "undecided" if ok is None else "no"


def _shows(ok: bool | None) -> str:
    return "shows it too" if ok else "undecided" if ok is None else "does not show it"


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"

