"""Scoring of RULER-style answers, and the summaries read off scored rows.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4) scores RULER
by matching predicted text; RULER's scorer (``scripts/eval/evaluate.py``,
``scripts/eval/synthetic/constants.py``) strips the prediction, turns control characters into
newlines, and counts a reference as found when it occurs in the prediction, ignoring case:

* ``all`` (niah, vt, cwe, fwe): the fraction of references found;
* ``part`` (qa): 1 when any reference is found.

Scores are percentages, as in RULER's tables. Per length, ``length_means`` averages the task
means over the same task set at every length (every task the group ran); a task that did not fit
a length (a flagged row, no score) leaves that length's mean unknown and is named in ``missing``.
Two lengths are read off those means ("RULER: What's the Real Context Size of Your Long-Context
Language Models?", Table 3: the threshold 85.6 is Llama-2-7B's score at 4K):

* ``effective_length``: RULER's effective length, the largest length whose mean score exceeds
  the threshold (strictly; shorter lengths may fall below it);
* ``sustained_length``: ctxlens's stricter reading, the largest length up to which every length's
  mean exceeds the threshold (no drop at or below it).

``optimal_length`` is the visible context with the best mean accuracy (seed 001, "Intrinsic
Entropy of Context Length Scaling in LLMs", Appendix A.3). Pure Python: the report can use
these without torch.

``gold_text`` is the canonical answer a task's prompt asks for, written as RULER's own solved
examples write it after the answer prefix; ``proves`` says whether a model that writes it first
scores 100 whatever it writes next (the forced route of ``ctxlens.tasks.forced``).
"""

from __future__ import annotations

import math
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


def _numbered(outputs: Sequence[str]) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(outputs))


# family -> the answer after the answer prefix, as RULER's prompts and solved examples write it:
# niah ("... mentioned in the provided text are"): the values, comma-separated; vt ("they are: ",
# and its example "they are:  A B C"): the names, space-separated; cwe (its example
# "are: 1. a 2. b ..."): the numbered words; fwe ("are:"): the words, space-separated; qa
# ("Answer:", metric 'part'): its first reference alone. Each after one space.
GOLD = {"niah": lambda o: ", ".join(o), "vt": lambda o: " ".join(o), "cwe": _numbered,
        "fwe": lambda o: " ".join(o), "qa": lambda o: o[0]}


def gold_text(family: str, outputs: Sequence[str]) -> str:
    """The canonical answer to a prompt of a task of ``family`` with references ``outputs``, as the
    model would write it right after the answer prefix (``GOLD``; other families: space-separated)."""
    if not outputs:
        raise CtxlensError("A sample has no references to score against; regenerate the dataset.")
    return " " + GOLD.get(family, lambda o: " ".join(o))(list(outputs))


def proves(text: str, references: Sequence[str], metric: str) -> bool:
    """Whether an answer that starts with ``text`` scores 100 whatever follows it: RULER's string
    match (the long-sequence paper, Section 4) finds every reference it needs inside ``text``
    already, and a longer prediction keeps each found substring (post-processing strips ends and
    maps control characters one for one; lower-casing is per character, Greek final sigma aside)."""
    return score(text, references, metric) == 100.0


def _given(v: object) -> bool:
    """Not None and not NaN (rows read through pandas hold NaN where a value is absent)."""
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def mean_by(rows: Iterable[dict], keys: Sequence[str], value: str = "score") -> dict[tuple, float]:
    """Mean of ``value`` per combination of ``keys`` (rows without a value, or NaN, are skipped)."""
    sums: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if _given(r.get(value)):
            sums[tuple(r.get(k) for k in keys)].append(float(r[value]))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def length_means(rows: Iterable[dict], by: Sequence[str] = ("model",)) -> list[dict]:
    """One row per group of ``by`` and length: ``score``, the mean over the group's task set of
    each task's mean score (each task weighs the same, as in RULER), None when a task of the set
    has no score at that length (``missing``: those tasks, e.g. a prompt that does not fit);
    ``scored_mean``, the mean over the tasks that have one; ``n_tasks`` the size of the set.

    The task set of a group is every task any of its rows names (scored or flagged)."""
    rows = list(rows)
    task_sets: dict[tuple, set] = defaultdict(set)
    lengths: dict[tuple, set] = defaultdict(set)
    for r in rows:
        if _given(r.get("task")) and _given(r.get("length")):
            group = tuple(r.get(k) for k in by)
            task_sets[group].add(r["task"])
            lengths[group].add(r["length"])
    per_task = mean_by(rows, [*by, "length", "task"])
    out = []
    for group in sorted(task_sets, key=repr):
        tasks = sorted(task_sets[group])
        for length in sorted(lengths[group]):
            keys = {t: (*group, length, t) for t in tasks}  # per_task's keys
            means = {t: per_task[key] for t, key in keys.items() if key in per_task}
            missing = [t for t in tasks if t not in means]
            scored = sum(means.values()) / len(means) if means else None
            out.append({**dict(zip(by, group)), "length": length, "score": None if missing else scored,
                        "scored_mean": scored, "n_tasks": len(tasks), "n_scored": len(means),
                        "missing": ",".join(missing) or None})
    return out


def _curves(rows: Iterable[dict], by: Sequence[str]) -> dict[tuple, list[tuple[int, float | None]]]:
    """Per group: (length, mean over the task set or None), by length."""
    curves: dict[tuple, list[tuple[int, float | None]]] = defaultdict(list)
    for m in length_means(rows, by):
        curves[tuple(m[k] for k in by)].append((m["length"], m["score"]))
    return curves


def effective_length(rows: Iterable[dict], threshold: float = THRESHOLD, by: Sequence[str] = ("model",)) -> dict:
    """RULER's effective length per group: the largest length whose mean score over the task set
    exceeds ``threshold`` (RULER, Table 3); None when no length does. A length with a
    missing task (no mean over the whole set) does not count."""
    return {group: max((length for length, v in curve if v is not None and v > threshold), default=None)
            for group, curve in _curves(rows, by).items()}


def sustained_length(rows: Iterable[dict], threshold: float = THRESHOLD, by: Sequence[str] = ("model",)) -> dict:
    """Per group: the largest length up to which every length's mean score over the task set
    exceeds ``threshold`` (ctxlens's stricter reading of RULER's effective length: the first
    length at or below the threshold, or with a missing task, ends it); None when the shortest
    length already fails."""
    out = {}
    for group, curve in _curves(rows, by).items():
        best = None
        for length, v in curve:
            if v is None or v <= threshold:
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
