"""Running experiments: the crash-safe run directory."""

from ctxlens.runner.store import RunStore, read_rows

__all__ = ["RunStore", "read_rows"]
