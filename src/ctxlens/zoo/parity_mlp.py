"""The MLP model with a separate context encoder for sparse parity (the intrinsic-entropy paper, Appendix J.3,
Figure 16; also Appendix C.3).

    bits (first ctl visible) ──► context MLP ──► context feature [n, d] ─┐
                                                                         ⊕ ──► output MLP ──► logits [n, 2]
    task id ──────────────────────────────────────────────► one-hot [n, T] ┘

The context encoder never sees the task, so the best it can do is to write the answer of every
subtask it can see into the context feature (Appendix C.3); Appendix J.3 runs PCA on that feature
(``features``) and reads the intrinsic dimension off the eigenvalues (Figure 17: one dimension per
visible subtask). The paper's inner dimension is 80 for a ~50-task dataset (Appendix J.3); the
default here is 128 so that the 100 tasks of ``SparseParity.paper()`` fit one per dimension.
(Appendix J.3's dataset has one task per farther bit, visible count 16 at ctl 27 and about 51 in
all, i.e. ``SparseParity(n_bits=62, tasks_per_bit=1, first_max_bit=11)`` in this package's terms.)

Input is the token encoding of ``ctxlens.data.sparse_parity`` (input_ids [n, L+1], targets with the
label at the last position), decoded back to bits: 0 -> -1, 1 -> +1, "?" -> 0 (the paper's 0/1 bits
with 0.5 for a masked bit, centred; the first linear layer absorbs the shift). With ``ctl`` set, bits
at index >= ctl are zeroed as well: "only the first l bits are used as input to context MLP when the
context length is set to l" (Figure 16).
"""

from __future__ import annotations

import torch
from torch import nn

from ctxlens.core.errors import CtxlensError
from ctxlens.data.sparse_parity import MASK, ONE, TASK0


class ParityMLP(nn.Module):
    """Context MLP ⊕ task one-hot → output MLP (the intrinsic-entropy paper, Appendix J.3, Figure 16)."""

    def __init__(self, n_bits: int = 60, n_tasks: int = 100, *, hidden: int = 512, feature_dim: int = 128,
                 ctl: int | None = None):
        super().__init__()
        if ctl is not None and not (0 <= ctl <= n_bits):
            raise CtxlensError(f"ParityMLP context length must be in 0..{n_bits} (got {ctl}).")
        self.n_bits, self.n_tasks, self.ctl = n_bits, n_tasks, ctl
        self.context = nn.Sequential(
            nn.Linear(n_bits, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, feature_dim)
        )
        self.head = nn.Sequential(nn.Linear(feature_dim + n_tasks, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def _split(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """input_ids [n, L+1] → bits [n, L] in {-1, 0, +1} (column j = bit j), task [n]."""
        if input_ids.ndim != 2 or input_ids.shape[1] != self.n_bits + 1:
            raise CtxlensError(
                f"ParityMLP expects input_ids of shape [n, {self.n_bits + 1}] (got {list(input_ids.shape)})."
            )
        tokens = input_ids[:, : self.n_bits].flip(1)  # [n, L]
        bits = torch.where(tokens == ONE, 1.0, -1.0)
        bits = torch.where(tokens == MASK, 0.0, bits)
        if self.ctl is not None:
            bits[:, self.ctl:] = 0.0
        task = input_ids[:, -1] - TASK0
        if task.min() < 0 or task.max() >= self.n_tasks:
            raise CtxlensError(f"ParityMLP got a task token outside the {self.n_tasks} tasks it was built for.")
        return bits, task

    def features(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Context feature [n, feature_dim] (Figure 16's intrinsic space); ignores the task."""
        bits, _ = self._split(input_ids)
        return self.context(bits)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Label logits [n, 2] (index = label token id)."""
        bits, task = self._split(input_ids)
        onehot = nn.functional.one_hot(task, self.n_tasks).to(bits.dtype)
        return self.head(torch.cat([self.context(bits), onehot], dim=1))

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean CE (nats) of the label at the last position; usable as
        ``train(..., loss_fn=ParityMLP.loss)``."""
        return nn.functional.cross_entropy(self(batch["input_ids"]), batch["targets"][:, -1])
