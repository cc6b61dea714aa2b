"""``rope-theta-sweep``: suffix perplexity, needle retrieval and last-layer ACCS per RoPE base theta.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section 4,
Figure 2, Table 8: the same trained weights are run under many RoPE bases theta, without
retraining, and three views are compared per theta: suffix perplexity (intrinsic), single-needle
retrieval accuracy at several lengths (extrinsic; the paper uses RULER S-NIAH), and ACCS of the
last layer with the distant half of the prefix shuffled (representation level). Similar
perplexity can come with very different retrieval and ACCS.

The needle probe comes in two styles (``needle_style``): ``corpus``, the built-in single-needle
retrieval (``ctxlens.probes.passkey.needle_accuracy``: a corpus key-value fact at
``needle_depth`` of the prompt, asked at its end, the format the zoo models were trained on),
scored as greedy exact match by teacher forcing; and ``ruler``, RULER's S-NIAH passkey
(``niah_single_1`` from the task engine, greedy decoding scored as RULER does;
``ctxlens.probes.passkey.ruler_needle_accuracy``), the paper's own probe. Unset, it is corpus on a
zoo model and ruler on any other (``defaults``); rows record it (``needle_style``). One unit per theta;
rows carry a ``measure`` column (suffix-ppl | needle | accs). The model's own RoPE is restored after every unit.

On a model with a RoPE per layer type (Gemma 3: sliding layers base 1e4, global 1e6) the sweep
changes the global layers' base unless ``rope_layers`` says otherwise (sliding, all); rows
carry ``rope_layer_types`` (the types swept, "all" on a one-RoPE model) and ``own_theta`` (their
own base).

A model whose tokenizer adds a BOS reads it first in the suffix-perplexity and ACCS windows (``bos``,
unset: auto); the ACCS boundary is a fraction of the text prefix after it, never moving the BOS
(``probes.suffix.prefix_shuffle``), and those rows record ``bos``. The needle probe builds its own
prompts (``ctxlens.probes.passkey``).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated

from ctxlens.core.columns import Column
from ctxlens.core.options import Count, Fraction, Layers, NonEmpty, PositiveFloat, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import Defaults, DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import BOS, LENGTH, NLL, SEED, WINDOWS, N, declare, pick
from ctxlens.experiments.registry import DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, register
from ctxlens.probes import suffix as sx
from ctxlens.probes.passkey import RULER_BUDGET, needle_accuracy, ruler_needle_accuracy
from ctxlens.probes.perplexity import suffix_perplexity

if typing.TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.GeometryOptions):
    thetas: Annotated[list[PositiveFloat], NonEmpty] = option(
        factory=lambda: [1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6], help="RoPE bases theta swept, one unit each")
    ppl_lengths: list[Tokens] = option(factory=lambda: [512, 2048],
                                            help="sequence lengths of the suffix perplexity, in tokens")
    accs_lengths: list[Tokens] = option(factory=lambda: [2048], help="sequence lengths of the ACCS, in tokens")
    boundary: Fraction = option(0.5, "ACCS: the first boundary x (text prefix length) tokens after the BOS, if "
                                      "any, are shuffled")
    layers: Layers = option(factory=lambda: [-1], help="ACCS layers, negative from the end (the paper: "
                                                                 "the last); unset (null): every layer")
    needle_lengths: list[Tokens] = option(factory=lambda: [256, 512, 1024, 2048],
                                               help="prompt lengths of the needle probe, in tokens; empty: no probe")
    n_needles: Count = option(20, "needle probes per length")
    needle_depth: Fraction = option(0.5, "where the fact sits in the prompt: 0 the start, 1 just before the question")
    needle_style: typing.Literal["corpus", "ruler"] = option(
        "corpus", "needle probe: corpus (the zoo models' format, teacher-forced) or ruler (RULER's S-NIAH "
                  "niah_single_1, greedy); unset: corpus on a zoo model, ruler on any other")
    rope_layers: str | None = option(None, "layer types swept on models with a RoPE per layer type: global, "
                                           "sliding, all or a layer type; unset: global")

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.ppl_lengths, "ppl_lengths")
        self.check_lengths(self.accs_lengths, "accs_lengths")


def plan(config: Config) -> list[Unit]:
    return [{"theta": float(theta), "seed": config.seed} for theta in config.thetas]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    if config.needle_lengths:
        lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    own = cache.setdefault("own_rope", lm.rope_snapshot())
    changed = lm.set_rope(theta=unit["theta"], layers=config.rope_layers)
    swept = list(changed) if lm.rope_per_layer_type else []  # changed layer types
    try:
        rows = [{"measure": "suffix-ppl", **_ppl(lm, config, length, cache)} for length in config.ppl_lengths]
        rows += [{"measure": "needle", "needle_style": config.needle_style, **_needle(lm, config, length, cache)}
                 for length in config.needle_lengths]
        for length in config.accs_lengths:
            rows += [{"measure": "accs", **row} for row in _accs(lm, config, length, cache)]
    finally:
        lm.restore_rope(own)
    own_theta = own.parameters[swept[0]]["rope_theta"] if swept else own.parameters["rope_theta"]
    return [{"own_theta": own_theta, "rope_layer_types": ",".join(swept) or "all", **row} for row in rows]


def _needle(lm: LM, config: Config, length: int, cache: Cache) -> Row:
    if config.needle_style == "ruler":
        return ruler_needle_accuracy(lm, length, config.needle_depth, config.n_needles, config.seed)
    return needle_accuracy(lm, length, config.needle_depth, config.n_needles, config.seed, config.batch_size, cache)


def _ppl(lm: LM, config: Config, length: int, cache: Cache) -> Row:
    cut = sx.suffix_windows(lm, config, config.ppl_lengths + config.accs_lengths, cache)
    windows = cut.at(length)  # [n, length]
    return {"length": length, **sx.window_coords(config, cut, length, n_sequences=windows.shape[0]),
            **suffix_perplexity(lm, windows, config.suffix_len, config.batch_size)}


def _accs(lm: LM, config: Config, length: int, cache: Cache) -> list[Row]:
    cut = sx.suffix_windows(lm, config, config.ppl_lengths + config.accs_lengths, cache)
    windows = cut.at(length)  # [n, length]
    shuffle = sx.prefix_shuffle(length - config.suffix_len, config.boundary, bos=cut.bos)
    layers = lm.layer_indices(config.layers)
    positions, results = sx.measure(lm, config, windows, [shuffle], layers)
    coords = {"length": length, **sx.window_coords(config, cut, length, positions=len(positions),
                                                   n_sequences=windows.shape[0], boundary=config.boundary)}
    return [sx.geometry_row(coords, shuffle, stream, layer, results[(0, stream, layer)], config.condition_number)
            for stream in config.streams for layer in layers]


def defaults(info: ModelInfo, config: Config, given: frozenset[str], extrapolate: bool) -> Defaults:
    """The needle in the zoo's wording on a zoo model, in RULER's on any other."""
    if "needle_style" in given:
        return Defaults()
    return Defaults({"needle_style": "corpus" if info.zoo else "ruler"},
                    () if info.zoo else ("needle probe in RULER's wording (niah_single_1): not a zoo model",))


def work(config: Config, unit: Unit) -> list[Work]:
    """Suffix-perplexity windows, needle prompts (with their answers) and ACCS windows (twice:
    as they are and shuffled) of one theta."""
    new = RULER_BUDGET if config.needle_style == "ruler" else 8
    return ([Work(config.n_sequences, n) for n in config.ppl_lengths]
            + [Work(config.n_needles, n, config.n_needles * new) for n in config.needle_lengths]
            + [Work(2 * config.n_sequences, n) for n in config.accs_lengths])


COLUMNS = declare(
    SEED, LENGTH, WINDOWS, BOS, NLL, N,
    pick("positions", "boundary", "perturb_start", "perturb_end", "window", "stream", "layer", "self_sim",
         "anisotropy", "accs", "mean_dot"),
    Column("theta", float, "", "the RoPE base theta the unit runs with", low=0.0),
    Column("own_theta", float, "", "the model's own RoPE base theta", low=0.0),
    Column("rope_layer_types", str, "", "the layer types swept ('all' on a one-RoPE model)"),
    Column("measure", str, "", "which view the row is: 'suffix-ppl', 'needle' or 'accs'",
           choices=("suffix-ppl", "needle", "accs")),
    Column("needle_style", str, "", "how the needle haystack is made: the zoo corpus's wording or RULER's",
           choices=("corpus", "ruler")),
    Column("needle_depth", float, "fraction", "relative depth of the needle"),
    Column("accuracy", float, "fraction", "share of needles retrieved"),
    Column("prompt_tokens", float, "tokens", "mean tokens of the needle prompts"),
    Column("needles_lost", int, "count", "needles cut by truncation"),
)


register(Experiment(
    "rope-theta-sweep", Config, plan, run, needs=("rope", "residual", "token_loss"), doc=summary(__doc__),
    defaults=defaults, work=work,
    paper="geometry", section="Section 4, Figure 2, Table 8",
    smoke=Smoke({"thetas": [1000, 10000, 100000], "ppl_lengths": [64], "accs_lengths": [64], "needle_lengths": [160],
                 "n_needles": 4, "n_sequences": 4, "suffix_len": 8},
                at_length=lambda L: {**SMOKE_SEQUENCES, "thetas": [50000.0], "ppl_lengths": [L], "accs_lengths": [L],
                                     "needle_lengths": []}),
    demo=(DemoStep("rope", {**DEMO_GEOMETRY, "thetas": [2500.0, 1e4, 4e4, 1.6e5], "ppl_lengths": [T, 2 * T],
                            "accs_lengths": [2 * T], "needle_lengths": [T // 2, T, 2 * T], "n_sequences": 4,
                            "n_needles": 8},
                   {**DEMO_GEOMETRY, "thetas": [1e4, 1e5], "ppl_lengths": [T], "accs_lengths": [T],
                    "needle_lengths": [T], "n_sequences": 2, "n_needles": 2}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
