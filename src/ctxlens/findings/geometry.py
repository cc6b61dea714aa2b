"""The ACCS findings of the geometry paper, "How much do contextualized representations encode long-range context?".

Section 4, Figure 1: ACCS falls with layer depth (``accs_falls_with_depth``); Section 5.2,
Figure 4, Table 4: recurrent models and ALiBi plateau while only the distant prefix is shuffled
(``local_plateau``), while hybrids and RoPE beyond its training length do not
(``hybrid_no_plateau``, ``rope_no_plateau_beyond_training``). The criteria are those of
``ctxlens.findings.accs``; each function returns the finding's row of the findings table, with
the untrained control's verdict beside it.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxlens.core.papers import named
from ctxlens.core.zoo_facts import TRAIN_LENGTH
from ctxlens.findings.accs import FAR_BOUNDARY, PLATEAU_THRESHOLD, depth_result, plateau_result
from ctxlens.findings.models import Rule, local_model, recurrent_hybrid, rope_transformer
from ctxlens.findings.verdicts import Rows, as_models, number, shows, verdicts_row


def _depth_words(t: dict) -> str:
    ci = t.get("ci_ACCS")
    interval = "no per-window rows" if not t["per_window"] else (
        f"95% CI {number(ci[0])} to {number(ci[1])} over {t['k']} windows" if ci else f"{t['k']} windows")
    return (f"length {t['length']}: spearman(layer, ACCS) = {number(t.get('rho_ACCS'))} ({interval}); "
            f"S {number(t.get('rho_S'))}, A {number(t.get('rho_A'))}")


def _falls(t: dict) -> bool | None:
    """True: ACCS falls with depth (interval below 0); False: it rises (above 0); None otherwise."""
    return {-1: True, 1: False}.get(t["verdict"])


def accs_falls_with_depth(rows: Rows, models: dict[str, str], controls: dict[str, str],
                          train_length: int = TRAIN_LENGTH) -> dict:
    """The geometry paper, Section 4, Figure 1: ACCS falls with layer depth (``zoo:rope`` within its
    training length; ``accs-layers``). Criterion (``ctxlens.findings.accs.depth_result``, the card's):
    the 95% interval of Spearman(layer, ACCS) from a bootstrap over windows lies below 0 (>= 8 windows;
    rows without per-window values are undecided); residual stream, at the longest measured length
    <= the model's training length. Applies to RoPE Transformers."""
    models = as_models(models)

    def trend(spec: str | None, limit: int) -> dict | None:
        return depth_result(rows.of("accs-layers", spec), limit)

    def check(name: str) -> tuple[str, bool | None] | None:
        t = trend(models.get(name), models.length(name))
        return None if t is None else (_depth_words(t), _falls(t))

    def control(name: str) -> str:
        t = trend(controls.get(name), models.length(name))
        return "not run" if t is None else shows(_falls(t))

    return verdicts_row("ACCS falls with layer depth", named("geometry", "Section 4, Figure 1"),
                        "95% window-bootstrap interval of spearman(layer, ACCS) below 0, within the training length",
                        rope_transformer, models, check, "accs-layers on a RoPE Transformer", control)


def _plateau_check(rows: Rows, spec: str | None, want: bool,
                   lengths: Callable[[int], bool]) -> tuple[str, bool | None] | None:
    """Per-length plateau verdicts of one model's ``accs-boundary`` rows (``ctxlens.findings.accs.
    plateau_result``, the card's): (words, all agree with ``want``; None when every length is
    undecided), or None without rows."""
    got = [r for r in rows.of("accs-boundary", spec) if lengths(r.get("length", 0))]
    if not got:
        return None
    parts, oks = [], []
    for length in sorted({r["length"] for r in got}):
        p = plateau_result(got, length)
        ok = None if p["verdict"] is None else p["verdict"] == want
        oks.append(ok)
        ci = p.get("ci")
        where = (f"95% CI {number(ci[0])} to {number(ci[1])}, {p['k']} windows" if ci
                 else f"{p['k']} windows, no interval")
        parts.append(f"length {length}: plateau ratio {number(p.get('ratio'))} ({where})")
    ok = False if False in oks else None if None in oks else True
    return "; ".join(parts), ok


def _plateau_finding(rows: Rows, models: dict[str, str], controls: dict[str, str], finding: str, rule: Rule,
                     want: bool, expected: str, lengths: Callable[[int, int], bool], where: str) -> dict:
    """``lengths(length, the model's training length)``: the lengths a model is checked at."""
    models = as_models(models)

    def within(name: str) -> Callable[[int], bool]:
        return lambda n: lengths(n, models.length(name))

    def control(name: str) -> str:
        got = _plateau_check(rows, controls.get(name), want, within(name))
        return "not run" if got is None else shows(got[1])

    return verdicts_row(finding, named("geometry", "Section 5.2, Figure 4, Table 4"), expected, rule, models,
                        lambda n: _plateau_check(rows, models.get(n), want, within(n)), where, control)


_RATIO = (f"plateau ratio (ACCS(b_min) - ACCS({FAR_BOUNDARY})) / (ACCS(b_min) - ACCS(1.0)), last layer, "
          "residual stream")


def local_plateau(rows: Rows, models: dict[str, str], controls: dict[str, str],
                  train_length: int = TRAIN_LENGTH) -> dict:
    """The geometry paper, Section 5.2, Figure 4, Table 4: recurrent models (Mamba-2, mLSTM) and ALiBi
    are hardly moved by shuffling the distant prefix: a flat ACCS plateau, then a drop as the
    shuffle reaches the suffix (``accs-boundary``). Criterion (``ctxlens.findings.accs.plateau``): the
    plateau ratio's 95% window-bootstrap interval lies below 0.25 (between the paper's two groups in
    Table 4) at every measured length; undecided when the total drop's interval reaches 0, the
    ratio's holds 0.25, or the rows hold fewer than 8 windows or none per window."""
    return _plateau_finding(rows, models, controls, "recurrent and ALiBi models plateau on distant perturbations",
                            local_model, True, f"{_RATIO} < {PLATEAU_THRESHOLD}",
                            lambda n, t: True, "accs-boundary on a recurrent or ALiBi model")


def hybrid_no_plateau(rows: Rows, models: dict[str, str], controls: dict[str, str],
                      train_length: int = TRAIN_LENGTH) -> dict:
    """The geometry paper, Section 5.2, Figure 4, Table 4: hybrids (Griffin, HybridMamba) contextualise
    the whole prefix: ACCS falls steadily as the shuffle grows, no plateau (``accs-boundary``).
    Criterion: the plateau ratio's 95% window-bootstrap interval lies above 0.25 at every measured length."""
    return _plateau_finding(rows, models, controls, "hybrids contextualise the whole prefix (no plateau)",
                            recurrent_hybrid, False, f"{_RATIO} >= {PLATEAU_THRESHOLD}",
                            lambda n, t: True, "accs-boundary on a recurrent/attention hybrid")


def rope_no_plateau_beyond_training(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                    train_length: int = TRAIN_LENGTH) -> dict:
    """The geometry paper, Section 5.2, Figure 4: RoPE beyond its training length is moved by the whole
    prefix, like the hybrids (``accs-boundary`` at lengths above the training length).
    Criterion: the plateau ratio's 95% window-bootstrap interval lies above 0.25 at every measured
    length > the training length."""
    return _plateau_finding(rows, models, controls, "RoPE beyond its training length uses the whole prefix",
                            rope_transformer, False, f"{_RATIO} >= {PLATEAU_THRESHOLD} beyond the training length",
                            lambda n, t: n > t, "accs-boundary on a RoPE Transformer beyond its training length")
