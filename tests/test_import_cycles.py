"""No import circle in ``src/ctxlens``, and no private name imported across modules (issue 34),
both checked on the source with ``ast``.

The graph has one node per module and one edge per import anywhere in the file (module level,
inside a function, under ``if TYPE_CHECKING``): ``import a.b`` leads to the module ``a.b``;
``from a import b`` reads the namespace of ``a`` (its ``__init__`` for a package, and the names
it re-exports), so it leads to ``a``, and to ``a.b`` too when that is a module. The implicit
import of the parent packages of ``a.b`` is not an edge. A group of modules that reach each other
is a circle; a failure prints one cycle through each group. To break one, import from the module
that defines the name (``from a.b import name`` or ``import a.b as b``) instead of its package,
or move the shared piece down into a module both can import.

A name that starts with one underscore is private to its module: another module neither imports it
(``from a import _x``) nor reads it (``a._x`` after ``import a``); a helper that others need is a
public name of the module that owns it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import SRC, modules


def imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (the file ``path``) imports, anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return (found & known) - {module}


def graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the ``ctxlens`` modules it imports (no self-edges)."""
    mods = modules(src)
    return {m: imported(m, path, set(mods)) for m, path in mods.items()}


def groups(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        group.append(top)
                        if top == node:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(out)


def cycle(edges: dict[str, set[str]], group: list[str]) -> list[str]:
    """One cycle through the first module of ``group``, as ``[a, b, ..., a]`` (breadth-first)."""
    start, members = group[0], set(group)
    came: dict[str, str] = {}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for child in sorted(edges[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [*reversed(path), start]
            if child not in came:
                came[child] = node
                todo.append(child)
    return group


def circles(src: Path = SRC) -> list[str]:
    """``a -> b -> ... -> a`` for one cycle in each group of modules that import each other."""
    edges = graph(src)
    return [" -> ".join(cycle(edges, g)) for g in groups(edges)]


def private_imports(src: Path = SRC) -> list[str]:
    """``module:line imports owner._name`` for each private name one module takes from another."""
    mods = modules(src)
    out = []
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        aliases = {}  # local name -> the ctxlens module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    if base in mods and base != module and _private(alias.name):
                        out.append(f"{module}:{node.lineno} imports {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in mods})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and aliases.get(node.value.id, module) != module):
                out.append(f"{module}:{node.lineno} imports {aliases[node.value.id]}.{node.attr}")
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_imported_across_modules():
    found = private_imports()
    assert not found, "private names used outside their module (make them public there):\n" + "\n".join(found)


def test_a_planted_private_import_is_found(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "",
        "a.py": "_x = 1\ny = 2\n",
        "b.py": "from ctxlens.a import _x, y\n",
        "c.py": "def f():\n    from ctxlens import a as m\n    return m._x + m.y\n",
        "d.py": "import ctxlens.a as a\n_z = a.y\n__all__ = [_z.__class__]\n",
    })
    assert private_imports(src) == ["ctxlens.b:1 imports ctxlens.a._x", "ctxlens.c:3 imports ctxlens.a._x"]


def test_no_import_circle():
    found = circles()
    assert not found, "modules that import each other (tests/test_import_cycles.py):\n" + "\n".join(found)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "ctxlens" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_planted_circle_is_found(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "from ctxlens.a.b import f\n",  # a re-export
        "a/b.py": "def f():\n    from ctxlens.a import g  # inside a function, of a name a re-exports\n",
        "c.py": "import ctxlens.d\n",
        "d.py": "from ctxlens import e\n",
        "e.py": "from . import c\n",
        "f/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ctxlens.f.g import G\n",
        "f/g.py": "from ctxlens.f import h\n",  # a submodule, through the package's namespace
        "f/h.py": "",
    })
    assert circles(src) == ["ctxlens.a -> ctxlens.a.b -> ctxlens.a", "ctxlens.c -> ctxlens.d -> ctxlens.e -> ctxlens.c",
                            "ctxlens.f -> ctxlens.f.g -> ctxlens.f"]


def test_a_tree_without_circles_passes(tmp_path):
    src = _tree(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/b.py": "from ctxlens.a.c import name\nimport ctxlens.a.d as d\n",
        "a/c.py": "import ctxlens.e\n",
        "a/d.py": "",
        "e.py": "from ctxlens import f\n",
        "f.py": "",
    })
    assert circles(src) == []
