"""The paper's controls: seeded perturbations, fixed suffix tokens, compression rate, finding criteria."""

import lzma
import random

import pytest
import torch

from ctxlens import CtxlensError
from ctxlens.data.periodic import periodic_sequence, sample_seed
from ctxlens.experiments.accs_length import periodic_windows
from ctxlens.experiments.anisotropy_compression import equal_count_bins
from ctxlens.experiments.collapse_modes import rank_edges
from ctxlens.findings.accs import PLATEAU_THRESHOLD, depth_trend, plateau, spearman
from ctxlens.probes import suffix as sx
from ctxlens.probes.perturb import Shuffle, compression_rate, token_bytes

IDS = torch.arange(1000, 1100).repeat(3, 1)  # [3, 100], distinct tokens per row


def test_shuffle_is_a_seeded_permutation_of_the_range_only():
    s = Shuffle(10, 60)
    out = s.apply(IDS, [0, 1, 2], seed=5)
    assert torch.equal(out[:, :10], IDS[:, :10]) and torch.equal(out[:, 60:], IDS[:, 60:])
    for row in out:
        assert sorted(row[10:60].tolist()) == list(range(1010, 1060))  # same unigram content
    assert not torch.equal(out[0], out[1])  # each sample has its own permutation
    assert torch.equal(out, Shuffle(10, 60).apply(IDS.clone(), [0, 1, 2], seed=5))  # same for every caller/model
    assert not torch.equal(out, s.apply(IDS, [0, 1, 2], seed=6))
    assert torch.equal(s.apply(IDS[1:2], [1], seed=5), out[1:2])  # a row depends on its sample index, not its batch


def test_local_shuffle_mixes_only_within_windows():
    out = Shuffle(0, 90, window=20).apply(IDS, [0, 1, 2], seed=0)
    for row in out:
        for start in range(0, 90, 20):
            end = min(start + 20, 90)
            assert sorted(row[start:end].tolist()) == list(range(1000 + start, 1000 + end))
    assert not torch.equal(out[:, :90], IDS[:, :90])
    assert torch.equal(Shuffle(0, 90, window=1).apply(IDS, [0, 1, 2], seed=0), IDS)
    with pytest.raises(CtxlensError, match="inside the prefix"):
        Shuffle(0, 101).apply(IDS, [0, 1, 2], seed=0)


def test_suffix_tokens_are_the_same_at_every_length():
    class Tiny:
        vocab_size, tokenizer = 50, None

    options = sx.SuffixOptions(source="random", n_sequences=4, suffix_len=8)
    cut = sx.suffix_windows(Tiny, options, [32, 128], {})
    short, long = cut.at(32), cut.at(128)
    assert cut.cut_length == 128 and short.shape == (4, 32) and long.shape == (4, 128)
    assert torch.equal(short, long[:, -32:])


def test_periodic_windows_end_with_the_start_of_the_pattern_at_every_length():
    period_len, stride, suffix = 20, 6, 8
    by_length = {n: periodic_windows(3, n, suffix, period_len=period_len, stride=stride, seed=1, low=3, high=90)
                 for n in (50, 77, 200)}
    for i in range(3):
        pattern = periodic_sequence(period_len, vocab_size=90, period_len=period_len, stride=stride,
                                    seed=sample_seed(1, i), low=3)  # a copy starts at 0
        for n, w in by_length.items():
            assert w.shape == (3, n)
            assert w[i, -suffix:].tolist() == pattern[:suffix].tolist()
            text = w[i, :-suffix].tolist()
            assert any(text[j:j + period_len] == pattern.tolist() for j in range(n - suffix - period_len + 1))
    with pytest.raises(CtxlensError, match="longer than period_len"):
        from ctxlens.experiments.accs_length import Config

        Config(suffix_len=30, period_len=20).validate()


def test_suffix_positions():
    assert sx.suffix_positions(100, 8) == list(range(92, 100))
    assert sx.suffix_positions(100, 8, 4) == [93, 95, 97, 99]
    assert sx.suffix_positions(100, 8, 1) == [96]


def test_compression_rate_is_lzma_size_over_raw_size():
    text = b"the cat sat on the mat. " * 80
    rng = random.Random(0)
    noise = bytes(rng.randrange(256) for _ in range(2000))
    assert compression_rate(text) < 0.1 < 0.99 < compression_rate(noise)
    raw = lzma.compress(noise, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 9}])
    assert compression_rate(noise) == len(raw) / len(noise)
    assert token_bytes(torch.tensor([1, 300]), None, 1000) == b"\x01\x00\x2c\x01"  # two bytes per id
    with pytest.raises(CtxlensError, match="empty prefix"):
        compression_rate(b"")


def test_equal_count_bins_and_rank_edges():
    assert equal_count_bins([0.5, 0.1, 0.9, 0.3, 0.7, 0.2], 3) == [1, 0, 2, 1, 2, 0]
    edges = rank_edges(257, 8)
    assert edges[0][0] == 1 and edges[-1][1] == 257
    assert all(b + 1 == c for (_, b), (c, _) in zip(edges, edges[1:]))  # contiguous, no gaps or overlaps
    assert rank_edges(5, 0) == [(r, r) for r in range(1, 6)]


# --------------------------------------------------------------------------------------
# Finding criteria against the paper's own numbers (the geometry paper, Table 4, ACCS column)
# --------------------------------------------------------------------------------------

TABLE4 = {  # relative right boundary 0.1 .. 1.0
    "GPT+RoPE": [0.039, 0.039, 0.037, 0.037, 0.036, 0.036, 0.035, 0.035, 0.035, 0.035],
    "GPT+ALiBi": [0.360] * 9 + [0.263],
    "Griffin": [0.275, 0.210, 0.183, 0.170, 0.167, 0.163, 0.161, 0.158, 0.154, 0.123],
    "mLSTM": [0.727, 0.728, 0.728, 0.728, 0.728, 0.725, 0.718, 0.707, 0.691, 0.527],
    "HybridMamba": [0.380, 0.328, 0.298, 0.280, 0.255, 0.232, 0.223, 0.219, 0.214, 0.163],
    "Mamba-2": [0.798, 0.798, 0.798, 0.798, 0.798, 0.797, 0.796, 0.791, 0.772, 0.609],
}


def _rows(curve, layer=5):
    return [{"boundary": round(0.1 * (i + 1), 1), "accs": v, "layer": layer, "stream": "residual"}
            for i, v in enumerate(curve)]


def test_plateau_criterion_classifies_the_papers_table_4_as_the_paper_does():
    verdict = {model: plateau(_rows(curve))["plateau"] for model, curve in TABLE4.items()}
    # Section 5.2: recurrent models and ALiBi plateau; hybrids and RoPE (beyond training) do not
    assert verdict == {"GPT+RoPE": False, "GPT+ALiBi": True, "Griffin": False, "mLSTM": True,
                       "HybridMamba": False, "Mamba-2": True}
    assert plateau(_rows([0.5] * 10))["plateau"] is None  # no drop at all: undecided
    deep = plateau(_rows(TABLE4["Griffin"], 3) + _rows(TABLE4["Mamba-2"], 7))
    assert deep["layer"] == 7 and deep["plateau"] is True
    assert PLATEAU_THRESHOLD == 0.25


def test_depth_trend_and_spearman():
    falling = [{"layer": i, "accs": 0.9 - 0.1 * i + (0.05 if i == 2 else 0), "stream": "residual"} for i in range(6)]
    assert depth_trend(falling)["reproduced"] is True
    rising = [{**r, "accs": -r["accs"]} for r in falling]
    assert depth_trend(rising)["reproduced"] is False
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6*2/(4*15)
    assert spearman([1, 2, 3], [5, 5, 5]) is None
