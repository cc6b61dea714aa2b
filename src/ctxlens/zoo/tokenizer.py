"""The zoo's byte-level tokenizer; it lives in ``ctxlens.data.tokenizer`` (tasks use it too)."""

from ctxlens.data.tokenizer import EOS, byte_tokenizer

__all__ = ["EOS", "byte_tokenizer"]
