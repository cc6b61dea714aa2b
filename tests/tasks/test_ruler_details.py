"""Issue 32, item 7: three details where ctxlens's RULER tasks differed from RULER's generator.

RULER's rules are written out here from ``scripts/data/synthetic/niah.py``, ``variable_tracking.py``
and ``qa.py`` (NVIDIA/RULER), independently of ``ctxlens.tasks``:

* the noise haystack is ``[line] * num_haystack`` joined by newlines: whole five-sentence lines;
* vt's one-shot example is ``input + " " + " ".join(outputs)`` where ``input`` ends in the answer
  prefix ``..., they are: ``: two spaces before the first name;
* QA lists the question's documents first, then the distractors, and shuffles the list with
  ``random.Random(seed).shuffle``: golden document j lands at the position p with ``perm[p] == j``
  (``placement=ruler``).
"""

from __future__ import annotations

import random
import re

import pytest

from ctxlens.tasks import generate

LINE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = re.compile(r"One of the special magic (numbers|uuids|words) for \S+ is: \S+\.")
CHAIN = re.compile(r"VAR [A-Z]{5} = (VAR [A-Z]{5} |\d{5})")


def _lines(text: str, start: str, end: str) -> list[str]:
    context = text[text.index(start) + len(start):text.rindex(end)]
    return [x for x in context.split("\n") if x]  # padding is blank lines


@pytest.mark.parametrize("length", [1024, 2048, 4096])
def test_noise_haystacks_are_whole_lines(byte_tok, length):
    """Before: 182 of 600 prompts ended on a line's first sentences; RULER never does."""
    for s in generate("niah_single_1", byte_tok, length, 40, seed=3, template="plain", cache=False):
        lines = _lines(s.input, "afterwards.\n", "\nWhat ")
        assert all(x == LINE or NEEDLE.fullmatch(x) for x in lines), [x for x in lines if x != LINE][:2]
        assert lines[-1] == LINE or NEEDLE.fullmatch(lines[-1])
    for s in generate("vt", byte_tok, length, 20, seed=3, template="plain", cache=False):
        main = s.input[s.input.rindex("in the following text.\n\n"):]
        lines = _lines(main, "in the following text.\n\n", "\nQuestion: Find")
        assert all(x == LINE or CHAIN.fullmatch(x) for x in lines), [x for x in lines if x != LINE][:2]


def test_vt_example_answer_has_rulers_two_spaces(byte_tok):
    prefix = "they are: "  # RULER's answer prefix ends in one space
    for s in generate("vt", byte_tok, 2048, 5, seed=4, template="plain", cache=False):
        example = s.input[:s.input.rindex("Memorize and track")]
        names = re.findall(r"^VAR ([A-Z]{3}) = ", example, re.M)
        assert example.endswith(prefix + " " + " ".join(names) + "\n\n")  # input + " " + answer, "\n" + task
        assert s.answer_prefix.endswith(prefix)  # the asked question's own prefix keeps RULER's one space


def _documents(text: str) -> list[str]:
    """The prompt's documents, in order (RULER's ``Document {i}:\\n{text}`` joined by blank lines)."""
    context = text[text.index("given documents.\n\n") + len("given documents.\n\n"):text.rindex("\n\nAnswer the")]
    parts = re.split(r"(?:^|\n+)Document (\d+):\n", context)
    numbers = [int(n) for n in parts[1::2]]
    assert numbers == list(range(1, len(numbers) + 1))
    return [p.strip("\n") for p in parts[2::2]]


@pytest.mark.parametrize(("task", "dataset", "length"), [("qa_1", "squad", 2048), ("qa_2", "hotpotqa", 4096)])
def test_qa_placement_ruler_is_rulers_fixed_shuffle(byte_tok, task, dataset, length):
    from ctxlens.tasks.qa_data import open_qa

    source = open_qa(dataset, "builtin")
    seed = 42  # RULER's default --random_seed
    batch = generate(task, byte_tok, length, 12, seed=seed, template="plain", cache=False,
                     options={"placement": "ruler"})
    slots = set()
    for s in batch:
        docs = _documents(s.input)
        qa = source.qas[s.meta["question_index"]]
        perm = list(range(len(docs)))
        random.Random(seed).shuffle(perm)  # RULER: random.Random(args.random_seed).shuffle(all_docs)
        for j, d in enumerate(qa.context):  # all_docs = curr_docs + distractors
            assert docs[perm.index(j)] == source.docs[d], (j, perm.index(j))
        slots.add((len(docs), perm.index(0)))
    by_count = {}
    for n, p in slots:
        by_count.setdefault(n, set()).add(p)
    assert all(len(p) == 1 for p in by_count.values())  # one slot per document count, every sample


def test_qa_default_placement_spreads_the_golden_document(byte_tok):
    """The default stays RULER's depth grid per sample (the golden document at many slots)."""
    from ctxlens.tasks.qa_data import open_qa

    source = open_qa("squad", "builtin")
    slots = set()
    for s in generate("qa_1", byte_tok, 2048, 24, seed=42, template="plain", cache=False):
        docs = _documents(s.input)
        slots.add(docs.index(source.docs[source.qas[s.meta["question_index"]].context[0]]))
    assert len(slots) > 5


def test_qa_placement_ruler_refuses_depths(byte_tok):
    from ctxlens.core.errors import CtxlensError

    with pytest.raises(CtxlensError, match="placement=ruler"):
        generate("qa_1", byte_tok, 2048, 1, template="plain", cache=False, options={"placement": "ruler", "gamma": 1})
    with pytest.raises(CtxlensError, match="placement"):
        generate("qa_1", byte_tok, 2048, 1, template="plain", cache=False, options={"placement": "nowhere"})
