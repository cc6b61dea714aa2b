"""Tokenizers read from their files without transformers give transformers' own ids and prompts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from ctxlens.tasks import dataset, generate
from ctxlens.tasks.export import load_tokenizer
from ctxlens.tasks.tokenizer import FileTokenizer, from_files

from ._tokenizers import trained_bpe

CHAT = ("<|endoftext|>{% for m in messages %}{% if loop.first and m['role'] != 'system' %}system: You test.\n"
        "{% endif %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}")
TEXTS = ["", "x", " leading space", "two  spaces\n\nand lines\n", "tab\there", "Ünïcödé — “quotes” 数字",
         "special <|endoftext|> inside", "trailing   ", "\n"]


def saved(tmp_path: Path, kind: str, chat: str | None = None) -> Path:
    """A trained test tokenizer saved by transformers' save_pretrained."""
    from transformers import PreTrainedTokenizerFast

    src = trained_bpe(kind)
    tok = PreTrainedTokenizerFast(tokenizer_object=src.backend_tokenizer, eos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>")
    if chat:
        tok.chat_template = chat
    folder = tmp_path / kind
    tok.save_pretrained(folder)
    return folder


def same_samples(ours, theirs, task: str, length: int, **kw) -> None:
    dataset._ENCODERS.clear()
    a = generate(task, ours, length, 2, cache=False, **kw)
    b = generate(task, theirs, length, 2, cache=False, **kw)
    assert [s.prompt for s in a] == [s.prompt for s in b]
    assert [s.input_ids for s in a] == [s.input_ids for s in b]
    assert [s.system_prompt for s in a] == [s.system_prompt for s in b]


@pytest.mark.parametrize("kind", ["bytelevel", "metaspace", "whole"])
def test_trained_tokenizer_from_files_matches_transformers(kind, tmp_path):
    from transformers import AutoTokenizer

    folder = saved(tmp_path, kind, CHAT if kind == "bytelevel" else None)
    ours, theirs = from_files(folder), AutoTokenizer.from_pretrained(folder)
    assert isinstance(ours, FileTokenizer)
    for text in TEXTS:
        for specials in (False, True):
            assert ours.encode(text, add_special_tokens=specials) == theirs.encode(text, add_special_tokens=specials)
    assert dataset.encoder_for(ours).fingerprint == dataset.encoder_for(theirs).fingerprint
    same_samples(ours, theirs, "niah_single_1", 512, template="plain")
    if kind == "bytelevel":
        for system, head, recorded in (("default", "<|endoftext|>system: You test.\nuser: ", "You test."),
                                       ("none", "<|endoftext|>user: ", None),
                                       ("Be brief.", "<|endoftext|>system: Be brief.\nuser: ", "Be brief.")):
            same_samples(ours, theirs, "niah_single_1", 512, system_prompt=system)
            (s,) = generate("niah_single_1", ours, 512, 1, cache=False, system_prompt=system)
            assert s.prompt == head + s.input + "\nassistant:" + s.answer_prefix and s.system_prompt == recorded
        chats = [[{"role": "user", "content": " hi "}],
                 [{"role": "system", "content": "S"}, {"role": "user", "content": "a"},
                  {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]]
        for chat in chats:
            for gen in (False, True):
                assert ours.apply_chat_template(chat, add_generation_prompt=gen) == theirs.apply_chat_template(
                    chat, tokenize=False, add_generation_prompt=gen)


def test_byte_tokenizer_needs_no_transformers_and_matches_the_zoos():
    from ctxlens.data.tokenizer import byte_tokenizer

    ours, theirs = load_tokenizer("byte"), byte_tokenizer()
    for text in TEXTS:
        assert ours.encode(text) == theirs.encode(text)
        assert ours.encode(text, add_special_tokens=False) == theirs.encode(text, add_special_tokens=False)
    assert dataset.encoder_for(ours).fingerprint == dataset.encoder_for(theirs).fingerprint


def test_configs_that_change_encoding_fall_back_to_transformers(tmp_path):
    folder = saved(tmp_path, "bytelevel")
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    for extra in ({"add_bos_token": True}, {"auto_map": {"AutoTokenizer": ["x.X", None]}},
                  {"chat_template": [{"name": "default", "template": "x"}]}, {"bos_token": "<not-in-vocab>"}):
        path.write_text(json.dumps({**config, **extra}))
        assert from_files(folder) is None, extra
    (folder / "tokenizer.json").unlink()
    assert from_files(folder) is None


def test_chat_templates_render_in_a_sandbox():
    tok = FileTokenizer(trained_bpe("bytelevel").backend_tokenizer, {},
                        "{{ messages.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(jinja2.exceptions.SecurityError):
        tok.apply_chat_template([{"role": "user", "content": "x"}])
    tok.chat_template = "{% set ns = namespace(_x=1) %}"
    with pytest.raises(jinja2.exceptions.SecurityError):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


WRAPPER = """
import sys
from ctxlens.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
sys.exit(code)
"""


def test_tasks_list_and_export_import_neither_torch_nor_transformers(tmp_path):
    folder = saved(tmp_path, "bytelevel", CHAT)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {"PYTHONPATH": src, "CTXLENS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    runs = [["tasks", "list"],
            ["tasks", "export", "niah_single_1", "--tokenizer", str(folder), "--lengths", "512", "--n", "2",
             "--out", str(tmp_path / "out")],
            ["tasks", "export", "fwe", "--tokenizer", "byte", "--lengths", "512", "--n", "1", "--out",
             str(tmp_path / "out")]]
    for argv in runs:
        done = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "HEAVY=", argv
    assert (tmp_path / "out" / "512" / "data" / "niah_single_1" / "validation.jsonl").is_file()


def gpt2_style() -> FileTokenizer:
    """Bytes plus the merges "\n\n" and " \n", behind GPT-2's byte-level pre-tokenizer (its regex)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({"ĊĊ": len(vocab), "ĠĊ": len(vocab) + 1})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("Ċ", "Ċ"), ("Ġ", "Ċ")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return FileTokenizer(backend)


def test_gpt2_style_newline_runs_keep_prompts_piecewise():
    """GPT-2's pre-tokenizer cuts ".\n\nB" as . \n \n B and "x \nB" as x ' ' \n B, though "\n\n" and " \n"
    are tokens; pieces cut there keep piecewise ids (no fall back to full encodings) equal to the
    tokenizer's own encoding of the prompt."""

    tok = gpt2_style()
    assert tok.encode(".\n\nB") == tok.encode(".\n") + tok.encode("\nB") != tok.encode(".\n\n") + tok.encode("B")
    for task in ("vt", "qa_1"):
        dataset._ENCODERS.clear()
        for s in generate(task, tok, 1024, 2, cache=False, verify=True):
            assert s.meta["tokenization"] == "pieces" and s.input_ids == tok.encode(s.prompt)
        assert dataset.encoder_for(tok).split_runs  # found by the first sample's check
    dataset._ENCODERS.clear()
    byte = load_tokenizer("byte")
    generate("qa_1", byte, 1024, 1, cache=False)
    assert not dataset.encoder_for(byte).split_runs


def test_file_tokenizer_answers_like_transformers(tmp_path):
    from transformers import AutoTokenizer

    folder = saved(tmp_path, "bytelevel")
    ours, theirs = from_files(folder), AutoTokenizer.from_pretrained(folder)
    text = "Some text, with <|endoftext|> inside.\n"
    assert ours(text).input_ids == ours(text)["input_ids"] == theirs(text).input_ids
    assert ours.tokenize(text) == theirs.tokenize(text) and len(ours) == len(theirs)
    assert (ours.eos_token_id, ours.pad_token_id, ours.bos_token_id) == (theirs.eos_token_id, theirs.pad_token_id,
                                                                         theirs.bos_token_id)
    assert ours.decode(ours.encode(text), skip_special_tokens=True) == theirs.decode(theirs.encode(text),
                                                                                     skip_special_tokens=True)
