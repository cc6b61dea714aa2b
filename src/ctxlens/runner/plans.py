"""One model's plan: the options that depend on the model, its units, their tokens, a time estimate.

An experiment's ``defaults`` hook fills the options the user did not give from the model
(``ctxlens.lm.info.ModelInfo``, read from its config without the weights). The filled values are
recorded per model in ``config.yaml`` (``resolved``), so a resume plans the same units without
reading the model again; a model that a run directory lists without such a record ran before
model defaults existed, with the declared defaults, and keeps them. ``describe`` is the plan the
runner prints (to stderr) once the model has loaded and before its first forward; ``estimate``
adds the time from a throughput probe (``ctxlens.probes.throughput``). ``ctxlens profile`` builds
its suite from the same pieces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ctxlens.core.progress import duration
from ctxlens.core.units import Unit
from ctxlens.experiments.base import Experiment, Work, make_config
from ctxlens.lm.info import ModelInfo, read_info
from ctxlens.lm.specs import Resolved
from ctxlens.probes.throughput import Throughput

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # an experiment's Config instance (its class known to the experiment)

SAMPLE_COUNTS = ("n_samples", "n_sequences", "n_windows")  # the fallback's sequences per unit
SAMPLE_KEYS = ("sample", "window", "sequence")  # a unit with one of these is one sample (token-loss)


@dataclass(frozen=True)
class ModelPlan:
    """The experiment's config for one model (its defaults filled), what was filled, and why."""

    spec: str
    config: DataclassInstance
    filled: dict[str, object]
    notes: tuple[str, ...] = ()
    info: ModelInfo | None = None


def for_model(exp: Experiment, options: dict[str, object], config: DataclassInstance, spec: str,
              recorded: dict[str, object], listed: Sequence[str], extrapolate: bool,
              read_options: dict[str, Any] | None = None, where: Resolved | None = None) -> ModelPlan:
    """The plan config of ``spec``: ``config`` with the model's defaults for options not in
    ``options`` (the user's), from ``recorded`` (config.yaml's ``resolved``) when the run holds
    them, kept as declared for a model ``listed`` before records existed, else from its config
    (read from ``where``, ``spec`` resolved by the caller, when it is given)."""
    if exp.defaults is None:
        return ModelPlan(spec, config, {})
    if spec in recorded:
        filled = _plain_values(recorded[spec], spec)
        note = (f"options from the model, as the run recorded them: {_show(filled)}",) if filled else ()
        return ModelPlan(spec, _with(exp, options, filled), filled, note)
    if spec in listed:
        return ModelPlan(spec, config, {}, ("this run predates options from the model: it keeps the declared "
                                            "defaults",))
    info = read_info(where or spec, **(read_options or {}))
    made = exp.defaults(info, config, frozenset(options), extrapolate)
    filled = {k: v for k, v in made.values.items() if k not in options}
    notes = ((f"options from the model: {_show(filled)}",) if filled else ()) + tuple(made.notes)
    return ModelPlan(spec, _with(exp, options, filled), filled, notes, info)


_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,199}")


def _plain_values(filled: object, spec: str) -> dict[str, object]:
    """config.yaml's recorded options of ``spec``, checked as data: a mapping of option names to
    numbers, booleans or plain names (lists of them), so a run directory from someone else cannot
    choose a path or any other value a model's defaults never give (issue 32 part 1)."""
    from ctxlens.core.errors import CtxlensError, clip

    ok = lambda v: v is None or isinstance(v, (bool, int, float)) or (  # noqa: E731
        isinstance(v, str) and bool(_PLAIN.fullmatch(v)))
    if filled is not None and not isinstance(filled, dict):
        filled = {"": filled}
    for key, value in (filled or {}).items():
        if not isinstance(key, str) or not all(ok(v) for v in (value if isinstance(value, list) else [value])):
            raise CtxlensError(f"config.yaml records the option {clip(key, 40)} = {clip(value, 60)} for "
                               f"{clip(spec, 60)}, which no model's defaults give; restore config.yaml or use a new "
                               "--out directory.")
    return dict(filled or {})


def _with(exp: Experiment, options: dict[str, object], filled: dict[str, object]) -> DataclassInstance:
    return make_config(exp.Config, {**options, **filled})


def _show(values: dict[str, object]) -> str:
    return "; ".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in values.items())


def unit_work(exp: Experiment, config: DataclassInstance, unit: Unit) -> list[Work] | None:
    """The tokens ``unit`` processes: the experiment's ``work`` hook, else one forward of the unit's
    ``length`` per sample of the config (one, when the unit is itself one sample: it names its
    ``sample`` index), else None (not known)."""
    if exp.work is not None:
        return exp.work(config, unit)
    length = unit.get("length")
    if any(isinstance(unit.get(key), int) for key in SAMPLE_KEYS):
        return [Work(1, length)] if isinstance(length, int) else None
    count = next((getattr(config, name) for name in SAMPLE_COUNTS if isinstance(getattr(config, name, None), int)),
                 None)
    return [Work(count, length)] if isinstance(length, int) and count else None


def describe(exp: Experiment, plan: ModelPlan, info: ModelInfo | None, todo: Sequence[Unit], n_units: int,
             extrapolate: bool) -> list[str]:
    """The plan's lines: model, what came from it, units, tokens (before any forward)."""
    lines = [f"ctxlens: {exp.name} on {plan.spec}" + (f" ({info.describe()})" if info else "")]
    lines += [f"  {note}" for note in plan.notes]
    lines.append(f"  units: {len(todo)} to run" + (f" of {n_units} ({n_units - len(todo)} done)"
                                                   if n_units != len(todo) else ""))
    works = [unit_work(exp, plan.config, u) for u in todo]
    known = [w for ws in works if ws is not None for w in ws]
    if known:
        prompt, new = sum(w.prompt_tokens for w in known), sum(w.new_tokens for w in known)
        lines.append(f"  tokens: {prompt:,} prompt" + (f" + {new:,} generated" if new else "")
                     + (f" (not known for {works.count(None)} units)" if None in works else ""))
    else:
        lines.append("  tokens: not stated by this experiment")
    limit = info.max_positions if info is not None else None
    beyond = limit is not None and any(isinstance(u.get("length"), int) and u["length"] > limit for u in todo)
    if beyond and extrapolate:
        lines.append(f"  extrapolating: lengths beyond the model's {limit} positions are planned "
                     "(--allow-extrapolation)")
    return lines


class ProbeShape(TypedDict, total=False):
    """``measure``'s keywords for a plan (``probe_shape``): all of them, or none."""

    lengths: list[int]
    batch: int
    decode: bool
    pairs: bool


def probe_shape(exp: Experiment, config: DataclassInstance, todo: Sequence[Unit]) -> ProbeShape:
    """What the throughput probe times for this plan (``measure``'s ``lengths`` and ``batch``): the
    prompt lengths its units forward and the batch it decodes at; {} when it states no tokens."""
    works = [w for u in todo for w in unit_work(exp, config, u) or []]
    if not works:
        return {}
    decoding = [w.batch for w in works if w.new_tokens]
    return {"lengths": sorted({w.length for w in works}), "batch": max(decoding) if decoding else 1,
            "decode": bool(decoding), "pairs": any(w.pairs for w in works)}


def estimate_seconds(exp: Experiment, config: DataclassInstance, todo: Sequence[Unit],
                     speed: Throughput) -> float | None:
    """The estimated seconds of ``todo``: each unit's forwards at the probe's per-token cost for
    their length, plus its decoding steps at the probe's pace and its (query, key) pairs at the
    probe's cost per pair; None when no unit states its tokens."""
    known = [w for u in todo for w in unit_work(exp, config, u) or []]
    if not known:
        return None
    return sum(work_seconds(w, speed) for w in known)


def work_seconds(work: Work, speed: Throughput) -> float:
    """Estimated seconds of one ``Work`` at ``speed``: its forwards, decoding steps and pairs."""
    return (speed.prefill_seconds(work.length, work.sequences) + speed.decode_seconds(work.decode_steps)
            + speed.pair_seconds(work.pairs))


def estimate(exp: Experiment, config: DataclassInstance, todo: Sequence[Unit], speed: Throughput) -> str:
    """One line: the estimated time of ``todo`` at the probe's pace."""
    works = [unit_work(exp, config, u) for u in todo]  # each unit's work once, for the time and the wording
    known = [w for ws in works if ws is not None for w in ws]
    if not known:
        return f"  throughput: {speed.describe()}; no time estimate (the experiment states no token counts)"
    seconds = sum(work_seconds(w, speed) for w in known)
    partial = " for the units with known tokens" if None in works else ""
    decodes = any(w.new_tokens for w in known)
    upper = "; each answer decoded to its full budget: answers that end early take less" if decodes else ""
    if decodes and any(w.decoded < 1 for w in known if w.new_tokens):
        share = min(w.decoded for w in known if w.new_tokens)
        upper += (f"; forced scoring: {share:.0%} of the answers counted as decoded (those the teacher-forced "
                  "forward proves are not)")
    return (f"  estimate: about {duration(seconds)}{partial} ({speed.describe()}; from a short probe at the plan's "
            f"lengths on this machine{upper})")


def too_long(exp: Experiment, spec: str, seconds: float, max_hours: float) -> str:
    """The sentence refusing a plan whose estimate exceeds ``--max-hours``."""
    return (f"The plan of {exp.name} on '{spec[:120]}' is estimated at about {duration(seconds)} "
            f"({seconds / 3600:.2f} h), over --max-hours {max_hours:g}; shrink it (fewer or shorter --lengths, a "
            "smaller --n-samples, fewer --tasks) or raise --max-hours. None of its units ran.")


