"""``rope-theta-sweep``: suffix perplexity, needle retrieval and last-layer ACCS per RoPE base theta.

Seed 000 ("How much do contextualized representations encode long-range context?"), Section 4,
Figure 2, Table 8: the same trained weights are run under many RoPE bases theta, without
retraining, and three views are compared per theta: suffix perplexity (intrinsic), single-needle
retrieval accuracy at several lengths (extrinsic; the paper uses RULER S-NIAH), and ACCS of the
last layer with the distant half of the prefix shuffled (representation level). Similar
perplexity can come with very different retrieval and ACCS.

The needle probe is the built-in single-needle retrieval (``ctxlens.probes.passkey
.needle_accuracy``: a corpus key-value fact at ``needle_depth`` of the prompt, asked at its
end), scored as greedy exact match by teacher forcing; the task engine's S-NIAH renders other
prompts, so it is not used here (the rows of existing runs stay the same). One unit per theta;
rows carry a ``measure`` column (suffix-ppl | needle | accs). The model's own RoPE is restored after every unit.

On a model with a RoPE per layer type (Gemma 3: sliding layers base 1e4, global 1e6) the sweep
changes the global layers' base unless ``rope_layers`` says otherwise (sliding, all); rows
carry ``rope_layer_types`` (the types swept, "all" on a one-RoPE model) and ``own_theta`` (their
own base).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlens.core.options import Layers
from ctxlens.core.errors import CtxlensError
from ctxlens.probes import suffix as sx
from ctxlens.probes.passkey import needle_accuracy
from ctxlens.probes.perplexity import suffix_perplexity
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register


@dataclass
class Config(sx.GeometryOptions):
    thetas: list[float] = field(default_factory=lambda: [1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6])
    ppl_lengths: list[int] = field(default_factory=lambda: [512, 2048])
    accs_lengths: list[int] = field(default_factory=lambda: [2048])
    boundary: float = 0.5  # ACCS: shuffle prefix tokens [0, boundary * prefix length)
    layers: Layers = field(default_factory=lambda: [-1])  # ACCS layers (paper: the last)
    needle_lengths: list[int] = field(default_factory=lambda: [256, 512, 1024, 2048])  # empty: no probe
    n_needles: int = 20
    needle_depth: float = 0.5  # where the fact sits in the prompt: 0 = start, 1 = just before the question
    rope_layers: str | None = None  # layer types swept on per-type RoPE models: global (default) | sliding | all

    def validate(self) -> None:
        super().validate()
        positive("thetas", self.thetas)
        if not self.thetas:
            raise CtxlensError("thetas is empty; pass RoPE bases to sweep, e.g. --thetas 10000,50000,500000.")
        self.check_lengths(self.ppl_lengths, "ppl_lengths")
        self.check_lengths(self.accs_lengths, "accs_lengths")
        positive("needle_lengths", self.needle_lengths)
        positive("n_needles", self.n_needles)
        sx.check_boundaries("boundary", [self.boundary])
        if not 0.0 <= self.needle_depth <= 1.0:
            raise CtxlensError(
                f"needle_depth must lie in [0, 1], got {self.needle_depth}; 0.5 puts the fact mid-prompt."
            )


def plan(config: Config) -> list[dict]:
    return [{"theta": float(theta), "seed": config.seed} for theta in config.thetas]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    if config.needle_lengths:
        lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    own = cache.setdefault("own_rope", lm.rope_snapshot())
    changed = lm.set_rope(theta=unit["theta"], layers=config.rope_layers)
    swept = list(changed) if lm.rope_per_layer_type else []  # changed layer types
    try:
        rows = [{"measure": "suffix-ppl", **_ppl(lm, config, length, cache)} for length in config.ppl_lengths]
        rows += [{"measure": "needle", **needle_accuracy(lm, length, config.needle_depth, config.n_needles,
                                                         config.seed, config.batch_size, cache)}
                 for length in config.needle_lengths]
        for length in config.accs_lengths:
            rows += [{"measure": "accs", **row} for row in _accs(lm, config, length, cache)]
    finally:
        lm.restore_rope(own)
    own_theta = own.parameters[swept[0]]["rope_theta"] if swept else own.parameters["rope_theta"]
    return [{"own_theta": own_theta, "rope_layer_types": ",".join(swept) or "all", **row} for row in rows]


def _ppl(lm, config: Config, length: int, cache: dict) -> dict:
    cut = sx.suffix_windows(lm, config, config.ppl_lengths + config.accs_lengths, cache)
    windows = cut.at(length)  # [n, length]
    return {"length": length, "source": config.source, "cut_length": cut.cut_length,
            "prefix_len": length - config.suffix_len, "suffix_len": config.suffix_len,
            "n_sequences": windows.shape[0],
            **suffix_perplexity(lm, windows, config.suffix_len, config.batch_size)}


def _accs(lm, config: Config, length: int, cache: dict) -> list[dict]:
    cut = sx.suffix_windows(lm, config, config.ppl_lengths + config.accs_lengths, cache)
    windows = cut.at(length)  # [n, length]
    prefix_len = length - config.suffix_len
    shuffle = sx.prefix_shuffle(prefix_len, config.boundary)
    layers = lm.layer_indices(config.layers)
    positions = sx.suffix_positions(length, config.suffix_len, config.suffix_positions)
    results = sx.measure_accs(lm, windows, [shuffle], layers=layers, streams=config.streams, positions=positions,
                              batch_size=config.batch_size, seed=config.seed, covariance=config.condition_number)
    coords = {"length": length, "source": config.source, "cut_length": cut.cut_length,
              "prefix_len": prefix_len, "suffix_len": config.suffix_len,
              "positions": len(positions), "n_sequences": windows.shape[0], "boundary": config.boundary}
    return [sx.geometry_row(coords, shuffle, stream, layer, results[(0, stream, layer)], config.condition_number)
            for stream in config.streams for layer in layers]


register(Experiment("rope-theta-sweep", Config, plan, run, needs=("rope", "residual", "token_loss"),
                    doc=__doc__.splitlines()[0]))
