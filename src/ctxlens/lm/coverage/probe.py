"""The model under a coverage check and how a check compares: ``Check``, ``Builder``, probe ids.

Every check of ``ctxlens.lm.coverage`` builds its own copy of the tiny model (same seed, same
weights) through a ``Builder``, so one check's edits never reach another, and compares what
ctxlens computes with a truth that does not go through ctxlens, to ``RTOL`` of the truth's scale.
A check ends ``pass``, ``fail`` (what differed, or the exception's first line), ``unsupported``
(the adapter declines the analysis for this model, with its reason) or ``n/a``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import transformers
from transformers import AutoModelForCausalLM

import ctxlens.lm.tiny.every_type as every_type
from ctxlens.lm.loading import from_model

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.model import LM

Build = Callable[..., torch.nn.Module]  # the tiny model, given its config overrides as keywords

SEQ = 24  # tokens per probe; longer than the tiny sliding windows (16), so their masks bite
RTOL = 1e-4  # allowed max |difference| relative to max(1, max |reference|)


@dataclass
class Check:
    status: str  # pass | fail | unsupported | n/a
    reason: str = ""


def check_close(got: torch.Tensor, want: torch.Tensor, what: str) -> Check:
    got, want = got.detach().float().cpu(), want.detach().float().cpu()
    if got.shape != want.shape:
        return Check("fail", f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}")
    diff = float((got - want).abs().max()) if got.numel() else 0.0
    tol = RTOL * max(1.0, float(want.abs().max()) if want.numel() else 1.0)
    if not diff <= tol:
        return Check("fail", f"{what}: max |difference| {diff:.2e} > {tol:.1e}")
    return Check("pass")


def probe_ids(vocab: int, seq: int = SEQ, seed: int = 0) -> torch.Tensor:
    """[1, seq] token ids in [3, vocab) (above the tiny models' pad/bos/eos)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (1, seq), generator=g)


class Builder:
    """Fresh copies of one tiny model: the one ctxlens wraps and independent references."""

    def __init__(self, model_type: str, seed: int = 0, build: Build | None = None) -> None:
        self.model_type, self.seed = model_type, seed
        self._build = build or (lambda **kw: every_type.build_tiny(model_type, seed=seed, **kw))
        self.state = self._build().state_dict()

    def model(self, **config_overrides: Any) -> transformers.PreTrainedModel:
        """A new model of the same weights (config overrides go to the tiny config)."""
        m = self._build(**config_overrides)
        m.load_state_dict(self.state)
        return m.eval()

    def from_config(self, config: PretrainedConfig, attn_implementation: str | None = None) -> torch.nn.Module:
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        torch.manual_seed(self.seed)
        m = AutoModelForCausalLM.from_config(config, dtype=torch.float32, **kwargs)
        m.load_state_dict(self.state)
        return m.eval()

    def lm(self) -> LM:
        return from_model(self.model(), name=self.model_type)


def logits_of(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()  # [1, seq, vocab]


def unsupported(lm: LM, analysis: str) -> Check | None:
    try:
        lm.family.require(analysis, lm.name)
    except Exception as err:  # noqa: BLE001 - the adapter's own sentence is the reason
        msg = str(err).split("; pick")[0]
        return Check("unsupported", msg.split(" analysis: ", 1)[-1])
    return None


def name_of_module(model: torch.nn.Module, module: torch.nn.Module) -> str:
    return next(n for n, m in model.named_modules() if m is module)
