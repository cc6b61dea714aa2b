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


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's command: ``-n auto --dist loadgroup``) the real-model tier runs in
    one worker, so its two reference models are converted once per session rather than once per worker."""
    for item in items:
        if item.get_closest_marker("real"):
            item.add_marker(pytest.mark.xdist_group("real"))
