"""What the commands of ``ctxlens`` share: a plain-text table, one-line and terminal-safe text, and the
``--name value`` experiment and task options argparse leaves over."""

from __future__ import annotations

from ctxlens.core.errors import CtxlensError


def table(rows: list[dict]) -> str:
    cols = list(rows[0])
    cells = [[("yes" if v is True else "-" if v is False else str(v)) for v in r.values()] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return "\n".join([line(cols), *(line(r) for r in cells)])



def safe(text: str) -> str:
    """``text`` line by line through ``core.terminal.printable`` (escape sequences, backspaces and
    bidirectional overrides written out, newlines kept)."""
    from ctxlens.core.terminal import printable

    return "\n".join(printable(line) for line in text.split("\n"))



def one_line(message: str) -> str:
    """Control characters from user input (a newline in an option name) never break the line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)



def experiment_options(extra: list[str]) -> dict[str, str]:
    """``--name value`` / ``--flag`` pairs left over by argparse -> {name: value}."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or len(tok) < 3:
            raise CtxlensError(f"Unexpected argument '{tok}'; experiment options are given as --name value.")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
                value, i = extra[i + 1], i + 1
            else:
                value = "true"
        key = name.replace("-", "_")
        if key in opts:
            raise CtxlensError(f"Option --{name} is given twice ({opts[key]!r:.40} and {value!r:.40}); give it once.")
        opts[key] = value
        i += 1
    return opts
