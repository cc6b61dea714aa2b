"""The context-use card: per model, one line per question of the four papers, the paper's own
quantity first with its n and an interval inside its range, then a verdict from a test on
independent items (texts, windows, haystacks, passkeys, random draws), from result rows alone
(no torch).

Each line is a small function in ``ctxlens.findings.lines`` registered with ``@card_line``, whose
arguments carry all its metadata: the key, the question, the paper and section, the paper's
expectation, its place on the card and, for a line only some models can have, the rule that says
which (``ctxlens.findings.models``). ``compute_card(rows, infos, lengths)`` gives one ``Line`` per
(question, model). L is the length a profile built its suite around (recorded in each part's
``config.yaml``), else the model's training length; the card's first line states L and how it
stands to the training length.

Every statistic comes from ``ctxlens.core.stats`` (Wilson and Newcombe intervals, exact binomial
and McNemar tests, randomization p-values, bootstraps over the independent item); each line's
``numbers`` hold what its text shows, so the card can be recomputed from the rows by another route.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ctxlens.core.registry import Registry
from ctxlens.findings.line import Line  # noqa: F401 - re-exported: every line module's result
from ctxlens.findings.setups import measured_with
from ctxlens.findings.verdicts import Rows
from ctxlens.row_access import declares
from ctxlens.tasks.scoring import THRESHOLD

if TYPE_CHECKING:
    from ctxlens.results import Run


def needs_by_se(n: int, mde: float | None, effect: float | None, cap: int = 1_000_000) -> int | None:
    """Items a test whose standard error falls as 1 / sqrt(n) needs to detect ``effect`` with the
    power ``mde`` was computed for: ceil(n (mde / effect)^2), at least n + 1 when mde > effect, n
    when the test sees it already; None when mde or effect is missing, or beyond ``cap``."""
    if mde is None or effect is None or effect <= 0 or n <= 0 or not math.isfinite(mde):
        return None
    if mde <= effect:
        return n
    need = max(n + 1, math.ceil(n * (mde / effect) ** 2))
    return need if need <= cap else None


def undecided(line: Line) -> bool:
    """Whether ``line``'s verdict is a null its test could not see through: fewer items than its test
    needs for the effect, or a design that no number of items makes able to."""
    return line.null and line.n is not None and (line.needs is None or line.needs > line.n)


def decide(line: Line, seconds_per_item: float | None = None) -> Line:
    """``line`` with its verdict following its power: a null verdict stands only where the test could
    see ``line.effect`` with 80% power at the items it has (``needs`` <= ``n``); otherwise it reads
    "undecided: needs N <unit> to see <effect> with 80% power (has n; about M more minutes at this
    profile's pace)", the minutes from ``seconds_per_item`` (the line's parts' time over its items)
    when known. Lines that decided, or report an effect, are returned as they are."""
    if line.n is None or not undecided(line):
        return line
    effect = "-" if line.effect is None else f"{line.effect:g}"
    if line.needs is None:
        why = (f"undecided: no number of {line.unit} of this design detects the effect {effect} with 80% "
               f"power (it has {line.n})")
    else:
        why = (f"undecided: needs {line.needs:,} {line.unit} to detect {effect} with 80% power (has {line.n}"
               f"{_minutes(line.needs - line.n, seconds_per_item, '; ')})")
    se_test = line.key in SE_LINES and "share" not in line.numbers  # a sequential sign test plans by share, not SE
    observed = needs_by_se(line.n, line.mde, abs(line.value)) if line.value is not None and math.isfinite(
        line.value) and line.effect is not None and abs(line.value) > line.effect and se_test else None
    if observed is not None and observed > line.n:
        why += (f"; the observed {line.value:.3g} would be decided at about {observed:,} {line.unit}"
                + (f" ({_minutes(observed - line.n, seconds_per_item)})" if seconds_per_item is not None else ""))
    return replace(line, verdict=f"{why}; so far: {line.verdict}")


SE_LINES = ("usable_context", "accs_depth", "positional_heads")  # lines whose value is the effect their SE tests


def _minutes(more: int, seconds_per_item: float | None, before: str = "") -> str:
    """``before`` + 'about M more minutes at this profile's pace' of ``more`` items; '' when the pace is
    not known."""
    if seconds_per_item is None:
        return ""
    return f"{before}about {max(1, round(more * seconds_per_item / 60)):,} more minutes at this profile's pace"


@dataclass(frozen=True)
class Context:
    """What a line reads: the rows grouped by (experiment, model), the model, its recorded
    ModelInfo dict (or None), L, and the RULER threshold."""

    rows: Rows
    model: str
    info: dict | None
    L: int
    threshold: float = THRESHOLD
    sequential: frozenset[str] = frozenset()  # parts a profile may grow in rounds (their lines test sequentially)

    def of(self, experiment: str) -> list[dict]:
        return self.rows.of(experiment, self.model)


@dataclass(frozen=True)
class CardLine:
    """A registered line: ``compute(ctx) -> Line`` and its metadata."""

    key: str
    question: str
    paper: str
    expected: str
    order: float
    compute: Callable[[Context], Line]
    applies: Callable[[dict], str | None] | None = None  # None, or a rule (None = applies, else why not)
    reads: tuple[str, ...] = ()  # the experiments (profile parts) whose rows it reads


def _discover() -> None:
    """Import every module of ``ctxlens.findings.lines`` (each registers its lines)."""
    import ctxlens.findings.lines as lines

    for mod in pkgutil.iter_modules(lines.__path__):
        importlib.import_module(f"{lines.__name__}.{mod.name}")


LINES: Registry[CardLine] = Registry("card line", load=_discover)


def card_line(key: str, question: str, paper: str, expected: str, order: float,
              applies: Callable[[dict], str | None] | None = None, reads: tuple[str, ...] = ()
              ) -> Callable[[Callable[[Context], Line]], Callable]:
    """Register ``compute(ctx) -> Line`` as the card's line ``key`` (see ``CardLine``)."""
    def register(compute: Callable[[Context], Line]) -> Callable[[Context], Line]:
        LINES.add(key, CardLine(key, question, paper, expected, order, compute, applies, reads))
        return compute
    return register


def ordered() -> list[CardLine]:
    """The registered lines in card order."""
    return sorted((line for _, line in LINES.items()), key=lambda c: c.order)


def line_costs(parts: dict[str, dict[str, float]]) -> dict[str, dict]:
    """{line key: {"seconds", "tokens", "parts", "shared"}} from one model's part costs ``parts``
    ({experiment: {"seconds", "tokens"}}, ``ctxlens.results.profile_costs``): a line costs the parts it
    reads; a part read by k lines is charged 1/k to each ("shared" names those), so the lines' costs sum
    to the parts'. Lines that read no measured part are left out."""
    readers: dict[str, int] = {}
    for c in ordered():
        for part in c.reads:
            readers[part] = readers.get(part, 0) + 1
    out = {}
    for c in ordered():
        mine = [p for p in c.reads if p in parts]
        if mine:
            out[c.key] = {"seconds": sum(parts[p]["seconds"] / readers[p] for p in mine),
                          "tokens": sum(parts[p]["tokens"] / readers[p] for p in mine),
                          "parts": mine, "shared": [p for p in mine if readers[p] > 1]}
    return out


def questions() -> dict[str, tuple[str, str, str]]:
    """{key: (question, paper, expectation)} in card order."""
    return {c.key: (c.question, c.paper, c.expected) for c in ordered()}


def absent(key: str, model: str, why: str) -> Line:
    """A line with no value: ``why`` says whether the model cannot have it, the budget left it out,
    or no rows hold it."""
    return Line(key, model, None, why, "", "")


def _per_item(line: Line, reads: tuple[str, ...], seconds: dict[str, float] | None) -> float | None:
    """Seconds one more item of ``line`` costs: the time of the parts it reads over its items (every
    part's whole time: one more haystack serves each line that reads it)."""
    if not seconds or not line.n or not any(p in seconds for p in reads):
        return None
    return sum(seconds[p] for p in reads if p in seconds) / line.n


def model_lines(rows: Rows, model: str, info: dict | None, L: int | None, threshold: float = THRESHOLD,
                gaps: dict[str, str] | None = None, seconds: dict[str, float] | None = None,
                sequential: frozenset[str] = frozenset(), setups: dict[str, dict[str, str]] | None = None
                ) -> list[Line]:
    """Every line of one model's column, in card order; ``gaps`` ({part: why}, from the profile's
    record) says why a line that reads a part has no rows: the model cannot run it, or the budget
    left it out; ``seconds`` ({part: seconds spent}) prices an undecided line's missing items
    (``decide``); ``sequential``: the parts whose runs a profile may grow in rounds (their lines test with
    anytime-valid tests); ``setups`` ({part: {setting: value}}): what each part was measured with, named
    on every line when parts differ (``ctxlens.findings.setups``)."""
    specs = ordered()
    if L is None:
        return [absent(c.key, model, "not measured: the model's training length is not recorded") for c in specs]
    ctx = Context(rows, model, info, L, threshold, sequential)
    out = []
    for c in specs:
        why = c.applies(info) if c.applies is not None and info is not None else None
        line = absent(c.key, model, f"not applicable: {why}") if why else _computed(c, ctx)
        line = decide(line, _per_item(line, c.reads, seconds))
        gap = {p: why for p, why in (gaps or {}).items() if p in c.reads and not ctx.of(p)}
        if line.value is None and not line.verdict and gap:
            line = absent(c.key, model, "not measured: " + "; ".join(f"the {p} part {why}" for p, why in gap.items()))
        out.append(measured_with(line, c.reads, {p: s for p, s in (setups or {}).items() if ctx.of(p)}))
    return out


def _computed(c: CardLine, ctx: Context) -> Line:
    """``c``'s line, or, when a row holds a value of the wrong type or lacks a key its line reads (a
    file edited by hand or by another program), a line saying so: a card never ends in a traceback."""
    try:
        return c.compute(ctx)
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError) as err:
        where = ", ".join(c.reads) or "its parts"
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:120]
        return absent(c.key, ctx.model, f"not computed: the rows of {where} hold a value of the wrong type or lack a "
                                        f"key ({detail}); re-run the part")


def compute_card(rows: Iterable[dict], infos: dict[str, dict | None], lengths: dict[str, int | None],
                 threshold: float = THRESHOLD, gaps: dict[str, dict[str, str]] | None = None,
                 seconds: dict[str, dict[str, float]] | None = None,
                 sequential: dict[str, frozenset[str]] | None = None,
                 setups: dict[str, dict[str, dict[str, str]]] | None = None) -> dict[str, list[Line]]:
    """{model: its lines} for each model of ``infos`` (spec -> ModelInfo dict or None), each at
    ``lengths[model]`` (its L); ``gaps``: {model: {part: why it has no rows}}, ``seconds``: {model:
    {part: seconds spent}}, ``setups``: {model: {part: {setting: value}}} (``model_lines``)."""
    grouped = Rows(rows)
    return {m: model_lines(grouped, m, infos.get(m), lengths.get(m), threshold, (gaps or {}).get(m),
                           (seconds or {}).get(m), (sequential or {}).get(m, frozenset()), (setups or {}).get(m))
            for m in infos}


CARD_EXPERIMENTS = ("ruler", "niah-depth", "loss-vs-length", "suffix-ppl", "accs-layers", "accs-boundary",
                    "positional-heads", "head-masking", "intrinsic-entropy")


def card_of_runs(runs: Iterable[Run], models: Iterable[str] | None = None,
                 threshold: float = THRESHOLD) -> dict[str, list[Line]]:
    """The card of ``runs`` (``ctxlens.results.Run`` objects): one column per model the card's
    experiments measured (or ``models``), each at the profile's L its runs record, else at its
    recorded training length (else the zoo's for a zoo spec, else the ``train_length`` the rows
    record, else not known)."""
    from ctxlens.findings.models import info_for, recorded_infos, recorded_lengths, recorded_sequential, train_length_of
    from ctxlens.results import part_setups, profile_costs, profile_gaps

    runs = list(runs)
    rows = [r for run in runs for r in run.rows]
    recorded, profiled = recorded_infos(runs), recorded_lengths(runs)
    wanted = list(models) if models is not None else list(dict.fromkeys(
        str(r["model"]) for r in rows if r.get("experiment") in CARD_EXPERIMENTS and r.get("model")))
    infos = {m: info_for(m, m, recorded) for m in wanted}
    lengths: dict[str, int | None] = {}
    for m in wanted:
        stated = {int(r["train_length"]) for r in rows
                  if r.get("model") == m and declares(r, "train_length") and r.get("train_length")}
        lengths[m] = (profiled[m] if m in profiled else train_length_of(infos[m]) if infos[m] is not None
                      else stated.pop() if len(stated) == 1 else None)
    seconds = {m: {p: c["seconds"] for p, c in parts.items()} for m, parts in profile_costs(runs).items()}
    return compute_card(rows, infos, lengths, threshold, profile_gaps(runs), seconds, recorded_sequential(runs),
                        part_setups(runs))
