"""The run directory of a ctxlens run, built to survive SIGKILL at any moment.

Layout of a run directory::

    config.yaml     the run's configuration (written atomically: temp file + os.replace)
    env.json        environment facts (written atomically)
    results.jsonl   one JSON object per line, one row per measurement
    units.jsonl     the commit log: {"unit": KEY, "rows": N, "end": BYTE_OFFSET} per finished unit

Commit protocol. A unit of work (one point of the experiment grid) is committed in two steps:

1. all its rows are appended to ``results.jsonl`` with one ``os.write`` on an ``O_APPEND``
   descriptor, then fsync'ed;
2. one line ``{"unit": KEY, "rows": N, "end": SIZE}`` is appended to ``units.jsonl`` and
   fsync'ed, where SIZE is the byte length of ``results.jsonl`` after step 1.

A unit is committed exactly when its line in ``units.jsonl`` is complete. The last complete,
valid line of ``units.jsonl`` therefore says how many bytes of ``results.jsonl`` are committed;
anything after that offset belongs to a unit that was in flight when the process died. Opening a
``RunStore`` repairs the directory: it cuts ``units.jsonl`` back to its valid prefix and
``results.jsonl`` back to the last committed offset, so a resumed run redoes at most the unit
that was in flight and never sees a truncated or duplicated row. ``read_rows`` applies the same
rule without touching any file, for report readers that may run next to a live run.

Several ranks may share a directory, each writing its own pair of files
(``results.rank{R}.jsonl`` / ``units.rank{R}.jsonl``); each pair is one writer's log.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ctxlens.core.errors import CtxlensError

_UNSET = "<unset>"


def _clean(value):
    """Turn numpy/torch scalars into Python scalars and non-finite floats into None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if not isinstance(value, (str, bytes, int, float, bool, type(None))) and hasattr(value, "item"):
        value = value.item()  # numpy scalar, 0-d array or one-element torch tensor
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _dumps_line(obj) -> bytes:
    return (json.dumps(_clean(obj), allow_nan=False, separators=(",", ":")) + "\n").encode()


def _append(path: Path, data: bytes, start: int | None = None) -> int:
    """Append ``data`` to ``path`` durably; return the file's size afterwards.

    With ``start``, first cut off anything past that offset (rows a failed commit left behind).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if start is not None and os.fstat(fd).st_size != start:
            os.ftruncate(fd, start)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # ranks may write the same file at once
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def _committed_units(units: bytes, results_size: int) -> tuple[list[dict], int]:
    """The valid prefix of a commit log: its entries and its length in bytes.

    An entry is valid when its line is complete, well formed, and its end offset neither goes
    backwards nor points past the end of the results file.
    """
    entries, valid_bytes, last_end = [], 0, 0
    for line in units.splitlines(keepends=True):
        try:
            entry = json.loads(line) if line.endswith(b"\n") else None
        except ValueError:
            entry = None
        if not (isinstance(entry, dict) and isinstance(entry.get("unit"), str)
                and type(entry.get("rows")) is int and type(entry.get("end")) is int
                and last_end <= entry["end"] <= results_size):
            break
        entries.append(entry)
        valid_bytes += len(line)
        last_end = entry["end"]
    return entries, valid_bytes


def _parse_rows(path: Path, data: bytes) -> list[dict]:
    rows = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except ValueError:
            raise CtxlensError(
                f"{path} line {number} is not valid JSON; the run directory is corrupt, "
                "so start the run again in a new --out directory."
            ) from None
    return rows


def _read_committed(results: Path, units: Path) -> list[dict]:
    data = _read_bytes(results)
    entries, _ = _committed_units(_read_bytes(units), len(data))
    end = entries[-1]["end"] if entries else 0
    return _parse_rows(results, data[:end])


def log_names(rank: int | None) -> tuple[str, str]:
    """(results file, commit log) of one writer: rank None is a single-process run."""
    suffix = "" if rank is None else f".rank{rank}"
    return f"results{suffix}.jsonl", f"units{suffix}.jsonl"


def _logs(directory: Path) -> list[tuple[Path, Path]]:
    """Every writer's (results, units) pair: the single-process pair first, then ranks in order."""
    ranks: list[int | None] = [None] if (directory / "units.jsonl").exists() else []
    found = []
    for path in directory.glob("units.rank*.jsonl"):
        if match := re.fullmatch(r"units\.rank(\d+)\.jsonl", path.name):
            found.append(int(match.group(1)))
    return [tuple(directory / name for name in log_names(r)) for r in ranks + sorted(found)]


def read_rows(directory: str | os.PathLike) -> list[dict]:
    """Committed rows of a run directory, read without modifying anything.

    Merges per-rank files: ``results.jsonl`` first, then ``results.rank{R}.jsonl`` by rank.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CtxlensError(f"{directory} is not a ctxlens run directory; pass the --out directory of a run.")
    return [row for results, units in _logs(directory) for row in _read_committed(results, units)]


def committed_units(directory: str | os.PathLike) -> set[str]:
    """Keys of the units committed by any writer of a run directory (read-only)."""
    done = set()
    for results, units in _logs(Path(directory)):
        size = results.stat().st_size if results.exists() else 0
        done |= {entry["unit"] for entry in _committed_units(_read_bytes(units), size)[0]}
    return done


def read_config(directory: str | os.PathLike) -> dict | None:
    """The run's ``config.yaml``, or None when there is none (read-only)."""
    path = Path(directory) / "config.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None


def check_config(directory: str | os.PathLike, config: dict, *, compare_keys: Iterable[str] | None = None) -> None:
    """Raise if ``directory`` holds a run whose ``config.yaml`` differs from ``config`` in ``compare_keys``
    (all keys when None); touches nothing, so a run can check before it writes anything."""
    old = read_config(directory)
    if old is None:
        return
    new = yaml.safe_load(yaml.safe_dump(config, sort_keys=False))  # compare as stored, so tuples equal lists
    keys = list(compare_keys) if compare_keys is not None else list(dict.fromkeys([*old, *new]))
    diffs = [f"{k}: {old.get(k, _UNSET)} -> {new.get(k, _UNSET)}" for k in keys
             if old.get(k, _UNSET) != new.get(k, _UNSET)]
    if diffs:
        raise CtxlensError(
            f"{directory} already holds a run with a different configuration ({'; '.join(diffs)}); "
            "use a new --out directory or the same options."
        )


class RunStore:
    """One writer's view of a run directory; see the module docstring for the protocol."""

    def __init__(self, directory: str | os.PathLike, *, results_name: str = "results.jsonl",
                 units_name: str = "units.jsonl"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.dir / results_name
        self.units_path = self.dir / units_name
        self.repairs: list[str] = []
        self._repair()

    def _repair(self) -> None:
        results_size = self.results_path.stat().st_size if self.results_path.exists() else 0
        units = _read_bytes(self.units_path)
        entries, valid_bytes = _committed_units(units, results_size)
        if valid_bytes < len(units):
            dropped = len(units[valid_bytes:].splitlines())
            os.truncate(self.units_path, valid_bytes)
            self.repairs.append(
                f"dropped {dropped} truncated or invalid line(s) at the end of {self.units_path.name}"
            )
        end = entries[-1]["end"] if entries else 0
        if results_size > end:
            tail = self.results_path.read_bytes()[end:]
            os.truncate(self.results_path, end)
            partial = "" if tail.endswith(b"\n") else " (the last one cut off mid-line)"
            self.repairs.append(
                f"dropped {len(tail.splitlines())} uncommitted rows of an interrupted unit{partial} "
                f"from {self.results_path.name}"
            )
        self._done = {entry["unit"] for entry in entries}
        self._end, self._units_end = end, valid_bytes

    def write_config(self, config: dict, *, compare_keys: Iterable[str] | None = None) -> None:
        check_config(self.dir, config, compare_keys=compare_keys)
        _atomic_write(self.dir / "config.yaml", yaml.safe_dump(config, sort_keys=False))

    def read_config(self) -> dict | None:
        return read_config(self.dir)

    def write_env(self, env: dict) -> None:
        _atomic_write(self.dir / "env.json", json.dumps(_clean(env), indent=2, allow_nan=False) + "\n")

    def done(self) -> set[str]:
        return set(self._done)

    def commit(self, unit: str, rows: list[dict]) -> None:
        if unit in self._done:
            raise ValueError(f"unit {unit!r} is already committed in {self.dir}")
        end = _append(self.results_path, b"".join(_dumps_line(row) for row in rows), self._end)
        line = _dumps_line({"unit": unit, "rows": len(rows), "end": end})
        self._units_end = _append(self.units_path, line, self._units_end)
        self._done.add(unit)
        self._end = end

    def rows(self) -> list[dict]:
        return _read_committed(self.results_path, self.units_path)

    @staticmethod
    def unit_key(coords: dict) -> str:
        return json.dumps(_clean(coords), sort_keys=True, separators=(",", ":"))
