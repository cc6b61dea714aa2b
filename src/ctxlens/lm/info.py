"""``ModelInfo``: what a model is, read from its config, for defaults and plans that fit it.

An experiment's options that depend on the model (RULER's lengths, the head-masking passkey
wording, the intrinsic-entropy sample count) are filled from this description, never from the
zoo's constants: its family kind and position encoding (``ctxlens.lm.families``), how many
positions it takes (hard for learned positions, soft for RoPE), the length it was trained at (the
resolver's record, e.g. the zoo recipe, else the ``original_max_position_embeddings`` of a scaled
RoPE, else ``max_position_embeddings``), its sliding window, its feature width and where it came
from (``zoo`` for ``zoo:NAME``). It is read from ``config.json`` without the weights
(``read_info``), so a run plans before it loads, or from a loaded ``LM`` (``LM.info``): the same
function of the same config either way. ``weights`` names the weights the config was loaded with
(``weights_record``): their format (GGUF, safetensors, zoo, hub), quantisation, file and digest.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import ctxlens.lm.analysis.rope as _rope
from ctxlens.core.errors import CtxlensError
from ctxlens.lm.families import known_family

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.specs import Resolved


@dataclass(frozen=True)
class ModelInfo:
    """What a model is (see the module docstring); None where its config does not say."""

    model_type: str
    kind: str | None  # transformer | ssm | recurrent | hybrid (None: no hand-written family)
    position: str | None  # rope | alibi | learned | none
    max_positions: int | None  # what its positions allow (config)
    hard_limit: bool  # learned absolute positions: no extrapolation at all
    train_length: int | None  # the length it was trained at
    sliding_window: int | None
    d_model: int | None
    origin: str = ""  # the resolver prefix it was loaded through: "zoo", "ref", or "" (hub, path, GGUF)
    weights: dict | None = None  # format, quantization, file, digest (``weights_record``); None: not known

    @property
    def zoo(self) -> bool:
        return self.origin == "zoo"

    def allows(self, n_tokens: int, extrapolate: bool = False) -> bool:
        """Whether ``n_tokens`` positions fit: within ``max_positions``, or beyond it with
        ``extrapolate`` when the positions are not learned (``LM.check_length``'s rule)."""
        if self.max_positions is None or n_tokens <= self.max_positions:
            return True
        return extrapolate and not self.hard_limit

    def as_dict(self) -> dict:
        return {**asdict(self), "zoo": self.zoo}

    def describe(self) -> str:
        """One line: type, kind / position, positions, training length, window, width, origin."""
        parts = [self.model_type, "/".join(p for p in (self.kind, self.position) if p)]
        if self.max_positions:
            parts.append(f"{self.max_positions} positions" + (" (learned)" if self.hard_limit else ""))
        if self.train_length:
            parts.append(f"trained at {self.train_length}")
        if self.sliding_window:
            parts.append(f"sliding window {self.sliding_window}")
        if self.d_model:
            parts.append(f"d_model {self.d_model}")
        if self.origin:
            parts.append(f"{self.origin} model")
        return ", ".join(p for p in parts if p)


def _int(config: PretrainedConfig, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def positions_limit(config: PretrainedConfig) -> tuple[int | None, bool]:
    """(max positions, hard?) of a text config — hard for learned absolute positions, soft for RoPE."""
    for attr in ("n_positions", "max_seq_len"):
        if getattr(config, attr, None):
            return int(getattr(config, attr)), True
    if getattr(config, "max_position_embeddings", None):
        return int(config.max_position_embeddings), False
    return None, False


def stated_train_length(config: PretrainedConfig) -> int | None:
    """The training length a config states: the ``original_max_position_embeddings`` of its RoPE
    scaling (the global layers' on a per-type model), else ``max_position_embeddings``."""
    config = _rope.text_config(config)
    params = getattr(config, "rope_parameters", None) or {}
    keys = _rope.rope_keys(config)  # per layer type: the global layers' entry first
    entries = [params[k] for k in sorted(keys, key=lambda k: k != _rope.GLOBAL) if params[k]] if keys else [params]
    originals = [e.get("original_max_position_embeddings") for e in entries if isinstance(e, dict)]
    for value in (*originals, getattr(config, "max_position_embeddings", None)):
        if value:
            return int(value)
    return None


MAX_POSITIONS = 1 << 30  # positions or a training length beyond this: a config no model has (10**400 once)


def info_from_config(config: PretrainedConfig, train_length: int | None = None, origin: str = "") -> ModelInfo:
    """The ``ModelInfo`` of a (transformers) config; ``train_length``: what the model's source
    records (the zoo recipe), which wins over the config's statement."""
    text = _rope.text_config(config)
    family = known_family(getattr(config, "model_type", ""))
    limit, hard = positions_limit(text)
    for name, value in (("positions", limit), ("training length", train_length or stated_train_length(text))):
        if isinstance(value, int) and not 0 < value <= MAX_POSITIONS:
            shown = str(value)[:20] + ("..." if len(str(value)) > 20 else "")
            raise CtxlensError(f"The model's config states {name} {shown}, outside 1 .. {MAX_POSITIONS:,}; fix "
                               "config.json.")
    return ModelInfo(
        model_type=str(getattr(config, "model_type", "")), kind=family.kind if family else None,
        position=family.position if family else None, max_positions=limit, hard_limit=hard,
        train_length=train_length or stated_train_length(text) or limit,
        sliding_window=_int(text, "sliding_window", "attention_window"),
        d_model=_int(text, "hidden_size", "d_model", "n_embd"), origin=origin,
        weights=weights_record(str(getattr(config, "_name_or_path", "") or ""), origin))


def weights_record(source: str, origin: str = "") -> dict | None:
    """``_weights_record`` of ``source``, read again when a file in the directory changed."""
    directory = Path(source) if source else None
    stamp = max((p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()), default=0) \
        if directory is not None and directory.is_dir() else 0
    return _weights_record(source, origin, stamp)


@functools.lru_cache(maxsize=64)
def _weights_record(source: str, origin: str, stamp: int) -> dict | None:
    """What weights ``source`` (the directory or hub id a config was loaded from) holds: {format,
    quantization, file, digest}. A converted GGUF directory (``ctxlens.lm.gguf``): GGUF, the file's
    type (``general.file_type``, else its commonest tensor type), its name and sha256. Any other
    directory: safetensors (or the weight files' kind; ``zoo`` for a zoo model), the dtypes of its
    tensors, its files, and ctxlens's fingerprint. A hub id: format hub, the id. None for nothing."""
    import ctxlens.lm.gguf as gguf
    from ctxlens.lm.fingerprint import WEIGHT_SUFFIXES, directory_fingerprint

    if not source:
        return None
    directory = Path(source)
    if not directory.is_dir():
        return {"format": "hub", "quantization": None, "file": source, "digest": None}
    stamp_file = directory / gguf.SOURCE_FILE
    recorded = gguf.check_conversion(directory, source) if stamp_file.is_file() else None  # its files verified
    if recorded is not None:  # (a record without digests vouches for nothing: the directory's own digest below)
        kind = recorded.get("file_type") if isinstance(recorded.get("file_type"), str) else None
        path = recorded.get("path")
        kind = kind or (gguf.file_type(Path(path)) if isinstance(path, str) else None)
        name = recorded.get("file")
        return {"format": "GGUF", "quantization": kind, "file": name if isinstance(name, str) else None,
                "digest": f"sha256:{recorded['sha256']}"}
    files = sorted(p.name for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    kinds = sorted({Path(f).suffix.lstrip(".") for f in files})
    dtypes = sorted({d for f in files if f.endswith(".safetensors") for d in _safetensors_dtypes(directory / f)})
    return {"format": "zoo" if origin == "zoo" else "+".join(kinds) or None,
            "quantization": "+".join(dtypes) or None, "file": ", ".join(files) or None,
            "digest": f"fingerprint:{directory_fingerprint(directory)}"}


def _safetensors_dtypes(path: Path) -> set[str]:
    """The dtypes (F32, BF16, ...) of the tensors of a safetensors file, from its header alone."""
    try:
        with open(path, "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    except (OSError, ValueError):
        return set()
    return {v["dtype"] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict) and "dtype" in v}


def model_config(spec: str | Resolved, trust_remote_code: bool = False,
                 revision: str | None = None) -> tuple[Resolved, PretrainedConfig]:
    """(where ``spec`` resolves, a copy of its transformers config): the config is read once per process
    for a spec and options while its ``config.json`` is unchanged on disk (``read_info`` plans with it,
    ``load`` then builds the model from it), and each caller gets its own copy to change. ``spec``
    resolved already (``ctxlens.lm.specs.Resolved``) is not resolved again."""
    import copy

    import ctxlens.lm.model_files as model_files
    from ctxlens.lm.specs import as_resolved

    where = as_resolved(spec)
    model_files.check_directory(where.path, revision)  # transformers reads its config and tokenizer files whole
    try:
        found = (Path(where.path) / "config.json").stat()
        stamp = (found.st_mtime_ns, found.st_size)
    except OSError:  # a hub id: transformers' own cache
        stamp = None
    return where, copy.deepcopy(_read_config(where.path, where.name, trust_remote_code, revision, stamp))


@functools.lru_cache(maxsize=32)
def _read_config(path: str, spec: str, trust_remote_code: bool, revision: str | None,
                 stamp: tuple[int, int] | None) -> PretrainedConfig:
    """The config transformers reads from ``path`` (``stamp``: its config.json's time and size, so an edit
    reads it again)."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code, revision=revision)
    except (OSError, ValueError) as err:
        raise CtxlensError(f"Could not load a model config for '{spec}' ({str(err).splitlines()[0]}); "
                           "check the hub id or path, and network access for hub ids.") from None
    except Exception as err:  # transformers' typed config (huggingface_hub's strict dataclasses): a wrong-typed field
        if not (isinstance(err, TypeError) or type(err).__name__.startswith("StrictDataclass")):
            raise
        raise CtxlensError(f"The config.json of '{spec}' has a field of the wrong type "
                           f"({' '.join(str(err).split())[:160]}); fix config.json.") from None


def read_info(spec: str | Resolved, trust_remote_code: bool = False, revision: str | None = None) -> ModelInfo:
    """The ``ModelInfo`` of model ``spec`` (or of a spec resolved already) from its config alone (no weights
    loaded)."""
    where, config = model_config(spec, trust_remote_code, revision)
    return info_from_config(config, where.train_length, where.origin)
