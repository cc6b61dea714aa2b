"""Reading local ``.txt``, ``.jsonl`` and ``.parquet`` files, one document at a time.

A ``.txt`` file is one document (``read_txt`` can read just its first bytes, cut at a
newline, so a huge file is not read whole for a few windows); a ``.jsonl`` file holds one JSON
object per line and a ``.parquet`` file one row per document, the text in field
``text_field``. Problems inside a file (not UTF-8, bad JSON, a missing or non-text field)
raise ``CtxlensError`` naming the file, line and fields. ``FileSource`` and ``HubSource``
(``ctxlens.data.sources``) read their documents through these functions.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxlens.core.errors import CtxlensError
from ctxlens.core.files import open_input, regular_input

_PARQUET_BATCH_ROWS = 1024


def read_file(path: Path, text_field: str) -> Iterator[str | None]:
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return iter([read_txt(path)[0]])
    if suffix == ".jsonl":
        return _read_jsonl(path, text_field)
    return _read_parquet(path, text_field)


def read_txt(path: Path, budget: int | None = None) -> tuple[str, bool]:
    """The text of a .txt file and whether it was cut: with ``budget``, at most that many bytes,
    ending at the last newline within them (so a 2 GB file is not read whole for 4K tokens)."""
    with open_input(path, "Text file") as f:
        data = f.read() if budget is None else f.read(budget + 1)
    cut = budget is not None and len(data) > budget
    if cut:
        data = data[:budget]
        data = data[: data.rfind(b"\n") + 1] or data
    try:
        if b"\x00" in data:
            raise UnicodeError("NUL byte")
        return data.decode("utf-8-sig", errors="strict" if not cut else "ignore"), cut
    except UnicodeError:
        raise CtxlensError(
            f"Text file '{path}' is binary or not UTF-8 text; convert it to UTF-8 or remove "
            "it from the source."
        ) from None


def _read_jsonl(path: Path, text_field: str) -> Iterator[str | None]:
    with io.TextIOWrapper(open_input(path, "JSONL file"), encoding="utf-8-sig") as lines:
        try:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    record = _parse_json_line(path, number, line)
                    yield record_text(record, text_field, where=f"'{path}' line {number}")
        except UnicodeDecodeError:
            raise CtxlensError(
                f"JSON lines file '{path}' is not UTF-8 text; convert it to UTF-8 or remove "
                "it from the source."
            ) from None


def _parse_json_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CtxlensError(
            f"'{path}' line {number} is not valid JSON ({exc.msg}); fix the line or remove it."
        ) from None
    if not isinstance(obj, dict):
        raise CtxlensError(
            f"'{path}' line {number} holds a JSON {type(obj).__name__}, not an object; write "
            "one JSON object per line."
        )
    return obj


def _read_parquet(path: Path, text_field: str) -> Iterator[str | None]:
    import pyarrow
    import pyarrow.parquet as pq

    regular_input(path, "Parquet file")
    try:
        parquet = pq.ParquetFile(path)
    except (pyarrow.ArrowException, OSError) as exc:
        raise CtxlensError(
            f"'{path}' is not a readable Parquet file ({exc}); rewrite it or remove it from "
            "the source."
        ) from None
    with parquet:
        names = parquet.schema_arrow.names
        if text_field not in names:
            raise _missing_field(f"'{path}'", text_field, names)
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=[text_field]):
            for row in batch.column(0).to_pylist():
                yield _check_text(row, text_field, where=f"'{path}'")


def record_text(record: dict[str, Any], text_field: str, *, where: str) -> str | None:
    """``record[text_field]`` as text (None when null), with errors that name the fields."""
    if text_field not in record:
        raise _missing_field(where, text_field, record.keys())
    return _check_text(record[text_field], text_field, where=where)


def _check_text(value: Any, text_field: str, *, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise CtxlensError(
        f"Field '{text_field}' in {where} holds a {type(value).__name__}, not text; pass "
        "text_field naming a text column."
    )


def _missing_field(where: str, text_field: str, names: Iterable[str]) -> CtxlensError:
    names = sorted(names)
    listed = ", ".join(f"'{n}'" for n in names) if names else "none"
    return CtxlensError(
        f"{where} has no field '{text_field}' (fields: {listed}); pass text_field naming "
        "the column that holds the text."
    )


def non_empty(texts: Iterable[str | None]) -> Iterator[str]:
    """Drop null, empty and whitespace-only documents."""
    return (text for text in texts if text is not None and text.strip())
