"""One generic registry: named entries of one kind, registered once, looked up with a suggestion.

Every table of named things in ctxlens (experiments, tasks, plotters, zoo builders, model
families, model resolvers, papers) is a ``Registry``. An unknown name raises ``CtxlensError``
naming the kind, the closest registered name ("Did you mean ...?") and the full list.

    EXPERIMENTS: Registry[Experiment] = Registry("experiment")
    EXPERIMENTS.add("suffix-ppl", experiment)      # or @EXPERIMENTS.register("suffix-ppl")
    EXPERIMENTS["suffix-ppl"]                     # -> the entry, or a one-sentence error
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ctxlens.core.errors import unknown

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
            self._loaded = True
            assert self._load is not None
            self._load()

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
