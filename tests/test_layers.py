"""The import contract of DESIGN.md "Layers", checked on the source with ``ast``.

Every module of ``src/ctxlens`` is parsed and every import in it (module level or inside a
function) is checked against ``LAYERS``: a layer may import itself, ``core``, and what its
line names, and through those whatever they may import (downward only). Two more rules:
an experiment module imports no other experiment module (shared steps live in
``ctxlens.probes``), and the row readers (``report``, ``findings``, ``rows``) never import torch.
A failure lists each violation as ``module -> imported (rule)``.
"""

from __future__ import annotations

import ast
from pathlib import Path

# ---------------------------------------------------------------------------------- the contract
# layer: the layers it may import directly (every layer may import itself and core)
LAYERS = {
    "ctxlens": "lm zoo",  # the package root: lazy ctxlens.load (which registers the zoo's resolvers)
    "cli": "demo runner profile report findings zoo",  # the ctxlens.cli package, ctxlens.__main__
    "demo": "runner report findings zoo",
    "profile": "runner experiments findings",  # findings: the rounds of the needle grid read whether its lines decided
    "runner": "experiments zoo rows",
    "experiments": "probes tasks data metrics zoo",  # zoo: training code of the procedures that train their own models
    "probes": "tasks data metrics lm",
    "zoo": "lm data",  # plugs into lm as entry points (lm.specs.ENTRY_POINTS); lm never imports it
    "tasks": "data lm rows",
    "data": "lm",
    "metrics": "lm",
    "lm": "",
    "report": "findings rows",  # reads rows only (and computes the findings and the card from them)
    "findings": "rows",  # reads rows only
    "rows": "",  # the torch-free row readers and row-level summaries (MODULE_LAYERS)
    "core": "",
}
MODULE_LAYERS = {  # modules that sit in another layer than their package
    "ctxlens.__main__": "cli",
    "ctxlens.results": "rows",
    "ctxlens.row_access": "rows",  # rows in their current layout, read through the declared names
    "ctxlens.runner.store": "rows",
    "ctxlens.runner.lock": "rows",  # the run directory's writer lock, used by the store
    "ctxlens.runner.rundir": "rows",  # what a directory must be to be a run, its config.yaml read back (the store's)
    "ctxlens.runner.compression": "rows",  # an archived results file read back (the store's)
    "ctxlens.tasks.scoring": "rows",
}
NO_TORCH = {"report", "findings", "rows"}
TORCH = ("torch", "transformers", "accelerate")
EXPERIMENT_INFRA = {"ctxlens.experiments", "ctxlens.experiments.base", "ctxlens.experiments.columns",
                    "ctxlens.experiments.registry"}
EXPERIMENTS_IMPORTING_EXPERIMENTS: set[str] = set()  # none: what experiments share lives in ctxlens.probes

SRC = Path(__file__).resolve().parents[1] / "src"


# ---------------------------------------------------------------------------------- the checker
def allowed(layers: dict[str, str] = LAYERS) -> dict[str, set[str]]:
    """layer -> every layer it may import: itself, core, and the downward closure of its line."""
    direct = {layer: set(names.split()) for layer, names in layers.items()}
    closed = {}
    for layer in direct:
        seen, todo = {layer, "core"}, list(direct[layer])
        while todo:
            below = todo.pop()
            if below not in seen:
                seen.add(below)
                todo.extend(direct.get(below, ()))
        closed[layer] = seen
    return closed


def modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the ``ctxlens`` package under ``src``."""
    out = {}
    for path in sorted((src / "ctxlens").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def layer_of(module: str) -> str:
    if module in MODULE_LAYERS:
        return MODULE_LAYERS[module]
    parts = module.split(".")
    return "ctxlens" if len(parts) == 1 else parts[1]


def imports(module: str, path: Path, known: set[str]) -> list[str]:
    """Every module ``module`` imports, anywhere in the file; ``from a import b`` is ``a.b`` when that is a module."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                found.append(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found


def violations(src: Path = SRC) -> list[str]:
    """``module -> imported (rule)`` for every import that breaks the contract."""
    mods, may = modules(src), allowed()
    out = []
    for module, path in mods.items():
        layer = layer_of(module)
        for target in dict.fromkeys(imports(module, path, set(mods))):
            top = target.split(".")[0]
            if top in TORCH and layer in NO_TORCH:
                out.append(f"{module} -> {target} ({layer} reads rows only: no torch)")
            if top != "ctxlens":
                continue
            there = layer_of(target)
            if there not in may.get(layer, {layer, "core"}):
                out.append(f"{module} -> {target} ({layer} may import {', '.join(sorted(may[layer]))})")
            elif (layer == "experiments" and there == "experiments" and target not in EXPERIMENT_INFRA
                  and module not in EXPERIMENT_INFRA and module not in EXPERIMENTS_IMPORTING_EXPERIMENTS):
                out.append(f"{module} -> {target} (an experiment imports no other experiment; share it via probes)")
    return out


# ---------------------------------------------------------------------------------- the tests
def test_every_import_follows_the_layers():
    found = violations()
    assert not found, "imports against the layer contract (tests/test_layers.py):\n" + "\n".join(found)


def test_the_contract_names_every_package():
    packages = {layer_of(m) for m in modules(SRC)}
    assert packages <= set(LAYERS), f"layers missing from LAYERS: {sorted(packages - set(LAYERS))}"


def test_temporary_allow_list_only_holds_modules_that_exist():
    assert EXPERIMENTS_IMPORTING_EXPERIMENTS <= set(modules(SRC)) | EXPERIMENTS_IMPORTING_EXPERIMENTS


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "ctxlens" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_planted_wrong_way_import_is_caught(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "lm/__init__.py": "from ctxlens.core import errors\n",
        "lm/loading.py": "def resolve():\n    from ctxlens.zoo.registry import zoo_path  # hidden in a function\n",
        "zoo/__init__.py": "from ctxlens.lm import loading\n",
        "zoo/registry.py": "",
        "report/build.py": "import torch\nfrom ctxlens.experiments import base\n",
        "experiments/__init__.py": "",
        "experiments/base.py": "",
        "experiments/a.py": "from ctxlens.experiments.base import x\nfrom . import b\n",
        "experiments/b.py": "",
    })
    found = violations(src)
    assert "ctxlens.lm.loading -> ctxlens.zoo.registry (lm may import core, lm)" in found
    assert "ctxlens.report.build -> torch (report reads rows only: no torch)" in found
    assert any(v.startswith("ctxlens.report.build -> ctxlens.experiments.base (report may import") for v in found)
    assert "ctxlens.experiments.a -> ctxlens.experiments.b (an experiment imports no other experiment; " \
           "share it via probes)" in found
    assert len(found) == 4  # zoo -> lm and experiments -> base are allowed
