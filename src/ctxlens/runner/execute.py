"""Run an experiment over one or more models into a run directory, resumably.

Units already committed (by this or any other writer of the directory) are skipped; a model is
loaded only when it has unfinished units. Under ``torchrun`` each rank runs its share of the
units into its own log pair (``ctxlens.runner.dist``). Each finished unit's rows are committed
together (``RunStore.commit``), so a killed run loses at most the unit in flight -- and of that,
only the samples not yet checkpointed: experiments that can (the task experiments, per decoded
sample) keep finished samples in ``partial/`` (``ctxlens.runner.partial``) and skip them on resume.
While a unit runs, the tokens every forward embeds feed a meter that prints tokens done, tokens/s
and the time left once a unit takes more than a few seconds (``ctxlens.core.progress``).

No half-made run directory (issue 22 part 8). Before loading anything the run only reads: the
experiment's options, and the ``config.yaml`` already in ``out`` (a different run there is an
error). The directory is created or repaired, and ``config.yaml`` / ``env.json`` written, at the
first commit, i.e. once a model has loaded, passed the experiment's needs and finished its first
unit, or saved its first checkpointed sample. So a model that fails to load (bad spec, unknown
family, missing file, ...) or a first unit that fails before any sample finishes leaves no
directory where there was none, and an existing one byte-identical.

``config.yaml`` lists the models whose rows the directory may hold: those it listed before, then
each model of this run up to the one about to commit its first rows (earlier ones are finished
or committed). When the second model of a run fails to load, the first one's committed rows stay
and the config lists the first, not the second; the same command, once the second loads, adds it.
A resume naming fewer models keeps the list. Each write re-reads config.yaml and only adds to its
list, and ranks walk the models in the same order, so ranks of a sharded run agree on it.
Beside the list, ``model_info`` records what each loaded model is (``ModelInfo.as_dict``: kind,
position encoding, training length, ...), so the torch-free findings know it from the rows' run.

Beside this module: ``runner.model_options`` (the model options typed, checked and applied),
``runner.writer`` (the writer that opens the directory at its first commit and keeps config.yaml,
and what ``run`` returns), ``runner.meter`` (the token meter of a unit in flight).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from ctxlens.core import progress as progress_channel
from ctxlens.core.columns import check_rows
from ctxlens.core.errors import CtxlensError
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import Experiment, make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm.specs import Resolved, resolved
from ctxlens.runner import dist, lock, partial, plans, preflight
from ctxlens.runner.meter import count_tokens, unit_meter
from ctxlens.runner.model_options import LOAD_KEYS, extrapolating, parse_model_options, prepare
from ctxlens.runner.rundir import check_config, check_ours, read_config
from ctxlens.runner.store import RunStore, committed_units, log_names
from ctxlens.runner.writer import COMPARE_KEYS, FinishedRun, RunResult, RunWriter

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM

# one model of a run, as ``_plan_models`` plans it: (spec, where it resolved, plan, its units this process owns,
# those not yet committed)
_Planned = tuple[str, Resolved | None, plans.ModelPlan, list[Unit], list[Unit]]


def run_config(experiment: str, models: Sequence[str], options: dict[str, object],
               model_options: dict[str, object]) -> dict[str, object]:
    """The dict written to ``config.yaml`` (and read back by ``--config``)."""
    return {"experiment": experiment, "models": list(models), "options": dict(options),
            "model_options": dict(model_options)}


def _same_options(out: Path, exp: Experiment, config: DataclassInstance) -> None:
    """Raise if ``out`` holds a run of ``exp`` whose options, parsed, differ from ``config``: values
    compare as parsed ('0256' and 256 are one length; an option left at its default equals it
    given), so runs that stored the command line's strings resume as before."""
    from ctxlens.core.errors import CtxlensError

    old = read_config(out) or {}
    if old.get("experiment") != exp.name:
        return  # nothing stored, or a different experiment: check_config has said so
    try:
        before = make_config(exp.Config, old.get("options") or {})
    except CtxlensError as err:
        raise CtxlensError(f"{out}/config.yaml holds options this version cannot read ({err}); use a new --out "
                           "directory.") from None
    diffs = [f"{f.name}: {getattr(before, f.name)} -> {getattr(config, f.name)}"
             for f in dataclasses.fields(config) if getattr(before, f.name) != getattr(config, f.name)]
    if diffs:
        raise CtxlensError(f"{out} already holds a run with a different configuration ({'; '.join(diffs)[:400]}); "
                           "use a new --out directory or the same options.")


def _same_weights(out: Path, spec: str, lm: LM) -> str:
    """The loaded model's fingerprint, after checking it against the one the run recorded for
    ``spec`` (weights replaced under the same name must not mix two models' rows)."""
    from ctxlens.core.errors import CtxlensError
    from ctxlens.lm.fingerprint import FULL, GGUF, fingerprint, is_sampled, weights_fingerprint

    now = weights_fingerprint(lm.model, lm.info.weights)
    then = ((read_config(out) or {}).get("fingerprints") or {}).get(spec)
    if now.startswith(GGUF) and isinstance(then, str) and not then.startswith(GGUF) and then == fingerprint(lm.model):
        return now  # recorded before GGUF files were fingerprinted by their own bytes: the same converted weights
    if isinstance(then, str) and now.startswith(FULL) and is_sampled(then):
        raise CtxlensError(f"The run {out} was written by an older ctxlens whose fingerprint of '{spec[:200]}' read "
                           "only parts of its weight files, so these weights cannot be checked against its rows; "
                           "read it as it is (card, report), or resume it in a new --out directory.")
    if then is not None and then != now:
        raise CtxlensError(f"The weights of model '{spec[:200]}' differ from those whose rows {out} holds "
                           f"(fingerprint {now} vs {then}); restore the original weights to resume, or use a "
                           "new --out directory.")
    return now


def _ready(exp: Experiment, spec: str, load_options: dict[str, Any], model_options: dict[str, Any],
           loaded: dict[str, LM], where: Resolved | None = None) -> tuple[LM | str, Row]:
    """(model, columns for its rows): ``spec`` loaded (or taken from ``loaded``; from ``where``, the spec
    resolved by ``_plan_models``, when it is given), checked against the experiment's needs and prepared,
    with what ``prepare`` changed; the spec itself for experiments that build their own."""
    from ctxlens.lm.loading import load

    if not exp.loads_model:
        return spec, {}
    lm = loaded[spec] if spec in loaded else load(where or spec, **load_options)
    for need in exp.needs:
        lm.family.require(need, spec)
    return lm, prepare(lm, model_options) or {}


def run(
    experiment: str,
    models: Sequence[str],
    out: str | Path,
    options: dict[str, object] | None = None,
    model_options: dict[str, Any] | None = None,
    progress: bool = True,
    announce: bool | None = None,
    loaded: dict[str, LM] | None = None,
    meta: dict[str, object] | None = None,
    max_hours: float | None = None,
) -> RunResult:
    """Run ``experiment`` with ``options`` on each model spec into ``out``; returns the store (a
    ``FinishedRun``, read-only, when the directory already held every unit: nothing was opened).

    Options the user leaves unset that depend on the model are filled per model
    (``ctxlens.runner.plans``). ``announce`` (default: ``progress``): print each model's plan to
    stderr once it has loaded, before its first forward, then a time estimate from a short
    throughput probe. Nothing is written to ``out`` before the first unit's rows are ready (see the
    module docstring). ``loaded``: {spec: LM} already loaded with these model options, used instead
    of loading them again (``ctxlens profile`` loads a model once for its whole suite). ``meta``:
    what the caller states about the run, written to config.yaml under ``meta`` and never compared
    on resume (``ctxlens profile``: the profile's length L, which the context-use card reads).
    ``max_hours``: refuse a model whose estimate (from the probe, which then runs even without
    ``announce``) exceeds it, before any of its units runs.

    Before any model loads: the options (names, types, and the values read only at run time,
    ``ctxlens.runner.preflight``), and every model's planned lengths against its positions, from
    its config alone.
    """
    from ctxlens.core.errors import CtxlensError

    options, model_options, out = dict(options or {}), parse_model_options(model_options or {}), Path(out)
    if not progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    exp = get_experiment(experiment)
    config = preflight.check(exp, options)
    if max_hours is not None and not 0 < max_hours < 1e6:
        raise CtxlensError(f"--max-hours must be a positive number of hours, got {max_hours}; e.g. --max-hours 2.")
    models = list(models) or list(exp.default_models)
    if not models:
        raise CtxlensError("No model given; pass --model SPEC (a hub id, a local directory or zoo:NAME).")
    if out.exists() and not out.is_dir():
        raise CtxlensError(f"--out {out} is a file, not a directory; pass a directory for the run.")
    options = {k.replace("-", "_"): getattr(config, k.replace("-", "_")) for k in options}  # stored parsed
    announce = progress if announce is None else announce
    run_cfg = {**run_config(experiment, models, options, model_options), **({"meta": dict(meta)} if meta else {})}
    check_ours(out)
    check_config(out, run_cfg, compare_keys=COMPARE_KEYS)
    _same_options(out, exp, config)
    shard = dist.from_env()
    lock.check_free(out, shard.rank if shard.sharded else None)
    load_options = {k: model_options[k] for k in LOAD_KEYS if model_options.get(k) is not None}
    if "device" in load_options:
        load_options["device"] = shard.device(load_options["device"])
    writer = RunWriter(out, run_cfg, shard, load_options.get("device"))
    job = _Job(exp, config, options, models, out, shard, load_options, model_options, dict(loaded or {}), progress,
               announce, max_hours)
    try:
        return _run_models(job, writer)
    finally:
        if writer.store is not None:
            writer.store.close()


@dataclass(frozen=True)
class _Job:
    """What ``run`` hands down, unchanged, to the steps that plan and run each of its models."""

    #: the experiment, its parsed config, and the options as stored (parsed, under their names)
    exp: Experiment
    config: DataclassInstance
    options: dict[str, object]
    #: the models in their order, the run directory, and this process's share of the units
    models: list[str]
    out: Path
    shard: dist.Shard
    #: the options passed to ``load``, every model option parsed, and the models already loaded ({spec: LM})
    load_options: dict[str, Any]
    model_options: dict[str, Any]
    loaded: dict[str, LM]
    #: what is shown (the progress bars and meters, each model's plan) and the longest estimate allowed
    progress: bool
    announce: bool
    max_hours: float | None

    @property
    def extrapolate(self) -> bool:
        """--allow-extrapolation given (what the plans and their descriptions read)."""
        return bool(self.model_options.get("allow_extrapolation"))


def _plan_models(job: _Job) -> list[_Planned]:
    """(spec, where it resolved, plan, its units this process owns, those not yet committed) per model,
    each model's lengths checked against its positions from its config (``preflight.check_lengths``):
    all before any model loads. Each spec is resolved at most once here (``_where``; a loaded model
    brings its own), and what it resolved to travels down to the plan, the config read and the load."""
    exp, load_options, model_options, loaded = job.exp, job.load_options, job.model_options, job.loaded
    done = committed_units(job.out)
    before = read_config(job.out) or {}
    recorded, listed_before = before.get("resolved") or {}, before.get("models") or []
    read_options: dict[str, Any] = {k: load_options[k] for k in ("trust_remote_code", "revision") if k in load_options}
    index = 0
    planned: list[_Planned] = []
    for spec in job.models:
        where = getattr(loaded.get(spec), "resolved", None)  # a loaded model's own; None: not resolved yet
        if where is None and exp.defaults is not None and spec not in recorded and spec not in listed_before:
            where = resolved(spec)  # the plan reads its config (an unknown model fails here, nothing written)
        mp = plans.for_model(exp, job.options, job.config, spec, recorded, listed_before, job.extrapolate,
                             read_options, where)
        units = [{"model": spec, "experiment": exp.name, **u} for u in exp.plan(mp.config)]
        mine = [u for i, u in enumerate(units, start=index) if job.shard.owns(i)]
        index += len(units)
        todo = [u for u in mine if RunStore.unit_key(u) not in done]
        if todo and exp.loads_model:
            if where is None and spec not in loaded:
                where = _where(spec)
            info = loaded[spec].info if spec in loaded else mp.info or _config_info(where, read_options)
            preflight.check_lengths(spec, info, preflight.planned_lengths(mp.config, todo),
                                    extrapolating(model_options))
        planned.append((spec, where, mp, mine, todo))
    return planned


def _where(spec: str) -> Resolved | None:
    """``spec`` resolved, or None when it cannot be here (then its load, in its turn, says why)."""
    try:
        return resolved(spec)
    except CtxlensError:
        return None


def _config_info(where: Resolved | None, read_options: dict[str, Any]) -> ModelInfo | None:
    """The ModelInfo of the model resolved to ``where`` from its config, or None when it did not resolve
    or the config cannot be read here (then the load says why, and the model checks its lengths as it runs)."""
    from ctxlens.lm.info import read_info

    if where is None:
        return None
    try:
        return read_info(where, **read_options)
    except CtxlensError:
        return None


def _run_models(job: _Job, writer: RunWriter) -> RunResult:
    """Each model with units left loaded, checked and run unit by unit through ``writer``; the store
    (a ``FinishedRun`` when nothing was left and nothing was opened)."""
    exp, out, shard, model_options, progress = job.exp, job.out, job.shard, job.model_options, job.progress
    planned = _plan_models(job)
    for position, (spec, where, mp, mine, todo) in enumerate(planned):
        if exp.defaults is not None:
            writer.resolved[spec] = mp.filled
        if not todo:
            continue
        lm, columns = _ready(exp, spec, job.load_options, model_options, job.loaded, where)
        cache: Cache = {}
        if not isinstance(lm, str):  # a loaded model (exp.loads_model)
            writer.fingerprints[spec] = _same_weights(out, spec, lm)
        info = mp.info if isinstance(lm, str) else lm.info  # a str: the spec of an experiment that loads none
        if info is not None:
            writer.infos[spec] = info.as_dict()
        if job.announce or job.max_hours is not None:
            _announce(job, mp, lm, todo, len(mine))
        desc = f"{exp.name} {spec}" + (f" [rank {shard.rank}/{shard.world}]" if shard.sharded else "")
        listed_now = job.models[:position + 1]
        with count_tokens(None if isinstance(lm, str) else lm):
            for n, unit in enumerate(tqdm(todo, desc=desc, disable=not progress, unit="unit")):
                key = RunStore.unit_key(unit)
                part = partial.PartialUnit(out, key, partial.fingerprint(
                    key, writer.fingerprints.get(spec), [dataclasses.asdict(mp.config), model_options, columns]),
                    functools.partial(writer.ensure, listed_now))
                meter = unit_meter(exp, mp.config, unit, f"unit {n + 1}/{len(todo)}") if progress else None
                began = time.perf_counter()
                with progress_channel.unit(meter, part):
                    rows = [{**unit, **columns, **row} for row in exp.run(lm, mp.config, unit, cache)]
                took = time.perf_counter() - began  # measured, so a resume never infers time from file times
                check_rows(exp.name, exp.declared, rows)  # the experiment's declared columns (ctxlens.core.columns)
                store = writer.open(listed_now) if n == 0 else writer.ensure(listed_now)  # opened at n == 0
                if key not in store.done():  # else another writer committed it while this one computed
                    store.commit(key, rows, seconds=took)
                part.remove()
        del lm, cache
    if writer.store is not None:
        partial.sweep(out, committed_units(out))
    listed = (read_config(out) or {}).get("models") or []
    if writer.store is None and out.is_dir() and set(job.models) <= set(listed):
        dist.barrier(shard, job.load_options.get("device"))
        return FinishedRun(out, log_names(shard.rank if shard.sharded else None)[0])  # writes nothing
    store = writer.open(job.models)  # every model is finished or committed: the config lists them all
    dist.barrier(shard, job.load_options.get("device"))
    return store


def _announce(job: _Job, mp: plans.ModelPlan, lm: LM | str, todo: Sequence[Unit], n_units: int) -> None:
    """With ``job.announce``, the plan to stderr (before any forward), then the estimate from a
    throughput probe at the plan's lengths; with ``job.max_hours``, a plan estimated longer is
    refused here, before any unit."""
    exp, announce, max_hours = job.exp, job.announce, job.max_hours
    info = mp.info if isinstance(lm, str) else lm.info  # a str: the spec of an experiment that loads none
    if announce:
        print("\n".join(plans.describe(exp, mp, info, todo, n_units, job.extrapolate)), file=sys.stderr, flush=True)
    if isinstance(lm, str):
        return
    from ctxlens.probes.throughput import measure

    seconds = None
    try:
        speed = measure(lm, **plans.probe_shape(exp, mp.config, todo))
        line, seconds = plans.estimate(exp, mp.config, todo, speed), plans.estimate_seconds(exp, mp.config, todo,
                                                                                           speed)
    except Exception as err:  # noqa: BLE001 - the estimate is a courtesy: the run goes on without it
        line = f"  no time estimate: the throughput probe failed ({_one_line(err)})"
    if announce:
        print(line, file=sys.stderr, flush=True)
    if max_hours is not None and seconds is not None and seconds > max_hours * 3600:
        raise CtxlensError(plans.too_long(exp, mp.spec, seconds, max_hours))


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split())
    return text[:200] or type(err).__name__
