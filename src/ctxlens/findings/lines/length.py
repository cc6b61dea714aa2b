"""The card's first line: L, and how it stands to the model's training length."""

from __future__ import annotations

from ctxlens.findings.card import Context, Line, card_line


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
