"""What a card line's rows were measured with, said on the line when a model's parts differ (issue 45).

A profile resumed on another machine, or after ``--redo`` with other options, holds parts measured with
other weights, tokenizer, dtype, device, attention or library versions (``ctxlens.results.part_setups``
reads them from each part's records). When every part of a model agrees, the card says nothing more (its
weights line names the one setup). When they differ, each line that reads a part names, in its
uncertainty column, what its own parts were measured with for every setting that differs, and the
weights line's verdict names the settings that differ, so no line pools two setups silently.
"""

from __future__ import annotations

from dataclasses import replace

from ctxlens.findings.line import Line

SHOWN = ("weights", "tokenizer", "dtype", "device", "attention", "transformers", "torch")


def differing(setups: dict[str, dict[str, str]]) -> list[str]:
    """The settings (``SHOWN``) whose recorded values differ between ``setups`` ({part: {setting: value}});
    a part that records no value of a setting says nothing of it."""
    return [k for k in SHOWN if len({s[k] for s in setups.values() if s.get(k)}) > 1]


def short_digest(value: str) -> str:
    """A digest as a card shows it (``sha256:<64 hex>`` -> ``sha256:<first 16 hex>``, enough to tell files apart;
    ``fingerprint:`` alike); any other value as it is."""
    kind, _, digest = value.partition(":")
    return f"{kind}:{digest[:16]}" if kind in ("sha256", "fingerprint") and len(digest) > 16 else value


def _values(setups: dict[str, dict[str, str]], parts: list[str], key: str) -> str:
    """The values of ``key`` in ``parts`` (each value of a joined pair once), as a card shows them."""
    found = sorted({v for p in parts for v in setups[p].get(key, "").split(" + ") if v})
    return " + ".join(short_digest(v) for v in found) if found else "not recorded"


def measured_with(line: Line, reads: tuple[str, ...], setups: dict[str, dict[str, str]]) -> Line:
    """``line`` naming what its parts were measured with, for each setting that differs between the
    parts of ``setups`` (unchanged when none does, or the line reads no measured part); the weights line
    names the settings that differ instead."""
    keys = differing(setups)
    if not keys:
        return line
    if line.key == "weights":
        every = "; ".join(f"{k} {_values(setups, list(setups), k)}" for k in keys)
        return replace(line, verdict=f"{line.verdict}; the parts differ in {', '.join(keys)} ({every}): each line "
                                     "names what its parts were measured with",
                       numbers={**line.numbers, "differing": keys})
    mine = [p for p in reads if p in setups]
    if not mine:
        return line
    said = ", ".join(f"{k} {_values(setups, mine, k)}" for k in keys)
    return replace(line, uncertainty=f"{line.uncertainty}; measured with {said}" if line.uncertainty
                   else f"measured with {said}",
                   numbers={**line.numbers, "measured_with": {k: _values(setups, mine, k) for k in keys}})
