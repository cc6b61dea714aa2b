"""Prompts follow RULER's templates, needle sentence, key/value spaces, budgets and task arguments.

The expected strings below are typed from NVIDIA/RULER (``scripts/data/synthetic/constants.py``,
``niah.py``, ``scripts/synthetic.yaml``), independently of ``ctxlens.tasks``, and every rule
(the singular rewrite, the query join, the one-shot examples) is re-implemented here.
"""

from __future__ import annotations

import re
import uuid

import numpy as np
import pytest

from ctxlens.tasks import RULER_TASKS, generate, get_task, tasks

RULER = {
    "niah": ("Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
             "I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all the special magic "
             "{type_needle_v} for {query} mentioned in the provided text?",
             " The special magic {type_needle_v} for {query} mentioned in the provided text are", 128),
    "vt": ("Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
           "Question: Find all variables that are assigned the value {query} in the text above.",
           " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are "
           "assigned the value {query}, they are: ", 30),
    "cwe": ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
            "ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above list?",
            " Answer: The top 10 words that appear most often in the list are:", 120),
    "fwe": ("Read the following coded text and track the frequency of each coded word. Find the three most "
            "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
            "the dots '....'. What are the three most frequently appeared words in the above coded text?",
            " Answer: According to the coded text above, the three most frequently appeared words are:", 50),
    "qa": ("Answer the question based on the given documents. Only give me the answer and do not output any other "
           "words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the given "
           "documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}",
           " Answer:", 32),
}
YAML = {  # scripts/synthetic.yaml: haystack, key type, value type, k, v, q
    "niah_single_1": ("noise", "words", "numbers", 1, 1, 1), "niah_single_2": ("essay", "words", "numbers", 1, 1, 1),
    "niah_single_3": ("essay", "words", "uuids", 1, 1, 1), "niah_multikey_1": ("essay", "words", "numbers", 4, 1, 1),
    "niah_multikey_2": ("needle", "words", "numbers", 1, 1, 1),
    "niah_multikey_3": ("needle", "uuids", "uuids", 1, 1, 1),
    "niah_multivalue": ("essay", "words", "numbers", 1, 4, 1),
    "niah_multiquery": ("essay", "words", "numbers", 1, 1, 4),
}
NEEDLE = re.compile(r"One of the special magic (numbers|uuids|words) for (\S+) is: (\S+)\.")


def ruler_singular(text: str) -> str:
    for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
        text = text.replace(old, new)
    return text


def split_template(template: str, **fmt) -> tuple[str, str]:
    return tuple(template.format(context="\x00", **fmt).split("\x00"))  # type: ignore[return-value]


def test_registry_has_rulers_13_tasks_with_budgets_and_metrics():
    assert set(RULER_TASKS) <= set(tasks())
    for name in RULER_TASKS:
        t = get_task(name)
        assert t.budget == RULER[t.family if t.family in RULER else "niah"][2]
        assert t.metric == ("part" if t.family == "qa" else "all")
    for name, (hay, k, v, nk, nv, nq) in YAML.items():
        o = get_task(name).options
        assert (o["type_haystack"], o["type_needle_k"], o["type_needle_v"], o["num_needle_k"], o["num_needle_v"],
                o["num_needle_q"]) == (hay, k, v, nk, nv, nq)
    assert get_task("vt").options == {"type_haystack": "noise", "num_chains": 1, "num_hops": 4, "placement": "ruler"}
    assert get_task("cwe").options == {"freq_cw": 30, "freq_ucw": 3, "num_cw": 10}
    assert get_task("fwe").options["alpha"] == 2.0


@pytest.mark.parametrize("name", list(YAML))
def test_niah_prompt_is_rulers_template(name, byte_tok):
    hay, k_type, v_type, nk, nv, nq = YAML[name]
    s = generate(name, byte_tok, 2048, 1, seed=3, template="plain", cache=False)[0]
    template, prefix, _ = RULER["niah"]
    noun = v_type
    if nq * nv == 1:
        template, prefix, noun = ruler_singular(template), ruler_singular(prefix), v_type[:-1]
    needles = NEEDLE.findall(s.input)
    real = [n for n in needles if n[1] in s.meta["keys"]]
    assert len(real) == max(nk, nq) * nv
    assert all(n[0] == v_type for n in needles)  # the needle keeps the plural noun
    queries = s.meta["queries"]
    query = queries[0] if nq == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
    before, after = split_template(template, type_needle_v=noun, query=query)
    assert s.input.startswith(before) and s.input.endswith(after)
    assert s.answer_prefix == prefix.format(type_needle_v=noun, query=query)
    assert s.prompt == s.input + s.answer_prefix
    asked = {n[1]: [] for n in real}
    for n in real:
        asked[n[1]].append(n[2])
    assert sorted(s.outputs) == sorted(v for q in queries for v in asked[q])  # RULER keeps draw order
    for _, key, value in real:  # key / value spaces
        for text, kind in ((key, k_type), (value, v_type)):
            if kind == "numbers":
                assert re.fullmatch(r"[1-9]\d{6}", text)
            elif kind == "uuids":
                assert uuid.UUID(text).version == 4 and str(uuid.UUID(text)) == text
            else:
                assert re.fullmatch(r"[a-z]+-[a-z]+", text)
    if hay == "noise":
        body = s.input[len(before):len(s.input) - len(after)]
        lines = body.split("\n")
        noise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
        assert all(line == noise or NEEDLE.fullmatch(line) or noise.startswith(line) for line in lines)


def test_vt_prompt_is_rulers_template_with_one_solved_example(byte_tok):
    s = generate("vt", byte_tok, 2048, 1, seed=1, template="plain", cache=False)[0]
    template, prefix, _ = RULER["vt"]
    value = s.meta["value"]
    before, after = split_template(template, query=value)
    assert s.answer_prefix == prefix.format(num_v=5, query=value)
    assert s.input.endswith(after)
    example, main = s.input.split("\n\n" + before)  # RULER: example + "\n" + task; the example ends in "\n"
    ex_lines = example.split("\n")
    ex_value = re.search(r"VAR [A-Z]{3} = (\d{5})$", "\n".join(ex_lines), re.M).group(1)
    ex_before, ex_after = split_template(template, query=ex_value)
    assert example.startswith(ex_before)
    ex_names = re.findall(r"VAR ([A-Z]{3}) = ", example)
    # RULER: icl_example['input'] + " " + ' '.join(outputs): the prefix's own space and one more
    assert example.endswith(ex_after + prefix.format(num_v=5, query=ex_value) + " " + " ".join(ex_names))
    chain = re.findall(r"^VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5}) |(\d{5}))$", main, re.M)
    assert len(chain) == 5 and chain[0][2] == value
    assert [c[1] for c in chain[1:]] == [c[0] for c in chain[:-1]]  # each hop names the previous variable
    assert s.outputs == [c[0] for c in chain]


def test_cwe_prompt_has_rulers_example_and_counts(byte_tok):
    for length, (ex_n, ex_reps, reps) in ((2048, (20, (3, 1), (6, 1))), (8192, (40, (10, 3), (30, 3)))):
        s = generate("cwe", byte_tok, length, 1, seed=2, template="plain", cache=False)[0]
        template, prefix, _ = RULER["cwe"]
        before, after = split_template(template)
        assert s.answer_prefix == prefix
        example, main = s.input.split("\n" + before)
        assert example.startswith(before)
        ex_list, ex_answer = example[len(before):].split(after + prefix + " ")
        ex_items = re.findall(r"(\d+)\. (\S+)", ex_list)
        assert [int(i) for i, _ in ex_items] == list(range(1, len(ex_items) + 1))
        counts = {}
        for _, w in ex_items:
            counts[w] = counts.get(w, 0) + 1
        assert len(counts) == ex_n and sorted(set(counts.values())) == sorted(set(ex_reps))
        top = [w for w, c in counts.items() if c == ex_reps[0]]
        assert sorted(re.findall(r"\d+\. (\S+)", ex_answer)) == sorted(top)
        items = re.findall(r"(\d+)\. (\S+)", main[: -len(after)])
        counts = {}
        for _, w in items:
            counts[w] = counts.get(w, 0) + 1
        assert sorted(w for w, c in counts.items() if c == reps[0]) == sorted(s.outputs)
        assert set(counts.values()) == set(reps) and len(s.outputs) == 10


def test_fwe_counts_follow_zeta_law(byte_tok):
    s = generate("fwe", byte_tok, 4096, 1, seed=0, template="plain", cache=False)[0]
    template, prefix, _ = RULER["fwe"]
    before, after = split_template(template)
    assert s.input.startswith(before) and s.input.endswith(after) and s.answer_prefix == prefix
    text = s.input[len(before):-len(after)].split(" ")
    n = s.meta["total_words"]
    zeta2 = np.pi ** 2 / 6
    counts = {}
    for w in text:
        counts[w] = counts.get(w, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    assert ranked[0][0] == "..." and ranked[0][1] == int(n / zeta2)
    assert sorted(c for _, c in ranked[1:4]) == sorted(int(n * k ** -2.0 / zeta2) for k in (2, 3, 4))
    assert sorted(s.outputs) == sorted(w for w, _ in ranked[1:4])
    assert all(len(w) == 6 and w.isalpha() and w.islower() for w in counts if w != "...")
    assert s.meta["vocab_size"] == (4096 - 50) // 50


@pytest.mark.parametrize("name", ["qa_1", "qa_2"])
def test_qa_prompt_is_rulers_template(name, byte_tok):
    s = generate(name, byte_tok, 2048, 1, seed=0, template="plain", cache=False)[0]
    template, prefix, _ = RULER["qa"]
    before, after = split_template(template, query=s.meta["question"])
    assert s.input.startswith(before) and s.input.endswith(after) and s.answer_prefix == prefix
    docs = s.input[len(before):-len(after)].split("\n\n")
    assert [d.split(":\n")[0] for d in docs] == [f"Document {i}" for i in range(1, len(docs) + 1)]


def test_depth_grid_is_rulers():
    from ctxlens.tasks.niah import DEPTHS

    assert DEPTHS == list(np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int))
