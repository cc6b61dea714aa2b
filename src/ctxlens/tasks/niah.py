"""The eight RULER needle-in-a-haystack tasks (niah_single_1..3, niah_multikey_1..3, niah_multivalue,
niah_multiquery).

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?"): Table 1 aggregates them,
Tables 6-13 report each, Tables 2-3 sweep the depth of one needle and Table 4 varies haystack,
key and value types. Template, needle sentence, key/value spaces, haystacks and the 128-token
budget follow RULER (``scripts/data/synthetic/niah.py``, ``constants.py``, ``synthetic.yaml``):

* needle: ``One of the special magic {values} for {key} is: {value}.``;
* with one query and one value the template is made singular (``A special magic number is
  hidden ...``, answer prefix ``... mentioned in the provided text is``);
* needle positions follow RULER's rule (option ``placement``, default ``ruler``): in line
  haystacks (noise, needles) each needle goes before a uniformly drawn line, distinct lines as
  ``random.sample``; in essays depths are drawn without replacement from RULER's 40-point grid
  (0..100 %) and each needle goes to the sentence boundary nearest its depth in tokens.
  ``placement=grid`` uses the grid in every haystack, and the ``depths`` option fixes the
  depths (the depth sweeps); every needle's depth is recorded either way.

What differs from RULER, on purpose: depths are exact and recorded, the prompt fills the length
(``ctxlens.tasks.layout``), distractor keys never equal a real key, and shuffles use the
sample's own seed (RULER reuses one fixed permutation for every sample).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.tasks import haystack as hay
from ctxlens.tasks import words
from ctxlens.tasks.base import Sample, Setup, Task, finish, register
from ctxlens.tasks.fit import Stream
from ctxlens.tasks.layout import Insert, fit_stream, shared_stream, stream_draft

TEMPLATE = (
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
    "What are all the special magic {type_needle_v} for {query} mentioned in the provided text?"
)
ANSWER_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
BUDGET = 128
DEPTHS = [round(i * 100 / 39) for i in range(40)]  # RULER: np.round(np.linspace(0, 100, 40))
VALUE_KINDS = tuple(words.KINDS)
PLACEMENTS = ("ruler", "grid")
LINE_HAYSTACKS = ("noise", "needle")


def singular(text: str) -> str:
    """RULER's rewrite of the template for a single answer."""
    for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
        text = text.replace(old, new)
    return text


def _stream(setup: Setup, index: int, kind: str, keys: list[str]) -> Stream:
    if kind in ("noise", "essay"):
        return shared_stream(setup, kind)
    if kind == "needle":
        rng = setup.rng(index, "haystack")
        type_k, type_v = setup.option("type_needle_k"), setup.option("type_needle_v")
        taken = set(keys)

        def lines() -> Iterator[str]:
            while True:
                key = words.draw(type_k, rng)
                if key not in taken:
                    yield hay.NEEDLE.format(type_needle_v=type_v, key=key, value=words.draw(type_v, rng))

        return Stream(lines(), "\n", setup.encoder)
    raise CtxlensError(f"Unknown haystack '{kind}'; use one of: {', '.join(hay.HAYSTACKS)}.")


def depths_for(setup: Setup, rng: random.Random, n: int) -> list[float]:
    """Sorted target depths of ``n`` inserts: the ``depths`` option, or draws from RULER's grid."""
    fixed = setup.option("depths")
    if fixed is None:
        return sorted(rng.sample(DEPTHS, n) if n <= len(DEPTHS) else rng.choices(DEPTHS, k=n))
    fixed = [float(d) for d in (fixed if isinstance(fixed, (list, tuple)) else [fixed])]
    if any(not 0 <= d <= 100 for d in fixed):
        raise CtxlensError(f"Needle depths must lie in 0..100 percent, got {fixed}; fix the depths option.")
    if len(fixed) == 1:
        fixed = fixed * n
    if len(fixed) != n:
        raise CtxlensError(f"Got {len(fixed)} needle depths for {n} needles; give one depth or one per needle.")
    return sorted(fixed)


def on_random_lines(setup: Setup, kind: str) -> bool:
    """Whether inserts go before uniformly drawn lines (RULER's rule in line haystacks) rather
    than to depths: the ``placement`` option is ``ruler`` (the default), the haystack is made of
    lines and no ``depths`` are given."""
    rule = setup.option("placement") or "ruler"
    if rule not in PLACEMENTS:
        raise unknown("needle placement", str(rule), PLACEMENTS)
    return rule == "ruler" and kind in LINE_HAYSTACKS and setup.option("depths") is None


def positions(setup: Setup, rng: random.Random, kind: str, n: int) -> list[tuple[float | None, float | None]]:
    """(depth, line draw) of ``n`` inserts: a uniform draw in [0, 1) each on random lines, else a depth."""
    if on_random_lines(setup, kind):
        return [(None, rng.random()) for _ in range(n)]
    return [(d, None) for d in depths_for(setup, rng, n)]


def build(setup: Setup, index: int) -> Sample:
    opt = setup.option
    type_k, type_v, kind = opt("type_needle_k"), opt("type_needle_v"), opt("type_haystack")
    for name, value in (("type_needle_k", type_k), ("type_needle_v", type_v)):
        if value not in VALUE_KINDS:
            raise CtxlensError(f"Option {name}={value!r} is unknown; use one of: {', '.join(VALUE_KINDS)}.")
    n_q, n_v = int(opt("num_needle_q")), int(opt("num_needle_v"))
    n_k = max(int(opt("num_needle_k")), n_q)
    rng = setup.rng(index)
    keys = words.distinct(type_k, rng, n_k)
    flat = words.distinct(type_v, rng, n_k * n_v, exclude=set(keys))
    values = [flat[i * n_v:(i + 1) * n_v] for i in range(n_k)]
    needles = [(hay.NEEDLE.format(type_needle_v=type_v, key=k, value=v), i)
               for i, k in enumerate(keys) for v in values[i]]
    rng.shuffle(needles)
    asked = rng.sample(range(n_k), n_q)
    answers = [v for i in asked for v in values[i]]
    queries = [keys[i] for i in asked]
    query = queries[0] if n_q == 1 else ", ".join(queries[:-1]) + ", and " + queries[-1]
    where = positions(setup, rng, kind, len(needles))

    template, prefix, noun = TEMPLATE, ANSWER_PREFIX, type_v
    if n_q * n_v == 1:
        template, prefix, noun = singular(TEMPLATE), singular(ANSWER_PREFIX), type_v[:-1]
    text = template.format(type_needle_v=noun, query=query, context="\x00")
    before, after = text.split("\x00")
    answer_prefix = prefix.format(type_needle_v=noun, query=query)
    inserts = [Insert(t, d, "needle", i in asked, u) for (t, i), (d, u) in zip(needles, where)]
    stream = _stream(setup, index, kind, keys)
    draft, pick = fit_stream(setup, stream, lambda p: stream_draft(stream, p, [before], [after], inserts),
                             answer_prefix)
    meta = {"haystack": kind, "type_needle_k": type_k, "type_needle_v": type_v, "keys": keys, "values": values,
            "queries": queries, "haystack_units": len(pick.units), "padding": pick.pad}
    return finish(setup, index, draft, answer_prefix, answers, meta)


def _niah(name: str, haystack: str, key: str, value: str, k: int = 1, v: int = 1, q: int = 1, doc: str = "") -> None:
    options = {"type_haystack": haystack, "type_needle_k": key, "type_needle_v": value,
               "num_needle_k": k, "num_needle_v": v, "num_needle_q": q, "placement": "ruler"}
    register(Task(name, "niah", BUDGET, "all", build, options, doc))


_niah("niah_single_1", "noise", "words", "numbers", doc="one number needle in repeated noise sentences")
_niah("niah_single_2", "essay", "words", "numbers", doc="one number needle in essays")
_niah("niah_single_3", "essay", "words", "uuids", doc="one UUID needle in essays")
_niah("niah_multikey_1", "essay", "words", "numbers", k=4, doc="one needle among 3 distractor needles, essays")
_niah("niah_multikey_2", "needle", "words", "numbers", doc="one needle in a haystack of number needles")
_niah("niah_multikey_3", "needle", "uuids", "uuids", doc="one UUID-keyed needle in a haystack of UUID needles")
_niah("niah_multivalue", "essay", "words", "numbers", v=4, doc="4 values for one key, essays")
_niah("niah_multiquery", "essay", "words", "numbers", q=4, doc="4 keys asked at once, essays")
