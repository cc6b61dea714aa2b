"""Exact-length fitting: prompt + budget <= L, >= 99 % of L, ids == the tokenizer's own encoding.

Truths: for the byte tokenizer the ids of a prompt are its UTF-8 bytes; for trained BPEs they
are ``tokenizer.encode(prompt)`` (one full encoding); ``fit_knob`` is checked against brute force.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks import RULER_TASKS, generate
from ctxlens.tasks.fit import fit_knob
from ctxlens.tasks.tokens import normalize

from ._tokenizers import trained_bpe

# lengths at which one haystack word costs under 1 % of L for the byte tokenizer (cwe's minimum is ~6K)
LENGTH = {t: 8192 if t == "cwe" else 4096 for t in RULER_TASKS}


@pytest.mark.parametrize("task", RULER_TASKS)
def test_byte_prompts_fill_the_length_exactly(task, byte_tok):
    L = LENGTH[task]
    for s in generate(task, byte_tok, L, 3, seed=5, template="plain", cache=False):
        assert s.input_ids == list(s.prompt.encode("utf-8"))
        assert s.n_tokens + s.budget <= L
        assert s.n_tokens + s.budget >= math.ceil(0.99 * L)


@pytest.mark.parametrize("kind", ["bytelevel", "metaspace", "whole"])
def test_bpe_ids_equal_a_full_encoding(kind):
    """Piecewise counting where the tokenizer allows it, full encodings where it does not."""
    tok = trained_bpe(kind)
    for task in ("niah_single_2", "niah_multikey_3", "vt", "fwe", "qa_2"):
        for s in generate(task, tok, 4096, 2, seed=1, template="plain", cache=False, verify=True):
            assert s.input_ids == tok.encode(s.prompt)
            assert 0.99 * 4096 <= s.n_tokens + s.budget <= 4096


def test_unchecked_piecewise_ids_still_match_for_a_regex_bpe(bpe_tok):
    for s in generate("niah_multivalue", bpe_tok, 4096, 4, seed=2, template="plain", cache=False):
        assert s.meta["tokenization"] == "pieces"
        assert s.input_ids == bpe_tok.encode(s.prompt)


def test_too_short_length_is_a_clear_error(byte_tok):
    with pytest.raises(CtxlensError, match="needs more than 256 tokens.*use lengths of at least"):
        generate("qa_2", byte_tok, 256, 1, cache=False)
    with pytest.raises(CtxlensError, match="budget"):
        generate("niah_single_1", byte_tok, 100, 1, cache=False)


def test_budget_override_is_respected(byte_tok):
    s = generate("niah_single_1", byte_tok, 512, 2, budget=16, cache=False)
    assert all(x.budget == 16 and 0.99 * 512 <= x.n_tokens + 16 <= 512 for x in s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=60), st.integers(0, 600), st.integers(0, 80))
def test_fit_knob_finds_the_largest_fitting_value_of_a_monotone_count(steps, target, start):
    cum = [0]
    for s in steps:
        cum.append(cum[-1] + s)
    hi = len(cum) - 1
    calls = []
    found = fit_knob(lambda n: calls.append(n) or cum[n], target, start, 0, hi)
    fitting = [n for n in range(hi + 1) if cum[n] <= target]
    if not fitting:
        assert found is None
    else:
        assert found == (max(fitting), cum[max(fitting)])
    assert len(calls) <= 2 * math.ceil(math.log2(hi + 2)) + 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 100), min_size=1, max_size=60), st.integers(0, 100), st.integers(0, 80))
def test_fit_knob_stops_and_only_returns_checked_fitting_values(values, target, start):
    hi = len(values) - 1
    found = fit_knob(lambda n: values[n], target, start, 0, hi)  # any count, monotone or not
    if found is not None:
        n, c = found
        assert c == values[n] <= target
    else:
        assert values[0] > target


def test_normalize_moves_whitespace_to_boundaries_and_keeps_the_text():
    pieces = ["a.", "\n\nb ", " c", "d  ", "\ne", "x", "\ny"]
    out = normalize(pieces)
    assert "".join(out) == "".join(pieces) and len(out) == len(pieces)
    # newlines join punctuation and spaces before them, not a word; spaces start the next piece
    assert out == ["a.\n\n", "b", "  c", "d  \n", "e", "x", "\ny"]
