"""Greedy decoding of task prompts: transformers (default), vLLM (optional), or an HTTP endpoint.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4) scores
transformers, SSMs, RNNs and hybrids alike on what they generate. Every backend here takes
token ids (so the model sees exactly the fitted prompt), decodes greedily up to each prompt's
budget, stops at an end-of-sequence token, and returns only the generated text -- never the
prompt or the answer prefix -- for scoring.

Every backend is a ``Decoder``: the one interface the task engine calls (``generate``: answers in prompt
order, those an interrupted attempt kept taken as given, each new one reported as it finishes); a
backend supplies only how it answers the prompts left (``_answer``).

* ``TransformersBackend``: ``lm.model.generate`` with its KV / recurrent cache, a fresh greedy
  generation config (no sampling, no repetition penalty), prompts of equal length and budget
  batched together (no padding, so SSM and hybrid models need no attention mask support); a
  prefix that prompts share (the haystack before the needle of a depth sweep) is prefilled once
  and its cache copied into each batch (``ctxlens.tasks.prefix``), for models whose cache passes
  ``ctxlens.lm.prefix_cache.reuse_problem``; ``prefill_tokens`` counts the prompt tokens run;
  ``generate_forced`` first scores known answers in one teacher-forced forward per batch
  (``ctxlens.tasks.forced``) from the same prefix cache, and decodes, from the prompt's cache,
  only the items that forward did not prove;
* ``VLLMBackend``: ``vllm.LLM`` with tensor parallelism, temperature 0; import-guarded;
* ``OpenAIBackend``: an OpenAI-compatible ``/v1/completions`` endpoint (vLLM's server, ...),
  sending token ids (or text), temperature 0.
"""

from __future__ import annotations

import abc
import json
import os
import typing
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.lm.prefix_cache import copied, prefill, reuse_problem
from ctxlens.tasks.prefix import PrefixStore, common_length, shared_lengths

if typing.TYPE_CHECKING:
    from transformers import Cache, GenerationConfig, PreTrainedModel  # checked as Any (pyproject)

    from ctxlens.lm.model import LM
    from ctxlens.tasks.tokenizer import TaskTokenizer

Backend = typing.Literal["transformers", "vllm", "openai"]
BACKENDS = typing.get_args(Backend)


@dataclass(frozen=True)
class Answer:
    """One item's answer: decoded, or proven by the forced forward (``ctxlens.tasks.forced``)."""

    text: str  # the generated text; when forced, the decoded gold text (what decoding would write first)
    scored_by: str  # forced | decoded
    gold_logprob: float | None = None  # the gold tokens' summed log-probability, nats; None: no forced forward
    gold_tokens: int | None = None  # m, the gold answer's tokens; None: no forced forward


def _gather(n: int, done: Mapping[int, typing.Any] | None, on_done: Callable[[int, typing.Any], None] | None,
            run: Callable[[list[int], Callable[[int, typing.Any], None]], None]) -> list[typing.Any]:
    """``n`` answers in order: those in ``done`` (index -> answer) taken as given, the others from
    ``run(todo, finished)``, each reported to ``on_done`` as ``finished`` hears of it."""
    done = done or {}
    out = [done.get(i) for i in range(n)]

    def finished(i: int, answer: typing.Any) -> None:
        out[i] = answer
        if on_done is not None:
            on_done(i, answer)

    todo = [i for i in range(n) if i not in done]
    if todo:
        run(todo, finished)
    return out


class Decoder(abc.ABC):
    """A decoding backend: greedy answers to token-id prompts, each within its budget of new tokens."""

    name: typing.ClassVar[str]  # what --backend calls it

    def generate(self, prompts: Sequence[Sequence[int]], budgets: Sequence[int], done: Mapping[int, str] | None = None,
                 on_done: Callable[[int, str], None] | None = None) -> list[str]:
        """The generated text of each prompt (never the prompt), in prompt order; those in ``done``
        (index -> answer, from an interrupted attempt) are taken as given, and ``on_done(index, answer)``
        hears of each other answer once the backend has it."""
        if len(prompts) != len(budgets):
            raise CtxlensError(f"{len(prompts)} prompts were given {len(budgets)} budgets; give one budget per prompt.")
        return _gather(len(prompts), done, on_done,
                       lambda todo, finished: self._answer(prompts, budgets, todo, finished))

    @abc.abstractmethod
    def _answer(self, prompts: Sequence[Sequence[int]], budgets: Sequence[int], todo: list[int],
                finished: Callable[[int, str], None]) -> None:
        """Decode ``prompts[i]`` within ``budgets[i]`` for every i in ``todo`` (ascending), calling
        ``finished(i, text)`` for each."""


def _eos_ids(model: PreTrainedModel, tokenizer: TaskTokenizer | None) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), tokenizer):
        value = getattr(source, "eos_token_id", None)
        if value is not None:
            ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


class TransformersBackend(Decoder):
    """Greedy decoding with ``lm.model.generate``; equal-length prompts share a batch, and with
    ``share_prefix`` a batch starts from the cache of the prefix its prompts share with others
    (kept across calls in a store of at most ``prefix_bytes``, the newest one always). Shared or
    not, the same batches decode the same budgets with the same stop rules; the logits differ
    only by the order of floating-point sums (a prefix and its continuation run as separate
    forwards), so the greedy answers are the same unless two logits tie to that rounding."""

    name = "transformers"

    def __init__(self, lm: LM, batch_size: int = 8, share_prefix: bool = True, prefix_bytes: int = 512 << 20) -> None:
        lm.require_tokenizer("task generation")
        if batch_size < 1:
            raise CtxlensError(f"batch_size must be at least 1, got {batch_size}.")
        self.lm, self.batch_size = lm, batch_size
        self.eos = _eos_ids(lm.model, lm.tokenizer)
        self.share_prefix, self.store = share_prefix, PrefixStore(prefix_bytes)
        self.no_sharing: str | None = None  # why the model's cache cannot be reused ('' when it can); None: unchecked
        self.prefill_tokens = 0  # prompt tokens run through the model (shared prefixes once)

    @property
    def tokenizer(self) -> TaskTokenizer:
        """``lm``'s tokenizer (read at each use), which ``__init__`` required."""
        tokenizer = self.lm.tokenizer
        assert tokenizer is not None  # lm.require_tokenizer refused a model without one
        return tokenizer

    def sharing(self) -> bool:
        """Whether prefixes are shared: asked for, and the model's cache passes the reuse check (once)."""
        if not self.share_prefix:
            return False
        if self.no_sharing is None:
            self.no_sharing = reuse_problem(self.lm)
        return not self.no_sharing

    def _answer(self, prompts: Sequence[Sequence[int]], budgets: Sequence[int], todo: list[int],
                finished: Callable[[int, str], None]) -> None:
        """Batches of equal length and budget among ``todo``; a batch's answers are reported together once
        it is decoded. Batches are formed as without an interrupted attempt's answers when those hold
        whole batches, as an interrupted attempt leaves them (``ctxlens.runner.partial``)."""
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i in todo:
            groups[(len(prompts[i]), int(budgets[i]))].append(i)
        shared = shared_lengths(prompts) if self.sharing() else [0] * len(prompts)
        for (length, budget), members in groups.items():
            self.lm.check_length(length + budget)
            config = self._config(budget)
            for start in range(0, len(members), self.batch_size):
                chunk = members[start:start + self.batch_size]
                ids, cache = self._started([list(prompts[i]) for i in chunk], min(shared[i] for i in chunk))
                for i, text in zip(chunk, self._generate(ids, cache, config)):
                    finished(i, text)

    def generate_forced(self, prompts: Sequence[Sequence[int]], golds: Sequence[Sequence[int]],
                        budgets: Sequence[int], proves: Callable[[int, str], bool],
                        done: Mapping[int, Answer] | None = None,
                        on_done: Callable[[int, Answer], None] | None = None) -> list[Answer]:
        """Every prompt's ``Answer``, in prompt order: one teacher-forced forward over prompt + gold ids per
        decoding batch (``ctxlens.tasks.forced``) proves the items whose greedy answer starts with their gold ids
        and whose decoded gold text ``proves(index, text)`` (RULER's scorer gives it 100); only the
        other items are decoded, from the same prompt cache. ``done`` and ``on_done`` as in ``generate``."""
        if not len(prompts) == len(golds) == len(budgets):
            raise CtxlensError(f"{len(prompts)} prompts were given {len(golds)} gold answers and {len(budgets)} "
                               "budgets; give one of each per prompt.")
        return _gather(len(prompts), done, on_done,
                       lambda todo, finished: self._force(prompts, golds, budgets, proves, todo, finished))

    def _force(self, prompts: Sequence[Sequence[int]], golds: Sequence[Sequence[int]], budgets: Sequence[int],
               proves: Callable[[int, str], bool], todo: list[int], finished: Callable[[int, Answer], None]) -> None:
        """The batches decoding would form (``_answer``), each started from the shared prefix's cache as
        decoding starts it and run to its prompts' last id; then the forced forwards
        (``ctxlens.tasks.forced.prove``), and the unproven rows are decoded from the prompts' cache."""
        from ctxlens.tasks.forced import argmax_moved, prove, rows_of

        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i in todo:
            groups[(len(prompts[i]), int(budgets[i]))].append(i)
        shared = shared_lengths(prompts) if self.sharing() else [0] * len(prompts)
        moved = argmax_moved(self.lm.model, self._config(1))  # decoding off the raw argmax proves nothing
        decode = self.tokenizer.decode
        for (length, budget), members in groups.items():
            self.lm.check_length(length + budget)
            config = self._config(budget)
            for start in range(0, len(members), self.batch_size):
                chunk = members[start:start + self.batch_size]
                scored = [list(golds[i])[:budget] for i in chunk]  # a gold past the budget: its first tokens
                ids, cache = self._started([list(prompts[i]) for i in chunk], min(shared[i] for i in chunk),
                                           fresh=True)

                # as _decode reads ids without an end
                def accept(k: int, gold: list[int], chunk: list[int] = chunk) -> bool:
                    return not moved and proves(chunk[k], decode(gold, skip_special_tokens=True))

                found, proven, cache = prove(self.lm, ids, scored, [budget] * len(chunk), self.eos, accept, cache)
                rest = [k for k, g in enumerate(proven) if g is None]
                for k, g in enumerate(proven):
                    if g is not None:
                        finished(chunk[k], Answer(decode(g, skip_special_tokens=True), "forced", found[k].logprob,
                                                  len(scored[k])))
                if rest:
                    cache = rows_of(cache, rest, len(chunk), ids.device)
                    for k, text in zip(rest, self._generate(ids[rest], cache, config)):
                        finished(chunk[k], Answer(text, "decoded", found[k].logprob, len(scored[k])))

    def _config(self, budget: int) -> GenerationConfig:
        """A fresh greedy generation config for ``budget`` new tokens (no sampling, one beam)."""
        from transformers import GenerationConfig

        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else (min(self.eos) if self.eos else 0)
        return GenerationConfig(max_new_tokens=budget, do_sample=False, num_beams=1, pad_token_id=pad,
                                eos_token_id=sorted(self.eos) or None)

    def _started(self, rows: list[list[int]], target: int, fresh: bool = False) -> tuple[torch.Tensor, Cache | None]:
        """(ids [B, L] of ``rows``, equal in length, on the model's device; the model's cache of
        ids[:, :L-1] to decode them from, or None): the shared prefix's cache (``_prefix``) run on to the
        prompts' last id; with ``fresh``, a cache prefilled here when nothing is shared (the model's
        cache being reusable); None when prefixes are not shared."""
        length = len(rows[0])
        cached, cache = self._prefix(rows, target)
        self.prefill_tokens += len(rows) * (length - cached)
        ids = torch.tensor(rows, dtype=torch.long, device=self.lm.device)  # [B, L]
        if cache is not None or (fresh and self.sharing() and length > 1):
            cache = prefill(self.lm, ids[:, cached:length - 1], cache)  # in blocks when it continues a cache
        return ids, cache

    def _generate(self, ids: torch.Tensor, cache: Cache | None, config: GenerationConfig) -> list[str]:
        """The greedy answers of ids [B, L], from ``cache`` (of ids[:, :L-1]) when given."""
        kwargs = {"cache": cache} if cache is not None else {}
        with torch.inference_mode():
            gen = self.lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config,
                                         **kwargs)  # [B, L + new]
        return [self._decode(row) for row in gen[:, ids.shape[1]:].tolist()]

    def _prefix(self, rows: list[list[int]], target: int) -> tuple[int, Cache | None]:
        """(n, cache of the first n ids of every row, repeated to len(rows) rows) to start a batch
        from: the stored prefix ``rows`` have in common, first extended to ``target`` ids (the
        prefix they share with other prompts) and stored; (0, None) when nothing is shared."""
        if not self.sharing():
            return 0, None
        common = min(min(common_length(rows[0], r) for r in rows), len(rows[0]) - 1)
        target = min(target, common)
        n, cache, held = self.store.best(rows[0][:common])
        if target > n:
            base = copied(cache, n, held) if cache is not None else None
            cache = prefill(self.lm, rows[0][n:target], base)
            self.prefill_tokens += target - n
            self.store.add(rows[0][:target], cache)
            n = held = target
        return (n, copied(cache, n, held, batch=len(rows))) if n else (0, None)

    def _decode(self, new_ids: list[int]) -> str:
        for k, t in enumerate(new_ids):
            if t in self.eos:
                new_ids = new_ids[:k]
                break
        return self.tokenizer.decode(new_ids, skip_special_tokens=True)


class VLLMBackend(Decoder):
    """Greedy decoding with vLLM (GPU; ``tensor_parallel`` GPUs per model)."""

    name = "vllm"

    def __init__(self, model: str, tensor_parallel: int = 1, max_model_len: int | None = None,
                 **kwargs: typing.Any) -> None:  # vllm.LLM's options
        try:
            import vllm
        except ImportError:
            raise CtxlensError(
                "The vllm backend needs the vllm package, which is not installed; install it on a GPU machine "
                "(pip install vllm) or use --backend transformers."
            ) from None
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, tensor_parallel_size=tensor_parallel, max_model_len=max_model_len, **kwargs)

    def _answer(self, prompts: Sequence[Sequence[int]], budgets: Sequence[int], todo: list[int],
                finished: Callable[[int, str], None]) -> None:
        params = [self._vllm.SamplingParams(temperature=0.0, max_tokens=int(budgets[i]), skip_special_tokens=True)
                  for i in todo]
        inputs = [{"prompt_token_ids": list(prompts[i])} for i in todo]
        for i, o in zip(todo, self.llm.generate(inputs, params, use_tqdm=False)):
            finished(i, o.outputs[0].text)


class OpenAIBackend(Decoder):
    """Greedy completions from an OpenAI-compatible HTTP server (``POST {base_url}/completions``)."""

    name = "openai"

    def __init__(self, base_url: str, model: str, tokenizer: TaskTokenizer | None = None, send: str = "ids",
                 timeout: float = 600.0, api_key_env: str = "OPENAI_API_KEY") -> None:
        if send not in ("ids", "text"):
            raise unknown("prompt encoding", send, ("ids", "text"))
        if send == "text" and tokenizer is None:
            raise CtxlensError("Sending text prompts needs the tokenizer to decode the fitted ids; pass one.")
        self.url = base_url.rstrip("/") + "/completions"
        self.model, self.tokenizer, self.send, self.timeout = model, tokenizer, send, timeout
        self.key = os.environ.get(api_key_env, "")

    def _answer(self, prompts: Sequence[Sequence[int]], budgets: Sequence[int], todo: list[int],
                finished: Callable[[int, str], None]) -> None:
        for i in todo:
            finished(i, self._one(prompts[i], budgets[i]))

    def _one(self, ids: Sequence[int], budget: int) -> str:
        if self.send == "ids":
            prompt: list[int] | str = list(ids)
        else:
            assert self.tokenizer is not None  # __init__ refused text prompts without a tokenizer
            prompt = self.tokenizer.decode(list(ids))
        body = {"model": self.model, "prompt": prompt, "max_tokens": int(budget), "temperature": 0.0}
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(self.url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read())
        except (urllib.error.URLError, OSError) as err:
            raise CtxlensError(f"The completions endpoint {self.url} failed ({err}); "
                               "check --api-base and the server.") from None
        try:
            return reply["choices"][0]["text"]
        except (KeyError, IndexError, TypeError):
            raise CtxlensError(f"The completions endpoint {self.url} answered without choices[0].text.") from None


def backend_for(lm: LM, name: str = "transformers", *, batch_size: int = 8, tensor_parallel: int = 1,
                api_base: str = "", api_model: str = "", send: str = "ids", share_prefix: bool = True) -> Decoder:
    """The backend ``name`` for ``lm`` (its tokenizer fits the prompts in every case); ``share_prefix``
    applies to transformers (vLLM caches prefixes itself)."""
    if name not in BACKENDS:
        raise unknown("generation backend", name, BACKENDS)
    if name == "transformers":
        return TransformersBackend(lm, batch_size, share_prefix)
    if name == "vllm":
        from ctxlens.lm.specs import resolve

        where = lm.resolved.path if lm.resolved is not None else resolve(lm.name)  # as loaded: not resolved again
        return VLLMBackend(where, tensor_parallel=tensor_parallel)
    if not api_base:
        raise CtxlensError("The openai backend needs --api-base, e.g. http://localhost:8000/v1.")
    return OpenAIBackend(api_base, api_model or lm.name, lm.tokenizer, send)
