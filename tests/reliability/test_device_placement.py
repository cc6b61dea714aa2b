"""Tensors that meet on the model's device, checked on a CPU-only machine.

On an H200 every ACCS part failed because counts built on the CPU divided sums on the GPU
(``probes.suffix.cross_similarity``). torch's fake tensors carry a device, CUDA included, without a
GPU, and raise the same "two devices" error a GPU would; so each place where a CPU-built tensor
meets the model's tensors is run here with the model's side on a fake ``cuda`` device.
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError, FakeTensorMode

from ctxlens.probes.suffix import cross_similarity


def test_the_fake_device_raises_the_gpus_error_for_the_old_division():
    """The check can fail: the division as it was before the fix mixes devices."""
    with FakeTensorMode():
        units = torch.ones(3, 4, dtype=torch.float64, device="cuda")  # [k, d]
        n = torch.tensor([2.0, 4.0, 6.0], dtype=torch.float64)  # [k], on the CPU
        with pytest.raises(FakeTensorDeviceMismatchError):
            _ = (units @ units.T) / torch.outer(n, n)


def test_the_cross_window_similarity_stays_on_the_units_device():
    with FakeTensorMode():
        got = cross_similarity(torch.ones(3, 4, dtype=torch.float64, device="cuda"), [2, 4, 6])
        assert got.device.type == "cuda" and got.shape == (3, 3)


def test_the_cross_window_similarity_is_the_mean_cosine_between_two_windows_vectors():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.nn.functional.normalize(torch.randn(n, 5, generator=g, dtype=torch.float64), dim=1) for n in (3, 4))
    got = cross_similarity(torch.stack([a.sum(0), b.sum(0)]), [3, 4])  # [2, 2]
    assert got[0, 1].item() == pytest.approx(float((a @ b.T).mean()), abs=1e-12)

