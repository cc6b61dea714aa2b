"""Position-weighted multitask sparse parity (seed 001, Section 4.2, Appendix C.4, Table 1)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.data.sparse_parity import MASK, ONE, TASK0, ZERO, SparseParity

# Seed 001, Appendix C.4, Table 1: context length -> "Minimum CE Loss Calculated" (nats).
TABLE1 = {17: 0.4643, 20: 0.3988, 23: 0.3437, 25: 0.3116, 28: 0.2686, 30: 0.2429, 35: 0.1864, 40: 0.1387, 50: 0.0612}


def _bits(batch, n_bits):
    """Token ids [n, L+1] -> bit tokens [n, L] with column j = bit j (0, 1 or MASK)."""
    return batch["input_ids"][:, :n_bits].flip(1)


# ---------------------------------------------------------------- Table 1 and the law


@pytest.mark.parametrize("ctl,expected", sorted(TABLE1.items()))
def test_paper_preset_reproduces_table1(ctl, expected):
    assert abs(SparseParity.paper().bayes_risk(ctl) - expected) < 5e-4


def test_paper_preset_structure():
    ds = SparseParity.paper()
    assert (ds.n_bits, ds.n_tasks, ds.vocab_size, ds.seq_len) == (60, 100, 103, 61)
    near, far = ds.task_bits[:, 0], ds.task_bits[:, 1]
    # Section 4.2: each of the 11th..60th bit (0-based 10..59) is the farther bit of exactly two tasks.
    assert sorted(far.tolist()) == sorted(list(range(10, 60)) * 2)
    assert bool((near < far).all()) and bool((near >= 0).all())
    assert len({tuple(p) for p in ds.task_bits.tolist()}) == 100
    # the law, from its closed form: freq ∝ far ** -1.15
    w = far.double() ** -1.15
    torch.testing.assert_close(ds.task_probs, w / w.sum())


def test_bayes_risk_sequence_edges_and_errors():
    ds = SparseParity.paper()
    assert ds.bayes_risk([17, 50]) == [ds.bayes_risk(17), ds.bayes_risk(50)]
    assert ds.bayes_risk(0) == pytest.approx(math.log(2))
    assert ds.bayes_risk(10) == pytest.approx(math.log(2))  # no task is fully visible yet
    assert ds.bayes_risk(60) == 0.0
    for bad in (-1, 61, 2.5):
        with pytest.raises(CtxlensError):
            ds.bayes_risk(bad)
    with pytest.raises(CtxlensError):
        SparseParity(tasks_per_bit=11)


@pytest.mark.parametrize("kw", [dict(n_bits=6, tasks_per_bit=1, first_max_bit=2, alpha=1.15, seed=3),
                                dict(n_bits=5, tasks_per_bit=2, first_max_bit=2, alpha=0.7, seed=1)])
def test_bayes_risk_matches_brute_force(kw):
    """Enumerate every (bits, task); the Bayes predictor with the first ctl bits visible is the
    posterior P(y | visible bits, task); its exact CE must equal bayes_risk(ctl)."""
    ds = SparseParity(**kw)
    L = ds.n_bits
    far = ds.task_bits[:, 1].double()
    p_task = (far ** -kw["alpha"]) / (far ** -kw["alpha"]).sum()  # the law, independently
    pairs = ds.task_bits.tolist()
    for ctl in range(L + 1):
        # posterior counts: (visible bits, task) -> [weight of y=0, weight of y=1]
        post: dict[tuple, list[float]] = {}
        for bits in itertools.product((0, 1), repeat=L):
            for t, (a, b) in enumerate(pairs):
                key = (bits[:ctl], t)
                post.setdefault(key, [0.0, 0.0])[bits[a] ^ bits[b]] += float(p_task[t]) / 2**L
        ce = 0.0
        for bits in itertools.product((0, 1), repeat=L):
            for t, (a, b) in enumerate(pairs):
                w0, w1 = post[(bits[:ctl], t)]
                y = bits[a] ^ bits[b]
                ce -= float(p_task[t]) / 2**L * math.log((w1 if y else w0) / (w0 + w1))
        assert ds.bayes_risk(ctl) == pytest.approx(ce, abs=1e-12)


# ---------------------------------------------------------------- sampling


def test_sample_shapes_vocab_and_targets():
    ds = SparseParity.paper()
    b = ds.sample(500, seed=0)
    assert b["input_ids"].shape == b["targets"].shape == (500, 61)
    assert b["input_ids"].dtype == b["targets"].dtype == torch.long
    assert bool((b["input_ids"][:, :60] <= MASK).all())
    assert torch.equal(b["input_ids"][:, 60], TASK0 + b["task"])
    assert bool((b["targets"][:, :60] == -100).all())
    assert set(b["targets"][:, 60].tolist()) <= {ZERO, ONE}


@pytest.mark.parametrize("ctl", [0, 10, 17, 33, 60])
def test_sample_masks_exactly_bits_beyond_ctl_and_labels_are_xor(ctl):
    ds = SparseParity.paper()
    full, cut = ds.sample(2000, ctl=60, seed=5), ds.sample(2000, ctl=ctl, seed=5)
    bits_full, bits_cut = _bits(full, 60), _bits(cut, 60)
    assert not bool((bits_full == MASK).any())
    assert bool((bits_cut[:, ctl:] == MASK).all())
    assert torch.equal(bits_cut[:, :ctl], bits_full[:, :ctl])  # same seed, same underlying bits
    assert torch.equal(cut["task"], full["task"]) and torch.equal(cut["targets"], full["targets"])
    for i in range(2000):
        a, b = ds.task_bits[int(full["task"][i])].tolist()
        assert int(full["targets"][i, 60]) == int(bits_full[i, a]) ^ int(bits_full[i, b])


def test_sample_training_mixture_masking():
    ds = SparseParity.paper()
    b = ds.sample(40000, seed=2)
    bits, ctl = _bits(b, 60), b["ctl"]
    assert torch.equal((bits == MASK).sum(1), 60 - ctl)
    assert bool((bits[torch.arange(60)[None, :] < ctl[:, None]] != MASK).all())
    # Section 4.3: half unmasked, half with ctl uniform in 10..60 (ctl == 60 also from the masked half)
    assert (ctl == 60).float().mean().item() == pytest.approx(0.5 + 0.5 / 51, abs=0.01)
    counts = torch.bincount(ctl[ctl < 60], minlength=61)[10:60].double()
    assert int(ctl.min()) >= 10 and counts.min() > 0
    expected = counts.sum() / 50
    assert float(((counts - expected) ** 2 / expected).sum()) < 85.4  # chi-square(49) 0.9999 quantile


def test_sample_task_frequencies_follow_the_law():
    ds = SparseParity.paper()
    n = 200000
    counts = torch.bincount(ds.sample(n, ctl=0, seed=11)["task"], minlength=100).double()
    far = ds.task_bits[:, 1].double()
    expected = n * (far ** -1.15) / (far ** -1.15).sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 148.2  # chi-square(99) 0.999 quantile


def test_sample_is_deterministic_by_seed_and_checks_arguments():
    ds = SparseParity.paper()
    a, b, c = ds.sample(64, seed=7), ds.sample(64, seed=7), ds.sample(64, seed=8)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["input_ids"], c["input_ids"])
    with pytest.raises(CtxlensError):
        ds.sample(4, ctl=61, seed=0)
    with pytest.raises(CtxlensError):
        ds.sample(0, seed=0)


# ---------------------------------------------------------------- MLP model (Appendix J.3)


def test_parity_mlp_features_ignore_bits_beyond_ctl():
    from ctxlens.zoo.parity_mlp import ParityMLP

    ds = SparseParity.paper()
    torch.manual_seed(0)
    m = ParityMLP(ctl=20, feature_dim=80).eval()
    x = ds.sample(32, ctl=60, seed=0)
    y = {k: v.clone() for k, v in x.items()}
    y["input_ids"][:, :40] = 1 - y["input_ids"][:, :40]  # flip bits 20..59 (the farthest 40 positions)
    with torch.no_grad():
        assert m.features(x["input_ids"]).shape == (32, 80)
        torch.testing.assert_close(m.features(x["input_ids"]), m.features(y["input_ids"]))
        assert m(x["input_ids"]).shape == (32, 2)
    loss = ParityMLP.loss(m, x)
    assert loss.ndim == 0 and math.isfinite(loss.item())
    with pytest.raises(CtxlensError):
        m.features(x["input_ids"][:, :10])
