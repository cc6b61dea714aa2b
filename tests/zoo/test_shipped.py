"""The shipped zoo checkpoints (issue 3): each loads through the ordinary loader, its recorded held-out
loss is what the model really scores, and that is clearly below a unigram baseline computed here
from scratch. (``zoo:NAME`` resolution, user training first, is tested in test_build.py.)"""

import functools
import json
import math
from collections import Counter

import pytest
import torch

import ctxlens
from ctxlens.zoo.registry import SHIPPED
from ctxlens.zoo.specs import RECIPE, ZOO, Recipe

SHIPPED_NAMES = [n for n in ZOO if (SHIPPED / n / "zoo.json").is_file()]


def _unigram(train: bytes, held_out: bytes, vocab: int = 257) -> float:
    counts, total = Counter(train), len(train) + vocab
    return -sum(math.log((counts.get(b, 0) + 1) / total) for b in held_out) / len(held_out)


# Requirements of issue 3 a shipped model does not meet yet, each with what was measured.
SHORT_OF_UNIGRAM: dict[str, str] = {}  # name -> what was measured (none since the 2500-step recipe)


@functools.cache  # two tests read it per model
def _held_out_loss(name: str) -> tuple[float, float]:
    """(loss of the shipped files on the held-out windows, add-one byte unigram of the training split)."""
    from ctxlens.data.corpus import corpus_text

    lm = ctxlens.load(str(SHIPPED / name), device="cpu")  # the shipped files (a test may train its own zoo:NAME)
    assert lm.model.config.model_type == ZOO[name].family
    n = RECIPE.val_windows * RECIPE.seq_len
    held = corpus_text(RECIPE.corpus_seed, n + 1000, split="validation").encode()[:n]
    ids = torch.tensor(list(held)).view(RECIPE.val_windows, RECIPE.seq_len)
    with torch.no_grad():
        loss = float(torch.cat([lm.token_losses(ids[i:i + 8]).flatten() for i in range(0, len(ids), 8)]).mean())
    train = corpus_text(RECIPE.corpus_seed, 2_000_000, split="train").encode()
    return loss, _unigram(train, bytes(ids[:, 1:].flatten().tolist()))


@pytest.mark.skipif(not SHIPPED_NAMES, reason="no zoo checkpoint shipped")
@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_model_scores_its_record(name):
    record = json.loads((SHIPPED / name / "zoo.json").read_text())
    assert record["name"] == name and record["family"] == ZOO[name].family
    recorded = Recipe(**{k: tuple(map(tuple, v)) if k == "copy_phases" else tuple(v) if isinstance(v, list) else v
                         for k, v in record["recipe"].items()})  # fields added since take their defaults
    assert recorded == RECIPE  # matched: one recipe
    assert record["train"]["lr"] == (ZOO[name].lr or RECIPE.lr)
    loss, _ = _held_out_loss(name)
    assert loss == pytest.approx(record["val_loss"], abs=2e-3)


@pytest.mark.skipif(not SHIPPED_NAMES, reason="no zoo checkpoint shipped")
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=SHORT_OF_UNIGRAM[n]))
                                  if n in SHORT_OF_UNIGRAM else n for n in SHIPPED_NAMES])
def test_shipped_model_beats_unigram_clearly(name):
    loss, baseline = _held_out_loss(name)
    assert loss < 0.5 * baseline  # "clearly below": under half the unigram cross-entropy


RETRIEVERS = ("rope", "hybrid")  # issue 3: these must retrieve a fact inside the training length


@pytest.mark.skipif(not SHIPPED_NAMES, reason="no zoo checkpoint shipped")
@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_retrieval_is_what_the_record_says(name):
    """Greedy retrieval re-measured here matches zoo.json; rope and hybrid are far above chance.

    Chance: an answer is 4 uniform digits, so a guess matches with probability 1e-4, and 3 or
    more hits in 150 probes has probability under 1e-6 without retrieval.
    """
    from ctxlens.zoo.build import retrieval_accuracy

    record = json.loads((SHIPPED / name / "zoo.json").read_text())
    lm = ctxlens.load(str(SHIPPED / name), device="cpu")
    rows = retrieval_accuracy(lm.model, lm.tokenizer, RECIPE)
    hits = [round(r["accuracy"] * r["n"]) for r in rows]
    recorded = [round(r["accuracy"] * r["n"]) for r in record["retrieval"]]
    assert [r["distance_bytes"] for r in rows] == [r["distance_bytes"] for r in record["retrieval"]]
    assert all(abs(a - b) <= 2 for a, b in zip(hits, recorded))  # a near tie may flip on another CPU
    if name in RETRIEVERS:
        assert sum(hits) >= 3


@pytest.mark.skipif("hybrid" not in SHIPPED_NAMES, reason="zoo:hybrid is not shipped")
def test_the_forced_read_of_retrieval_is_what_greedy_decoding_writes():
    """``greedy_hits`` decides a probe from one forward; ``model.generate`` (transformers' greedy decoding,
    step by step with its cache) is the truth, on zoo:hybrid (attention and Mamba-2 layers), whose probes at
    128 bytes are found and missed."""
    from ctxlens.data.corpus import retrieval_probes
    from ctxlens.zoo.build import _decoded_hit, greedy_hits

    lm = ctxlens.load(str(SHIPPED / "hybrid"), device="cpu")
    probes = retrieval_probes(RECIPE.corpus_seed + 7, 16, distance_bytes=128, total_bytes=RECIPE.seq_len - 16)
    prompts = [lm.tokenizer(p.prompt, add_special_tokens=False)["input_ids"] for p in probes]
    found = greedy_hits(lm.model, lm.tokenizer, prompts, [p.answer for p in probes])
    decoded = [_decoded_hit(lm.model, lm.tokenizer, ids, p.answer) for ids, p in zip(prompts, probes)]
    assert [f for f in found if f is not None] == [d for f, d in zip(found, decoded) if f is not None]
    assert {True, False} <= set(found)  # both verdicts are read, not decoded
