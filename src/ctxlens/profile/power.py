"""What each card line needs to decide, known before the suite runs (issue 43, part 2).

For every line of the card (``ctxlens.findings.lines``) the plan states the items its part affords
(the part's sample count at the fitted size), the items its test needs to see the paper's effect
with 80% power, and the part's minutes. Where the outcome is binary and the paper's effect fixes
the alternative, the need is known a priori:

- needle retrieval at L vs 2L (the long-sequence paper, Tables 2-3): the anytime-valid test's
  planner (``findings.long_sequence.drop_plan``) for a drop of 0.2 from 0.8 at L over the 7 depths;
- lost in the middle (Table 2): the dip test's planner (``dip_plan``) for a dip of 0.25 at the
  paper's smallest discordance (0.25: haystacks found at the ends and lost in the middle);
- RULER's effective length (RULER, Table 3): samples per task for the task-set score's two-sided 5%
  test to see ctxlens's stated gap of 10 points with binary samples at the most variable rate (0.5):
  (z_0.975 + z_0.8)^2 50^2 / (13 x 10^2);
- masking the top positional heads (the rope-distance paper, Section 4.3.2): the passkeys the
  randomization test needs against 19 draws spread 0.8 +- 0.08 (``findings.masking``, simulated);
- the CE gain over the last doubling (the intrinsic-entropy paper, Section 2.2): in a profile its test is
  the anytime-valid sign test over windows (``findings.lines.loss.sign_test``), which needs 161 windows to
  see ctxlens's stated share of 0.65 windows gaining (the paper states no size); its rounds re-run the
  part with more windows after the suite (``profile.rounds``).

The other continuous lines (suffix perplexity, ACCS, the plateau, positional heads, intrinsic
entropy) need their items' spread, which only the first run shows: the plan says "pilot", and the
card then names the items its test needs (``findings.card.decide``). The needle lines run in rounds
(``profile.rounds``) until they decide, so their affordable n is the grid's plus what the time the
suite leaves buys at the grid's pace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ctxlens.core.papers import RULER_TASKS
from ctxlens.core.stats import normal_quantile
from ctxlens.findings.lines.loss import SIGN_SHARE, sign_needs
from ctxlens.findings.lines.needle import MIN_GAP as RULER_GAP
from ctxlens.findings.long_sequence import MIN_DIP, MIN_DROP, dip_needs, drop_needs
from ctxlens.findings.masking import PLANNED_PASSKEYS
from ctxlens.profile.suite import NEEDLE_DEPTHS
from ctxlens.profile.types import ModelState

RULER_SD = 50.0  # points: a binary sample's largest SD (at a rate of 0.5)
PLAN_AT_L = 0.8  # the needle's accuracy at L the plan assumes (the card re-plans from the rows)
PLAN_DISCORDANCE = MIN_DIP  # the dip plan's discordance: the paper's smallest (the card uses the observed)
RERUN_ROUNDS = ("loss-vs-length",)  # its rounds run the whole part again: their cost depends on when it decides,
# so the plan does not buy them up front; they take the time the suite leaves (``profile.rounds``)


@dataclass(frozen=True)
class LineNeed:
    """One card line's row of the plan: the part it reads, its item (``unit``) and that part's option
    counting it, the items the plan affords, those its test needs a priori (None: from a pilot), how
    that was found, and the part's planned minutes."""

    key: str
    part: str
    option: str
    unit: str
    planned: int | None
    needs: int | None
    how: str
    minutes: float


def _ruler_needs() -> int:
    z = normal_quantile(0.975) + normal_quantile(0.8)
    return math.ceil((z * RULER_SD / RULER_GAP) ** 2 / len(RULER_TASKS))


LINES = (  # card line, part, the option counting its items, unit, a-priori need (None: pilot), how
    ("effective_length", "ruler", "n_samples", "samples per task", _ruler_needs,
     f"a {RULER_GAP:g}-point gap, binary samples at 0.5"),
    ("retrieval_2l", "niah-depth", "n_samples", "haystacks",
     lambda: drop_needs(PLAN_AT_L, len(NEEDLE_DEPTHS)),
     f"a drop of {MIN_DROP:g} from {PLAN_AT_L:g}, anytime test"),
    ("middle_dip", "niah-depth", "n_samples", "haystacks", lambda: dip_needs(PLAN_DISCORDANCE),
     f"a dip of {MIN_DIP:g}, discordance {PLAN_DISCORDANCE:g}, anytime test"),
    ("usable_context", "loss-vs-length", "n_samples", "windows", sign_needs,
     f"a share of {SIGN_SHARE:g} of windows gaining, anytime sign test (rounds re-run the part)"),
    ("ppl_2l", "suffix-ppl", "n_sequences", "sequences", None, "pilot"),
    ("accs_depth", "accs-layers", "n_sequences", "windows", None, "pilot"),
    ("accs_plateau", "accs-boundary", "n_sequences", "windows", None, "pilot"),
    ("positional_heads", "positional-heads", "n_samples", "prompts", None, "pilot"),
    ("masking_effect", "head-masking", "n_passkey", "passkeys", lambda: PLANNED_PASSKEYS,
     "a drop of 0.3 below random draws spread 0.8 +- 0.08, 19 draws (the card re-plans from the draws' spread)"),
    ("ce_entropy", "intrinsic-entropy", "n_samples", "windows", None, "pilot"),
)


def part_needs(part: str) -> list[tuple[str, str, int | None, str]]:
    """``part``'s card lines as (line, option, items its test needs a priori or None for a pilot, unit):
    what deciding them takes, said where the budget leaves the part out (``profile.budget``)."""
    return [(key, option, need() if need else None, unit) for key, p, option, unit, need, _how in LINES
            if p == part and key != "retrieval_2l"]


@dataclass(frozen=True)
class Need:
    """What a part's lines need a priori: ``n`` items of ``option`` (the most any of ``lines`` needs), and
    whether they come in rounds after the suite (the needle grid: ``profile.rounds``) rather than at once."""

    part: str
    option: str
    n: int
    lines: tuple[str, ...]
    rounds: bool


def a_priori(length: int, train: int | None) -> list[Need]:
    """Per part, the items its card lines need a priori (``LINES`` with a need; retrieval at L vs 2L only
    where L is at least the training length), for the budget's decision step (``profile.budget``)."""
    found: dict[str, Need] = {}
    for key, part, option, _unit, need, _how in LINES:
        if need is None or (key == "retrieval_2l" and not (train and length >= train)) or part in RERUN_ROUNDS:
            continue
        n, had = need() or 0, found.get(part)
        if n <= 0:  # a planner that finds no n (an effect it cannot reach): nothing to buy
            continue
        found[part] = Need(part, option, max(n, had.n if had else 0), (*(had.lines if had else ()), key),
                           part == "niah-depth")
    return list(found.values())


def line_needs(state: ModelState, leftover: float = 0.0) -> list[LineNeed]:
    """The plan's row per card line of a profile record ``state`` (its ``parts``), the needle lines'
    affordable haystacks raised by what ``leftover`` seconds buy at the grid's planned pace (the
    rounds); retrieval at L vs 2L only where L is at least the training length."""
    parts = {p["name"]: p for p in state["parts"]}
    L, train = int(state["size"]["length"]), state["info"].get("train_length")
    out = []
    for key, part, option, unit, need, how in LINES:
        if key == "retrieval_2l" and not (train and L >= train):
            continue
        p = parts.get(part)
        if p is None or p.get("status") == "left out":
            out.append(LineNeed(key, part, option, unit, None, need() if need else None, how, 0.0))
            continue
        planned = p["options"].get(option)
        if planned is not None and option == "n_passkey":
            planned *= len(p["options"].get("depths") or [1])  # per depth in the options, in all on the card
        if planned and part == "niah-depth" and leftover > 0 and p.get("planned_s"):
            planned += int(leftover / (p["planned_s"] / planned))
        out.append(LineNeed(key, part, option, unit, planned, need() if need else None, how, p["planned_s"] / 60))
    return out


def table(needs: list[LineNeed]) -> list[str]:
    """The plan's lines as printed: per card line its part, items planned and needed, and minutes."""
    rows = [f"  {'card line':<18} {'part':<18} {'n planned':>10} {'n needed':>9} {'minutes':>8}  {'unit; how'}"]
    for n in needs:
        planned = "-" if n.planned is None else str(n.planned)
        needed = "pilot" if n.needs is None else str(n.needs)
        flag = "" if n.needs is None or n.planned is None or n.planned >= n.needs else "  UNDERPOWERED"
        rows.append(f"  {n.key:<18} {n.part:<18} {planned:>10} {needed:>9} {n.minutes:>8.1f}  {n.unit}; {n.how}"
                    + flag)
    return rows
