"""``ctxlens models``, ``ctxlens experiments`` and ``ctxlens zoo``: what ctxlens can measure and on what, as
tables (and ``zoo train``, which trains the built-in zoo)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ctxlens.cli.common import table
from ctxlens.core.errors import CtxlensError


def cmd_models(args: argparse.Namespace) -> int:
    if not args.all:
        if args.types or args.json:
            raise CtxlensError("--types and --json go with --all; run `ctxlens models --all --json FILE`.")
        from ctxlens.lm.families import families

        print(table(families()))
        return 0
    from ctxlens.lm import coverage

    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    result = coverage.run(types, progress=lambda row: print(f"checked {row.model_type}", file=sys.stderr, flush=True))
    print(coverage.render(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


def cmd_experiments(args: argparse.Namespace) -> int:
    from ctxlens.experiments import catalog
    from ctxlens.experiments.registry import by_paper

    if args.markdown:
        print(catalog.markdown())
        return 0
    rows = [{"experiment": e.name, "needs": ",".join(e.needs) or ("-" if e.loads_model else "own models"),
             "paper": e.paper or "-", "what": e.doc} for e in by_paper()]
    print(table(rows))
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
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
    print(table(rows))
    return 0
