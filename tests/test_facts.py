"""Facts defined once: the zoo (``ctxlens.core.zoo_facts``) and the papers (``ctxlens.core.papers``).

Every other module reads them. The truths here are independent of those modules: the family
adapters (``ctxlens.lm.families``) for what each zoo model is, the shipped checkpoints' training
records for the length they were trained at, and the source itself for where a fact is written.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

from ctxlens.core.papers import PAPERS, RULER_TASKS, cite, heading, named
from ctxlens.core.zoo_facts import TRAIN_LENGTH, ZOO_MODELS, ZOO_NAMES

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxlens"
SHIPPED = SRC / "zoo" / "checkpoints"


# ------------------------------------------------------------------------------- the zoo
def test_the_zoo_specs_give_every_zoo_model_one_architecture():
    from ctxlens.zoo.specs import SPECS, ZOO

    assert sorted(s.name for s in SPECS) == sorted(ZOO_NAMES)  # one spec per name, no other
    assert list(ZOO) == list(ZOO_NAMES)


def test_what_each_zoo_model_is_agrees_with_its_family_adapter():
    from ctxlens.lm.families import FAMILIES

    for model in ZOO_MODELS.values():
        family = FAMILIES[model.family]
        assert (model.kind, model.position) == (family.kind, family.position), model.name


def test_the_recipe_and_the_shipped_checkpoints_train_at_the_zoo_length():
    from ctxlens.zoo.specs import RECIPE

    assert RECIPE.seq_len == TRAIN_LENGTH
    records = {p.parent.name: json.loads(p.read_text()) for p in SHIPPED.glob("*/zoo.json")}
    for name, record in records.items():
        assert record["recipe"]["seq_len"] == TRAIN_LENGTH, name
        assert record["family"] == ZOO_MODELS[name].family, name


def test_findings_describe_the_zoo_from_the_facts():
    from ctxlens.findings import ZOO_INFO

    assert list(ZOO_INFO) == list(ZOO_NAMES)
    assert all(ZOO_INFO[m.name]["model_type"] == m.family and ZOO_INFO[m.name]["train_length"] == TRAIN_LENGTH
               for m in ZOO_MODELS.values())


# ------------------------------------------------------------------------------- the papers
def test_citations_in_their_three_forms():
    title = "On the token distance modeling ability of higher RoPE attention dimension"
    assert cite("rope-distance", "Section 4.1") == f"{title} (Section 4.1)"
    assert named("rope-distance", "Section 4.1") == f"the RoPE-distance paper, {title}, Section 4.1"
    assert heading("rope-distance") == f"{title}."  # a caption's first sentence gets its full stop ...
    question = "How Well Can a Long Sequence Model Model Long Sequences?"
    assert heading("long-sequence") == question  # ... unless the title is a question


# ------------------------------------------------------------------------------- defined once
def _constants(tree: ast.AST) -> list[ast.AST]:
    """Every literal of ``tree`` but docstrings."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if id(n) not in docs]


def _strings(node: ast.AST) -> set[str] | None:
    """The strings of a tuple/list/set literal (or a dict literal's keys) made of strings only."""
    items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
    if isinstance(node, ast.Dict | ast.Tuple | ast.List | ast.Set) and items:
        if all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
            return {i.value for i in items}
    return None


def _defines_train_length(node: ast.AST) -> bool:
    """``NAME = 512`` / ``name: int = 512`` for a name that says it is a length."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    value = getattr(node, "value", None)
    named_length = any(isinstance(t, ast.Name) and ("LENGTH" in t.id.upper() or t.id == "seq_len") for t in targets)
    return named_length and isinstance(value, ast.Constant) and value.value == TRAIN_LENGTH


def _facts_written_in(path: Path) -> list[str]:
    titles = {p.title for _, p in PAPERS.items()}
    found = []
    for node in _constants(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.rstrip(".") in titles:
            found.append("a paper's title")
        strings = _strings(node)
        if strings == set(ZOO_NAMES):
            found.append("the zoo's names")
        if strings == set(RULER_TASKS):
            found.append("RULER's tasks")
        if strings == {p.seed for _, p in PAPERS.items()}:
            found.append("the papers by seed number")
        if _defines_train_length(node):
            found.append("the zoo's training length")
    return found


# Known copies still to move (each names its file and why it is left): the list only shrinks; now empty.
LEFT: dict[str, list[str]] = {}


def test_each_fact_is_written_once_in_the_source():
    homes = {SRC / "core" / "papers.py", SRC / "core" / "zoo_facts.py"}
    found = {str(p.relative_to(SRC)): f for p in sorted(SRC.rglob("*.py")) if p not in homes
             if (f := _facts_written_in(p))}
    assert found == LEFT, f"facts written outside ctxlens.core.papers / ctxlens.core.zoo_facts: {found}"
    # the homes hold them in forms the check sees (the zoo's names are ZooModel records there)
    assert {f for p in homes for f in _facts_written_in(p)} >= {"a paper's title", "RULER's tasks",
                                                                "the zoo's training length"}


def test_the_source_check_finds_a_fact_written_again(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""How Well Can a Long Sequence Model Model Long Sequences? (a docstring may cite it)"""\n'
                       'NAMES = ("rope", "alibi", "mamba2", "mlstm", "griffin", "hybrid")\n'
                       'CAPTION = "Intrinsic Entropy of Context Length Scaling in LLMs."\n'
                       'ZOO_LENGTH = 512\n'
                       'PAPERS = {"000": "a", "001": "b", "002": "c", "003": "d"}\n')
    assert sorted(_facts_written_in(planted)) == ["a paper's title", "the papers by seed number",
                                                  "the zoo's names", "the zoo's training length"]
