"""``LM``: a loaded causal LM, its tokenizer and its family adapter.

Everything above this layer talks to an ``LM``, never to a model class directly.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

import ctxlens.lm.analysis.capture as _capture
import ctxlens.lm.analysis.heads as _heads
import ctxlens.lm.analysis.losses as _losses
import ctxlens.lm.analysis.qkscan as _qkscan
import ctxlens.lm.analysis.rope as _rope
import ctxlens.lm.analysis.selfextend as _selfextend
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Layers
from ctxlens.lm.families import Family
from ctxlens.lm.info import ModelInfo, info_from_config, positions_limit, stated_train_length
from ctxlens.lm.specs import Resolved

if TYPE_CHECKING:
    from transformers import Cache, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase  # Any (pyproject)

# token ids as the forwards accept them: a [batch, seq] or [seq] tensor, or nested lists of ints
TokenIds = torch.Tensor | Sequence[int] | Sequence[Sequence[int]]


def submodule(module: torch.nn.Module, path: str | None) -> torch.nn.Module | None:
    """``module.get_submodule(path)`` (a dotted path: dbrx keeps attention at norm_attn_norm.attn),
    or None when there is no such child."""
    if not path:
        return None
    try:
        return module.get_submodule(path)
    except AttributeError:
        return None


def config_int(config: PretrainedConfig, *names: str) -> int:
    """The first of ``names`` the config sets to a number; 0 when none does, or when the value
    varies by layer (dots3_note's head counts: transformers refuses the global read)."""
    for name in names:
        try:
            value = getattr(config, name, None)
        except Exception:  # noqa: BLE001 - a per-layer attribute read globally
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and value:
            return value
    return 0


@dataclass(frozen=True)
class RopeSnapshot:
    """A model's RoPE at one moment: its ``rope_parameters`` (``{layer_type: parameters}`` on a
    per-type model), ``max_position_embeddings`` and whether extrapolation was allowed."""

    parameters: dict[str, Any]  # a foreign config's rope_parameters
    max_positions: int | None
    extrapolate: bool


class LM:
    """A model + tokenizer + family adapter. Build with ``ctxlens.load``.

    ``train_length``: the context length the model was trained at, when its source records it
    (a resolver's ``Resolved.train_length``, e.g. the zoo's recipe); None otherwise. ``origin``:
    the resolver prefix it came through ("zoo", "ref"), "" otherwise. ``resolved``: the spec as
    ``load`` resolved it (``ctxlens.lm.specs.Resolved``: where the files are, its kind and digest), so
    the layers above never resolve it again; None for a model wrapped by ``from_model``."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase | None, family: Family, name: str,
                 train_length: int | None = None, origin: str = "", resolved: Resolved | None = None):
        self.model, self.family, self.name = model, family, name
        # a PreTrainedTokenizerBase, or None (``require_tokenizer``); Any so that the layers above, which call
        # require_tokenizer first, need no narrowing (issue 46: tighten with them)
        self.tokenizer: Any = tokenizer
        self.train_length, self.origin, self.resolved = train_length, origin, resolved
        self.config = model.config
        self.layers = model.get_submodule(family.layers)
        self.n_layers = len(self.layers)
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        self.n_heads = config_int(text, "num_attention_heads", "n_head")
        self.n_kv_heads = config_int(text, "num_key_value_heads") or self.n_heads
        self.extrapolate = False  # set by set_rope or allow_extrapolation()

    # -- structure ---------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    def attention(self, layer: int) -> torch.nn.Module:
        """The attention module of ``layer`` (error if that block has none)."""
        module = self._attention_or_none(layer)
        if module is None:
            raise CtxlensError(
                f"Layer {layer} of '{self.name}' ({self.family.name}) has no attention; pick an attention layer "
                f"(attention layers: {self.attention_layers()})."
            )
        return module

    def _attention_or_none(self, layer: int) -> torch.nn.Module | None:
        # hybrids name both kinds of mixer alike (recurrent_gemma's temporal_block): check the class
        if self.family.attn_layers is not None and layer not in self.family.attn_layers:
            return None
        module = submodule(self.layers[layer], self.family.attn)
        return module if module is not None and "Attention" in type(module).__name__ else None

    def attention_layers(self) -> list[int]:
        """Indices of the blocks that contain attention."""
        return [i for i in range(self.n_layers) if self._attention_or_none(i) is not None]

    def layer_indices(self, layers: Layers, *, attention: bool = False) -> list[int]:
        """Sorted, unique, absolute indices of a ``Layers`` option: None or [] is every layer (every
        attention layer with ``attention``); negatives count from the end."""
        n = self.n_layers
        if not layers:
            return self.attention_layers() if attention else list(range(n))
        out = set()
        for layer in layers:
            if not -n <= layer < n:
                raise CtxlensError(
                    f"Layer {layer} does not exist in '{self.name}' ({n} layers); pick layers in [{-n}, {n - 1}]."
                )
            out.add(layer + n if layer < 0 else layer)
        have = self.attention_layers() if attention else list(range(n))
        bad = sorted(out - set(have))
        if bad:
            raise CtxlensError(f"Layers {bad} of '{self.name}' have no attention; pick from {have}.")
        return sorted(out)

    def out_proj(self, layer: int) -> torch.nn.Module:
        return self.attention(layer).get_submodule(cast(str, self.family.out_proj))  # set where heads are masked

    @property
    def head_dim(self) -> int:
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        hd = getattr(text, "head_dim", None)
        return int(hd) if hd else int(text.hidden_size // max(1, self.n_heads))

    @property
    def rotary_dims(self) -> int:
        """Number of rotary dims per head (2 x number of frequency pairs), the largest over the
        attention layers (per layer: ``layer_rotary_dims``); 0 without RoPE."""
        if not _rope.rotary_modules(self.model, self.text_prefix):
            return 0
        dims = [self.layer_rotary_dims(i) for i in self.attention_layers()
                if _rope.layer_parameters(_rope.text_config(self.model), i) is not None]
        return max(dims, default=0)

    @property
    def text_prefix(self) -> str:
        """Dotted path of the module holding the blocks (the text model of a multimodal model)."""
        return self.family.layers.rpartition(".")[0]

    def layer_type(self, layer: int) -> str:
        """The attention type of ``layer`` (``sliding_attention``, ``full_attention``, ...; see
        ``ctxlens.lm.analysis.rope.layer_type``)."""
        return _rope.layer_type(_rope.text_config(self.model), layer)

    def inv_freq(self, layer: int) -> torch.Tensor:
        """[n_pairs] inverse RoPE frequencies of ``layer`` (per layer type on local/global hybrids)."""
        return _rope.inv_freq(self.model, layer, self.text_prefix)

    def layer_rotary_dims(self, layer: int) -> int:
        """Rotary dims per head of ``layer`` (2 x its number of frequency pairs)."""
        return 2 * int(self.inv_freq(layer).numel())

    @property
    def name_or_path(self) -> str:
        """The hub id or folder the weights were loaded from (the config's ``_name_or_path``), or ''."""
        return str(getattr(self.config, "_name_or_path", "") or "")

    def config_train_length(self) -> int | None:
        """The training length the config states: the ``original_max_position_embeddings`` of its
        RoPE scaling (the global layers' on a per-type model), else ``max_position_embeddings``."""
        return stated_train_length(self.config)

    @property
    def info(self) -> ModelInfo:
        """What the model is (``ctxlens.lm.info``): kind, positions, training length, window, width, origin."""
        info = info_from_config(self.config, self.train_length, self.origin)
        family = self.family  # an inferred adapter knows what the hand-written records do not
        return info if info.kind else dataclasses.replace(info, kind=family.kind, position=family.position)

    def rope_info(self, layer: int) -> dict:
        """Row columns naming the RoPE ``layer`` uses now: its layer type, base and RoPE type."""
        params = _rope.layer_parameters(_rope.text_config(self.model), layer) or {}
        return {"layer_type": self.layer_type(layer), "rope_theta": params.get("rope_theta"),
                "rope_type": params.get("rope_type")}

    # -- limits --------------------------------------------------------------------------------
    def check_length(self, n_tokens: int) -> None:
        """Raise a clear error if ``n_tokens`` exceeds what the model's positions allow."""
        text = self.config.get_text_config() if hasattr(self.config, "get_text_config") else self.config
        limit, hard = positions_limit(text)
        if limit is None or n_tokens <= limit:
            return
        if hard:
            raise CtxlensError(
                f"'{self.name}' has learned positions for at most {limit} tokens but {n_tokens} were asked for; "
                f"use lengths up to {limit}."
            )
        if not self.extrapolate:
            raise CtxlensError(
                f"'{self.name}' was configured for at most {limit} positions but {n_tokens} were asked for; "
                "use shorter lengths, change its RoPE (--rope-theta / --rope-scaling), or pass --allow-extrapolation."
            )

    def allow_extrapolation(self, allow: bool = True) -> None:
        self.extrapolate = allow

    # -- forward passes ------------------------------------------------------------------------
    def _ids(self, input_ids: TokenIds) -> torch.Tensor:
        ids = torch.as_tensor(input_ids, dtype=torch.long)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise CtxlensError("input_ids must be a non-empty [batch, seq] array of token ids.")
        if int(ids.max()) >= self.vocab_size or int(ids.min()) < 0:
            raise CtxlensError(f"Token ids must lie in [0, {self.vocab_size}) for '{self.name}'.")
        self.check_length(ids.shape[1])
        return ids.to(self.device)

    def base_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     cache: Cache | None = None) -> Any:
        """The base model (no LM head) over [batch, seq] ids; returns its output object, whose
        ``last_hidden_state`` [batch, seq, d_model] is what the LM head reads. With ``cache`` (the
        model's own cache of earlier ids, ``ctxlens.lm.prefix_cache``) the ids continue it, and it is
        extended in place."""
        kwargs: dict[str, object] = {"use_cache": cache is not None}
        if cache is not None:
            kwargs["cache"] = cache
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask.to(self.device)
        out = self.decoder(input_ids=input_ids, **kwargs)
        if self.family.pre_head:  # final hidden states as the LM head reads them
            out.last_hidden_state = self.model.get_submodule(self.family.pre_head)(out.last_hidden_state)
        return out

    @property
    def decoder(self) -> torch.nn.Module:
        """The module that maps ids to final hidden states (the model without its LM head)."""
        return self.model.get_submodule(self.family.base) if self.family.base else self.model.base_model

    @torch.inference_mode()
    def token_losses(self, input_ids: TokenIds, attention_mask: torch.Tensor | None = None,
                     chunk: int | None = None) -> torch.Tensor:
        """[batch, seq-1] float32 nats; entry t is the loss of token t+1 given tokens 0..t."""
        ids = self._ids(input_ids)
        hidden = self.base_forward(ids, attention_mask).last_hidden_state  # [batch, seq, d_model]
        return self.nll_from_hidden(hidden[:, :-1], ids[:, 1:], chunk=chunk)

    @torch.inference_mode()
    def final_hidden(self, input_ids: TokenIds) -> torch.Tensor:
        """[batch, seq, d_model] final hidden states (after the final norm: what the LM head reads)
        of ids [batch, seq], checked like every forward (id range, length)."""
        return self.base_forward(self._ids(input_ids)).last_hidden_state

    def last_states(self, input_ids: TokenIds, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(final hidden state [batch, d_model], output of block ``block`` [batch, d_model] or None)
        at the last position of ids [batch, seq]: one forward (``ctxlens.lm.analysis.capture.last_states``)."""
        return _capture.last_states(self, self._ids(input_ids), block)

    def _logits_post(self) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The family's logit post-processing (soft-capping, scaling) as a function of logits, or None."""
        post = self.family.logits_post
        return (lambda z: post(self.config, z)) if post else None

    @torch.inference_mode()
    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [..., vocab] of final hidden states [..., d_model], post-processed as the model's
        own head does (soft-capping, scaling); full vocabulary, so keep ``hidden`` small."""
        logits = self.model.get_output_embeddings()(hidden)
        post = self._logits_post()
        return post(logits) if post else logits

    @torch.inference_mode()
    def nll_from_hidden(self, hidden: torch.Tensor, targets: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
        """[batch, n] float32 nats of targets [batch, n] given final hidden states [batch, n, d_model],
        through the LM head in chunks (``ctxlens.lm.analysis.losses``): no full-vocabulary logits for all n."""
        return _losses.nll_from_hidden(hidden, targets.to(hidden.device), self.model.get_output_embeddings(),
                                       post=self._logits_post(), chunk=chunk)

    @torch.inference_mode()
    def greedy(self, input_ids: TokenIds, max_new_tokens: int, pad_token_id: int, min_new_tokens: int = 0,
               cache: Cache | None = None) -> torch.Tensor:
        """[batch, seq + new] ids: the model's own greedy ``generate`` (its KV / recurrent cache) from
        ids [batch, seq], after the id checks and a length check of prompt + ``max_new_tokens``;
        ``min_new_tokens``: no end-of-text stop before that many new tokens; ``cache``: the model's
        cache of the ids but the last (``ctxlens.lm.prefix_cache``), continued instead of a prefill."""
        self.check_length(torch.as_tensor(input_ids).shape[-1] + max_new_tokens)
        ids = self._ids(input_ids)
        kwargs = {"cache": cache} if cache is not None else {}
        return self.model.generate(ids, max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                                   do_sample=False, pad_token_id=pad_token_id, **kwargs)

    def capture(self, input_ids: TokenIds, **request: Any) -> _capture.Capture:
        """One forward returning only the requested slices; see ``ctxlens.lm.analysis.capture.run_capture``."""
        return _capture.run_capture(self, self._ids(input_ids), **request)

    def scan_qk(self, input_ids: torch.Tensor, layers: Sequence[int],
                fn: Callable[[_qkscan.QKView], None]) -> None:
        """One forward of ids [1, seq]; ``fn`` gets each of ``layers`` as a ``QKView`` (post-RoPE
        q [H, seq, d], k [KVH, seq, d] and how the layer attends) while the forward runs, and the
        forward stops after the deepest; see ``ctxlens.lm.analysis.qkscan``."""
        _qkscan.scan_qk(self, input_ids, layers, fn)

    def self_extend(self, group: int, window: int) -> AbstractContextManager:
        """Context manager: SelfExtend (group size ``group``, neighbour window ``window``) on every
        attention layer inside the block; see ``ctxlens.lm.analysis.selfextend``."""
        return _selfextend.self_extend(self, group, window)

    def ablate_pairs(self, pairs: Sequence[int], layers: Sequence[int] | None = None) -> AbstractContextManager:
        """Context manager: RoPE frequency ``pairs`` zeroed in q and k of ``layers`` (None: every
        attention layer) inside the block; see ``ctxlens.lm.analysis.selfextend.ablate_pairs``."""
        return _selfextend.ablate_pairs(self, pairs, layers)

    def mask_heads(self, heads: Mapping[int, Sequence[int]]) -> AbstractContextManager:
        """Context manager: heads ``{layer: [head, ...]}`` output zero inside the block."""
        return _heads.mask_heads(self, heads)

    def set_rope(self, theta: float | None = None, scaling: dict | None = None, layers: str | None = None,
                 max_positions: int | None = None) -> dict:
        """Change RoPE base and/or scaling in place (the RoPE distance paper, Section 4.2.2). ``layers``:
        global, sliding, all or a layer type; default: the global layers of a model with a RoPE per
        layer type (Gemma 3), all layers of a one-RoPE model. ``max_positions`` first sets the
        config's ``max_position_embeddings`` (dynamic NTK and YaRN scale from it; put back if the
        change fails). Returns the new parameters of what changed (``{layer_type: parameters}`` on
        a per-type model; see ``ctxlens.lm.analysis.rope.set_rope``); ``rope_snapshot`` / ``restore_rope``
        undo it."""
        self.family.require("rope", self.name)
        config = _rope.text_config(self.model)
        old_max = getattr(config, "max_position_embeddings", None)
        if max_positions is not None:
            config.max_position_embeddings = max_positions
        try:
            params = _rope.set_rope(self.model, theta=theta, scaling=scaling, layers=layers,
                                    under=self.text_prefix, n_layers=self.n_layers)
        except CtxlensError:
            if max_positions is not None:
                config.max_position_embeddings = old_max
            raise
        self.extrapolate = True
        return params

    def rope_snapshot(self) -> RopeSnapshot:
        """The RoPE as it is now (parameters, max positions, the extrapolation flag), for ``restore_rope``."""
        config = _rope.text_config(self.model)
        return RopeSnapshot(copy.deepcopy(getattr(config, "rope_parameters", None) or {}),
                            getattr(config, "max_position_embeddings", None), self.extrapolate)

    def restore_rope(self, snapshot: RopeSnapshot) -> None:
        """Put back the RoPE of ``snapshot`` (taken by ``rope_snapshot``) and rebuild the rotary modules."""
        config = _rope.text_config(self.model)
        if getattr(config, "max_position_embeddings", None) != snapshot.max_positions:
            config.max_position_embeddings = snapshot.max_positions
        _rope.restore_rope(self.model, snapshot.parameters, self.text_prefix)
        self.extrapolate = snapshot.extrapolate

    @property
    def rope_per_layer_type(self) -> bool:
        """Whether each layer type carries its own RoPE parameters (Gemma 3: sliding and global)."""
        return bool(_rope.rope_keys(_rope.text_config(self.model)))

    def require_tokenizer(self, what: str) -> None:
        if self.tokenizer is None:
            raise CtxlensError(
                f"'{self.name}' has no tokenizer, so {what} cannot run; save a tokenizer with the model "
                "(tokenizer.save_pretrained) or use a token-level source such as 'random'."
            )

    def __repr__(self) -> str:
        return f"LM({self.name!r}, family={self.family.name}, layers={self.n_layers}, device={self.device})"
