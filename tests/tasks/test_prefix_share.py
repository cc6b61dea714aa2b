"""Prefix-shared prefill: the same greedy answers as independent prefill, prompt tokens run as the
prefix arithmetic says (the trie of the prompts where the cache can be cut back), a fallback for
models whose cache cannot be reused, and identical niah-depth rows with sharing on and off."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm import from_model
from ctxlens.tasks.backends import TransformersBackend
from ctxlens.tasks.prefix import PrefixStore, shared_lengths
from tests.conftest import build_model

_g = torch.Generator().manual_seed(5)


def _ids(n: int) -> list[int]:
    return torch.randint(32, 127, (n,), generator=_g).tolist()


S = _ids(60)
A, B, C = S + _ids(20), S + _ids(20), S[:40] + _ids(40)  # A, B share 60 ids; C shares 40 with both
D = S[:50] + _ids(30)  # a later call: shares 50 ids with A and B, 40 with C


def _backend(family: str, byte_tok, share: bool, batch_size: int = 1) -> TransformersBackend:
    lm = from_model(build_model(family, vocab_size=257))
    lm.tokenizer = byte_tok
    backend = TransformersBackend(lm, batch_size, share_prefix=share)
    backend.eos = set()  # random weights may emit the end-of-text id; compare full budgets
    return backend


def _trie_nodes(prompts: list[list[int]]) -> int:
    """Distinct non-empty prefixes of the prompts: what a prefill that never repeats a token runs."""
    return len({tuple(p[:k]) for p in prompts for k in range(1, len(p) + 1)})


def test_shared_lengths_are_the_longest_common_prefix_with_any_other_prompt():
    prompts = [A, B, C, D, _ids(30), S[:20]]
    for i, p in enumerate(prompts):  # brute force over all pairs
        best = max(next((k for k, (x, y) in enumerate(itertools.zip_longest(p, q)) if x != y), len(p))
                   for j, q in enumerate(prompts) if j != i)
        assert shared_lengths(prompts)[i] == min(best, len(p) - 1)


# family, batch size: prompt tokens run for A, B, C, then for D (independent: 3 x 80, then 80)
CASES = [
    ("llama", 1, _trie_nodes([A, B, C]), 30),  # C cuts A's 60-id prefix back to 40; D cuts it to 50
    ("gemma3_text", 1, 60 + 20 + 20 + 40 + 40, 40),  # sliding layers cannot be cut: C runs its own 40; D starts there
    ("llama", 3, 40 + 3 * 40, 40),  # one batch: the 40 ids all three share, once; D starts there too
]


@pytest.mark.parametrize("family, batch_size, first, second", CASES)
def test_shared_prefill_runs_the_prefix_arithmetic_and_answers_as_independent(family, batch_size, first, second,
                                                                               byte_tok):
    shared, alone = (_backend(family, byte_tok, share, batch_size) for share in (True, False))
    assert shared.generate([A, B, C], [5, 5, 5]) == alone.generate([A, B, C], [5, 5, 5])
    assert (shared.prefill_tokens, alone.prefill_tokens) == (first, 240)
    assert shared.generate([D], [4]) == alone.generate([D], [4])
    assert shared.prefill_tokens == first + second and shared.no_sharing == ""
    assert _trie_nodes([A, B, C]) == 140  # the arithmetic of the first case, by hand: 60 + 20 + 20 + 40


@pytest.mark.parametrize("family", ["mamba2", "mpt"])
def test_models_whose_cache_cannot_be_reused_prefill_every_prompt(family, byte_tok):
    shared, alone = (_backend(family, byte_tok, share) for share in (True, False))
    assert shared.generate([A, B, C], [3, 3, 3]) == alone.generate([A, B, C], [3, 3, 3])
    assert shared.prefill_tokens == 240 and shared.no_sharing


def _fake_cache(n_bytes: int, cut_ok: bool):
    layer = SimpleNamespace(is_croppable=cut_ok, is_sliding=False, keys=torch.zeros(n_bytes, dtype=torch.uint8))
    return SimpleNamespace(layers=[layer])


def test_the_store_keeps_the_newest_and_older_entries_within_its_bytes():
    store = PrefixStore(max_bytes=250)
    store.add(S[:40], _fake_cache(100, False))
    store.add(S[:60], _fake_cache(100, True))
    assert store.best(S[:50] + [0])[0] == 50  # cut back: the 60-id entry keeps every token
    assert store.best(S[:40] + [0])[0] == 40  # both reach 40; the exact 40-id one is not cut
    store.add(S[:10], _fake_cache(100, True))  # 300 bytes: the least recently used goes
    assert [len(k) for k, *_ in store.entries] == [40, 10]
    store.add(S[:5], _fake_cache(1000, True))  # over the bytes on its own: kept, as the newest
    assert [len(k) for k, *_ in store.entries] == [5]
    store.add(S[:45], _fake_cache(10, False))  # 1010 bytes: the 5-id entry goes
    assert [len(k) for k, *_ in store.entries] == [45]
    assert store.best(S[:20])[0] == 0 and store.best(S[:45] + [0])[0] == 45  # not cut, used whole


def test_niah_depth_rows_are_the_same_with_and_without_sharing():
    import ctxlens

    lm = ctxlens.load("zoo:random-llama")
    exp = get_experiment("niah-depth")
    rows, tokens = {}, {}
    for share in (True, False):
        config = make_config(exp.Config, {"lengths": [512], "depths": [0.0, 50.0, 100.0], "n_samples": 3,
                                   "max_new_tokens": 4, "cache": False, "share_prefix": share,
                                   "haystack_source": "builtin"})
        cache: dict = {}
        rows[share] = [r for unit in exp.plan(config) for r in exp.run(lm, config, unit, cache)]
        tokens[share] = cache["backend"].prefill_tokens
    logprobs = {share: [r.pop("gold_logprob") for r in rows[share]] for share in rows}  # forced forward's sums:
    assert logprobs[True] == pytest.approx(logprobs[False], rel=1e-5)  # equal to the order of float32 sums
    assert rows[True] == rows[False]
    assert tokens[False] == sum(r["n_tokens"] for r in rows[False])
    assert tokens[True] < 0.7 * tokens[False]
