"""Small BPE tokenizers trained in memory on the built-in corpus, for the task tests."""

from __future__ import annotations

import functools

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


@functools.lru_cache(maxsize=1)
def _training_text() -> list[str]:
    from ctxlens.data import corpus
    from ctxlens.tasks import words
    from ctxlens.tasks.haystack import NOISE

    docs = list(corpus.documents(0, 30, split="train"))
    extra = [NOISE, " ".join(words.ADJECTIVES), " ".join(words.NOUNS), " ".join(words.VERBS)]
    return docs + extra


@functools.lru_cache(maxsize=4)
def trained_bpe(kind: str, vocab: int = 600) -> PreTrainedTokenizerFast:
    """A BPE trained on the built-in corpus: 'bytelevel' (GPT-2 style), 'metaspace' (SentencePiece
    style, with a prefix space) or 'whole' (no pre-tokenizer: merges may cross spaces and newlines)."""
    tok = Tokenizer(models.BPE(unk_token=None if kind == "bytelevel" else "<unk>"))
    if kind == "bytelevel":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    elif kind == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        alphabet = []
    else:
        tok.normalizer = normalizers.NFC()
        alphabet = []
    specials = ["<|endoftext|>"] + ([] if kind == "bytelevel" else ["<unk>"])
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, initial_alphabet=alphabet,
                                  show_progress=False)
    texts = _training_text()
    if kind != "bytelevel":  # make every printable ASCII character known
        texts = [*texts, "".join(chr(c) for c in range(32, 127)) + "\n"]
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
