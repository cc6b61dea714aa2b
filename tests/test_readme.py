"""The experiments table in ``docs/experiments.md`` is the registry's: ``ctxlens experiments --markdown`` writes it.

(The table moved from the README to ``docs/experiments.md`` when the README became a front door: issue 46.)"""

from pathlib import Path

from ctxlens.cli import main
from ctxlens.experiments.catalog import MARK_BEGIN, MARK_END
from ctxlens.experiments.registry import experiments

EXPERIMENTS_DOC = Path(__file__).parents[1] / "docs" / "experiments.md"


def test_the_docs_experiments_table_is_generated_from_the_registry(capsys):
    text = EXPERIMENTS_DOC.read_text()
    assert text.count(MARK_BEGIN) == text.count(MARK_END) == 1
    in_docs = text[text.index(MARK_BEGIN):text.index(MARK_END) + len(MARK_END)]
    assert main(["experiments", "--markdown"]) == 0
    generated = capsys.readouterr().out.strip()
    assert in_docs == generated, ("docs/experiments.md table is stale; paste the output of "
                                  "`ctxlens experiments --markdown`")
    # and the table names every registered experiment once, in a row of its own
    rows = [line for line in in_docs.splitlines() if line.startswith("| `") and line.count("|") == 5]
    assert sorted(r.split("`")[1] for r in rows) == sorted(experiments())
