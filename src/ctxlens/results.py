"""Read finished (or running) ctxlens runs without torch: rows as a pandas DataFrame, plus each
run's configuration and environment.

    import ctxlens.results
    df = ctxlens.results.load("runs/accs")             # one run directory
    df = ctxlens.results.load(["runs/a", "runs/b"])    # several, stacked
    df = ctxlens.results.load("ctxlens-demo")          # a folder of run directories

Only committed rows are read (``ctxlens.runner.store.read_rows``): a unit still being written,
or cut off by a crash, is left out, and nothing in the directory is modified, so this is safe
next to a live run. Every row keeps the columns the experiment wrote (``model``,
``experiment``, coordinates, metrics); ``run_dir`` says which directory it came from.
Non-finite numbers were stored as ``null`` and read back as missing values. An archived run's
rows (``results.jsonl.gz``, written by ``ctxlens archive``) are read the same way.

Rows are read in their experiment's current layout (``ctxlens.row_access.LAYOUTS``: a row an older
writer made is read through the change, the file is never rewritten) and, for a declared
experiment, as a ``ctxlens.row_access.Row``: a dict that refuses to read a column the experiment
does not declare. Its ``config.yaml`` and ``env.json`` are read through their declarations
(``ctxlens.core.schema``): one that does not match, or was written by a newer ctxlens, is left out and
said in ``Run.problems`` in one sentence.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxlens.core import files, schema, yaml_safe
from ctxlens.core.errors import CtxlensError
from ctxlens.row_access import current, declared_rows
from ctxlens.runner.store import read_results, read_rows, results_files

if TYPE_CHECKING:
    import pandas as pd

RUN_COLUMN = "run_dir"


@dataclass
class Run:
    """One run directory as read from disk."""

    path: Path
    rows: list[dict]
    config: dict | None = None  # config.yaml (None when absent)
    env: dict | None = None  # env.json (None when absent)
    uncommitted: int = 0  # lines in results files beyond the committed units (in flight or cut off)
    problems: list[str] = field(default_factory=list)  # unreadable config/env, said in words

    @property
    def name(self) -> str:
        return self.path.name or str(self.path)


def is_run_dir(path: Path) -> bool:
    """A directory the runner wrote: it has a config, an env or a results/units log."""
    return any((path / name).exists() for name in ("config.yaml", "env.json")) or any(path.glob("units*.jsonl"))


def run_dirs(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """Run directories named by ``paths``; a folder that is not a run itself stands for the run
    directories directly inside it (e.g. the output of ``ctxlens demo``), or, when none is, for
    those one level further down (the output of ``ctxlens profile``: ``DIR/<model>/<part>``)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise CtxlensError(f"{p} is not a directory; pass the --out directory of a ctxlens run.")
        if is_run_dir(p):
            found.append(p)
            continue
        children = sorted(c for c in p.iterdir() if c.is_dir() and is_run_dir(c))
        if not children:
            children = sorted(g for c in p.iterdir() if c.is_dir() and not c.name.startswith(".")
                              for g in c.iterdir() if g.is_dir() and is_run_dir(g))
        if not children:
            raise CtxlensError(f"{p} holds no ctxlens run (no config.yaml or results); "
                               "pass the --out directory of a run.")
        found += children
    if not found:
        raise CtxlensError("No run directory given; pass at least one --out directory of a ctxlens run.")
    return list(dict.fromkeys(found))


def text_safe(value: Any) -> Any:  # whatever JSON or YAML holds, of the same shape
    """``value`` with every lone surrogate (valid in JSON, not encodable in UTF-8) replaced by U+FFFD,
    in strings, keys and nested containers: whatever a row holds can be written out."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {text_safe(k): text_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [text_safe(v) for v in value]
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_safe_rows(rows: list[dict]) -> list[dict]:
    """``text_safe(rows)``, walked only when some string of theirs holds a lone surrogate: JSON's encoder
    finds that out at C speed (the rows are what JSON parsed), where the walk visits every value."""
    return text_safe(rows) if _SURROGATE.search(json.dumps(rows, ensure_ascii=False)) else rows


def _read_config(path: Path, problems: list[str]) -> dict | None:
    file = path / "config.yaml"
    if not file.exists():
        return None
    try:
        data = yaml_safe.load(files.read_text(file), "config.yaml")
    except (CtxlensError, UnicodeDecodeError) as err:
        problems.append(f"config.yaml could not be read ({str(err).splitlines()[0][:200]})")
        return None
    return _declared(schema.CONFIG.kind, text_safe(data), problems)


def _declared(kind: str, data: object, problems: list[str]) -> dict | None:
    """``data`` (a parsed ``kind`` file of a run) through its declaration; None, said in ``problems``,
    when it does not match."""
    try:
        return schema.validate(kind, data, kind)
    except CtxlensError as err:
        problems.append(str(err))
        return None


def _read_env(path: Path, problems: list[str]) -> dict | None:
    file = path / "env.json"
    if not file.exists():
        return None
    try:
        data = text_safe(yaml_safe.load_json(files.read_text(file), "env.json"))
    except (CtxlensError, UnicodeDecodeError) as err:
        problems.append(f"env.json could not be read ({str(err)[:200]})")
        return None
    return _declared(schema.ENV.kind, data, problems)


def _line_count(path: Path) -> int:
    """Non-blank lines of the results file ``path`` (plain or archived, ``read_results``)."""
    return sum(1 for line in read_results(path)[0].splitlines() if line.strip())


def read_run(path: str | os.PathLike) -> Run:
    """Committed rows, config, env and the count of uncommitted result lines of one run."""
    path = Path(path)
    problems: list[str] = []
    rows = declared_rows(current(_named_rows(_text_safe_rows(read_rows(path)), problems)))
    written = sum(_line_count(f) for f in results_files(path))
    return Run(path, rows, _read_config(path, problems), _read_env(path, problems),
               uncommitted=max(0, written - len(rows)), problems=problems)


def _named_rows(rows: list[dict], problems: list[str]) -> list[dict]:
    """``rows`` whose ``model`` and ``experiment`` are names (text); the others are skipped and said
    in ``problems`` (a list or number as the model once ended ``card`` and ``report`` in a traceback)."""
    kept = [r for r in rows if isinstance(r, dict) and isinstance(r.get("model"), str)
            and isinstance(r.get("experiment"), str)]
    if len(kept) < len(rows):
        problems.append(f"{len(rows) - len(kept)} rows skipped: their model or experiment is not a name (text)")
    return kept


def read_runs(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Run]:
    return [read_run(p) for p in run_dirs(paths)]


def frame(runs: list[Run]) -> pd.DataFrame:
    """The rows of ``runs`` as one DataFrame with a ``run_dir`` column (missing cells: NaN/None)."""
    import pandas as pd

    records = [{**row, RUN_COLUMN: str(run.path)} for run in runs for row in run.rows]
    return pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=["model", "experiment", RUN_COLUMN])


def load(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Committed rows of one or more run directories (or folders of them) as a pandas DataFrame."""
    return frame(read_runs(paths))


def profile_costs(runs: list[Run]) -> dict[str, dict[str, dict[str, float]]]:
    """{model spec: {experiment: {"seconds": spent, "tokens": planned}}} of the parts the ``profile.json``
    of the ``runs``' profiles records as run (done or failed), summed over a part's runs (a top-up adds
    to its part). Values that are not finite non-negative numbers are left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for state_spec, state in _profile_states(runs):
        parts = state.get("parts")
        for part in parts if isinstance(parts, list) else ():
            if not isinstance(part, dict) or part.get("status") not in ("done", "failed"):
                continue
            seconds, tokens = _amount(part.get("spent_s")), _amount(part.get("tokens"))
            if seconds is None or tokens is None:
                continue
            cost = out.setdefault(state_spec, {}).setdefault(str(part.get("experiment")), {"seconds": 0.0, "tokens": 0})
            cost["seconds"] += float(seconds)
            cost["tokens"] += int(tokens)
    return out


def _amount(value: object) -> int | float | None:
    """``value`` when it is a finite non-negative number (a bool is not one), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if 0 <= value < float("inf") else None


def _profile_states(runs: list[Run]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(model spec, its state) of every readable ``profile.json`` the ``runs`` belong to (of a version this
    ctxlens reads: ``core.schema.check_version``)."""
    for root in dict.fromkeys(run.path.parent.parent for run in runs):
        record_file = root / "profile.json"
        try:
            record = (yaml_safe.load_json(files.read_bytes(record_file, yaml_safe.MAX_CHARS, "Profile record"),
                                          str(record_file)) if record_file.is_file() else None)
            schema.check_version(schema.PROFILE.kind, record, record_file)  # a newer record says nothing
        except (OSError, CtxlensError):
            continue
        models = record.get("models") if isinstance(record, dict) else None
        for spec, state in (models.items() if isinstance(models, dict) else ()):
            if isinstance(state, dict):
                yield str(spec), state


def profile_gaps(runs: list[Run]) -> dict[str, dict[str, str]]:
    """{model spec: {part: why it has no rows}} from the ``profile.json`` of the profiles the
    ``runs`` belong to (``DIR/<model>/<part>``: two levels up): the parts the model cannot do
    (``skipped``) and those the budget left out (``left_out``), in the record's words. An
    unreadable or foreign record says nothing (the card then says only that rows are missing)."""
    out: dict[str, dict[str, str]] = {}
    for spec, state in _profile_states(runs):
        gaps = out.setdefault(spec, {})
        for key, say in (("skipped", "not run: {}"), ("left_out", "left out by the budget ({}); a larger "
                                                                 "--budget buys it")):
            why = state.get(key)
            if isinstance(why, dict):
                gaps.update({str(part): say.format(text_safe(str(reason))[:400]) for part, reason in why.items()})
    return out


SETUP_KEYS = ("weights", "tokenizer", "dtype", "device", "attention", "transformers", "torch")  # schema.PROVENANCE


def part_setups(runs: list[Run]) -> dict[str, dict[str, dict[str, str]]]:
    """{model spec: {experiment: {what: value}}}: what each part's rows were measured with (issue 45), for
    the card to say per line when parts differ. From each run: the weights' digest its ``config.yaml``
    records at load (``model_info``'s ``weights``; else the ``fingerprints`` entry of every byte,
    ``full-...``: an older ctxlens's sampled one cannot be compared with any other), and the device,
    transformers and torch of its ``env.json``; a profile's part record (``provenance``: tokenizer,
    dtype, attention too) overrides those of its experiment. A device is compared by kind (``cuda:0``
    is ``cuda``; none named: the one the run chose, cuda where it was available). Two runs of one
    experiment that differ give both values, joined by " + "; what no file records is left out."""
    seen: dict[str, dict[str, dict[str, set[str]]]] = {}

    def note(spec: str, experiment: str, setup: dict) -> None:
        part = seen.setdefault(spec, {}).setdefault(experiment, {})
        for key, value in setup.items():
            if isinstance(value, str) and value and key in SETUP_KEYS:
                part.setdefault(key, set()).add(value.split(":")[0] if key == "device" else value)

    for run in runs:
        config, env = run.config or {}, run.env or {}
        packages = env.get("packages")
        packages = packages if isinstance(packages, dict) else {}
        for spec in config.get("models") or []:
            info = (config.get("model_info") or {}).get(spec) or {}
            digest = (info.get("weights") or {}).get("digest") if isinstance(info, dict) else None
            printed = (config.get("fingerprints") or {}).get(spec)
            weights = digest or (printed if isinstance(printed, str) and printed.startswith("full-") else None)
            device = env.get("device") or ("cuda" if env.get("cuda_available") is True else "cpu" if env else None)
            note(str(spec), str(config.get("experiment")), {"weights": weights, "device": device,
                                                            "transformers": packages.get("transformers"),
                                                            "torch": packages.get("torch")})
    for spec, state in _profile_states(runs):
        recorded_parts = state.get("parts")
        for part in recorded_parts if isinstance(recorded_parts, list) else ():
            if isinstance(part, dict) and isinstance(part.get("provenance"), dict):
                recorded = {k: v for k, v in part["provenance"].items() if isinstance(v, str) and v}
                seen.setdefault(spec, {}).setdefault(str(part.get("experiment")), {}).update(
                    {k: set() for k in recorded})
                note(spec, str(part.get("experiment")), recorded)
    return {spec: {exp: {k: " + ".join(sorted(v)) for k, v in setup.items() if v} for exp, setup in parts.items()}
            for spec, parts in seen.items()}
