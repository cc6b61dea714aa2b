"""Registry, cache, stable ids, RULER JSONL export, QA loaders, local corpora, prompt frames, CLI."""

from __future__ import annotations

import json

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks import dataset as ds
from ctxlens.tasks import generate, get_task
from ctxlens.tasks.export import export
from ctxlens.tasks.render import frame_for

from ._tokenizers import trained_bpe

CHAT = ("{% for m in messages %}<|user|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def test_unknown_task_suggests_the_closest_name():
    with pytest.raises(CtxlensError, match="Did you mean 'niah_single_1'"):
        get_task("niah_singel_1")


def test_generation_is_deterministic_and_ids_ignore_content(byte_tok):
    a = generate("niah_single_2", byte_tok, 1024, 3, seed=9, cache=False)
    b = generate("niah_single_2", byte_tok, 1024, 3, seed=9, cache=False)
    assert [s.prompt for s in a] == [s.prompt for s in b] and [s.input_ids for s in a] == [s.input_ids for s in b]
    assert [s.id for s in a] == [f"niah_single_2/L1024/s9/{i}" for i in range(3)]
    other = generate("niah_single_2", byte_tok, 1024, 3, seed=9, cache=False, options={"type_needle_v": "uuids"})
    assert [s.id for s in other] == [s.id for s in a] and other[0].prompt != a[0].prompt
    more = generate("niah_single_2", byte_tok, 1024, 5, seed=9, cache=False)
    assert [s.prompt for s in more[:3]] == [s.prompt for s in a]  # a sample does not depend on n


def test_disk_cache_is_reused_and_keyed(byte_tok, tmp_path, monkeypatch):
    first = generate("vt", byte_tok, 1024, 2, seed=1, cache=tmp_path)
    folders = list((tmp_path / "vt").iterdir())
    assert len(folders) == 1 and (folders[0] / "ids.npy").is_file()

    def fail(*_):
        raise AssertionError("regenerated instead of reading the cache")

    monkeypatch.setattr(ds, "Setup", fail)
    again = generate("vt", byte_tok, 1024, 2, seed=1, cache=tmp_path)
    assert [s.to_dict() for s in again] == [s.to_dict() for s in first]
    monkeypatch.undo()
    base = dict(task="vt", fingerprint="tok", length=1024, seed=1, n=2, template="plain", budget=30, options={})
    changes = [{}, {"fingerprint": "tok2"}, {"length": 2048}, {"seed": 2}, {"n": 3}, {"task": "cwe"},
               {"options": {"depths": [0]}}, {"template": "chat"}, {"budget": 16}]
    assert len({ds.cache_key(**{**base, **c}) for c in changes}) == len(changes)
    assert ds.encoder_for(byte_tok).fingerprint != ds.encoder_for(trained_bpe("bytelevel")).fingerprint


def test_ruler_jsonl_export(byte_tok, tmp_path):
    samples = generate("niah_single_1", byte_tok, 1024, 2, cache=False)
    samples += generate("qa_1", byte_tok, 1024, 1, cache=False)
    files = export(samples, tmp_path, byte_tok)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in files) == [
        "1024/data/niah_single_1/validation.jsonl", "1024/data/qa_1/validation.jsonl"]
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    side = [json.loads(x) for x in (files[0].parent / "ctxlens.jsonl").read_text().splitlines()]
    for i, (rec, extra, s) in enumerate(zip(lines, side, samples)):
        assert extra["sample"] == i and extra["id"] == s.id and "others" not in rec
        assert rec["input"] + rec["answer_prefix"] == s.prompt and rec["outputs"] == s.outputs
        assert rec["length"] == len(s.prompt.encode()) + 128 <= 1024
        assert rec["index"] == rec["input"].find(s.outputs[0]) > 0  # RULER's needle tasks: a character offset
        assert rec["token_position_answer"] == len(rec["input"][:rec["index"]].encode())


def test_squad_and_hotpotqa_files_in_their_public_formats(byte_tok, tmp_path):
    squad = {"version": "v2.0", "data": [{"title": "Lakes", "paragraphs": [
        {"context": "Lake Orvan lies north of the city. Its water is cold.", "qas": [
            {"id": "1", "question": "Where does Lake Orvan lie?", "answers": [{"text": "north of the city",
                                                                               "answer_start": 15}],
             "is_impossible": False},
            {"id": "2", "question": "Who owns the lake?", "answers": [], "is_impossible": True}]},
        {"context": "The lake freezes every winter for three months.", "qas": []}]},
        {"title": "Hills", "paragraphs": [{"context": "The Tarn hills are green and low.", "qas": [
            {"id": "3", "question": "What colour are the Tarn hills?",
             "answers": [{"text": "green", "answer_start": 18}], "is_impossible": False}]}]}]}
    hotpot = [{"_id": "h1", "question": "Which river runs through Orvan's birthplace?", "answer": "Selva",
               "supporting_facts": [["Orvan", 0], ["Talm", 0]],
               "context": [["Orvan", ["Orvan was born in Talm.", " He was a painter."]],
                           ["Talm", ["Talm lies on the Selva river."]],
                           ["Bern", ["Bern is a city."]]]}]
    (tmp_path / "squad.json").write_text(json.dumps(squad))
    (tmp_path / "hotpot.json").write_text(json.dumps(hotpot))
    s1 = generate("qa_1", byte_tok, 1024, 2, cache=False, options={"squad": str(tmp_path / "squad.json")})
    assert [s.outputs for s in s1] == [["north of the city"], ["green"]]  # the unanswerable question is skipped
    assert "Lake Orvan lies north of the city. Its water is cold." in s1[0].prompt
    assert "Question: Where does Lake Orvan lie? Answer:" in s1[0].prompt
    assert 0.99 * 1024 <= s1[0].n_tokens + 32 <= 1024
    (s2,) = generate("qa_2", byte_tok, 1024, 1, cache=False, options={"hotpotqa": str(tmp_path / "hotpot.json")})
    assert s2.outputs == ["Selva"]
    assert "Orvan\nOrvan was born in Talm. He was a painter." in s2.prompt  # title + "\n" + "".join(sentences)
    assert sorted(d["answer"] for d in s2.depths) == [False, True, True]
    (tmp_path / "bad.json").write_text(json.dumps({"data": [{"nope": 1}]}))
    with pytest.raises(CtxlensError, match="SQuAD's format"):
        generate("qa_1", byte_tok, 1024, 1, cache=False, options={"squad": str(tmp_path / "bad.json")})


def test_a_local_text_corpus_is_the_essay_haystack(byte_tok, tmp_path):
    text = " ".join(f"Sentence number {i} talks about the weather." for i in range(200))
    (tmp_path / "essay.txt").write_text(text)
    source = {"haystack_source": str(tmp_path / "essay.txt")}
    (s,) = generate("niah_single_2", byte_tok, 1024, 1, cache=False, options=source)
    body = s.input.split("afterwards.\n")[1]
    assert body.startswith("Sentence number 0 talks about the weather. ")
    assert "Sentence number 5 talks about the weather." in body
    with pytest.raises(CtxlensError, match="does not exist"):
        generate("niah_single_2", byte_tok, 1024, 1, cache=False, options={"haystack_source": str(tmp_path / "nope")})


def test_chat_template_frames_the_prompt_and_prefills_the_answer(byte_tok):
    tok = byte_tok.__class__(tokenizer_object=byte_tok.backend_tokenizer, eos_token="<|endoftext|>")
    assert frame_for(tok, "auto").template == "plain"
    with pytest.raises(CtxlensError, match="no chat template"):
        frame_for(tok, "chat")
    tok.chat_template = CHAT
    assert frame_for(tok, "auto").template == "chat"
    (s,) = generate("niah_single_1", tok, 1024, 1, cache=False)
    rendered = tok.apply_chat_template([{"role": "user", "content": s.input}], tokenize=False,
                                       add_generation_prompt=True)
    assert s.template == "chat" and s.prompt == rendered + s.answer_prefix  # RULER: template + answer prefix
    assert s.answer_prefix.startswith(" The special magic number")  # verbatim, as RULER appends it
    (p,) = generate("niah_single_1", tok, 1024, 1, cache=False, template="plain")
    assert p.template == "plain" and p.prompt == p.input + p.answer_prefix and p.answer_prefix.startswith(" ")


def test_cli_lists_and_exports_tasks(tmp_path, capsys):
    from ctxlens.cli import main

    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "niah_multikey_3" in out and "qa_2" in out
    assert main(["tasks", "export", "niah_single_1", "fwe", "--lengths", "512,1024", "--n", "2",
                 "--tokenizer", "byte", "--out", str(tmp_path)]) == 0
    for length in (512, 1024):
        for task in ("niah_single_1", "fwe"):
            lines = (tmp_path / str(length) / "data" / task / "validation.jsonl").read_text().splitlines()
            assert len(lines) == 2 and json.loads(lines[0])["length"] <= length
    assert main(["tasks", "export", "niah_singel_1", "--out", str(tmp_path)]) == 2
    assert "Did you mean 'niah_single_1'" in capsys.readouterr().err
