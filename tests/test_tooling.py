"""Lint and types stay clean: ``ruff check src tests`` and ``mypy`` (on the packages
``[tool.mypy]`` lists), both configured in pyproject.toml and installed by the ``test`` extra."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(module: str, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip(module, reason=f"{module} is in the test extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing():
    done = _tool("ruff", "check", "src", "tests", "--output-format", "concise")
    assert done.returncode == 0, f"ruff check src tests:\n{done.stdout[-6000:]}{done.stderr[-2000:]}"


def test_mypy_finds_nothing_in_the_packages_it_covers():
    done = _tool("mypy")  # packages, paths and options: [tool.mypy] in pyproject.toml
    assert done.returncode == 0, f"mypy ([tool.mypy] in pyproject.toml):\n{done.stdout[-6000:]}{done.stderr[-2000:]}"
