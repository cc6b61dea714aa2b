"""Tokenizers for the task tests: the zoo's byte tokenizer and a small byte-level BPE."""

from __future__ import annotations

import pytest

from ._tokenizers import trained_bpe


@pytest.fixture(scope="session")
def byte_tok():
    from ctxlens.zoo.tokenizer import byte_tokenizer

    return byte_tokenizer()


@pytest.fixture(scope="session")
def bpe_tok():
    return trained_bpe("bytelevel")
