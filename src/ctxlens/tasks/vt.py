"""RULER variable tracking (``vt``): find every variable bound to a value through a chain of assignments.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Table 14) and
the intrinsic-entropy paper ("Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.3,
Figure A.3-1) report it.
As RULER (``scripts/data/synthetic/variable_tracking.py``; 1 chain of 4 hops, noise haystack,
30-token budget): a chain ``VAR A = 12345``, ``VAR B = VAR A``, ... of 5-letter upper-case names
is hidden line by line in the noise haystack, in order, and the answer is all names of the first
chain. One solved example (3-letter names, same template, its own noise) comes first; RULER
sizes it to 500 tokens, ctxlens to ``min(500, L / 8)`` tokens (never below the example's
minimum), so that short lengths still fit. The example is joined as RULER joins it
(``input + " " + answer + "\n"``, then ``"\n"`` and the task): the answer prefix ends in a space,
so two spaces follow ``they are:``, and two newlines precede the task.
"""

from __future__ import annotations

import random
import string

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.base import Sample, Setup, Task, TooShort, finish, register
from ctxlens.tasks.fit import Stream, fit_knob
from ctxlens.tasks.layout import Insert, fit_stream, shared_stream, stream_draft
from ctxlens.tasks.niah import DEPTHS, on_random_lines

TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above."
)
ANSWER_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables are "
    "assigned the value {query}, they are: "
)
BUDGET = 30
ICL_TOKENS = 500


def chains(rng: random.Random, n_chains: int, n_hops: int, letters: int) -> tuple[list[list[str]], list[list[str]]]:
    """(variable names, assignment lines) of ``n_chains`` chains of ``n_hops`` hops."""
    need, capacity = n_chains * (n_hops + 1), 26 ** letters
    if need > capacity // 2:  # drawn at random until distinct: never more than half of what there is
        raise CtxlensError(f"vt needs {need:,} different variable names ({n_chains:,} chains of {n_hops:,} hops), but "
                           f"names of {letters} letters give only {capacity:,} (at most half are drawn); lower "
                           "--num-chains / --num-hops.")
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < need:
        name = "".join(rng.choices(string.ascii_uppercase, k=letters))
        if name not in seen:
            seen.add(name)
            names.append(name)
    out_vars, out_lines = [], []
    for c in range(n_chains):
        v = names[c * (n_hops + 1):(c + 1) * (n_hops + 1)]
        lines = [f"VAR {v[0]} = {rng.randint(10000, 99998)}"]
        lines += [f"VAR {v[j + 1]} = VAR {v[j]} " for j in range(n_hops)]
        out_vars.append(v)
        out_lines.append(lines)
    return out_vars, out_lines


def _stream(setup: Setup) -> Stream:
    """The batch's haystack (the example and the prompt both start at its start, as in RULER)."""
    return shared_stream(setup, "essay" if setup.option("type_haystack") == "essay" else "noise")


def _inserts(setup: Setup, rng: random.Random, lines: list[list[str]], essay: bool) -> list[Insert]:
    """A chain's lines in order: before uniformly drawn noise lines (RULER), or at sorted depths
    drawn from RULER's grid (essays, or ``placement=grid``)."""
    out = []
    random_lines = on_random_lines(setup, "essay" if essay else "noise")
    for c, chain in enumerate(lines):
        where: list[tuple[float | None, float | None]]  # (depth, line draw) of each line
        if random_lines:
            where = [(None, u) for u in sorted(rng.random() for _ in chain)]
        else:
            where = [(d, None) for d in sorted(rng.sample(DEPTHS, len(chain)))]
        for line, (depth, u) in zip(chain, where):
            out.append(Insert(line.strip() + "." if essay else line, depth, "chain", c == 0, u))
    return out


def _parts(n_hops: int, value: str) -> tuple[str, str, str]:
    before, after = TEMPLATE.format(context="\x00", query=value).split("\x00")
    return before, after, ANSWER_PREFIX.format(num_v=n_hops + 1, query=value)


def _example(setup: Setup, rng: random.Random, n_chains: int, n_hops: int, essay: bool) -> list[str]:
    """Pieces of the solved one-shot example, as large as fits its token share."""
    hops = min(10, n_hops)
    names, lines = chains(rng, n_chains, hops, letters=3)
    before, after, prefix = _parts(hops, lines[0][0].split("=")[-1].strip())
    tail = [after, prefix + " " + " ".join(names[0]) + "\n"]  # RULER: input + " " + answer + "\n"
    inserts = _inserts(setup, rng, lines, essay)
    stream = _stream(setup)

    def make(units: int) -> list[str]:
        return stream_draft(stream, stream.prefix(units), [before], tail, inserts).pieces

    def cost(units: int) -> int:
        return setup.encoder.count(make(units), False)

    share = max(cost(0), min(ICL_TOKENS, setup.length // 8))
    stream.extend_to(share)
    fit = fit_knob(cost, share, 0, 0, len(stream.units) - 1)
    assert fit is not None  # share >= cost(0)
    units, _ = fit
    return make(units)


def build(setup: Setup, index: int) -> Sample:
    n_chains, n_hops = int(setup.option("num_chains")), int(setup.option("num_hops"))
    if n_chains * (n_hops + 1) > setup.target:  # every variable takes a token at least: it can never fit
        raise TooShort(f"Task 'vt' with {n_chains:,} chains of {n_hops:,} hops needs more than {setup.length:,} "
                       f"tokens ({n_chains * (n_hops + 1):,} variables take a token each at least, and a "
                       f"{setup.budget}-token budget); use longer lengths or fewer --num-chains / --num-hops.")
    essay = setup.option("type_haystack") == "essay"
    rng = setup.rng(index)
    example = _example(setup, rng, n_chains, n_hops, essay)
    names, lines = chains(rng, n_chains, n_hops, letters=5)
    value = lines[0][0].split("=")[-1].strip()
    before, after, prefix = _parts(n_hops, value)
    inserts = _inserts(setup, rng, lines, essay)
    stream = _stream(setup)
    head = [*example, "\n" + before]  # RULER: example + "\n" + task
    draft, pick = fit_stream(setup, stream, lambda p: stream_draft(stream, p, head, [after], inserts), prefix)
    meta = {"haystack": "essay" if essay else "noise", "chains": lines, "value": value,
            "haystack_units": len(pick.units), "padding": pick.pad,
            "example_tokens": setup.encoder.count(example, False)}
    return finish(setup, index, draft, prefix, names[0], meta)


register(Task("vt", "vt", BUDGET, "all", build, {"type_haystack": "noise", "num_chains": 1, "num_hops": 4,
                                                      "placement": "ruler"},
              "variable tracking: 1 chain of 4 hops in noise, one solved example first"))
