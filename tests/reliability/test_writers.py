"""Issue 32, item 4 for the remaining writers: the zoo's model folder, the trainer's checkpoint, the
task cache and the report's figures write through exclusive temporary files, never through a planted
link, and a path under a file is one sentence.

Each test plants symbolic links at the temporary names the earlier code used (and at the files
themselves) pointing at a victim file, and checks the victim byte for byte afterwards."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ctxlens.core.errors import CtxlensError


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("precious")
    return path


def _plant(folder: Path, names: list[str], victim: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name.replace("{pid}", str(os.getpid()))).symlink_to(victim)


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    return fig


def test_report_figures_never_write_through_a_planted_tmp_link(tmp_path, victim):
    from ctxlens.report import figures

    out = tmp_path / "figs"
    _plant(out, [".f.png.{pid}.tmp", ".f.pdf.{pid}.tmp", "f.png.tmp"], victim)
    png, paths = figures.save(_figure(), out / "f")
    assert victim.read_text() == "precious"
    assert paths[0].read_bytes() == png and png.startswith(b"\x89PNG")
    assert paths[1].read_bytes().startswith(b"%PDF")
    assert not any(p.is_symlink() for p in paths)


def test_report_figures_refuse_a_link_in_a_figures_place(tmp_path, victim):
    from ctxlens.report import figures

    _plant(tmp_path / "figs", ["f.png"], victim)
    with pytest.raises(CtxlensError, match="symbolic link"):
        figures.save(_figure(), tmp_path / "figs" / "f")
    assert victim.read_text() == "precious"


def test_report_figures_under_a_file_are_one_sentence(tmp_path, victim):
    from ctxlens.report import figures

    with pytest.raises(CtxlensError, match="a part of the path is a file") as err:
        figures.save(_figure(), victim / "figs" / "f")
    assert "\n" not in str(err.value) and victim.read_text() == "precious"


def _tiny():
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("llama", vocab_size=len(tok)))
    return model, tok


def test_trainer_checkpoint_never_writes_through_a_planted_tmp_link(tmp_path, victim):
    import torch

    from ctxlens.zoo.trainer import _save

    model, _ = _tiny()
    opt = torch.optim.AdamW(model.parameters())
    path = tmp_path / "ckpt" / "train-state.pt"
    _plant(path.parent, ["train-state.tmp", ".train-state.pt.tmp"], victim)  # the old name: path.with_suffix(".tmp")
    _save(str(path), model, opt, {"step": 3})
    assert victim.read_text() == "precious"
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert state["state"] == {"step": 3} and set(state["model"]) == set(model.state_dict())
    assert sorted(p.name for p in path.parent.iterdir()) == [".train-state.pt.tmp", "train-state.pt",
                                                             "train-state.tmp"]  # no temporary file left


def test_trainer_checkpoint_under_a_file_is_one_sentence(victim):
    import torch

    from ctxlens.zoo.trainer import _save

    model, _ = _tiny()
    with pytest.raises(CtxlensError, match="a part of the path is a file"):
        _save(str(victim / "state.pt"), model, torch.optim.AdamW(model.parameters()), {})
    assert victim.read_text() == "precious"


def test_zoo_model_folder_replaces_planted_links_never_writes_through_them(tmp_path, victim):
    from transformers import AutoModelForCausalLM

    from ctxlens.zoo.build import write_model

    model, tok = _tiny()
    out = tmp_path / "zoo" / "rope"
    _plant(out, ["zoo.json", "model.safetensors", "config.json", ".zoo.json.{pid}.tmp"], victim)
    _plant(out.parent, [f".{out.name}.tmp"], victim)
    write_model(out, model, tok, {"name": "rope"})
    assert victim.read_text() == "precious"
    for name in ("zoo.json", "model.safetensors", "config.json"):
        assert (out / name).is_file() and not (out / name).is_symlink()
    assert AutoModelForCausalLM.from_pretrained(out).config.model_type == "llama"
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_zoo_model_folder_under_a_file_is_one_sentence(victim):
    from ctxlens.zoo.build import write_model

    model, tok = _tiny()
    with pytest.raises(CtxlensError, match="a part of the path is a file"):
        write_model(victim / "zoo" / "rope", model, tok, {})
    assert victim.read_text() == "precious"


def test_task_cache_never_writes_through_a_planted_tmp_link(tmp_path, victim, caplog):
    from ctxlens.tasks import generate
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    fresh = generate("niah_single_1", tok, 512, 2, seed=5, template="plain", cache=False)
    cache = tmp_path / "cache"
    first = generate("niah_single_1", tok, 512, 2, seed=5, template="plain", cache=cache)
    (folder,) = list((cache / "niah_single_1").iterdir())
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    _plant(folder.parent, [f"{folder.name}.tmp{os.getpid()}"], victim)  # the old temporary name
    folder.symlink_to(victim.parent / "elsewhere", target_is_directory=True)  # a link in the folder's place
    (victim.parent / "elsewhere").mkdir()
    with caplog.at_level(logging.WARNING, logger="ctxlens.tasks.dataset"):
        again = generate("niah_single_1", tok, 512, 2, seed=5, template="plain", cache=cache)
    assert victim.read_text() == "precious" and not any((victim.parent / "elsewhere").iterdir())
    assert "task cache not written" in caplog.text
    assert [s.input for s in again] == [s.input for s in first] == [s.input for s in fresh]


def test_task_cache_in_a_file_is_skipped_with_a_warning(victim, caplog):
    from ctxlens.tasks import generate
    from ctxlens.zoo.tokenizer import byte_tokenizer

    with caplog.at_level(logging.WARNING, logger="ctxlens.tasks.dataset"):
        samples = generate("niah_single_1", byte_tokenizer(), 512, 1, template="plain", cache=victim / "cache")
    assert samples and "a part of the path is a file" in caplog.text and victim.read_text() == "precious"
