"""The zoo's facts, defined here once for every layer (no torch): its models and its training length.

The zoo is six matched byte-level models, the ctxlens-sized version of the architectures the
geometry paper compares ("How much do contextualized representations encode long-range
context?", Section 3, Table 1, Appendix B). ``ctxlens.zoo.specs`` gives each its architecture
and trains them at ``TRAIN_LENGTH`` (``Recipe.seq_len``); the findings read what each model is
(``ZOO_MODELS``) for runs recorded before ctxlens recorded model info, and ``TRAIN_LENGTH`` when
a run records none; the demo runs them. Each model's ``kind`` and ``position`` are those of its
family's adapter (``ctxlens.lm.families``; a test holds them equal, since findings may not
import ``lm``).
"""

from __future__ import annotations

from dataclasses import dataclass

TRAIN_LENGTH = 512  # the zoo recipe's training context, in bytes (= tokens: the vocabulary is bytes)


@dataclass(frozen=True)
class ZooModel:
    name: str  # as in zoo:NAME
    family: str  # transformers model_type
    kind: str  # transformer | ssm | recurrent | hybrid
    position: str  # rope | alibi | none


ZOO_MODELS: dict[str, ZooModel] = {m.name: m for m in (
    ZooModel("rope", "llama", "transformer", "rope"),
    ZooModel("alibi", "bloom", "transformer", "alibi"),
    ZooModel("mamba2", "mamba2", "ssm", "none"),
    ZooModel("mlstm", "xlstm", "recurrent", "none"),
    ZooModel("griffin", "recurrent_gemma", "hybrid", "rope"),
    ZooModel("hybrid", "bamba", "hybrid", "rope"),
)}
ZOO_NAMES: tuple[str, ...] = tuple(ZOO_MODELS)  # in the zoo's order: attention, then recurrent, then hybrids
