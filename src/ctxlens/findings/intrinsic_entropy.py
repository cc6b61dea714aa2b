"""The findings of the intrinsic-entropy paper, "Intrinsic Entropy of Context Length Scaling in LLMs".

Section 3, Figure 4 and Appendix F, Figure 12: an optimal context length exists and grows with
the training-set size (``optimal_context_grows``, on ``optimal-context`` rows); Section 2.2.2,
Figure 1 and Appendix G: CE is linear in the intrinsic entropy of last-token features
(``ce_linear_in_intrinsic_entropy``); Appendix J.3, Figures 16-17: on sparse parity CE is
linear in the intrinsic dimension (``ce_linear_in_dimension_parity``). The linear findings read
the ``stage="fit"`` rows of their experiments.
"""

from __future__ import annotations

from collections import defaultdict

from ctxlens.core.papers import named
from ctxlens.core.zoo_facts import TRAIN_LENGTH
from ctxlens.findings.models import any_model
from ctxlens.findings.verdicts import APPLIES, Rows, finding_row, number, verdicts_row, yes_no

OWN_MODELS = "the small models it trains on sparse parity"
LINEAR_R = 0.97  # the intrinsic-entropy paper Figure 1: entropy measures correlate with CE at |r| > 0.97


def optimal_context_grows(rows: Rows, models: dict[str, str], controls: dict[str, str],
                          train_length: int = TRAIN_LENGTH) -> dict:
    """The intrinsic-entropy paper, Section 3, Figure 4 and Appendix F, Figure 12: with a finite training set an
    optimal context length exists (validation loss falls, then rises again with context), and it
    grows with the training-set size (``optimal-context`` on sparse parity). Criterion, on the
    best validation loss averaged over seeds per (training-set size, context length): (a) for
    more than half of the sizes the optimum lies strictly inside the grid of lengths; (b) the
    optimum never shrinks as the size grows and is larger at the largest size than at the smallest."""
    got = [r for (exp, _), rs in rows.by.items() if exp == "optimal-context" for r in rs
           if r.get("best_val_loss") is not None]
    finding, paper = "an optimal context length exists and grows with data", \
        named("intrinsic-entropy", "Section 3, Figure 4; Appendix F, Figure 12")
    expected = ("optimum strictly inside the length grid for most training-set sizes, and non-decreasing in the "
                "size, larger at the largest size than at the smallest")
    if not got:
        return finding_row(finding, paper, expected, "-", "not measured", [], "not measured: no optimal-context rows")
    by_model = defaultdict(list)
    for r in got:
        by_model[r.get("model")].append(r)
    model, got = sorted(by_model.items(), key=lambda kv: str(kv[0]))[0]
    optimum = optimal_lengths(got)
    grid = sorted({r["ctl"] for r in got})
    sizes = sorted(optimum)
    inside = [n for n in sizes if grid[0] < optimum[n] < grid[-1]]
    seq = [optimum[n] for n in sizes]
    grows = len(seq) >= 2 and all(a <= b for a, b in zip(seq, seq[1:])) and seq[-1] > seq[0]
    ok = len(inside) * 2 > len(sizes) and grows
    measured = {f"n_train={n}": f"optimal ctl {optimum[n]}" for n in sizes}
    measured["grid"] = f"ctl {grid[0]}..{grid[-1]} ({len(grid)} lengths)"
    note = f"model {model}; optimum inside the grid for {len(inside)} of {len(sizes)} sizes; grows: {yes_no(grows)}"
    return finding_row(finding, paper, expected, measured, "reproduced" if ok else "not reproduced", [str(model)], note,
                       **{APPLIES: OWN_MODELS})


def optimal_lengths(rows: list[dict]) -> dict[int, int]:
    """{n_train: the ctl with the lowest best validation loss, averaged over seeds} (ties: shorter)."""
    losses: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        losses[r["n_train"]][r["ctl"]].append(float(r["best_val_loss"]))
    return {n: min(by, key=lambda c: (sum(by[c]) / len(by[c]), c)) for n, by in losses.items()}


def _linear_fit(rows: list[dict], **where: object) -> dict[str, float | None]:
    """{quantity: value} of the ``stage="fit"`` rows matching ``where``."""
    return {r["quantity"]: r.get("value") for r in rows if r.get("stage") == "fit"
            and all(r.get(k) == v for k, v in where.items())}


def ce_linear_in_intrinsic_entropy(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                   train_length: int = TRAIN_LENGTH) -> dict:
    """The intrinsic-entropy paper, Section 2.2.1-2.2.2, Eq. 2, Figure 1 (Appendix G, Figure 13 for other
    architectures): the intrinsic entropy S_n of last-token features rises with the context length
    and CE is linear in it with a negative slope, stated for models close to the Bayes model.
    Criterion: the card's ``ce_entropy`` test (``findings.lines.entropy.entropy_test``), over >= 6
    lengths, S_n with the largest n measured: the slope of S_n on log2 l above, and r(CE, S_n)
    below, what the length-permutation replicates give (one-sided randomization p <= 0.05 each);
    fewer lengths or no replicates: undecided."""
    from ctxlens.findings.lines.entropy import MIN_LENGTHS, SCOPE, entropy_test

    def check(name: str) -> tuple[str, bool | None] | None:
        t = entropy_test(rows.of("intrinsic-entropy", models.get(name)))
        if t is None:
            return None
        shown = (f"r(CE, S_{t['n_eig']}) = {number(t['r'])}, S slope {number(t['slope'])} "
                 f"over {len(t['lengths'])} lengths")
        if t["why"]:
            return f"{shown}; not tested: {t['why']}", None
        return f"{shown}; r 95% CI {number(t['r_ci'][0])} to {number(t['r_ci'][1])}", bool(t["rises"] and t["negative"])

    paper = named("intrinsic-entropy", "Section 2.2.2, Eq. 2, Figure 1; Appendix G")
    return verdicts_row("CE is linear in intrinsic entropy", paper,
                        f"over >= {MIN_LENGTHS} lengths, S_n rises with l and r(CE, S_n) < 0 (bootstrap over windows; "
                        f"{SCOPE})", any_model, models, check, "intrinsic-entropy rows")


def ce_linear_in_dimension_parity(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                  train_length: int = TRAIN_LENGTH) -> dict:
    """The intrinsic-entropy paper, Appendix J.3, Figures 16-17: on sparse parity a trained context MLP's CE is
    linear in the intrinsic dimension of its feature (the paper: slope -0.693, R^2 = 1 - 7e-9)
    (``parity-dimension`` fit). Criterion: Pearson r between CE and the intrinsic dimension at
    threshold 0.05 (the paper's 1/20) is <= -0.97, the level of Figure 1."""
    got = [r for (exp, _), rs in rows.by.items() if exp == "parity-dimension" for r in rs]
    finding, paper = "CE is linear in intrinsic dimension (sparse parity)", named("intrinsic-entropy", "Appendix J.3")
    expected = f"Pearson r(CE, intrinsic dimension at threshold 0.05) <= -{LINEAR_R}"
    fit = _linear_fit(got, threshold=0.05)
    if "pearson_r" not in fit:
        return finding_row(finding, paper, expected, "-", "not measured",
                    [], "not measured: no parity-dimension fit at threshold 0.05")
    r = fit["pearson_r"]
    ok = r is not None and r <= -LINEAR_R
    measured = {"pearson_r": r, "r2": fit.get("r2"), "slope x subtasks": fit.get("slope_x_tasks"),
                "paper slope": -0.693}
    model = next((x.get("model") for x in got if x.get("model")), "parity-mlp")
    return finding_row(finding, paper, expected, measured, "reproduced" if ok else "not reproduced", [str(model)],
                       **{APPLIES: OWN_MODELS})
