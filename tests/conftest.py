import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(min(2, torch.get_num_threads()))


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
