"""``ctxlens run EXPERIMENT --model SPEC ... --out DIR`` and ``ctxlens run --config FILE``: the flags and the
YAML config file of one run, read and checked, handed to the runner (``ctxlens.runner.execute.run``).

A run's own ``config.yaml`` is a config file: ``ctxlens run --config RUN/config.yaml --out NEW`` runs
the same experiment on the same models with the same options, model options and ``meta`` (what the
caller stated, e.g. a profile's L, which the card reads). The keys the runner records for itself are
read and not used, because the new run records them again from the models it loads: its version
(``schema``, ``ctxlens.core.schema``: one newer than this ctxlens reads is refused), ``fingerprints``
(the weights), ``model_info`` (what each model is) and ``resolved`` (the options filled from each model,
``runner.plans``: the same model fills the same values; taking them as given options would apply one
model's values to every model and change the new run's ``options``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ctxlens.cli.common import experiment_options
from ctxlens.core.errors import CtxlensError, suggest

RECORDED_KEYS = ("schema", "fingerprints", "resolved", "model_info")  # a run's config.yaml: read, not used (docstring)
CONFIG_KEYS = ("experiment", "model", "models", "out", "options", "model_options", "meta", *RECORDED_KEYS)
MODEL_OPTIONS = ("dtype", "device", "device_map", "offload_folder", "attn_implementation", "trust_remote_code",
                 "revision", "rope_theta", "rope_scaling", "allow_extrapolation", "rope_layers")


def read_yaml(path: str) -> dict:
    from ctxlens.core import files, yaml_safe

    try:
        data = yaml_safe.load(files.read_text(Path(path), yaml_safe.MAX_CHARS, "Config file"), f"Config file '{path}'")
    except (FileNotFoundError, IsADirectoryError):
        raise CtxlensError(f"Config file '{path}' does not exist; check the path.") from None
    except UnicodeDecodeError:
        raise CtxlensError(f"Config file '{path}' is not UTF-8 text; pass a YAML file.") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CtxlensError(f"Config file '{path}' must hold a mapping of options, not {type(data).__name__}.")
    for key in data:
        if key not in CONFIG_KEYS:
            raise CtxlensError(
                f"Unknown key '{key}' in '{path}'.{suggest(str(key), CONFIG_KEYS)} "
                f"Known keys: {', '.join(CONFIG_KEYS)}."
            )
    if "schema" in data:
        from ctxlens.core import schema

        schema.check_version(schema.CONFIG.kind, data, f"Config file '{path}'")
    for key, kinds in (("experiment", str), ("model", str), ("out", str), ("models", (str, list)),
                       ("options", dict), ("model_options", dict), ("meta", dict), ("fingerprints", dict),
                       ("resolved", dict), ("model_info", dict)):
        if data.get(key) is not None and not isinstance(data[key], kinds):
            raise CtxlensError(f"'{key}' in '{path}' must be a {getattr(kinds, '__name__', 'name or list')}, not "
                               f"{type(data[key]).__name__}; fix the config file.")
    return data


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from ctxlens.runner.execute import run

    cfg = read_yaml(args.config) if args.config else {}
    experiment = args.experiment or cfg.get("experiment")
    if args.help:
        return _run_help(args, experiment)
    if not experiment:
        raise CtxlensError(
            "No experiment named; give one, e.g. `ctxlens run token-loss --model zoo:random-llama --out runs/x`."
        )
    models = args.model or cfg.get("models") or ([cfg["model"]] if cfg.get("model") else [])
    if isinstance(models, str):
        models = [models]
    out = args.out or cfg.get("out")
    if not out:
        raise CtxlensError("No run directory given; pass --out DIR.")
    options = {**(cfg.get("options") or {}), **experiment_options(extra)}
    model_options = dict(cfg.get("model_options") or {})
    for key in model_options:
        if key not in MODEL_OPTIONS:
            raise CtxlensError(
                f"Unknown model option '{key}'.{suggest(key, MODEL_OPTIONS)} Known: {', '.join(MODEL_OPTIONS)}."
            )
    for key in MODEL_OPTIONS:
        value = getattr(args, key, None)
        if value is not None:
            model_options[key] = value
    if isinstance(model_options.get("rope_scaling"), str):
        from ctxlens.core import yaml_safe

        try:
            model_options["rope_scaling"] = yaml_safe.load_json(model_options["rope_scaling"], "--rope-scaling",
                                                                limit=1 << 16)
        except CtxlensError as err:
            raise CtxlensError(
                f"--rope-scaling must be JSON, an object such as '{{\"rope_type\": \"linear\", \"factor\": 2}}' "
                f"({str(err).split(' (')[0].removeprefix('--rope-scaling ')})."
            ) from None
    store = run(experiment, models, out, options, model_options, progress=not args.no_progress,
                max_hours=args.max_hours, meta=cfg.get("meta"))
    from ctxlens.runner.store import read_rows

    print(f"{len(read_rows(out))} rows in {Path(out)} ({store.results_path.name})")
    return 0


def _run_help(args: argparse.Namespace, experiment: str | None) -> int:
    """``ctxlens run [EXPERIMENT] --help``: the run command's flags, then the experiment's options."""
    from ctxlens.experiments.catalog import options_help
    from ctxlens.experiments.registry import get_experiment

    declared = get_experiment(experiment) if experiment else None  # a typo fails before any help is printed
    print(args.run_help())
    if declared:
        print(options_help(declared))
    else:
        print("`ctxlens run EXPERIMENT --help` lists that experiment's options; `ctxlens experiments` lists them.")
    return 0
