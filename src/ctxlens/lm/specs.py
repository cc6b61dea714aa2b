"""Model specs -> where the files are: ``PREFIX:NAME`` resolvers, GGUF files, directories, hub ids.

Torch-free, so that reading a model's tokenizer files (``ctxlens.tasks.tokenizer``) costs no
torch or transformers import: only a GGUF's first conversion (``ctxlens.lm.gguf``) imports them.
Prefixes such as ``zoo:`` and ``ref:`` resolve through functions that installed packages declare
as entry points of the group ``ctxlens.model_prefixes`` (ctxlens's own ``pyproject.toml`` declares
those two, in ``ctxlens.zoo``), loaded on the first lookup of a prefix: importing ``lm`` imports no
zoo module, no caller has to import the zoo first, and ``lm`` names nothing above it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ctxlens.lm.gguf as gguf
from ctxlens.core.errors import CtxlensError, suggest
from ctxlens.core.registry import Registry


@dataclass(frozen=True)
class Resolved:
    """A model spec resolved: what a resolver gives for ``PREFIX:NAME`` (the directory ``from_pretrained``
    takes, the context length the model was trained at when its source records it, e.g. the zoo's
    recipe), and what ``resolved`` adds: ``origin``, the prefix that resolved it ("zoo", "ref"; ""
    otherwise), ``spec`` as the user gave it, ``kind`` ("dir", "gguf", "hub", or the prefix) and
    ``digest``, the weights' digest where resolving learnt it (a GGUF file's ``sha256:...``), else None.

    A spec is resolved once, at the top (``ctxlens profile``, ``ctxlens run``), and this object travels
    down: ``read_info``, ``load`` and the runner take it in place of the spec, and the ``LM`` keeps it."""

    path: str
    train_length: int | None = None
    origin: str = ""
    spec: str = ""
    kind: str = ""
    digest: str | None = None

    @property
    def name(self) -> str:
        """The spec as given (for messages and row keys), else the path."""
        return self.spec or self.path


Resolver = Callable[[str], Resolved]
ENTRY_POINTS = "ctxlens.model_prefixes"  # group of the installed packages' prefix resolvers (NAME -> Resolved)


def _register_installed() -> None:
    """Register each installed package's prefix resolvers (``ENTRY_POINTS``), each loaded now, not
    when ``lm`` is imported; a prefix registered by hand before the first lookup stays."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        if point.name not in RESOLVERS:
            RESOLVERS.add(point.name, point.load())


RESOLVERS: Registry[Resolver] = Registry("model prefix", load=_register_installed)  # "zoo" -> resolver of "zoo:NAME"
_PREFIX = re.compile(r"([a-z][a-z0-9_-]*):(?![/\\])(.+)")  # zoo:rope, not C:/dir


def resolved(spec: str) -> Resolved:
    """Turn a model spec into what ``from_pretrained`` takes (a directory or a hub id).

    ``PREFIX:NAME`` goes to the resolver registered for PREFIX (``ENTRY_POINTS``: ``zoo:`` and
    ``ref:``, a reference model shipped in a PyPI package); a GGUF file becomes its converted
    directory (``ctxlens.lm.gguf``).
    """
    path = Path(spec).expanduser()
    match = _PREFIX.fullmatch(spec)
    if match and (match[1] in RESOLVERS or not path.exists()):
        prefix, name = match.groups()
        if prefix not in RESOLVERS:
            raise _unknown_prefix(prefix, spec)
        return dataclasses.replace(RESOLVERS[prefix](name), origin=prefix, spec=spec, kind=prefix)
    if path.is_file():
        directory = gguf.converted(path, spec)  # named by the file's sha256 (``gguf_cache.cache_dir``)
        return Resolved(str(directory), spec=spec, kind="gguf", digest=f"sha256:{directory.name}")
    if path.exists():
        if not (path / "config.json").is_file():
            raise CtxlensError(f"Model directory '{spec}' has no config.json; point --model at a directory saved "
                               "with save_pretrained.")
        return Resolved(str(path), spec=spec, kind="dir")
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or spec.endswith(".gguf"):
        raise CtxlensError(f"Model path '{spec}' does not exist; check the path or give a hub id like 'org/name'.")
    return Resolved(spec, spec=spec, kind="hub")


def as_resolved(spec: str | Resolved) -> Resolved:
    """``spec`` when it is resolved already (it travels down from where it was), else ``resolved(spec)``."""
    return spec if isinstance(spec, Resolved) else resolved(spec)


def _unknown_prefix(prefix: str, spec: str) -> CtxlensError:
    """One sentence: the prefix, the closest registered one, and what is registered."""
    known = [f"{p}:" for p in RESOLVERS]
    close = suggest(f"{prefix}:", known).strip().replace("Did you mean", "did you mean")
    registered = ", ".join(known) or "none"
    fix = close or "use a registered prefix, a hub id or a path"
    return CtxlensError(f"Unknown model prefix '{prefix}:' in '{spec}'; {fix} (registered prefixes: {registered}).")


def resolve(spec: str) -> str:
    """The directory or hub id ``from_pretrained`` takes for ``spec`` (see ``resolved``)."""
    return resolved(spec).path
