"""``ctxlens card``, ``ctxlens archive`` and ``ctxlens profile``: the commands over runs and their folders (the
context-use card, gzip archives of finished rows) and the budgeted profile, whose report is drawn here
(``ctxlens.profile`` sits below the report)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxlens.cli.common import one_line, safe


def cmd_card(args: argparse.Namespace) -> int:
    from ctxlens.findings.card import card_of_runs, line_costs
    from ctxlens.report.card import card_markdown, cost_markdown
    from ctxlens.results import profile_costs, read_runs
    from ctxlens.tasks.scoring import THRESHOLD

    runs = read_runs(args.runs)
    for run in runs:
        for problem in run.problems:
            print(f"ctxlens: warning: {run.path}: {one_line(problem)}", file=sys.stderr)
    card = card_of_runs(runs, threshold=THRESHOLD if args.threshold is None else args.threshold)
    if not card:
        print("no run holds rows of the card's experiments (ruler, niah-depth, loss-vs-length, ...); nothing to show.")
        return 1
    print(safe(card_markdown(card)))  # model names and notes come from files: no control sequence reaches the terminal
    costs = cost_markdown(card, {m: line_costs(parts) for m, parts in profile_costs(runs).items()})
    if costs:
        print("\n" + safe(costs))
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
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


def cmd_profile(args: argparse.Namespace) -> int:
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
