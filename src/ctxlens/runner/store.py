"""The run directory of a ctxlens run, built to survive SIGKILL at any moment.

Layout of a run directory::

    config.yaml     the run's configuration (written atomically: temp file + os.replace)
    env.json        environment facts (written atomically)
    results.jsonl   one JSON object per line, one row per measurement
    units.jsonl     the commit log: {"schema": 1, "unit": KEY, "rows": N, "end": BYTE_OFFSET, "seconds": S} per
                    finished unit (S: the unit's measured time, ``unit_seconds``)

Each file's fields and version are declared in ``ctxlens.core.schema`` (a line or file without a
version is version 1, as every run written before versions were); the store stamps the version on what
it writes, and a commit-log line of a newer version is refused in one sentence, never cut as torn.

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

An archived run (``ctxlens archive``, ``ctxlens.runner.archive``) keeps a results file gzip-compressed
as ``results.jsonl.gz`` (``results.rank{R}.jsonl.gz``) beside its plain commit log. Every reader
here reads either form (the plain file when both are there) under the same commit rule; a cut-off
or corrupt ``.gz``, or one that decompresses to more than ``MAX_ARCHIVED_BYTES``, is one sentence
(``ctxlens.runner.compression``).
A writer never appends to an archived run: ``RunStore`` refuses a directory holding the ``.gz``
form of its results file (the log's offsets would point into a file that is not there) and says
how to unpack it; a finished archived run is still read, and ``ctxlens run`` on it writes nothing.

What a store refuses, before changing any byte (one sentence each):

- a second writer of the same log pair while the first lives (``runner.lock``);
- run files that are links or special files (FIFOs, devices): nothing is read or written through
  them (``core.files``);
- a directory that is not a ctxlens run: files in it but none of ours, or a results file whose
  commit log is missing (deleting ``units.jsonl`` must not silently drop committed rows);
- a complete commit-log line that is not an entry as ``core.schema.UNITS`` declares it, or is of a
  newer version (a crash cuts only the last line, before its newline);
- committed rows that do not match their commit log (a line edited or corrupted in the middle):
  repair only ever cuts the uncommitted tail, so it first checks that every committed unit's
  rows are where its log says and parse as JSON.

The checks a directory passes before any of this, and its ``config.yaml`` read back and compared,
are ``ctxlens.runner.rundir``'s.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ctxlens.core import files, schema
from ctxlens.core.errors import CtxlensError
from ctxlens.core.units import Row, Unit
from ctxlens.runner.compression import ARCHIVE_SUFFIX, archived, gunzip
from ctxlens.runner.lock import WriterLock
from ctxlens.runner.rundir import check_config, check_ours, read_config


def _clean(value: object) -> object:
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


def _dumps_line(obj: object) -> bytes:
    return (json.dumps(_clean(obj), allow_nan=False, separators=(",", ":")) + "\n").encode()


def _committed_units(units: bytes, results_size: int, where: object = "units.jsonl") -> tuple[list[dict], int]:
    """The valid prefix of the commit log ``where``: its entries and its length in bytes.

    The prefix ends at a line a crash cut off (no newline yet) or whose end offset goes backwards or
    points past the end of the results file. A complete line that is not a commit-log entry as
    ``core.schema.UNITS`` declares it (or is of a newer version) was not cut by a crash: it is one
    sentence, so that nothing after it is cut.
    """
    entries, valid_bytes, last_end = [], 0, 0
    for number, line in enumerate(units.splitlines(keepends=True), start=1):
        if not line.endswith(b"\n"):
            break
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            entry = line.decode(errors="replace").strip()
        schema.validate(schema.UNITS.kind, entry, f"{where} line {number}")
        if not last_end <= entry["end"] <= results_size:
            break
        entries.append(entry)
        valid_bytes += len(line)
        last_end = entry["end"]
    return entries, valid_bytes


def _corrupt(path: Path, where: str) -> CtxlensError:
    return CtxlensError(
        f"{path} {where}, so it was changed by something other than ctxlens; nothing was modified: "
        "restore the file, or start the run again in a new --out directory."
    )


def _committed_rows(path: Path, data: bytes, entries: list[dict]) -> list[Row]:
    """The rows of the committed units, each unit checked against its commit-log entry: its rows
    end on a line boundary at the logged offset, there are as many as logged, and each parses."""
    rows, start, number = [], 0, 0
    for entry in entries:
        chunk = data[start:entry["end"]]
        if chunk and not chunk.endswith(b"\n"):
            raise _corrupt(path, f"does not end a line at byte {entry['end']}, where unit {entry['unit'][:80]} ends")
        lines = chunk.splitlines()
        if len(lines) != entry["rows"]:
            raise _corrupt(path, f"holds {len(lines)} rows where its commit log says {entry['rows']} "
                                 f"(unit {entry['unit'][:80]})")
        for line in lines:
            number += 1
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if not isinstance(row, dict):
                raise _corrupt(path, f"line {number} is not a JSON row")
            rows.append(row)
        start = entry["end"]
    return rows


def read_results(path: Path) -> tuple[bytes, Path]:
    """The bytes of the results file ``path`` and the file they came from: ``path`` itself when
    it is there, else its archived form decompressed (``gunzip``); (b"", path) when neither is."""
    gz = archived(path)
    if os.path.lexists(path) or not os.path.lexists(gz):
        return files.read_bytes(path), path
    return gunzip(gz, files.read_bytes(gz)), gz


def _read_committed(results: Path, units: Path) -> list[Row]:
    data, source = read_results(results)
    entries, _ = _committed_units(files.read_bytes(units), len(data), units)
    return _committed_rows(source, data, entries)


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
    return [(directory / results, directory / units) for results, units in map(log_names, [*ranks, *sorted(found)])]


def read_rows(directory: str | os.PathLike) -> list[Row]:
    """Committed rows of a run directory, read without modifying anything.

    Merges per-rank files: ``results.jsonl`` first, then ``results.rank{R}.jsonl`` by rank.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CtxlensError(f"{directory} is not a ctxlens run directory; pass the --out directory of a run.")
    check_ours(directory)
    return [row for results, units in _logs(directory) for row in _read_committed(results, units)]


def unit_seconds(directory: str | os.PathLike) -> list[float]:
    """The measured seconds of each committed unit of a run directory, in commit order per log (0 for a
    unit committed before units recorded their time), read-only: what ``ctxlens profile`` counts for a
    part an earlier run of the command was killed in (a copy of the directory keeps them; file times
    do not survive a copy)."""
    out: list[float] = []
    for results, units in _logs(Path(directory)):
        size = results.stat().st_size if results.exists() else len(read_results(results)[0])
        for entry in _committed_units(files.read_bytes(units), size, units)[0]:
            seconds = entry.get("seconds")
            ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 <= seconds < 1e7
            out.append(float(seconds) if ok and seconds is not None else 0.0)
    return out


def committed_units(directory: str | os.PathLike) -> set[str]:
    """Keys of the units committed by any writer of a run directory (read-only)."""
    done = set()
    for results, units in _logs(Path(directory)):
        size = results.stat().st_size if results.exists() else len(read_results(results)[0])
        done |= {entry["unit"] for entry in _committed_units(files.read_bytes(units), size, units)[0]}
    return done


def results_files(directory: str | os.PathLike) -> list[Path]:
    """Every results file of a run directory by its plain name (``read_results`` reads either
    form), each once: ``results*.jsonl`` and the archived ``results*.jsonl.gz`` without a plain twin."""
    directory = Path(directory)
    plain = {p.name for p in directory.glob("results*.jsonl")}
    plain |= {p.name.removesuffix(ARCHIVE_SUFFIX) for p in directory.glob("results*.jsonl.gz")}
    return [directory / name for name in sorted(plain)]


class RunStore:
    """One writer's view of a run directory; see the module docstring for the protocol."""

    def __init__(self, directory: str | os.PathLike, *, results_name: str = "results.jsonl",
                 units_name: str = "units.jsonl"):
        self.dir = Path(directory)
        check_ours(self.dir)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise files.user_error(err, self.dir, "create") or err from None
        self.results_path = self.dir / results_name
        self.units_path = self.dir / units_name
        if os.path.lexists(archived(self.results_path)):
            raise CtxlensError(
                f"{self.dir} is an archived run (its rows are in {archived(self.results_path).name}), so ctxlens will "
                f"not append to it; unpack it with `ctxlens archive --unpack {self.dir}` and run the same command "
                "again, or use a new --out directory."
            )
        rank = re.fullmatch(r"results(?:\.rank(\d+))?\.jsonl", results_name)
        self.lock = WriterLock(self.dir, int(rank.group(1)) if rank and rank.group(1) else None)
        self.repairs: list[str] = []
        try:
            self.lock.acquire()
            self._repair()
        except OSError as err:
            self.lock.release()
            raise files.user_error(err, self.dir, "open the run in") or err from None
        except BaseException:
            self.lock.release()
            raise

    def close(self) -> None:
        """Give up the writer's lock; the store can still read, but not commit."""
        self.lock.release()

    def _repair(self) -> None:
        """Cut the uncommitted tails, after checking that every committed unit is intact."""
        data = files.read_bytes(self.results_path)
        results_size = len(data)
        units = files.read_bytes(self.units_path)
        entries, valid_bytes = _committed_units(units, results_size, self.units_path)
        _committed_rows(self.results_path, data, entries)  # raises, before any change, on a corrupt row
        if valid_bytes < len(units):
            dropped = len(units[valid_bytes:].splitlines())
            files.truncate(self.units_path, valid_bytes)
            self.repairs.append(
                f"dropped {dropped} truncated or invalid line(s) at the end of {self.units_path.name}"
            )
        end = entries[-1]["end"] if entries else 0
        if results_size > end:
            tail = data[end:]
            files.truncate(self.results_path, end)
            partial = "" if tail.endswith(b"\n") else " (the last one cut off mid-line)"
            self.repairs.append(
                f"dropped {len(tail.splitlines())} uncommitted rows of an interrupted unit{partial} "
                f"from {self.results_path.name}"
            )
        self._done = {entry["unit"] for entry in entries}
        self._end, self._units_end = end, valid_bytes
        files.append(self.units_path, b"")  # the log exists before any row: results never outlive it

    def write_config(self, config: dict, *, compare_keys: Iterable[str] | None = None) -> None:
        check_config(self.dir, config, compare_keys=compare_keys)
        self._write(self.dir / "config.yaml", yaml.safe_dump(schema.stamp(schema.CONFIG.kind, config), sort_keys=False))

    def _write(self, path: Path, text: str) -> None:
        try:
            files.atomic_write(path, text)
        except OSError as err:
            raise files.user_error(err, path, "write") or err from None

    def read_config(self) -> dict | None:
        return read_config(self.dir)

    def write_env(self, env: dict) -> None:
        self._write(self.dir / "env.json",
                    json.dumps(_clean(schema.stamp(schema.ENV.kind, env)), indent=2, allow_nan=False) + "\n")

    def done(self) -> set[str]:
        return set(self._done)

    def commit(self, unit: str, rows: list[Row], seconds: float | None = None) -> None:
        if unit in self._done:
            raise ValueError(f"unit {unit!r} is already committed in {self.dir}")
        if not self.lock.held:
            raise ValueError(f"this store of {self.dir} is closed; open a new RunStore to write")
        path = self.results_path
        try:
            end = files.append(path, b"".join(_dumps_line(row) for row in rows), self._end)
            timed = {"seconds": round(seconds, 3)} if seconds is not None else {}
            line = _dumps_line(schema.stamp(schema.UNITS.kind, {"unit": unit, "rows": len(rows), "end": end, **timed}))
            path = self.units_path
            self._units_end = files.append(path, line, self._units_end)
        except OSError as err:
            # the unit is not committed; what reached the files is cut at the next open
            raise files.user_error(err, path, "write to") or err from None
        self._done.add(unit)
        self._end = end

    def rows(self) -> list[Row]:
        return _read_committed(self.results_path, self.units_path)

    @staticmethod
    def unit_key(coords: Unit) -> str:
        return json.dumps(_clean(coords), sort_keys=True, separators=(",", ":"))
