"""Run an experiment over one or more models into a run directory, resumably.

Units already committed in ``results.jsonl`` are skipped; a model is loaded only when it has
unfinished units. Each finished unit's rows are committed together (``RunStore.commit``), so
a killed run loses at most the unit in flight.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from ctxlens.core.env import environment
from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.runner.store import RunStore

log = logging.getLogger(__name__)

LOAD_KEYS = ("dtype", "device", "device_map", "attn_implementation", "trust_remote_code", "revision")


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
    if not models:
        from ctxlens.core.errors import CtxlensError

        raise CtxlensError("No model given; pass --model SPEC (a hub id, a local directory or zoo:NAME).")
    store = RunStore(out)
    for note in store.repairs:
        log.warning("%s", note)
    store.write_config(run_config(experiment, models, options, model_options),
                       compare_keys=("experiment", "options", "model_options"))
    store.write_env(environment(model_options.get("device")))
    done = store.done()
    for spec in models:
        units = [{"model": spec, "experiment": experiment, **u} for u in exp.plan(config)]
        todo = [u for u in units if RunStore.unit_key(u) not in done]
        if not todo:
            continue
        lm = load(spec, **{k: model_options[k] for k in LOAD_KEYS if model_options.get(k) is not None})
        for need in exp.needs:
            lm.family.require(need, spec)
        _prepare(lm, model_options)
        cache: dict = {}
        for unit in tqdm(todo, desc=f"{experiment} {spec}", disable=not progress, unit="unit"):
            rows = exp.run(lm, config, unit, cache)
            store.commit(RunStore.unit_key(unit), [{**unit, **row} for row in rows])
        del lm, cache
    return store
