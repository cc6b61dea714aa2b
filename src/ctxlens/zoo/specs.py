"""The matched tiny zoo: six architectures, about one million parameters each, one recipe.

The geometry paper ("How much do contextualized representations encode long-range context?"),
Section 3, Table 1 and Appendix B compare architectures trained identically: same data, same
steps, same seed, roughly equal size. These are the ctxlens-sized versions: byte-level
vocabulary (257), width 128, trained on the built-in corpus at a 512-byte context so that
longer evaluation lengths probe extrapolation. The zoo's names, families and training length
are facts every layer reads (``ctxlens.core.zoo_facts``); this module gives each its architecture
and the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxlens.core.errors import unknown
from ctxlens.core.zoo_facts import TRAIN_LENGTH, ZOO_MODELS, ZOO_NAMES

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")


@dataclass(frozen=True)
class ZooSpec:
    name: str  # one of ctxlens.core.zoo_facts.ZOO_NAMES
    arch: dict[str, object]  # overrides on ctxlens.lm.tiny.tiny_config(family)
    doc: str
    lr: float | None = None  # peak learning rate when not the recipe's (geometry paper, App. B: 1e-3 Griffin, mLSTM)

    @property
    def family(self) -> str:
        """The transformers model_type (``ctxlens.core.zoo_facts.ZOO_MODELS``)."""
        return ZOO_MODELS[self.name].family


@dataclass(frozen=True)
class Recipe:
    """How every zoo model is trained (identical across architectures).

    Every step sees ``batch * seq_len`` tokens. During ``copy_phases`` (triples "until step,
    window length, alphabet", in order) the windows have that length, ``batch * seq_len //
    length`` of them: ``phase_corpus_share`` of them corpus windows, the rest random-period copy
    windows (``ctxlens.data.copy_windows``) of that alphabet: the induction warm-up, short
    windows first. After it, each of the ``batch`` corpus windows is replaced by a
    ``copy_alphabet`` copy window with probability ``copy_share``, which keeps the mechanism.
    Lowercase letters first: with digits in the alphabet from the start the head had not formed
    by step 600; once formed, it extends to digits, which the corpus's answers are made of.
    ``phase_corpus_share`` is 0: with half of the warm-up windows corpus ``alibi`` reached 0.59
    held-out nats/byte (2.15 with pure copy windows), but ``rope`` retrieved nothing with a half,
    a quarter or an eighth (14 / 8 / 4% with pure copy windows). A shorter warm-up (letters until
    step 250, alphanumeric at 256 until 400 and at 512 until 500) gave ``alibi`` 1.42, but ``rope``
    formed no copy head in it (train loss still ln 36 at step 500) and retrieved 0 / 0 / 0
    (held-out 0.596); the letters need their 500 steps.
    ``steps`` is 2500, so 1700 corpus steps follow the warm-up. ``alibi`` learns nothing there
    (train loss stays near ln 26) and learns the corpus from scratch afterwards: with 1500
    steps (700 corpus steps, the learning rate already down to 55% of its peak) it ended at
    2.15 nats/byte, with 2500 at 1.03; ``rope`` went from 0.618 to 0.494 and still retrieves.
    """

    seq_len: int = TRAIN_LENGTH
    batch: int = 8
    copy_phases: tuple[tuple[int, int, str], ...] = field(
        default=((500, 128, "letters"), (650, 256, "alphanumeric"), (800, 512, "alphanumeric")))
    phase_corpus_share: float = 0.0
    copy_share: float = 0.3
    copy_alphabet: str = "alphanumeric"
    steps: int = 2500
    lr: float = 3e-3
    warmup: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 250
    seed: int = 0
    corpus_seed: int = 0
    val_windows: int = 32
    probe_distances: tuple[int, ...] = field(default=(128, 256, 384))
    probes_per_distance: int = 50

    def window_at(self, step: int) -> tuple[int, str | None]:
        """(window length, alphabet of the pure copy phase or None) of training step ``step``."""
        for until, length, alphabet in self.copy_phases:
            if step < until:
                return length, alphabet
        return self.seq_len, None


_D = 128
SPECS = [
    ZooSpec("rope", dict(hidden_size=_D, intermediate_size=3 * _D, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=4, head_dim=32,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                         max_position_embeddings=131072),
            "llama-style attention with RoPE (theta 10000)"),
    ZooSpec("alibi", dict(hidden_size=_D, n_layer=4, n_head=4), "bloom-style attention with ALiBi"),
    ZooSpec("mamba2", dict(hidden_size=_D, num_hidden_layers=6, expand=2, num_heads=8, head_dim=32,
                           state_size=32, chunk_size=64), "Mamba-2 state-space model"),
    ZooSpec("mlstm", dict(hidden_size=_D, num_hidden_layers=4, num_heads=4, mode="train", chunk_size=32),
            "xLSTM with mLSTM blocks", lr=1e-3),
    ZooSpec("griffin", dict(hidden_size=_D, lru_width=_D, intermediate_size=4 * _D,
                            num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
                            head_dim=32, attention_window_size=512),
            "Griffin: RG-LRU recurrence + local attention", lr=1e-3),
    # hybrid: a thin MLP (64) keeps it near a million parameters; chunks of 64 (not 256) keep the
    # reference scan from padding 128-byte windows 2x. In a bare loop on 128-byte copy windows
    # (periods 8-64, as the recipe's) the induction head formed by step ~275 with the attention
    # layer third (index 2; the first layer stays non-attention, as in the geometry paper Appendix B) and
    # lr 1e-3; with it seventh (index 6) not by 275, and not by step 750 inside the recipe.
    ZooSpec("hybrid", dict(hidden_size=_D, intermediate_size=_D // 2, num_hidden_layers=12,
                           attn_layer_indices=[2],
                           mamba_expand=1, mamba_n_heads=4, mamba_d_head=32, mamba_d_state=16,
                           mamba_chunk_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
                           max_position_embeddings=131072),
            "Mamba-2 layers with one attention layer in twelve (8%), bamba-style", lr=1e-3),
]
_BY_NAME = {s.name: s for s in SPECS}
ZOO: dict[str, ZooSpec] = {name: _BY_NAME[name] for name in ZOO_NAMES}  # the zoo's order (tests: one spec per name)
RECIPE = Recipe()


def get_spec(name: str) -> ZooSpec:
    if name not in ZOO:
        raise unknown("zoo model", name, ZOO)
    return ZOO[name]


def build_config(spec: ZooSpec, vocab_size: int, eos_id: int) -> PretrainedConfig:
    """The transformers config of a zoo model (byte vocabulary, eos = bos = pad)."""
    from ctxlens.lm.tiny import tiny_config

    tokens = {"vocab_size": vocab_size}
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        tokens[key] = eos_id
    return tiny_config(spec.family, **tokens, **spec.arch)
