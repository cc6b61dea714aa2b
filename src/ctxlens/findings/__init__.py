"""The headline findings of the four papers, checked on result rows alone (no torch).

``compute_findings(runs, models=..., controls=...)`` reads run directories (or folders of them)
and returns the findings table that opens the report (``ctxlens.report.findings``): one row per
finding with ``finding``, ``paper``, ``expected``, ``measured``, ``status`` (reproduced | not
reproduced | undecided | not measured) and the extra columns ``models`` and ``note`` (and
``untrained control`` for the ACCS findings). One small function per finding below; each
docstring names the paper section and the criterion, and every criterion was fixed before any zoo model was measured:

- the ACCS criteria are those of ``ctxlens.findings.accs`` and the Positional
  Heads criteria those of ``ctxlens.findings.positional`` (reused as they are);
- the others are stated in their docstrings, with the numbers of the paper they come from.

A finding is measured on the zoo models it is about (``models``: zoo name -> model spec, the
spec being what the rows' ``model`` column holds). It is "reproduced" when its criterion holds
on every such model that was measured, "not reproduced" when it fails on one, "undecided" when
it fails on none but some model shows nothing to test (e.g. it retrieves nothing at all, so no
drop can be seen; the note says which), and "not measured" when none of its models or runs is
there (the note says which and why). Models that were not measured are listed in the note, so
a partial check is visible.
An untrained copy of a zoo model (``controls``: zoo name -> spec) is a control: a pattern that
the untrained control shows as well says little about what training taught; it never changes
the status, it is shown beside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable

from ctxlens.findings.accs import FAR_BOUNDARY, PLATEAU_THRESHOLD, depth_trend, plateau
from ctxlens.findings.positional import masking_summary, significant_heads, verdict

ZOO_NAMES = ("rope", "alibi", "mamba2", "mlstm", "griffin", "hybrid")  # the models findings are about, by name
TRAIN_LENGTH = 512  # the zoo recipe's training context in bytes, when the rows record none (tests keep them equal)
Z_ONE_SIDED_05 = 1.6448536269514722  # one-sided 5% critical value of the standard normal
MIDDLE_DEPTHS = (40.0, 60.0)  # "the middle" of seed 002 Table 2: depths 40, 50 and 60 %
LINEAR_R = 0.97  # seed 001 Figure 1: entropy measures correlate with CE at |r| > 0.97
CONTROL = "untrained control"  # column: does the untrained copy show the pattern too?

PAPERS = {
    "000": "seed 000, How much do contextualized representations encode long-range context?",
    "001": "seed 001, Intrinsic Entropy of Context Length Scaling in LLMs",
    "002": "seed 002, How Well Can a Long Sequence Model Model Long Sequences?",
    "003": "seed 003, On the token distance modeling ability of higher RoPE attention dimension",
}


# ------------------------------------------------------------------------------- shared
class Rows:
    """Result rows grouped by (experiment, model)."""

    def __init__(self, rows: Iterable[dict]):
        self.by: dict[tuple, list[dict]] = defaultdict(list)
        for r in rows:
            self.by[(r.get("experiment"), r.get("model"))].append(r)

    def of(self, experiment: str, model: str | None) -> list[dict]:
        return self.by.get((experiment, model), []) if model is not None else []


def _row(finding: str, paper: str, expected: str, measured, status: str, models: list[str], note: str = "",
         **extra) -> dict:
    return {"finding": finding, "paper": paper, "expected": expected, "measured": measured, "status": status,
            "models": ", ".join(models) or "-", "note": note, **extra}


def _verdicts(finding: str, paper: str, expected: str, names: Iterable[str], models: dict[str, str],
              check: Callable[[str], tuple[str, bool | None] | None], why_missing: str,
              control: Callable[[str], str] | None = None) -> dict:
    """The table row of a finding checked per model: ``check(name)`` gives (numbers in words,
    verdict True / False / None = undecided), or None when that model has no rows."""
    measured, verdicts, absent, controls = {}, {}, [], {}
    for name in names:
        got = check(name) if name in models else None
        if got is None:
            absent.append(f"zoo:{name} ({'no rows' if name in models else 'not trained'})")
            continue
        text, ok = got
        verdicts[name] = ok
        measured[f"zoo:{name}"] = f"{text} -> {_word(ok)}"
        if control is not None:
            controls[f"zoo:{name}"] = control(name)
    notes = []
    if not verdicts:
        return _row(finding, paper, expected, "-", "not measured", [], f"not measured: {why_missing}; missing "
                    + ", ".join(absent))
    undecided = [n for n, v in verdicts.items() if v is None]
    if undecided:
        notes.append("undecided on " + ", ".join(f"zoo:{n}" for n in undecided) + " (nothing to test; see measured)")
    if absent:
        notes.append("not measured on " + ", ".join(absent))
    status = _status(list(verdicts.values()))
    extra = {CONTROL: "; ".join(f"{k}: {v}" for k, v in controls.items())} if control is not None else {}
    return _row(finding, paper, expected, measured, status, [f"zoo:{n}" for n in verdicts], "; ".join(notes),
                **extra)


def _status(verdicts: list[bool | None]) -> str:
    """One model failing decides "not reproduced"; otherwise any undecided model leaves it undecided."""
    if any(v is False for v in verdicts):
        return "not reproduced"
    return "undecided" if any(v is None for v in verdicts) else "reproduced"


def _word(ok: bool | None) -> str:
    return "yes" if ok else "undecided" if ok is None else "no"


def _shows(ok: bool | None) -> str:
    return "shows it too" if ok else "undecided" if ok is None else "does not show it"


def _num(x, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


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


# ------------------------------------------------------------------------------- seed 000
def accs_falls_with_depth(rows: Rows, models: dict[str, str], controls: dict[str, str],
                          train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 000, Section 4, Figure 1: ACCS falls with layer depth (``zoo:rope`` within its
    training length; ``accs-layers``). Criterion (``ctxlens.findings.accs.depth_trend``): Spearman
    correlation between layer index and ACCS is negative and the last layer's ACCS is below the
    first layer's; residual stream, at the longest measured length <= the training length."""
    def trend(spec: str | None):
        got = [r for r in rows.of("accs-layers", spec) if r.get("length", 0) <= train_length]
        if not got:
            return None
        length = max(r["length"] for r in got)
        return length, depth_trend([r for r in got if r["length"] == length])

    def check(name: str):
        got = trend(models.get(name))
        if got is None:
            return None
        length, t = got
        return (f"length {length}: spearman(layer, ACCS) = {_num(t['spearman'])}, ACCS first layer "
                f"{_num(t.get('first'))}, last {_num(t.get('last'))}"), t["reproduced"]

    def control(name: str) -> str:
        got = trend(controls.get(name))
        return "not run" if got is None else _shows(got[1]["reproduced"])

    return _verdicts("ACCS falls with layer depth", f"{PAPERS['000']}, Section 4, Figure 1",
                     "spearman(layer, ACCS) < 0 and ACCS(last layer) < ACCS(first layer), within the training length",
                     ["rope"], models, check, "accs-layers on zoo:rope", control)


def _plateau_check(rows: Rows, spec: str | None, want: bool, lengths: Callable[[int], bool]):
    """Per-length plateau verdicts of one model's ``accs-boundary`` rows: (words, all agree with
    ``want``; None when every length is undecided), or None without rows."""
    got = [r for r in rows.of("accs-boundary", spec) if lengths(r.get("length", 0))]
    if not got:
        return None
    parts, oks = [], []
    for length in sorted({r["length"] for r in got}):
        p = plateau([r for r in got if r["length"] == length])
        ok = None if p["plateau"] is None else p["plateau"] == want
        oks.append(ok)
        parts.append(f"length {length}: plateau ratio {_num(p['plateau_ratio'])}")
    ok = False if False in oks else None if None in oks else True
    return "; ".join(parts), ok


def _plateau_finding(rows: Rows, models: dict[str, str], controls: dict[str, str], finding: str, names: list[str],
                     want: bool, expected: str, lengths: Callable[[int], bool], where: str) -> dict:
    def control(name: str) -> str:
        got = _plateau_check(rows, controls.get(name), want, lengths)
        return "not run" if got is None else _shows(got[1])

    return _verdicts(finding, f"{PAPERS['000']}, Section 5.2, Figure 4, Table 4", expected, names, models,
                     lambda n: _plateau_check(rows, models.get(n), want, lengths), where, control)


_RATIO = (f"plateau ratio (ACCS(b_min) - ACCS({FAR_BOUNDARY})) / (ACCS(b_min) - ACCS(1.0)), last layer, "
          "residual stream")


def local_plateau(rows: Rows, models: dict[str, str], controls: dict[str, str],
                  train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 000, Section 5.2, Figure 4, Table 4: recurrent models (Mamba-2, mLSTM) and ALiBi
    are hardly moved by shuffling the distant prefix: a flat ACCS plateau, then a drop as the
    shuffle reaches the suffix (``accs-boundary``). Criterion (``ctxlens.findings.accs.plateau``): the
    plateau ratio is below 0.25 (between the paper's two groups in Table 4) at every measured
    length; undecided when ACCS does not drop at all."""
    return _plateau_finding(rows, models, controls, "recurrent and ALiBi models plateau on distant perturbations",
                            ["mamba2", "mlstm", "alibi"], True, f"{_RATIO} < {PLATEAU_THRESHOLD}",
                            lambda n: True, "accs-boundary on zoo:mamba2, zoo:mlstm, zoo:alibi")


def hybrid_no_plateau(rows: Rows, models: dict[str, str], controls: dict[str, str],
                      train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 000, Section 5.2, Figure 4, Table 4: hybrids (Griffin, HybridMamba) contextualise
    the whole prefix: ACCS falls steadily as the shuffle grows, no plateau (``accs-boundary``).
    Criterion: the plateau ratio is 0.25 or more at every measured length."""
    return _plateau_finding(rows, models, controls, "hybrids contextualise the whole prefix (no plateau)",
                            ["griffin", "hybrid"], False, f"{_RATIO} >= {PLATEAU_THRESHOLD}",
                            lambda n: True, "accs-boundary on zoo:griffin, zoo:hybrid")


def rope_no_plateau_beyond_training(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                    train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 000, Section 5.2, Figure 4: RoPE beyond its training length is moved by the whole
    prefix, like the hybrids (``accs-boundary`` at lengths above the training length).
    Criterion: the plateau ratio is 0.25 or more at every measured length > the training length."""
    return _plateau_finding(rows, models, controls, "RoPE beyond its training length uses the whole prefix",
                            ["rope"], False, f"{_RATIO} >= {PLATEAU_THRESHOLD} beyond the training length",
                            lambda n: n > train_length, f"accs-boundary on zoo:rope beyond {train_length} tokens")


# ------------------------------------------------------------------------------- seed 002
def retrieval_collapses(rows: Rows, models: dict[str, str], controls: dict[str, str],
                        train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 002, Section 4, Tables 1-3: every architecture retrieves worse beyond its training
    length (Table 2 at the training length vs Table 3 at twice it: the mean over depths drops
    for all eight models; ratios 0 to 0.86). ``niah-depth`` at the training length T and 2T.
    Criterion: the needle accuracy pooled over depths is lower at 2T than at T and the drop is
    significant (one-sided two-proportion z-test, z > 1.645, i.e. p < 0.05); undecided when
    nothing is retrieved at T."""
    def check(name: str):
        got = rows.of("niah-depth", models.get(name))
        at, beyond = _scores(got, length=train_length), _scores(got, length=2 * train_length)
        if not at or not beyond:
            return None
        p1, p2, z = _proportion_drop(at, beyond)
        ok = None if p1 == 0 else bool(z is not None and z > Z_ONE_SIDED_05)
        return (f"accuracy {p1:.2f} at {train_length} (n={len(at)}), {p2:.2f} at {2 * train_length} "
                f"(n={len(beyond)}), z = {_num(z)}"), ok

    return _verdicts("retrieval collapses beyond the training length", f"{PAPERS['002']}, Section 4, Tables 1-3",
                     f"needle accuracy at 2x the training length significantly below that at the training length "
                     f"(one-sided z > {Z_ONE_SIDED_05:.3f})", ZOO_NAMES, models, check,
                     f"niah-depth at {train_length} and {2 * train_length} tokens")


def lost_in_the_middle(rows: Rows, models: dict[str, str], controls: dict[str, str],
                       train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 002, Section 4, Table 2: at the training length every architecture retrieves a
    needle at the start (depth 0) and the end (depth 100) better than in the middle (Table 2:
    Mamba2 59 / 66 at the ends vs 37 over depths 40-60, M2A 40 / 37 vs 30, TPP 53 / 56 vs 27).
    ``niah-depth`` at the training length. Criterion: the accuracy at depth 0 and at depth 100
    are each above the middle's (depths 40-60 pooled), and the ends pooled exceed the middle
    significantly (one-sided two-proportion z-test, z > 1.645); undecided when nothing is
    retrieved at any of those depths."""
    lo, hi = MIDDLE_DEPTHS

    def check(name: str):
        got = [r for r in rows.of("niah-depth", models.get(name)) if r.get("length") == train_length]
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
                     "ends significantly above the middle", ZOO_NAMES, models, check,
                     f"niah-depth at {train_length} tokens with depths 0, 40-60 and 100")


# ------------------------------------------------------------------------------- seed 001
def optimal_context_grows(rows: Rows, models: dict[str, str], controls: dict[str, str],
                          train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 001, Section 3, Figure 4 and Appendix F, Figure 12: with a finite training set an
    optimal context length exists (validation loss falls, then rises again with context), and it
    grows with the training-set size (``optimal-context`` on sparse parity). Criterion, on the
    best validation loss averaged over seeds per (training-set size, context length): (a) for
    more than half of the sizes the optimum lies strictly inside the grid of lengths; (b) the
    optimum never shrinks as the size grows and is larger at the largest size than at the smallest."""
    got = [r for (exp, _), rs in rows.by.items() if exp == "optimal-context" for r in rs
           if r.get("best_val_loss") is not None]
    finding, paper = "an optimal context length exists and grows with data", \
        f"{PAPERS['001']}, Section 3, Figure 4; Appendix F, Figure 12"
    expected = ("optimum strictly inside the length grid for most training-set sizes, and non-decreasing in the "
                "size, larger at the largest size than at the smallest")
    if not got:
        return _row(finding, paper, expected, "-", "not measured", [], "not measured: no optimal-context rows")
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
    note = f"model {model}; optimum inside the grid for {len(inside)} of {len(sizes)} sizes; grows: {_word(grows)}"
    return _row(finding, paper, expected, measured, "reproduced" if ok else "not reproduced", [str(model)], note)


def optimal_lengths(rows: list[dict]) -> dict[int, int]:
    """{n_train: the ctl with the lowest best validation loss, averaged over seeds} (ties: shorter)."""
    losses: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        losses[r["n_train"]][r["ctl"]].append(float(r["best_val_loss"]))
    return {n: min(by, key=lambda c: (sum(by[c]) / len(by[c]), c)) for n, by in losses.items()}


def _linear_fit(rows: list[dict], **where) -> dict[str, float | None]:
    """{quantity: value} of the ``stage="fit"`` rows matching ``where``."""
    return {r["quantity"]: r.get("value") for r in rows if r.get("stage") == "fit"
            and all(r.get(k) == v for k, v in where.items())}


def ce_linear_in_intrinsic_entropy(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                   train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 001, Section 2.2.2, Figure 1 (and Appendix G, Figure 13 for other architectures): CE
    falls linearly as the intrinsic entropy of last-token features (sum of the first n log
    relative eigenvalues) grows with context; the paper reports correlations above 0.97
    (``intrinsic-entropy`` fit across lengths). Criterion: Pearson r between CE and the
    intrinsic entropy is <= -0.97 for every number of eigenvalues n measured."""
    def check(name: str):
        got = rows.of("intrinsic-entropy", models.get(name))
        ns = sorted({r["n_eig"] for r in got if r.get("stage") == "fit" and r.get("x") == "intrinsic_entropy"})
        if not ns:
            return None
        rs = {n: _linear_fit(got, x="intrinsic_entropy", n_eig=n).get("pearson_r") for n in ns}
        ok = all(r is not None and r <= -LINEAR_R for r in rs.values())
        return ", ".join(f"r(n={n}) = {_num(r)}" for n, r in rs.items()), ok

    return _verdicts("CE is linear in intrinsic entropy", f"{PAPERS['001']}, Section 2.2.2, Figure 1; Appendix G",
                     f"Pearson r(CE, intrinsic entropy) <= -{LINEAR_R} across context lengths, for every n",
                     ZOO_NAMES, models, check, "intrinsic-entropy fits")


def ce_linear_in_dimension_parity(rows: Rows, models: dict[str, str], controls: dict[str, str],
                                  train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 001, Appendix J.3, Figures 16-17: on sparse parity a trained context MLP's CE is
    linear in the intrinsic dimension of its feature (the paper: slope -0.693, R^2 = 1 - 7e-9)
    (``parity-dimension`` fit). Criterion: Pearson r between CE and the intrinsic dimension at
    threshold 0.05 (the paper's 1/20) is <= -0.97, the level of Figure 1."""
    got = [r for (exp, _), rs in rows.by.items() if exp == "parity-dimension" for r in rs]
    finding, paper = "CE is linear in intrinsic dimension (sparse parity)", f"{PAPERS['001']}, Appendix J.3"
    expected = f"Pearson r(CE, intrinsic dimension at threshold 0.05) <= -{LINEAR_R}"
    fit = _linear_fit(got, threshold=0.05)
    if "pearson_r" not in fit:
        return _row(finding, paper, expected, "-", "not measured",
                    [], "not measured: no parity-dimension fit at threshold 0.05")
    r = fit["pearson_r"]
    ok = r is not None and r <= -LINEAR_R
    measured = {"pearson_r": r, "r2": fit.get("r2"), "slope x subtasks": fit.get("slope_x_tasks"),
                "paper slope": -0.693}
    model = next((x.get("model") for x in got if x.get("model")), "parity-mlp")
    return _row(finding, paper, expected, measured, "reproduced" if ok else "not reproduced", [str(model)])


# ------------------------------------------------------------------------------- seed 003
def positional_heads_matter(rows: Rows, models: dict[str, str], controls: dict[str, str],
                            train_length: int = TRAIN_LENGTH) -> dict:
    """Seed 003, Sections 4.2-4.3, Figure 8: heads whose dominant dimension correlates with
    distance exist, and masking the top ones hurts passkey retrieval more than masking as many
    random heads (``positional-heads`` + ``head-masking`` on ``zoo:rope``). Criterion
    (``ctxlens.findings.positional.verdict``): at least one head with p < 0.05 / n_heads, and for every
    fraction the passkey accuracy with the top heads masked is below the mean over random draws;
    undecided when the unmasked model retrieves nothing."""
    def check(name: str):
        spec = models.get(name)
        heads = [r for r in rows.of("positional-heads", spec) if r.get("transform", "none") == "none"]
        mask = [r for r in rows.of("head-masking", spec) if r.get("transform", "none") == "none"
                and r.get("task") == "passkey"]
        if not heads or not mask:
            return None
        sig, summary = significant_heads(heads), masking_summary(mask)
        v = verdict(sig, summary)
        fr = "; ".join(f"{f}: top {_num(s['top'])} vs random {_num(s['random_mean'])}"
                       for f, s in summary["fractions"].items())
        return (f"{sig['n_significant_bonferroni']} of {sig['n_heads']} heads significant (Bonferroni); passkey "
                f"unmasked {_num(summary['none'])}; {fr}"), v["reproduced"]

    return _verdicts("positional heads matter more than random heads", f"{PAPERS['003']}, Sections 4.2-4.3, Figure 8",
                     "some head significant after Bonferroni, and masking the top heads lowers passkey accuracy more "
                     "than masking as many random heads", ["rope"], models, check,
                     "positional-heads and head-masking on zoo:rope")


# Each finding and the experiments whose rows it reads.
FINDINGS = (
    (accs_falls_with_depth, ("accs-layers",)),
    (local_plateau, ("accs-boundary",)),
    (hybrid_no_plateau, ("accs-boundary",)),
    (rope_no_plateau_beyond_training, ("accs-boundary",)),
    (retrieval_collapses, ("niah-depth",)),
    (lost_in_the_middle, ("niah-depth",)),
    (optimal_context_grows, ("optimal-context",)),
    (ce_linear_in_intrinsic_entropy, ("intrinsic-entropy",)),
    (ce_linear_in_dimension_parity, ("parity-dimension",)),
    (positional_heads_matter, ("positional-heads", "head-masking")),
)


def recorded_train_length(rows: Iterable[dict], specs: Iterable[str]) -> int:
    """The training length the rows of models ``specs`` record (the RoPE experiments' ``train_length``
    column) when they agree on one, else ``TRAIN_LENGTH``."""
    wanted = set(specs)
    found = {int(r["train_length"]) for r in rows if r.get("model") in wanted and r.get("train_length")}
    return found.pop() if len(found) == 1 else TRAIN_LENGTH


def compute_findings(runs, models: dict[str, str] | None = None, controls: dict[str, str] | None = None,
                     train_length: int | None = None, failures: dict[str, str] | None = None) -> list[dict]:
    """The findings table from run directories (or folders of them, or a list of rows).

    ``models``: {zoo name: model spec as in the rows} (default ``zoo:NAME`` for every zoo name);
    ``controls``: {zoo name: spec of its untrained copy}; ``train_length``: default what the rows
    record (``recorded_train_length``); ``failures``: {experiment: error} of runs that failed, added
    to the note of every finding that reads them."""
    if isinstance(runs, list) and all(isinstance(r, dict) for r in runs):
        rows = runs
    else:
        from ctxlens.results import read_runs

        rows = [r for run in read_runs(runs) for r in run.rows]
    models = {n: f"zoo:{n}" for n in ZOO_NAMES} if models is None else dict(models)
    if train_length is None:
        train_length = recorded_train_length(rows, models.values())
    grouped, out = Rows(rows), []
    for finding, experiments in FINDINGS:
        row = finding(grouped, models, dict(controls or {}), train_length)
        failed = [f"the {e} run failed ({(failures or {})[e]})" for e in experiments if e in (failures or {})]
        if failed:
            row["note"] = "; ".join([*failed, row["note"]] if row["note"] else failed)
        out.append(row)
    return out
