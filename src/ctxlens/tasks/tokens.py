"""Incremental token counting: a prompt is a list of text pieces, each encoded once and cached.

RULER (the long-sequence paper's benchmark, "How Well Can a Long Sequence Model Model Long Sequences?",
Section 4) fits a prompt to a length by re-tokenising the whole text again and again; samples
then fall short of the length by up to a third. ctxlens builds a prompt from *pieces* (a haystack
line, a sentence, a needle, the template text around them) and counts tokens by summing the
cached token counts of the pieces, so fitting costs a few dictionary look-ups per piece.

The pieces' token ids concatenated are the prompt's ids only when the tokenizer never merges
across a piece boundary. Pieces are therefore cut where tokenizers split anyway (``normalize``:
a boundary sits right after a newline or right before a space), and the first sample of every
batch is checked against a full encoding of its text (``Encoder.check``); a tokenizer that fails
the check is used in ``full`` mode, where every count is an exact full encoding.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase  # checked as Any (pyproject)

    from ctxlens.tasks.tokenizer import TaskTokenizer

MAX_CACHE = 400_000  # pieces kept per encoder before the cache is cleared


def normalize(pieces: list[str], split_runs: bool = False) -> list[str]:
    """Move boundary whitespace so that no cut splits what tokenizers keep together.

    A piece's trailing spaces go to the start of the piece after it (a space starts a word);
    a piece's leading newlines go to the end of the piece before it unless that piece ends in a
    letter or digit (several tokenizers glue newlines to punctuation, ``".\n"``). The
    concatenation is unchanged and no piece is removed.

    ``split_runs``: a run of two or more whitespace characters that ends a piece gives its last
    character to the next piece. GPT-2-style pre-tokenizers (``\\s+(?!\\S)``) split such a run
    before its last character when a word follows (``".\n\nDocument"`` is ``"\n"``, ``"\n"``),
    others keep it whole (``"\n\n"``); ``Encoder.check`` finds which one a tokenizer does.
    """
    out = list(pieces)
    for i in range(1, len(out)):
        prev, cur = out[i - 1], out[i]
        if cur[:1] != "\n" and prev[-1:] != " " and not (split_runs and prev[-2:].isspace()):
            continue  # already a clean boundary (the common case)
        lead = len(cur) - len(cur.lstrip("\n"))
        if lead and not prev[-1:].isalnum():
            prev, cur = prev + cur[:lead], cur[lead:]
        trail = len(prev) - len(prev.rstrip(" "))
        if trail and not prev.endswith("\n"):
            prev, cur = prev[: len(prev) - trail], prev[len(prev) - trail:] + cur
        if split_runs and prev[-2:].isspace() and len(prev) > 2 and cur[:1] and not cur[:1].isspace():
            prev, cur = prev[:-1], prev[-1] + cur
        out[i - 1], out[i] = prev, cur
    return out


def fingerprint(tokenizer: TaskTokenizer) -> str:
    """A short hash of everything that decides how ``tokenizer`` turns text into ids and frames a chat
    prompt; the same for one tokenizer however it was loaded (transformers or ``tasks.tokenizer``)."""
    parts = [str(getattr(tokenizer, "chat_template", None) or "")]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        parts.append(backend.to_str())
    else:
        parts.append(json.dumps(sorted(tokenizer.get_vocab().items())))
    parts.append(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True, default=str))
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


class Encoder:
    """Cached piece encodings of one tokenizer, plus the special ids a plain prompt gets.

    ``mode`` is ``"pieces"`` (ids = concatenated piece ids) or ``"full"`` (ids = one encoding
    of the whole text); ``check`` switches to ``"full"`` when the two disagree.
    """

    def __init__(self, tokenizer: TaskTokenizer | None) -> None:
        if tokenizer is None:
            raise CtxlensError("The tasks need a tokenizer; load a model that ships one or pass --tokenizer.")
        self.tokenizer = tokenizer
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._len: dict[str, int] = {}  # token count of every cached piece
        self.mode = "pieces"
        self.split_runs = False  # how pieces end in whitespace runs (``normalize``), found by ``check``
        self._fingerprint: str | None = None
        self.prefix, self.suffix = self._specials()

    @property
    def fingerprint(self) -> str:
        """``fingerprint(tokenizer)``, computed when first asked for (a batch made without the cache never is)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.tokenizer)
        return self._fingerprint

    # -- raw encodings -----------------------------------------------------------------
    def _encode_many(self, texts: list[str]) -> list[list[int]]:
        if self._backend is not None:
            return [e.ids for e in self._backend.encode_batch(texts, add_special_tokens=False)]
        return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]

    def encode(self, text: str, specials: bool = False) -> list[int]:
        """One full encoding of ``text`` (with the tokenizer's BOS/EOS when ``specials``)."""
        ids = self._encode_many([text])[0]
        return [*self.prefix, *ids, *self.suffix] if specials else ids

    def _specials(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ids a plain encoding adds before and after the text (e.g. a BOS)."""
        bare = self.tokenizer.encode("x", add_special_tokens=False)
        full = self.tokenizer.encode("x", add_special_tokens=True)
        for i in range(len(full) - len(bare) + 1):
            if full[i:i + len(bare)] == bare:
                return tuple(full[:i]), tuple(full[i + len(bare):])
        return (), ()

    # -- pieces ------------------------------------------------------------------------
    def normalize(self, pieces: list[str]) -> list[str]:
        """``pieces`` with boundaries where this tokenizer splits (``normalize``)."""
        return normalize(pieces, self.split_runs)

    def warm(self, pieces: Sequence[str]) -> None:
        """Encode every piece not yet cached, in one batch."""
        missing = list(dict.fromkeys(p for p in pieces if p not in self._cache))
        if not missing:
            return
        if len(self._cache) + len(missing) > MAX_CACHE:
            self._cache.clear()
            self._len.clear()
            missing = list(dict.fromkeys(pieces))
        for text, ids in zip(missing, self._encode_many(missing)):
            self._cache[text] = tuple(ids)
            self._len[text] = len(ids)

    def piece(self, text: str) -> tuple[int, ...]:
        ids = self._cache.get(text)
        if ids is None:
            self.warm([text])
            ids = self._cache[text]
        return ids

    def cost(self, text: str) -> int:
        """Tokens of one piece (cached)."""
        n = self._len.get(text)
        return len(self.piece(text)) if n is None else n

    def costs(self, pieces: Sequence[str]) -> list[int]:
        try:
            return list(map(self._len.__getitem__, pieces))
        except KeyError:
            self.warm(pieces)
            return list(map(self._len.__getitem__, pieces))

    # -- whole prompts -----------------------------------------------------------------
    def count(self, pieces: Sequence[str], specials: bool) -> int:
        """Exact token count of the prompt made of ``pieces`` in the current mode."""
        if self.mode == "full":
            return len(self.encode("".join(pieces), specials))
        extra = len(self.prefix) + len(self.suffix) if specials else 0
        try:
            return sum(map(self._len.__getitem__, pieces)) + extra
        except KeyError:
            self.warm(pieces)
            return sum(map(self._len.__getitem__, pieces)) + extra

    def ids(self, pieces: Sequence[str], specials: bool) -> list[int]:
        """The prompt's token ids in the current mode."""
        if self.mode == "full":
            return self.encode("".join(pieces), specials)
        self.warm(pieces)
        body = itertools.chain.from_iterable(map(self._cache.__getitem__, pieces))
        return [*self.prefix, *body, *self.suffix] if specials else list(body)

    def starts(self, pieces: Sequence[str], specials: bool) -> list[int]:
        """Token offset at which each piece starts, plus the total at the end (len(pieces) + 1)."""
        head = len(self.prefix) if specials else 0
        if self.mode == "pieces":
            return list(itertools.accumulate(self.costs(pieces), initial=head))
        text = "".join(pieces)
        token_starts = self._char_starts(text)
        out, char = [], 0
        for p in [*pieces, ""]:
            out.append(head + bisect.bisect_left(token_starts, char))
            char += len(p)
        return out

    def _char_starts(self, text: str) -> list[int]:
        if self._backend is not None:
            return [a for a, _ in self._backend.encode(text, add_special_tokens=False).offsets]
        tokenizer: PreTrainedTokenizerBase = self.tokenizer  # transformers': a FileTokenizer has a backend
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [a for a, _ in enc["offset_mapping"]]

    def check(self, pieces: Sequence[str], specials: bool) -> bool:
        """True when piecewise ids equal a full encoding. Otherwise try splitting whitespace runs
        at boundaries (``normalize``), else switch to ``full`` mode; either way the caller must
        build the prompt again."""
        if self.mode == "full":
            return True
        full = self.encode("".join(pieces), specials)
        if self.ids(pieces, specials) == full:
            return True
        if not self.split_runs:
            split = normalize(list(pieces), True)
            if self.ids(split, specials) == full:
                self.split_runs = True
                return False
        self.mode = "full"
        return False
