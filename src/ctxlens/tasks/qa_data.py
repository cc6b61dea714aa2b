"""Question-answering data for ``qa_1`` / ``qa_2``: SQuAD v2 and HotpotQA files, and a built-in source.

RULER's QA tasks (the long-sequence paper, "How Well Can a Long Sequence Model Model Long Sequences?", Tables
17-18; the intrinsic-entropy paper, "Intrinsic Entropy of Context Length Scaling in LLMs", Appendix A.1) read
SQuAD v2's dev set and HotpotQA's distractor dev set. The loaders read those public formats as
RULER does (``scripts/data/synthetic/qa.py``):

* SQuAD (``{"data": [{"paragraphs": [{"context", "qas": [{"question", "answers",
  "is_impossible"}]}]}]}``): documents are the distinct paragraphs; unanswerable questions are
  skipped; a question's golden document is its paragraph and the other paragraphs of the same
  article are its preferred distractors;
* HotpotQA (``[{"question", "answer", "context": [[title, [sentence, ...]], ...],
  "supporting_facts": [[title, i], ...]}]``): a document is ``title + "\\n" + "".join(sentences)``
  and all ten context documents of a question go into its prompt.

Without files (``builtin``) a generated corpus of the same shapes is used: articles about
made-up towns whose paragraphs state facts that single-paragraph questions ask (SQuAD-like),
and person/town pairs that two-hop questions join (HotpotQA-like). Names are unique, so every
question has one answer.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxlens.core import yaml_safe
from ctxlens.core.errors import CtxlensError, unknown
from ctxlens.core.files import read_input

DATASETS = ("squad", "hotpotqa")


@dataclass(frozen=True)
class QA:
    query: str
    outputs: list[str]
    context: list[int]  # documents that go into the prompt (the golden one(s) first)
    more: list[int] = field(default_factory=list)  # preferred distractors (same article)
    support: list[int] = field(default_factory=list)  # documents that hold the answer


@dataclass(frozen=True)
class QASource:
    name: str
    docs: list[str]
    qas: list[QA]


def read_squad(path: str | Path) -> QASource:
    data = _read_json(path)
    try:
        articles = data["data"]
        docs = sorted({p["context"] for a in articles for p in a["paragraphs"]})
        index = {c: i for i, c in enumerate(docs)}
        qas = []
        for a in articles:
            same = [index[p["context"]] for p in a["paragraphs"]]
            for p in a["paragraphs"]:
                gold = index[p["context"]]
                for q in p["qas"]:
                    if q.get("is_impossible", False) or not q["answers"]:
                        continue
                    qas.append(QA(q["question"], [x["text"] for x in q["answers"]], [gold],
                                  [d for d in same if d != gold], [gold]))
    except (KeyError, TypeError) as err:
        raise CtxlensError(f"'{path}' is not in SQuAD's format (missing {err}); "
                           "give SQuAD v2's dev-v2.0.json.") from None
    return _checked(QASource(f"squad:{path}", docs, qas), path)


def read_hotpotqa(path: str | Path) -> QASource:
    data = _read_json(path)
    try:
        text = lambda title, sents: f"{title}\n{''.join(sents)}"  # noqa: E731
        docs = sorted({text(t, s) for d in data for t, s in d["context"]})
        index = {c: i for i, c in enumerate(docs)}
        qas = []
        for d in data:
            ctx = [index[text(t, s)] for t, s in d["context"]]
            titles = {t for t, _ in d.get("supporting_facts", [])}
            support = [index[text(t, s)] for t, s in d["context"] if t in titles]
            qas.append(QA(d["question"], [d["answer"]], ctx, [], support))
    except (KeyError, TypeError, ValueError) as err:
        raise CtxlensError(f"'{path}' is not in HotpotQA's format ({err}); "
                           "give hotpot_dev_distractor_v1.json.") from None
    return _checked(QASource(f"hotpotqa:{path}", docs, qas), path)


MAX_QA_BYTES = 256 << 20  # RULER reads SQuAD v2's dev set (4.4 MB) and HotpotQA's distractor dev set (46 MB)


def _read_json(path: str | Path) -> Any:  # the parsed file, checked by its reader
    """A QA file parsed as JSON: a FIFO refused, its size checked on the open file before it is read
    (``MAX_QA_BYTES``), its nesting bounded (``yaml_safe.load_json``: a deeply nested file is one sentence,
    not a RecursionError)."""
    try:
        raw = read_input(Path(path).expanduser(), MAX_QA_BYTES, "QA file", "give SQuAD v2's dev-v2.0.json or "
                         "HotpotQA's hotpot_dev_distractor_v1.json, or use 'builtin'")
    except FileNotFoundError:
        raise CtxlensError(f"QA file '{path}' does not exist; check the path or use 'builtin'.") from None
    return yaml_safe.load_json(raw, f"QA file '{path}'", limit=MAX_QA_BYTES)


def _checked(source: QASource, path: str | Path) -> QASource:
    if not source.qas:
        raise CtxlensError(f"QA file '{path}' holds no answerable questions; check the file.")
    return source


@functools.lru_cache(maxsize=8)
def open_qa(dataset: str, spec: str = "builtin") -> QASource:
    """The QA source for ``dataset`` (squad | hotpotqa): a file in its public format, or ``builtin``."""
    if dataset not in DATASETS:
        raise unknown("QA dataset", dataset, DATASETS)
    if spec == "builtin":
        return builtin_squad() if dataset == "squad" else builtin_hotpotqa()
    return read_squad(spec) if dataset == "squad" else read_hotpotqa(spec)


# -- built-in corpus -----------------------------------------------------------------------------

_SYL = ("ka", "lo", "mir", "ten", "sa", "vel", "dor", "ri", "an", "bel", "cor", "fen", "gal", "hal", "is",
        "jun", "kel", "lin", "mar", "nor", "os", "pel", "quin", "ros", "sel", "tor", "ul", "var", "wen", "zan")
_JOBS = ("miller", "weaver", "sailor", "merchant", "carpenter", "teacher", "painter", "smith", "doctor", "farmer")
_TRADES = ("wool", "timber", "salt", "copper", "glass", "cheese", "honey", "paper", "silk", "barley")
_SEASONS = ("spring", "summer", "autumn", "winter")
_MATERIALS = ("red brick", "grey granite", "oak timber", "white marble", "black basalt", "sandstone")
_PLACES = ("harbor", "main square", "old bridge", "river bank", "north gate", "town hall")
_DIRS = ("north", "south", "east", "west")
_BUILDINGS = ("tower", "chapel", "granary", "lighthouse", "mill", "library")


class _Names:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()  # names given so far

    def __call__(self, syllables: int = 3) -> str:
        """A name never given before (one syllable longer after repeated collisions)."""
        for attempt in range(10_000):
            n = syllables + attempt // 50
            name = "".join(self.rng.choice(_SYL) for _ in range(n)).capitalize()
            if name not in self.used:
                self.used.add(name)
                return name
        raise AssertionError("name space exhausted")


def _town(rng: random.Random, names: _Names) -> tuple[str, list[tuple[str, list[tuple[str, str]]]]]:
    """(town, [(paragraph, [(question, answer), ...]), ...]) of one made-up article."""
    town, region, river, founder = names(), names(), names(2), f"{names(2)} {names()}"
    origin, company, landmark = names(), names(2), f"{names(2)} {rng.choice(_BUILDINGS)}"
    year, workers, height = str(rng.randint(1100, 1899)), str(rng.randint(40, 900)), str(rng.randint(12, 90))
    job, trade, season = rng.choice(_JOBS), rng.choice(_TRADES), rng.choice(_SEASONS)
    material, place, side = rng.choice(_MATERIALS), rng.choice(_PLACES), rng.choice(_DIRS)
    history = (f"{town} is a small town in the {side} of {region}. It was founded in {year} by {founder}, a {job} "
               f"from {origin}. The first settlers built their houses along the {river} river, which still floods "
               f"the lower streets every few years. Today about {rng.randint(2, 60)} thousand people live there.")
    economy = (f"The main trade of {town} has long been {trade}. Every {season} the town holds a large market in "
               f"which traders from all over {region} buy and sell. The largest employer is the {company} company, "
               f"which has {workers} workers and a warehouse near the {place}.")
    landmarks = (f"The oldest building in {town} is the {landmark}, built from {material}. It stands close to the "
                 f"{place} and is {height} meters tall. Visitors often climb it on clear days to look out over "
                 f"the valley of the {river}.")
    return town, [
        (history, [(f"When was {town} founded?", year), (f"Who founded {town}?", founder),
                   (f"Along which river did the first settlers of {town} build their houses?", river)]),
        (economy, [(f"What is the main trade of {town}?", trade), (f"In which season does {town} hold its market?",
                                                                     season),
                   (f"How many workers does the {company} company have?", workers)]),
        (landmarks, [(f"What is the oldest building in {town}?", landmark),
                     (f"What material was the {landmark} built from?", material)]),
    ]


@functools.lru_cache(maxsize=2)
def builtin_squad(n_articles: int = 400) -> QASource:
    """SQuAD-shaped built-in data: paragraphs about made-up towns, one-paragraph questions."""
    rng = random.Random("ctxlens.tasks.qa:squad")
    names = _Names(rng)
    docs: list[str] = []
    qas: list[QA] = []
    articles: list[tuple[list[int], list[tuple[str, list[tuple[str, str]]]]]] = []  # (doc ids, _town's paragraphs)
    for _ in range(n_articles):
        _, paragraphs = _town(rng, names)
        ids = list(range(len(docs), len(docs) + len(paragraphs)))
        docs.extend(p for p, _ in paragraphs)
        articles.append((ids, paragraphs))
    for ids, paragraphs in articles:
        for gold, (_, questions) in zip(ids, paragraphs):
            for q, a in questions:
                qas.append(QA(q, [a], [gold], [d for d in ids if d != gold], [gold]))
    rng.shuffle(qas)
    return QASource("squad:builtin", docs, qas)


@functools.lru_cache(maxsize=2)
def builtin_hotpotqa(n_people: int = 600) -> QASource:
    """HotpotQA-shaped built-in data: two-hop questions over a person's and a town's documents."""
    rng = random.Random("ctxlens.tasks.qa:hotpotqa")
    names = _Names(rng)
    docs: list[str] = []
    pairs = []
    for _ in range(n_people):
        person, town, river = f"{names(2)} {names()}", names(), names(2)
        job, year = rng.choice(_JOBS), str(rng.randint(1100, 1899))
        born = str(rng.randint(1700, 1990))
        docs.append(f"{person}\n{person} was a {job} born in {town} in {born}. {person} later moved abroad "
                    f"and became known for work on {rng.choice(_TRADES)}.")
        docs.append(f"{town}\n{town} is a town on the {river} river. It was founded in {year} and is known for "
                    f"its {rng.choice(_MATERIALS)} {rng.choice(_BUILDINGS)}.")
        pairs.append((len(docs) - 2, len(docs) - 1, person, river, year))
    qas = []
    for p_doc, t_doc, person, river, year in pairs:
        others = rng.sample([d for d in range(len(docs)) if d not in (p_doc, t_doc)], 8)
        if rng.random() < 0.5:
            q, a = f"On which river lies the town where {person} was born?", river
        else:
            q, a = f"In which year was the birthplace of {person} founded?", year
        ctx = [p_doc, t_doc, *others]
        rng.shuffle(ctx)
        qas.append(QA(q, [a], ctx, [], [p_doc, t_doc]))
    return QASource("hotpotqa:builtin", docs, qas)
