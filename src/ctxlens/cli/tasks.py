"""``ctxlens tasks list | export``: the RULER-style tasks listed, or their generated data exported in RULER's
JSONL layout, with the bounds its numbers are checked against before any tokenizer loads."""

from __future__ import annotations

import argparse

from ctxlens.cli.common import experiment_options, table
from ctxlens.core.errors import CtxlensError


def cmd_tasks(args: argparse.Namespace, extra: list[str]) -> int:
    from ctxlens.tasks import RULER_TASKS
    from ctxlens.tasks.export import Prompting, export_tasks, task_table

    if args.action == "list":
        if extra:
            raise CtxlensError(f"Unexpected arguments for `ctxlens tasks list`: {' '.join(extra)}.")
        print(table(task_table()))
        return 0
    if not args.out:
        raise CtxlensError("No output directory given; pass --out DIR.")
    from ctxlens.tasks.base import check_options, get_task, parse_option

    names = args.names or list(RULER_TASKS)
    for name in names:
        get_task(name)
    options = {k: v for k in ("haystack_source", "squad", "hotpotqa") if (v := getattr(args, k)) is not None}
    for name, value in experiment_options(extra).items():
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


def _export_numbers(args: argparse.Namespace) -> list[int]:
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
