"""The findings table's rows and the verdict rules every finding shares (no torch).

``Rows`` groups result rows by (experiment, model); ``verdicts_row`` turns a per-model check into
one table row: "reproduced" when the criterion holds on every measured model, "not reproduced"
when it fails on one, "undecided" when it fails on none but some model shows nothing to test,
"not measured" when no model it applies to has rows, "not applicable" when it applies to none of
the models (which models a finding applies to is a rule on what each model is: its kind,
position encoding and training length, ``ctxlens.findings.models``), with absent and
inapplicable models listed in the note and the untrained control's verdict in its own column.
Also the ``Models`` a table is about; the zoo's names and training length (for runs that record
none) come from ``ctxlens.core.zoo_facts``, the papers' citations from ``ctxlens.core.papers``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from ctxlens.core.zoo_facts import TRAIN_LENGTH, ZOO_NAMES
from ctxlens.findings.models import NOT_RECORDED, ZOO_INFO
from ctxlens.row_access import declared_names, declared_rows

CONTROL = "untrained control"  # column: does the untrained copy show the pattern too?
APPLIES = "applies to"  # column: the models a finding is about, by kind, position encoding and length


class Rows:
    """Result rows grouped by (experiment, model), each read through ``ctxlens.row_access.Row`` (a
    column its experiment does not declare raises); ``of`` refuses an experiment no declaration names."""

    def __init__(self, rows: Iterable[dict]):
        self.by: dict[tuple, list[dict]] = defaultdict(list)
        for r in declared_rows(rows):
            self.by[(r.get("experiment"), r.get("model"))].append(r)

    def of(self, experiment: str, model: str | None) -> list[dict]:
        declared_names(experiment)  # a misspelled experiment raises
        return self.by.get((experiment, model), []) if model is not None else []


def finding_row(finding: str, paper: str, expected: str, measured: object, status: str, models: list[str],
                note: str = "", **extra: object) -> dict:
    return {"finding": finding, "paper": paper, "expected": expected, "measured": measured, "status": status,
            "models": ", ".join(models) or "-", "note": note, **extra}


class Models(dict):
    """{key: model spec as in the rows} of the models a table is about (a key is a zoo name or the
    spec itself), with what each model is: ``infos`` {key: ModelInfo dict, None when not known},
    ``recorded`` the keys whose info their run recorded, ``absent`` zoo names that are not trained,
    and ``override`` a training length given by hand (else each model's own, else ``default``)."""

    def __init__(self, specs: dict[str, str], infos: dict[str, dict | None] | None = None,
                 recorded: Iterable[str] = (), absent: Iterable[str] = (), default: int = TRAIN_LENGTH,
                 override: int | None = None):
        super().__init__(specs)
        self.infos, self.recorded, self.absent = dict(infos or {}), set(recorded), tuple(absent)
        self.default, self.override = default, override

    def label(self, key: str) -> str:
        return f"zoo:{key}" if key in ZOO_NAMES else key

    def length(self, key: str) -> int:
        """The training length of model ``key``: given by hand, else its recorded info's, else the default."""
        if self.override is not None:
            return self.override
        value = (self.infos.get(key) or {}).get("train_length") if key in self.recorded else None
        return int(value) if isinstance(value, int) and value > 0 else self.default

    def candidates(self) -> list[str]:
        """Every key and absent zoo name: the zoo's in its order, then the others sorted."""
        keys = set(self) | set(self.absent)
        return [n for n in ZOO_NAMES if n in keys] + sorted(k for k in keys if k not in ZOO_NAMES)


def as_models(models: dict[str, str]) -> Models:
    """``models`` as ``Models``: a plain {zoo name: spec} mapping is the zoo, each model described as
    the zoo's and the zoo names it lacks not trained."""
    if isinstance(models, Models):
        return models
    return Models(models, {k: ZOO_INFO.get(k) for k in [*models, *ZOO_NAMES]},
                  absent=[n for n in ZOO_NAMES if n not in models])


def verdicts_row(finding: str, paper: str, expected: str, rule: Callable[[dict], str | None], models: dict[str, str],
                 check: Callable[[str], tuple[str, bool | None] | None], why_missing: str,
                 control: Callable[[str], str] | None = None) -> dict:
    """The table row of a finding checked per model: ``rule(info)`` says whether the finding applies
    to a model (None) or why not; ``check(key)`` gives (numbers in words, verdict True / False /
    None = undecided), or None when that model has no rows."""
    models = as_models(models)
    measured, verdicts, absent, controls, inapplicable = {}, {}, [], {}, []
    for key in models.candidates():
        label, info = models.label(key), models.infos.get(key)
        why = NOT_RECORDED if info is None else rule(info)
        if why:
            inapplicable.append(f"{label} ({why})")
            continue
        got = check(key) if key in models else None
        if got is None:
            absent.append(f"{label} ({'no rows' if key in models else 'not trained'})")
            continue
        text, ok = got
        verdicts[key] = ok
        measured[label] = f"{text} -> {yes_no(ok)}"
        if control is not None:
            controls[label] = control(key)
    scope = {APPLIES: (rule.__doc__ or "").strip().splitlines()[0].rstrip(".") if rule.__doc__ else "-"}
    tail = ["not applicable to " + ", ".join(inapplicable)] if inapplicable else []
    if not verdicts:
        if not absent:
            return finding_row(finding, paper, expected, "-", "not applicable", [], "; ".join(tail), **scope)
        return finding_row(finding, paper, expected, "-", "not measured", [], "; ".join(
            [f"not measured: {why_missing}; missing " + ", ".join(absent), *tail]), **scope)
    notes = []
    undecided = [k for k, v in verdicts.items() if v is None]
    if undecided:
        notes.append("undecided on " + ", ".join(models.label(k) for k in undecided)
                     + " (nothing to test; see measured)")
    if absent:
        notes.append("not measured on " + ", ".join(absent))
    notes += tail
    status = _status(list(verdicts.values()))
    extra = {**scope, **({CONTROL: "; ".join(f"{k}: {v}" for k, v in controls.items())} if control is not None
                         else {})}
    return finding_row(finding, paper, expected, measured, status, [models.label(k) for k in verdicts],
                       "; ".join(notes), **extra)


def _status(verdicts: list[bool | None]) -> str:
    """One model failing decides "not reproduced"; otherwise any undecided model leaves it undecided."""
    if any(v is False for v in verdicts):
        return "not reproduced"
    return "undecided" if any(v is None for v in verdicts) else "reproduced"


def yes_no(ok: bool | None) -> str:
    return "yes" if ok else "undecided" if ok is None else "no"


def shows(ok: bool | None) -> str:
    return "shows it too" if ok else "undecided" if ok is None else "does not show it"


def number(x: float | None, digits: int = 3) -> str:
    """``x`` in ``digits`` significant figures; "-" for None (every finding and card line prints this way)."""
    return "-" if x is None else f"{x:.{digits}g}"

