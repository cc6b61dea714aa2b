"""Generate a task's samples at one length, cached on disk.

The datasets behind the long-sequence paper's tables ("How Well Can a Long Sequence Model Model Long
Sequences?", Tables 1-4, 6-18) are deterministic functions of (task, generator version,
tokenizer, length, seed, sample count, options); ``generate`` stores each batch under a hash of
exactly those and reads it back on the next call. A sample never depends on how many samples
were asked for, and its id (``task/L<length>/s<seed>/<index>``) never depends on its content.

Cache layout: ``$CTXLENS_HOME/tasks/<task>/<key>/samples.jsonl`` (one sample per line, without
ids) and ``ids.npy`` (every sample's ids, concatenated, int32), written atomically.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ctxlens.core import files, paths
from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.base import Refit, Sample, Setup, check_options, get_task
from ctxlens.tasks.render import frame_for
from ctxlens.tasks.tokens import Encoder

if TYPE_CHECKING:
    from ctxlens.tasks.tokenizer import TaskTokenizer

GENERATOR_VERSION = "3"  # 2: chat answer prefix verbatim, system turn recorded; 3: whole noise lines, vt spacing
log = logging.getLogger(__name__)
_ENCODERS: weakref.WeakKeyDictionary[TaskTokenizer, Encoder] = weakref.WeakKeyDictionary()


def encoder_for(tokenizer: TaskTokenizer) -> Encoder:
    """One cached ``Encoder`` per tokenizer object."""
    try:
        enc = _ENCODERS.get(tokenizer)
    except TypeError:
        return Encoder(tokenizer)
    if enc is None:
        enc = Encoder(tokenizer)
        _ENCODERS[tokenizer] = enc
    return enc


def cache_root() -> Path:
    return paths.home() / "tasks"


def cache_key(task: str, fingerprint: str, length: int, seed: int, n: int, template: str, budget: int,
              options: dict) -> str:
    """Hash of everything a batch depends on."""
    spec = {"task": task, "version": GENERATOR_VERSION, "tokenizer": fingerprint, "length": length, "seed": seed,
            "n": n, "template": template, "budget": budget, "options": options}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:20]


def generate(task: str, tokenizer: TaskTokenizer, length: int, n: int, seed: int = 0, *, template: str = "auto",
             budget: int | None = None, options: dict | None = None, cache: bool | str | Path = True,
             verify: bool = False, system_prompt: str = "default") -> list[Sample]:
    """``n`` samples of ``task`` fitted to ``length`` tokens of ``tokenizer``.

    template: auto | plain | chat (see ``ctxlens.tasks.render``); budget: generation budget
    (default: RULER's for the task); options: overrides of the task's RULER arguments and
    ``EXTRA_OPTIONS`` (``depths``, ``haystack_source``, ``squad``, ``hotpotqa``); an option the task does
    not take is an error; system_prompt: a chat prompt's system turn, default | none | its text
    (``ctxlens.tasks.render``); cache: True (default
    directory), False, or a directory; verify: check every sample's piecewise ids against a
    full encoding (by default only the first sample of the batch is checked).
    """
    spec = get_task(task)
    _check_positive("length", length)
    _check_positive("n", n)
    _check_machine(task, n, length)
    options = dict(options or {})
    check_options([task], options)
    budget = spec.budget if budget is None else int(budget)
    if budget < 1:
        raise CtxlensError(f"The generation budget ({budget}) must be at least 1; pass a positive --max-new-tokens.")
    if budget >= length:
        from ctxlens.tasks.base import TooShort

        raise TooShort(f"The generation budget ({budget}) must be below the length ({length}); use longer lengths "
                       "or a smaller --max-new-tokens.")
    encoder = encoder_for(tokenizer)
    frame = frame_for(tokenizer, template, system_prompt)
    folder = None
    if cache is not False:
        key = cache_key(task, encoder.fingerprint, length, seed, n, frame.template + ":" + frame.head + frame.tail,
                        budget, options)
        folder = (cache_root() if cache is True else Path(cache)) / task / key
    if folder is not None and (folder / "samples.jsonl").is_file():
        return load(folder)
    encoder.mode, encoder.split_runs = "pieces", False  # found again per batch: same batch, same bytes
    setup = Setup(spec, encoder, frame, length, seed, budget, {**options, "verify": verify})
    samples = []
    for index in range(n):
        samples.append(_build(setup, index))
    if folder is not None:
        save(samples, folder)
    return samples


PROMPT_BYTES_PER_TOKEN = 32  # a sample held in memory: its prompt text (about 4 characters a token), ids and pieces
#                              (measured 4 to 14 bytes a token with the byte tokenizer; 32 leaves room)


def _check_machine(task: str, n: int, length: int) -> None:
    """Refuse, before any sample is built, a batch whose prompts alone would take more than half of this
    machine's memory (a batch is held whole while it is built and scored)."""
    import os

    need = n * length * PROMPT_BYTES_PER_TOKEN
    try:
        have = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need > have // 2:
        raise CtxlensError(f"{n:,} samples of task '{task}' at {length:,} tokens need about {need / 2**30:,.1f} GiB "
                           f"for their prompts, more than this machine can give (memory {have / 2**30:,.1f} GiB); use "
                           "fewer samples (--n-samples, --n) or shorter lengths.")


def _build(setup: Setup, index: int) -> Sample:
    """One sample; built again (at most twice) when the encoder changes how it counts."""
    for _ in range(2):
        try:
            return setup.task.build(setup, index)
        except Refit:  # drop the streams costed the old way
            setup.shared.clear()
    return setup.task.build(setup, index)


def save(samples: list[Sample], folder: Path) -> None:
    """Write ``samples`` to ``folder`` atomically: a new temporary folder (``tempfile.mkdtemp``: a
    random name created exclusively, so a planted ``*.tmp`` link is never written through) renamed
    into place. The cache only saves time: a full disk, read-only cache or a link in the folder's
    place skips it with a warning, and the samples are returned as generated."""
    import numpy as np  # not at import: a process that only generates does not pay for numpy

    tmp = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
        with open(tmp / "samples.jsonl", "w") as f:
            for s in samples:
                f.write(json.dumps(s.to_dict(with_ids=False)) + "\n")
        ids = np.concatenate([np.asarray(s.input_ids, dtype=np.int32) for s in samples] or [np.zeros(0, np.int32)])
        np.save(tmp / "ids.npy", ids)
        if folder.is_symlink():
            raise OSError(errno.ELOOP, "a symbolic link is in the cache folder's place", str(folder))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    except OSError as err:
        log.warning("task cache not written (%s); the samples are used as generated",
                    files.user_error(err, folder, "write") or err)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def load(folder: Path) -> list[Sample]:
    """Read samples written by ``save``."""
    import numpy as np

    ids = np.load(folder / "ids.npy")
    out, at = [], 0
    with open(folder / "samples.jsonl") as f:
        for line in f:
            d = json.loads(line)
            k = d.pop("n_tokens")
            out.append(Sample(**d, input_ids=ids[at:at + k].tolist()))
            at += k
    return out


def _check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CtxlensError(f"{name} must be a positive integer, got {value!r}.")
