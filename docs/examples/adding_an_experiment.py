"""Adding an experiment, end to end: declare it, register it, run it on a zoo model, read its rows.

``early-late-loss`` (made up for this example): the mean next-token loss over the first and the
last quarter of each window. A model that uses its context predicts the last quarter better, so
``gain`` (early minus late, in nats) is expected to be positive on average (one window may say otherwise).

In ctxlens an experiment is one module of ``src/ctxlens/experiments/`` that ends with
``register(Experiment(...))``; the registry finds it there, and nothing else lists it. This file
declares the same thing from a script, so that it runs without editing the package:

    python docs/examples/adding_an_experiment.py [--out DIR]

It runs in a few seconds on a CPU (``zoo:rope``, two windows at each of two lengths, built-in
corpus), writes the run's ``report.html`` with the plotter declared below, and prints one line per
row. ``tests/test_docs.py`` runs it and checks the rows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass

from ctxlens.core.columns import Column
from ctxlens.core.options import PositiveInt, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.registry import (
    BOS,
    LENGTH,
    SAMPLE,
    SEED,
    SOURCE,
    DemoStep,
    Experiment,
    Smoke,
    T,
    declare,
    register,
    summary,
)
from ctxlens.probes.source import SourceOptions
from ctxlens.probes.windows import source_windows
from ctxlens.report.figures import Panel, figure
from ctxlens.report.plots._common import draw_lines, finish, numeric
from ctxlens.report.registry import plotter

NAME = "early-late-loss"


@dataclass
class Config(SourceOptions):  # an option group: --source, --n-samples, --seed, --text-field, --bos
    # each field is an option: typed, checked, and listed by `ctxlens run early-late-loss --help`
    source: str = option("builtin:test", "text source (see `ctxlens run token-loss --help`)")
    lengths: list[PositiveInt] = option(factory=lambda: [64, 128], help="window lengths, in tokens")


def plan(config: Config) -> list[Unit]:  # the units, known without loading a model
    return [{"source": config.source, "length": length, "sample": i, "seed": config.seed}
            for length in config.lengths for i in range(config.n_samples)]


def run(lm, config: Config, unit: Unit, cache: Cache) -> list[Row]:  # the rows of one unit
    length = unit["length"]
    lm.check_length(length)
    windows = source_windows(lm, config.source, config.lengths, config.n_samples, config.seed, cache,
                             text_field=config.text_field, bos=config.bos)  # cut once, at the longest length
    ids = windows.at(length)[unit["sample"]][None]  # [1, length]
    nll = lm.token_losses(ids)[0].double()  # [length - 1] nats
    quarter = max(1, nll.numel() // 4)
    early, late = float(nll[:quarter].mean()), float(nll[-quarter:].mean())
    return [{"bos": windows.bos, "n_tokens": quarter, "nll_early": early, "nll_late": late, "gain": early - late}]


COLUMNS = declare(  # every column a row may carry: the unit's coordinates and what `run` writes
    SOURCE, LENGTH, SAMPLE, SEED, BOS,
    Column("n_tokens", int, "tokens", "targets in each quarter"),
    Column("nll_early", float, "nats", "mean next-token loss over the window's first quarter"),
    Column("nll_late", float, "nats", "mean next-token loss over the window's last quarter"),
    Column("gain", float, "nats", "nll_early - nll_late: what the context before the last quarter is worth"),
)

register(Experiment(
    NAME, Config, plan, run, needs=("token_loss",), doc=summary(__doc__),
    paper="", section="an example (docs/contributing.md)",  # a paper id of ctxlens.core.papers.PAPERS, or ""
    smoke=Smoke({"lengths": [16, 32], "n_samples": 2},  # the test harnesses' small options
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1}),  # memory-growth test
    demo=(DemoStep("zoo", {"lengths": [T], "n_samples": 4}, {"lengths": [T], "n_samples": 2}),),  # full, --quick
    columns=COLUMNS,
))


# The plotter (in the package: a function in a module of src/ctxlens/report/plots/): the experiment's rows
# (`df`, one `series` per model) in, panels out, each a figure and the table of its numbers.
@plotter(NAME, title="Loss early and late in the window", paper="an example", metrics=("gain",))
def early_late_loss(df, ctx):
    table = numeric(df, "length", "gain").groupby(["series", "length"], as_index=False)["gain"].mean()
    fig, axes = figure(1)
    draw_lines(axes[0], table, "length", "gain", ctx)
    finish(axes[0], "window length (tokens)", "NLL first quarter - last quarter (nats)")
    return [Panel(NAME, "What the context before the last quarter is worth", fig, table)]


def main(argv: list[str] | None = None) -> list[dict]:
    from ctxlens.cli import main as ctxlens
    from ctxlens.runner import read_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="run directory (default: a temporary one)")
    args = parser.parse_args(argv)
    out = args.out or tempfile.mkdtemp(prefix="ctxlens-example-")
    # what `ctxlens run early-late-loss --model zoo:rope --out DIR ...` does, in this process (where it is registered)
    status = ctxlens(["run", NAME, "--model", "zoo:rope", "--out", out, "--lengths", "64,128", "--n-samples", "2",
                      "--no-progress"])
    if status:
        sys.exit(status)
    if ctxlens(["report", out, "--out", f"{out}/report.html"]):  # the report draws it with the plotter above
        sys.exit(1)
    rows = read_rows(out)
    for row in rows:
        print(f"{row['model']} length {row['length']} sample {row['sample']}: "
              f"early {row['nll_early']:.3f}, late {row['nll_late']:.3f}, gain {row['gain']:+.3f} nats")
    print(out)
    return rows


if __name__ == "__main__":
    main()
