"""Tests for ctxlens.data.sources: every expectation is computed independently of the code
under test (documents written by the test, token ids = UTF-8 bytes of the text)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ctxlens.core.errors import CtxlensError
from ctxlens.data import RandomSource, TextSource, open_source, token_windows
from ctxlens.data.sources import BuiltinSource

EOS = 256  # id of "<|endoftext|>" in the byte tokenizer below


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _gpt2_byte_symbols() -> dict[int, str]:
    """GPT-2's byte -> printable symbol table (the symbols of ByteLevel.alphabet())."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    symbols = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in symbols:
            symbols[b] = chr(256 + extra)
            extra += 1
    return symbols


@pytest.fixture(scope="module")
def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE with no merges: token id == UTF-8 byte value, plus eos = 256."""
    symbols = _gpt2_byte_symbols()
    assert set(symbols.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: byte for byte, symbol in symbols.items()}
    vocab["<|endoftext|>"] = EOS
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


@pytest.fixture(scope="module")
def no_eos_tokenizer(byte_tokenizer) -> PreTrainedTokenizerFast:
    tok = PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer.backend_tokenizer)
    assert tok.eos_token_id is None
    return tok


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_parquet(path: Path, columns: dict[str, list]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(columns).to_parquet(path)
    return path


def write_txt(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def expected_ids(documents: list[str], eos: int | None = EOS) -> list[int]:
    """The byte tokenizer's stream, built by hand: UTF-8 bytes, eos between documents."""
    ids: list[int] = []
    for i, doc in enumerate(documents):
        if i and eos is not None:
            ids.append(eos)
        ids.extend(doc.encode("utf-8"))
    return ids


# --------------------------------------------------------------------------------------
# Documents from each kind of source
# --------------------------------------------------------------------------------------


def test_txt_file_is_one_document(tmp_path):
    text = "Zeile eins\nline two — ünïcödé\r\n日本語\n"
    src = open_source(str(write_txt(tmp_path / "a.txt", text)))
    assert isinstance(src, TextSource) and src.is_text
    assert src.spec == str(tmp_path / "a.txt")
    assert list(src.documents()) == [text]


def test_jsonl_file_skips_blank_lines_and_empty_documents(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"text": "first", "id": 1}\n\n{"text": ""}\n{"text": "   \\n"}\n'
        '{"text": null}\n{"text": "second"}\n',
        encoding="utf-8",
    )
    assert list(open_source(str(path)).documents()) == ["first", "second"]


def test_parquet_file(tmp_path):
    path = write_parquet(tmp_path / "d.parquet", {"text": ["alpha", "", "beta", None, "gamma"],
                                                   "n": [1, 2, 3, 4, 5]})
    assert list(open_source(str(path)).documents()) == ["alpha", "beta", "gamma"]


def test_parquet_is_streamed_in_batches(tmp_path):
    docs = [f"row {i}" for i in range(2500)]  # more than one 1024-row batch
    path = write_parquet(tmp_path / "big.parquet", {"text": docs})
    assert list(open_source(str(path)).documents()) == docs


def test_custom_text_field(tmp_path):
    jsonl = write_jsonl(tmp_path / "a.jsonl", [{"body": "x1", "text": "no"}, {"body": "x2"}])
    parquet = write_parquet(tmp_path / "b.parquet", {"body": ["y1", "y2"], "text": ["n", "n"]})
    assert list(open_source(str(jsonl), text_field="body").documents()) == ["x1", "x2"]
    assert list(open_source(str(parquet), text_field="body").documents()) == ["y1", "y2"]


def test_mixed_folder_recursive_sorted_and_ignores_other_files(tmp_path):
    root = tmp_path / "corpus"
    write_txt(root / "b.txt", "from b.txt")
    write_jsonl(root / "a.jsonl", [{"text": "a1"}, {"text": "a2"}])
    write_parquet(root / "sub" / "c.parquet", {"text": ["c1", "c2"]})
    write_txt(root / "sub" / "a.txt", "from sub/a.txt")
    write_txt(root / "notes.md", "ignored")
    write_txt(root / "data.csv", "ignored,too")
    write_txt(root / "empty.txt", "\n\n")
    # sorted relative paths: a.jsonl, b.txt, empty.txt (skipped), sub/a.txt, sub/c.parquet
    expected = ["a1", "a2", "from b.txt", "from sub/a.txt", "c1", "c2"]
    src = open_source(str(root))
    assert list(src.documents()) == expected
    assert list(src.documents()) == expected  # re-iterable, same order


# --------------------------------------------------------------------------------------
# hf: sources through the real `datasets` code (local directories only, no network)
# --------------------------------------------------------------------------------------


def test_hf_local_jsonl_directory(tmp_path):
    write_jsonl(tmp_path / "ds" / "part-0.jsonl", [{"text": "h1"}, {"text": ""}, {"text": "h2"}])
    write_jsonl(tmp_path / "ds" / "part-1.jsonl", [{"text": "h3"}])
    src = open_source(f"hf:{tmp_path / 'ds'}")
    assert src.is_text
    assert list(src.documents()) == ["h1", "h2", "h3"]


def test_hf_local_parquet_directory_with_text_field(tmp_path):
    write_parquet(tmp_path / "pq" / "a.parquet", {"content": ["p1", "p2"]})
    write_parquet(tmp_path / "pq" / "b.parquet", {"content": ["p3"]})
    src = open_source(f"hf:{tmp_path / 'pq'}", text_field="content")
    assert list(src.documents()) == ["p1", "p2", "p3"]


def test_hf_missing_field_names_the_fields(tmp_path):
    write_jsonl(tmp_path / "ds" / "a.jsonl", [{"body": "x", "id": 1}])
    src = open_source(f"hf:{tmp_path / 'ds'}")
    with pytest.raises(CtxlensError, match=r"no field 'text'.*'body', 'id'"):
        list(src.documents())


def test_hf_bad_split_is_a_clear_error(tmp_path):
    write_jsonl(tmp_path / "ds" / "a.jsonl", [{"text": "x"}])
    with pytest.raises(CtxlensError, match=r"split 'test'.*check the dataset id, config and split"):
        open_source(f"hf:{tmp_path / 'ds'}", split="test")


def test_hf_without_dataset_id():
    with pytest.raises(CtxlensError, match="names no dataset"):
        open_source("hf:")


def test_hf_windows_match_file_windows(tmp_path, byte_tokenizer):
    docs = ["hub one", "hub two", "hub three"]
    write_jsonl(tmp_path / "ds" / "a.jsonl", [{"text": d} for d in docs])
    got = token_windows(open_source(f"hf:{tmp_path / 'ds'}"), byte_tokenizer, 5, 4)
    assert got.tolist() == [expected_ids(docs)[i * 5:(i + 1) * 5] for i in range(4)]


# --------------------------------------------------------------------------------------
# Field and content errors
# --------------------------------------------------------------------------------------


def test_jsonl_missing_field_error_names_field_and_fields(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": "ok"}, {"body": "x", "title": "t"}])
    with pytest.raises(CtxlensError, match=r"line 2 has no field 'text'.*'body', 'title'"):
        list(open_source(str(path)).documents())


def test_parquet_missing_field_error_names_field_and_fields(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", {"body": ["x"], "id": [1]})
    with pytest.raises(CtxlensError, match=r"no field 'content'.*'body', 'id'"):
        list(open_source(str(path), text_field="content").documents())


def test_non_text_field_value(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": 5}])
    with pytest.raises(CtxlensError, match=r"holds a int, not text"):
        list(open_source(str(path)).documents())


def test_invalid_json_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "ok"}\n{not json\n', encoding="utf-8")
    with pytest.raises(CtxlensError, match=r"line 2 is not valid JSON"):
        list(open_source(str(path)).documents())


@pytest.mark.parametrize("payload", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"caf\xe9 \xff\xfe"])
def test_binary_txt_is_a_clear_error(tmp_path, payload):
    path = tmp_path / "image.txt"
    path.write_bytes(payload)
    with pytest.raises(CtxlensError, match=r"binary or not UTF-8 text"):
        list(open_source(str(path)).documents())


def test_corrupt_parquet_is_a_clear_error(tmp_path):
    path = write_txt(tmp_path / "fake.parquet", "not parquet at all")
    with pytest.raises(CtxlensError, match=r"not a readable Parquet file"):
        list(open_source(str(path)).documents())


# --------------------------------------------------------------------------------------
# Spec errors
# --------------------------------------------------------------------------------------


def test_missing_path_names_the_path(tmp_path):
    missing = str(tmp_path / "nope" / "corpus.jsonl")
    with pytest.raises(CtxlensError) as info:
        open_source(missing)
    assert missing in str(info.value) and "does not exist" in str(info.value)


def test_bad_extension(tmp_path):
    path = write_txt(tmp_path / "foo.csv", "a,b")
    with pytest.raises(CtxlensError, match=r"unsupported extension '\.csv'; use \.txt, \.jsonl"):
        open_source(str(path))


def test_empty_folder(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    write_txt(tmp_path / "empty" / "sub" / "readme.md", "no text files here")
    with pytest.raises(CtxlensError, match=r"holds no \.txt, \.jsonl or \.parquet files"):
        open_source(str(tmp_path / "empty"))


@pytest.mark.parametrize("spec, split, seed", [
    ("builtin", "validation", 0),
    ("builtin:train", "train", 0),
    ("builtin:test:7", "test", 7),
    ("builtin::3", "validation", 3),
])
def test_builtin_streams_the_corpus(spec, split, seed):
    from ctxlens.data.corpus import documents

    src = open_source(spec)
    assert isinstance(src, BuiltinSource) and src.is_text
    assert (src.split, src.seed) == (split, seed)
    first = list(itertools.islice(src.documents(), 3))
    assert first == list(documents(seed, 3, split=split))
    assert list(itertools.islice(src.documents(), 3)) == first  # re-iterable, same order
    assert len(list(itertools.islice(src.documents(), 40))) == 40  # not a short, fixed list


def test_builtin_windows_are_the_corpus_bytes(byte_tokenizer):
    from ctxlens.data.corpus import documents

    docs = list(documents(0, 2, split="validation"))
    stream = expected_ids(docs)
    got = token_windows(open_source("builtin"), byte_tokenizer, 100, 5)
    assert got.tolist() == [stream[i * 100:(i + 1) * 100] for i in range(5)]


def test_builtin_unknown_split():
    with pytest.raises(CtxlensError, match=r"Unknown built-in corpus split 'pg19'.*train"):
        open_source("builtin:pg19")


def test_builtin_bad_seed():
    with pytest.raises(CtxlensError, match=r"seed 'x' that is not an integer"):
        open_source("builtin:train:x")


def test_bad_random_seed():
    with pytest.raises(CtxlensError, match=r"not an integer"):
        open_source("random:abc")


def test_empty_spec():
    with pytest.raises(CtxlensError, match=r"text source is empty"):
        open_source("  ")


# --------------------------------------------------------------------------------------
# token_windows on text
# --------------------------------------------------------------------------------------


def test_windows_equal_hand_built_stream_with_eos_between_documents(tmp_path, byte_tokenizer):
    docs = ["Hello world.", "Zweites Dokument: äöü ß", "third 日本 doc", "short"]
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": d} for d in docs])
    stream = expected_ids(docs)
    length, n = 7, len(stream) // 7
    got = token_windows(open_source(str(path)), byte_tokenizer, length, n)
    assert got.dtype == torch.long and got.shape == (n, length)
    assert got.tolist() == [stream[i * length:(i + 1) * length] for i in range(n)]
    # eos sits exactly between documents: at offsets sum(len(bytes(doc_j)) + 1 for j < i) - 1
    ends, offset = [], 0
    for doc in docs[:-1]:
        offset += len(doc.encode("utf-8"))
        ends.append(offset)
        offset += 1
    flat = got.flatten().tolist()
    assert [i for i, t in enumerate(flat) if t == EOS] == [e for e in ends if e < n * length]


def test_windows_without_eos_concatenate_documents(tmp_path, no_eos_tokenizer):
    docs = ["abc", "defg", "hij"]
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": d} for d in docs])
    got = token_windows(open_source(str(path)), no_eos_tokenizer, 5, 2)
    assert got.tolist() == [list(b"abcde"), list(b"fghij")]


def test_windows_exact_fit_and_single_window(tmp_path, byte_tokenizer):
    path = write_txt(tmp_path / "a.txt", "0123456789")
    src = open_source(str(path))
    assert token_windows(src, byte_tokenizer, 10, 1).tolist() == [list(b"0123456789")]
    assert token_windows(src, byte_tokenizer, 1, 3).tolist() == [[48], [49], [50]]


def test_windows_stream_only_the_documents_needed(tmp_path, byte_tokenizer):
    root = tmp_path / "c"
    write_txt(root / "a.txt", "aaaaaaaa")  # 8 tokens
    write_txt(root / "b.txt", "bbbbbbbb")  # eos + 8 tokens -> 17 >= 2 * 8
    (root / "z.txt").write_bytes(b"\x00\x01binary")  # would raise if it were read
    got = token_windows(open_source(str(root)), byte_tokenizer, 8, 2)
    assert got.tolist() == [list(b"aaaaaaaa"), [EOS] + list(b"bbbbbbb")]
    with pytest.raises(CtxlensError, match="binary"):  # proves z.txt is reached when needed
        token_windows(open_source(str(root)), byte_tokenizer, 8, 3)


def test_windows_tokenize_no_more_documents_than_needed(tmp_path, byte_tokenizer):
    calls: list[str] = []

    class Spy:
        eos_token_id = EOS

        def encode(self, text, **kwargs):
            calls.append(text)
            return byte_tokenizer.encode(text, **kwargs)

    path = write_jsonl(tmp_path / "d.jsonl", [{"text": f"doc{i}"} for i in range(100)])
    token_windows(open_source(str(path)), Spy(), 4, 2)  # "doc0" + eos + "doc1..." covers 8
    assert calls == ["doc0", "doc1"]


def test_not_enough_text_reports_what_the_source_holds(tmp_path, byte_tokenizer):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "abcdefghij"}, {"text": "klmno"}])
    # 10 + 1 eos + 5 = 16 tokens -> 3 windows of 5
    with pytest.raises(CtxlensError) as info:
        token_windows(open_source(str(path)), byte_tokenizer, 5, 4)
    message = str(info.value)
    assert "holds only 3 windows of 5 tokens (16 tokens in all) but 4 were requested" in message
    assert "bigger source or a smaller n or length" in message


def test_text_source_without_tokenizer(tmp_path):
    path = write_txt(tmp_path / "a.txt", "some text")
    with pytest.raises(CtxlensError, match=r"no tokenizer.*random source"):
        token_windows(open_source(str(path)), None, 4, 1)


@pytest.mark.parametrize("length, n", [(0, 1), (1, 0), (-3, 2), (4, -1), (2.5, 1), (True, 1)])
def test_length_and_n_must_be_positive(tmp_path, byte_tokenizer, length, n):
    path = write_txt(tmp_path / "a.txt", "some text")
    with pytest.raises(CtxlensError, match=r"must be a whole number of at least 1"):
        token_windows(open_source(str(path)), byte_tokenizer, length, n)
    with pytest.raises(CtxlensError, match=r"must be a whole number of at least 1"):
        token_windows(open_source("random"), None, length, n, vocab_size=10)


# --------------------------------------------------------------------------------------
# The random source
# --------------------------------------------------------------------------------------


def test_random_source_is_not_text():
    src = open_source("random")
    assert isinstance(src, RandomSource) and not src.is_text and src.seed is None
    assert open_source("random:42").seed == 42
    with pytest.raises(CtxlensError, match="random token ids, not text"):
        list(src.documents())


def test_random_windows_deterministic_and_in_range():
    src = open_source("random")
    a = token_windows(src, None, 64, 8, seed=3, vocab_size=50)
    b = token_windows(open_source("random"), None, 64, 8, seed=3, vocab_size=50)
    c = token_windows(src, None, 64, 8, seed=4, vocab_size=50)
    assert a.dtype == torch.long and a.shape == (8, 64)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert int(a.min()) >= 0 and int(a.max()) < 50
    assert len(torch.unique(a)) == 50  # 512 draws cover all 50 ids: genuinely uniform-ish
    # the documented recipe: a CPU torch.Generator seeded with `seed`
    expected = torch.randint(0, 50, (8, 64), generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, expected)


def test_random_spec_seed_overrides_seed_argument():
    a = token_windows(open_source("random:7"), None, 16, 2, seed=0, vocab_size=1000)
    b = token_windows(open_source("random"), None, 16, 2, seed=7, vocab_size=1000)
    assert torch.equal(a, b)


@pytest.mark.parametrize("vocab_size", [None, 0, -5])
def test_random_needs_vocab_size(vocab_size):
    with pytest.raises(CtxlensError, match=r"needs the model's vocabulary size"):
        token_windows(open_source("random"), None, 4, 1, vocab_size=vocab_size)
