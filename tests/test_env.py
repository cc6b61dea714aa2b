"""``core.env``: the digest that names the code a run or a redo ran with where no git checkout does."""

from __future__ import annotations

from pathlib import Path

from ctxlens.core.env import source_digest, tree_digest


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("x = 1\n")
    (root / "pkg" / "sub" / "b.py").write_text("y = 2\n")
    (root / "pkg" / "notes.txt").write_text("not code\n")
    return root / "pkg"


def test_tree_digest_changes_with_any_source_edit_rename_or_new_file_and_nothing_else(tmp_path):
    root = _tree(tmp_path)
    first = tree_digest(root)
    assert len(first) == 16 and first == tree_digest(root)
    (root / "notes.txt").write_text("edited\n")  # not a Python source
    assert tree_digest(root) == first
    (root / "a.py").write_text("x = 2\n")
    edited = tree_digest(root)
    assert edited != first
    (root / "a.py").write_text("x = 1\n")
    assert tree_digest(root) == first  # content, not times
    (root / "sub" / "b.py").rename(root / "sub" / "c.py")
    assert tree_digest(root) != first
    (root / "sub" / "c.py").rename(root / "sub" / "b.py")
    (root / "sub" / "d.py").write_text("")
    assert tree_digest(root) != first


def test_source_digest_is_the_installed_packages_tree_digest():
    import ctxlens

    assert source_digest() == tree_digest(Path(ctxlens.__file__).resolve().parent)
