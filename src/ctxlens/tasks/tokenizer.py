"""A model's tokenizer read from its files with the ``tokenizers`` package, without transformers.

RULER (the benchmark of the long-sequence paper, "How Well Can a Long Sequence Model Model Long
Sequences?", Section 4) loads a tokenizer through transformers' ``AutoTokenizer``, which costs
seconds of imports for a file that ``tokenizers`` reads in milliseconds. A model directory (or a
converted GGUF checkpoint) holding ``tokenizer.json`` and ``tokenizer_config.json`` gives the same
ids directly: ``FileTokenizer`` offers the part of transformers' tokenizer API the tasks use
(``encode``, ``backend_tokenizer``, the special tokens, ``chat_template``, ``apply_chat_template``).

Only configurations whose ids are exactly the backend's are read this way (``from_files`` returns
None otherwise: a config option that changes encoding, remote code, special tokens the backend
lacks); the caller then falls back to transformers. A chat template is rendered by jinja2 in an
immutable sandbox with the globals transformers gives it; nothing from a config runs outside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ctxlens.lm.model_files import LIMITS

if TYPE_CHECKING:
    import jinja2
    import tokenizers
    from transformers import PreTrainedTokenizerBase  # checked as Any (pyproject)

    # what the tasks take as a tokenizer: transformers' own, or one read from its files here
    TaskTokenizer: TypeAlias = "PreTrainedTokenizerBase | FileTokenizer"

FILES = ("tokenizer.json", "tokenizer_config.json")
# tokenizer_config.json keys that do not change text -> ids (anything else: transformers decides)
INERT = {
    "backend", "tokenizer_class", "is_local", "local_files_only", "model_max_length", "chat_template",
    "clean_up_tokenization_spaces", "added_tokens_decoder", "model_input_names", "padding_side", "truncation_side",
    "errors", "name_or_path", "processor_class", "use_default_system_prompt",
}
SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class FileTokenizer:
    """A ``tokenizers.Tokenizer`` plus the special tokens and chat template of its config."""

    # set from the config in __init__ (SPECIAL_KEYS), None when it names none
    bos_token: str | None
    eos_token: str | None
    unk_token: str | None
    sep_token: str | None
    pad_token: str | None
    cls_token: str | None
    mask_token: str | None

    def __init__(self, backend: tokenizers.Tokenizer, specials: dict[str, str] | None = None,
                 chat_template: str | None = None, template_file: str = "the tokenizer's configuration") -> None:
        self.backend_tokenizer = backend
        self.template_file = template_file  # where the chat template was read: named in its errors
        self.special_tokens_map = dict(specials or {})
        self.chat_template = chat_template
        for key in SPECIAL_KEYS:
            setattr(self, key, self.special_tokens_map.get(key))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def __call__(self, text: str, add_special_tokens: bool = True) -> Encoding:
        return Encoding(input_ids=self.encode(text, add_special_tokens))

    def tokenize(self, text: str) -> list[str]:
        """Token strings of ``text`` without added special tokens (transformers' ``tokenize``)."""
        return self.backend_tokenizer.encode(text, add_special_tokens=False).tokens

    def token_id(self, key: str) -> int | None:
        """Id of the special token ``key`` (``bos_token`` ...), None when there is none."""
        token = self.special_tokens_map.get(key)
        return None if token is None else self.backend_tokenizer.token_to_id(token)

    @property
    def bos_token_id(self) -> int | None:
        return self.token_id("bos_token")

    @property
    def eos_token_id(self) -> int | None:
        return self.token_id("eos_token")

    @property
    def pad_token_id(self) -> int | None:
        return self.token_id("pad_token")

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def apply_chat_template(self, messages: list[dict[str, Any]], tokenize: bool = False,
                            add_generation_prompt: bool = False, **kwargs: Any) -> str:
        """The chat template rendered as transformers renders it (text only: ``tokenize=False``)."""
        if tokenize:
            raise ValueError("FileTokenizer renders chat templates as text only; encode the result.")
        if not self.chat_template:
            raise ValueError("This tokenizer has no chat template.")
        return render_chat(self.chat_template, self.template_file, messages, add_generation_prompt,
                           {**self.special_tokens_map, **kwargs})


class Encoding(dict):
    """``{"input_ids": [...]}`` that also reads as ``.input_ids``, as transformers' encodings do."""

    __getattr__ = dict.__getitem__


def from_files(directory: str | Path) -> FileTokenizer | None:
    """The tokenizer saved in ``directory``, or None when only transformers can reproduce it."""
    folder = Path(directory)
    if not all((folder / name).is_file() for name in FILES):
        return None
    import ctxlens.lm.model_files as model_files
    from ctxlens.core import yaml_safe
    from ctxlens.core.errors import CtxlensError

    model_files.check_directory(folder)  # what transformers would read on a fallback, too: bounded first
    try:
        raw = model_files.read(folder / "tokenizer_config.json")  # a file over its bound is one sentence
    except OSError:
        return None
    try:
        config = yaml_safe.load_json(raw.decode("utf-8"), "config")
    except (ValueError, CtxlensError):
        return None
    if not isinstance(config, dict) or any(k not in INERT and k not in SPECIAL_KEYS for k in config):
        return None
    contents = {k: _content(config[k]) for k in SPECIAL_KEYS if config.get(k) is not None}
    specials = {k: v for k, v in contents.items() if v is not None}
    if len(specials) < len(contents):
        return None
    template = _chat_template(folder, config.get("chat_template"))
    jinja = folder / "chat_template.jinja"
    where = str(jinja if jinja.is_file() else folder / "tokenizer_config.json")
    if template is False:
        return None
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception:  # noqa: BLE001 - a file the tokenizers package cannot read: transformers may
        return None
    added = {t.content for t in backend.get_added_tokens_decoder().values()}
    declared = {_content(t) for t in (config.get("added_tokens_decoder") or {}).values()}
    if not declared <= added or any(backend.token_to_id(v) is None for v in specials.values()):
        return None  # transformers would add tokens to the backend first
    return FileTokenizer(backend, specials, template, where)


MAX_TOKENIZER_BYTES = LIMITS["tokenizer.json"]  # the largest tokenizer.json ctxlens reads (real ones: under 40 MB)


def check_tokenizer_json(folder: Path) -> None:
    """Raise one sentence unless ``folder``'s ``tokenizer.json`` (when there is one) is a JSON object of
    the ``tokenizers`` shape: a ``model`` object, ``added_tokens`` a list of objects; read with
    bounded size and depth (a deeply nested or 1 GB file once ended in a traceback)."""
    from ctxlens.core import files, yaml_safe
    from ctxlens.core.errors import CtxlensError

    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return
    fix = "restore the model's tokenizer files or give another --tokenizer"
    raw = files.read_input(path, MAX_TOKENIZER_BYTES, "Tokenizer file", fix)  # the size checked on the open file
    try:
        data = yaml_safe.load_json(raw.decode("utf-8"), str(path))
    except UnicodeDecodeError:
        raise CtxlensError(f"{path} is not UTF-8 text; {fix}.") from None
    except CtxlensError as err:
        raise CtxlensError(f"{str(err).split('; fix it')[0]}; {fix}.") from None
    added = data.get("added_tokens", []) if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict) or not isinstance(added, list) \
            or not all(isinstance(t, dict) for t in added):
        raise CtxlensError(f"{path} is not a tokenizer of the tokenizers package's shape (an object with a 'model' "
                           f"object and a list of 'added_tokens'); {fix}.")


def _content(token: object) -> str | None:
    if isinstance(token, str):
        return token
    if isinstance(token, dict) and isinstance(token.get("content"), str):
        return token["content"]
    return None


def _chat_template(folder: Path, in_config: object) -> str | Literal[False] | None:
    """The default chat template (a ``chat_template.jinja`` file first, as transformers reads it),
    None when there is none, False when it cannot be told which one transformers would use."""
    import ctxlens.lm.model_files as model_files
    from ctxlens.core.errors import CtxlensError

    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        try:
            return model_files.read(jinja).decode("utf-8")  # its size checked on the open file, then read
        except UnicodeDecodeError:
            raise CtxlensError(f"Chat template '{jinja}' is not UTF-8 text; {model_files.FIX}.") from None
    if (folder / "chat_template.json").is_file() or (folder / "additional_chat_templates").exists():
        return False
    if isinstance(in_config, str) and len(in_config) > model_files.TEMPLATE_BYTES:
        raise CtxlensError(f"The chat template in '{folder / 'tokenizer_config.json'}' is {len(in_config):,} "
                           f"characters, more than the {model_files.TEMPLATE_BYTES >> 20} MiB ctxlens reads; "
                           f"{model_files.FIX}.")
    if in_config is None or isinstance(in_config, str):
        return in_config
    return False  # a list of named templates


def compile_template(source: str, where: str = "the chat template") -> jinja2.Template:
    """``source`` compiled in the bounded immutable sandbox (``ctxlens.tasks.sandbox``) with
    transformers' chat-template globals."""
    from ctxlens.tasks.sandbox_process import compile_template as bounded

    return bounded(source, where)


def render_chat(source: str, where: str, messages: list[dict[str, Any]], add_generation_prompt: bool,
                extra: dict[str, Any]) -> str:
    """The chat template ``source`` (read from ``where``) rendered as transformers renders it, within
    the sandbox's time, size and output bounds; every failure one sentence naming ``where``."""
    from ctxlens.tasks.sandbox_process import render

    return render(source, where, messages=_plain(messages), tools=None, documents=None,
                  add_generation_prompt=add_generation_prompt, **_plain(extra))


def _plain(value: Any) -> Any:  # a template's context: JSON values in, JSON values out
    """Only JSON values reach a template (no objects with methods the sandbox does not know)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)
