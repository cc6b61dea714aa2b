"""Which models a finding is about: kind, position encoding and training length, read from the runs.

The runner records what each model is in its run's ``config.yaml`` (``model_info``: the
``ctxlens.lm.info.ModelInfo`` of the model as a plain dict: ``kind`` transformer | ssm | recurrent |
hybrid, ``position`` rope | alibi | learned | none, ``train_length``, ``max_positions``,
``hard_limit``, ``sliding_window``, ...). ``recorded_infos`` reads those dicts without torch. A run
directory written before that record existed falls back to the zoo's own description for a zoo
name (``ZOO_INFO``, the six matched models of the geometry paper, Section 3, Table 1), and to
nothing otherwise: a finding then says "not applicable: the model's kind is not recorded".

A finding states the models it applies to as a ``Rule``: a test on that dict which gives None
when the finding applies, else the reason it does not, in words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ctxlens.core.zoo_facts import TRAIN_LENGTH, ZOO_MODELS, ZooModel

if TYPE_CHECKING:
    from ctxlens.results import Run

NOT_RECORDED = "the model's kind is not recorded (a run from before ctxlens recorded model info; run it again)"


def _zoo(model: ZooModel) -> dict:
    return {"model_type": model.family, "kind": model.kind, "position": model.position, "train_length": TRAIN_LENGTH,
            "max_positions": None, "hard_limit": False, "sliding_window": None, "origin": "zoo", "zoo": True}


# The zoo's models as ModelInfo would record them (what ctxlens.core.zoo_facts says each is).
ZOO_INFO = {name: _zoo(model) for name, model in ZOO_MODELS.items()}

Rule = Callable[[dict], "str | None"]


def recorded_infos(runs: Iterable[Run]) -> dict[str, dict]:
    """{model spec: its recorded ModelInfo dict} from the ``config.yaml`` of ``runs`` (``Run``
    objects as ``ctxlens.results.read_runs`` gives them); later runs win on a disagreement, but for
    the weights' ``fingerprint``: every distinct one the runs record, joined by " + " (a card once
    showed one of two fingerprints its parts carried)."""
    out: dict[str, dict] = {}
    prints: dict[str, list[str]] = {}
    for run in runs:
        config = getattr(run, "config", None) or {}
        infos = config.get("model_info")
        if isinstance(infos, dict):
            out.update({str(k): v for k, v in infos.items() if isinstance(v, dict)})
        recorded = config.get("fingerprints")
        for model, digest in (recorded.items() if isinstance(recorded, dict) else ()):
            if isinstance(digest, str) and digest not in prints.setdefault(str(model), []):
                prints[str(model)].append(digest)
    for model, digests in prints.items():
        if isinstance(out.get(model), dict) and digests:
            out[model] = {**out[model], "fingerprint": " + ".join(sorted(digests))}
    return out


def recorded_lengths(runs: Iterable[Run]) -> dict[str, int]:
    """{model spec: the length L a profile built its suite around} from the ``config.yaml`` of
    ``runs`` (``meta.profile_length``, which ``ctxlens profile`` writes into every part's run);
    models run outside a profile are absent."""
    out: dict[str, int] = {}
    for run in runs:
        config = getattr(run, "config", None) or {}
        meta = config.get("meta")
        length = meta.get("profile_length") if isinstance(meta, dict) else None
        if isinstance(length, int) and not isinstance(length, bool) and length > 0:
            out.update({str(m): length for m in config.get("models") or []})
    return out


def recorded_sequential(runs: Iterable[Run]) -> dict[str, frozenset[str]]:
    """{model spec: the experiments whose runs a profile declared sequential} (``meta.sequential`` in
    ``config.yaml``: its rounds may grow the run, so its lines test with anytime-valid tests); runs
    outside a profile, and profiles before rounds of continuous parts, declare none."""
    out: dict[str, set[str]] = {}
    for run in runs:
        config = getattr(run, "config", None) or {}
        meta = config.get("meta")
        if isinstance(meta, dict) and meta.get("sequential") is True:
            for m in config.get("models") or []:
                out.setdefault(str(m), set()).add(str(config.get("experiment")))
    return {m: frozenset(e) for m, e in out.items()}


def zoo_name(spec: str | None) -> str | None:
    """``rope`` for ``zoo:rope``; None for any other spec."""
    if isinstance(spec, str) and spec.startswith("zoo:") and spec[4:] in ZOO_INFO:
        return spec[4:]
    return None


def info_for(key: str, spec: str | None, recorded: dict[str, dict]) -> dict | None:
    """What the model behind ``key`` (a zoo name or a spec) is: the record of its run, else the zoo's
    description of a zoo name, else None (not known)."""
    if spec is not None and spec in recorded:
        return recorded[spec]
    name = key if key in ZOO_INFO else zoo_name(spec)
    return ZOO_INFO[name] if name else None


def train_length_of(info: dict | None, default: int = TRAIN_LENGTH) -> int:
    value = (info or {}).get("train_length")
    return int(value) if isinstance(value, int) and value > 0 else default


def describe(info: dict) -> str:
    """'transformer / rope, trained at 512' (what the applicability notes say)."""
    kind = "/".join(str(p) for p in (info.get("kind"), info.get("position")) if p) or "unknown kind"
    window = f", sliding window {info['sliding_window']}" if info.get("sliding_window") else ""
    length = f", trained at {info['train_length']}" if info.get("train_length") else ""
    return f"{kind}{length}{window}"


# ------------------------------------------------------------------------------- rules
def _kind(info: dict) -> str:
    return {"ssm": "an SSM", "recurrent": "a recurrent model", "hybrid": "a hybrid", "transformer": "a Transformer"
            }.get(str(info.get("kind")), "a model of unknown kind")


def any_model(info: dict) -> str | None:
    """Every architecture (the long-sequence paper tests Transformers, SSMs, linear RNNs and hybrids)."""
    return None if info.get("kind") else "its architecture kind is not known"


def rope_transformer(info: dict) -> str | None:
    """RoPE Transformers (the geometry paper's GPT+RoPE; local/global RoPE Transformers included)."""
    if info.get("kind") != "transformer":
        return f"{_kind(info)}, not a Transformer"
    return None if info.get("position") == "rope" else f"a Transformer with {info.get('position')} positions, not RoPE"


def has_rope(info: dict) -> str | None:
    """Any model whose attention heads rotate by RoPE (Transformers and hybrids with RoPE attention)."""
    return None if info.get("position") == "rope" else f"no RoPE: {info.get('position') or 'unknown'} positions"


def local_model(info: dict) -> str | None:
    """Recurrent models (SSMs, linear RNNs) and ALiBi Transformers (the geometry paper, Table 4)."""
    if info.get("kind") in ("ssm", "recurrent"):
        return None
    if info.get("kind") == "transformer" and info.get("position") == "alibi":
        return None
    return f"{describe(info)}: neither recurrent nor ALiBi"


def recurrent_hybrid(info: dict) -> str | None:
    """Hybrids of recurrence and attention (Griffin, HybridMamba in the geometry paper)."""
    return None if info.get("kind") == "hybrid" else f"{describe(info)}: not a recurrent/attention hybrid"


def reaches(multiple: int) -> Rule:
    """Every architecture whose positions reach ``multiple`` x its training length (learned
    absolute positions end at their table)."""
    def rule(info: dict) -> str | None:
        missing = any_model(info)
        if missing:
            return missing
        limit, length = info.get("max_positions"), train_length_of(info)
        if info.get("hard_limit") and isinstance(limit, int) and limit < multiple * length:
            return f"learned positions end at {limit} tokens, below {multiple} x its training length {length}"
        return None
    rule.__doc__ = f"every architecture whose positions reach {multiple} x its training length"
    return rule


def applicability(rule: Rule, info: dict | None) -> str | None:
    """None when ``rule`` applies to ``info``; else why not (``NOT_RECORDED`` without an info)."""
    return NOT_RECORDED if info is None else rule(info)


def keys_of(specs: Iterable[str]) -> dict[str, str]:
    """{key: spec} for specs found in rows: a zoo spec keyed by its zoo name, others by themselves."""
    return {zoo_name(s) or s: s for s in specs}
