"""The model's own cache of a prompt prefix: prefill it once, copy it, crop it, continue it.

A depth sweep of the long-sequence paper ("How Well Can a Long Sequence Model Model Long
Sequences?", Section 4, Tables 2-3) puts one needle at 11 depths of the same haystack, so its
prompts share their tokens up to the needle. The cache a model holds after a prefix is what its
prefill of any longer prompt holds at that point, so the prefix needs computing once
(``ctxlens.tasks.prefix`` decides which prefixes, ``ctxlens.tasks.backends`` decodes from them).

Whether a model's cache can be reused is checked on the model, not read from a list of names:
``reuse_problem`` prefills a random prefix, copies its cache to a batch of two and lets
``generate`` continue both rows; their logits must equal a fresh ``generate`` of the whole
sequence to the rounding of the model's dtype. On transformers 5.24's tiny models that holds for
full-attention caches (llama, gpt2, gpt_neox, bloom), sliding windows (mistral) and Gemma 3's
five-sliding-one-global cache. It fails for mamba, mamba2, falcon_mamba, jamba, bamba, zamba2
and falcon_h1 (their state layers cannot be repeated over a batch; even at batch one a
multi-token continuation of mamba's state drifts by 1e-4 to 3e-2), for mpt (its ALiBi biases
are off after a cache) and for recurrent_gemma, rwkv and xlstm (no transformers ``Cache`` comes
back): those models prefill every prompt on its own.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import Cache  # checked as Any (pyproject: follow_imports = "skip")

    from ctxlens.lm.model import LM, TokenIds

# Tokens per forward when a cache is continued. A causal attention kernel cannot take the cache's
# offset, so a block of new tokens attends to the whole (cache + block) rectangle under a mask and
# computes the masked-away half of the block's own square too: blocks of this size keep that
# waste at block/2 keys per token (a 2K-token continuation in one block cost 15 % more than a
# fresh 2K prefill on a CPU; in blocks of 512, about what its tokens should cost).
BLOCK = 512


def prefill(lm: LM, ids: TokenIds, cache: Cache | None = None) -> Cache | None:
    """The cache after ids [n] or [batch, n], continuing ``cache`` (extended in place; None: a
    fresh one, from one causal forward); a continuation runs in blocks of ``BLOCK`` tokens. The
    decoder runs without the LM head, so no logits are computed."""
    x = torch.as_tensor(ids, dtype=torch.long, device=lm.device)
    x = x[None] if x.ndim == 1 else x  # [batch, n]
    step = BLOCK if cache is not None else max(x.shape[1], 1)
    with torch.inference_mode():
        for s in range(0, x.shape[1], step):
            cache = getattr(lm.decoder(input_ids=x[:, s:s + step], cache=cache, use_cache=True), "cache", None)
    return cache


def copied(cache: Cache, keep: int, length: int, batch: int = 1) -> Cache:
    """A copy of ``cache`` (over ``length`` tokens) cut to its first ``keep`` tokens and repeated to
    ``batch`` rows; the original is untouched. Cutting needs ``croppable(cache)``."""
    out = copy.deepcopy(cache)
    if keep < length:
        out.crop(keep - length)  # transformers crops by a negative count of tokens to drop
    if batch > 1:
        out.batch_repeat_interleave(batch)
    return out


def croppable(cache: Cache) -> bool:
    """Whether every layer of ``cache`` keeps all its past tokens, so it can be cut back to a
    shorter prefix: full attention yes; a sliding window (only its last tokens kept) or a
    recurrent state no."""
    return all(getattr(layer, "is_croppable", False) and not getattr(layer, "is_sliding", False)
               for layer in getattr(cache, "layers", [None]))


def nbytes(cache: Cache) -> int:
    """Bytes held by the tensors of ``cache``'s layers (keys, values, states)."""
    total = 0
    for layer in getattr(cache, "layers", []):
        for value in vars(layer).values():  # tensors, or dicts / lists of them (state layers)
            items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            total += sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))
    return total


def reuse_problem(lm: LM, n: int = 40, cut: int = 25, new: int = 2) -> str:
    """'' when a copied prefix cache continues exactly like a fresh prefill (see the module
    docstring), else why not. Runs two short generations of ``n`` random tokens: the prefix is
    ``cut`` tokens, longer than the tiny models' sliding windows; it is cheap, so callers may run
    it once per model."""
    from transformers import Cache, GenerationConfig

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, min(lm.vocab_size, 1000), (1, n), generator=g).to(lm.device)  # [1, n]
    config = GenerationConfig(max_new_tokens=new, do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None,
                              output_logits=True, return_dict_in_generate=True)
    kwargs = {"generation_config": config}
    try:
        with torch.inference_mode():
            fresh = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
            cache = prefill(lm, ids[0, :cut].tolist())
            if not isinstance(cache, Cache):
                return f"its forward returns no transformers Cache ({type(cache).__name__})"
            two = ids.repeat(2, 1)  # [2, n]
            reused = lm.model.generate(input_ids=two, attention_mask=torch.ones_like(two),
                                       cache=copied(cache, cut, cut, batch=2), **kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of the reuse path means: do not reuse
        return f"continuing a copied cache fails ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    eps = torch.finfo(next(lm.model.parameters()).dtype).eps
    for a, b in zip(fresh.logits, reused.logits):  # [1, vocab], [2, vocab] per new token
        tol = 16 * eps * max(1.0, float(a.abs().max()))
        drift = float((b.float() - a.float()).abs().max())
        if drift > tol:
            return f"continuing a copied cache changes the logits by {drift:.2g} (over {tol:.2g})"
    return ""
