"""Needle depth: explicit, placed at the sentence/line boundary nearest the target, recorded exactly.

Truth: with the byte tokenizer a token offset is a byte offset, so the test finds each needle in
the prompt text and recomputes its offset and its depth in the haystack from string positions.
"""

from __future__ import annotations

import numpy as np
import pytest

from ctxlens.tasks import generate
from ctxlens.tasks.qa import weighted_depth

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
DEPTHS = [0, 10, 25, 50, 75, 90, 100]


def _haystack_span(s):
    """Byte span of the context (between the template text before and after it)."""
    before = s.input.index("afterwards.\n") + len("afterwards.\n")
    after = s.input.rindex("\nWhat ")
    return before, after


@pytest.mark.parametrize("haystack", ["noise", "essay", "needle"])
def test_single_needle_sits_at_the_boundary_nearest_each_depth(haystack, byte_tok):
    sep = " " if haystack == "essay" else "\n"
    for depth in DEPTHS:
        (s,) = generate("niah_single_1", byte_tok, 4096, 1, seed=depth, cache=False,
                        options={"type_haystack": haystack, "depths": [depth], "haystack_source": "builtin"})
        needle = f"One of the special magic numbers for {s.meta['keys'][0]} is: {s.meta['values'][0][0]}."
        at = s.prompt.index(needle)
        (d,) = s.depths
        assert d["target_percent"] == depth
        assert d["tokens"] in (at, at - len(sep))  # byte offset == token offset; a leading separator may count
        a, b = _haystack_span(s)
        before, rest = s.prompt[a:at], s.prompt[at + len(needle):b]
        # at a boundary: first or last, or haystack separators on both sides (after a sentence end in prose)
        assert before == "" or before.endswith(sep)
        assert rest == "" or rest.startswith(sep)
        if haystack == "essay" and before:
            assert before.rstrip()[-1] in ".!?\"')"
        # nearest boundary: off the target by at most half the longest haystack unit
        hay = before + rest[len(sep):] if before and rest else before + rest
        units = hay.split(sep) if haystack != "essay" else hay.replace(". ", ".\x00").split("\x00")
        target = depth / 100 * len(hay)
        assert abs(len(before) - target) <= max(map(len, units)) / 2 + 2
        assert d["percent"] == pytest.approx(100 * len(before) / len(hay), abs=0.1)


def test_depth_zero_and_hundred_are_first_and_last(byte_tok):
    """Depth 100 is after every whole sentence; only a cut-off last sentence may follow the needle."""
    for depth, first in ((0, True), (100, False)):
        (s,) = generate("niah_single_2", byte_tok, 2048, 1, cache=False, options={"depths": [depth]})
        a, b = _haystack_span(s)
        body = s.prompt[a:b]
        needle = f"One of the special magic numbers for {s.meta['keys'][0]} is: {s.meta['values'][0][0]}."
        if first:
            assert body.startswith(needle) and s.depths[0]["percent"] == 0.0
        else:
            tail = body[body.index(needle) + len(needle):]
            assert tail == "" or (tail.startswith(" ") and not any(c in tail for c in ".!?"))
            assert s.depths[0]["percent"] > 98


def test_default_depths_come_from_rulers_grid_and_are_paired_across_lengths(byte_tok):
    from ctxlens.tasks.niah import DEPTHS as GRID

    short = generate("niah_multikey_1", byte_tok, 2048, 3, seed=4, cache=False)
    long = generate("niah_multikey_1", byte_tok, 4096, 3, seed=4, cache=False)
    for a, b in zip(short, long):
        assert [d["target_percent"] for d in a.depths] == [d["target_percent"] for d in b.depths]
        assert all(d["target_percent"] in GRID for d in a.depths)
        assert a.outputs == b.outputs and a.meta["keys"] == b.meta["keys"]
        assert len({d["target_percent"] for d in a.depths}) == 4  # drawn without replacement
        assert a.id != b.id and a.id.endswith("/s4/" + str(a.index))


def test_vt_chain_lines_are_in_order_with_recorded_depths(byte_tok):
    (s,) = generate("vt", byte_tok, 4096, 1, seed=7, cache=False)
    main = s.prompt.split("Memorize and track")[-1]
    offsets = [s.prompt.rindex(f"VAR {v} = ") for v in s.outputs]
    assert offsets == sorted(offsets) and all(o > len(s.prompt) - len(main) for o in offsets)
    assert [d["tokens"] for d in s.depths] == offsets
    assert all(d["target_percent"] is None for d in s.depths)  # RULER's rule: on random noise lines
    percents = [d["percent"] for d in s.depths]
    assert percents == sorted(percents)


def test_weighted_depth_is_the_inverse_cdf_of_the_position_law():
    """x = distance to the end as a fraction of L has density (gamma+1)(1-x)^gamma on [0, 1]."""
    grid = np.linspace(0, 1, 200001)
    for gamma in (0.0, 0.5, 1.0, 4.0):
        density = (gamma + 1) * (1 - grid) ** gamma
        cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2 * np.diff(grid))])
        for u in (0.05, 0.3, 0.5, 0.8, 0.99):
            x = float(np.interp(u, cdf, grid))
            assert weighted_depth(u, gamma) == pytest.approx(100 * (1 - x), abs=1e-3)


def test_position_weighted_qa_places_the_golden_document_near_the_end(byte_tok):
    far = generate("qa_1", byte_tok, 8192, 12, seed=0, cache=False, options={"gamma": 0.0})
    near = generate("qa_1", byte_tok, 8192, 12, seed=0, cache=False, options={"gamma": 8.0})
    golden = lambda s: next(d for d in s.depths if d["answer"])  # noqa: E731
    mean = lambda batch: np.mean([golden(s)["percent"] for s in batch])  # noqa: E731
    assert mean(near) > 80 > mean(far)
    for s in near:
        start = golden(s)["tokens"]
        doc = s.prompt[start:].split("\n\n")[0]
        assert doc.startswith("Document ") and s.meta["question"]
