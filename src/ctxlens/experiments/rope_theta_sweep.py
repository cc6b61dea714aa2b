"""``rope-theta-sweep``: suffix perplexity, needle retrieval and last-layer ACCS per RoPE base theta.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section 4,
Figure 2, Table 8: the same trained weights are run under many RoPE bases theta, without
retraining, and three views are compared per theta: suffix perplexity (intrinsic), single-needle
retrieval accuracy at several lengths (extrinsic; the paper uses RULER S-NIAH), and ACCS of the
last layer with the distant half of the prefix shuffled (representation level). Similar
perplexity can come with very different retrieval and ACCS.

The needle probe here is a minimal single-needle retrieval (``ctxlens.data.corpus
.retrieval_probes``: a key-value fact at ``needle_depth`` of the prompt, asked at its end),
scored as greedy exact match by teacher forcing; it is a stand-in until the task engine
provides RULER's S-NIAH tasks. One unit per theta; rows carry a ``measure`` column
(suffix-ppl | needle | accs). The model's own RoPE is restored after every unit.

On a model with a RoPE per layer type (Gemma 3: sliding layers base 1e4, global 1e6) the sweep
changes the global layers' base unless ``rope_layers`` says otherwise (sliding, all); rows
carry ``rope_layer_types`` (the types swept, "all" on a one-RoPE model) and ``own_theta`` (their
own base).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Annotated

import torch

from ctxlens.core.options import Fraction, NonEmpty, PositiveFloat, PositiveInt, option
from ctxlens.data.corpus import MIN_PROBE_DISTANCE, corpus_text, retrieval_probes
from ctxlens.probes import suffix as sx
from ctxlens.experiments.base import Experiment
from ctxlens.experiments.registry import (
    DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, DemoStep, Smoke, register, summary,
)
from ctxlens.lm import rope as _rope


@dataclass
class Config(sx.GeometryOptions):
    thetas: Annotated[list[PositiveFloat], NonEmpty] = option(
        factory=lambda: [1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6], help="RoPE bases theta swept, one unit each")
    ppl_lengths: list[PositiveInt] = option(factory=lambda: [512, 2048],
                                            help="sequence lengths of the suffix perplexity, in tokens")
    accs_lengths: list[PositiveInt] = option(factory=lambda: [2048], help="sequence lengths of the ACCS, in tokens")
    boundary: Fraction = option(0.5, "ACCS: prefix tokens [0, boundary x prefix length) are shuffled")
    layers: list[int] | None = option(factory=lambda: [-1], help="ACCS layers, negative from the end (the paper: "
                                                                 "the last); unset (null): every layer")
    needle_lengths: list[PositiveInt] = option(factory=lambda: [256, 512, 1024, 2048],
                                               help="prompt lengths of the needle probe, in tokens; empty: no probe")
    n_needles: PositiveInt = option(20, "needle probes per length")
    needle_depth: Fraction = option(0.5, "where the fact sits in the prompt: 0 the start, 1 just before the question")
    rope_layers: str | None = option(None, "layer types swept on models with a RoPE per layer type: global, "
                                           "sliding, all or a layer type; unset: global")

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.ppl_lengths, "ppl_lengths")
        self.check_lengths(self.accs_lengths, "accs_lengths")


def plan(config: Config) -> list[dict]:
    return [{"theta": float(theta), "seed": config.seed} for theta in config.thetas]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    if config.needle_lengths:
        lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    own = cache.setdefault("own_rope", (copy.deepcopy(_rope.text_config(lm.model).rope_parameters), lm.extrapolate))
    cache["max_length"] = max(config.ppl_lengths + config.accs_lengths)
    changed = lm.set_rope(theta=unit["theta"], layers=config.rope_layers)
    swept = list(changed) if _rope.rope_keys(_rope.text_config(lm.model)) else []  # changed layer types
    try:
        rows = [{"measure": "suffix-ppl", **_ppl(lm, config, length, cache)} for length in config.ppl_lengths]
        rows += [{"measure": "needle", **needle_accuracy(lm, length, config, cache)}
                 for length in config.needle_lengths]
        for length in config.accs_lengths:
            rows += [{"measure": "accs", **row} for row in _accs(lm, config, length, cache)]
    finally:
        _rope.restore_rope(lm.model, own[0], lm.text_prefix)
        lm.allow_extrapolation(own[1])
    own_theta = own[0][swept[0]]["rope_theta"] if swept else own[0]["rope_theta"]
    return [{"own_theta": own_theta, "rope_layer_types": ",".join(swept) or "all", **row} for row in rows]


def _ppl(lm, config: Config, length: int, cache: dict) -> dict:
    windows = sx.source_windows(lm, config, length, cache)  # [n, length]
    return {"length": length, "source": config.source, "cut_length": cache["max_length"],
            "prefix_len": length - config.suffix_len, "suffix_len": config.suffix_len,
            "n_sequences": windows.shape[0],
            **sx.suffix_perplexity(lm, windows, config.suffix_len, config.batch_size)}


def _accs(lm, config: Config, length: int, cache: dict) -> list[dict]:
    windows = sx.source_windows(lm, config, length, cache)  # [n, length]
    prefix_len = length - config.suffix_len
    shuffle = sx.prefix_shuffle(prefix_len, config.boundary)
    layers = sx.resolve_layers(lm, config.layers)
    positions = sx.suffix_positions(length, config.suffix_len, config.suffix_positions)
    results = sx.measure_accs(lm, windows, [shuffle], layers=layers, streams=config.streams, positions=positions,
                              batch_size=config.batch_size, seed=config.seed, covariance=config.condition_number)
    coords = {"length": length, "source": config.source, "cut_length": cache["max_length"],
              "prefix_len": prefix_len, "suffix_len": config.suffix_len,
              "positions": len(positions), "n_sequences": windows.shape[0], "boundary": config.boundary}
    return [sx.geometry_row(coords, shuffle, stream, layer, results[(0, stream, layer)], config.condition_number)
            for stream in config.streams for layer in layers]


# --------------------------------------------------------------------------------------
# Minimal single-needle probe (to be replaced by the task engine's S-NIAH)
# --------------------------------------------------------------------------------------


def _bytes_per_token(lm, seed: int, cache: dict) -> float:
    if "bytes_per_token" not in cache:
        text = corpus_text(seed, 8192, split="test")
        cache["bytes_per_token"] = len(text.encode()) / max(1, len(lm.tokenizer.encode(text, add_special_tokens=False)))
    return cache["bytes_per_token"]


def needle_prompts(lm, length: int, config: Config, cache: dict) -> tuple[list[list[int]], list[list[int]], int]:
    """(prompt ids, answer ids, lost) for ``n_needles`` probes of about ``length`` tokens in all.

    Each prompt is cut on the left so that prompt + answer fits in ``length`` tokens; ``lost``
    counts probes whose fact did not survive the cut (they are scored as misses).
    """
    tok = lm.tokenizer
    total_bytes = max(int(length * _bytes_per_token(lm, config.seed, cache)), MIN_PROBE_DISTANCE + 1)
    distance = min(total_bytes, max(MIN_PROBE_DISTANCE, round((1.0 - config.needle_depth) * total_bytes)))
    prompts, answers, lost = [], [], 0
    for probe in retrieval_probes(config.seed, config.n_needles, distance_bytes=distance, total_bytes=total_bytes):
        answer = tok.encode(probe.answer, add_special_tokens=False)
        prompt = tok.encode(probe.prompt, add_special_tokens=False)[-(length - len(answer)):]
        lost += len(tok.encode(probe.prompt[-probe.distance_bytes:], add_special_tokens=False)) > len(prompt)
        prompts.append(prompt)
        answers.append(answer)
    return prompts, answers, lost


@torch.inference_mode()
def needle_accuracy(lm, length: int, config: Config, cache: dict) -> dict:
    """Greedy exact-match accuracy: every answer token is the argmax given the prompt and the
    answer tokens before it (equivalent to greedy decoding reproducing the answer)."""
    lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    prompts, answers, lost = needle_prompts(lm, length, config, cache)
    hits = 0
    pad = lm.tokenizer.eos_token_id or 0
    for b0 in range(0, len(prompts), config.batch_size):
        seqs = [p + a for p, a in zip(prompts[b0:b0 + config.batch_size], answers[b0:b0 + config.batch_size])]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])  # [B, width]; right padding is causal-safe
        lm.check_length(width)
        hidden = lm.base_forward(ids.to(lm.device)).last_hidden_state  # [B, width, d]
        for row, (p, a) in enumerate(zip(prompts[b0:b0 + config.batch_size], answers[b0:b0 + config.batch_size])):
            at = torch.arange(len(p) - 1, len(p) - 1 + len(a), device=hidden.device)
            logits = lm.model.get_output_embeddings()(hidden[row, at])  # [len(a), vocab]
            post = sx.head_post(lm)
            logits = post(logits) if post else logits
            hits += bool((logits.argmax(-1).cpu() == torch.tensor(a)).all())
    return {"length": length, "n": len(prompts), "needle_depth": config.needle_depth, "accuracy": hits / len(prompts),
            "prompt_tokens": sum(map(len, prompts)) / len(prompts), "needles_lost": lost,
            "flag": f"{lost} needle(s) cut off by the length limit" if lost else None}


register(Experiment(
    "rope-theta-sweep", Config, plan, run, needs=("rope", "residual", "token_loss"), doc=summary(__doc__),
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
))
