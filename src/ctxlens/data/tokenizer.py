"""A byte-level tokenizer that needs no download: 256 byte tokens plus end-of-text.

Every string round-trips exactly; token id = byte value for ids 0..255, so a test can compute
the expected ids of any text as ``list(text.encode("utf-8"))``.
"""

from __future__ import annotations

import typing

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

if typing.TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

EOS = "<|endoftext|>"


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer with vocab 257 (bytes 0..255, then ``<|endoftext|>`` = 256)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=byte_backend(), eos_token=EOS, bos_token=EOS, pad_token=EOS)


def byte_backend() -> Tokenizer:
    """The ``tokenizers`` object of ``byte_tokenizer`` (no transformers import), ``<|endoftext|>`` included."""
    byte_to_symbol = pre_tokenizers.ByteLevel.alphabet()  # 256 printable stand-ins for bytes
    table = _bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    assert set(vocab) == set(byte_to_symbol)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    # what transformers' PreTrainedTokenizerFast installs: no special tokens added to a sequence
    tok.post_processor = processors.TemplateProcessing(single="$A:0", pair="$A:0 $B:1", special_tokens=[])
    return tok


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, n = printable[:], 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(printable, chars)}
