"""Issue 45, item 8: a FIFO given where ctxlens reads a file (a text source, a haystack source, a QA file,
a findings file) is one sentence and exit 2, never a read that waits for a writer that never comes.
Each command runs in a thread of this process with a time limit: a regression that opens the FIFO and waits is
released by opening its other end, and fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

CASES = {
    "source": ["run", "loss-vs-length", "--model", "zoo:random-llama", "--source", "{fifo}", "--lengths", "16",
               "--n-samples", "1"],
    "haystack": ["run", "niah-depth", "--model", "zoo:random-llama", "--haystack-source", "{fifo}",
                 "--lengths", "256", "--n-samples", "1"],
    "squad": ["run", "ruler", "--model", "zoo:random-llama", "--tasks", "qa_1", "--squad", "{fifo}",
              "--lengths", "512", "--n-samples", "1"],
    "findings": ["report", "{run}", "--findings", "{fifo}", "--out", "{out}/r.html"],
}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fifo_given_as_a_file_is_refused_without_waiting(case, tmp_path, capsys):
    fifo = tmp_path / "input.txt"
    os.mkfifo(fifo)
    run = Path(__file__).parents[2] / "reference" / "profile" / "ref-smollm2-135m" / "suffix-ppl"  # a real run
    argv = [a.format(fifo=fifo, run=run, out=tmp_path) for a in CASES[case]]
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "out"), "--no-progress"]
    from ctxlens.cli import main

    codes: list[int] = []
    command = threading.Thread(target=lambda: codes.append(main(argv)), daemon=True)
    command.start()
    command.join(60)
    if command.is_alive():  # it opened the FIFO and waits for a writer: be one, so that it ends
        with open(fifo, "w"):
            pass
        command.join(60)
        pytest.fail(f"ctxlens {argv[0]} waited on the FIFO given as a file")
    said = capsys.readouterr().err
    assert codes == [2], (codes, said[-500:])
    assert "not a regular file" in said and said.count("\n") == 1, said
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("where", ["yaml", "json"])
def test_an_integer_too_long_to_convert_is_one_sentence(where, tmp_path):
    """Issue 45, item 10: an integer of more than Python's 4,300 digits in a config (YAML) or a JSON file
    was a ValueError traceback; it is one sentence."""
    from ctxlens.core import yaml_safe
    from ctxlens.core.errors import CtxlensError

    text = ("n_samples: " if where == "yaml" else '{"n_samples": ') + "9" * 5000 + ("" if where == "yaml" else "}")
    with pytest.raises(CtxlensError, match="holds a number too long to read"):
        (yaml_safe.load if where == "yaml" else yaml_safe.load_json)(text, "Config file 'x'")
    config = tmp_path / "run.yaml"
    config.write_text("experiment: token-loss\nmodels: [zoo:random-llama]\noptions:\n  n_samples: " + "9" * 5000 + "\n")
    done = subprocess.run([sys.executable, "-m", "ctxlens", "run", "--config", str(config), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "too long to read" in done.stderr


@pytest.mark.parametrize("field, value, message", [
    ("max_position_embeddings", "abc", "has a field of the wrong type"),
    ("hidden_size", [1], "has a field of the wrong type"),
    ("max_position_embeddings", int("9" * 400), "outside 1 .. 1,073,741,824"),
])
def test_a_config_field_of_the_wrong_type_or_size_is_one_sentence(tmp_path, field, value, message):
    """Issue 45, item 10: a wrong-typed config.json field traced back from transformers' strict config, and
    10**400 positions overflowed the planner; both are one sentence before anything is planned."""
    import json

    from ctxlens.core.errors import CtxlensError
    from ctxlens.lm.info import read_info
    from ctxlens.lm.tiny import tiny_config

    config = tiny_config("llama").to_dict()
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CtxlensError, match=message):
        read_info(str(tmp_path))
