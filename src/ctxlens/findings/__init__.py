"""The headline findings of the four papers, checked on result rows alone (no torch).

``compute_findings(runs, models=..., controls=...)`` reads run directories (or folders of them)
and returns the findings table that opens the report (``ctxlens.report.findings``): one row per
finding with ``finding``, ``paper``, ``expected``, ``measured``, ``status`` (reproduced | not
reproduced | undecided | not measured | not applicable) and the extra columns ``models``,
``note`` and ``applies to`` (and ``untrained control`` for the ACCS findings). One small
function per finding, in one module per paper (``geometry``, ``intrinsic_entropy``,
``long_sequence``, ``rope_distance``, named as in ``ctxlens.core.papers``; the shared row and
verdict rules in ``verdicts``); each docstring names the paper section and the criterion, and
every criterion was fixed before any zoo model was measured:

- the ACCS criteria are those of ``ctxlens.findings.accs`` and the Positional
  Heads criteria those of ``ctxlens.findings.positional`` and ``ctxlens.findings.masking`` (reused as
  they are);
- the others are stated in their docstrings, with the numbers of the paper they come from.

A finding is measured on the models it applies to, by what each model is, not by its name: its
architecture kind, position encoding and training length (the ``applies to`` column; the rules
and the run's record of each model, ``config.yaml``'s ``model_info``, are in
``ctxlens.findings.models``; a zoo name without a record is the zoo's model, trained at 512
bytes). It is "reproduced" when its criterion holds on every such model that was measured, "not
reproduced" when it fails on one, "undecided" when it fails on none but some model shows nothing
to test (e.g. it retrieves nothing at all, so no drop can be seen; the note says which), "not
measured" when none of its models has rows (the note says which and why), and "not applicable"
when it applies to none of the models (the note says why for each). Models that were not
measured are listed in the note, so a partial check is visible. The context-use card
(``ctxlens.findings.card``) reads the same rows, one column per model.
An untrained copy of a zoo model (``controls``: zoo name -> spec) is a control: a pattern that
the untrained control shows as well says little about what training taught; it never changes
the status, it is shown beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import cast

from ctxlens.core.zoo_facts import TRAIN_LENGTH, ZOO_NAMES
from ctxlens.findings.geometry import (
    accs_falls_with_depth,
    hybrid_no_plateau,
    local_plateau,
    rope_no_plateau_beyond_training,
)
from ctxlens.findings.intrinsic_entropy import (
    ce_linear_in_dimension_parity,
    ce_linear_in_intrinsic_entropy,
    optimal_context_grows,
)
from ctxlens.findings.long_sequence import lost_in_the_middle, retrieval_collapses
from ctxlens.findings.models import ZOO_INFO, info_for, keys_of, recorded_infos
from ctxlens.findings.rope_distance import positional_heads_matter
from ctxlens.findings.verdicts import CONTROL, Models, Rows
from ctxlens.row_access import declares

__all__ = [
    "CONTROL",
    "FINDINGS",
    "ZOO_INFO",
    "Models",
    "TRAIN_LENGTH",
    "ZOO_NAMES",
    "Rows",
    "accs_falls_with_depth",
    "ce_linear_in_dimension_parity",
    "ce_linear_in_intrinsic_entropy",
    "compute_findings",
    "hybrid_no_plateau",
    "local_plateau",
    "lost_in_the_middle",
    "optimal_context_grows",
    "positional_heads_matter",
    "recorded_train_length",
    "retrieval_collapses",
    "rope_no_plateau_beyond_training",
]

# Each finding and the experiments whose rows it reads.
FINDINGS = (
    (accs_falls_with_depth, ("accs-layers",)),
    (local_plateau, ("accs-boundary",)),
    (hybrid_no_plateau, ("accs-boundary",)),
    (rope_no_plateau_beyond_training, ("accs-boundary",)),
    (retrieval_collapses, ("niah-depth",)),
    (lost_in_the_middle, ("niah-depth",)),
    (optimal_context_grows, ("optimal-context",)),
    (ce_linear_in_intrinsic_entropy, ("intrinsic-entropy",)),
    (ce_linear_in_dimension_parity, ("parity-dimension",)),
    (positional_heads_matter, ("positional-heads", "head-masking")),
)
# The experiments whose rows findings read per model (the others train their own models).
PER_MODEL_EXPERIMENTS = {e for _, exps in FINDINGS for e in exps} - {"optimal-context", "parity-dimension"}


def recorded_train_length(rows: Iterable[dict], specs: Iterable[str]) -> int:
    """The training length the rows of models ``specs`` record (the RoPE experiments' ``train_length``
    column) when they agree on one, else ``TRAIN_LENGTH``."""
    wanted = set(specs)
    found = {int(r["train_length"]) for r in rows
             if r.get("model") in wanted and declares(r, "train_length") and r.get("train_length")}
    return found.pop() if len(found) == 1 else TRAIN_LENGTH


def _specs(rows: list[dict], infos: dict[str, dict], controls: dict[str, str]) -> dict[str, str]:
    """{key: spec} of the models the rows measure (zoo specs keyed by their zoo name), controls left
    out; when any zoo model is among them, the zoo names not there too (as ``zoo:NAME``, "no rows")."""
    read = {r.get("model") for r in rows if r.get("experiment") in PER_MODEL_EXPERIMENTS}
    specs = [s for s in dict.fromkeys([*sorted(str(m) for m in read if m), *infos])
             if s not in set(controls.values())]
    found = keys_of(specs)
    if any(k in ZOO_NAMES for k in found):
        found = {**{n: f"zoo:{n}" for n in ZOO_NAMES}, **found}
    return found


Paths = str | os.PathLike | Iterable[str | os.PathLike]  # run directories or folders of them (``read_runs``)

def compute_findings(runs: Paths | list[dict],
                     models: dict[str, str] | None = None, controls: dict[str, str] | None = None,
                     train_length: int | None = None, failures: dict[str, str] | None = None,
                     infos: dict[str, dict] | None = None) -> list[dict]:
    """The findings table from run directories (or folders of them, or a list of rows).

    ``models``: {key: model spec as in the rows}, a key being a zoo name or any label (default:
    every model the rows measure, a zoo spec keyed by its zoo name); a mapping of zoo names only
    is the zoo, and the zoo names it lacks are "not trained"; ``controls``: {key: spec of
    its untrained copy}; ``train_length``: one training length for every model (default: each
    model's recorded one, else what the rows record, ``recorded_train_length``); ``failures``:
    {experiment: error} of runs that failed, added to the note of every finding that reads them;
    ``infos``: {spec: ModelInfo dict}, added to what the runs' ``config.yaml`` record
    (``ctxlens.findings.models``). A finding applies to the models its rule admits, by kind,
    position encoding and training length; to a zoo name without a record, as the zoo's model."""
    recorded: dict[str, dict] = {}
    if isinstance(runs, list) and all(isinstance(r, dict) for r in runs):
        rows = runs
    else:
        from ctxlens.results import read_runs

        read = read_runs(cast(Paths, runs))  # not a list of rows: paths
        rows, recorded = [r for run in read for r in run.rows], recorded_infos(read)
    recorded.update(infos or {})
    controls = dict(controls or {})
    given = dict(models) if models is not None else _specs(rows, recorded, controls)
    default = recorded_train_length(rows, given.values())
    table = Models(given, {k: info_for(k, s, recorded) for k, s in given.items()},
                   recorded=[k for k, s in given.items() if s in recorded],
                   absent=[n for n in ZOO_NAMES if n not in given] if set(given) <= set(ZOO_NAMES) else (),
                   default=default, override=train_length)
    for name in table.absent:
        table.infos[name] = ZOO_INFO[name]
    grouped, out = Rows(rows), []
    for finding, experiments in FINDINGS:
        row = finding(grouped, table, controls, default if train_length is None else train_length)
        failed = [f"the {e} run failed ({(failures or {})[e]})" for e in experiments if e in (failures or {})]
        if failed:
            row["note"] = "; ".join([*failed, row["note"]] if row["note"] else failed)
        out.append(row)
    return out
