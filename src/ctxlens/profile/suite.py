"""What ``ctxlens profile`` measures: the parts of the suite, each an existing experiment whose
sample counts grow with one size knob.

Every part keeps its paper's structure and relates its lengths to the profile's length ``L``
(the model's training length, or less when the budget caps it; ``ctxlens.profile.budget``):

- retrieval: a single needle at the long-sequence paper's depth grid (0, 20, 40, 50, 60, 80, 100) x
  lengths L/2, L, 2L, in RULER's wording on its fact-free haystack (``niah_single_1``: the repeated
  noise sentences), each haystack the same at every depth and length (paired), and RULER's 13 tasks
  at L/4 .. L (the long-sequence paper, Section 4, Tables 1-3; RULER, Table 3);
- loss with l visible tokens, l = 4 .. L, fitted with C0 + C / l^gamma (C0 >= 0, bootstrapped over
  windows), and the intrinsic entropy and dimension of the final features at six doublings up to
  L/2 (the intrinsic-entropy paper, Sections 2.2, 4);
- suffix perplexity given up to 2L of context (paired over sequences), ACCS by layer at L/2, L, 2L
  and by perturbation boundary at L over at least 12 windows (the geometry paper, Sections 4-5);
- for RoPE models: pair contributions, dominant dimension vs distance, positional heads (one rho
  per head and prompt over at least 17 prompts) and masking the top 5% / 10% of them against at
  least 19 random draws on 90 paired passkeys at L (the rope-distance paper, Section 4).

Each floor is what the card's test on that line needs (``ctxlens.findings.lines``); the card states
n and the smallest effect n can detect.

``Size.scale`` in [0, 1] moves every sample count from its floor to its ceiling; ``Size.reduced``
names parts the budget runs below their statistical floor (intrinsic entropy with fewer samples than
twice the feature width), which the plan flags. A part that needs what the model lacks (RoPE, a
tokenizer, residual capture) is planned out with the reason (``skip_reason``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ctxlens.core.papers import RULER_TASKS
from ctxlens.core.texts import NATURAL
from ctxlens.findings.masking import MIN_DRAWS, PLANNED_PASSKEYS  # the masking test's design
from ctxlens.lm.info import ModelInfo
from ctxlens.profile.types import Options, SizeRecord

CORE_TASKS = RULER_TASKS  # all 13 run at every size: RULER's effective length is a score over the whole set
BOUNDARIES = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]  # as the demo: b_min, 0.5 and 1.0 are what the plateau reads
SAMPLES_PER_FEATURE = 2  # intrinsic entropy: n >= 2 x d_model
NEEDLE_BUDGET = 32  # tokens generated per needle prompt: a 7-digit number and some words (as passkey.RULER_BUDGET)
MIN_TASK_LENGTH = 128  # shorter prompts cannot hold a RULER template
MASKING_WINDOWS = 10  # perplexity windows per masking condition (Figure 9's check): a mean over windows, not one
PAIR_FACTOR = 1.1  # the q/k scan's forward and each input's per-head correlation, beside the pairs the probe times


@dataclass(frozen=True)
class Size:
    """The size of one profile: its length ``length`` (L), the sample knob ``scale`` in [0, 1],
    whether lengths beyond the model's positions are allowed, the parts run ``reduced``, whether
    the model has a tokenizer (head masking scores the passkey only with one), the sample counts
    the power plan set (``counts``: (part, option, n), a floor under the knob's count) and the
    seconds it reserved for the needle rounds after the suite (``reserve``; ``profile.budget``)."""

    length: int
    scale: float
    extrapolate: bool = False
    reduced: frozenset[str] = frozenset()
    tokenizer: bool = True
    counts: tuple[tuple[str, str, int], ...] = ()
    reserve: float = 0.0
    source: str = NATURAL  # the text source of every part that reads text (``--source``)

    def as_dict(self) -> SizeRecord:
        """The record's form (``profile.json``'s ``size``)."""
        counts: dict[str, dict[str, int]] = {}
        for part, option, n in self.counts:
            counts.setdefault(part, {})[option] = n
        return {"length": self.length, "scale": round(self.scale, 4), "extrapolate": self.extrapolate,
                "reduced": sorted(self.reduced), "tokenizer": self.tokenizer, "counts": counts,
                "reserve_s": round(self.reserve, 1), "source": self.source}

    @classmethod
    def of(cls, record: SizeRecord) -> Size:
        """The size a record's ``size`` holds (``as_dict``; older records lack counts and reserve, and read the
        synthetic corpus, the default before the natural text)."""
        counts = tuple((part, option, int(n)) for part, given in (record.get("counts") or {}).items()
                       for option, n in given.items())
        return cls(int(record["length"]), float(record["scale"]), bool(record.get("extrapolate", False)),
                   frozenset(record.get("reduced") or ()), bool(record.get("tokenizer", True)), counts,
                   float(record.get("reserve_s") or 0.0), str(record.get("source") or "builtin"))

    def options(self, part: Part, info: ModelInfo) -> Options:
        """``part``'s options at this size: its own, each count the power plan set raised to it, and the
        profile's text source where the part's experiment reads one."""
        from ctxlens.experiments.registry import get_experiment

        options = part.options(self, info)
        if "source" in {f.name for f in dataclasses.fields(get_experiment(part.experiment).Config)}:
            options["source"] = self.source
        for name, option, n in self.counts:
            if name == part.name and option in options:
                options[option] = max(int(options[option]), n)
        return options


def knob(scale: float, low: int, high: int) -> int:
    """``low`` at scale 0, ``high`` at scale 1, rounded."""
    return int(round(low + max(0.0, min(1.0, scale)) * (high - low)))


def lengths(size: Size, info: ModelInfo, fractions: Iterable[float], floor: int = 1) -> list[int]:
    """The lengths ``fraction x L`` the model can run (beyond its positions only with
    ``size.extrapolate``), at least ``floor``, each once, ascending."""
    out = {int(f * size.length) for f in fractions}
    return sorted(n for n in out if n >= floor and info.allows(n, size.extrapolate))


def powers(start: int, top: int) -> list[int]:
    """start, 2 start, 4 start, ... below ``top``, then ``top``."""
    out, n = [], start
    while n < top:
        out.append(n)
        n *= 2
    return [*out, top]


@dataclass(frozen=True)
class Part:
    """One part of the suite: run ``experiment`` into ``OUT/<model>/<name>`` with ``options(size, info)``.

    ``factor``: its cost per token against a plain forward (captured states, per-query work), for
    the estimate, beside the (query, key) pairs of a part with ``pairs`` (the probe times one pair);
    ``drop_order``: parts the budget cannot afford are planned out highest first."""

    name: str
    experiment: str
    what: str
    options: Callable[[Size, ModelInfo], Options]
    drop_order: int
    needs_tokenizer: bool = False
    factor: float = 1.0
    reducible: bool = False  # can run below its statistical floor (flagged) before it is dropped
    generates: bool = False  # decodes answers (its pace differs from a forward's: early stops, batches)
    pairs: bool = False  # computes (query, key) pairs' RoPE contributions (the probe then times one pair's cost)
    notes: Callable[[Size, ModelInfo], list[str]] = field(default=lambda size, info: [])


NEEDLE_DEPTHS = [0.0, 20.0, 40.0, 50.0, 60.0, 80.0, 100.0]  # the long-sequence paper's grid, Tables 2-3


def _niah(size: Size, info: ModelInfo) -> dict:
    """The long-sequence paper's depth grid (Tables 2-3: 0, 20, 40, 50, 60, 80, 100) at L/2, L and 2L.
    Sample i of the run is one haystack (same key, value and noise) at every depth and length, so
    the card's needle lines pair cells over haystacks (``ctxlens.findings.long_sequence``). Haystacks
    from 2 (the old floor's cost: 42 prompts) to 40, as the budget allows: 30-40 give the exact
    McNemar test at Holm's 0.025 about 80% power for a 0.25 dip in the middle when the middle is at
    ceiling (``core.mcnemar.mcnemar_power``); fewer are flagged underpowered on the card."""
    return {"task": "niah_single_1", "lengths": lengths(size, info, (1 / 2, 1, 2), MIN_TASK_LENGTH),
            "depths": list(NEEDLE_DEPTHS), "n_samples": knob(size.scale, 2, 40), "batch_size": 4,
            "max_new_tokens": NEEDLE_BUDGET}


def _ruler(size: Size, info: ModelInfo) -> dict:
    """All 13 RULER tasks at every size (RULER's effective length is the mean over the whole set);
    the budget moves the samples per task."""
    return {"tasks": list(CORE_TASKS), "lengths": lengths(size, info, (1 / 4, 1 / 2, 1), MIN_TASK_LENGTH),
            "n_samples": knob(size.scale, 2, 20), "batch_size": 4}


def _loss(size: Size, info: ModelInfo) -> dict:
    """One forward of L tokens per window serves every length l = 4 .. L (``scoring="positions"``: the
    token at offset l sees exactly l tokens; up to 64 targets within l/64 of l), so a window costs L
    tokens instead of 32 x 2L. Windows are the items of the paired gain over the last doubling
    (``findings.lines.loss``): 8 at the floor, 128 at the ceiling."""
    return {"lengths": powers(4, size.length), "n_samples": knob(size.scale, 8, 128), "n_scored": 64, "band": 64,
            "scoring": "positions"}


def _suffix_ppl(size: Size, info: ModelInfo) -> dict:
    """At least 8 sequences: the 2L vs L line is a paired t test over sequences."""
    return {"lengths": lengths(size, info, (1 / 4, 1 / 2, 1, 2), 64), "n_sequences": knob(size.scale, 8, 32),
            "batch_size": 2}


def _accs_layers(size: Size, info: ModelInfo) -> dict:
    """Windows are the sampling unit of the card's window bootstrap (``findings.accs``): at least 12, so
    its verdict can fire (>= 8) and anisotropy pairs 66+ distinct windows."""
    return {"lengths": lengths(size, info, (1 / 2, 1, 2), 64), "n_sequences": knob(size.scale, 12, 32),
            "batch_size": 2}


def _accs_boundary(size: Size, info: ModelInfo) -> dict:
    """As ``_accs_layers``: at least 12 windows for the plateau ratio's bootstrap interval."""
    return {"lengths": lengths(size, info, (1,), 64), "boundaries": BOUNDARIES,
            "n_sequences": knob(size.scale, 12, 32), "batch_size": 2}


def _rope_dims(size: Size, info: ModelInfo) -> dict:
    return {"lengths": lengths(size, info, (1 / 2, 1, 2)), "n_samples": knob(size.scale, 1, 8)}


def _dominant(size: Size, info: ModelInfo) -> dict:
    return {"lengths": lengths(size, info, (1 / 2, 1, 2)), "n_samples": knob(size.scale, 1, 8),
            "n_queries": knob(size.scale, 32, 256), "top_k": min(100, size.length // 4)}


def _heads(size: Size, info: ModelInfo) -> dict:
    """The rope-distance paper's 17 prompts (Section 4.2.1) at the floor: one rho per (head, prompt), the items
    of the card's t test across prompts (Bonferroni over heads; with 17 prompts and sd 0.3 of a head's
    per-prompt rho over prompts, it detects a mean rho of about 0.4 at 80% power over 270 heads)."""
    return {"lengths": [size.length], "n_samples": knob(size.scale, 17, 32), "n_queries": knob(size.scale, 32, 256),
            "top_k": min(100, size.length // 4), "fractions": [0.05, 0.1], "control": "rope-zeroed"}


def _masking(size: Size, info: ModelInfo) -> dict:
    """The rope-distance paper's masking (Section 4.3.2, Figures 8-9) at the design its test can decide
    with (``ctxlens.findings.masking``): random draws per fraction from ``MIN_DRAWS`` (a randomization
    p can reach 1/20 = 0.05) upward, and ``PLANNED_PASSKEYS`` passkeys (30 per depth), the same passkeys
    under every condition: with the random draws' accuracies spread as a modest 0.8 +- 0.08, 19 draws and
    90 passkeys see the stated drop of 0.3 at both fractions with 80% power (simulated,
    ``masking.masking_power``). The passkeys are read at L (at least ``MIN_TASK_LENGTH``), the length
    the card's other retrieval lines read, and Figure 9's perplexity check reads
    ``MASKING_WINDOWS`` or more windows of L per condition, not one. The top heads are detected with
    ``_heads``' options, so they are the positional-heads part's selection. Masking scores the known
    passkeys with one teacher-forced forward each (no decoding), so the cost is the prefill: at L = 1024
    on SmolLM2-135M, 41 conditions x (90 passkey prompts + 10 windows) x ~1,024 tokens ~ 4.2M tokens, about
    100 min at the ~700 tokens/s its forwards ran at L = 1024 on the reference machine's 2 cores (the
    old design, 30 passkeys at L/4 decoded and one window, took 44 min)."""
    tasks = ["passkey", "perplexity"] if size.tokenizer else ["perplexity"]
    heads = _heads(size, info)
    at = max(size.length, MIN_TASK_LENGTH)
    depths = [0.1, 0.5, 0.9]
    return {"lengths": [at if info.allows(at, size.extrapolate) else size.length], "tasks": tasks,
            "fractions": heads["fractions"], "n_draws": knob(size.scale, MIN_DRAWS, 99),
            "n_passkey": math.ceil(PLANNED_PASSKEYS / len(depths)), "depths": depths,
            "n_samples": knob(size.scale, MASKING_WINDOWS, 2 * MASKING_WINDOWS), "detect_length": size.length,
            "detect_samples": heads["n_samples"], "n_queries": heads["n_queries"], "top_k": heads["top_k"]}


def entropy_samples(info: ModelInfo, reduced: bool) -> int:
    """Windows per length of the intrinsic entropy: 2 x d_model (at least 64), a quarter when reduced."""
    need = max(64, SAMPLES_PER_FEATURE * (info.d_model or 32))
    return max(16, need // 4) if reduced else need


ENTROPY_FRACTIONS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2)  # six doublings up to L/2: the line needs >= 6


def _entropy(size: Size, info: ModelInfo) -> dict:
    """Six doublings L/64 .. L/2 (16 .. 512 at L = 1024; at least 4 tokens), with a bootstrap and a
    length permutation over the windows (``findings.lines.entropy``)."""
    n = entropy_samples(info, "intrinsic-entropy" in size.reduced)
    found = lengths(size, info, ENTROPY_FRACTIONS, 4)
    return {"lengths": found, "n_samples": n, "kde_samples": min(n, 2048), "batch_tokens": 1 << 14,
            "n_boot": knob(size.scale, 100, 200)}


def _entropy_notes(size: Size, info: ModelInfo) -> list[str]:
    few = len(lengths(size, info, ENTROPY_FRACTIONS, 4))
    notes = [f"UNTESTED: {few} lengths between 4 and L/2; the entropy line needs 6"] if few < 6 else []
    if "intrinsic-entropy" not in size.reduced:
        return notes
    return notes + [f"UNDERPOWERED: {entropy_samples(info, True)} windows per length, fewer than "
                    f"{SAMPLES_PER_FEATURE} x d_model = {entropy_samples(info, False)}: the budget cannot afford "
                    "the full count"]


PARTS: tuple[Part, ...] = (  # in the order they run: the card's lines first, the cheapest of them first
    Part("loss-vs-length", "loss-vs-length", "loss with l visible tokens, l = 4 .. L (one forward per window), and "
         "the power-law fit", _loss, drop_order=1),
    Part("niah-depth", "niah-depth", "single needle, depth x length, RULER's wording, fact-free haystack", _niah,
         drop_order=2, needs_tokenizer=True, generates=True),
    Part("ruler", "ruler", "RULER's 13 tasks at L/4 .. L", _ruler, drop_order=3, needs_tokenizer=True,
         generates=True),
    Part("accs-layers", "accs-layers", "ACCS by layer at L/2, L and 2L", _accs_layers, drop_order=4, factor=1.3),
    Part("suffix-ppl", "suffix-ppl", "suffix perplexity given up to 2L of context", _suffix_ppl, drop_order=5),
    Part("accs-boundary", "accs-boundary", "ACCS by perturbation boundary at L", _accs_boundary, drop_order=6,
         factor=1.3),
    Part("positional-heads", "positional-heads", "positional heads (per-prompt rho over >= 17 prompts)", _heads,
         drop_order=7, factor=PAIR_FACTOR, pairs=True),
    Part("head-masking", "head-masking", "masking the top 5% / 10% positional heads vs >= 19 random draws", _masking,
         drop_order=8, factor=1.3, generates=True, pairs=True),
    Part("intrinsic-entropy", "intrinsic-entropy", "intrinsic entropy and dimension of the final features", _entropy,
         drop_order=9, reducible=True, notes=_entropy_notes),
    Part("dominant-dimension", "dominant-dimension", "dominant RoPE dimension vs distance", _dominant, drop_order=10,
         factor=PAIR_FACTOR, pairs=True),
    Part("rope-dims", "rope-dims", "RoPE pair contributions", _rope_dims, drop_order=11, factor=PAIR_FACTOR,
         pairs=True),
)


def skip_reason(part: Part, supports: tuple[str, ...], has_tokenizer: bool) -> str:
    """Why ``part`` cannot run on a model whose family supports ``supports``; '' when it can."""
    from ctxlens.experiments.registry import get_experiment

    missing = [n for n in get_experiment(part.experiment).needs if n not in supports]
    if missing:
        why = {"rope": "the model has no rotary position embedding (RoPE)",
               "head_mask": "its attention heads cannot be masked"}
        return "; ".join(why.get(m, f"its family does not support the '{m}' analysis") for m in missing)
    if part.needs_tokenizer and not has_tokenizer:
        return "the model has no tokenizer, so task prompts cannot be written"
    return ""
