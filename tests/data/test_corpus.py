"""Tests for ctxlens.data.corpus. Structure is checked by parsing the text with regular
expressions written here (the formats the brief fixes), not by trusting the generator."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.data.corpus import (
    MIN_PROBE_DISTANCE,
    NEAR_MAX_DISTANCE,
    PROBE_DISTANCE_TOLERANCE,
    annotated_documents,
    corpus_text,
    documents,
    retrieval_probes,
)

ASK = re.compile(r"Question: what is the (?P<key>[a-z ]+)\? Answer: (?P<value>[a-z0-9]+)\.")
INTRO = re.compile(r"\s?(?P<first>[A-Z][a-z]+) (?P<last>[A-Z][a-z]+) is an? [a-z]+ from "
                   r"[A-Z][a-z]+\. (?:She|He) has an? [a-z]+ [a-z]+ and an? [a-z]+ called [A-Z][a-z]+\.")


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return list(documents(0, 200, split="train"))


def stated(text: str, key: str) -> list[re.Match]:
    return list(re.finditer(rf"The {re.escape(key)} is (?P<value>[a-z0-9]+)\.", text))


# --------------------------------------------------------------------------------------
# Determinism and splits
# --------------------------------------------------------------------------------------

_FINGERPRINT = """
import hashlib, json
from ctxlens.data.corpus import corpus_text, retrieval_probes
probes = retrieval_probes(4, 3, distance_bytes=700, total_bytes=1500)
blob = corpus_text(11, 30000, "validation") + json.dumps([p.__dict__ for p in probes])
print(hashlib.sha256(blob.encode()).hexdigest())
"""


def test_same_seed_same_bytes_across_processes_and_hash_seeds():
    probes = retrieval_probes(4, 3, distance_bytes=700, total_bytes=1500)
    blob = corpus_text(11, 30000, "validation") + json.dumps([p.__dict__ for p in probes])
    here = hashlib.sha256(blob.encode()).hexdigest()
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", _FINGERPRINT], env=env, check=True,
                             capture_output=True, text=True).stdout.strip()
        assert out == here


def test_same_seed_same_documents_other_seed_other_documents():
    assert list(documents(3, 4)) == list(documents(3, 4))
    assert set(documents(3, 4)).isdisjoint(documents(4, 4))


def test_documents_do_not_depend_on_n():
    assert list(documents(2, 10, split="test"))[:4] == list(documents(2, 4, split="test"))


def test_splits_are_disjoint():
    by_split = {split: list(documents(0, 40, split=split))
                for split in ("train", "validation", "test")}
    heads = {split: {doc[:200] for doc in texts} for split, texts in by_split.items()}
    assert heads["train"].isdisjoint(heads["validation"])
    assert heads["train"].isdisjoint(heads["test"])
    assert heads["validation"].isdisjoint(heads["test"])


def test_lengths_and_ascii(docs):
    assert all(1500 <= len(doc) <= 6000 for doc in docs)
    assert all(doc.isascii() for doc in docs)
    short = list(documents(1, 100, min_bytes=500, max_bytes=800))
    assert all(500 <= len(doc) <= 800 for doc in short)


def test_byte_tokenizer_round_trips(docs):
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    for doc in docs[:5]:
        ids = tok.encode(doc, add_special_tokens=False)
        assert ids == list(doc.encode("utf-8"))
        assert tok.decode(ids) == doc


def test_corpus_text_is_joined_documents_cut_at_n_bytes():
    text = corpus_text(5, 9000, "test")
    joined = "\n\n".join(documents(5, 6, split="test"))  # 6 documents >= 9000 bytes
    assert len(joined) >= 9000
    assert text == joined[:9000]
    assert corpus_text(5, 0) == ""


# --------------------------------------------------------------------------------------
# Structure, parsed from the text
# --------------------------------------------------------------------------------------


def test_every_ask_was_stated_once_before_with_the_same_value(docs):
    asks = 0
    for doc in docs:
        for ask in ASK.finditer(doc):
            statements = stated(doc, ask["key"])
            assert len(statements) == 1, ask["key"]
            assert statements[0].end() <= ask.start()
            assert statements[0]["value"] == ask["value"]
            asks += 1
    assert asks >= 5 * len(docs)


def test_keys_are_asked_near_and_far(docs):
    """Near asks fit one 512-byte training window; far ones do not."""
    distances = []
    for doc in docs:
        for ask in ASK.finditer(doc):
            (statement,) = stated(doc, ask["key"])
            distances.append(ask.start("value") - statement.start("value"))
    near = [d for d in distances if d <= NEAR_MAX_DISTANCE]
    far = [d for d in distances if d > 512]
    assert len(near) >= 0.6 * len(distances)
    assert len(far) >= 0.15 * len(distances)
    assert all(d <= NEAR_MAX_DISTANCE or d >= 600 for d in distances)


def test_some_facts_are_never_asked(docs):
    unasked = 0
    for doc in docs:
        asked = {m["key"] for m in ASK.finditer(doc)}
        keys = re.findall(r"The ((?:code|number|password) for the [a-z]+ [a-z]+) is ", doc)
        assert len(keys) == len(set(keys))  # each key stated once
        unasked += len(set(keys) - asked)
    assert unasked >= len(docs)


def test_annotations_match_the_text():
    for doc in annotated_documents(0, 50):
        for fact in doc.facts:
            assert doc.text[fact.value_at:].startswith(fact.value + ".")
            assert doc.text[fact.stated_at:].startswith(f"The {fact.key} is {fact.value}.")
            if fact.kind == "unasked":
                assert fact.asked_at is None
            else:
                assert doc.text[fact.answer_at:].startswith(fact.value + ".")
        for span in doc.spans:
            assert span.source + span.length <= span.target


def test_repeated_spans_repeat_verbatim_on_word_boundaries():
    spans = recent = 0
    for doc in annotated_documents(0, 100):
        text = doc.text
        for s in doc.spans:
            piece = text[s.target:s.target + s.length]
            assert piece == text[s.source:s.source + s.length]
            assert 20 <= s.length <= 80
            assert text.find(piece) <= s.source < s.target  # an earlier occurrence exists
            for start in (s.source, s.target):
                assert start == 0 or text[start - 1] in " \n"
                assert start + s.length == len(text) or text[start + s.length] in " \n"
            spans += 1
            recent += s.target - s.source <= 480
    assert spans >= 5 * 100
    assert 0.3 * spans <= recent <= 0.95 * spans  # both in-window and long-range copies


def test_people_are_introduced_then_named_and_pronouned_later(docs):
    later_names = later_pronouns = people = 0
    for doc in docs:
        intros, at = [], 0  # the introductions open the document, one after another
        while (intro := INTRO.match(doc, at)) is not None:
            intros.append(intro)
            at = intro.end()
        assert 2 <= len(intros) <= 4
        body = doc[intros[-1].end():]
        for intro in intros:
            people += 1
            later_names += intro["first"] in body
        later_pronouns += bool(re.search(r"(?:^|[.,] )(?:She|she|He|he) [a-z]", body))
    assert later_names >= 0.95 * people
    assert later_pronouns >= 0.95 * len(docs)


def test_filler_vocabulary_is_modest(docs):
    lower_words = Counter(w for doc in docs for w in re.findall(r"\b[a-z]+\b", doc))
    assert 100 <= len(lower_words) <= 400


def test_byte_unigram_entropy_is_english_like(docs):
    data = "\n\n".join(docs).encode()
    counts = Counter(data)
    entropy = -sum(c / len(data) * math.log2(c / len(data)) for c in counts.values())
    assert 3.5 <= entropy <= 5.0


# --------------------------------------------------------------------------------------
# Retrieval probes
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("distance, total", [(MIN_PROBE_DISTANCE, MIN_PROBE_DISTANCE),
                                             (300, 512), (450, 512), (2000, 6000),
                                             (4000, 4000)])
def test_probes_hold_the_fact_at_the_requested_distance(distance, total):
    for probe in retrieval_probes(1, 20, distance_bytes=distance, total_bytes=total):
        prompt = probe.prompt
        assert len(prompt.encode()) == total
        assert prompt.endswith(f"Question: what is the {probe.key}? Answer: ")
        assert re.fullmatch(r"[1-9][0-9]{3}", probe.answer)
        (statement,) = stated(prompt, probe.key)
        assert statement["value"] == probe.answer
        assert len(prompt) - statement.start() == probe.distance_bytes
        assert distance - PROBE_DISTANCE_TOLERANCE <= probe.distance_bytes <= distance


def test_probes_have_distractors_with_other_keys():
    probes = retrieval_probes(2, 20, distance_bytes=1500, total_bytes=3000)
    for probe in probes:
        others = re.findall(r"The ((?:code|number|password) for the [a-z]+ [a-z]+) is \d+\.",
                            probe.prompt)
        assert len(others) >= 2 and others.count(probe.key) == 1
    assert len({p.key for p in probes}) >= 15


def test_probes_are_deterministic_and_paired_across_distances():
    a = retrieval_probes(9, 5, distance_bytes=300, total_bytes=800)
    assert a == retrieval_probes(9, 5, distance_bytes=300, total_bytes=800)
    b = retrieval_probes(9, 5, distance_bytes=700, total_bytes=800)
    assert [(p.key, p.answer) for p in a] == [(p.key, p.answer) for p in b]
    assert retrieval_probes(10, 5, distance_bytes=300, total_bytes=800) != a


def test_probe_ask_has_the_training_format(docs):
    """Training text asks facts exactly as probes do: 'Question: what is the KEY? Answer: '."""
    asks = [m for doc in docs for m in ASK.finditer(doc)]
    assert all(m.group(0).startswith(f"Question: what is the {m['key']}? Answer: ") for m in asks)
    assert any(re.fullmatch(r"\d{4}", m["value"]) for m in asks)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: next(documents(0, 1, split="dev")), r"Unknown built-in corpus split 'dev'"),
    (lambda: next(documents(0, -1)), r"n must be at least 0"),
    (lambda: next(documents("0", 1)), r"seed must be a whole number"),
    (lambda: next(documents(0, 1, min_bytes=10)), r"min_bytes must be at least"),
    (lambda: next(documents(0, 1, min_bytes=2000, max_bytes=2000)), r"max_bytes must be at"),
    (lambda: corpus_text(0, -5), r"n_bytes must be at least 0"),
    (lambda: retrieval_probes(0, 1, distance_bytes=900, total_bytes=800),
     r"distance_bytes=900 is more than total_bytes=800"),
    (lambda: retrieval_probes(0, 1, distance_bytes=50, total_bytes=800),
     r"distance_bytes must be at least"),
])
def test_errors_are_clear(call, message):
    with pytest.raises(CtxlensError, match=message):
        call()
