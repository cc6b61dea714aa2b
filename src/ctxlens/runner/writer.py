"""The run directory as ``run`` writes it: this process's writer (``RunWriter``), which opens the directory
only at its first commit and keeps ``config.yaml`` listing the models, their weights' fingerprints,
the options filled from each model (``resolved``) and what each is (``model_info``); and what ``run``
returns (``RunResult``: the store written through, or a ``FinishedRun`` read-only)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ctxlens.core.env import environment
from ctxlens.core.units import Row
from ctxlens.runner import dist
from ctxlens.runner.rundir import read_config
from ctxlens.runner.store import RunStore, committed_units, log_names, read_rows

log = logging.getLogger(__name__)

COMPARE_KEYS = ("experiment", "model_options")  # a resume must match these (and the parsed options); models may grow


class RunWriter:
    """This process's writer of the run directory, which it opens only at its first commit."""

    def __init__(self, out: Path, config: dict, shard: dist.Shard, device: str | None):
        self.out, self.config, self.shard, self.device = out, config, shard, device
        self.fingerprints: dict[str, str] = {}  # spec -> fingerprint of the weights this process loaded
        self.resolved: dict[str, dict] = {}  # spec -> options filled from that model (runner.plans)
        self.infos: dict[str, dict] = {}  # spec -> its ModelInfo as a dict (read by ctxlens.findings)
        self.store: RunStore | None = None

    def open(self, models: Sequence[str]) -> RunStore:
        """The store: the directory created or repaired on the first call, config.yaml listing ``models``."""
        store, first = self.store, self.store is None
        if store is None:
            results_name, units_name = log_names(self.shard.rank if self.shard.sharded else None)
            store = self.store = RunStore(self.out, results_name=results_name, units_name=units_name)
            for note in store.repairs:
                log.warning("%s", note)
        self._record(store, models)
        if first and self.shard.rank == 0:
            store.write_env(environment(self.device))
        return store

    def ensure(self, models: Sequence[str]) -> RunStore:
        """The store, opened (``open``) if this process has not opened it yet."""
        return self.store if self.store is not None else self.open(models)

    def _record(self, store: RunStore, models: Sequence[str]) -> None:
        """Make config.yaml list ``models`` after the ones it lists already; rewritten only on a change."""
        old = read_config(self.out) or {}
        listed = list(dict.fromkeys([*(old.get("models") or []), *models]))
        prints = {**(old.get("fingerprints") or {}),
                  **{m: f for m, f in self.fingerprints.items() if m in listed}}
        resolved = {**(old.get("resolved") or {}), **{m: v for m, v in self.resolved.items() if m in listed}}
        infos = {**(old.get("model_info") or {}), **{m: v for m, v in self.infos.items() if m in listed}}
        if (not old or listed != old.get("models") or prints != (old.get("fingerprints") or {})
                or resolved != (old.get("resolved") or {}) or infos != (old.get("model_info") or {})):
            config = {**self.config, "models": listed, **({"fingerprints": prints} if prints else {}),
                      **({"resolved": resolved} if resolved else {}), **({"model_info": infos} if infos else {})}
            store.write_config(config, compare_keys=COMPARE_KEYS)


class RunResult(Protocol):
    """What ``run`` returns: the ``RunStore`` it wrote through, or a ``FinishedRun``."""

    dir: Path
    repairs: list[str]
    results_path: Path

    def rows(self) -> list[Row]: ...

    def done(self) -> set[str]: ...


class FinishedRun:
    """What ``run`` returns for a run that had nothing left to do: its rows, read-only."""

    def __init__(self, directory: Path, results_name: str):
        self.dir, self.results_path = directory, directory / results_name
        self.repairs: list[str] = []

    def rows(self) -> list[Row]:
        return read_rows(self.dir)

    def done(self) -> set[str]:
        return committed_units(self.dir)
