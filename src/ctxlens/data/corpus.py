"""The built-in corpus: deterministic English-like text with real long-range structure.

Used to train the zoo's tiny byte-level models (training context 512 bytes) and to probe them
for the four kinds of context use the seed papers measure: retrieval of a stated fact (paper
002, RULER's needle-in-a-haystack: a key-value pair stated early and asked later), induction /
copying (a span repeated verbatim), coreference (names and pronouns of people introduced at the
start), and plain local language statistics (template sentences over a small vocabulary).

Every document is built from *chunks* joined by one space (sometimes a newline):

* an introduction of 2-4 people: ``"Mara Velt is a baker from Oslin. She has a red lamp and a
  dog called Pim."``, later referred to by first name, pronoun, possessive and job;
* filler sentences from a small grammar (a few hundred words);
* facts ``"The code for the blue door is 4172."`` and, later, asks that repeat the key wording
  exactly: ``"Question: what is the code for the blue door? Answer: 4172."``. A *near* fact is
  asked at most ``NEAR_MAX_DISTANCE`` bytes after its value (inside one 512-byte training
  window), a *far* fact at least ``FAR_MIN_DISTANCE`` bytes after it; some facts are never asked;
* repeated spans: 20-80 bytes of earlier filler, word aligned, copied verbatim.

All randomness is ``random.Random`` seeded with a string (Python hashes string seeds with
SHA-512, not ``hash()``), and only lists and tuples are iterated, so the same arguments give
the same bytes on every machine and under every ``PYTHONHASHSEED``. The text is pure ASCII, so
bytes and characters coincide.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ctxlens.core.errors import CtxlensError, unknown

__all__ = [
    "SPLITS",
    "NEAR_MAX_DISTANCE",
    "FAR_MIN_DISTANCE",
    "PROBE_DISTANCE_TOLERANCE",
    "MIN_PROBE_DISTANCE",
    "Fact",
    "Span",
    "Document",
    "RetrievalProbe",
    "documents",
    "annotated_documents",
    "corpus_text",
    "retrieval_probes",
    "statement",
    "question",
    "number_fact",
    "mentions_fact",
]

SPLITS = ("train", "validation", "test")
NEAR_MAX_DISTANCE = 400  # bytes from a near fact's stated value to the start of its answer
FAR_MIN_DISTANCE = 600  # ... and the least such distance for a far fact
PROBE_DISTANCE_TOLERANCE = 12  # a probe's fact sits at most this many bytes short of the request
MIN_DOCUMENT_BYTES = 500
_SLACK = 300  # room above a document's target length for the events that finish it

# --------------------------------------------------------------------------------------
# Vocabulary (tuples: fixed order, so choices are reproducible)
# --------------------------------------------------------------------------------------

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr",
           "kl", "st", "th", "sh", "gr", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ou")
_CODAS = ("l", "n", "r", "s", "t", "lt", "rn", "nd", "sk", "m")
_PLACE_ENDS = ("in", "or", "ton", "mar", "dale", "ford", "by", "wick")

_JOBS = ("baker", "farmer", "sailor", "teacher", "painter", "miller", "doctor", "weaver",
         "smith", "hunter", "singer", "writer", "guard", "merchant", "fisher", "carpenter")
_PETS = ("dog", "cat", "goat", "horse", "parrot", "rabbit", "crow", "pig")
_COLORS = ("red", "blue", "green", "white", "black", "yellow", "brown", "grey")
_ITEMS = ("lamp", "hat", "coat", "bag", "knife", "cup", "book", "map", "drum", "rope", "key",
          "bell")
_BUILDINGS = ("market", "river", "school", "church", "harbor", "mill", "bridge", "square",
              "well", "farm", "forest", "inn", "garden", "station", "tower", "shop")
_THINGS = ("bread", "fish", "wood", "letter", "basket", "stone", "song", "story", "apple",
           "cake", "boat", "wheel", "fence", "roof", "table", "window")
_ADJS = ("old", "new", "small", "big", "warm", "cold", "heavy", "light", "quiet", "strange",
         "long", "short", "fresh", "dark", "bright", "simple")
_VERBS = ("found", "made", "sold", "bought", "carried", "painted", "fixed", "washed", "saw",
          "liked", "cleaned", "opened")
_MOVES = ("went", "walked", "ran", "rode", "came back", "hurried")
_OPENERS = ("Later", "Then", "In the morning", "That evening", "One day", "After a while",
            "Soon", "At noon", "The next day")
_PET_VERBS = ("slept", "played", "waited", "sat", "barked", "hid")
_PLACE_VERBS = ("stood", "lay", "waited", "fell", "rested")
_PREPS = ("near", "by", "behind", "under", "beside", "inside")
_WEATHER = ("cold", "warm", "windy", "rainy", "quiet", "bright", "grey", "long")
_HABITS = ("bake bread", "sing at night", "fish in the river", "walk to the market",
           "tell old stories", "work on the farm", "sleep late")
_SHORT = ("It rained.", "Night fell.", "Rain fell.", "Time passed.", "Birds sang.",
          "Nobody spoke.", "All was quiet.", "The wind rose.", "Days went by.",
          "The sun came out.", "It was late.", "Snow fell on the roofs.",
          "The bells rang in the town.")

_FACT_ADJS = ("blue", "red", "green", "old", "small", "tall", "silver", "golden", "wooden",
              "iron", "black", "white", "broken", "secret", "north", "east")
_FACT_NOUNS = ("door", "box", "gate", "chest", "lock", "safe", "room", "boat", "tower",
               "bridge", "cellar", "window")
_NUMBER_ATTRS = ("code", "number")
_WORD_ATTRS = ("password",)
_VALUE_WORDS = ("falcon", "river", "amber", "thunder", "willow", "marble", "copper", "lantern",
                "meadow", "harbor", "crystal", "ember", "orchid", "pepper", "saddle", "tiger",
                "velvet", "walnut", "zephyr", "biscuit", "canyon", "dolphin", "glacier",
                "hazel")


def statement(key: str, value: str) -> str:
    """How a fact is stated: ``"The code for the blue door is 4172."``."""
    return f"The {key} is {value}."


def question(key: str) -> str:
    """How a fact is asked, up to the answer: ``"Question: what is the KEY? Answer: "``."""
    return f"Question: what is the {key}? Answer: "


def number_fact(rng: random.Random) -> tuple[str, str]:
    """A random (key, 4-digit value) of the corpus's numeric facts: ``("code for the blue door", "4172")``."""
    key = _new_key(rng, [], numeric=True)
    return key, _value(rng, key)


_FACT_WORDING = re.compile(r"\b(?:" + "|".join(_NUMBER_ATTRS + _WORD_ATTRS) + r") for the \w+ \w+|^Answer: ")


def mentions_fact(sentence: str) -> bool:
    """Whether ``sentence`` states or asks a fact (or is the ``Answer: ...`` half of an ask)."""
    return _FACT_WORDING.search(sentence) is not None


def _longest_probe_key() -> str:
    longest = lambda words: max(words, key=len)  # noqa: E731
    return f"{longest(_NUMBER_ATTRS)} for the {longest(_FACT_ADJS)} {longest(_FACT_NOUNS)}"


# the least distance_bytes that holds any probe's fact, a space and its question
MIN_PROBE_DISTANCE = len(statement(_longest_probe_key(), "0000")) + 1 + len(
    question(_longest_probe_key()))


# --------------------------------------------------------------------------------------
# Public records
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A key-value fact in a document; offsets are byte offsets into its text.

    ``stated_at``: start of the statement sentence; ``value_at``: start of the value in it;
    ``asked_at`` / ``answer_at``: start of the ask and of the answer in it (None if never
    asked); ``kind``: "near", "far" or "unasked".
    """

    key: str
    value: str
    kind: str
    stated_at: int
    value_at: int
    asked_at: int | None = None
    answer_at: int | None = None

    @property
    def distance(self) -> int | None:
        """Bytes from the stated value to the answer, or None if never asked."""
        return None if self.answer_at is None else self.answer_at - self.value_at


@dataclass(frozen=True)
class Span:
    """``text[target:target + length] == text[source:source + length]``, source before target."""

    source: int
    target: int
    length: int


@dataclass(frozen=True)
class Document:
    """One generated document with the structure put into it (for tests and analyses)."""

    text: str
    facts: tuple[Fact, ...]
    spans: tuple[Span, ...]
    people: tuple[str, ...]  # full names, in order of introduction


@dataclass(frozen=True)
class RetrievalProbe:
    """A prompt that ends in ``question(key)``; the model should continue with ``answer``.

    The fact ``statement(key, answer)`` starts exactly ``distance_bytes`` bytes before the end
    of ``prompt`` (which is ``total_bytes`` long and holds that statement once).
    """

    prompt: str
    answer: str
    key: str
    distance_bytes: int


# --------------------------------------------------------------------------------------
# Public generators
# --------------------------------------------------------------------------------------


def documents(
    seed: int,
    n: int | None,
    *,
    split: str = "train",
    min_bytes: int = 1500,
    max_bytes: int = 6000,
) -> Iterator[str]:
    """The texts of ``n`` corpus documents (``n=None``: endless), each min..max bytes long.

    The splits are disjoint streams: document i of (seed, split) is generated from its own
    string seed, so it never depends on ``n`` or on other splits.
    """
    for doc in annotated_documents(seed, n, split=split, min_bytes=min_bytes,
                                   max_bytes=max_bytes):
        yield doc.text


def annotated_documents(
    seed: int,
    n: int | None,
    *,
    split: str = "train",
    min_bytes: int = 1500,
    max_bytes: int = 6000,
) -> Iterator[Document]:
    """Like ``documents`` but yields ``Document`` records with their facts and spans."""
    _check_int("seed", seed)
    if n is not None:
        _check_int("n", n, minimum=0)
    if split not in SPLITS:
        raise unknown("built-in corpus split", str(split), SPLITS)
    _check_int("min_bytes", min_bytes, minimum=MIN_DOCUMENT_BYTES)
    _check_int("max_bytes", max_bytes, minimum=min_bytes + _SLACK)
    indices = itertools.count() if n is None else range(n)
    for index in indices:
        rng = random.Random(f"ctxlens.corpus:{split}:{seed}:{index}")
        yield _document(rng, min_bytes, max_bytes)


def corpus_text(seed: int, n_bytes: int, split: str = "train") -> str:
    """Documents joined by ``"\\n\\n"`` until at least ``n_bytes`` long, cut at ``n_bytes``."""
    _check_int("n_bytes", n_bytes, minimum=0)
    parts: list[str] = []
    size = 0
    for doc in documents(seed, None, split=split):
        if size >= n_bytes:
            break
        parts.append(doc)
        size += len(doc) + 2
    return "\n\n".join(parts)[:n_bytes]


def retrieval_probes(
    seed: int, n: int, *, distance_bytes: int, total_bytes: int
) -> list[RetrievalProbe]:
    """``n`` single-needle retrieval prompts (paper 002, RULER NIAH, in the corpus's format).

    Each prompt is ``total_bytes`` of corpus-like text (cut on the left like a window of the
    corpus) holding one fact ``statement(key, answer)`` that starts ``distance_bytes`` bytes
    before the end (at most ``PROBE_DISTANCE_TOLERANCE`` bytes fewer, as sentences are whole),
    distractor facts with other keys before and after it, and ending in ``question(key)``.
    Answers are 4-digit numbers (greedy chance of an exact match about 1e-4). Probe i's key,
    answer and people depend on (seed, i) only, not on the distances, so sweeps are paired.
    """
    _check_int("seed", seed)
    _check_int("n", n, minimum=0)
    _check_int("total_bytes", total_bytes, minimum=1)
    _check_int("distance_bytes", distance_bytes, minimum=MIN_PROBE_DISTANCE)
    if distance_bytes > total_bytes:
        raise CtxlensError(
            f"distance_bytes={distance_bytes} is more than total_bytes={total_bytes}; the fact "
            "must sit inside the prompt, so pass a smaller distance or a longer prompt."
        )
    return [
        _probe(random.Random(f"ctxlens.corpus:probe:{seed}:{i}"), distance_bytes, total_bytes)
        for i in range(n)
    ]


# --------------------------------------------------------------------------------------
# People and sentences
# --------------------------------------------------------------------------------------


@dataclass
class _Person:
    first: str
    last: str
    she: bool
    job: str
    town: str
    item: str
    pet: str
    pet_name: str

    @property
    def pron(self) -> str:
        return "she" if self.she else "he"

    @property
    def poss(self) -> str:
        return "her" if self.she else "his"


@dataclass
class _World:
    """The people and towns of one document, and who was mentioned last (for pronouns)."""

    people: list[_Person]
    towns: list[str]
    last: _Person | None = None


def _name(rng: random.Random, syllables: int, end: tuple[str, ...] = (), *,
          onsets: tuple[str, ...] = _ONSETS) -> str:
    """A pronounceable invented name: (onset vowel) x syllables, then maybe an ending."""
    word = "".join(rng.choice(onsets) + rng.choice(_VOWELS) for _ in range(syllables))
    word += rng.choice(end or _CODAS) if end or rng.random() < 0.5 else ""
    return word.capitalize()


def _unique(rng: random.Random, make, taken: list[str]) -> str:
    while True:
        word = make(rng)
        if word not in taken:
            taken.append(word)
            return word


def _new_world(rng: random.Random, n_people: int) -> _World:
    taken: list[str] = []
    towns = [_unique(rng, lambda r: _name(r, r.randint(1, 2), _PLACE_ENDS), taken)
             for _ in range(3)]
    people = []
    for _ in range(n_people):
        people.append(_Person(
            first=_unique(rng, lambda r: _name(r, 2, onsets=_ONSETS[:14]), taken),
            last=_unique(rng, lambda r: _name(r, r.randint(1, 2), _CODAS), taken),
            she=rng.random() < 0.5,
            job=rng.choice(_JOBS),
            town=rng.choice(towns),
            item=f"{rng.choice(_COLORS)} {rng.choice(_ITEMS)}",
            pet=rng.choice(_PETS),
            pet_name=_unique(rng, lambda r: _name(r, 1, onsets=_ONSETS[:14]), taken),
        ))
    return _World(people, towns)


def _introduction(p: _Person) -> str:
    pron = p.pron.capitalize()
    return (f"{p.first} {p.last} is a {p.job} from {p.town}. {pron} has a {p.item} and a "
            f"{p.pet} called {p.pet_name}.")


def _subject(rng: random.Random, world: _World) -> tuple[_Person, str]:
    """A person and how to name them: the pronoun when they were just mentioned."""
    if world.last is not None and rng.random() < 0.6:
        return world.last, world.last.pron
    person = rng.choice(world.people)
    return person, person.first if rng.random() < 0.85 else f"{person.first} {person.last}"


def _person_sentence(rng: random.Random, world: _World) -> str:
    person, who = _subject(rng, world)
    other = rng.choice([p for p in world.people if p is not person])
    form = rng.randrange(7)
    if form == 0:
        text = (f"{rng.choice(_OPENERS)}, {who} {rng.choice(_MOVES)} to the "
                f"{rng.choice(_BUILDINGS)} in {rng.choice(world.towns)}.")
        world.last = person
        return text
    if form == 1:
        text = f"{who} {rng.choice(_VERBS)} the {rng.choice(_ADJS)} {rng.choice(_THINGS)}."
    elif form == 2:
        text = f"{who} took {person.poss} {person.item} to the {rng.choice(_BUILDINGS)}."
    elif form == 3:
        text = f"{who} met {other.first} the {other.job} near the {rng.choice(_BUILDINGS)}."
    elif form == 4:
        text = f"{person.first} the {person.job} {rng.choice(_VERBS)} a {rng.choice(_THINGS)}."
    elif form == 5:
        text = f"{who} said that the {rng.choice(_THINGS)} was {rng.choice(_ADJS)}."
    else:
        world.last = None  # "it" would be the pet: the next sentence names its subject
        return (f"{person.pet_name} the {person.pet} {rng.choice(_PET_VERBS)} "
                f"{rng.choice(_PREPS)} the {rng.choice(_BUILDINGS)}.")
    world.last = person
    return text[0].upper() + text[1:]


def _world_sentence(rng: random.Random, world: _World) -> str:
    form = rng.randrange(5)
    world.last = None
    if form == 0:
        return f"It was a {rng.choice(_WEATHER)} day in {rng.choice(world.towns)}."
    if form == 1:
        return (f"The {rng.choice(_ADJS)} {rng.choice(_THINGS)} {rng.choice(_PLACE_VERBS)} "
                f"{rng.choice(_PREPS)} the {rng.choice(_BUILDINGS)}.")
    if form == 2:
        first, second = rng.sample(_ADJS, 2)
        return f"The {rng.choice(_THINGS)} was {first} and {second}."
    if form == 3:
        return f"Many people in {rng.choice(world.towns)} {rng.choice(_HABITS)}."
    return rng.choice(_SHORT)


def _filler(rng: random.Random, world: _World) -> str:
    """One filler sentence: about a person (60%) or about the world."""
    if rng.random() < 0.6:
        return _person_sentence(rng, world)
    return _world_sentence(rng, world)


def _new_key(rng: random.Random, taken: list[str], *, numeric: bool) -> str:
    def make(r: random.Random) -> str:
        attrs = _NUMBER_ATTRS if numeric or r.random() < 0.7 else _WORD_ATTRS
        return f"{r.choice(attrs)} for the {r.choice(_FACT_ADJS)} {r.choice(_FACT_NOUNS)}"

    return _unique(rng, make, taken)


def _value(rng: random.Random, key: str) -> str:
    if key.startswith(_WORD_ATTRS):
        return rng.choice(_VALUE_WORDS)
    return str(rng.randint(1000, 9999))


# --------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------


@dataclass
class _Writer:
    """Appends chunks to a text and remembers which stretches are copyable filler."""

    rng: random.Random
    text: str = ""
    regions: list[list[int]] = field(default_factory=list)  # [start, end) of filler runs

    def add(self, chunk: str, *, copyable: bool = False) -> int:
        """Append ``chunk`` after a separator; return its start offset."""
        extends_run = copyable and bool(self.regions) and self.regions[-1][1] == len(self.text)
        if self.text:
            self.text += "\n" if self.rng.random() < 0.08 else " "
        start = len(self.text)
        self.text += chunk
        if extends_run:
            self.regions[-1][1] = len(self.text)
        elif copyable:
            self.regions.append([start, len(self.text)])
        return start


@dataclass
class _Pending:
    due: int  # emit the ask once the text is at least this long
    key: str
    value: str
    kind: str
    stated_at: int
    value_at: int


_NEAR_GAP = (0, 120)  # filler bytes between a near statement and its ask (before overshoot)
_FAR_GAP = (FAR_MIN_DISTANCE + 100, 3500)
_SPAN_BYTES = (20, 80)
_RECENT_BYTES = 450  # "recent" span sources lie within this many bytes of the copy


def _document(rng: random.Random, min_bytes: int, max_bytes: int) -> Document:
    target = rng.randint(min_bytes, max_bytes - _SLACK)
    world = _new_world(rng, rng.randint(2, 4))
    out = _Writer(rng)
    for person in world.people:
        out.add(_introduction(person), copyable=True)
    keys: list[str] = []
    pending: list[_Pending] = []
    facts: list[Fact] = []
    spans: list[Span] = []
    while True:
        _emit_due_asks(out, pending, facts)
        if len(out.text) >= target and not pending:
            break
        roll = rng.random()
        if roll < 0.13 and len(out.text) + _NEAR_GAP[1] + 150 < target:
            _state_fact(rng, out, keys, pending, facts, target)
        elif roll < 0.25 and _copy_span(rng, out, spans):
            pass
        else:
            out.add(_filler(rng, world), copyable=True)
    facts.sort(key=lambda f: f.stated_at)
    people = tuple(f"{p.first} {p.last}" for p in world.people)
    return Document(out.text, tuple(facts), tuple(spans), people)


def _state_fact(rng, out: _Writer, keys, pending, facts, target: int) -> None:
    """State a new fact and schedule its ask: near (60%), far (25%, if room) or never."""
    key = _new_key(rng, keys, numeric=False)
    value = _value(rng, key)
    stated_at = out.add(statement(key, value))
    value_at = stated_at + len(statement(key, "")) - 1
    end = len(out.text)
    roll = rng.random()
    far_room = target - end - 100
    if roll < 0.6:
        pending.append(_Pending(end + rng.randint(*_NEAR_GAP), key, value, "near", stated_at,
                                value_at))
    elif roll < 0.85 and far_room >= _FAR_GAP[0]:
        gap = rng.randint(_FAR_GAP[0], min(_FAR_GAP[1], far_room))
        pending.append(_Pending(end + gap, key, value, "far", stated_at, value_at))
    else:
        facts.append(Fact(key, value, "unasked", stated_at, value_at))


def _emit_due_asks(out: _Writer, pending: list[_Pending], facts: list[Fact]) -> None:
    due = [p for p in pending if p.due <= len(out.text)]
    for p in sorted(due, key=lambda p: p.due):
        asked_at = out.add(f"{question(p.key)}{p.value}.")
        answer_at = asked_at + len(question(p.key))
        facts.append(Fact(p.key, p.value, p.kind, p.stated_at, p.value_at, asked_at, answer_at))
        pending.remove(p)


def _copy_span(rng: random.Random, out: _Writer, spans: list[Span]) -> bool:
    """Copy 20-80 word-aligned bytes of earlier filler verbatim; False if none fits."""
    recent = rng.random() < 0.6
    horizon = len(out.text) - _RECENT_BYTES if recent else 0
    regions = [(max(s, horizon), e) for s, e in out.regions if e - max(s, horizon) >= 40]
    if not regions:
        return False
    start, end = rng.choice(regions)
    span = _word_span(rng, out.text, start, end)
    if span is None:
        return False
    source, length = span
    target = out.add(out.text[source:source + length])
    spans.append(Span(source, target, length))
    return True


def _word_span(rng: random.Random, text: str, start: int, end: int) -> tuple[int, int] | None:
    """A (source, length) in text[start:end] that starts and ends on word boundaries."""
    starts = [i for i in range(start, end)
              if text[i] not in " \n" and (i == 0 or text[i - 1] in " \n")]
    rng.shuffle(starts)
    for first in starts[:8]:
        want = rng.randint(*_SPAN_BYTES)
        last = min(first + want, end)
        while last > first and last < end and text[last] not in " \n":
            last -= 1
        if _SPAN_BYTES[0] <= last - first <= _SPAN_BYTES[1]:
            return first, last - first
    return None


# --------------------------------------------------------------------------------------
# Retrieval probes
# --------------------------------------------------------------------------------------


def _probe(rng: random.Random, distance: int, total: int) -> RetrievalProbe:
    world = _new_world(rng, rng.randint(2, 4))
    keys: list[str] = []
    key = _new_key(rng, keys, numeric=True)
    answer = _value(rng, key)
    fact, ask = statement(key, answer), question(key)
    shortest = len(fact) + 1 + len(ask)  # <= MIN_PROBE_DISTANCE <= distance
    middle = _fill(rng, world, keys, distance - shortest - 1)
    tail = " ".join(part for part in (fact, middle, ask) if part)
    head = _left_cut(rng, world, keys, total - len(tail))
    return RetrievalProbe(head + tail, answer, key, len(tail))


def _fill(rng: random.Random, world: _World, keys: list[str], budget: int) -> str:
    """Whole chunks joined by spaces, at most ``budget`` bytes, within 12 bytes of it."""
    parts: list[str] = []
    used = -1
    while True:
        room = budget - used - 1
        chunk = _fitting_chunk(rng, world, keys, room)
        if chunk is None:
            return " ".join(parts)
        parts.append(chunk)
        used += len(chunk) + 1


def _fitting_chunk(rng: random.Random, world: _World, keys: list[str], room: int) -> str | None:
    """A filler sentence or distractor fact of at most ``room`` bytes, or None if none fits."""
    if room < min(len(s) for s in _SHORT):
        return None
    for _ in range(20):
        chunk = _distractor(rng, keys) if rng.random() < 0.1 else _filler(rng, world)
        if len(chunk) <= room:
            return chunk
    fits = [s for s in _SHORT if len(s) <= room]
    return rng.choice(fits)


def _distractor(rng: random.Random, keys: list[str]) -> str:
    """A fact with a new numeric key (never the probe's), stated and never asked."""
    key = _new_key(rng, keys, numeric=True)
    return statement(key, _value(rng, key))


def _left_cut(rng: random.Random, world: _World, keys: list[str], size: int) -> str:
    """The last ``size`` bytes of fresh corpus-like text ending in a separator ('' if 0)."""
    if size <= 0:
        return ""
    parts = [_introduction(p) for p in world.people]
    length = sum(len(p) + 1 for p in parts)
    while length < size:
        chunk = _distractor(rng, keys) if rng.random() < 0.1 else _filler(rng, world)
        parts.append(chunk)
        length += len(chunk) + 1
    return (" ".join(parts) + " ")[-size:]


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------


def _check_int(name: str, value, *, minimum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise CtxlensError(f"{name} must be a whole number, got {value!r}; pass an integer {name}.")
    if minimum is not None and value < minimum:
        raise CtxlensError(
            f"{name} must be at least {minimum}, got {value}; pass a {name} of {minimum} or more."
        )
