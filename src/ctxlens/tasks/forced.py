"""Known answers scored in one teacher-forced forward: what greedy decoding would write, proven without decoding.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4)
scores RULER's tasks by greedy decoding and RULER's string match (``ctxlens.tasks.scoring``).
Their answers are known, so one forward over the prompt and its gold answer (``scoring.gold_text``,
tokenised on its own: m ids) reads the m logits that predict the gold tokens, and an item is
*proven* when

* every gold token is the argmax at its position, ahead of the runner-up by more than a tie
  (``lm.ties.tie_width``: the forward runs the ids in one pass, decoding step by step, so their logits
  differ by the rounding of the dtype; a closer call is left to decoding);
* m is within the item's budget and no gold token ends the sequence;
* RULER's scorer gives the decoded gold text 100 (``scoring.proves``);
* decoding takes the raw argmax (``argmax_moved``: no repetition penalty, banned words, ...).

Greedy decoding then emits the m gold tokens first, so its answer starts with the decoded gold
text (tokenizers decode a prefix of ids to a prefix of the text: checked per tokenizer in the
tests) and scores 100: the item scores 100 without decoding; only the others are decoded. The
summed log-probability of the gold tokens (nats) is recorded for every item either way.

RULER's answer prefixes end mid-sentence ("... mentioned in the provided text is"), and models
differ in what they put before the answer: Gemma-3 writes ": 7050827" where " 7050827" was
forced. When the argmax at the first gold position is such a lead-in (a token that writes no
letter or digit and does not end the sequence), the gold ids are forced once more after it (one
more forward of the unproven rows, from a copy of the prompt's cache), under the same conditions;
the log-probability stays the canonical gold answer's.

Only the m hidden states that predict the gold tokens go through the LM head (full vocabulary
for m positions, never for the prompt's).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ctxlens.lm.prefix_cache import croppable
from ctxlens.lm.ties import against_rivals

if TYPE_CHECKING:
    from transformers import Cache, GenerationConfig, PreTrainedModel  # checked as Any (pyproject)

    from ctxlens.lm.model import LM
    from ctxlens.tasks.tokenizer import TaskTokenizer

# generation settings that can move greedy decoding off the raw argmax, with their neutral values
ARGMAX_MOVERS = {"repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
                 "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "suppress_tokens": None,
                 "begin_suppress_tokens": None, "sequence_bias": None, "forced_bos_token_id": None,
                 "forced_eos_token_id": None, "exponential_decay_length_penalty": None, "guidance_scale": 1.0,
                 "watermarking_config": None, "dola_layers": None, "penalty_alpha": None, "num_beams": 1,
                 "do_sample": False}


@dataclass(frozen=True)
class Forced:
    """What the forced forward found for one item."""

    greedy: bool  # every gold token is the argmax at its position, by more than a tie
    logprob: float  # sum of the gold tokens' log-probabilities given the prompt and the gold before them, nats
    lead: int | None = None  # the argmax at the first gold position where it is not the first gold token


def gold_ids(tokenizer: TaskTokenizer, text: str) -> list[int]:
    """The ids of ``text`` as a continuation (no special tokens added)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def argmax_moved(model: PreTrainedModel, config: GenerationConfig | None = None) -> str:
    """'' when greedy decoding with ``config`` (a ``GenerationConfig``; None: the model's own), its
    unset values filled from the model's generation config as ``generate`` fills them, takes the
    raw argmax of the logits at every step; else the setting that does not."""
    own = getattr(model, "generation_config", None)
    for name, neutral in ARGMAX_MOVERS.items():
        value = getattr(config, name, None)
        if value is None:
            value = getattr(own, name, None)
        if value is not None and value != neutral and not (name == "guidance_scale" and value == 1):
            return f"{name}={value!r}"
    return ""


@torch.inference_mode()
def judge(lm: LM, hidden: torch.Tensor, gold: torch.Tensor, valid: torch.Tensor) -> list[Forced]:
    """hidden [B, M, d_model]: the final hidden states that predict gold [B, M], of which ``valid`` [B, M]
    marks each row's own (its first m) -> one ``Forced`` per row."""
    logits = lm.head_logits(hidden).float()  # [B, M, vocab]
    gold, valid = gold.to(logits.device), valid.to(logits.device)
    at_gold = logits.gather(-1, gold[..., None]).squeeze(-1)  # [B, M]
    logprob = (at_gold - torch.logsumexp(logits, dim=-1)) * valid  # [B, M]
    wins, _, _ = against_rivals(logits, gold, hidden.dtype)  # [B, M]
    greedy = (wins | ~valid).all(-1) & valid.any(-1)  # [B]
    first = logits[:, 0].argmax(-1)  # [B] argmax where the first gold token is expected
    lead = torch.where(first != gold[:, 0], first, -1)  # [B]
    return [Forced(bool(g), float(lp), int(a) if a >= 0 else None)
            for g, lp, a in zip(greedy.tolist(), logprob.sum(-1).tolist(), lead.tolist())]


@torch.inference_mode()
def forced(lm: LM, ids: torch.Tensor, golds: Sequence[Sequence[int]], cache: Cache | None = None) -> list[Forced]:
    """One teacher-forced forward of prompts ids [B, L] (equal in length: no padding) and their gold ids
    (m_i each, right-padded to M = max m_i: the padding follows a row's gold, so causal attention keeps
    it out of every logit read). With ``cache`` (the model's cache of ids[:, :L-1], extended in place
    by M ids) only the M ids [last prompt id, gold[:M-1]] run; without, ids + gold[:M-1] run in one
    forward. Either way only the M hidden states that predict gold ids go through the LM head."""
    width = max((len(g) for g in golds), default=0)
    if width == 0:  # empty answers prove nothing
        return [Forced(False, 0.0) for _ in golds]
    gold = torch.tensor([list(g) + [0] * (width - len(g)) for g in golds], dtype=torch.long, device=ids.device)
    valid = torch.arange(width, device=ids.device)[None] < torch.tensor([len(g) for g in golds],
                                                                        device=ids.device)[:, None]  # [B, M]
    x = torch.cat([ids[:, -1:] if cache is not None else ids, gold[:, :-1]], dim=1)  # [B, M] or [B, L + M - 1]
    hidden = lm.base_forward(x, cache=cache).last_hidden_state[:, -width:]  # [B, M, d_model]
    return judge(lm, hidden, gold, valid)


def provable(gold: Sequence[int], budget: int, eos: set[int], scored: bool) -> bool:
    """The conditions of a proof that do not need the model: m within ``budget``, no end-of-sequence
    id among the gold ids, and ``scored`` (RULER's scorer gives their decoded text 100)."""
    return 0 < len(gold) <= budget and not eos.intersection(gold) and scored


def lead_in(tokenizer: TaskTokenizer, token: int | None, eos: set[int]) -> bool:
    """Whether ``token`` is a lead-in worth forcing the gold answer after: it writes something, but no
    letter or digit (': ', a newline), and does not end the sequence."""
    if token is None or token in eos:
        return False
    text = tokenizer.decode([token], skip_special_tokens=True)
    return bool(text) and not any(c.isalnum() for c in text)


def rows_of(cache: Cache | None, rows: Sequence[int], batch: int, device: torch.device,
            fresh: bool = False) -> Cache | None:
    """``cache`` (over ``batch`` rows) reduced to ``rows``, in place or, with ``fresh``, in a copy; None
    stays None."""
    if cache is None:
        return None
    if fresh:
        cache = copy.deepcopy(cache)
    if len(rows) < batch:
        cache.batch_select_indices(torch.tensor(list(rows), device=device))
    return cache


def prove(lm: LM, ids: torch.Tensor, golds: Sequence[Sequence[int]], budgets: Sequence[int], eos: set[int],
          accept: Callable[[int, list[int]], bool], cache: Cache | None = None
          ) -> tuple[list[Forced], list[list[int] | None], Cache | None]:
    """(``Forced`` of each row's gold ids, the ids greedy decoding provably writes first for each row or
    None, the cache of ids[:, :L-1] again) for prompts ids [B, L] with ``cache`` of ids[:, :L-1] (None:
    full forwards): one forced forward of the gold ids, then one of a lead-in + the gold ids for the
    rows whose first argmax is a lead-in (``lead_in``). Row k is proven by ids g when every one is the
    argmax, ``provable`` holds within ``budgets[k]`` and ``accept(k, g)`` (the scorer on their text)."""
    width = max((len(g) for g in golds), default=0)
    kept = None if cache is None or croppable(cache) else copy.deepcopy(cache)
    found = forced(lm, ids, golds, cache)
    if kept is not None:  # a cache that cannot be cut back (sliding windows): the copy taken before
        cache = kept
    elif cache is not None and width:
        cache.crop(-width)  # transformers crops by a negative count of tokens to drop
    proven: list[list[int] | None] = [None] * len(golds)
    leads: dict[int, list[int]] = {}
    for k, (g, f) in enumerate(zip(golds, found)):
        if f.greedy and provable(g, budgets[k], eos, accept(k, list(g))):
            proven[k] = list(g)
        elif g and f.lead is not None and lead_in(lm.tokenizer, f.lead, eos) and len(g) < budgets[k]:
            leads[k] = [f.lead, *g]
    if leads:
        rows = sorted(leads)
        again = forced(lm, ids[rows], [leads[k] for k in rows], rows_of(cache, rows, len(golds), ids.device, True))
        for k, f in zip(rows, again):
            if f.greedy and provable(leads[k], budgets[k], eos, accept(k, leads[k])):
                proven[k] = leads[k]
    return found, proven, cache
