"""Sharded runs: which units this process owns under ``torchrun``.

``torchrun --nproc_per_node=N -m ctxlens run ...`` starts N copies of the same command with
``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` set. Each rank takes the units whose index in the
run's plan (over all models, in order) is congruent to its rank modulo the world size, and
commits them to its own log pair (``results.rankR.jsonl`` / ``units.rankR.jsonl``). Units
committed by *any* earlier writer are skipped, so a run resumes per rank and after N changes.
The assignment depends only on the plan, never on timing, so ranks need not talk to agree on
it; a process group (gloo on CPU, nccl on CUDA) is used only for the final barrier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError


@dataclass(frozen=True)
class Shard:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def sharded(self) -> bool:
        return self.world > 1

    def owns(self, index: int) -> bool:
        return index % self.world == self.rank

    def device(self, device: str | None) -> str | None:
        """Each rank on its own GPU when the run asks for ``cuda``."""
        if self.sharded and device == "cuda":
            return f"cuda:{self.local_rank}"
        return device


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise CtxlensError(f"Environment variable {name}={value!r} is not an integer; unset it or fix it.") from None


def from_env() -> Shard:
    """This process's shard from torchrun's variables (a single process when they are unset)."""
    shard = Shard(_env_int("RANK", 0), _env_int("WORLD_SIZE", 1), _env_int("LOCAL_RANK", 0))
    if shard.world < 1 or not 0 <= shard.rank < shard.world:
        raise CtxlensError(f"RANK={shard.rank} does not fit WORLD_SIZE={shard.world}; "
                           "start sharded runs with torchrun.")
    return shard


def barrier(shard: Shard, device: str | None) -> None:
    """Wait for every rank (no-op for one process or without torchrun's rendezvous variables)."""
    if not shard.sharded or "MASTER_ADDR" not in os.environ:
        return
    import torch.distributed as dist

    if not dist.is_available():
        return
    owned = not dist.is_initialized()
    if owned:
        backend = "nccl" if (device or "").startswith("cuda") else "gloo"
        dist.init_process_group(backend, rank=shard.rank, world_size=shard.world)
    try:
        dist.barrier()
    finally:
        if owned:
            dist.destroy_process_group()
