"""Train and evaluate one zoo model with the shared recipe; save it as an ordinary checkpoint.

``ctxlens zoo train [NAME ...]`` calls ``train_zoo_model`` for each name. The result is a
``save_pretrained`` directory (weights stored as bfloat16 to keep the shipped zoo small,
evaluated after that rounding) plus ``zoo.json`` with the recipe, the held-out loss, a byte
unigram baseline measured on the same held-out text, and key-value retrieval accuracy at
several distances inside the training length.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import AutoModelForCausalLM

from ctxlens.data.copy_windows import alphabet, copy_windows
from ctxlens.lm.ties import against_rivals
from ctxlens.zoo.specs import RECIPE, Recipe, ZooSpec, build_config
from ctxlens.zoo.tokenizer import byte_tokenizer
from ctxlens.zoo.trainer import Batch, TrainConfig, causal_lm_loss, config_dict, evaluate, lm_targets, train

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase  # checked as Any (pyproject: follow_imports)


def _train_stream(recipe: Recipe, tok: PreTrainedTokenizerBase) -> torch.Tensor:
    """Token ids [n] of the training split, enough for every step without reuse of offsets."""
    from ctxlens.data.corpus import corpus_text

    n_bytes = recipe.steps * recipe.batch * recipe.seq_len // 2 + 10 * recipe.seq_len
    text = corpus_text(recipe.corpus_seed, n_bytes, split="train")
    return torch.tensor(tok(text, add_special_tokens=False)["input_ids"])


def _val_windows(recipe: Recipe, tok: PreTrainedTokenizerBase) -> torch.Tensor:
    """[val_windows, seq_len] consecutive windows of the validation split."""
    from ctxlens.data.corpus import corpus_text

    n = recipe.val_windows * recipe.seq_len
    ids = tok(corpus_text(recipe.corpus_seed, n + 1000, split="validation"), add_special_tokens=False)["input_ids"]
    return torch.tensor(ids[:n]).view(recipe.val_windows, recipe.seq_len)


def _corpus_windows(g: torch.Generator, stream: torch.Tensor, n: int, length: int) -> torch.Tensor:
    """[n, length] windows of the corpus ``stream`` [N] at random offsets."""
    starts = torch.randint(0, len(stream) - length, (n,), generator=g)
    return torch.stack([stream[s:s + length] for s in starts.tolist()])


def training_windows(stream: torch.Tensor, recipe: Recipe, step: int) -> torch.Tensor:
    """[batch * seq_len // length, length] token ids of step ``step``: a pure function of the step.

    During the recipe's copy phases, copy windows of the phase's length, the first
    ``phase_corpus_share`` of them replaced by corpus windows of the same length; afterwards
    ``recipe.batch`` windows of the corpus ``stream`` [n], each swapped for a copy window with
    probability ``copy_share``.
    """
    g = torch.Generator().manual_seed(recipe.seed * 1_000_003 + step)
    length, phase_alphabet = recipe.window_at(step)
    if phase_alphabet is not None:
        n = recipe.batch * recipe.seq_len // length
        windows = copy_windows(g, n, length, alphabet=alphabet(phase_alphabet))  # [n, length]
        k = round(n * recipe.phase_corpus_share)
        if k:
            windows[:k] = _corpus_windows(g, stream, k, length)
        return windows
    windows = _corpus_windows(g, stream, recipe.batch, length)  # [batch, length]
    swap = torch.rand(recipe.batch, generator=g) < recipe.copy_share  # [batch]
    if swap.any():
        windows[swap] = copy_windows(g, int(swap.sum()), length, alphabet=alphabet(recipe.copy_alphabet))
    return windows


def unigram_baseline(train_ids: torch.Tensor, val: torch.Tensor, vocab: int) -> float:
    """Cross-entropy (nats) of the held-out tokens under the add-one unigram of the training tokens."""
    counts = Counter(train_ids.tolist())
    total = len(train_ids) + vocab
    logp = {t: math.log((counts.get(t, 0) + 1) / total) for t in range(vocab)}
    targets = val[:, 1:].flatten().tolist()
    return -sum(logp[t] for t in targets) / len(targets)


@torch.no_grad()
def retrieval_accuracy(model: PreTrainedModel, tok: PreTrainedTokenizerBase, recipe: Recipe) -> list[dict[str, float]]:
    """Greedy exact-match retrieval of a key-value fact stated ``distance`` bytes before the ask.

    A probe is a hit when greedy decoding of as many tokens as its answer has bytes writes text that
    starts with the answer. Each distance's probes are read in one teacher-forced forward
    (``greedy_hits``); the probes it cannot decide (a near tie) are decoded with ``model.generate``."""
    from ctxlens.data.corpus import retrieval_probes

    rows = []
    for distance in recipe.probe_distances:
        probes = retrieval_probes(recipe.corpus_seed + 7, recipe.probes_per_distance, distance_bytes=distance,
                                  total_bytes=recipe.seq_len - 16)
        prompts = [tok(p.prompt, add_special_tokens=False)["input_ids"] for p in probes]
        found = greedy_hits(model, tok, prompts, [p.answer for p in probes])
        hits = sum(_decoded_hit(model, tok, ids, p.answer) if hit is None else hit
                   for ids, p, hit in zip(prompts, probes, found))
        rows.append({"distance_bytes": distance, "n": len(probes), "accuracy": hits / len(probes)})
    return rows


def greedy_hits(model: PreTrainedModel, tok: PreTrainedTokenizerBase, prompts: list[list[int]],
                answers: list[str]) -> list[bool | None]:
    """Whether greedy decoding of ``len(answer.encode())`` tokens after each prompt writes text starting with
    its answer, read from one forward of prompt + answer ids[:-1] per probe (probes of one prompt and answer
    length batched), without decoding. With gold ids g (m of them, within the steps, decoding to the answer):

    * True when every g_j is the argmax at its position by more than a tie (greedy writes g first);
    * False when g_0..g_{j-1} are and another token t beats g_j by more than a tie, and the text of
      g_0..g_{j-1}, t neither starts the answer nor starts with it (greedy writes it first, and a
      tokenizer's decoded prefix is a prefix of the decoded whole);
    * None (decode it) otherwise: a near tie, or a t whose text leaves the question open.

    The tie is ``lm.ties.tie_width`` of the model's dtype (``tasks.forced``'s too)."""
    golds = [tok(a, add_special_tokens=False)["input_ids"] for a in answers]
    out: list[bool | None] = [None] * len(prompts)
    batches: dict[tuple[int, int], list[int]] = {}
    for i, (prompt, gold, answer) in enumerate(zip(prompts, golds, answers)):
        if 0 < len(gold) <= len(answer.encode()) and tok.decode(gold) == answer:
            batches.setdefault((len(prompt), len(gold)), []).append(i)
    for (n, m), rows in batches.items():
        gold = torch.tensor([golds[i] for i in rows])  # [B, m]
        ids = torch.cat([torch.tensor([prompts[i] for i in rows]), gold[:, :-1]], dim=1)  # [B, n + m - 1]
        logits = model(input_ids=ids).logits[:, n - 1:].float()  # [B, m, vocab]: position j predicts gold[:, j]
        beats, beaten, rival = against_rivals(logits, gold, model.dtype)  # [B, m] each
        wins, loses = beats.tolist(), beaten.tolist()
        for k, i in enumerate(rows):
            j = next((j for j in range(m) if not wins[k][j]), m)
            if j == m:
                out[i] = True
            elif loses[k][j]:
                text = tok.decode([*golds[i][:j], int(rival[k, j])])
                out[i] = False if not (text.startswith(answers[i]) or answers[i].startswith(text)) else None
    return out


def _decoded_hit(model: PreTrainedModel, tok: PreTrainedTokenizerBase, prompt: list[int], answer: str) -> bool:
    ids = torch.tensor([prompt])  # [1, n]
    out = model.generate(ids, max_new_tokens=len(answer.encode()), do_sample=False, pad_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids.shape[1]:]).startswith(answer)


def train_zoo_model(spec: ZooSpec, out: str | Path, recipe: Recipe = RECIPE,
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``spec`` with ``recipe``, save to ``out``, and return its evaluation record (what ``zoo.json`` holds,
    ``ctxlens.zoo.registry.record`` reads back: JSON data)."""
    out = Path(out)
    for name in {a for *_, a in recipe.copy_phases} | {recipe.copy_alphabet}:
        alphabet(name)  # a misspelt alphabet stops here, not hundreds of steps in
    tok = byte_tokenizer()
    stream = _train_stream(recipe, tok)
    val = _val_windows(recipe, tok)
    val_batches = [lm_targets(val[i:i + recipe.batch]) for i in range(0, len(val), recipe.batch)]

    def batches(step: int) -> Batch:
        return lm_targets(training_windows(stream, recipe, step))

    torch.manual_seed(recipe.seed)
    model = AutoModelForCausalLM.from_config(build_config(spec, len(tok), tok.eos_token_id))
    checkpoint = str(out.with_name(out.name + ".train-state.pt"))
    cfg = TrainConfig(steps=recipe.steps, lr=spec.lr or recipe.lr, warmup=recipe.warmup,
                      min_lr_ratio=recipe.min_lr_ratio,
                      weight_decay=recipe.weight_decay, grad_clip=recipe.grad_clip, eval_every=recipe.eval_every,
                      seed=recipe.seed, checkpoint=checkpoint,
                      log=lambda row: log(f"{spec.name} {row}"))
    out.parent.mkdir(parents=True, exist_ok=True)
    result = train(model, batches, cfg, val=val_batches)
    model = result.model.to(torch.bfloat16).to(torch.float32)  # evaluate what is shipped
    model.config.use_cache = True
    if getattr(model.config, "mode", None) == "train":  # xLSTM: the chunked kernel needs lengths % chunk == 0,
        model.config.mode = "inference"  # and probes are any length; inference mode gives the same logits
    val_loss = evaluate(model, val_batches, causal_lm_loss, torch.device("cpu"), contextlib.nullcontext)
    record: dict[str, Any] = {
        "name": spec.name, "family": spec.family, "doc": spec.doc,
        "params": sum(p.numel() for p in model.parameters()),
        "recipe": asdict(recipe), "train": config_dict(cfg),
        "steps_run": result.steps, "best_step": result.best_step, "train_seconds": round(result.seconds, 1),
        "val_loss": val_loss, "unigram_baseline": unigram_baseline(stream, val, len(tok)),
        "retrieval": retrieval_accuracy(model, tok, recipe), "history": result.history,
    }
    write_model(out, model.to(torch.bfloat16), tok, record)
    Path(checkpoint).unlink(missing_ok=True)
    return record


def write_model(out: Path, model: PreTrainedModel, tok: PreTrainedTokenizerBase, record: Mapping[str, object]) -> None:
    """Save ``model``, ``tok`` and ``zoo.json`` into ``out``: all written first into a new folder beside it
    (``tempfile.mkdtemp``: a random name, created exclusively), then renamed file by file into ``out``, so
    a link planted in ``out`` or at a temporary name is replaced, never written through. A full disk or
    read-only folder is one sentence."""
    from ctxlens.core import files

    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as err:
        raise files.user_error(err, out, "write") or err from None
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        files.atomic_write(tmp / "zoo.json", json.dumps(record, indent=1))
        for path in sorted(tmp.iterdir()):
            os.replace(path, out / path.name)
    except OSError as err:
        raise files.user_error(err, out, "write") or err from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
