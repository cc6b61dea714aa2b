"""Position-weighted multitask sparse parity (the intrinsic-entropy paper, Section 4.2 and Appendix C.4).

``L`` context bits, each uniform in {0, 1}; ``T`` subtasks, each the XOR of two fixed bits.
Exactly one subtask is active per sample, drawn with a frequency that falls with the position of
its farther bit ("tasks requiring nearer bits are more often"). A model with visible context
length ``ctl`` sees only the ``ctl`` nearest bits; the others are masked (the paper sets them to
0.5 / "?"). Bit ``j`` (0-based) is ``j + 1`` tokens before the task token, so "the last X bits"
that the paper masks are the farthest ones.

Tasks (Section 4.2): every bit ``m`` with ``first_max_bit <= m < L`` (0-based; the paper's "11th to
60th bit") is the farther bit of ``tasks_per_bit`` tasks, giving ``T = tasks_per_bit * (L -
first_max_bit)`` (the paper's setting: 60 bits, 2 tasks per bit, 100 tasks; Section 4.2 also says
"200 tasks" once, which contradicts its own count, Section 4.3 and Appendix C.4). The paper does not
say where the nearer bit lies; here it is drawn per task, without repetition among the tasks that
share a farther bit, uniformly from ``0 .. m-1`` with the instance's ``seed``. It does not affect
the Bayes risk.

Frequency law. The paper does not state it. A search over principled one- and two-parameter
families (power law in the 1-based or 0-based position of the farther bit with an offset, Zipf over
task rank with an offset, exponential in position) finds that

    freq(task) ∝ m ** -alpha,  m = 0-based index of the task's farther bit,  alpha = 1.15

reproduces Table 1's "Minimum CE Loss Calculated" column to within 1.8e-4 at every listed context
length (residuals, computed minus table, ctl 17, 20, 23, 25, 28, 30, 35, 40, 50:
-0.4e-4, -1.8e-4, -0.1e-4, -0.5e-4, +0.1e-4, -0.3e-4, +0.4e-4, +0.1e-4, +0.5e-4; all but ctl 20 are
within the table's rounding of 5e-5). The exponent agrees with the gamma = 1.18 +- 0.06 that
Appendix J.3 fits to its synthetic CE curve. The same law with 1-based positions (m + 1) is off by
up to 8.4e-4 at its best exponent (1.202), so the 0-based index matters.

Bayes risk (Section 4.2 / Appendix C.4). Bits are i.i.d. uniform, so for a visible task (both bits
seen; equivalently its farther bit ``m < ctl``) the label is determined, and for any other task the
label is the XOR of a uniform unseen bit with something, i.e. uniform: the Bayes model predicts it
perfectly or at chance, and

    R_Bayes(ctl) = log 2 * sum_{task: m >= ctl} freq(task) / sum_task freq(task)     [nats]

(the paper's ``max(bit_1, bit_2) > ctl`` with 1-based bits). The task id is given to the model as
one token (Section 4.3, Figure 6), so it is always known.

Token encoding for a causal LM (Section 4.3: "input sequence length is always 60+1, with 60 context
tokens (either 0, 1 or ?) and 1 task token"): ``[bit_{L-1}, ..., bit_1, bit_0, TASK_k]``, so the
visible bits are the ``ctl`` tokens right before the task token, as in Section 4.2 ("leave l tokens
before the token-to-predict visible"). The label is predicted after reading the task token, i.e.
``targets[:, L] = label`` and ``-100`` elsewhere. Vocabulary (``T + 3`` ids):

    0 -> bit 0,  1 -> bit 1 (also the two label tokens),  2 -> "?" (masked bit),  3 + k -> task k.

Training mixture (Section 4.3 / Appendix C.4): half of the samples are unmasked and the other half
have their farthest ``X`` bits masked, ``X`` uniform in ``0 .. L - min_ctl`` (the paper's "60 - 10 to
60 - 60"), i.e. ``ctl`` uniform in ``min_ctl .. L`` (default ``min_ctl = first_max_bit``, 10).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ctxlens.core.errors import CtxlensError

ZERO, ONE, MASK, TASK0 = 0, 1, 2, 3  # token ids; task k is TASK0 + k
IGNORE = -100


@dataclass(frozen=True)
class SparseParity:
    """A seeded instance of the dataset; see the module docstring (the intrinsic-entropy paper, Section 4.2).

    Attributes (derived): ``task_bits`` LongTensor[T, 2] (nearer bit, farther bit; 0-based),
    ``task_probs`` DoubleTensor[T] (sums to 1).
    """

    n_bits: int = 60  # L
    tasks_per_bit: int = 2
    first_max_bit: int = 10  # 0-based index of the nearest bit that is a task's farther bit
    alpha: float = 1.15  # freq ∝ (farther bit, 0-based) ** -alpha
    mask_fraction: float = 0.5  # share of training samples with masked bits (ctl=None in sample)
    min_ctl: int | None = None  # smallest ctl drawn for masked training samples; None: first_max_bit
    seed: int = 0  # places the nearer bit of every task
    task_bits: torch.Tensor = field(init=False, repr=False, compare=False)
    task_probs: torch.Tensor = field(init=False, repr=False, compare=False)

    @classmethod
    def paper(cls, seed: int = 0) -> SparseParity:
        """The intrinsic-entropy paper, Section 4.3 / Appendix C.4: 60 bits, 100 tasks, the law fitted to Table 1."""
        return cls(seed=seed)

    def __post_init__(self) -> None:
        L, k, lo = self.n_bits, self.tasks_per_bit, self.first_max_bit
        if not (1 <= lo < L):
            raise CtxlensError(f"first_max_bit must be in 1..n_bits-1 (got {lo} with n_bits={L}).")
        if not (1 <= k <= lo):
            raise CtxlensError(f"tasks_per_bit must be in 1..first_max_bit={lo} so every task has distinct bits "
                               f"(got {k}).")
        if not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise CtxlensError(f"The dataset seed must be a non-negative integer (got {self.seed!r}); pass 0 or more.")
        if self.min_ctl is None:
            object.__setattr__(self, "min_ctl", lo)
        if not (0.0 <= self.mask_fraction <= 1.0) or not (0 <= self.min_ctl <= L):
            raise CtxlensError(f"mask_fraction must be in [0, 1] and min_ctl in 0..{L}.")
        rng = np.random.default_rng(self.seed)
        rows = []
        for m in range(lo, L):
            for near in rng.choice(m, size=k, replace=False):
                rows.append((int(near), m))
        bits = torch.tensor(rows, dtype=torch.long)  # [T, 2]
        w = bits[:, 1].double() ** -self.alpha
        object.__setattr__(self, "task_bits", bits)
        object.__setattr__(self, "task_probs", w / w.sum())

    @property
    def n_tasks(self) -> int:
        return int(self.task_bits.shape[0])

    @property
    def vocab_size(self) -> int:
        return TASK0 + self.n_tasks

    @property
    def seq_len(self) -> int:
        return self.n_bits + 1

    def _check_ctl(self, ctl: int) -> int:
        if isinstance(ctl, bool) or int(ctl) != ctl or not (0 <= ctl <= self.n_bits):
            raise CtxlensError(f"Context length must be an integer in 0..{self.n_bits} (got {ctl!r}).")
        return int(ctl)

    def bayes_risk(self, ctl: int | Sequence[int]) -> float | list[float]:
        """Minimum CE (nats) of the label with ``ctl`` visible bits (Section 4.2, Appendix C.4)."""
        if isinstance(ctl, Sequence):
            return [self.bayes_risk(c) for c in ctl]  # type: ignore[misc]
        c = self._check_ctl(ctl)
        return float(self.task_probs[self.task_bits[:, 1] >= c].sum()) * math.log(2)

    def sample(self, n: int, *, ctl: int | None = None, seed: int) -> dict[str, torch.Tensor]:
        """``n`` samples: input_ids LongTensor[n, L+1], targets LongTensor[n, L+1] (label at
        position L, -100 elsewhere), plus task LongTensor[n] and ctl LongTensor[n].

        ``ctl=None`` draws the paper's training mixture (see module docstring); an integer masks
        every bit at index >= ctl. Same seed, same tensors.
        """
        if n < 1:
            raise CtxlensError(f"Number of samples must be positive (got {n}).")
        L = self.n_bits
        g = torch.Generator().manual_seed(int(seed))
        bits = torch.randint(0, 2, (n, L), generator=g)  # [n, L], column j = bit j
        task = torch.multinomial(self.task_probs, n, replacement=True, generator=g)  # [n]
        pair = self.task_bits[task]  # [n, 2]
        label = bits.gather(1, pair[:, :1]).squeeze(1) ^ bits.gather(1, pair[:, 1:]).squeeze(1)
        if ctl is None:
            masked = torch.rand(n, generator=g) < self.mask_fraction
            assert self.min_ctl is not None  # __post_init__ fills it
            drawn = torch.randint(self.min_ctl, L + 1, (n,), generator=g)
            ctls = torch.where(masked, drawn, torch.full_like(drawn, L))
        else:
            ctls = torch.full((n,), self._check_ctl(ctl), dtype=torch.long)
        tokens = torch.where(torch.arange(L)[None, :] >= ctls[:, None], MASK, bits)  # [n, L]
        input_ids = torch.cat([tokens.flip(1), (TASK0 + task)[:, None]], dim=1)  # [n, L+1]
        targets = torch.full_like(input_ids, IGNORE)
        targets[:, L] = label
        return {"input_ids": input_ids, "targets": targets, "task": task, "ctl": ctls}
