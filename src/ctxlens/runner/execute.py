"""Run an experiment over one or more models into a run directory, resumably.

Units already committed (by this or any other writer of the directory) are skipped; a model is
loaded only when it has unfinished units. Under ``torchrun`` each rank runs its share of the
units into its own log pair (``ctxlens.runner.dist``). Each finished unit's rows are committed
together (``RunStore.commit``), so a killed run loses at most the unit in flight.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from ctxlens.core.env import environment
from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.runner import dist
from ctxlens.runner.store import RunStore, committed_units, log_names

log = logging.getLogger(__name__)

LOAD_KEYS = ("dtype", "device", "device_map", "offload_folder", "attn_implementation", "trust_remote_code", "revision")


def run_config(experiment: str, models: Sequence[str], options: dict, model_options: dict) -> dict:
    """The dict written to ``config.yaml`` (and read back by ``--config``)."""
    return {"experiment": experiment, "models": list(models), "options": dict(options), "model_options": dict(model_options)}


def _prepare(lm, model_options: dict) -> None:
    if model_options.get("rope_theta") is not None or model_options.get("rope_scaling") is not None:
        lm.set_rope(theta=model_options.get("rope_theta"), scaling=model_options.get("rope_scaling"))
    if model_options.get("allow_extrapolation"):
        lm.allow_extrapolation()


def run(
    experiment: str,
    models: Sequence[str],
    out: str | Path,
    options: dict | None = None,
    model_options: dict | None = None,
    progress: bool = True,
) -> RunStore:
    """Run ``experiment`` with ``options`` on each model spec into ``out``; returns the store."""
    from ctxlens.lm.loading import load

    options, model_options = dict(options or {}), dict(model_options or {})
    if not progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    exp = get_experiment(experiment)
    config = make_config(exp.Config, options)
    models = list(models) or list(exp.default_models)
    if not models:
        from ctxlens.core.errors import CtxlensError

        raise CtxlensError("No model given; pass --model SPEC (a hub id, a local directory or zoo:NAME).")
    shard = dist.from_env()
    load_options = {k: model_options[k] for k in LOAD_KEYS if model_options.get(k) is not None}
    if "device" in load_options:
        load_options["device"] = shard.device(load_options["device"])
    results_name, units_name = log_names(shard.rank if shard.sharded else None)
    store = RunStore(out, results_name=results_name, units_name=units_name)
    for note in store.repairs:
        log.warning("%s", note)
    store.write_config(run_config(experiment, models, options, model_options),
                       compare_keys=("experiment", "options", "model_options"))
    if shard.rank == 0:
        store.write_env(environment(load_options.get("device")))
    done = committed_units(out)
    index = 0
    for spec in models:
        units = [{"model": spec, "experiment": experiment, **u} for u in exp.plan(config)]
        mine = [u for i, u in enumerate(units, start=index) if shard.owns(i)]
        index += len(units)
        todo = [u for u in mine if RunStore.unit_key(u) not in done]
        if not todo:
            continue
        if exp.loads_model:
            lm = load(spec, **load_options)
            for need in exp.needs:
                lm.family.require(need, spec)
            _prepare(lm, model_options)
        else:
            lm = spec
        cache: dict = {}
        desc = f"{experiment} {spec}" + (f" [rank {shard.rank}/{shard.world}]" if shard.sharded else "")
        for unit in tqdm(todo, desc=desc, disable=not progress, unit="unit"):
            rows = exp.run(lm, config, unit, cache)
            store.commit(RunStore.unit_key(unit), [{**unit, **row} for row in rows])
        del lm, cache
    dist.barrier(shard, load_options.get("device"))
    return store
