"""The text lines of SmolLM2-135M and Gemma-3-270M at L = 1024 on the synthetic corpus and on natural
text, side by side.

``reference/profile`` read ctxlens's synthetic corpus (``builtin``) for both models;
``reference/profile-sotu`` (SmolLM2) and ``reference/profile-gemma-sotu`` (Gemma-3) read the
natural-text source (``sotu``); all at L = 1024 on this project's 2-core CPU. Run from the repository
root: ``python reference/side_by_side.py`` prints the Markdown table docs/reference-profiles.md holds
(a test compares them). Each cell is the card line's own quantity and verdict, computed from the
committed rows.
"""

from __future__ import annotations

from pathlib import Path

from ctxlens.findings.card import card_of_runs, questions
from ctxlens.results import read_runs

ROOT = Path(__file__).resolve().parent
COLUMNS = {  # column heading -> (the profile's directory, the model)
    "SmolLM2, synthetic corpus (builtin)": (ROOT / "profile", "ref:smollm2-135m"),
    "SmolLM2, natural text (sotu)": (ROOT / "profile-sotu", "ref:smollm2-135m"),
    "Gemma-3, synthetic corpus (builtin)": (ROOT / "profile", "ref:gemma3-270m"),
    "Gemma-3, natural text (sotu)": (ROOT / "profile-gemma-sotu", "ref:gemma3-270m"),
}
KEYS = ("text", "loss_fit", "usable_context", "ppl_2l", "accs_depth", "accs_plateau", "positional_heads",
        "ce_entropy")


def table() -> str:
    models: dict[Path, list[str]] = {}  # each profile read once, its card made once for the models it shows
    for path, model in COLUMNS.values():
        models.setdefault(path, []).append(model)
    made = {path: card_of_runs(read_runs(path), names) for path, names in models.items()}
    cards = {name: {line.key: line for line in made[path][model]} for name, (path, model) in COLUMNS.items()}
    asked = questions()
    out = [f"| line | {' | '.join(COLUMNS)} |", "|---" * (len(COLUMNS) + 1) + "|"]
    for key in KEYS:
        cells = []
        for name in COLUMNS:
            line = cards[name][key]
            cells.append(f"**{line.text}**; {line.verdict}" if line.verdict else f"**{line.text}**")
        out.append(f"| {asked[key][0]} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table())
