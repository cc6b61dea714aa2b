"""Criteria for the Positional Heads finding of the RoPE-distance paper, fixed before any run (no torch).

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"):

- Section 4.3.1, Appendix A.3: Spearman's rho between relative distance and dominant dimension
  ranks every head; the top 5% / 10% are the Positional Heads. The paper makes no test; its
  quantities are the ranking, the top heads' rho and sign, and the spread of |rho| over heads
  (``ranking``).
- Section 4.2.2 says some heads show a significant correlation. ctxlens's test of that claim
  (``presence_test``): one rho per (head, prompt), prompts being the independent items (the paper
  samples 17); per head a one-sample t test across prompts that the mean rho is 0, Bonferroni over
  heads. The rho pooled over distances of a few texts counts ~1000 correlated points as
  independent and cannot fail; it is never tested here.
- The paper makes no control. ctxlens's negative control (``control_test``): the same detection
  with every rotary frequency 0 (``condition="rope-zeroed"`` rows; q and k unrotated), on the same
  prompts. The dominant dimension can depend on distance without any rotation (keys per distance,
  the causal mask, the content), and the t test above passes nearly every head on real models; so
  per head a paired one-sided t test across prompts that its rho with RoPE is further along the
  head's direction than with RoPE zeroed (the direction: the sign of its summed rho over both
  conditions, which swapping a prompt's two rho leaves unchanged, so under the null that RoPE adds
  nothing each prompt's difference is as likely either sign), Bonferroni over heads. "Present"
  when at least one head passes both tests (an intersection-union test per head). Rows without a
  control (written before it existed) leave presence ``controlled=False``: the t test alone,
  which the card reports as lacking its control.
- Section 4.3.2, Figures 8-9: masking the top heads, against as many random heads; its test,
  interval and power are in ``ctxlens.findings.masking``. ``verdict`` joins the two tests into the
  findings table's criterion.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ctxlens.core.stats import bootstrap, normal_quantile, one_sample_t, quartiles, t_quantile

ALPHA = 0.05
MIN_PROMPTS = 17  # the paper's prompts (Section 4.2.1)
MIN_RHO = 0.3  # stated minimal effect: mean per-prompt rho of a Positional Head, and its |rho| gain over the control
REAL, CONTROL = "none", "rope-zeroed"  # positional-heads' conditions (rows without one are REAL)

_t_quantile = functools.cache(t_quantile)  # a bisection; the same (df, level) recurs for every dataset of a shape


# ------------------------------------------------------------------ positional heads


def _heads(rows: list[dict]) -> list[dict]:
    """The real condition's ``kind="head"`` rows (the control's heads are not ranked with them)."""
    return [r for r in of_condition(rows, REAL) if r.get("kind") == "head"]


def ranking(head_rows: list[dict], fractions: Sequence[float] = (0.05, 0.1)) -> dict:
    """The paper's quantities from ``kind="head"`` rows (rho pooled over the detection inputs):
    heads ranked by |rho| (the rows' ``rank``), the top fraction's heads with rho and sign, and
    the quartiles of |rho| over heads, overall and per layer type (sliding / full attention)."""
    heads = sorted((r for r in _heads(head_rows) if r.get("rho") is not None), key=lambda r: r["rank"])
    n = len(_heads(head_rows))
    top = {}
    for f in fractions:
        k = max(1, min(n, round(f * n)))
        chosen = heads[:k]
        top[str(f)] = {"n": k, "heads": [[r["layer"], r["head"], r["rho"]] for r in chosen],
                       "positive": sum(r["rho"] > 0 for r in chosen), "negative": sum(r["rho"] < 0 for r in chosen)}
    types = defaultdict(list)
    for r in heads:
        types[str(r.get("layer_type") or "all")].append(abs(r["rho"]))
    return {"n_heads": n, "top": top, "abs_rho": quartiles([abs(r["rho"]) for r in heads]),
            "abs_rho_by_type": {t: quartiles(v) for t, v in types.items()} if len(types) > 1 else {},
            "first": heads[0] if heads else None}


def of_condition(rows: list[dict], condition: str = REAL) -> list[dict]:
    """The rows of one detection condition; rows without a ``condition`` column are ``REAL``."""
    return [r for r in rows if r.get("condition", REAL) == condition]


def prompt_cells(rows: list[dict]) -> dict[str, dict[tuple[int, int], dict]]:
    """{condition: {(layer, head): {"rho": [per-prompt rho], "items": [(length, prompt) of each],
    "layer_type": ...}}} from the ``kind="prompt"`` rows, in one pass (one row per layer, head and
    prompt; a prompt whose rho is undefined is left out)."""
    out: dict[str, dict[tuple[int, int], dict]] = {}
    for r in rows:
        if r.get("kind") != "prompt":
            continue
        cells = out.setdefault(r.get("condition", REAL), {})
        cell = cells.setdefault((int(r["layer"]), int(r["head"])),
                                {"rho": [], "items": [], "layer_type": r.get("layer_type")})
        if r.get("rho") is not None and math.isfinite(r["rho"]):
            cell["rho"].append(float(r["rho"]))
            cell["items"].append((r.get("length"), r.get("prompt")))
    return out


def prompt_rhos(rows: list[dict], condition: str = REAL) -> dict[tuple[int, int], dict]:
    """{(layer, head): {"rho": [per-prompt rho], "layer_type": ...}} of ``condition`` (``prompt_cells``)."""
    return prompt_cells(rows).get(condition, {})


def presence_test(rows: list[dict], alpha: float = ALPHA) -> dict:
    """ctxlens's test of the paper's Section 4.2.2 claim on ``kind="prompt"`` rows: per head, a
    one-sample t test (n - 1 df) of its per-prompt rho (the real condition's) against 0; a head
    passes when p < alpha / heads (Bonferroni over every head tested). Also the passing heads'
    signs, per layer type, and the mde of a head's mean rho ((t at the Bonferroni level + z at
    80% power) x SE, SE the median over heads of sd / sqrt(prompts)). With RoPE-zeroed rows,
    ``control`` holds ``control_test`` and the same t test on the control's rows (``zeroed``), a
    head is ``positional`` when it passes both its t test and the comparison with its control,
    and ``present`` means at least one is (``controlled``: True); without them ``present`` means
    at least one head passes the t test (``controlled``: False, the verdict lacks its control)."""
    cells = prompt_cells(rows)
    test = t_test(cells.get(REAL, {}), alpha)
    control = None if not cells.get(CONTROL) else compare(cells[REAL] if REAL in cells else {}, cells[CONTROL], alpha)
    if control is None:
        return {**test, "controlled": False, "control": None, "zeroed": None}
    positional = [k for k, v in test["heads"].items() if v["pass"] and control["heads"].get(k, {}).get("pass")]
    by_type: dict[str, int] = defaultdict(int)
    for k in positional:
        by_type[str(test["heads"][k]["layer_type"] or "all")] += 1
    return {**test, "controlled": True, "present": bool(positional), "control": control,
            "zeroed": t_test(cells[CONTROL], alpha), "n_positional": len(positional),
            "positional": positional, "positional_by_type": dict(by_type),
            "positional_positive": sum(test["heads"][k]["mean"] > 0 for k in positional),
            "positional_negative": sum(test["heads"][k]["mean"] < 0 for k in positional)}


def t_test_across_prompts(rows: list[dict], condition: str = REAL, alpha: float = ALPHA) -> dict:
    """Per head of ``condition``'s prompt rows: a one-sample t test of the per-prompt rho against 0,
    Bonferroni over heads (see ``presence_test``); ``present``: at least one head passes."""
    return t_test(prompt_rhos(rows, condition), alpha)


def t_test(cells: dict[tuple[int, int], dict], alpha: float = ALPHA) -> dict:
    """``t_test_across_prompts`` on one condition's ``prompt_cells``."""
    tested = {k: v for k, v in cells.items() if len(v["rho"]) >= 2}
    n_heads = len(tested)
    n_prompts = max((len(v["rho"]) for v in cells.values()), default=0)
    level = alpha / max(1, n_heads)
    per_head, ses = {}, []
    for key, cell in tested.items():
        mean, se, p = one_sample_t(cell["rho"])
        per_head[key] = {"mean": mean, "se": se, "p": p, "pass": p < level, "layer_type": cell["layer_type"],
                         "n": len(cell["rho"])}
        if se == se:  # not NaN
            ses.append(se)
    passing = [k for k, v in per_head.items() if v["pass"]]
    by_type: dict[str, dict] = defaultdict(lambda: {"heads": 0, "pass": 0, "positive": 0, "negative": 0})
    for v in per_head.values():
        t = by_type[str(v["layer_type"] or "all")]
        t["heads"] += 1
        if v["pass"]:
            t["pass"] += 1
            t["positive" if v["mean"] > 0 else "negative"] += 1
    se_typ = float(np.median(ses)) if ses else math.nan
    return {"n_heads": n_heads, "n_prompts": n_prompts, "alpha": alpha, "level": level,
            "present": bool(passing), "n_pass": len(passing),
            "positive": sum(per_head[k]["mean"] > 0 for k in passing),
            "negative": sum(per_head[k]["mean"] < 0 for k in passing),
            "by_type": dict(by_type), "heads": per_head,
            "mde": (_t_quantile(n_prompts - 1, level) + normal_quantile(0.8)) * se_typ if ses else None}


def paired_prompts(real: dict[tuple[int, int], dict], zeroed: dict[tuple[int, int], dict]
                   ) -> dict[tuple[int, int], list[tuple[float, float]]]:
    """{(layer, head): [(rho with RoPE, rho with RoPE zeroed), ...]} from two conditions' ``prompt_cells``:
    one pair per (length, prompt) with a finite rho in both (the same prompt index: the same input)."""
    out = {}
    for key, cell in real.items():
        other = zeroed.get(key)
        if other is None or any(i[1] is None for i in cell["items"]):
            continue
        theirs = dict(zip(other["items"], other["rho"]))
        pairs = [(rho, theirs[i]) for i, rho in zip(cell["items"], cell["rho"]) if i in theirs]
        if pairs:
            out[key] = pairs
    return out


def control_test(rows: list[dict], alpha: float = ALPHA) -> dict | None:
    """ctxlens's comparison with the RoPE-zeroed control (see the module docstring): per head, with
    s the sign of its rho summed over both conditions and prompts, a paired one-sided t test
    (n - 1 df) across prompts of s (rho - rho zeroed) > 0 (``gain``: its mean, how much further
    along the head's direction its rho is with RoPE); a head passes when p < alpha / heads. None
    when the rows hold no RoPE-zeroed prompt rows. ``mde``: the smallest mean gain detected at 80%
    power ((one-sided t at the Bonferroni level + z) x the median SE over heads)."""
    cells = prompt_cells(rows)
    return compare(cells.get(REAL, {}), cells[CONTROL], alpha) if cells.get(CONTROL) else None


def compare(real: dict[tuple[int, int], dict], zeroed: dict[tuple[int, int], dict], alpha: float = ALPHA) -> dict:
    """``control_test`` on the two conditions' ``prompt_cells``."""
    pairs = {k: v for k, v in paired_prompts(real, zeroed).items() if len(v) >= 2}
    level = alpha / max(1, len(pairs))
    heads, ses = {}, []
    for key, items in pairs.items():
        sign = -1.0 if sum(a + b for a, b in items) < 0 else 1.0  # swap-invariant: fixed under the null
        gain, se, p_two = one_sample_t([sign * (a - b) for a, b in items])
        p = p_two / 2 if gain > 0 else 1 - p_two / 2  # one-sided: further along the direction with RoPE
        heads[key] = {"gain": gain, "se": se, "p": p, "pass": p < level, "n": len(items), "direction": sign,
                      "real": sum(a for a, _ in items) / len(items), "zeroed": sum(b for _, b in items) / len(items)}
        if se == se:  # not NaN
            ses.append(se)
    n = max((v["n"] for v in heads.values()), default=0)
    return {"n_heads": len(heads), "n_prompts": n, "level": level, "heads": heads,
            "n_pass": sum(v["pass"] for v in heads.values()),
            "mde": (_t_quantile(n - 1, 2 * level) + normal_quantile(0.8)) * float(np.median(ses)) if ses else None}


def head_interval(rows: list[dict], layer: int, head: int, n_boot: int = 2000) -> tuple[float, float] | None:
    """95% percentile bootstrap over prompts of one head's mean per-prompt rho (inside [-1, 1])."""
    cell = prompt_rhos(rows).get((int(layer), int(head)))
    if cell is None:
        return None
    return bootstrap(cell["rho"], lambda xs: sum(xs) / len(xs), n_boot=n_boot)


def verdict(presence: dict | None, masking: dict) -> dict:
    """The findings table's criterion: positional heads present (``presence_test``) and masking them
    hurts more than random (``ctxlens.findings.masking.masking_test``); None (undecided) when either
    cannot be tested."""
    present = None if presence is None or presence["n_heads"] == 0 else presence["present"]
    hurts = {"hurts": True, "no": False, "collapse": False}.get(masking["verdict"])
    reproduced = False if present is False or hurts is False else (None if present is None or hurts is None
                                                                   else True)
    return {"significant": present, "masking_hurts_more": hurts, "reproduced": reproduced}

