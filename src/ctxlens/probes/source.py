"""Option groups of the experiments that cut windows of token ids from a text source.

``SourceOptions``: which source, how many windows per length and from which seed (token-loss,
loss-vs-length, intrinsic-entropy and, through ``RopeOptions``, the five RoPE experiments).
``LengthSweepOptions`` adds what the two visible-context sweeps of "Intrinsic Entropy of Context
Length Scaling in LLMs" (Section 2.2.2) share: forwards batched up to a token budget, each length once.
``bos`` (every group): unset (auto), the tokenizer's BOS goes first when the tokenizer puts one
before any text it encodes (``ctxlens.probes.windows.tokenizer_adds_bos``), as the model was trained.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, Seed, Tokens, option


@dataclass
class SourceOptions:
    """Windows of token ids from a text source: ``n_samples`` per length, drawn reproducibly from ``seed``."""

    source: str = option("sotu", "text source: sotu (natural prose, ctxlens.data.realtext), builtin[:SPLIT] (the "
                                 "synthetic corpus), a .txt/.jsonl/.parquet file or folder, hf:DATASET, or random "
                                 "(uniform random token ids)")
    lengths: list[Tokens] = option(factory=lambda: [512], help="window lengths, in tokens")
    n_samples: Count = option(4, "windows (inputs) per length")
    seed: Seed = option(0, "seed of the windows drawn from the source")
    text_field: str = option("text", "field holding the text in .jsonl, .parquet and hf: sources")
    bos: bool | None = option(None, "put the tokenizer's BOS before every window; unset (auto): when the "
                                    "model's tokenizer adds one to text it encodes (never before random ids)")


@dataclass
class LengthSweepOptions(SourceOptions):
    """Windows scored at several visible context lengths, batched up to ``batch_tokens`` per forward."""

    batch_tokens: Tokens = option(1 << 16, "tokens per forward (windows are batched up to this)")

    def validate(self) -> None:
        if len(set(self.lengths)) != len(self.lengths):
            raise CtxlensError(f"Option 'lengths' repeats a value ({self.lengths}); list each length once.")
