"""The zoo: named local models loadable as ``zoo:NAME`` through the ordinary loader.

Trained zoo models (``ctxlens.zoo.specs``) are looked up in ``$CTXLENS_HOME/zoo/NAME``
(default ``~/.cache/ctxlens``; what ``ctxlens zoo train`` writes), then among the checkpoints
shipped with the package, each beside its ``zoo.json`` record (``record``: the recipe, held-out
loss, ...; only this package reads that format). Built entries (``BUILDERS``) are functions that
make a model + tokenizer, saved on first use. Either way the result is a ``save_pretrained``
directory that loads exactly as a hub checkpoint would.

``random-llama`` is a seeded, randomly initialised tiny llama for smoke runs: its numbers
say nothing about long context, only that the pipeline works end to end.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ctxlens.core import paths
from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.core.registry import Registry
from ctxlens.lm.specs import Resolved

BUILDERS: Registry[Callable[[Path], None]] = Registry("zoo builder")  # name -> fn(out dir) that saves a model
register = BUILDERS.register


def home() -> Path:
    return paths.home()


SHIPPED = Path(__file__).parent / "checkpoints"


def names() -> list[str]:
    from ctxlens.zoo.specs import ZOO

    return [*ZOO, *BUILDERS]


def trained_path(name: str) -> Path | None:
    """Where a trained zoo model lives: the user's own training first, then the shipped one."""
    for path in (home() / "zoo" / name, SHIPPED / name):
        if (path / "config.json").is_file():
            return path
    return None


def record(name: str) -> dict:
    """The ``zoo.json`` record of trained zoo model ``name`` ({} when it is not trained, or built)."""
    path = trained_path(name)
    file = path / "zoo.json" if path is not None else None
    return json.loads(file.read_text()) if file is not None and file.is_file() else {}


def train_length(name: str) -> int | None:
    """The context length zoo model ``name`` was trained at (its recipe's ``seq_len``); None for built ones."""
    recipe = record(name).get("recipe") if name not in BUILDERS else None
    return int(recipe["seq_len"]) if recipe else None


def zoo_path(name: str) -> Path:
    """Directory of zoo model ``name`` (trained, or built on first use)."""
    if name not in names():
        raise unknown("zoo model", name, names())
    if name not in BUILDERS:
        path = trained_path(name)
        if path is None:
            raise CtxlensError(f"Zoo model '{name}' is not trained on this machine; run `ctxlens zoo train {name}`.")
        return path
    path = home() / "zoo" / name
    if not (path / "config.json").is_file():
        tmp = path.with_name(f"{path.name}.partial-{os.getpid()}")  # concurrent ranks build side by side
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        BUILDERS[name](tmp)
        if path.exists() and not (path / "config.json").is_file():
            shutil.rmtree(path, ignore_errors=True)  # debris of an older, interrupted layout
        try:
            tmp.rename(path)
        except OSError:  # another process finished first; its build is identical (seeded)
            shutil.rmtree(tmp, ignore_errors=True)
            if not (path / "config.json").is_file():
                raise
    return path


def zoo_resolved(name: str) -> Resolved:
    """The ``zoo:NAME`` resolver (``ctxlens.lm.specs.ENTRY_POINTS``): the model's directory and
    the length it was trained at."""
    return Resolved(str(zoo_path(name)), train_length(name))


@register("random-llama")
def _random_llama(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=len(tok), max_position_embeddings=4096,
                         bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    tok.save_pretrained(out)
