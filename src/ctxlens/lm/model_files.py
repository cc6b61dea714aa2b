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
vocabulary: 33 MB); ``config.json`` under 100 KB.

A hub id (``check_hub``): its copies already in the local hub cache are checked on their files, as a
directory's are, and the sizes the hub lists for the files still to download (one metadata request,
``HfApi.model_info(files_metadata=True)``) are checked against the same bounds, before transformers
downloads or reads any of them. When the hub cannot be asked (offline, no network, a private repo
without a token), only the cached copies are checked, and transformers' own download says what is wrong.
"""

from __future__ import annotations

import os
import re
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


def check_directory(folder: str | Path, revision: str | None = None) -> None:
    """Refuse, before transformers reads them, any file of ``LIMITS`` in ``folder`` larger than its bound,
    or not a regular file (a FIFO would block the reader); a missing file passes. A ``folder`` that is a hub
    id (no such path, and a name the hub takes) is checked as ``check_hub`` says; any other, nothing."""
    if not Path(folder).exists() and _HUB_ID.fullmatch(str(folder)):
        return check_hub(str(folder), revision)
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


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")  # ``org/name`` or ``name``
HUB_FIX = "the hub lists it so: pick another revision (--revision) or another model"


def check_hub(repo_id: str, revision: str | None = None) -> None:
    """Refuse a hub model whose files of ``LIMITS`` (or named chat templates) are larger than their bounds,
    before transformers downloads or reads them: cached copies on their files, the others by the sizes the
    hub lists (module docstring)."""
    import huggingface_hub
    from huggingface_hub import constants

    for name, limit in LIMITS.items():
        cached = huggingface_hub.try_to_load_from_cache(repo_id, name, revision=revision)
        if isinstance(cached, str):
            files.check_input_size(cached, limit, _what(name), FIX)
    if constants.HF_HUB_OFFLINE:
        return
    try:
        info = huggingface_hub.HfApi().model_info(repo_id, revision=revision, files_metadata=True, timeout=10)
    except Exception:  # noqa: BLE001 - offline, no network, no such repo: transformers' own download says why
        return
    for sibling in info.siblings or ():
        name, size = sibling.rfilename, sibling.size
        bound = LIMITS.get(name, TEMPLATE_BYTES if name.startswith(TEMPLATES + "/") else None)
        if bound is not None and isinstance(size, int) and size > bound:
            raise CtxlensError(f"{_what(name.rpartition('/')[2])} '{name}' of hub model '{repo_id}' is {size:,} bytes, "
                               f"more than the {bound >> 20} MiB ctxlens reads; {HUB_FIX}.")


def read(path: str | Path) -> bytes:
    """The bytes of model file ``path`` (one named in ``LIMITS``), refused in one sentence when it is larger
    than its bound, checked on the open file before any byte is read."""
    path = Path(path)
    return files.read_input(path, LIMITS[path.name], _what(path.name), FIX)


def _what(name: str) -> str:
    return "Chat template" if name.startswith("chat_template") else "Model file"
