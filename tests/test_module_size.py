"""Rooms that fit (issue 46, part 5): no module of ``src/ctxlens`` is over ``MAX_LINES`` lines.

A module that grows past the limit is split along the seams it already has (one module per command
group, per step of a procedure), not trimmed by packing lines; the failure lists every offender
with its length.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import SRC

MAX_LINES = 400
EXEMPT: set[str] = set()  # ctxlens/findings/positional.py: split into positional.py and masking.py (issue 46, part 2)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def offenders(src: Path = SRC, limit: int = MAX_LINES, exempt: set[str] = EXEMPT) -> list[str]:
    """``path: N lines`` for each module under ``src/ctxlens`` longer than ``limit``, longest first."""
    found = [(lines(p), p.relative_to(src).as_posix()) for p in sorted((src / "ctxlens").rglob("*.py"))]
    return [f"{name}: {n} lines" for n, name in sorted(found, reverse=True) if n > limit and name not in exempt]


def test_no_module_is_over_the_limit():
    found = offenders()
    assert not found, f"modules over {MAX_LINES} lines (split them along their seams):\n" + "\n".join(found)


def test_the_exemptions_are_still_needed():
    """An exempt module that has come under the limit (or gone) leaves the list."""
    stale = [name for name in EXEMPT if not (SRC / name).is_file() or lines(SRC / name) <= MAX_LINES]
    assert not stale, f"exempt modules now within {MAX_LINES} lines or gone; remove them from EXEMPT: {stale}"


def test_an_offender_is_named_with_its_length(tmp_path):
    (tmp_path / "ctxlens" / "sub").mkdir(parents=True)
    (tmp_path / "ctxlens" / "small.py").write_text("x = 1\n" * 3)
    (tmp_path / "ctxlens" / "sub" / "big.py").write_text("x = 1\n" * 5)
    (tmp_path / "ctxlens" / "sub" / "bigger.py").write_text("x = 1\n" * 6)
    assert offenders(tmp_path, limit=4, exempt=set()) == ["ctxlens/sub/bigger.py: 6 lines",
                                                         "ctxlens/sub/big.py: 5 lines"]
    assert offenders(tmp_path, limit=4, exempt={"ctxlens/sub/big.py"}) == ["ctxlens/sub/bigger.py: 6 lines"]
