"""The built-in needle probes: passkey retrieval (``head-masking``) and the teacher-forced
single-needle accuracy (``rope-theta-sweep``).

The RoPE distance paper ("On the token distance modeling ability of higher RoPE attention
dimension"), Section 4.3.2, Figure 8, scores passkey retrieval by input length; the geometry
paper ("How much do contextualized representations encode long-range context?"), Section 4,
Table 8, single-needle retrieval per RoPE base. The task engine (``ctxlens.tasks``) renders
RULER's templates, not these prompts, so delegating to it would change the prompts and the
rows of existing runs; the prompts stay here, byte for byte, and share the corpus needle
placement (``needle_distance``) and the ``LM`` facade's greedy decoding and LM head.

Passkey prompts come in two styles, both scored by greedy generation (exact match of the answer):

- ``corpus``: the built-in corpus's single-needle probe (``ctxlens.data.corpus.retrieval_probes``):
  ``The code for the blue door is 4172.`` early, ``Question: what is the code for the blue door?
  Answer: `` at the end, corpus text and distractor facts around it; the format the zoo models
  were trained on.
- ``classic``: the usual passkey prompt (a repeated filler, ``The pass key is 48213. Remember
  it.`` at the chosen depth, ``What is the pass key? The pass key is`` at the end), for hub models.
- ``ruler``: RULER's own passkey, its ``niah_single_1`` task rendered by the task engine
  (``ctxlens.tasks``: a magic number hidden in repeated noise sentences, RULER's question and
  answer prefix, the model's chat template when it has one), decoded greedily for ``RULER_BUDGET``
  tokens and scored as RULER does (the number found in the answer); the default for models
  outside the zoo.

The answer is known, so ``scored`` first runs one teacher-forced forward per batch of probes of
equal length over prompt + gold answer (``ctxlens.tasks.forced``; the gold answer is the passkey
as the prompt's last words lead into it: ``Probe.gold``): a probe whose every gold token is the
argmax, and whose gold text the probe's own rule accepts, is retrieved without decoding (greedy
decoding would write the gold answer first); the others are decoded as ``retrieved`` decodes them.
Both run inside whatever context the caller holds (``lm.mask_heads(...)`` in ``head-masking``).

Depth is the fraction of the prompt before the needle (0: start, 1: end). Prompts are built to
``length`` tokens; ``n_tokens`` records the actual count (a tokenizer may land a little short).

The teacher-forced probe cuts ``n`` corpus probes to ``length`` tokens (prompt + answer) and
counts a hit when every answer token is the argmax given the prompt and the answer before it.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.core.units import Cache
from ctxlens.data.corpus import MIN_PROBE_DISTANCE, RetrievalProbe, corpus_text, retrieval_probes

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Style = typing.Literal["corpus", "classic", "ruler"]
STYLES = typing.get_args(Style)
RULER_TASK = "niah_single_1"  # RULER's passkey retrieval
RULER_BUDGET = 32  # tokens generated per RULER-style probe (a 7-digit number and some words around it)
_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "


@dataclass(frozen=True)
class Probe:
    ids: torch.Tensor  # [n_tokens] prompt token ids
    answer: str
    depth: float
    budget: int = 0  # tokens generated; 0: the answer's tokens + 1, and the answer must come first
    gold: str = ""  # the answer as the model would write it after the prompt ('': none, always decoded)

    @property
    def n_tokens(self) -> int:
        return int(self.ids.numel())


def _encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _fit(tokenizer: Any, build: Callable[[int], str], length: int) -> torch.Tensor:
    """Token ids of ``build(n_bytes)``: the longest found with at most ``length`` tokens, n_bytes
    rescaled by the observed bytes per token (exact at once for byte-level tokenizers)."""
    n_bytes, best = length, None
    for _ in range(8):
        ids = _encode(tokenizer, build(n_bytes))
        if len(ids) == length:
            return torch.tensor(ids)
        if len(ids) < length and (best is None or len(ids) > len(best)):
            best = ids
        step = max(1, round(n_bytes * length / max(1, len(ids))))
        n_bytes = step if step != n_bytes else n_bytes + (1 if len(ids) < length else -1)
    if best is None:
        raise CtxlensError(f"Could not build a passkey prompt of {length} tokens with this tokenizer; "
                           "try another length.")
    return torch.tensor(best)


def needle_distance(depth: float, total_bytes: int) -> int:
    """Bytes from a corpus probe's fact to its end for a fact at ``depth`` (0: start, 1: end) of
    ``total_bytes``, at least the corpus minimum (``MIN_PROBE_DISTANCE``)."""
    return min(total_bytes, max(MIN_PROBE_DISTANCE, round((1 - depth) * total_bytes)))


def _corpus(tokenizer: Any, length: int, depth: float, seed: int, i: int) -> Probe:
    def probe(n_bytes: int) -> RetrievalProbe:
        n_bytes = max(n_bytes, MIN_PROBE_DISTANCE)
        distance = needle_distance(depth, n_bytes)
        return retrieval_probes(seed * 1000 + i, 1, distance_bytes=distance, total_bytes=n_bytes)[0]

    if length < MIN_PROBE_DISTANCE:
        raise CtxlensError(f"Corpus passkey prompts need at least {MIN_PROBE_DISTANCE} tokens; use longer lengths.")
    ids = _fit(tokenizer, lambda n_bytes: probe(n_bytes).prompt, length)
    answer = probe(length).answer  # the answer depends on (seed, i) only
    return Probe(ids, answer, depth, gold=answer)  # after "Answer: "


def _classic(tokenizer: Any, length: int, depth: float, seed: int, i: int) -> Probe:
    key = str(random.Random(f"ctxlens.passkey:{seed}:{i}").randint(10000, 99999))
    needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
    head = "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    ask = "What is the pass key? The pass key is"

    shortest = len(_encode(tokenizer, head + needle + ask))
    if length < shortest + 8:
        raise CtxlensError(f"Classic passkey prompts need at least {shortest + 8} tokens here; use longer lengths.")

    def build(n_bytes: int) -> str:
        room = max(0, n_bytes - len(head) - len(needle) - len(ask))
        filler = (_FILLER * (room // len(_FILLER) + 1))[:room]
        cut = filler.rfind(". ", 0, round(depth * room))  # the needle goes after a whole sentence
        cut = cut + 2 if cut >= 0 else 0
        return head + filler[:cut] + needle + filler[cut:] + ask

    return Probe(_fit(tokenizer, build, length), key, depth, gold=" " + key)  # after "The pass key is"


def probes(tokenizer: Any, length: int, depths: list[float], n_per_depth: int, seed: int = 0,
           style: str = "corpus") -> list[Probe]:
    """``n_per_depth`` probes at each depth; probe i's needle and answer depend on (seed, i) only."""
    if style not in STYLES:
        raise unknown("passkey style", style, STYLES)
    if style == "ruler":
        return [p for depth in depths for p in _ruler(tokenizer, length, depth, n_per_depth, seed)]
    make = _corpus if style == "corpus" else _classic
    return [make(tokenizer, length, depth, seed, i) for depth in depths for i in range(n_per_depth)]


def _ruler(tokenizer: Any, length: int, depth: float, n: int, seed: int) -> list[Probe]:
    """``n`` RULER passkey prompts (``niah_single_1``) of ``length`` tokens with their generation
    budget, the needle at ``depth``; raises ``TooShort`` when RULER's template does not fit."""
    from ctxlens.tasks.dataset import generate

    batch = generate(RULER_TASK, tokenizer, length, n, seed, template="auto", budget=RULER_BUDGET,
                     options={"depths": [100.0 * depth]})
    from ctxlens.tasks.scoring import gold_text

    return [Probe(torch.tensor(s.input_ids), s.outputs[0], depth, budget=RULER_BUDGET,
                  gold=gold_text("niah", s.outputs)) for s in batch]


def _new_tokens(lm: LM, probe: Probe) -> int:
    """Tokens greedy decoding generates for ``probe``."""
    return probe.budget or len(_encode(lm.tokenizer, probe.answer)) + 1


def _hit(probe: Probe, text: str) -> bool:
    """The probe's rule on generated text: RULER-style probes contain the answer (RULER's
    ``string_match_all``), the others start with it."""
    from ctxlens.tasks.scoring import score

    return score(text, [probe.answer], "all") == 100.0 if probe.budget else text.strip().startswith(probe.answer)


@torch.inference_mode()
def retrieved(lm: LM, probe: Probe, cache: Any = None) -> bool:
    """Greedy generation from the prompt starts with the answer (RULER-style probes: contains it,
    as RULER's ``string_match_all`` scores); ``cache``: the model's cache of the prompt but its last id."""
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.tokenizer.eos_token_id
    kwargs = {"cache": cache} if cache is not None else {}
    out = lm.greedy(probe.ids[None], _new_tokens(lm, probe), pad if pad is not None else 0, **kwargs)  # [1, n + new]
    text = lm.tokenizer.decode(out[0, probe.n_tokens:].tolist(), skip_special_tokens=bool(probe.budget))
    return _hit(probe, text)


@dataclass(frozen=True)
class Scored:
    """One probe's outcome and how it was found."""

    hit: bool  # retrieved: what ``retrieved`` returns
    scored_by: str  # forced (proven by the teacher-forced forward) | decoded
    gold_logprob: float | None  # the gold answer's summed log-probability, nats; None: not forced
    gold_tokens: int | None  # its tokens; None: not forced


@torch.inference_mode()
def scored(lm: LM, probes: list[Probe], forced: bool = True, batch_size: int = 8) -> list[Scored]:
    """Every probe's ``Scored``, in order, the same hits as ``retrieved``: with ``forced``, probes of equal
    length go through the forced forwards in batches of ``batch_size`` (``ctxlens.tasks.forced.prove``,
    from the model's cache of their prompts where it can be reused); a probe is a hit without decoding
    when greedy decoding provably writes ids whose text passes the probe's rule (``_hit``) first; every
    other probe is decoded by ``retrieved``, from the same cache. Runs in the caller's context (head
    masks included)."""
    from ctxlens.lm.prefix_cache import prefill, reuse_problem
    from ctxlens.tasks.forced import argmax_moved, gold_ids, prove, rows_of

    if not forced or argmax_moved(lm.model):
        return [Scored(retrieved(lm, p), "decoded", None, None) for p in probes]
    stop = getattr(getattr(lm.model, "generation_config", None), "eos_token_id", None)
    eos = set(stop if isinstance(stop, (list, tuple)) else [] if stop is None else [stop])  # where generate stops
    reuse = not reuse_problem(lm)
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(probes):
        by_length.setdefault(p.n_tokens, []).append(i)
    done: dict[int, Scored] = {}
    for members in by_length.values():
        for start in range(0, len(members), batch_size):
            chunk = [probes[i] for i in members[start:start + batch_size]]
            budgets = [_new_tokens(lm, p) for p in chunk]
            golds = [gold_ids(lm.tokenizer, p.gold)[:n] for p, n in zip(chunk, budgets)]
            ids = torch.stack([p.ids for p in chunk]).to(lm.device)  # [B, n_tokens]
            cache = prefill(lm, ids[:, :-1]) if reuse and ids.shape[1] > 1 else None

            def accept(k: int, gold: list[int], chunk: list[Probe] = chunk) -> bool:
                return _hit(chunk[k], lm.tokenizer.decode(gold, skip_special_tokens=bool(chunk[k].budget)))

            found, proven, cache = prove(lm, ids, golds, budgets, eos, accept, cache)
            for k, (i, p) in enumerate(zip(members[start:start + batch_size], chunk)):
                m = len(golds[k]) or None
                logprob = found[k].logprob if m else None
                if proven[k] is not None:
                    done[i] = Scored(True, "forced", logprob, m)
                else:
                    row = rows_of(cache, [k], len(chunk), ids.device, fresh=True)
                    done[i] = Scored(retrieved(lm, p, row), "decoded", logprob, m)
    return [done[i] for i in range(len(probes))]


def ruler_needle_accuracy(lm: LM, length: int, depth: float, n: int, seed: int) -> dict:
    """The needle row of ``rope-theta-sweep`` in RULER's wording: greedy accuracy of ``n`` RULER
    passkey probes (``niah_single_1``) of ``length`` tokens, the needle at ``depth``; a flag
    instead when RULER's template does not fit ``length``."""
    from ctxlens.tasks.base import TooShort

    lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    try:
        probes = _ruler(lm.tokenizer, length, depth, n, seed)
    except TooShort as err:
        return {"length": length, "n": 0, "needle_depth": depth, "accuracy": None, "needles_lost": 0,
                "flag": str(err)}
    hits = [retrieved(lm, p) for p in probes]
    return {"length": length, "n": len(probes), "needle_depth": depth, "accuracy": sum(hits) / len(hits),
            "prompt_tokens": sum(p.n_tokens for p in probes) / len(probes), "needles_lost": 0, "flag": None}


# --------------------------------------------------------------------------------------
# Teacher-forced needle accuracy (rope-theta-sweep)
# --------------------------------------------------------------------------------------


def _bytes_per_token(lm: LM, seed: int, cache: Cache) -> float:
    if "bytes_per_token" not in cache:
        text = corpus_text(seed, 8192, split="test")
        cache["bytes_per_token"] = len(text.encode()) / max(1, len(lm.tokenizer.encode(text, add_special_tokens=False)))
    return cache["bytes_per_token"]


def needle_prompts(lm: LM, length: int, depth: float, n: int, seed: int, cache: Cache
                   ) -> tuple[list[list[int]], list[list[int]], int]:
    """(prompt ids, answer ids, lost) for ``n`` corpus probes of about ``length`` tokens in all,
    the fact at ``depth`` of the prompt (0: start, 1: just before the question).

    Each prompt is cut on the left so that prompt + answer fits in ``length`` tokens; ``lost``
    counts probes whose fact did not survive the cut (they are scored as misses).
    """
    tok = lm.tokenizer
    total_bytes = max(int(length * _bytes_per_token(lm, seed, cache)), MIN_PROBE_DISTANCE + 1)
    distance = needle_distance(depth, total_bytes)
    prompts, answers, lost = [], [], 0
    for probe in retrieval_probes(seed, n, distance_bytes=distance, total_bytes=total_bytes):
        answer = tok.encode(probe.answer, add_special_tokens=False)
        prompt = tok.encode(probe.prompt, add_special_tokens=False)[-(length - len(answer)):]
        lost += len(tok.encode(probe.prompt[-probe.distance_bytes:], add_special_tokens=False)) > len(prompt)
        prompts.append(prompt)
        answers.append(answer)
    return prompts, answers, lost


@torch.inference_mode()
def needle_accuracy(lm: LM, length: int, depth: float, n: int, seed: int, batch_size: int, cache: Cache) -> dict:
    """Greedy exact-match accuracy: every answer token is the argmax given the prompt and the
    answer tokens before it (equivalent to greedy decoding reproducing the answer)."""
    lm.require_tokenizer("the needle probe (pass --needle-lengths '' to skip it)")
    prompts, answers, lost = needle_prompts(lm, length, depth, n, seed, cache)
    hits = 0
    pad = lm.tokenizer.eos_token_id or 0
    for b0 in range(0, len(prompts), batch_size):
        seqs = [p + a for p, a in zip(prompts[b0:b0 + batch_size], answers[b0:b0 + batch_size])]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])  # [B, width]; right padding is causal-safe
        hidden = lm.final_hidden(ids)  # [B, width, d]
        for row, (p, a) in enumerate(zip(prompts[b0:b0 + batch_size], answers[b0:b0 + batch_size])):
            at = torch.arange(len(p) - 1, len(p) - 1 + len(a), device=hidden.device)
            logits = lm.head_logits(hidden[row, at])  # [len(a), vocab]
            hits += bool((logits.argmax(-1).cpu() == torch.tensor(a)).all())
    return {"length": length, "n": len(prompts), "needle_depth": depth, "accuracy": hits / len(prompts),
            "prompt_tokens": sum(map(len, prompts)) / len(prompts), "needles_lost": lost,
            "flag": f"{lost} needle(s) cut off by the length limit" if lost else None}
