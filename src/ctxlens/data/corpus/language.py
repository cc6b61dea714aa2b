"""The built-in corpus's prose: its vocabulary, the people of a document, and filler sentences.

Each document introduces 2-4 invented people (``new_world``, ``introduction``) and then
talks about them in template sentences over a small vocabulary, naming them by first name,
full name, pronoun, possessive or job (``filler``): the local language statistics and the
coreference that ``ctxlens.data.corpus`` puts into every document. The vocabularies are
tuples, so every ``rng.choice`` over them is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

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
SHORT = ("It rained.", "Night fell.", "Rain fell.", "Time passed.", "Birds sang.",
         "Nobody spoke.", "All was quiet.", "The wind rose.", "Days went by.",
         "The sun came out.", "It was late.", "Snow fell on the roofs.",
         "The bells rang in the town.")


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
class World:
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


def unique(rng: random.Random, make: Callable[[random.Random], str], taken: list[str]) -> str:
    while True:
        word = make(rng)
        if word not in taken:
            taken.append(word)
            return word


def new_world(rng: random.Random, n_people: int) -> World:
    taken: list[str] = []
    towns = [unique(rng, lambda r: _name(r, r.randint(1, 2), _PLACE_ENDS), taken)
             for _ in range(3)]
    people = []
    for _ in range(n_people):
        people.append(_Person(
            first=unique(rng, lambda r: _name(r, 2, onsets=_ONSETS[:14]), taken),
            last=unique(rng, lambda r: _name(r, r.randint(1, 2), _CODAS), taken),
            she=rng.random() < 0.5,
            job=rng.choice(_JOBS),
            town=rng.choice(towns),
            item=f"{rng.choice(_COLORS)} {rng.choice(_ITEMS)}",
            pet=rng.choice(_PETS),
            pet_name=unique(rng, lambda r: _name(r, 1, onsets=_ONSETS[:14]), taken),
        ))
    return World(people, towns)


def introduction(p: _Person) -> str:
    pron = p.pron.capitalize()
    return (f"{p.first} {p.last} is a {p.job} from {p.town}. {pron} has a {p.item} and a "
            f"{p.pet} called {p.pet_name}.")


def _subject(rng: random.Random, world: World) -> tuple[_Person, str]:
    """A person and how to name them: the pronoun when they were just mentioned."""
    if world.last is not None and rng.random() < 0.6:
        return world.last, world.last.pron
    person = rng.choice(world.people)
    return person, person.first if rng.random() < 0.85 else f"{person.first} {person.last}"


def _person_sentence(rng: random.Random, world: World) -> str:
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


def _world_sentence(rng: random.Random, world: World) -> str:
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
    return rng.choice(SHORT)


def filler(rng: random.Random, world: World) -> str:
    """One filler sentence: about a person (60%) or about the world."""
    if rng.random() < 0.6:
        return _person_sentence(rng, world)
    return _world_sentence(rng, world)

