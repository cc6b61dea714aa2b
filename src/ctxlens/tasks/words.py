"""Key and value spaces of the RULER tasks: adjective-noun words, 7-digit numbers, UUID4s.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4 and Tables
1, 4, 6-18) evaluates with RULER, whose needles pair a key with a value drawn from one of three
spaces: ``words`` ("adjective-noun", e.g. ``quiet-harbor``), ``numbers`` (7 digits, first digit
non-zero) and ``uuids`` (random UUID version 4). RULER takes its words from the ``wonderwords``
package; ctxlens ships its own lists of common English adjectives, nouns and verbs (same
shape of key, no extra dependency). The common-words task needs more distinct words than the
lists hold at long lengths; it then draws pronounceable made-up words (``pseudo_words``), as
RULER falls back to a larger English word list.

Every function takes a ``random.Random`` so that a sample is reproducible from its seed.
"""

from __future__ import annotations

import functools
import random
import uuid

from ctxlens.core.errors import CtxlensError

ADJECTIVES = tuple(sorted(set("""
able absent active afraid agile alert alive amber ample ancient angry anxious arctic
autumn awake aware bald bare basic bitter black bland blank blind blond blue bold bored
boring brave brief bright brisk broad broken bronze brown bumpy busy calm careful cheap
cheerful chilly clean clear clever close cloudy clumsy coarse cold common cool copper
cosmic cozy crazy creamy crisp crooked crowded cruel curious curly cute damp dark dear
deep dense dim direct dirty distant dizzy dry dull dusty eager early easy elder electric
elegant empty endless equal even exact faint fair fake famous fancy far fast fat fierce
final fine firm flat fluffy fond formal fragile frank free fresh friendly frozen full
funny fuzzy gentle giant glad glass gloomy golden good grand grateful gray great greedy
green grim gritty grumpy guilty hairy handy happy hard harsh hasty heavy hidden high
hollow holy honest huge humble hungry icy idle ill immense inner ivory jolly juicy keen
kind large late lazy lean legal light lilac linen little lively livid lonely long loose
loud lovely low loyal lucky lush mad magic major marble massive mature meek mellow merry
mighty mild minor misty modern modest moist moral muddy mute narrow nasty native neat
nervous new nice nimble noble noisy normal novel numb odd oily old olive open orange
ordinary outer pale patient perfect pink plain plastic pleasant plump polite poor
portly posh pretty prickly proper proud pure purple quick quiet rapid rare raw ready
real red regal remote rich rigid ripe rocky rosy rough round royal rural rustic rusty
sad safe salty sandy scarlet secret serene shaggy shallow sharp shiny short shy silent
silky silver simple sleek sleepy slim slow small smart smoky smooth snowy soft solar
solid sour spare spicy spotted square stale steady steep sticky stiff still stormy
strange strict strong sturdy subtle sunny super sweet swift tall tame tan tender tense
thick thin thirsty tidy tight tiny tired tough tranquil tropical true twin ugly upper
urban vague vast velvet violet vivid warm wary weak wealthy weary wet white whole wide
wild windy wise witty wooden woolen worn young zany zealous
""".split())))

NOUNS = tuple(sorted(set("""
acorn actor airport album alley anchor angle animal ankle answer apple apron arch arena
arm army arrow artist ash attic aunt autumn avenue baby badge bag bakery balcony ball
balloon banana band bank barn barrel basket bath beach beam bean bear beard bed bee bell
belt bench berry bicycle bird biscuit blanket blossom board boat body bone book boot
bottle boulder bowl box branch bread brick bridge brook broom brush bucket buffalo
building bulb bundle bus bush butter button cabin cable cactus cake camel camera camp
canal candle canoe canyon cap captain car card carpet carrot cart castle cat cave cellar
chair chalk channel chapel cheese cherry chest chicken chimney circle city clam cliff
clock cloud clover coast coat cobra coin comet compass cookie copper coral corner
cottage cotton country cousin cow crab crane crater creek cricket crow crown cup
curtain cushion daisy dancer deer desert desk diamond dinner doctor dog doll dolphin
donkey door dragon drawer dream dress drum duck eagle ear earth eel egg elbow elephant
elk engine falcon farm feather fence ferry field fig finger fire fish flag flame flute
fog forest fork fossil fountain fox frog garden gate gecko ghost giraffe glacier glove
goat gold goose grape grass guitar gull hammer harbor harp hat hawk heart hedge helmet
hen hill hippo hive honey hook horn horse hotel house island ivy jacket jar jelly jewel
journal jungle kettle key kitchen kite kitten knee knife ladder lagoon lake lamp lantern
leaf lemon lens letter library lily lion lizard lobster lock lodge magnet mango map
maple market mask meadow melon mill mirror mitten monkey moon moose moss moth mountain
mouse mug museum nail needle nest net nut oak ocean octopus office olive onion orange
orchard otter owl oyster paddle palace panda paper parrot path peach peak pear pearl
pebble pencil penguin pepper piano pigeon pillow pine pipe planet plate plum pocket
pond pony poppy potato pumpkin puppy quarry quill rabbit raccoon radio raft rain
raven reef ribbon ring river road robin rocket roof room rope rose saddle sail salmon
sand scarf school seal seed shark sheep shell ship shoe shore shovel silk sink skate
sled slipper snail snake sock sofa spider sponge spoon spring squid squirrel stable
stair star station statue stone stove stream street sugar suitcase summit sun swan
table tail teapot temple tent thimble thistle thread throne tiger toad tomato tower
town toy tractor train tree trout truck trumpet tulip tunnel turtle umbrella valley
vase violin wagon wall walnut wand wasp watch water wave whale wheat wheel whistle
willow window wing wolf wool worm yacht yard zebra
""".split())))

VERBS = tuple(sorted(set("""
accept add admire admit advise agree allow amuse announce answer appear arrive ask
attach attack attend avoid bake balance bang bathe battle beam beg behave belong bless
blink boast boil bolt bore borrow bounce bow brake branch breathe bruise brush bubble
bump burn bury buzz calculate call camp care carry carve cause challenge change charge
chase cheat check cheer chew choke chop claim clap clean clear climb clip close coach
collect comb command compare compete complain complete concern confess confuse connect
consider contain continue copy correct cough count cover crack crash crawl cross crush
cry cure curl curve cycle dance dare decide decorate delay delight deliver depend
describe deserve destroy detect develop disagree discover dislike divide double doubt
drag drain dream dress drip drop drown dry earn educate embarrass employ empty end
enjoy enter entertain escape examine excite excuse exercise exist expand expect explain
explode extend face fade fail fancy fasten fear fence fetch file fill film fire fit
fix flap flash float flood flow flower fold follow fool force form found frame frighten
gather gaze glow glue grab grate grease greet grin grip groan guard guess guide hammer
hand handle hang happen harm hate haunt head heal heap heat help hook hop hope hover
hug hum hunt hurry identify ignore imagine impress improve include increase influence
inform inject injure instruct intend interest interrupt invent invite itch jail jam
jog join joke judge juggle jump kick kill kiss kneel knit knock knot label land last
laugh launch learn level license lick lie lighten like list listen live load lock long
look love manage march mark marry match mate matter measure melt memorize mend milk
mine miss mix moan moor mourn move muddle mug multiply murder nail name need nest nod
note notice number obey object observe obtain occur offend offer open order overflow
owe own pack paddle paint park part pass paste pat pause peck pedal peel peep perform
permit phone pick pinch pine place plan plant play please plug point poke polish pop
possess post pour practice pray preach precede prefer prepare present preserve press
pretend prevent prick print produce program promise protect provide pull pump punch
puncture punish push question queue race radiate rain raise reach realize receive
recognize record reduce reflect refuse regret reign reject rejoice relax release rely
remain remember remind remove repair repeat replace reply report reproduce request
rescue retire return rhyme rinse risk rob rock roll rot rub ruin rule rush sack sail
satisfy save saw scare scatter scold scorch scrape scratch scream screw scribble scrub
seal search separate serve settle shade share shave shelter shiver shock shop shrug
sigh sign signal sin sip ski skip slap slip slow smash smell smile smoke snatch sneeze
sniff snore snow soak soothe sound spare spark sparkle spell spill spoil spot spray
sprout squash squeak squeal squeeze stain stamp stare start stay steer step stir stitch
stop store strap strengthen stretch strip stroke stuff subtract succeed suck suffer
suggest suit supply support suppose surprise surround suspect suspend switch talk tame
tap taste tease telephone tempt terrify test thank thaw tick tickle tie time tip tire
touch tour tow trace trade train transport trap travel treat tremble trick trip trot
trouble trust try tug tumble turn twist type undress unfasten unite unlock unpack untidy
use vanish visit wail wait walk wander want warm warn wash waste watch water wave
weigh welcome whine whip whirl whisper whistle wink wipe wish wobble wonder work
worry wrap wreck wrestle wriggle yawn yell zip zoom
""".split())))

_ONSETS = ("b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "k", "l", "m", "n", "p",
           "pl", "r", "s", "sh", "st", "t", "tr", "v", "w", "z")
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ea", "oo", "ou")
_CODAS = ("", "", "b", "d", "k", "l", "m", "n", "r", "s", "t", "nd", "st", "rk")


def key_word(rng: random.Random) -> str:
    """A RULER 'words' key or value: ``adjective-noun``."""
    return f"{rng.choice(ADJECTIVES)}-{rng.choice(NOUNS)}"


def number(rng: random.Random, digits: int = 7) -> str:
    """A RULER 'numbers' value: a ``digits``-digit integer without a leading zero."""
    return str(rng.randint(10 ** (digits - 1), 10 ** digits - 1))


def uuid4(rng: random.Random) -> str:
    """A RULER 'uuids' value: 128 random bits formatted as a version-4 UUID."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


KINDS = {"words": key_word, "numbers": number, "uuids": uuid4}


def draw(kind: str, rng: random.Random) -> str:
    """One key or value of ``kind`` (words | numbers | uuids)."""
    return KINDS[kind](rng)


def capacity(kind: str) -> int:
    """How many different draws ``kind`` can give: adjective-noun pairs, 7-digit numbers, or (in effect
    without bound) UUIDs."""
    return {"words": len(ADJECTIVES) * len(NOUNS), "numbers": 9 * 10 ** 6}.get(kind, 1 << 60)


def distinct(kind: str, rng: random.Random, n: int, exclude: set[str] | frozenset = frozenset()) -> list[str]:
    """``n`` different draws of ``kind``, none in ``exclude``; more than half of what ``kind`` can give
    is refused (one sentence), never drawn for ever."""
    if n + len(exclude) > capacity(kind) // 2:
        raise CtxlensError(f"{n:,} different {kind} asked for, but RULER's {kind} give only {capacity(kind):,} "
                           f"(at most half are drawn); lower --num-needle-k / --num-needle-v.")
    out: list[str] = []
    seen = set(exclude)
    while len(out) < n:
        value = draw(kind, rng)
        if value not in seen:
            seen.add(value)
            out.append(value)
    return out


def pseudo_words(n: int) -> list[str]:
    """``n`` distinct pronounceable made-up lowercase words (2-3 syllables), deterministic."""
    return list(_pseudo_words(n))


@functools.lru_cache(maxsize=8)
def _pseudo_words(n: int) -> tuple[str, ...]:
    rng = random.Random("ctxlens.tasks.words")
    real = set(ADJECTIVES) | set(NOUNS) | set(VERBS)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(rng.randint(2, 3)))
        word += rng.choice(_CODAS)
        if word not in seen and word not in real:
            seen.add(word)
            out.append(word)
    return tuple(out)


def word_pool(n: int) -> list[str]:
    """At least ``n`` distinct single words: the real nouns, adjectives and verbs, then made-up ones."""
    real = sorted(set(NOUNS) | set(ADJECTIVES) | set(VERBS))
    return real if n <= len(real) else real + pseudo_words(n - len(real))
