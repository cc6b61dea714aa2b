"""The card's first line: L, and how it stands to the model's training length."""

from __future__ import annotations

from ctxlens.findings.card import Context, Line, card_line
from ctxlens.findings.setups import short_digest


@card_line("length", "L, the length the lines are read at", "the profile (`ctxlens profile`)",
           "the training length; the papers read their findings there", order=0)
def length(ctx: Context) -> Line:
    return length_line(ctx.model, ctx.L, ctx.info)


def length_line(model: str, L: int, info: dict | None) -> Line:
    """L, and how it stands to the model's training length (a profile capped by its budget, or
    set by ``--length``, measures at less than the papers do)."""
    trained = (info or {}).get("train_length")
    if not isinstance(trained, int) or trained <= 0:
        return Line("length", model, L, f"{L} tokens", "", "the training length is not recorded", {"L": L})
    verdict = ("the training length" if L == trained else f"below the training length ({trained}): lines at L and "
               f"2L are read at {L} and {2 * L}" if L < trained else f"beyond the training length ({trained})")
    return Line("length", model, L, f"{L} tokens", f"training length {trained}", verdict,
                {"L": L, "train_length": trained})


WEIGHT_FIELDS = ("format", "quantization", "file", "digest")


@card_line("weights", "which weights the rows were measured on", "the run's record (config.yaml)",
           "format, quantisation, file and digest of the weights", order=0.5)
def weights(ctx: Context) -> Line:
    return weights_line(ctx.model, ctx.info)


def weights_line(model: str, info: dict | None) -> Line:
    """The weights the rows come from: format (GGUF, safetensors, zoo, hub), quantisation, file and
    digest, as the runner recorded them at load (``ModelInfo.weights``); ctxlens's fingerprint of the
    weights (``config.yaml``'s ``fingerprints``) beside them; "not recorded" for what a run lacks."""
    recorded = (info or {}).get("weights") or {}
    fields = {k: recorded.get(k) for k in WEIGHT_FIELDS}
    fingerprint = (info or {}).get("fingerprint")
    shown = [f"{k} {v if v else 'not recorded'}" for k, v in (
        ("format", fields["format"]), ("quantisation", fields["quantization"]), ("file", fields["file"]),
        ("digest", short_digest(fields["digest"]) if fields["digest"] else None))]
    text = "; ".join(shown)
    several = len(fingerprint.split(" + ")) if fingerprint else 0
    note = (f"ctxlens fingerprints {fingerprint} (its runs record {several}: an earlier ctxlens's scheme, or weights "
            "converted or changed between runs)" if several > 1 else
            f"ctxlens fingerprint {fingerprint}" if fingerprint else "ctxlens fingerprint not recorded")
    missing = [k for k, v in fields.items() if not v]
    verdict = ("recorded at load" if not missing else
               "the run predates the weights record: re-run a part to record them" if len(missing) == 4 else
               f"not recorded: {', '.join(missing)}")
    return Line("weights", model, None, text, note, verdict, {**fields, "fingerprint": fingerprint})
