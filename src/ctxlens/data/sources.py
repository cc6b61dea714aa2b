"""Text sources for the experiments, and the fixed-length token windows cut from them.

A source is named by one string (``spec``):

* a local ``.txt`` file (one document per file), ``.jsonl`` file (one JSON object per line,
  document = ``obj[text_field]``), ``.parquet`` file (column ``text_field``), or a folder
  holding such files (searched recursively, in sorted path order; other files are ignored);
* ``hf:DATASET_ID`` or ``hf:DATASET_ID:CONFIG`` -- a ``datasets`` dataset, streamed;
* ``random`` or ``random:SEED`` -- no text at all: uniform random token ids;
* ``builtin``, ``builtin:SPLIT`` or ``builtin:SPLIT:SEED`` -- the built-in corpus
  (``ctxlens.data.corpus``): an endless, deterministic stream of its documents; SPLIT is
  train, validation (the default) or test, SEED an integer (default 0).

Documents are always streamed in a deterministic order, one at a time, and
``token_windows`` tokenizes only as many of them as it needs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.data import corpus

__all__ = [
    "TEXT_EXTENSIONS",
    "TextSource",
    "FileSource",
    "HubSource",
    "RandomSource",
    "BuiltinSource",
    "open_source",
    "token_windows",
]

TEXT_EXTENSIONS = (".txt", ".jsonl", ".parquet")
_SOURCE_KINDS = (".txt, .jsonl or .parquet files, a folder of them, hf:DATASET_ID, builtin "
                 "or random")
_PARQUET_BATCH_ROWS = 1024


# --------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------


class TextSource:
    """Where experiment text comes from.

    ``spec`` is the string the source was opened with; ``is_text`` is False only for the
    token-level ``random`` source, which has no documents.
    """

    is_text: bool = True

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def documents(self) -> Iterator[str]:
        """Yield the non-empty documents, one at a time, always in the same order."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"


class FileSource(TextSource):
    """Local ``.txt`` / ``.jsonl`` / ``.parquet`` files, read lazily one file at a time."""

    def __init__(self, spec: str, paths: list[Path], text_field: str) -> None:
        super().__init__(spec)
        self.paths = paths
        self.text_field = text_field
        self.byte_budget: int | None = None  # read at most this much of a .txt file (None: all)
        self.cut = False  # set when a .txt file was read only in part

    def documents(self) -> Iterator[str]:
        self.cut = False
        for path in self.paths:
            if path.suffix.lower() == ".txt":
                text, self.cut = _read_txt(path, self.byte_budget)
                yield from _non_empty([text])
                if self.cut:
                    return  # the files after a cut one would come too early in the stream
            else:
                yield from _non_empty(_read_file(path, self.text_field))


class HubSource(TextSource):
    """A ``datasets`` dataset loaded with ``streaming=True`` (hub id or local directory)."""

    def __init__(self, spec: str, dataset: Iterable[dict[str, Any]], text_field: str) -> None:
        super().__init__(spec)
        self.dataset = dataset
        self.text_field = text_field

    def documents(self) -> Iterator[str]:
        where = f"Dataset '{self.spec}'"
        for row, example in enumerate(self.dataset):
            text = _field(example, self.text_field, where=f"{where} row {row}")
            if text is not None and text.strip():
                yield text


class RandomSource(TextSource):
    """Token-level random ids; ``seed`` is the seed from ``random:SEED``, or None."""

    is_text = False

    def __init__(self, spec: str, seed: int | None) -> None:
        super().__init__(spec)
        self.seed = seed

    def documents(self) -> Iterator[str]:
        raise CtxlensError(
            f"The '{self.spec}' source holds random token ids, not text documents; "
            "use a text file, folder, hf:DATASET_ID or builtin source for text-level analyses."
        )


class BuiltinSource(TextSource):
    """The built-in corpus (``ctxlens.data.corpus``): its endless document stream for one
    split and seed; every call to ``documents()`` starts again from the first document."""

    def __init__(self, spec: str, split: str, seed: int) -> None:
        super().__init__(spec)
        self.split = split
        self.seed = seed

    def documents(self) -> Iterator[str]:
        return corpus.documents(self.seed, None, split=self.split)


# --------------------------------------------------------------------------------------
# Opening a source from its spec
# --------------------------------------------------------------------------------------


def open_source(spec: str, *, text_field: str = "text", split: str = "train") -> TextSource:
    """Open the source named by ``spec`` (see the module docstring for the forms).

    Problems that can be seen up front (missing path, bad extension, empty folder, unknown
    dataset) raise ``CtxlensError`` here; problems inside documents surface while streaming.
    """
    spec = spec.strip()
    if not spec:
        raise CtxlensError(f"The text source is empty; name one of: {_SOURCE_KINDS}.")
    head, _, rest = spec.partition(":")
    if head == "random":
        return RandomSource(spec, _parse_seed(spec, rest) if rest else None)
    if head == "builtin":
        return _open_builtin(spec, rest)
    if head == "hf":
        return _open_hub(spec, rest, text_field=text_field, split=split)
    return FileSource(spec, _local_paths(spec), text_field)


def _parse_seed(spec: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CtxlensError(
            f"Random source '{spec}' has a seed '{text}' that is not an integer; "
            "write random or random:SEED, e.g. random:0."
        ) from None


def _open_builtin(spec: str, rest: str) -> BuiltinSource:
    """``builtin[:SPLIT[:SEED]]`` -> the corpus stream (default split validation, seed 0)."""
    split, _, seed_text = rest.partition(":")
    split = split or "validation"
    if split not in corpus.SPLITS:
        raise unknown("built-in corpus split", split, corpus.SPLITS)
    try:
        seed = int(seed_text) if seed_text else 0
    except ValueError:
        raise CtxlensError(
            f"Built-in source '{spec}' has a seed '{seed_text}' that is not an integer; "
            "write builtin:SPLIT:SEED, e.g. builtin:validation:0."
        ) from None
    return BuiltinSource(spec, split, seed)


def _local_paths(spec: str) -> list[Path]:
    """The files behind a local spec: the file itself, or a folder's text files, sorted."""
    path = Path(spec).expanduser()
    if not path.exists():
        raise CtxlensError(
            f"Text source '{spec}' does not exist; check the path, or use hf:DATASET_ID, "
            "builtin or random."
        )
    if path.is_dir():
        return _folder_files(spec, path)
    if path.suffix.lower() not in TEXT_EXTENSIONS:
        raise CtxlensError(
            f"Text source '{spec}' has an unsupported extension '{path.suffix}'; use .txt, "
            ".jsonl or .parquet files, a folder of them, or hf:DATASET_ID."
        )
    return [path]


def _folder_files(spec: str, folder: Path) -> list[Path]:
    files = sorted(
        (p for p in folder.rglob("*") if p.suffix.lower() in TEXT_EXTENSIONS and p.is_file()),
        key=lambda p: p.relative_to(folder).as_posix(),
    )
    if not files:
        raise CtxlensError(
            f"Folder '{spec}' holds no .txt, .jsonl or .parquet files; add some or point "
            "the text source at another folder."
        )
    return files


def _open_hub(spec: str, rest: str, *, text_field: str, split: str) -> HubSource:
    """``hf:DATASET_ID[:CONFIG]`` -> ``datasets.load_dataset(..., streaming=True)``."""
    dataset_id, config = _split_hub_spec(spec, rest)
    import datasets  # slow import: only when a hub source is used

    try:
        dataset = datasets.load_dataset(dataset_id, config, split=split, streaming=True)
    except (OSError, ValueError) as exc:  # not found / bad config / bad split / offline
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
        raise CtxlensError(
            f"Could not load dataset '{spec}' (split '{split}'): {reason}; check the dataset "
            "id, config and split, and that the dataset is reachable."
        ) from exc
    return HubSource(spec, dataset, text_field)


def _split_hub_spec(spec: str, rest: str) -> tuple[str, str | None]:
    """``DATASET_ID[:CONFIG]``; a local directory whose path holds ':' is kept whole."""
    if rest and Path(rest).expanduser().is_dir():
        return str(Path(rest).expanduser()), None
    dataset_id, _, config = rest.partition(":")
    if not dataset_id:
        raise CtxlensError(
            f"Text source '{spec}' names no dataset; write hf:DATASET_ID or "
            "hf:DATASET_ID:CONFIG, e.g. hf:wikitext:wikitext-103-raw-v1."
        )
    if Path(dataset_id).expanduser().is_dir():
        dataset_id = str(Path(dataset_id).expanduser())
    return dataset_id, config or None


# --------------------------------------------------------------------------------------
# Reading local files (one document at a time)
# --------------------------------------------------------------------------------------


def _read_file(path: Path, text_field: str) -> Iterator[str | None]:
    suffix = path.suffix.lower()
    if suffix == ".txt":
        return iter([_read_txt(path)[0]])
    if suffix == ".jsonl":
        return _read_jsonl(path, text_field)
    return _read_parquet(path, text_field)


def _read_txt(path: Path, budget: int | None = None) -> tuple[str, bool]:
    """The text of a .txt file and whether it was cut: with ``budget``, at most that many bytes,
    ending at the last newline within them (so a 2 GB file is not read whole for 4K tokens)."""
    with open(path, "rb") as f:
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
    with path.open(encoding="utf-8-sig") as lines:
        try:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    record = _parse_json_line(path, number, line)
                    yield _field(record, text_field, where=f"'{path}' line {number}")
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


def _field(record: dict[str, Any], text_field: str, *, where: str) -> str | None:
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


def _non_empty(texts: Iterable[str | None]) -> Iterator[str]:
    """Drop null, empty and whitespace-only documents."""
    return (text for text in texts if text is not None and text.strip())


# --------------------------------------------------------------------------------------
# Token windows
# --------------------------------------------------------------------------------------


def token_windows(
    source: TextSource,
    tokenizer: Any,
    length: int,
    n: int,
    *,
    seed: int = 0,
    vocab_size: int | None = None,
) -> torch.LongTensor:
    """``n`` windows of exactly ``length`` token ids: a LongTensor of shape [n, length].

    Text sources: the documents are tokenized in order (no special tokens) and joined with
    the tokenizer's eos id between documents (when it has one); the windows are the
    consecutive, non-overlapping ``length``-token slices of that stream. Only as many
    documents as needed are read. ``seed`` and ``vocab_size`` are not used.

    The ``random`` source: uniform ids in [0, vocab_size) from a ``torch.Generator`` seeded
    with the seed of ``random:SEED``, or with ``seed`` for plain ``random``; no tokenizer
    is needed.
    """
    _check_count("length", length)
    _check_count("n", n)
    if isinstance(source, RandomSource):
        _check_machine(n, length)
        return _random_windows(source, length, n, seed=seed, vocab_size=vocab_size)
    if tokenizer is None:
        raise CtxlensError(
            "The model has no tokenizer, so text sources cannot be used; save a tokenizer "
            "with the model or use the random source for token-level analyses."
        )
    _check_machine(n, length)
    ids = _token_stream(source, tokenizer, needed=n * length)  # [>= n * length]
    if ids.numel() < n * length:
        raise _not_enough_tokens(source, ids.numel(), length, n)
    return ids[: n * length].view(n, length).clone()  # [n, length], not sharing the tail


def _is_count(value: Any) -> bool:
    """True for a whole number >= 1 (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_count(name: str, value: Any) -> None:
    if not _is_count(value):
        raise CtxlensError(
            f"{name} must be a whole number of at least 1, got {value!r}; pass a positive {name}."
        )


def _random_windows(
    source: RandomSource, length: int, n: int, *, seed: int, vocab_size: int | None
) -> torch.LongTensor:
    if not _is_count(vocab_size):
        raise CtxlensError(
            f"The random source needs the model's vocabulary size, got vocab_size="
            f"{vocab_size!r}; pass vocab_size as a positive whole number."
        )
    generator = torch.Generator().manual_seed(source.seed if source.seed is not None else seed)
    return torch.randint(0, vocab_size, (n, length), generator=generator, dtype=torch.long)


BYTES_PER_TOKEN_READ = 64  # a .txt file is read 64 bytes per needed token at first (tokens average ~4)


def _check_machine(n: int, length: int) -> None:
    """Refuse, before any work, windows whose token ids alone would not fit in this machine's memory."""
    need = n * length * 8  # int64 ids
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > have // 4:
        raise CtxlensError(
            f"{n} windows of {length} tokens need {need / 2**30:.1f} GiB for their token ids alone, more than "
            f"this machine can give (memory {have / 2**30:.1f} GiB); use fewer or shorter windows."
        )


def _token_stream(source: TextSource, tokenizer: Any, *, needed: int) -> torch.LongTensor:
    """The eos-joined token ids of the first documents, stopping once ``needed`` exist.

    Returns a flat LongTensor of shape [total], total >= needed unless the source ran out.
    A ``FileSource`` reads .txt files only in part (``BYTES_PER_TOKEN_READ`` per needed token),
    widening the part until enough tokens come out or the whole file was read; the cut lies far
    past the last token used, so the ids kept are those of the whole file.
    """
    if not isinstance(source, FileSource):
        return _token_stream_once(source, tokenizer, needed=needed)
    source.byte_budget = needed * BYTES_PER_TOKEN_READ
    try:
        while True:
            ids = _token_stream_once(source, tokenizer, needed=needed)
            if not source.cut or ids.numel() >= 2 * needed:  # the cut is past twice what is used
                return ids
            source.byte_budget *= 4
    finally:
        source.byte_budget = None


def _token_stream_once(source: TextSource, tokenizer: Any, *, needed: int) -> torch.LongTensor:
    eos = getattr(tokenizer, "eos_token_id", None)
    chunks: list[torch.Tensor] = []
    total = 0
    for index, document in enumerate(source.documents()):
        if index > 0 and eos is not None:
            chunks.append(torch.tensor([eos], dtype=torch.long))
            total += 1
        ids = tokenizer.encode(document, add_special_tokens=False, verbose=False)
        chunks.append(torch.tensor(ids, dtype=torch.long))
        total += len(ids)
        if total >= needed:
            break
    return torch.cat(chunks) if chunks else torch.empty(0, dtype=torch.long)


def _not_enough_tokens(source: TextSource, total: int, length: int, n: int) -> CtxlensError:
    return CtxlensError(
        f"Text source '{source.spec}' holds only {total // length} windows of {length} tokens "
        f"({total} tokens in all) but {n} were requested; use a bigger source or a smaller "
        "n or length."
    )
