import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny models: one thread is fastest, also in subprocesses

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def build_model(family: str, **overrides):
    """A seeded random-init tiny model of ``family`` (see ctxlens.lm.tiny)."""
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(family, **overrides))
    with torch.no_grad():  # zero-initialised tensors (biases, xlstm's FFN gate) get small values,
        for p in model.parameters():  # so every branch of every block contributes in tests
            if p.is_floating_point() and p.abs().max() == 0:
                p.normal_(0.0, 0.02)
    return model.eval()


def build_lm(family: str, **overrides):
    from ctxlens.lm import from_model

    return from_model(build_model(family, **overrides))


@pytest.fixture
def ids():
    return torch.randint(3, 256, (2, 40), generator=torch.Generator().manual_seed(1))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Zoo builds go to a per-session cache, never the user's home."""
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path_factory.getbasetemp() / "ctxlens-home"))


@pytest.fixture
def short_template_bound(monkeypatch) -> float:
    """The chat-template worker's time bound (``ctxlens.tasks.sandbox.SECONDS``, 10 s) set to 2 s, for tests of
    templates that run until it: the same path (the worker's clock, then the parent's kill), 8 s sooner."""
    from ctxlens.tasks import sandbox

    monkeypatch.setattr(sandbox, "SECONDS", 2.0)
    return 2.0


# Fixtures built once per worker that cost seconds to tens of seconds: their tests share one xdist group, so that
# under ``--dist loadgroup`` each is built once per session rather than once on every worker.
SHARED = {
    "ref_home": "real",  # the reference models converted from their GGUF files (tests/real/conftest.py)
    "full_report": "report",  # the report of every fixture experiment (tests/report/conftest.py)
    "grid_run": "optimal-context",  # a CLI run of optimal-context (tests/experiments/test_optimal_context.py)
}


@pytest.hookimpl(wrapper=True)  # around xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's command: ``-n auto --dist loadgroup``) the real-model tier runs in
    one worker (with the tests that convert the models without the marker: those asking for ``ref_home``),
    so its two reference models are converted once per session rather than once per worker; so do the
    tests of each other fixture of ``SHARED``.

    xdist's loadgroup scheduler reads an item's group from the suffix ``@GROUP`` of its node id, which
    xdist 3.8 writes to ``item._nodeid``; pytest >= 9.2 keeps the id in ``item._id`` (pytest-xdist issue
    1386), where the suffix is written here after xdist's hook: without it the groups are silently ignored."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        group = "real" if item.get_closest_marker("real") else next((SHARED[f] for f in SHARED if f in names), None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    yield
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        node_id = getattr(item, "_id", None)  # pytest >= 9.2: a NodeId; before, absent (and xdist's suffix holds)
        if groups and hasattr(node_id, "parse") and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = node_id.parse(f"{item.nodeid}@{'_'.join(groups)}")
