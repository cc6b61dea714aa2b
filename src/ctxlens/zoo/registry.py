"""The zoo: named local models loadable as ``zoo:NAME`` through the ordinary loader.

A zoo entry is a function that builds a transformers model + tokenizer; the first use saves
it with ``save_pretrained`` under ``$CTXLENS_HOME/zoo/NAME`` (default ``~/.cache/ctxlens``),
and every later load reads that directory exactly as it would read a hub checkpoint.

``random-llama`` is a seeded, randomly initialised tiny llama for smoke runs: its numbers
say nothing about long context, only that the pipeline works end to end.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ctxlens.core.errors import unknown

BUILDERS: dict[str, Callable[[Path], None]] = {}


def register(name: str):
    def deco(fn: Callable[[Path], None]):
        BUILDERS[name] = fn
        return fn

    return deco


def home() -> Path:
    return Path(os.environ.get("CTXLENS_HOME", Path.home() / ".cache" / "ctxlens")).expanduser()


def zoo_path(name: str) -> Path:
    """Directory of zoo model ``name``, building it on first use."""
    if name not in BUILDERS:
        raise unknown("zoo model", name, BUILDERS)
    path = home() / "zoo" / name
    if not (path / "config.json").is_file():
        tmp = path.with_name(path.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        BUILDERS[name](tmp)
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    return path


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
