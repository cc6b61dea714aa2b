"""YAML and JSON read with bounds: the safe loader, no aliases, a nesting depth and a size.

Anchors and aliases let a few hundred bytes expand to gigabytes ("billion laughs"): a 399-byte
config once cost 273 s and 2.2 GB. ctxlens configs never need them, so an alias is refused at
the first one, before anything is expanded; the error echoes at most ``ECHO`` characters.
Nesting deeper than ``MAX_DEPTH`` (a few hundred brackets end Python's recursion in the parser
or in whatever walks the result) and text longer than the caller's ``limit`` are refused too, so
every foreign YAML or JSON file (``--config``, ``config.yaml``, ``env.json``, ``--findings``,
``--rope-scaling``, ``tokenizer.json``) is one sentence when it is hostile (issue 32).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from ctxlens.core.errors import CtxlensError

MAX_DEPTH = 64  # no ctxlens file nests deeper; tokenizer.json's deepest is about 8
MAX_CHARS = 64 * 2**20  # default size bound of a parsed text


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in ctxlens YAML",
                                              event.start_mark)
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                              self.peek_event().start_mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth


def _too_big(text: str | bytes, where: str, limit: int) -> None:
    if len(text) > limit:
        raise CtxlensError(f"{where} is {len(text):,} characters long, more than the {limit:,} ctxlens reads; "
                           "fix it or remove it.")


def load(text: str, where: str, limit: int = MAX_CHARS) -> Any:
    """Parse ``text`` (from ``where``, named in errors); a syntax error, alias, nesting deeper than
    ``MAX_DEPTH`` or text longer than ``limit`` is one sentence."""
    _too_big(text, where, limit)
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CtxlensError(f"{where} is not valid YAML for ctxlens ({first[:200]}); fix it or remove it.") from None
    except RecursionError:
        raise _deep(where) from None
    except ValueError as err:  # an integer of more digits than Python converts (4,300): no ctxlens value has them
        raise CtxlensError(f"{where} holds a number too long to read ({str(err)[:80]}); fix it or remove "
                           "it.") from None


def _deep(where: str) -> CtxlensError:
    return CtxlensError(f"{where} is nested deeper than {MAX_DEPTH} levels, more than any ctxlens file; "
                        "fix it or remove it.")


def depth(value: object) -> int:
    """How deeply ``value`` (parsed JSON or YAML) nests lists and dicts, walked without recursion;
    stops counting past ``MAX_DEPTH``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def load_json(text: str | bytes, where: str, limit: int = MAX_CHARS) -> Any:
    """Parse JSON ``text`` (from ``where``) with the bounds of ``load``; NaN and Infinity are read
    as Python reads them (callers that need finite numbers check them)."""
    _too_big(text, where, limit)
    try:
        value = json.loads(text)
    except RecursionError:
        raise _deep(where) from None
    except (ValueError, UnicodeDecodeError) as err:
        if "integer string conversion" in str(err):  # an integer of more than 4,300 digits
            raise CtxlensError(f"{where} holds a number too long to read; fix it or remove it.") from None
        raise CtxlensError(f"{where} is not valid JSON ({str(err)[:200]}); fix it or remove it.") from None
    if depth(value) > MAX_DEPTH:
        raise _deep(where)
    return value
