"""Row columns shared by several experiments' declarations (``Experiment.columns``), defined once.

A column that several experiments write with one meaning is declared here; an experiment's own
columns stay in its module. ``declare(*parts)`` joins groups and single columns into one
declaration (a name given twice must be the same column); ``narrow`` gives a shared str column the
values one experiment writes (its ``choices``). Ranges come from a column's unit or its ``low`` /
``high`` (see ``ctxlens.core.columns``).
"""

from __future__ import annotations

import dataclasses

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError


def declare(*parts: Column | tuple[Column, ...]) -> tuple[Column, ...]:
    """One declaration from columns and groups of columns, each name once (a name given twice must
    be the same column)."""
    out: dict[str, Column] = {}
    for part in parts:
        for column in (part,) if isinstance(part, Column) else part:
            if out.setdefault(column.name, column) != column:
                raise CtxlensError(f"Column {column.name!r} is declared twice, differently; declare it once.")
    return tuple(out.values())


def narrow(part: Column | tuple[Column, ...], **choices: tuple[str, ...]) -> tuple[Column, ...]:
    """``part`` with the str columns named set to the values one experiment writes, e.g.
    ``narrow(FITS, stage=("measure", "fit"))``; a name ``part`` lacks is refused."""
    group = (part,) if isinstance(part, Column) else part
    missing = set(choices) - {c.name for c in group}
    if missing:
        raise CtxlensError(f"narrow() names {sorted(missing)}, which the group does not hold; name its columns.")
    return tuple(dataclasses.replace(c, choices=tuple(choices[c.name])) if c.name in choices else c for c in group)


# ------------------------------------------------------------------------------------- coordinates
LENGTH = Column("length", int, "tokens", "context length of the unit (tokens in each window or prompt)")
SEED = Column("seed", int, "", "the unit's random seed (any integer)")
SAMPLE = Column("sample", int, "index", "index of the sample (window, prompt) within the unit")
LAYER = Column("layer", int, "index", "layer index, 0 = first")
HEAD = Column("head", int, "index", "attention head index within its layer")
TRANSFORM = Column("transform", str, "", "position transform applied to the model ('none': as loaded)")
SOURCE = Column("source", str, "", "text source the windows were cut from")
FLAG = Column("flag", str, "", "why a value is missing or suspect (None: nothing to report)", optional=True,
              when="a unit cannot be measured as asked (a length its task does not fit, a fit that fails)")
BOS = Column("bos", bool, "", "whether each window starts with the tokenizer's BOS token")
N = Column("n", int, "count", "number of items the row's value is computed over (None when none is finite)",
           optional=True)
KIND = Column("kind", str, "", "which kind of row this is (rows of several kinds share the declaration)")
CONDITION = Column("condition", str, "", "the condition measured (what was changed, or 'none')")
LAYER_TYPE = Column("layer_type", str, "", "the layer's attention type where the model names one "
                                          "(full_attention, sliding_attention, ...)",
                    when="the model names its layers' attention types")
FRACTION = Column("fraction", float, "fraction", "fraction of the heads / context the unit uses (0: none masked)")

# ------------------------------------------------------------------------------- sequence windows
WINDOWS = (
    SOURCE,
    Column("cut_length", int, "tokens", "tokens cut from the source per window (before cropping)"),
    Column("prefix_len", int, "tokens", "tokens before the measured suffix"),
    Column("suffix_len", int, "tokens", "tokens of the measured suffix"),
    Column("n_sequences", int, "count", "windows measured"),
    FLAG,
)

# -------------------------------------------------------------------- representation geometry (ACCS)
ACCS = (
    BOS,
    Column("positions", int, "tokens", "suffix positions whose states are compared"),
    Column("boundary", float, "fraction", "relative right end of the perturbed range, as a fraction of the text "
                                          "prefix (the positions after the BOS, if any; 0: nothing)"),
    Column("perturb_start", int, "tokens", "first perturbed position of the window (1 after a BOS, which is never "
                                           "perturbed)"),
    Column("perturb_end", int, "tokens", "end (exclusive) of the perturbed range, a position of the window"),
    Column("window", int, "tokens", "shuffle window of the perturbation (0: the whole range as one)"),
    Column("stream", str, "", "which hidden states: 'residual' (the residual stream) or 'block' (a block's output)",
           choices=("residual", "block")),
    LAYER,
    N,
    Column("self_sim", float, "cosine", "mean cosine between a state and its perturbed-prefix twin"),
    Column("anisotropy", float, "cosine", "mean pairwise cosine of the states (exact closed form)"),
    Column("accs", float, "cosine", "anisotropy-calibrated self-similarity: self_sim - anisotropy (a difference of "
                                    "two cosines)", low=-2.0, high=2.0),
    Column("mean_dot", float, "", "mean pairwise dot product of the states"),
)
ACCS_SAMPLES = (  # the per-sample rows beside the pooled ones (accs-layers, accs-boundary)
    Column("level", str, "", "'window' rows per sample, 'pair' rows per pair of samples", choices=("window", "pair")),
    SAMPLE,
    Column("sample_self_sim", float, "cosine", "self-similarity of one sample's states"),
    Column("other_sample", int, "index", "the second sample of a cross-sample pair"),
    Column("cross_cos", float, "cosine", "mean cosine between two samples' states"),
)

# ------------------------------------------------------------------------------ RoPE layer and head
ROPE_LAYER = (
    LAYER,
    LAYER_TYPE,
    Column("rope_theta", float, "", "the layer's RoPE base theta", low=0.0),
    Column("rope_type", str, "", "the layer's RoPE scaling type ('default': none)"),
    Column("n_dims", int, "count", "RoPE frequency pairs per head"),
    HEAD,
)
TRAINING = (
    Column("train_length", int, "tokens", "the model's training length (or the train_length option)"),
    Column("beyond_train", bool, "", "whether the unit's length exceeds the training length"),
    BOS,
)
ROPE_UNIT = (TRANSFORM, LENGTH, SEED, *TRAINING, SOURCE)  # what every RoPE experiment's unit carries (probes.rope)
CORRELATION = (
    Column("rho", float, "rho", "Spearman's rho between relative distance and dominant dimension"),
    Column("p_value", float, "p", "two-sided p-value of the row's test"),
    Column("n_distances", int, "count", "distinct relative distances the correlation is computed over"),
    Column("n_pairs", int, "count", "query-key pairs measured"),
)
DISTANCE_BINS = (
    Column("distance_lo", int, "tokens", "lower edge of the relative-distance bin"),
    Column("distance_hi", int, "tokens", "upper edge (exclusive) of the relative-distance bin"),
    Column("dominant_dim", float, "pair index", "mean dominant RoPE frequency pair over the bin's query-key pairs"),
)

# ------------------------------------------------------------------------------- task prompts (RULER)
TASK_ROWS = (
    Column("task", str, "", "RULER-style task name"),
    LENGTH,
    SEED,
    Column("sample", int, "index", "index of the prompt within the unit (None on a flagged unit without samples)",
           optional=True),
    Column("sample_id", str, "", "stable id of the prompt: task/L<length>/s<seed>/<sample>"),
    Column("n_tokens", int, "tokens", "tokens of the rendered prompt"),
    Column("budget", int, "tokens", "tokens the model may generate"),
    Column("fill", float, "fraction", "(prompt tokens + budget) / the length asked for"),
    Column("visible", int, "tokens", "prompt tokens the model sees"),
    Column("template", str, "", "'chat' (the tokenizer's chat template) or 'plain': how the prompt was rendered",
           choices=("chat", "plain")),
    Column("system_prompt", str, "", "the system prompt the template added (None: none)", optional=True),
    Column("depth_percent", float, "percent", "depth of the (first) needle asked for", optional=True),
    Column("depth_target", float, "percent", "depth the needle was placed at", optional=True),
    Column("depth_tokens", int, "tokens", "tokens before the (first) needle", optional=True),
    Column("to_end", int, "tokens", "tokens from the (first) needle to the end of the prompt", optional=True),
    Column("score", float, "percent", "the task's score of the generation, in percent as RULER's tables: the share of "
                                      "expected outputs found ('all') or 100 when any is ('part'); None: not scored "
                                      "(a flagged unit)", optional=True),
    Column("metric", str, "", "the scoring rule ('all' outputs, or 'part' of them)", choices=("all", "part")),
    Column("tokenization", str, "", "how the prompt was tokenised ('pieces': per rendered piece)", optional=True),
    Column("pred", str, "", "the model's generated text; for an item scored 'forced', the decoded gold answer, which "
                            "greedy decoding provably writes first (None unless predictions are kept)", optional=True),
    Column("outputs", list, "", "the expected outputs"),
    Column("scored_by", str, "", "'forced': proven by one teacher-forced forward over prompt + gold answer (every gold "
                                 "token the argmax, the gold text scoring 100), not decoded; 'decoded': decoded "
                                 "greedily", optional=True, choices=("forced", "decoded")),
    Column("gold_logprob", float, "nats", "sum of the log-probabilities of the gold answer's tokens (its first "
                                          "gold_tokens) given the prompt and the gold tokens before them (None: no "
                                          "forced forward, e.g. --forced off or a vllm / openai backend)",
           optional=True, high=0.0),
    Column("gold_tokens", int, "tokens", "gold answer tokens the forced forward scored: all of them, or the first "
                                         "'budget' of a longer one (None: no forced forward)", optional=True),
    FLAG,
)

# ------------------------------------------------------------------------------------ fits and values
FITS = (
    Column("stage", str, "", "'measure' rows, or rows of the fits made over them"),
    Column("quantity", str, "", "what ``value`` is"),
    Column("value", float, "", "the value of ``quantity`` (its unit follows from the quantity)"),
    Column("stderr", float, "", "standard error of ``value``", optional=True, low=0.0),
    Column("fit", str, "", "the fitted form ('linear', 'power_law')", choices=("linear", "power_law")),
    Column("n_points", int, "count", "points the fit is made over"),
    Column("index", int, "rank", "index of the eigenvalue / component the row reports (1: the largest)"),
    Column("threshold", float, "fraction", "eigenvalue threshold of the dimension count"),
    FLAG,
)

# ------------------------------------------------------------------------------------ loss per token
NLL = (
    Column("n_tokens", int, "tokens", "tokens scored"),
    Column("nll", float, "nats", "mean next-token negative log-likelihood", low=0.0),
    Column("nll_se", float, "nats", "standard error of nll over the sequences", low=0.0),
    Column("ppl", float, "", "perplexity, exp(nll)", low=1.0),
)

COMPRESSION_RATE = Column("compression_rate", float, "bits/token", "LZMA compression rate of the prefix")

_SHARED: dict[str, Column] = {}
for _column in (LENGTH, SEED, SAMPLE, TRANSFORM, CONDITION, FRACTION, KIND, LAYER_TYPE, *ACCS, *ACCS_SAMPLES,
                *WINDOWS, *ROPE_LAYER, *TRAINING, *CORRELATION, *DISTANCE_BINS, *FITS, *NLL, COMPRESSION_RATE):
    _SHARED.setdefault(_column.name, _column)


def pick(*names: str) -> tuple[Column, ...]:
    """The shared columns of these names (from the groups above), for an experiment that writes
    some columns of a group but not all of it."""
    return tuple(_SHARED[name] for name in names)
