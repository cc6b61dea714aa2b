"""Scoring of RULER-style answers, and the summaries read off scored rows.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4) scores RULER
by matching predicted text; RULER's scorer (``scripts/eval/evaluate.py``,
``scripts/eval/synthetic/constants.py``) strips the prediction, turns control characters into
newlines, and counts a reference as found when it occurs in the prediction, ignoring case:

* ``all`` (niah, vt, cwe, fwe): the fraction of references found;
* ``part`` (qa): 1 when any reference is found.

Scores are percentages, as in RULER's tables. ``effective_length`` is RULER's effective context
length (largest length whose mean score, and every shorter one's, reaches the threshold; 85.6 is
Llama-2-7B at 4K); ``optimal_length`` is the visible context with the best mean accuracy (seed
001, "Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.3). Pure Python: the
report can use these without torch.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from ctxlens.core.errors import CtxlensError, unknown

_CONTROL = re.compile(r"[\x00-\x1f]")
THRESHOLD = 85.6


def postprocess(prediction: str) -> str:
    """RULER's clean-up: strip, control characters to newlines, strip again."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


def string_match_all(prediction: str, references: Sequence[str]) -> float:
    """Fraction of ``references`` found in ``prediction`` (case-insensitive substring)."""
    if not references:
        raise CtxlensError("A sample has no references to score against; regenerate the dataset.")
    pred = prediction.lower()
    return sum(r.lower() in pred for r in references) / len(references)


def string_match_part(prediction: str, references: Sequence[str]) -> float:
    """1.0 when any of ``references`` is found in ``prediction`` (case-insensitive), else 0.0."""
    if not references:
        raise CtxlensError("A sample has no references to score against; regenerate the dataset.")
    pred = prediction.lower()
    return float(any(r.lower() in pred for r in references))


METRICS = {"all": string_match_all, "part": string_match_part}


def score(prediction: str, references: Sequence[str], metric: str) -> float:
    """Score in percent of one generated text (post-processed as RULER does)."""
    if metric not in METRICS:
        raise unknown("metric", metric, METRICS)
    return 100.0 * METRICS[metric](postprocess(prediction), references)


def mean_by(rows: Iterable[dict], keys: Sequence[str], value: str = "score") -> dict[tuple, float]:
    """Mean of ``value`` per combination of ``keys`` (rows without a value are skipped)."""
    sums: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r.get(value) is not None:
            sums[tuple(r.get(k) for k in keys)].append(float(r[value]))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def effective_length(rows: Iterable[dict], threshold: float = THRESHOLD, by: Sequence[str] = ("model",)) -> dict:
    """Per group: the largest length up to which every length's mean score reaches ``threshold``.

    The mean at a length is taken over its tasks' means (each task weighs the same, as in RULER).
    A group whose shortest length already misses the threshold gets None.
    """
    per_task = mean_by(rows, [*by, "length", "task"])
    per_length: dict[tuple, list[float]] = defaultdict(list)
    for key, v in per_task.items():
        per_length[key[:-1]].append(v)
    groups: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
    for key, v in per_length.items():
        groups[key[:-1]].append((key[-1], sum(v) / len(v)))
    out = {}
    for group, curve in groups.items():
        best = None
        for length, v in sorted(curve):
            if v < threshold:
                break
            best = length
        out[group] = best
    return out


def optimal_length(rows: Iterable[dict], x: str = "visible", by: Sequence[str] = ("model", "task")) -> dict:
    """Per group: the value of ``x`` with the highest mean score (the smallest on ties)."""
    means = mean_by(rows, [*by, x])
    out: dict[tuple, tuple] = {}
    for key, v in sorted(means.items(), key=lambda kv: (kv[0][:-1], kv[0][-1])):
        group, at = key[:-1], key[-1]
        if group not in out or v > out[group][1]:
            out[group] = (at, v)
    return {g: at for g, (at, _) in out.items()}
