"""The reference models' tokenizers read from their files: transformers' ids, RULER's chat prompts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ctxlens.tasks import dataset, generate
from ctxlens.tasks.tokenizer import from_files

from .conftest import require

SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def ref_dir(ref_home: Path, name: str) -> Path:
    """The converted directory of reference ``name`` (converted once per session cache)."""
    require(name)
    from ctxlens.lm.specs import resolve

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXLENS_HOME", str(ref_home))
        return Path(resolve(f"ref:{name}"))


@pytest.fixture(scope="module")
def smollm2_tokenizers(ref_home):
    from transformers import AutoTokenizer

    folder = ref_dir(ref_home, "smollm2-135m")
    return from_files(folder), AutoTokenizer.from_pretrained(folder)


def same(ours, theirs, task: str, **kw) -> list:
    dataset._ENCODERS.clear()
    a = generate(task, ours, 1024, 2, cache=False, **kw)
    b = generate(task, theirs, 1024, 2, cache=False, **kw)
    assert [s.prompt for s in a] == [s.prompt for s in b] and [s.input_ids for s in a] == [s.input_ids for s in b]
    return a


def test_smollm2_from_files_gives_transformers_prompts_and_ids(smollm2_tokenizers):
    ours, theirs = smollm2_tokenizers
    assert ours is not None
    for system in ("default", "none", "Be brief."):
        same(ours, theirs, "niah_single_1", system_prompt=system)
    same(ours, theirs, "niah_multikey_3", template="plain")
    same(ours, theirs, "vt")


def test_smollm2_system_turn_default_none_or_given(smollm2_tokenizers):
    tok = smollm2_tokenizers[0]
    end = "<|im_end|>\n<|im_start|>assistant\n"
    for system, head in (("default", f"<|im_start|>system\n{SMOLLM_SYSTEM}<|im_end|>\n<|im_start|>user\n"),
                         ("none", "<|im_start|>user\n"),
                         ("Be brief.", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")):
        (s,) = generate("niah_single_1", tok, 1024, 1, cache=False, system_prompt=system)
        # RULER: model_template.format(task_template=...) + answer_prefix, the prefix's leading space kept
        assert s.prompt == head + s.input + end + s.answer_prefix
        assert s.answer_prefix.startswith(" The special magic number for ")
        assert s.system_prompt == {"default": SMOLLM_SYSTEM, "none": None}.get(system, system)
        assert (s.prompt.count("<|im_start|>system") == 0) == (system == "none")


def test_gemma3_from_files_gives_transformers_prompts_and_ids(ref_home):
    from transformers import AutoTokenizer

    folder = ref_dir(ref_home, "gemma3-270m")
    ours, theirs = from_files(folder), AutoTokenizer.from_pretrained(folder)
    assert ours is not None and ours.chat_template is None
    for task in ("niah_single_1", "niah_multikey_3"):
        (s, _) = same(ours, theirs, task)
        assert s.input_ids[0] == theirs.bos_token_id


def test_export_for_smollm2_imports_neither_torch_nor_transformers(ref_home, tmp_path):
    ref_dir(ref_home, "smollm2-135m")
    wrapper = ("import sys\nfrom ctxlens.cli import main\ncode = main(sys.argv[1:])\n"
               "print('HEAVY=' + ','.join(m for m in ('torch', 'transformers') if m in sys.modules))\nsys.exit(code)")
    src = str(Path(__file__).resolve().parents[2] / "src")
    argv = ["tasks", "export", "niah_single_1", "--tokenizer", "ref:smollm2-135m", "--lengths", "1024", "--n", "2",
            "--out", str(tmp_path)]
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": src, "CTXLENS_HOME": str(ref_home), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "HEAVY="
