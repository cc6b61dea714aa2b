"""The card's lines, one module per paper side, each line registered with
``ctxlens.findings.card.card_line`` (discovered: a new module here is a new group of lines)."""
