"""Copy windows repeat one random string with a per-window period (the zoo's induction warm-up)."""

import pytest
import torch

from ctxlens.data.copy_windows import PRINTABLE, copy_windows


def _least_period(row: list[int]) -> int:
    """Brute force: the least p with row[t] == row[t - p] for every t >= p."""
    return next(p for p in range(1, len(row) + 1) if all(row[t] == row[t - p] for t in range(p, len(row))))


def test_rows_are_periodic_within_bounds_and_alphabet():
    windows = copy_windows(torch.Generator().manual_seed(0), 64, 128)
    assert windows.shape == (64, 128)
    assert torch.isin(windows, torch.tensor(list(PRINTABLE))).all()
    digits = copy_windows(torch.Generator().manual_seed(0), 8, 64, alphabet=b"0123456789")
    assert set(digits.unique().tolist()) == set(b"0123456789")
    periods = [_least_period(row) for row in windows.tolist()]
    # a random string's least period is its drawn period unless it happens to repeat itself
    assert all(p <= 64 for p in periods) and sum(p >= 8 for p in periods) >= 60
    assert len(set(periods)) > 20  # periods vary from window to window


def test_same_generator_state_same_windows():
    a = copy_windows(torch.Generator().manual_seed(3), 4, 64)
    b = copy_windows(torch.Generator().manual_seed(3), 4, 64)
    assert torch.equal(a, b) and not torch.equal(a, copy_windows(torch.Generator().manual_seed(4), 4, 64))


def test_too_short_a_window_is_refused():
    with pytest.raises(ValueError, match="too short"):
        copy_windows(torch.Generator(), 1, 15)
