"""The shapes of ``profile.json`` (the record of ``ctxlens profile``) as ``TypedDict``s, so that mypy checks
every key the profile package reads or writes (issue 46: typed boundaries).

They state what ``ctxlens.core.schema.PROFILE`` declares, key for key: a key the schema requires is
required here, every other key is optional (the ``total=False`` class beside each ``...Required`` base);
``tests/test_profile_record_types.py`` walks both and fails when they name different keys. The JSON on
disk and its validation are the schema's (``ctxlens.profile.record.read_record``); these types add no
check at run time. Null: the types say ``| None`` where ctxlens itself writes null (a part's ``error``,
the load averages, what the model or the setup does not state), so mypy asks every reader there to
handle it; the schema declares the same keys ``nullable`` and refuses null anywhere else in the record
(a hand-edited ``"spent_s": null`` once passed it and failed where it was read, with a TypeError).
An experiment's ``options`` map names to values of the kinds its own ``Config`` reads
(``core.options.make_config`` checks them), so their values stay ``Any``.

Nothing here imports the rest of the package: every module of it may import these.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Options = dict[str, Any]  # an experiment's options: each value of the kind its Config field reads
Status = Literal["planned", "done", "failed", "left out"]


class Provenance(TypedDict, total=False):
    """What a part measures with (``schema.SETUP``; ``profile.provenance``): short text, null where unknown."""

    weights: str | None
    tokenizer: str | None
    dtype: str | None
    device: str | None
    attention: str | None
    transformers: str | None
    torch: str | None


class InfoRequired(TypedDict):
    model_type: str


class InfoRecord(InfoRequired, total=False):
    """What the model is (``schema.MODEL_INFO``): ``lm.info.ModelInfo.as_dict()``."""

    kind: str | None
    position: str | None
    max_positions: int | None
    hard_limit: bool
    train_length: int | None
    sliding_window: int | None
    d_model: int | None
    origin: str
    weights: dict[str, object] | None
    zoo: bool


class ThroughputRequired(TypedDict):
    prefill: float
    at: int
    slope: float
    decode: float
    seconds: float


class ThroughputRecord(ThroughputRequired, total=False):
    """The probe's pace (``schema.THROUGHPUT``): ``probes.throughput.Throughput`` as a mapping."""

    pair: float  # since the probe times (query, key) pairs


class SizeRequired(TypedDict):
    length: int
    scale: float


class SizeRecord(SizeRequired, total=False):
    """The fitted size (``schema.SIZE``): ``profile.suite.Size.as_dict()``."""

    extrapolate: bool
    reduced: list[str]
    tokenizer: bool
    counts: dict[str, dict[str, int]]  # {suite part: {planned option: n}}
    reserve_s: float
    source: str


class PartRequired(TypedDict):
    name: str
    experiment: str
    status: Status
    planned_s: float
    options: Options


class PartRecord(PartRequired, total=False):
    """One part of a model's plan (``schema.PART``): ``profile.planning.part_record`` and what its run adds."""

    model_options: dict[str, bool]  # allow_extrapolation only (``record.PART_MODEL_OPTIONS``)
    units: int
    tokens: int
    estimate_s: float
    notes: list[str]
    error: str | None
    spent_s: float
    top_up: bool
    running_since: float
    redo: int
    code: str
    sequential: bool
    looks: int
    round_from_s: float
    units_before: int
    provenance: Provenance


class ModelRequired(TypedDict):
    label: str
    info: InfoRecord


class ModelState(ModelRequired, total=False):
    """One model's part of the record (``schema.STATE``): its info, throughput, size and plan."""

    throughput: ThroughputRecord
    setup_s: float
    load_average: list[float] | None
    load_average_after: list[float] | None
    size: SizeRecord
    notes: list[str]
    skipped: dict[str, str]
    left_out: dict[str, str]
    adjustments: list[str]
    parts: list[PartRecord]
    spent_s: float
    provenance: Provenance


class ProfileRequired(TypedDict):
    budget_minutes: float
    models: dict[str, ModelState]


class ProfileRecord(ProfileRequired, total=False):
    """``profile.json`` (``schema.PROFILE``), its version (``schema.VERSION_KEY``) as read back."""

    schema: int
    length: int
    source: str
