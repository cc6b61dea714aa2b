"""Per-layer analyses on post-RoPE q and k: the q/k scan of ``LM.scan_qk`` with the RoPE pair
contributions on top.

The RoPE distance paper ("On the token distance modeling ability of higher RoPE attention
dimension"), Sections 4.1-4.2, reads for every layer and head the logits of chosen queries
against all earlier keys and splits each logit into the contributions of the RoPE frequency
pairs (Section 3). ``scan`` runs ``LM.scan_qk`` (one forward, one layer's q/k at a time,
stopped after the deepest layer; ``ctxlens.lm.analysis.qkscan``) and hands each layer to the callback as
a ``LayerQK``: the model's logits and probabilities of a chunk of queries (``QKView``) plus
``pair_contributions``. ``chunk_size`` picks how many query rows fit the working set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ctxlens.lm.analysis import selfextend as _se
from ctxlens.lm.analysis.qkscan import QKView
from ctxlens.metrics.rope import rope_pair_contributions

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

WORK_BYTES = 512 * 2**20  # working set per chunk of queries


@dataclass
class LayerQK(QKView):
    """One layer's post-RoPE q [H, L, d] and k [KVH, L, d], how it attends, and its RoPE pairs."""

    def pair_contributions(self, qpos: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Per-pair contributions [H, c, t, n_pairs] of queries at qpos [c] with keys [H, c, t]
        (indices), at the distance the model uses for each (query, key)."""
        q_sel = self.q[:, qpos]  # [H, c, d]
        n_keys, d = self.k.shape[1], self.k.shape[-1]
        rows = self.kv_of_head()[:, None, None] * n_keys + keys  # [H, c, t] rows of k as [KVH * L, d]
        k_sel = self.k.reshape(-1, d).index_select(0, rows.flatten()).view(*keys.shape, d)  # [H, c, t, d]
        q_use = q_sel[:, :, None]  # [H, c, 1, d]
        if self.selfextend is not None:
            true = qpos[None, :, None] - keys  # [H, c, t]
            used = self.selfextend.distance(qpos[None, :, None], keys)  # [H, c, t]
            q_use = _se.rotate(q_use.expand(*keys.shape, q_sel.shape[-1]), used - true, self.inv_freq,
                               self.layout, self.rotary_dims)
        pairs, _ = rope_pair_contributions(q_use, k_sel, self.layout, self.rotary_dims)
        return pairs


def chunk_size(n_heads: int, n_keys: int, per_row_extra: int = 0) -> int:
    """Query rows per chunk so that [H, c, n] float logits (x4 for temporaries) fit WORK_BYTES."""
    return max(1, WORK_BYTES // (n_heads * (16 * n_keys + per_row_extra)))


def scan(lm: LM, ids: torch.Tensor, layers: Sequence[int], fn: Callable[[LayerQK], None]) -> None:
    """One forward of ``ids`` [1, L]; ``fn`` gets each of ``layers`` as a ``LayerQK``, in order."""
    def as_layer(view: QKView) -> None:
        fn(LayerQK(**{f.name: getattr(view, f.name) for f in dataclasses.fields(view)}))

    lm.scan_qk(ids, layers, as_layer)
