"""``head-masking``: zero the top Positional Heads vs as many random heads; passkey retrieval and perplexity by length.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.2, Figures 6-9, Appendix A.4: the heads with the strongest distance-dimension
correlation (detected as in ``positional-heads``, at ``detect_length``, under the unit's
transform) are masked, their output zeroed before the output projection (``LM.mask_heads``,
in prefill and generation alike), for the top 5% / 10%, and compared with the same number of
random heads over several draws and with no masking.

Measures per (transform, condition, length): passkey retrieval accuracy per depth (greedy
exact match; a minimal built-in probe, ``ctxlens.probes.passkey``) and perplexity of ``n_samples`` windows
of ``source``. The paper's LongBench QA and code-completion tasks need the task engine and
are not run here yet.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

from ctxlens.core.options import Layers
from ctxlens.core.errors import CtxlensError
from ctxlens.probes import passkey
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import RANK_BY, as_mask, n_selected, random_heads
from ctxlens.probes.extrapolation import applied, train_length
from ctxlens.probes.perplexity import window_nll
from ctxlens.experiments.base import Experiment, positive
from ctxlens.probes.positional_heads import ranked_heads, validate_fractions
from ctxlens.experiments.registry import register

TASKS = ("passkey", "perplexity")


@dataclass
class Config:
    source: str = "builtin"  # text source for perplexity (and detection)
    lengths: list[int] = field(default_factory=lambda: [256, 512, 1024])
    n_samples: int = 2  # perplexity windows per length
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    passkey_style: str = "corpus"  # corpus (zoo models) | classic (hub models)
    depths: list[float] = field(default_factory=lambda: [0.1, 0.5, 0.9])
    n_passkey: int = 4  # probes per depth and length
    fractions: list[float] = field(default_factory=lambda: [0.05, 0.1])
    n_draws: int = 3  # random-head draws per fraction
    rank_by: str = "abs"
    detect_length: int | None = None  # default: the training length
    detect_samples: int = 4
    top_k: int = 100
    n_queries: int = 0
    transforms: list[str] = field(default_factory=lambda: ["none"])
    layers: Layers = None  # heads of these layers only; None: every attention layer
    train_length: int | None = None
    seed: int = 0
    text_field: str = "text"

    def validate(self) -> None:
        common.validate(self)
        validate_fractions(self.fractions)
        positive("n_draws", self.n_draws)
        positive("n_passkey", self.n_passkey)
        positive("detect_samples", self.detect_samples)
        positive("top_k", self.top_k)
        if self.detect_length is not None:
            positive("detect_length", self.detect_length)
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise CtxlensError(f"Option 'tasks' must list some of {', '.join(TASKS)}, got {self.tasks}.")
        if self.passkey_style not in passkey.STYLES:
            raise CtxlensError(f"Option 'passkey_style' must be one of {', '.join(passkey.STYLES)}, "
                               f"got '{self.passkey_style}'.")
        if any(not 0 <= d <= 1 for d in self.depths) or not self.depths:
            raise CtxlensError(f"Option 'depths' must hold fractions in [0, 1], got {self.depths}; "
                               "pass e.g. 0.1,0.5,0.9.")
        if self.rank_by not in RANK_BY:
            raise CtxlensError(f"Option 'rank_by' must be one of {', '.join(RANK_BY)}, got '{self.rank_by}'.")


def conditions(config: Config) -> list[dict]:
    """none, top-f per fraction, random-f per fraction and draw."""
    out = [{"condition": "none", "fraction": 0.0, "draw": 0}]
    out += [{"condition": "top", "fraction": f, "draw": 0} for f in config.fractions]
    out += [{"condition": "random", "fraction": f, "draw": d} for f in config.fractions for d in range(config.n_draws)]
    return out


def plan(config: Config) -> list[dict]:
    return [{"transform": t, **c, "length": length, "seed": config.seed}
            for t in config.transforms for c in conditions(config) for length in config.lengths]


def masked_heads(lm, config: Config, unit: dict, cache: dict) -> list[tuple[int, int]]:
    """The (layer, head) pairs a unit masks."""
    if unit["condition"] == "none":
        return []
    layers = lm.layer_indices(config.layers, attention=True)
    if unit["condition"] == "random":
        everyone = [(layer, h) for layer in layers for h in range(lm.n_heads)]
        return random_heads(everyone, n_selected(unit["fraction"], len(everyone)), config.seed, unit["draw"])
    detect = {"transform": unit["transform"], "length": config.detect_length or train_length(lm, config.train_length)}
    detect_config = _DetectConfig(config)
    ranked = ranked_heads(lm, detect_config, detect, cache)
    return [(r["layer"], r["head"]) for r in ranked[:n_selected(unit["fraction"], len(ranked))]]


class _DetectConfig:
    """The detection view of a head-masking Config (what ``positional-heads`` reads)."""

    def __init__(self, config: Config):
        self.source, self.text_field, self.seed = config.source, config.text_field, config.seed
        self.n_samples, self.top_k, self.n_queries = config.detect_samples, config.top_k, config.n_queries
        self.rank_by, self.layers, self.train_length = config.rank_by, config.layers, config.train_length


def masking(lm, heads: list[tuple[int, int]]):
    """Context manager: ``heads`` output zero (before the output projection) inside the block."""
    return lm.mask_heads(as_mask(heads)) if heads else contextlib.nullcontext()


def _passkey_rows(lm, config: Config, length: int) -> list[dict]:
    lm.require_tokenizer("the passkey probe")
    probes = passkey.probes(lm.tokenizer, length, config.depths, config.n_passkey, config.seed, config.passkey_style)
    rows = []
    for depth in config.depths:
        mine = [p for p in probes if p.depth == depth]
        hits = [passkey.retrieved(lm, p) for p in mine]
        rows.append({"task": "passkey", "depth": depth, "score": sum(hits) / len(hits), "n": len(hits),
                     "n_tokens": max(p.n_tokens for p in mine)})
    return rows


def _perplexity_row(lm, config: Config, length: int, cache: dict) -> dict:
    ids = common.windows(lm, config, length, cache)  # [n_samples, length]
    nll = window_nll(lm, ids)  # [n_samples * (length - 1)]
    mean = float(nll.mean())
    return {"task": "perplexity", "score": math.exp(mean) if math.isfinite(mean) else None, "nll": mean,
            "n": len(ids), "n_tokens": length}


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    heads = masked_heads(lm, config, unit, cache)
    rows = []
    with applied(lm, unit["transform"], train_length(lm, config.train_length)), masking(lm, heads):
        if "passkey" in config.tasks:
            rows += _passkey_rows(lm, config, unit["length"])
        if "perplexity" in config.tasks:
            rows.append(_perplexity_row(lm, config, unit["length"], cache))
    extra = {**common.coordinates(lm, config, unit), "n_masked": len(heads), "heads": [list(h) for h in heads]}
    return [{**row, **extra} for row in rows]


register(Experiment("head-masking", Config, plan, run, needs=("rope", "head_mask"), doc=__doc__.splitlines()[0]))
