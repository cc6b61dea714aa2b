"""Fitting the profile's suite to a time budget, from a throughput probe and each part's tokens.

A part's estimate is the sum, over its units, of the tokens its experiment's ``work`` hook states
(``ctxlens.runner.plans.unit_work``) at the probe's pace (``Throughput.prefill_seconds`` and
``decode_seconds`` per decoding step: batched sequences decode together, and ``pair_seconds`` per
(query, key) pair of the RoPE parts), times the part's ``factor`` (captured states, per-input
work), plus a fixed cost per unit. ``fit`` chooses, in this order:

1. the length L: the training length, halved while the parts that read the card's first lines
   (``LINES_FIRST``: loss vs context, the needle grid, RULER, ACCS by layer) at their smallest
   sample counts would take more than ``LENGTH_SHARE`` of the time, or one of them alone more than
   a short budget's third (never below ``FLOOR``; the plan then says "L capped to N by the
   budget"), unless the user sets L (``--length``: fewer tokens per sample, more samples, when the
   question is the findings' power rather than the longest context). The later parts do not pull
   L down: the papers read their findings at the training length, so a budget that affords the
   first lines there keeps L and plans the later parts out (step 2) rather than reading every line
   far below T;
2. cuts when even that does not fit: a reducible part run below its statistical floor (flagged),
   then whole parts planned out, the least central first (``Part.drop_order``), and back in
   those of them that fit the room the cuts left;
3. decisions, cheapest first: the parts whose card lines need a known number of items to see the
   paper's effect with 80% power (``profile.power.a_priori``: RULER's samples per task, the needle
   grid's haystacks, the masking passkeys) are priced at that number, and raised to it in order of
   the seconds each decision adds while the suite still fits; the needle grid's haystacks come in
   rounds after the suite (``profile.rounds``) that stop once its lines decide, so its decision
   reserves their time (``Size.reserve``) rather than planning them up front. A decision the budget
   cannot buy is noted with the minutes it would add;
4. the sample knob ``scale`` in [0, 1]: the largest whose estimate fits ``TARGET`` of the time left
   after the reserve.

Under ``SHORT`` (30 minutes) no part may take more than ``PART_SHARE`` (a third) of the time unless it
is the only one left: a part that does even at its smallest is left out, and the scale stops where
one would pass it, so a short budget buys several of the card's lines rather than one long part.

``refit`` does steps 2 and 4 again (keeping step 3's counts and reserve) for the parts not yet
started, at the same L, when the parts run so far took longer or much shorter than planned (their
ratio ``slow`` multiplies the estimates; one ratio for the parts that generate answers and one for
those that only run forwards, since early stops make the first kind's estimates the less exact): the
profile shrinks what is left rather than overrun, and grows it rather than idle.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxlens.core.options import make_config
from ctxlens.core.progress import duration
from ctxlens.core.texts import NATURAL
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm.info import ModelInfo
from ctxlens.probes.throughput import Throughput
from ctxlens.profile.suite import Part, Size
from ctxlens.profile.types import Options
from ctxlens.runner import plans

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # an experiment's Config instance

    from ctxlens.experiments.base import Experiment

TARGET = 0.85  # share of the available time the plan fills: the rest absorbs a busy machine
LENGTH_SHARE = 0.5  # the smallest suite at L may take at most this share of the time
FLOOR = 256  # L is never capped below this (or the training length, when shorter)
UNIT_SECONDS = 0.3  # fixed cost of a unit (committing rows, tokenising, building prompts)
DEFAULT_LENGTH = 4096  # L of a model whose config states no length (a recurrent model)
STEPS = 14  # bisection steps of the scale
SHORT = 30 * 60.0  # seconds: under this budget ...
PART_SHARE = 1 / 3  # ... no part takes more than this share of it, unless it is the only part
LINES_FIRST = 4  # parts of drop order up to this read the card's first lines and set L (step 1)


@dataclass
class Planned:
    """One part as planned: its options, the model options it needs, units, tokens, seconds, notes."""

    name: str
    experiment: str
    options: Options
    model_options: dict[str, bool]
    units: int
    tokens: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    estimate: float = 0.0  # seconds before any slowness ratio: what a part's spent time is compared with


@dataclass
class Fit:
    """A fitted suite: the size, the parts planned, the parts left out {name: why}, and notes."""

    size: Size
    parts: list[Planned]
    left_out: dict[str, str]
    notes: list[str]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.parts)


def configured(part: Part, size: Size, info: ModelInfo) -> tuple[Experiment, Options, DataclassInstance]:
    """(experiment, options, config with the model's defaults filled) of ``part`` at ``size``."""
    exp = get_experiment(part.experiment)
    options = size.options(part, info)
    config = make_config(exp.Config, options)
    if exp.defaults is not None:
        made = exp.defaults(info, config, frozenset(options), size.extrapolate)
        config = make_config(exp.Config, {**options, **{k: v for k, v in made.values.items() if k not in options}})
    return exp, options, config


Slow = float | dict[bool, float]  # one ratio, or one per kind: {part.generates: ratio}


def slowness(part: Part, slow: Slow) -> float:
    """The ratio that multiplies ``part``'s estimate: ``slow`` itself, or its entry for the part's kind."""
    return slow[part.generates] if isinstance(slow, dict) else slow


def plan_part(part: Part, size: Size, info: ModelInfo, speed: Throughput, slow: Slow = 1.0) -> Planned:
    """``part`` at ``size``: its units, tokens and estimated seconds (times its ``slowness``)."""
    exp, options, config = configured(part, size, info)
    units = exp.plan(config)
    tokens, seconds = 0, 0.0
    for unit in units:
        for w in plans.unit_work(exp, config, unit) or []:
            tokens += w.prompt_tokens + w.new_tokens
            seconds += plans.work_seconds(w, speed)
    estimate = seconds * part.factor + UNIT_SECONDS * len(units)
    longest = max([*options.get("lengths", []), options.get("detect_length") or 0])
    beyond = info.max_positions is not None and longest > info.max_positions
    return Planned(part.name, part.experiment, options, {"allow_extrapolation": True} if beyond else {}, len(units),
                   tokens, estimate * slowness(part, slow), part.notes(size, info), estimate)


def _total(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, slow: Slow) -> float:
    return sum(plan_part(p, size, info, speed, slow).seconds for p in parts)


def _fits(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, seconds: float, slow: Slow) -> bool:
    """Whether ``parts`` at ``size`` fit ``seconds`` of suite time (in total, and each within
    ``_part_cap`` when there are several)."""
    each = [plan_part(p, size, info, speed, slow).seconds for p in parts]
    return sum(each) <= seconds and not (len(parts) > 1 and max(each) > _part_cap(seconds))


def _too_long(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, seconds: float,
              slow: Slow) -> list[Part]:
    """The parts that alone take more than ``_part_cap(seconds)`` at ``size`` (none when alone)."""
    if len(parts) < 2:
        return []
    return [p for p in parts if plan_part(p, size, info, speed, slow).seconds > _part_cap(seconds)]


def _part_cap(seconds: float) -> float:
    """The most one part may take of a suite fitted to ``seconds`` (``TARGET`` of the budget): a third of
    the budget when it is under ``SHORT``, else no cap."""
    budget = seconds / TARGET
    return PART_SHARE * budget if budget < SHORT else float("inf")


def profile_length(info: ModelInfo) -> int:
    """L before any cap: the training length, else the positions, else ``DEFAULT_LENGTH``."""
    return info.train_length or info.max_positions or DEFAULT_LENGTH


def _cut(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, seconds: float, slow: Slow,
         left_out: dict[str, str], notes: list[str]) -> tuple[list[Part], Size]:
    """Reduce, then drop, parts until the smallest suite fits ``seconds``; then take back, in
    drop order, the dropped parts that fit the room left."""
    everyone, parts = list(parts), list(parts)
    for part in _too_long(parts, size, info, speed, seconds, slow):
        if len(parts) > 1:
            parts.remove(part)
            took = plan_part(part, size, info, speed, slow).seconds
            left_out[part.name] = (_to_decide(part, size, info, speed, slow) +
                                   f"at its smallest it would take {duration(took)}, over a third of the "
                                   f"{duration(seconds / TARGET)} it was fitted to (no part takes more while under "
                                   f"{SHORT / 60:.0f} min remain)")
    while parts and _total(parts, size, info, speed, slow) > seconds:
        victim = max(parts, key=lambda p: p.drop_order)
        reducible = [p for p in parts if p.reducible and p.name not in size.reduced]
        if reducible:
            size = dataclasses.replace(size, reduced=size.reduced | {reducible[0].name})
            notes.append(f"{reducible[0].name} reduced below its statistical floor: the budget cannot afford it")
            continue
        parts.remove(victim)
        took = plan_part(victim, size, info, speed, slow).seconds
        left_out[victim.name] = (_to_decide(victim, size, info, speed, slow) + "the budget cannot afford it "
                                 f"even at its smallest size (about {duration(took)})")
    order = [p.name for p in everyone]
    for part in sorted((p for p in everyone if p.name in left_out), key=lambda p: p.drop_order):
        if _fits([*parts, part], size, info, speed, seconds, slow):  # a cheaper part fits the room left
            parts.append(part)
            del left_out[part.name]
    for name in sorted(size.reduced):  # a part reduced before a dearer one was dropped: back to its floor if it fits
        whole = dataclasses.replace(size, reduced=size.reduced - {name})
        if _fits(parts, whole, info, speed, seconds, slow):
            size = whole
            reduced = f"{name} reduced below its statistical floor: the budget cannot afford it"
            if reduced in notes:  # this fit reduced it; a refit of a reduced plan has no such note
                notes.remove(reduced)
    return sorted(parts, key=lambda p: order.index(p.name)), size


def _to_decide(part: Part, size: Size, info: ModelInfo, speed: Throughput, slow: Slow) -> str:
    """What deciding a left-out ``part``'s card lines would take, for its reason: the items a line's test
    needs a priori at the paper's effect and their minutes, or the pilot (the part at its smallest) whose
    spread tells the card the n its test needs (``profile.power``); "" for a part no card line reads."""
    from ctxlens.profile.power import part_needs

    planned = plan_part(part, size, info, speed, slow)
    says = []
    for key, option, n, unit in part_needs(part.name):
        have = planned.options.get(option)
        if n is None:
            says.append(f"{key}: a pilot of {have} {unit} (about {duration(planned.seconds)}), whose spread "
                        "gives the n its test needs")
            continue
        per = len(planned.options.get("depths") or [1]) if option == "n_passkey" else 1  # counted per depth
        took = plan_part(part, _with(size, part.name, option, -(-n // per)), info, speed, slow).seconds
        says.append(f"{key}: {n} {unit} at the paper's effect (about {duration(took)})")
    return "to decide, " + "; ".join(says) + "; " if says else ""


def _scale(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, seconds: float, slow: Slow,
           top: float) -> Size:
    """``size`` with the largest scale <= ``top`` whose suite fits ``seconds`` (``_fits``)."""
    if _fits(parts, dataclasses.replace(size, scale=top), info, speed, seconds, slow):
        return dataclasses.replace(size, scale=top)
    low, high = 0.0, top
    for _ in range(STEPS):
        mid = (low + high) / 2
        low, high = (mid, high) if _fits(parts, dataclasses.replace(size, scale=mid), info, speed, seconds, slow) \
            else (low, mid)
    return dataclasses.replace(size, scale=low)


def fit(parts: list[Part], info: ModelInfo, speed: Throughput, seconds: float, tokenizer: bool = True,
        length: int | None = None, source: str = NATURAL) -> Fit:
    """The suite of ``parts`` sized to ``seconds`` of suite time (see the module docstring);
    ``tokenizer``: whether the model has one; ``length``: L as the user set it (``--length``),
    which skips step 1; ``source``: the text the parts that read text read."""
    goal = TARGET * seconds
    extrapolate = not info.hard_limit
    trained = profile_length(info)
    smallest = lambda n: Size(n, 0.0, extrapolate, tokenizer=tokenizer, source=source)  # noqa: E731
    if length is not None:
        notes = [f"L = {length} as --length sets it (training length {trained})"]
    else:
        length = trained
        first = [p for p in parts if p.drop_order <= LINES_FIRST] or parts
        while length // 2 >= min(FLOOR, trained) and not _affords_first(first, smallest(length), info, speed, goal):
            length //= 2
        notes = [f"L capped to {length} by the budget (training length {trained})"] if length < trained else []
    if info.sliding_window and length <= info.sliding_window:
        notes.append(f"L = {length} is within the sliding window ({info.sliding_window}): local and global layers "
                     "see the same context")
    if not info.train_length:
        notes.append(f"the model states no training length: L = {trained}")
    left_out: dict[str, str] = {}
    kept, size = _cut(parts, smallest(length), info, speed, goal, 1.0, left_out, notes)
    size = _decide(kept, size, info, speed, goal, notes)
    size = _scale(kept, size, info, speed, goal - size.reserve, 1.0, 1.0)
    return Fit(size, [plan_part(p, size, info, speed) for p in kept], left_out, notes)


def _decide(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, goal: float,
            notes: list[str]) -> Size:
    """Step 3: each part whose lines need a known n raised to it (or, for the needle rounds, their time
    reserved), the decision adding the fewest seconds first, while the suite at ``size`` fits ``goal``."""
    from ctxlens.profile.power import a_priori

    by_name = {p.name: p for p in parts}
    offers = []
    for need in a_priori(size.length, info.train_length):
        part = by_name.get(need.part)
        if part is None:
            continue
        options = size.options(part, info)
        per = len(options.get("depths") or [1]) if need.option == "n_passkey" else 1  # the option counts per depth
        have, want = int(options.get(need.option, 0)) * per, -(-need.n // per)
        if have >= need.n:
            continue
        now = plan_part(part, size, info, speed).seconds
        if need.rounds:  # the haystacks beyond the grid's come in rounds, each at the grid's pace per haystack
            extra = (need.n - have) * now / max(have, 1)
        else:
            extra = plan_part(part, _with(size, need.part, need.option, want), info, speed).seconds - now
        offers.append((extra, need, have, want))
    for extra, need, have, want in sorted(offers, key=lambda o: o[0]):
        raised = (dataclasses.replace(size, reserve=size.reserve + extra) if need.rounds
                  else _with(size, need.part, need.option, want))
        what = "haystacks in rounds" if need.rounds else need.option.removeprefix("n_")
        if _fits(parts, raised, info, speed, goal - raised.reserve, 1.0):
            size = raised
            notes.append(f"decided first: {', '.join(need.lines)} get {need.n} {what} ({need.part}, "
                         f"about {duration(extra)} more), the n its test needs at the paper's effect")
        else:
            notes.append(f"not decided by the plan: {', '.join(need.lines)} would need {need.n} {what} "
                         f"({need.part} has {have}); the budget cannot add the {duration(extra)} that takes")
    return size


def _with(size: Size, part: str, option: str, n: int) -> Size:
    """``size`` with the power plan's count of ``part``'s ``option`` set to ``n``."""
    counts = tuple(c for c in size.counts if c[:2] != (part, option)) + ((part, option, n),)
    return dataclasses.replace(size, counts=counts)


def _affords_first(first: list[Part], size: Size, info: ModelInfo, speed: Throughput, goal: float) -> bool:
    """Whether the lines-first parts at ``size`` (their smallest) take at most ``LENGTH_SHARE`` of
    ``goal`` together and, under a short budget, each at most its third."""
    each = [plan_part(p, size, info, speed, 1.0).seconds for p in first]
    return sum(each) <= LENGTH_SHARE * goal and max(each, default=0.0) <= _part_cap(goal)


def refit(parts: list[Part], size: Size, info: ModelInfo, speed: Throughput, seconds: float,
          slow: Slow) -> Fit:
    """The not-yet-started ``parts`` fitted again to ``seconds`` at ``size``'s length, their
    estimates times ``slow`` (the ratio of spent to planned time so far, one or one per kind)."""
    left_out: dict[str, str] = {}
    notes: list[str] = []
    kept, smaller = _cut(parts, dataclasses.replace(size, scale=0.0), info, speed, TARGET * seconds, slow,
                         left_out, notes)
    smaller = _scale(kept, dataclasses.replace(smaller, scale=0.0), info, speed, TARGET * seconds, slow, 1.0)
    return Fit(smaller, [plan_part(p, smaller, info, speed, slow) for p in kept], left_out, notes)
