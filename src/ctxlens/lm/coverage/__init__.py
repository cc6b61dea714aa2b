"""Coverage: which analyses pass their independent checks on every decoder type transformers has.

For each in-scope model type of transformers' causal-LM mapping (``ctxlens.lm.tiny.every_type``) this
builds a tiny random model, wraps it with ``ctxlens.lm.from_model`` (the path a loaded model
takes, hand-written family or inferred adapter) and runs five checks, each against a truth
that does not go through ctxlens:

- ``token_loss``, ``residual`` (``ctxlens.lm.coverage.stream``): token losses vs the model's own
  cross-entropy; the residual after the mixer vs the block output with its MLP branch zeroed;
- ``qk``, ``head_mask``, ``rope`` (``ctxlens.lm.coverage.attention``): captured q/k vs eager
  attention probabilities; head masking vs zeroed output-projection columns; ``set_rope`` vs a
  model built from the edited config.

Each check ends ``pass``, ``fail`` (what differed, or the exception's first line),
``unsupported`` (the adapter declines the analysis for this model, with its reason) or ``n/a``
(the model has no attention / no MLP branch / no RoPE). Every check builds its own copy of the
model (same seed, same weights; ``ctxlens.lm.coverage.probe``), so one check's edits never reach
another. This module runs the checks over one type or all of them and renders the table.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import transformers

import ctxlens.lm.tiny.every_type as every_type
from ctxlens.core.errors import unknown
from ctxlens.lm.coverage.attention import check_head_mask, check_qk, check_rope
from ctxlens.lm.coverage.probe import Build, Builder, Check, probe_ids
from ctxlens.lm.coverage.stream import check_residual, check_token_loss
from ctxlens.lm.tiny.every_type import first_line

ANALYSES = ("token_loss", "residual", "qk", "head_mask", "rope")
STATUSES = ("pass", "fail", "unsupported", "n/a")


@dataclass
class TypeCoverage:
    """The five checks of one model type."""

    model_type: str
    kind: str = "?"
    built: Check = field(default_factory=lambda: Check("pass"))
    checks: dict[str, Check] = field(default_factory=dict)
    seconds: float = 0.0


CHECKS: dict[str, Callable[[Builder, torch.Tensor], Check]] = {
    "token_loss": check_token_loss, "residual": check_residual, "qk": check_qk,
    "head_mask": check_head_mask, "rope": check_rope,
}


# -- one type, all types ------------------------------------------------------------------------------
def _kind(builder: Builder) -> str:
    try:
        return builder.lm().family.kind
    except Exception:  # noqa: BLE001 - no adapter: the checks say why
        return "?"


def check_type(model_type: str, seed: int = 0, build: Build | None = None,
               checks: Iterable[str] = ANALYSES) -> TypeCoverage:
    """Build ``model_type`` tiny and run the named checks; exceptions become failures."""
    start = time.perf_counter()
    row = TypeCoverage(model_type)
    try:
        builder = Builder(model_type, seed, build)
    except Exception as err:  # noqa: BLE001 - a type that does not build is a reported failure
        row.built = Check("fail", first_line(err))
        row.checks = {a: Check("fail", "does not build") for a in checks}
        row.seconds = time.perf_counter() - start
        return row
    row.kind = _kind(builder)
    ids = probe_ids(int(builder.model().get_output_embeddings().weight.shape[0]))
    for name in checks:
        try:
            row.checks[name] = CHECKS[name](builder, ids)
        except Exception as err:  # noqa: BLE001 - every exception is a failed check with its first line
            row.checks[name] = Check("fail", first_line(err))
    row.seconds = time.perf_counter() - start
    return row


def run(types: Iterable[str] | None = None, threads: int = 1,
        progress: Callable[[TypeCoverage], None] | None = None) -> dict[str, Any]:
    """The coverage of ``types`` (default: every in-scope type) and the out-of-scope list, as JSON-able dict."""
    import logging
    import warnings

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    start = time.perf_counter()
    rows, out = [], []
    wanted = list(types) if types is not None else None
    for t in wanted or []:
        if t not in every_type.causal_lm_types():
            raise unknown("model type", t, every_type.causal_lm_types())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.getLogger("ctxlens").setLevel(logging.ERROR)
            for t in every_type.causal_lm_types() if wanted is None else wanted:
                category, reason = every_type.scope(t)
                if category != every_type.IN_SCOPE:
                    out.append({"type": t, "category": category, "reason": reason})
                    continue
                row = check_type(t)
                rows.append(row)
                if progress:
                    progress(row)
    finally:
        torch.set_num_threads(previous)
        transformers.logging.set_verbosity(verbosity)
    return {
        "transformers": transformers.__version__, "torch": torch.__version__, "threads": threads,
        "seconds": round(time.perf_counter() - start, 2),
        "types": [asdict(r) for r in rows], "out_of_scope": out,
    }


def counts(result: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{analysis: {status: number of types}} over the in-scope types of ``result``."""
    table = {a: dict.fromkeys(STATUSES, 0) for a in ("built", *ANALYSES)}
    for row in result["types"]:
        table["built"][row["built"]["status"]] += 1
        for a, c in row["checks"].items():
            table[a][c["status"]] += 1
    return table


# -- rendering -----------------------------------------------------------------------------------------
_MARK = {"pass": "pass", "fail": "FAIL", "unsupported": "unsup.", "n/a": "n/a"}


def _grid(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
        return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return [line(header), *(line(r) for r in rows)]


def render(result: dict[str, Any], markdown: bool = False, per_type: bool = True) -> str:
    """The coverage table (one row per type unless ``per_type`` is off), the counts per analysis,
    the failures and declines with reasons, the out-of-scope types."""
    rows = result["types"]
    out = []
    table = [[r["model_type"], r["kind"],
              *(_MARK[r["checks"][a]["status"]] if a in r["checks"] else "-" for a in ANALYSES)] for r in rows]
    if per_type:
        out += _grid(["type", "kind", *ANALYSES], table, markdown)
    n = len(rows)
    built = sum(r["built"]["status"] == "pass" for r in rows)
    out += ["", f"{n} decoder-only text types checked ({built} build) in {result['seconds']:.0f} s "
                f"(transformers {result['transformers']}, {result['threads']} thread):", ""]
    c = counts(result)
    out += _grid(["analysis", *STATUSES], [[a, *(str(c[a][s]) for s in STATUSES)] for a in ANALYSES], markdown)
    failures = [[r["model_type"], a, ch["reason"]] for r in rows
                for a, ch in ([("built", r["built"])] if r["built"]["status"] == "fail" else r["checks"].items())
                if ch["status"] == "fail"]
    if failures:
        out += ["", "Failures:", ""] + _grid(["type", "analysis", "reason"], failures, markdown)
    unsupported = [[r["model_type"], a, ch["reason"]] for r in rows for a, ch in r["checks"].items()
                   if ch["status"] == "unsupported"]
    if unsupported:
        out += ["", "Declined by the adapter:", ""] + _grid(["type", "analysis", "reason"], unsupported, markdown)
    if result["out_of_scope"]:
        out += ["", f"Out of scope ({len(result['out_of_scope'])} types, not counted):", ""]
        by_cat: dict[str, list[str]] = {}
        for o in result["out_of_scope"]:
            by_cat.setdefault(o["category"], []).append(o["type"])
        out += _grid(["category", "types"], [[k, ", ".join(v)] for k, v in by_cat.items()], markdown)
    return "\n".join(out)


__all__ = ["ANALYSES", "CHECKS", "Check", "STATUSES", "TypeCoverage", "check_type", "counts", "render", "run"]
