"""What a directory must be before ctxlens reads or writes it as a run (``check_ours``: empty, or some
run file of ours in it, none a link or special file, no results file without its commit log), its
``config.yaml`` read back (``read_config``), and a new run's configuration compared with the one it
holds (``check_config``), each refusal one sentence and nothing changed (``ctxlens.runner.store``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from ctxlens.core import files, schema, yaml_safe
from ctxlens.core.errors import CtxlensError

_UNSET = "<unset>"


def read_config(directory: str | os.PathLike) -> dict | None:
    """The run's ``config.yaml``, or None when there is none (read-only), checked against its declaration
    (``ctxlens.core.schema.CONFIG``; one without a version is version 1)."""
    path = Path(directory) / "config.yaml"
    files.refuse_link_or_special(path)
    if not path.exists():
        return None
    try:
        config = yaml_safe.load(files.read_text(path), str(path))
    except UnicodeDecodeError:
        config = None
    if not isinstance(config, dict):
        raise CtxlensError(f"{path} does not hold a run configuration; restore it, or start the run again in a "
                           "new --out directory.")
    return schema.validate(schema.CONFIG.kind, config, path)


_OURS = re.compile(r"(config\.yaml|env\.json|(results|units)(\.rank\d+)?\.jsonl|results(\.rank\d+)?\.jsonl\.gz"
                   r"|\.ctxlens-lock(\.rank\d+)?|\..+\.\d+\.tmp)")
_RUN_FILES = re.compile(r"(config\.yaml|(results|units)(\.rank\d+)?\.jsonl|results(\.rank\d+)?\.jsonl\.gz"
                        r"|env\.json)")
_RESULTS = re.compile(r"results(\.rank\d+)?\.jsonl(\.gz)?")


def check_ours(directory: str | os.PathLike) -> None:
    """Raise unless ``directory`` (if it exists) is empty or a ctxlens run: some run file of ours
    in it, none of them a link or special file, and no results file without its commit log.
    Reads names and file types only; changes nothing."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    names = [p.name for p in directory.iterdir()]
    for name in names:
        if _OURS.fullmatch(name):
            files.refuse_link_or_special(directory / name)
        elif name == "partial" and (directory / name).is_symlink():  # samples of units in flight (runner.partial)
            raise CtxlensError(f"{directory / name} is a symbolic link; ctxlens never reads or writes run files "
                               "through links, so remove it or use a new directory.")
    foreign = [n for n in names if not _OURS.fullmatch(n) and n != "partial"]
    if foreign and not any(_RUN_FILES.fullmatch(n) for n in names):
        raise CtxlensError(f"{directory} holds files but is not a ctxlens run directory; pass a new or empty "
                           "--out directory.")
    for name in names:
        if m := _RESULTS.fullmatch(name):
            units = f"units{m.group(1) or ''}.jsonl"
            if units not in names and (directory / name).stat().st_size > 0:
                raise CtxlensError(
                    f"{directory / name} has rows but its commit log {units} is missing, so ctxlens cannot tell "
                    f"committed rows from foreign ones and will not touch it; restore {units}, or move "
                    f"{name} away to start the run afresh."
                )


def check_config(directory: str | os.PathLike, config: dict, *, compare_keys: Iterable[str] | None = None) -> None:
    """Raise if ``directory`` holds a run whose ``config.yaml`` differs from ``config`` in ``compare_keys``
    (all keys but the version when None); touches nothing, so a run can check before it writes anything."""
    old = read_config(directory)
    if old is None:
        return
    new = yaml.safe_load(yaml.safe_dump(config, sort_keys=False))  # compare as stored, so tuples equal lists
    keys = (list(compare_keys) if compare_keys is not None
            else [k for k in dict.fromkeys([*old, *new]) if k != schema.VERSION_KEY])
    diffs = [f"{k}: {old.get(k, _UNSET)} -> {new.get(k, _UNSET)}" for k in keys
             if old.get(k, _UNSET) != new.get(k, _UNSET)]
    if diffs:
        raise CtxlensError(
            f"{directory} already holds a run with a different configuration ({'; '.join(diffs)}); "
            "use a new --out directory or the same options."
        )
