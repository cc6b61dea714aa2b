"""Size bounds on the small files of a model or tokenizer directory, checked before anything reads them.

transformers reads a directory's ``config.json``, ``tokenizer_config.json``, ``chat_template.jinja`` and
the other tokenizer files whole (``json.load``, ``read()``), and so does ctxlens's own tokenizer reader
(``ctxlens.tasks.tokenizer``): a 3 GB ``chat_template.jinja`` or ``tokenizer_config.json`` was read whole
before any size check (issue 45). ``check_directory`` refuses any of them larger than its bound in ``LIMITS``
(or not a regular file: a FIFO would block the reader), checked with ``fstat`` on an open descriptor
(``core.files.check_size``), in one sentence naming the file, its size, the bound and the fix; ``read``
reads one of them with its bound, checked on the descriptor it then reads. transformers opens its files
again after the check, so a file swapped for a larger one in between is not caught there: the check
guards against files that are too large, not against a race with someone writing the directory.

Each bound is far above any real file, so only a broken or hostile file meets it: real chat templates
are a few KiB (the longest known, with tool-calling logic, about 20 KiB; a GGUF's is capped at the same
1 MiB, ``ctxlens.lm.gguf.TEMPLATE_CAP``); ``tokenizer_config.json`` is at most about 1.2 MB (Gemma 3's on
the hub, which lists its added tokens); ``tokenizer.json`` under 40 MB (Gemma 3's 262,144-token
vocabulary: 33 MB); ``config.json`` under 100 KB. A hub id's files are downloaded and read by transformers
before ctxlens sees them, so only a local directory (a checkpoint, a converted GGUF, a zoo or reference
model) is checked.
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxlens.core import files
from ctxlens.core.errors import CtxlensError

MIB = 1 << 20
TEMPLATE_BYTES = 1 * MIB  # a chat template, in its own file or in tokenizer_config.json
LIMITS = {
    "config.json": 16 * MIB,
    "generation_config.json": 16 * MIB,
    "tokenizer_config.json": 64 * MIB,
    "special_tokens_map.json": 64 * MIB,
    "added_tokens.json": 64 * MIB,
    "chat_template.jinja": TEMPLATE_BYTES,
    "chat_template.json": 4 * MIB,
    "tokenizer.json": 256 * MIB,
    "vocab.json": 256 * MIB,
    "vocab.txt": 256 * MIB,
    "merges.txt": 256 * MIB,
    "tokenizer.model": 256 * MIB,
    "model.safetensors.index.json": 64 * MIB,  # the largest real ones (a few hundred thousand tensors) are ~10 MB
    "pytorch_model.bin.index.json": 64 * MIB,
}
TEMPLATES = "additional_chat_templates"  # a folder of named templates (``NAME.jinja``), each read whole
MAX_TEMPLATES = 256  # real folders hold a few ("tool_use", "rag")
FIX = "restore the model's own file (a download cut short or a file replaced), or point at another model"


def check_directory(folder: str | Path) -> None:
    """Refuse, before transformers reads them, any file of ``LIMITS`` in ``folder`` larger than its bound,
    or not a regular file (a FIFO would block the reader); a missing file, or a ``folder`` that is not a
    directory (a hub id), passes."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for name, limit in LIMITS.items():
        files.check_input_size(folder / name, limit, _what(name), FIX)
    templates = folder / TEMPLATES
    if templates.is_dir():
        with os.scandir(templates) as entries:
            for i, entry in enumerate(entries):
                if i >= MAX_TEMPLATES:
                    raise CtxlensError(f"'{templates}' holds more than {MAX_TEMPLATES} files, more than the chat "
                                       f"templates of any model; {FIX}.")
                files.check_input_size(templates / entry.name, TEMPLATE_BYTES, "Chat template", FIX)


def read(path: str | Path) -> bytes:
    """The bytes of model file ``path`` (one named in ``LIMITS``), refused in one sentence when it is larger
    than its bound, checked on the open file before any byte is read."""
    path = Path(path)
    return files.read_input(path, LIMITS[path.name], _what(path.name), FIX)


def _what(name: str) -> str:
    return "Chat template" if name.startswith("chat_template") else "Model file"
