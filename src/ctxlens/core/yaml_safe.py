"""YAML read with the safe loader and no aliases.

Anchors and aliases let a few hundred bytes expand to gigabytes ("billion laughs"): a 399-byte
config once cost 273 s and 2.2 GB. ctxlens configs never need them, so an alias is refused at
the first one, before anything is expanded; the error echoes at most ``ECHO`` characters.
"""

from __future__ import annotations

import yaml

from ctxlens.core.errors import CtxlensError


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in ctxlens YAML",
                                              event.start_mark)
        return super().compose_node(parent, index)


def load(text: str, where: str):
    """Parse ``text`` (from ``where``, named in errors); a syntax error or alias is one sentence."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CtxlensError(f"{where} is not valid YAML for ctxlens ({first[:200]}); fix it or remove it.") from None
