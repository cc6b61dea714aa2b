"""The retrieval findings of the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?".

Section 4, Tables 1-3: every architecture retrieves a needle worse beyond its training length
(``retrieval_collapses``) and, at the training length, worse in the middle of the context than
at its ends (``lost_in_the_middle``), both read from ``niah-depth`` rows and decided with a
one-sided two-proportion z-test (``_proportion_drop``) on the pooled needle accuracies.
"""

from __future__ import annotations

import math

from ctxlens.findings.models import any_model, reaches
from ctxlens.findings.verdicts import PAPERS, TRAIN_LENGTH, Rows, _num, _verdicts, as_models

Z_ONE_SIDED_05 = 1.6448536269514722  # one-sided 5% critical value of the standard normal
MIDDLE_DEPTHS = (40.0, 60.0)  # "the middle" of the long-sequence paper Table 2: depths 40, 50 and 60 %


def _proportion_drop(hi: list[float], lo: list[float]) -> tuple[float, float, float | None]:
    """One-sided two-proportion z-test that ``hi`` (scores in [0, 1]) exceeds ``lo``:
    (mean hi, mean lo, z; None when both are all 0 or all 1, i.e. no spread to test)."""
    n1, n2 = len(hi), len(lo)
    p1, p2 = sum(hi) / n1, sum(lo) / n2
    pooled = (sum(hi) + sum(lo)) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return p1, p2, None if se == 0 else (p1 - p2) / se


def _scores(rows: list[dict], **where) -> list[float]:
    """Task scores (percent) of rows matching ``where``, as fractions in [0, 1]; flagged rows skipped."""
    return [float(r["score"]) / 100 for r in rows if r.get("score") is not None
            and all(r.get(k) == v for k, v in where.items())]



def retrieval_collapses(rows: Rows, models: dict[str, str], controls: dict[str, str],
                        train_length: int = TRAIN_LENGTH) -> dict:
    """The long-sequence paper, Section 4, Tables 1-3: every architecture retrieves worse beyond its training
    length (Table 2 at the training length vs Table 3 at twice it: the mean over depths drops
    for all eight models; ratios 0 to 0.86). ``niah-depth`` at the training length T and 2T.
    Criterion: the needle accuracy pooled over depths is lower at 2T than at T and the drop is
    significant (one-sided two-proportion z-test, z > 1.645, i.e. p < 0.05); undecided when
    nothing is retrieved at T. Applies to every architecture whose positions reach 2T."""
    models = as_models(models)

    def check(name: str):
        got, t = rows.of("niah-depth", models.get(name)), models.length(name)
        at, beyond = _scores(got, length=t), _scores(got, length=2 * t)
        if not at or not beyond:
            return None
        p1, p2, z = _proportion_drop(at, beyond)
        ok = None if p1 == 0 else bool(z is not None and z > Z_ONE_SIDED_05)
        return (f"accuracy {p1:.2f} at {t} (n={len(at)}), {p2:.2f} at {2 * t} "
                f"(n={len(beyond)}), z = {_num(z)}"), ok

    return _verdicts("retrieval collapses beyond the training length", f"{PAPERS['002']}, Section 4, Tables 1-3",
                     f"needle accuracy at 2x the training length significantly below that at the training length "
                     f"(one-sided z > {Z_ONE_SIDED_05:.3f})", reaches(2), models, check,
                     "niah-depth at the training length and twice it")


def lost_in_the_middle(rows: Rows, models: dict[str, str], controls: dict[str, str],
                       train_length: int = TRAIN_LENGTH) -> dict:
    """The long-sequence paper, Section 4, Table 2: at the training length every architecture retrieves a
    needle at the start (depth 0) and the end (depth 100) better than in the middle (Table 2:
    Mamba2 59 / 66 at the ends vs 37 over depths 40-60, M2A 40 / 37 vs 30, TPP 53 / 56 vs 27).
    ``niah-depth`` at the training length. Criterion: the accuracy at depth 0 and at depth 100
    are each above the middle's (depths 40-60 pooled), and the ends pooled exceed the middle
    significantly (one-sided two-proportion z-test, z > 1.645); undecided when nothing is
    retrieved at any of those depths. Applies to every architecture."""
    lo, hi = MIDDLE_DEPTHS
    models = as_models(models)

    def check(name: str):
        got = [r for r in rows.of("niah-depth", models.get(name)) if r.get("length") == models.length(name)]
        start, end = _scores(got, depth=0.0), _scores(got, depth=100.0)
        middle = [s for r in got if r.get("depth") is not None and lo <= r["depth"] <= hi for s in _scores([r])]
        if not start or not end or not middle:
            return None
        p_start, p_end, p_mid = sum(start) / len(start), sum(end) / len(end), sum(middle) / len(middle)
        _, _, z = _proportion_drop(start + end, middle)
        if p_start == p_end == p_mid == 0:
            ok = None
        else:
            ok = bool(p_start > p_mid and p_end > p_mid and z is not None and z > Z_ONE_SIDED_05)
        return (f"accuracy {p_start:.2f} at depth 0, {p_mid:.2f} at depths {lo:g}-{hi:g}, {p_end:.2f} at depth 100 "
                f"(n={len(start)}/{len(middle)}/{len(end)}), z = {_num(z)}"), ok

    return _verdicts("lost in the middle", f"{PAPERS['002']}, Section 4, Table 2",
                     f"at the training length, accuracy at depths 0 and 100 each above depths {lo:g}-{hi:g}, "
                     "ends significantly above the middle", any_model, models, check,
                     "niah-depth at the training length with depths 0, 40-60 and 100")
