"""What an experiment is: its declaration, a typed config, a plan of keyed units, the rows of one unit.

An experiment is one module with a ``Config`` dataclass, two functions and one declaration:

- ``plan(config) -> list[Unit]``: the coordinates of every unit (length, sample, layer, ...),
  known without loading a model, so a finished run resumes without loading anything;
- ``run(lm, config, unit, cache) -> list[Row]``: the measurements of one unit, one row each.
  ``cache`` (a ``Cache``) is a dict kept per model, for inputs shared by units (tokenised windows, ...).
  ``lm`` is the loaded ``LM``, or the model spec string when ``loads_model`` is False;
- optionally ``defaults(info, config, given, extrapolate) -> Defaults``: the options that depend
  on the model (``ctxlens.lm.info.ModelInfo``: its positions, training length, width, whether it
  is a zoo model) for those the user did not give (``given``); the runner resolves them per
  model from its config before loading, records them in ``config.yaml`` (``resolved``) and plans
  with them, so a resume plans the same units without reading the model again;
- optionally ``work(config, unit) -> list[Work]``: the tokens a unit processes, for the plan and
  time estimate the runner prints before a run (without it: ``length`` x the config's sample
  count when the unit has a length);
- ``register(Experiment(...))`` at the bottom: everything else about it (the paper and section
  it implements, the columns of its rows with their types, units, meanings, ranges and allowed
  values (``columns=``, ``ctxlens.core.columns``: the runner checks every row against them; the
  readers read them through ``ctxlens.core.declared_names``), the analyses it needs,
  the small option set every test harness runs, the demo's
  steps). The demo suite, the report fixtures, the memory-growth and bad-input tests, the
  README's experiments table and ``ctxlens run NAME --help`` are all read from these
  declarations, so a new experiment is its module and its plotter (``ctxlens/report/plots``).

The runner adds ``model`` and ``experiment`` to every unit and every row.
"""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ctxlens.core import columns as contracts
from ctxlens.core.columns import Column
from ctxlens.core.options import make_config, positive  # noqa: F401  (re-exported)
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.core.zoo_facts import TRAIN_LENGTH

if TYPE_CHECKING:
    from ctxlens.lm.info import ModelInfo

C = TypeVar("C")  # an experiment's Config dataclass

RULER_LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)  # RULER's evaluation lengths


def lengths_that_fit(info: ModelInfo, candidates: Sequence[int], extrapolate: bool) -> list[int]:
    """The ``candidates`` the model's positions allow (all of them with ``extrapolate``, unless its
    positions are learned); when none does, its training length and its half and quarter."""
    fit = [n for n in candidates if info.allows(n, extrapolate)]
    if fit:
        return fit
    top = info.train_length or info.max_positions or max(candidates)
    return sorted({max(1, top // 4), max(1, top // 2), top})


@dataclass(frozen=True)
class Work:
    """Tokens one unit processes: ``sequences`` forwards of ``length`` tokens and ``new_tokens``
    generated in all (greedy decoding after those prompts), ``batch`` sequences decoded together;
    ``pairs``: (query, key) pairs whose per-frequency RoPE contributions it computes, each at every
    attention layer and head (the rope-distance paper's dominant dimension and top pairs, Sections
    4.1-4.2; ``probes.dominant.query_key_pairs``), a cost of its own beside the forwards."""

    sequences: int
    length: int
    new_tokens: int = 0
    batch: int = 1
    pairs: int = 0
    decoded: float = 1.0  # the share of ``new_tokens`` decoded: below 1 where forced scoring proves answers

    @property
    def prompt_tokens(self) -> int:
        return self.sequences * self.length

    @property
    def decode_steps(self) -> int:
        """Decoding steps: each batch of ``batch`` sequences takes one step per token of one sequence."""
        if not self.new_tokens or not self.sequences:
            return 0
        batches = -(-self.sequences // max(1, self.batch))
        return math.ceil(self.decoded * batches * -(-self.new_tokens // self.sequences))


@dataclass(frozen=True)
class Defaults:
    """What an experiment's ``defaults`` hook fills from the model: option values (only options
    the user did not give) and one-line notes saying why, printed with the plan."""

    values: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Smoke:
    """Small, fast options of one experiment, for the test harnesses.

    ``options``: what the report fixtures are made with (``tests/report/make_fixtures.py`` passes
    them as the command line would, on two tiny random llamas, or on ``fixture_model`` for an
    experiment that trains its own) and what the bad-input fuzz starts from.
    ``at_length(L)``: options that measure windows of L tokens, for the memory-growth test
    (``tests/test_memory_growth.py``); ``None`` with ``unmeasured`` saying why it cannot scale.
    ``every_layer``: ``at_length`` captures every layer, so memory is also compared at 2 and 8 layers.
    """

    options: dict
    at_length: Callable[[int], dict] | None = None
    unmeasured: str = ""
    every_layer: bool = False
    fixture_model: str = ""


@dataclass(frozen=True)
class DemoStep:
    """One run of ``ctxlens demo``, into ``DIR/RUN`` (``run`` defaults to the experiment's name).

    ``models``: ``"zoo"`` every available zoo model, ``"rope"`` the RoPE zoo model only, ``"own"``
    none (the experiment trains its own). ``full``/``quick``: the options of the full and the
    quick suite (``quick=None``: left out of the quick suite). ``controls``: the zoo names whose
    untrained copies the full suite runs it on too (those a finding's control needs)."""

    models: typing.Literal["zoo", "rope", "own"]
    full: dict
    quick: dict | None = None
    controls: tuple[str, ...] = ()
    model_options: dict = field(default_factory=dict)
    run: str = ""


@dataclass(frozen=True)
class Experiment(Generic[C]):
    """An experiment's declaration: its procedure (``Config``, ``plan``, ``run``) and everything
    the registry's readers need (paper, smoke options, demo steps); see the module docstring.
    Generic over its ``Config``: ``plan``, ``run`` and ``work`` take that config."""

    name: str
    Config: type[C]
    plan: Callable[[C], list[Unit]]
    # run(lm, config, unit, cache): ``lm`` is the loaded LM, or the model spec when ``loads_model`` is False
    # (Any here: each procedure's ``run`` annotates which one it takes, ``lm: LM`` or ``lm: str``)
    run: Callable[[Any, C, Unit, Cache], list[Row]]
    _: KW_ONLY
    paper: str  # id in ctxlens.core.papers.PAPERS; "" for the core's own smoke analysis
    section: str  # where in that paper: "Section 4, Figure 1"
    smoke: Smoke
    demo: tuple[DemoStep, ...]
    # the columns of its rows: its plan's unit coordinates and what ``run`` writes (ctxlens.core.columns);
    # ``register`` refuses a declaration without them
    columns: tuple[Column, ...] = ()
    needs: tuple[str, ...] = ()  # analyses the model's family must support
    doc: str = ""  # one line: what it measures
    # Experiments that build and train their own small models (sparse parity) take the model
    # spec as a string instead of a loaded LM; ``default_models`` is used when --model is absent.
    loads_model: bool = True
    default_models: tuple[str, ...] = ()
    # model-dependent defaults and the tokens of a unit (see the module docstring)
    defaults: Callable[[ModelInfo, C, frozenset[str], bool], Defaults] | None = None
    work: Callable[[C, Unit], list[Work]] | None = None

    @functools.cached_property
    def declared(self) -> dict[str, Column]:
        """name -> Column of every column its rows may carry (``columns`` and the runner's own)."""
        return contracts.declared(self.columns, self.name)


def summary(module_doc: str) -> str:
    """The first line of an experiment module's docstring without its ````name``: `` prefix."""
    first = module_doc.strip().splitlines()[0]
    return first.split(": ", 1)[1] if first.startswith("``") and ": " in first else first


# ------------------------------------------------------------------------------- demo option groups
# Shared by several declarations' demo steps; sizes are chosen for time alone (ctxlens.demo).
T = TRAIN_LENGTH  # the zoo's training length, short name in the demo steps' options
DEMO_GEOMETRY = {"source": "builtin:test", "suffix_len": 32, "batch_size": 8}
DEMO_TASK = {"batch_size": 8}
DEMO_ROPE = {"source": "builtin:test", "train_length": TRAIN_LENGTH}
EXTRAPOLATE = {"allow_extrapolation": True}  # model option: lengths beyond the configured positions
SMOKE_SEQUENCES = {"source": "random", "n_sequences": 2, "batch_size": 2, "suffix_len": 32}  # memory-growth test
