"""RULER's JSONL fields per task family, and RULER's task options from the CLI and the experiments."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, processors

from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import make_config
from ctxlens.tasks import generate
from ctxlens.tasks.export import SIDECAR, export
from ctxlens.tasks.tokenizer import FileTokenizer

from ._tokenizers import trained_bpe

# RULER's records, re-typed from scripts/data/synthetic/*.py (formatted_output)
COMMON = {"index", "input", "outputs", "length", "length_w_model_temp", "answer_prefix"}
NIAH = COMMON | {"token_position_answer"}
# RULER's answer prefixes' first 10 characters (constants.py), by which it splits input and prefix
PREFIX10 = {"niah": " The speci", "vt": " Answer: A", "cwe": " Answer: T", "fwe": " Answer: A", "qa": " Answer:"}
# RULER's task arguments (scripts/synthetic.yaml and the generators' argparse options)
RULER_ARGS = {"niah": {"type_haystack", "type_needle_k", "type_needle_v", "num_needle_k", "num_needle_v",
                       "num_needle_q"},
              "vt": {"type_haystack", "num_chains", "num_hops"}, "cwe": {"freq_cw", "freq_ucw", "num_cw"},
              "fwe": {"alpha", "coded_wordlen", "vocab_size"}}
CHAT = ("{% for m in messages %}<|endoftext|>{{ m['role'] }}\n{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|endoftext|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def bos_tok():
    """A BPE whose plain encoding adds a BOS, with a chat template."""
    backend = Tokenizer.from_str(trained_bpe("bytelevel").backend_tokenizer.to_str())
    bos = backend.token_to_id("<|endoftext|>")
    backend.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A:0",
                                                           special_tokens=[("<|endoftext|>", bos)])
    return FileTokenizer(backend, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, CHAT)


@pytest.mark.parametrize("template", ["plain", "chat"])
def test_records_have_rulers_fields_per_family(bos_tok, template, tmp_path):
    backend = bos_tok.backend_tokenizer
    tokens = lambda text: len(backend.encode(text, add_special_tokens=False).ids)  # noqa: E731 - RULER's tokenize
    for task, family in (("niah_multikey_2", "niah"), ("vt", "vt"), ("cwe", "cwe"), ("fwe", "fwe"), ("qa_2", "qa")):
        samples = generate(task, bos_tok, 2048, 2, cache=False, template=template)
        (path,) = export(samples, tmp_path, bos_tok)
        records = [json.loads(line) for line in path.read_text().splitlines()]
        side = [json.loads(line) for line in (path.parent / SIDECAR).read_text().splitlines()]
        for i, (rec, extra, s) in enumerate(zip(records, side, samples)):
            assert set(rec) == (NIAH if family == "niah" else COMMON), task
            full = rec["input"] + rec["answer_prefix"]
            assert full == s.prompt and rec["answer_prefix"] == full[full.rfind(PREFIX10[family]):]
            assert rec["length"] == rec["length_w_model_temp"] == tokens(full) + s.budget
            assert rec["outputs"] == s.outputs and extra["id"] == s.id and extra["sample"] == i
            if family == "niah":
                assert rec["index"] == rec["input"].find(s.outputs[0])
                assert rec["token_position_answer"] == tokens(rec["input"][:rec["index"]])
            else:
                assert rec["index"] == i


def test_every_ruler_argument_is_a_task_option_and_an_experiment_option():
    from ctxlens.probes.tasks import RULER_ARGS as FIELDS
    from ctxlens.tasks import RULER_TASKS, get_task

    for name in RULER_TASKS:
        t = get_task(name)
        assert set(t.options) >= RULER_ARGS.get(t.family, set()), name
    assert set(FIELDS) >= set().union(*RULER_ARGS.values())


def run_cli(*argv) -> int:
    from ctxlens.cli import main

    return main(["tasks", "export", *argv])


def test_cli_task_options_reach_the_generator(tmp_path):
    assert run_cli("niah_single_2", "--tokenizer", "byte", "--lengths", "1024", "--n", "1", "--num_needle_k", "3",
                   "--type-needle-v", "words", "--out", str(tmp_path)) == 0
    folder = tmp_path / "1024" / "data" / "niah_single_2"
    (extra,) = [json.loads(x) for x in (folder / SIDECAR).read_text().splitlines()]
    (rec,) = [json.loads(x) for x in (folder / "validation.jsonl").read_text().splitlines()]
    assert len(extra["depths"]) == 3 and not any(c.isdigit() for c in rec["outputs"][0])  # words, not numbers


@pytest.mark.parametrize("argv, message", [
    (["niah_single_1", "--tokenizer", "byte", "--num_needle_kk", "2"], "Did you mean 'num_needle_k'"),
    (["cwe", "--tokenizer", "byte", "--num_needle_k", "2"], "not taken by cwe"),
    (["niah_single_1", "--tokenizer", "byte", "--num_needle_k", "two"], "must be int"),
    (["qa_1", "--tokenizer", "byte", "--gamma", "nan"], "must be float (finite)"),  # strict JSON: no NaN written
    (["qa_1", "--tokenizer", "byte", "--gamma", "inf"], "must be float (finite)"),
    (["niah_multikey_1", "--tokenizer", "byte", "--num_needle_k", "200000"], "lower --num-needle-k"),  # drew forever
    (["niah_single_1"], "No tokenizer given"),
    (["niah_single_2", "--tokenizer", "byte", "--type_haystack", "esay"], "Did you mean 'essay'"),
    (["vt", "niah_single_2", "--tokenizer", "byte", "--type_haystack", "needle"], "not a value vt takes"),
    (["niah_single_1", "--tokenizer", "byte", "--system-prompt", "Be brief."], "needs a chat template"),
])
def test_cli_bad_task_options_are_one_sentence_and_exit_2(argv, message, tmp_path, capsys):
    assert run_cli(*argv, "--lengths", "1024", "--n", "1", "--out", str(tmp_path / "out")) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_experiments_take_rulers_task_options():
    from ctxlens.experiments import get_experiment
    from ctxlens.probes.tasks import task_options

    ruler = get_experiment("ruler").Config
    config = make_config(ruler, {"tasks": "niah_single_1,cwe", "num_needle_k": "3", "freq_cw": 20})
    assert task_options(config, None, "niah_single_1") == {"num_needle_k": 3}
    assert task_options(config, None, "cwe") == {"freq_cw": 20}
    with pytest.raises(CtxlensError, match="Did you mean 'num_needle_k'"):
        make_config(ruler, {"num_needle_kk": 3})
    with pytest.raises(CtxlensError, match="not taken by cwe"):
        make_config(ruler, {"tasks": "cwe", "num_needle_k": 3})
    with pytest.raises(CtxlensError, match="not taken by niah_single_2"):
        make_config(get_experiment("niah-depth").Config, {"num_cw": 3})


def test_generate_rejects_an_option_the_task_does_not_take(bos_tok):
    with pytest.raises(CtxlensError, match="Did you mean 'num_hops'"):
        generate("vt", bos_tok, 1024, 1, cache=False, options={"num_hop": 2})
    with pytest.raises(CtxlensError, match="not taken by vt"):
        generate("vt", bos_tok, 1024, 1, cache=False, options={"num_cw": 2})
