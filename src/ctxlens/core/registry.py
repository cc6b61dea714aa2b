"""One generic registry: named entries of one kind, registered once, looked up with a suggestion.

Every table of named things in ctxlens (experiments, tasks, plotters, zoo builders, model
families, model resolvers, papers) is a ``Registry``. An unknown name raises ``CtxlensError``
naming the kind, the closest registered name ("Did you mean ...?") and the full list.

    EXPERIMENTS: Registry[Experiment] = Registry("experiment")
    EXPERIMENTS.add("suffix-ppl", experiment)      # or @EXPERIMENTS.register("suffix-ppl")
    EXPERIMENTS["suffix-ppl"]                     # -> the entry, or a one-sentence error

A registry whose entries live in the modules of one package finds them there: ``load_package``
imports every module of the package but its declared helpers (``discover``, with ``pkgutil``: no
module is listed by hand) and checks that each registered what it should, so a new module that
forgot to register is one sentence naming it, not an entry silently missing.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Generic, TypeVar

from ctxlens.core.errors import CtxlensError, unknown

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> entry for one kind of thing; ``load`` (optional) imports the modules that register."""

    def __init__(self, kind: str, load: Callable[[], None] | None = None):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._load = load
        self._loaded = load is None

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of ``add``."""
        return lambda entry: self.add(name, entry)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._loaded = True  # first: lookups made while loading must not load again
            assert self._load is not None
            try:
                self._load()
            except BaseException:
                self._loaded = False  # the next lookup tries again, and says the same
                raise

    def load_package(self, package: str, helpers: Collection[str], origin: Callable[[T], str],
                     most: int | None = None, fix: str = "") -> None:
        """Import every module of ``package`` but ``helpers`` (``discover``); each must register
        at least one entry, at most ``most``. ``origin(entry)`` is the module an entry comes from;
        a module out of bounds raises one sentence naming it, ending in ``fix``."""
        modules = discover(package, helpers)
        for name in modules:
            importlib.import_module(name)
        counts = Counter(origin(entry) for entry in self._entries.values())
        for name in modules:
            if not counts[name]:
                raise CtxlensError(f"Module {name} registers no {self.kind}; {fix or 'register one in it'}.")
            if most is not None and counts[name] > most:
                raise CtxlensError(f"Module {name} registers {counts[name]} {self.kind}s, more than {most}; "
                                   f"give each its own module.")

    def __getitem__(self, name: str) -> T:
        self._ensure_loaded()
        if name not in self._entries:
            raise unknown(self.kind, name, self._entries)
        return self._entries[name]

    def get(self, name: str, default: T | None = None) -> T | None:
        self._ensure_loaded()
        return self._entries.get(name, default)

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._ensure_loaded()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._entries)

    def items(self) -> list[tuple[str, T]]:
        self._ensure_loaded()
        return list(self._entries.items())

    def names(self) -> list[str]:
        return list(self)

    def as_dict(self) -> dict[str, T]:
        self._ensure_loaded()
        return dict(self._entries)


def discover(package: str, helpers: Collection[str] = ()) -> list[str]:
    """Dotted names of the modules of ``package`` (found on disk, in name order) but ``helpers``."""
    path = importlib.import_module(package).__path__
    return [f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if m.name not in helpers]
