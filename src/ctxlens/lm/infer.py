"""Adapters inferred from a loaded model's module tree, then checked on the model itself.

A ``model_type`` with no hand-written ``Family`` (``ctxlens.lm.families``) gets one built here:

1. *Read the tree.* The block list is the shallowest ``nn.ModuleList`` with one entry per layer;
   the attention module is the block child (or grandchild) whose class is an ``*Attention``; its
   output projection is the Linear (or Conv1D) that maps the heads back to ``d_model``; the
   rotary modules are the ``*RotaryEmbedding`` modules; the MLP branches are the block children
   named or classed like an MLP / feed-forward / mixture of experts (failing those, the bare
   Linears that write back to ``d_model``); the decoder is ``base_model`` or the child holding
   the blocks.
2. *Check each claim on a short probe* (``PROBE_LEN`` tokens, a few forwards) against a route
   that does not use it, with tolerances that follow the model's dtype:
   - token losses: the LM head on the decoder's final hidden states, with the logit
     post-processing found among the config's soft-cap / scale fields and any module between
     decoder and head, equals the model's own logits (the closest candidate wins);
   - residual after the mixer (the geometry paper, Section 3): in every block, the read point that equals
     the block output when its MLP branches output zero (one forward, all blocks at once; one
     point per layer for hybrids whose layer kinds differ);
   - q/k: the attention modules hand their post-RoPE q and k, with the scale they apply, to
     ctxlens' registered attention function once per forward, with the configured head count and
     no extra score terms;
   - head masking: zeroing a head's slice of the output projection's input equals zeroing
     that head's columns of the projection weight;
   - RoPE pair layout: the first attention layer RoPE reaches gets the same input with every
     inverse frequency zeroed, so its rotated query must be the unrotated one turned by
     ``position * inv_freq``; the layout ("half" or "interleaved") for which that holds is the
     model's.

Whatever a check cannot confirm is marked unsupported with one sentence saying why
(``Family.unsupported``); nothing is guessed silently.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ctxlens.core.errors import CtxlensError
from ctxlens.lm import attention as attn_fn
from ctxlens.lm.families import Family
from ctxlens.lm.model import LM, config_int, submodule

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

PROBE_LEN = 12
ATOL = 1e-4  # relative to the scale of the compared tensors, in float32


def tolerance(dtype: torch.dtype) -> float:
    """Relative tolerance of the probe's comparisons: ATOL in float32, 16 ulps in bfloat16 / float16
    (a wrong read point or pair layout is off by order one, so this still tells them apart)."""
    return max(ATOL, 16 * torch.finfo(dtype).eps) if dtype.is_floating_point else ATOL


_MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe", "channel_mix", "mlp_block", "ff")
_MLP_CLASSES = ("MLP", "Mlp", "FeedForward", "MoE", "Moe", "Experts", "FFN", "Ffn", "SparseMoe")


# -- reading the module tree -------------------------------------------------------------------
def text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def layer_count(config) -> int | None:
    text = text_config(config)
    for attr in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        if isinstance(getattr(text, attr, None), int):
            return int(getattr(text, attr))
    return None


def find_layers(model: PreTrainedModel) -> str:
    """Dotted path of the block list: the shallowest ModuleList with one entry per layer."""
    want = layer_count(model.config)
    lists = [(n.count("."), -len(m), n) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and (want is None or len(m) == want)]
    if not lists:
        raise CtxlensError(f"Cannot find the list of {want} blocks in '{model.config.model_type}'; "
                           "add a hand-written Family for it in ctxlens.lm.families.")
    return min(lists)[2]


def _any_block_list(model: nn.Module, err: CtxlensError) -> str:
    """The shallowest, longest list of non-leaf modules (hrm_text's looped stacks, longcat's
    paired sublayers), for a model whose layer count matches no list; ``err`` when there is none."""
    lists = [(n.count("."), -len(m), n) for n, m in model.named_modules()
             if isinstance(m, nn.ModuleList) and len(m) and all(any(True for _ in b.children()) for b in m)]
    if not lists:
        raise err
    return min(lists)[2]


def _is_norm(module: nn.Module) -> bool:
    """A normalisation layer: a *Norm class with no children (dbrx's NormAttentionNorm holds attention)."""
    return "Norm" in type(module).__name__ and not any(True for _ in module.children())


def _is_attention(module: nn.Module) -> bool:
    name = type(module).__name__
    return "Attention" in name and "Norm" not in name


def find_attention(blocks: nn.ModuleList) -> str | None:
    """The path most blocks keep their attention module under: a child, or a grandchild (dbrx's
    norm_attn_norm.attn); None without attention."""
    counts: dict[str, int] = {}
    for block in blocks:
        for path, child in block.named_modules():
            if path and path.count(".") <= 1 and _is_attention(child) and not any(
                    _is_attention(block.get_submodule(path[:i])) for i in range(len(path)) if path[i] == "."):
                counts[path] = counts.get(path, 0) + 1
    return max(counts, key=lambda p: (counts[p], -p.count("."))) if counts else None


def projection_shape(module: nn.Module) -> tuple[int, int] | None:
    """(in_features, out_features) of an nn.Linear or a GPT-2 style Conv1D (weight [in, out])."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D" and getattr(module, "weight", None) is not None:
        weight = cast(torch.Tensor, module.weight)  # [in, out]
        return weight.shape[0], weight.shape[1]
    return None


def find_out_proj(attention: nn.Module, d_model: int) -> str | None:
    """The output projection: the last Linear (or Conv1D) of the attention module mapping back to d_model."""
    found = [n for n, m in attention.named_children() if (projection_shape(m) or (0, 0))[1] == d_model]
    return found[-1] if found else None


def _own_name(module: nn.Module, prefix: str) -> str:
    """The class name without the model's own prefix ("GraniteMoeHybridMambaLayer" -> "MambaLayer")."""
    name = type(module).__name__
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def mlp_branches(block: nn.Module, d_model: int, prefix: str = "") -> list[str]:
    """The MLP / feed-forward / mixture-of-experts children of a block, by attribute or class name
    (a shared expert too); failing those, the Linear children that write back to d_model (opt's fc2)."""
    children = [(a, c) for a, c in block.named_children() if not _is_attention(c) and "Norm" not in type(c).__name__]
    found = [a for a, c in children if a in _MLP_NAMES or a.lower().endswith("mlp")
             or any(k in _own_name(c, prefix) for k in _MLP_CLASSES)]
    return found or [a for a, c in children if isinstance(c, nn.Linear) and c.out_features == d_model]


def find_decoder(model: PreTrainedModel) -> str | None:
    """Path of the decoder when transformers' ``base_model`` is the whole model (llama4_text)."""
    if model.base_model is not model:
        return None
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    for name, module in model.named_children():
        if module is decoder:
            return name
    return find_layers(model).split(".")[0]  # the child that holds the blocks


def _rotary(model: nn.Module) -> list[nn.Module]:
    return [m for _, m in model.named_modules() if type(m).__name__.endswith("RotaryEmbedding")]


# -- probe helpers -----------------------------------------------------------------------------
def _error(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference relative to b's scale (inf for shapes that differ)."""
    if a.shape != b.shape:
        return float("inf")
    return float((a.float() - b.float()).abs().max()) / max(1.0, float(b.float().abs().max()))


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = max(tolerance(a.dtype), tolerance(b.dtype))  # the coarser of the two
    a, b = a.float(), b.float()
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and \
        float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))


def decoder(model: PreTrainedModel) -> nn.Module:
    path = find_decoder(model)
    return model.get_submodule(path) if path else model.base_model


def _first(out) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def _hidden(args, kwargs) -> torch.Tensor | None:
    if args and torch.is_tensor(args[0]):
        return args[0]
    for name in ("hidden_states", "activations", "hidden", "x", "input"):
        if torch.is_tensor(kwargs.get(name)):
            return kwargs[name]
    return None


@contextlib.contextmanager
def _hooks(handles: list):
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _zero_output(module, args, out):
    if isinstance(out, tuple):
        return (torch.zeros_like(out[0]),) + out[1:]
    return torch.zeros_like(out)


# -- the checks --------------------------------------------------------------------------------
def _post_candidates(config) -> list[tuple[str, Callable | None]]:
    """(description, logits_post) pairs to try: none, then each logit field of the config."""
    from ctxlens.lm.families import _scale, _softcap

    text = text_config(config)
    out: list[tuple[str, Callable | None]] = [("none", None)]
    for attr in sorted(a for a in dir(text) if "logit" in a and not a.startswith("_")):
        try:  # properties too (minicpm3's logits_scaling); some configs refuse per-layer reads
            value = getattr(text, attr)
        except Exception:  # noqa: BLE001
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if "cap" in attr:
            out.append((f"soft-cap {attr}", _softcap(attr)))
        else:
            out += [(f"scale by {attr}", _scale(attr)), (f"divide by {attr}", _divide(attr))]
    return out


def _divide(attr: str) -> Callable:
    def post(config, logits: torch.Tensor) -> torch.Tensor:
        return logits / getattr(text_config(config), attr, 1.0)

    return post


def _pre_head_candidates(model) -> list[str | None]:
    """None (the LM head reads the final hidden states), then each top-level child that could sit
    between them (modernbert-decoder's prediction head: logits = decoder(lm_head(h)))."""
    head, body = model.get_output_embeddings(), decoder(model)
    return [None, *(n for n, m in model.named_children() if m is not head and m is not body)]


def check_logits(model, ids: torch.Tensor) -> tuple[tuple[Callable | None, str | None] | None, str | None]:
    """((logits_post, pre_head), None) reproducing the model's logits from its final hidden states, or (None, why)."""
    head = model.get_output_embeddings()
    if head is None:
        return None, "the model has no output embedding (LM head) to compute losses from."
    scored: list[tuple[float, int, tuple[Callable | None, str | None]]] = []
    with torch.inference_mode():
        want = model(input_ids=ids, use_cache=False).logits.float()  # [1, seq, vocab]
        hidden = decoder(model)(input_ids=ids, use_cache=False).last_hidden_state  # [1, seq, d_model]
        for pre in _pre_head_candidates(model):
            try:
                raw = head(hidden if pre is None else model.get_submodule(pre)(hidden))  # [1, seq, vocab]
            except Exception:  # noqa: BLE001 - a child that is not a hidden -> hidden map
                continue
            # the closest candidate, not the first within tolerance: a soft-cap barely bends small logits
            for _, post in _post_candidates(model.config):
                got = raw if post is None else post(text_config(model.config), raw)
                if got.shape == want.shape and _close(got, want):
                    scored.append((float((got.float() - want).abs().max()), len(scored), (post, pre)))
    if scored:
        return min(scored)[2], None
    return None, ("the base model's final hidden states through the LM head do not reproduce the model's "
                  "logits under any logit scaling or soft-cap in its config, so chunked losses would be wrong.")


def _block_candidates(block: nn.Module, branches: list[str]) -> list[str]:
    """Read points to try in one block, each checked against the block output with its MLP zeroed."""
    sublayers = [n for n, c in block.named_children() if not _is_norm(c)]
    mixers = [n for n in sublayers if n not in branches]
    if not branches:  # one mixer and norms: the block output, if it is input + mixer output
        return [f"sum:{mixers[0]}"] if len(mixers) == 1 else []
    if not mixers:  # an MLP-only block (nemotron_h): no mixer ran, the residual is the block input
        return ["in"]
    return ([f"pre:{n}" for n, _ in block.named_children() if n not in mixers] + [f"sum:{m}" for m in mixers]
            + [f"post:{m}" for m in mixers])  # dbrx's norm_attn_norm returns the stream itself


def check_residual(model, blocks: nn.ModuleList, attn: str | None, ids: torch.Tensor) -> tuple[object, str | None]:
    """(mode or per-layer modes, None): in each block, the read point equal to its output with every
    MLP branch zeroed (one forward, all blocks at once); or (None, why)."""
    prefix = type(model).__name__.split("For")[0]
    branches = [mlp_branches(b, _d_model(model), prefix) for b in blocks]
    candidates = [_block_candidates(b, br) for b, br in zip(blocks, branches)]
    seen: dict[tuple[str, int], torch.Tensor] = {}
    truth: dict[int, torch.Tensor] = {}
    handles = []
    for i, block in enumerate(blocks):
        handles.append(block.register_forward_pre_hook(_keep(seen, ("in", i)), with_kwargs=True))
        handles.append(block.register_forward_hook(lambda m, a, o, i=i: truth.__setitem__(i, _first(o).detach())))
        for branch in branches[i]:
            handles.append(block.get_submodule(branch).register_forward_hook(_zero_output))
        for c in candidates[i]:
            if c.startswith("pre:"):
                sub = block.get_submodule(c[4:])
                handles.append(sub.register_forward_pre_hook(_keep(seen, (c, i)), with_kwargs=True))
            elif c.startswith("sum:"):
                sub = block.get_submodule(c[4:])
                handles.append(sub.register_forward_hook(
                    lambda m, a, o, key=(c, i): seen.__setitem__(key, _first(o).detach())))
            elif c.startswith("post:"):  # only a sublayer returning (stream, its normed copy), as dbrx's
                sub = block.get_submodule(c[5:])
                handles.append(sub.register_forward_hook(
                    lambda m, a, o, key=(c, i): seen.__setitem__(key, _pair_first(o))))
    with _hooks(handles), torch.inference_mode():
        decoder(model)(input_ids=ids, use_cache=False)
    # per layer, the passing read points by their error: the closest wins, not the first within
    # tolerance (in bfloat16 a small attention output hides inside the layer input's rounding)
    passing = [{c: _error(_read(seen, c, i, truth), truth[i]) for c in candidates[i]
                if i in truth and _close(_read(seen, c, i, truth), truth[i])} for i in range(len(blocks))]
    passing = [{("out" if c.startswith("sum:") and not branches[i] else c): e for c, e in p.items()}
               for i, p in enumerate(passing)]
    bad = [i for i, p in enumerate(passing) if not p]
    if bad:
        return None, (f"in layer {bad[0]} no point equals layer input + mixer output (the block output with the MLP "
                      "branch zeroed), so the residual after the mixer cannot be read.")
    common = [c for c in passing[0] if all(c in p for p in passing)]
    if common:  # one read point for every layer, the closest over all of them
        return min(common, key=lambda c: max(p[c] for p in passing)), None
    return tuple(min(p, key=p.__getitem__) for p in passing), None


def _pair_first(out) -> torch.Tensor:
    """The first of two same-shaped tensors a sublayer returns; NaN for any other output."""
    pair = isinstance(out, tuple) and len(out) == 2 and all(torch.is_tensor(o) for o in out)
    if pair and out[0].shape == out[1].shape:
        return out[0].detach()
    return torch.full((0,), float("nan"))


def _has(block: nn.Module, mode: str) -> bool:
    if mode == "out":
        return True
    try:
        block.get_submodule(mode[4:])
        return True
    except AttributeError:
        return False


def _keep(store: dict, key):
    def hook(m, args, kwargs):
        h = _hidden(args, kwargs)
        if h is not None:
            store[key] = h.detach()

    return hook


def _read(seen: dict, mode: str, i: int, truth: dict) -> torch.Tensor:
    if mode == "in":
        return seen.get(("in", i), torch.full((0,), float("nan")))
    if mode.startswith("post:"):
        return seen.get((mode, i), torch.full((0,), float("nan")))
    if mode.startswith("sum:"):
        x, y = seen.get(("in", i)), seen.get((mode, i))
        return torch.full((0,), float("nan")) if x is None or y is None or x.shape != y.shape else x + y
    return seen.get((mode, i), torch.full((0,), float("nan")))


class _Seen:
    """A recorder: the first q/k each attention module hands over, and how often it is called."""

    def __init__(self):
        self.q: dict[int, torch.Tensor] = {}  # id(module) -> [batch, heads, seq, head_dim]
        self.k: dict[int, torch.Tensor] = {}  # id(module) -> [batch, kv_heads, seq, head_dim]
        self.calls: dict[int, int] = {}

    def record(self, module, query, key):
        self.q.setdefault(id(module), query.detach())
        self.k.setdefault(id(module), key.detach())
        self.calls[id(module)] = self.calls.get(id(module), 0) + 1


def _recorded(model, ids: torch.Tensor) -> _Seen:
    seen = _Seen()
    attn_fn.push(seen)
    try:
        with torch.inference_mode():
            decoder(model)(input_ids=ids, use_cache=False)
    finally:
        attn_fn.pop(seen)
    return seen


def recording_modules(model, modules: list[nn.Module], ids: torch.Tensor) -> list[nn.Module]:
    """The attention modules that hand their q/k to ctxlens' registered attention function."""
    seen = _recorded(model, ids)
    return [m for m in modules if id(m) in seen.q]


def check_qk(model, modules: list[nn.Module], n_heads: int, ids: torch.Tensor) -> str | None:
    """None when the attention modules hand [1, heads, seq, head_dim] q/k to ctxlens, else why not."""
    seen = _recorded(model, ids)
    if not modules:
        return ("none of its attention modules runs through transformers' attention interface, so post-RoPE "
                "queries and keys cannot be captured.")
    if any(seen.calls.get(id(m), 0) > 1 for m in modules):
        return ("its attention function runs more than once per module in one forward (looped blocks, or "
                "differential attention's two maps), so one capture per layer would be ambiguous.")
    terms = sorted({t for m in modules for t in getattr(m, "_ctxlens_score_terms", ())})
    if terms:
        return (f"its attention adds {', '.join(terms)} to the q.k scores, so scores computed from captured "
                "queries and keys would not be the model's.")
    for m in modules:
        q, k = seen.q[id(m)], seen.k[id(m)]
        if q.ndim != 4 or q.shape[1] != n_heads or q.shape[2] != ids.shape[1] or k.shape[-1] != q.shape[-1]:
            return (f"its attention hands over queries of shape {tuple(q.shape)}, "
                    f"not [batch, {n_heads} heads, seq, head_dim].")
    return None


def check_head_mask(lm, layer: int, ids: torch.Tensor) -> str | None:
    """None when masking heads equals zeroing their output-projection columns, else why not."""
    proj = lm.out_proj(layer)
    n_in = cast("tuple[int, int]", projection_shape(proj))[0]  # a found out_proj has a shape (find_out_proj)
    if n_in % lm.n_heads:
        return f"its output projection takes {n_in} inputs, not a whole number per each of {lm.n_heads} heads."
    heads = sorted({0, lm.n_heads - 1})
    with torch.inference_mode():
        with lm.mask_heads({layer: heads}):
            masked = lm.decoder(input_ids=ids, use_cache=False).last_hidden_state
        width = n_in // lm.n_heads
        saved = proj.weight.detach().clone()
        columns = proj.weight if isinstance(proj, nn.Linear) else proj.weight.T  # [out, in]
        try:
            for h in heads:
                columns[:, h * width:(h + 1) * width] = 0
            zeroed = lm.decoder(input_ids=ids, use_cache=False).last_hidden_state
        finally:
            proj.weight.copy_(saved)
    if _close(masked, zeroed):
        return None
    return "zeroing a head's slice of the output projection's input does not equal zeroing its weight columns."


def inv_freq_of(rotary: nn.Module, layer_type: str | None = None) -> torch.Tensor | None:
    """[n_pairs] inverse frequencies of a rotary module (per layer type where it keeps several)."""
    if layer_type and torch.is_tensor(getattr(rotary, f"{layer_type}_inv_freq", None)):
        return getattr(rotary, f"{layer_type}_inv_freq")
    return cast(torch.Tensor, rotary.inv_freq) if torch.is_tensor(getattr(rotary, "inv_freq", None)) else None


def _inv_freq_buffers(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, n) for m in _rotary(model) for n, b in m.named_buffers(recurse=False) if n.endswith("inv_freq")]


@contextlib.contextmanager
def _no_rotation(model: nn.Module):
    """Within the block every rotary module's inverse frequencies are zero: RoPE rotates nothing."""
    saved = [(m, n, getattr(m, n).clone()) for m, n in _inv_freq_buffers(model)]
    try:
        for m, n, _ in saved:
            getattr(m, n).zero_()
        yield
    finally:
        for m, n, b in saved:
            getattr(m, n).copy_(b)


def check_rope_layout(model, modules: list[nn.Module], layer_types: list[str | None],
                      ids: torch.Tensor) -> tuple[str | None, str | None]:
    """("half" | "interleaved", None) for the pair layout under which q rotates by p * inv_freq, or (None, why).

    ``modules``: the attention modules in layer order, ``layer_types`` their types. The first one
    whose query changes when every inverse frequency is zeroed is the first that applies RoPE
    (flint's first layers use none); nothing before it depends on RoPE, so unrotated it receives
    the same input and returns the unrotated query.
    """
    rotated, plain = _recorded(model, ids).q, None
    with _no_rotation(model):
        plain = _recorded(model, ids).q
    first = next((i for i, m in enumerate(modules) if id(m) in rotated and id(m) in plain
                  and not torch.equal(rotated[id(m)], plain[id(m)])), None)
    if first is None:
        return None, "zeroing its rotary modules' inverse frequencies changes no attention layer's queries."
    rotaries = _rotary(model)
    inv = inv_freq_of(rotaries[0], layer_types[first]) if rotaries else None
    if inv is None:
        return None, "it has no rotary-embedding module with inverse frequencies to check against."
    inv = inv.detach().clone()
    tol = tolerance(rotated[id(modules[first])].dtype)
    q, q0 = rotated[id(modules[first])][0].double(), plain[id(modules[first])][0].double()  # [heads, seq, head_dim]
    n = inv.numel()
    if 2 * n > q.shape[-1]:
        return None, f"its rotary module has {n} frequency pairs but the heads have only {q.shape[-1]} dims."
    angle = torch.arange(q.shape[1], dtype=torch.float64, device=q.device)[:, None] * inv.double().to(q.device)
    for offset in (0, q.shape[-1] - 2 * n):
        for layout in ("half", "interleaved"):
            z, z0 = _pairs(q[..., offset:], n, layout), _pairs(q0[..., offset:], n, layout)  # [heads, seq, n_pairs]
            want = z0 * torch.polar(torch.ones_like(angle), angle)  # unrotated pair rotated by position x inv_freq
            # the rope type's attention scaling multiplies rotated and unrotated queries alike
            if float((z - want).abs().max() / z.abs().max().clamp_min(1e-12)) < tol:
                if offset:
                    return None, (f"its rotary dims are the last {2 * n} of each {q.shape[-1]}-dim head (latent "
                                  "attention), and the RoPE analyses read them from the front.")
                return layout, None
            backwards = z0 * torch.polar(torch.ones_like(angle), -angle)
            if float((z - backwards).abs().max() / z.abs().max().clamp_min(1e-12)) < tol:
                return None, ("its queries turn by minus position x inv_freq (a sign-flipped rotate_half), "
                              "and the RoPE analyses assume the usual direction.")
    return None, ("its first attention layer's queries are not the unrotated queries turned by position x inv_freq "
                  "under either pair layout, so the RoPE analyses cannot apply.")


def _pairs(x: torch.Tensor, n: int, layout: str) -> torch.Tensor:
    """[..., head_dim] -> [..., n] complex pairs (rotary dims only)."""
    if layout == "half":
        return torch.complex(x[..., :n], x[..., n:2 * n])
    return torch.complex(x[..., 0:2 * n:2], x[..., 1:2 * n:2])


# -- assembling the family ---------------------------------------------------------------------
def _probe_ids(model, length: int = PROBE_LEN) -> torch.Tensor:
    vocab = int(model.get_output_embeddings().weight.shape[0]) if model.get_output_embeddings() is not None else 256
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(min(3, vocab - 1), min(vocab, 32000), (1, length), generator=gen)
    return ids.to(next(model.parameters()).device)


def _kind(n_attention: int, n_layers: int, model) -> str:
    if n_attention == n_layers:
        return "transformer"
    if n_attention:
        return "hybrid"
    ssm = any("Mamba" in type(m).__name__ or "SSM" in type(m).__name__ for m in model.modules())
    return "ssm" if ssm else "recurrent"


def _position(model, rope_layout: str | None) -> str:
    text = text_config(model.config)
    if rope_layout or _rotary(model):
        return "rope"
    if getattr(text, "alibi", False) or "alibi" in str(getattr(text, "position_embedding_type", "")):
        return "alibi"
    if any(n.endswith(("wpe", "embed_positions", "position_embeddings")) for n, _ in model.named_modules()):
        return "learned"
    return "none"


def infer_family(model) -> Family:
    """A ``Family`` for ``model`` (its attention already routed through ctxlens), checked on a probe."""
    config = model.config
    try:
        layers, irregular = find_layers(model), None
    except CtxlensError as err:  # token losses need no block list: load, and refuse what needs one
        layers = _any_block_list(model, err)
        irregular = str(err).split(";")[0].replace("Cannot find", "ctxlens cannot find")
    blocks = model.get_submodule(layers)
    attn = find_attention(blocks)
    ids = _probe_ids(model)
    refused: dict[str, str] = {}
    try:
        found, why = check_logits(model, ids)
    except Exception as err:  # noqa: BLE001 - the model's own forward failed on the probe
        raise CtxlensError(f"'{config.model_type}' fails its own forward on a {PROBE_LEN}-token probe "
                           f"({type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}); "
                           "check its config.") from None
    if why or found is None:
        raise CtxlensError(f"ctxlens cannot compute token losses for '{config.model_type}': {why}")
    post, pre_head = found
    resid, why = _attempt(check_residual, model, blocks, attn, ids)
    if why:
        refused["residual"] = why
    found_attn = {i: submodule(b, attn) for i, b in enumerate(blocks)}
    named = {i: m for i, m in found_attn.items() if m is not None and _is_attention(m)}
    recording = _attempt(recording_modules, model, list(named.values()), ids)
    recording = recording if isinstance(recording, list) else []
    attn_layers = tuple(i for i, m in named.items() if any(m is r for r in recording))
    modules = [named[i] for i in attn_layers] or list(named.values())
    text = text_config(config)
    n_heads = config_int(text, "num_attention_heads", "n_head")
    interface = bool(modules)
    out_proj, rope_layout = None, None
    if modules and not n_heads:
        modules, interface = [], False
        refused["qk"] = refused["head_mask"] = ("its config gives no single number of attention heads "
                                                "(none, or one per layer).")
    if modules:
        why = _attempt(check_qk, model, [named[i] for i in attn_layers], n_heads, ids)
        if why:
            refused["qk"] = refused["rope"] = why
            interface = False
        out_proj = find_out_proj(modules[0], _d_model(model))
        if out_proj is None:
            refused["head_mask"] = "no Linear inside its attention module maps the heads back to the model width."
        layer_types = getattr(text, "layer_types", None)
        index = [next(i for i, b in enumerate(blocks) if submodule(b, attn) is m) for m in modules]
        types = [layer_types[i] if isinstance(layer_types, (list, tuple)) and len(layer_types) > i else None
                 for i in index]
        if interface and _rotary(model):
            rope_layout, why = _attempt(check_rope_layout, model, modules, types, ids)
            if why:
                refused["rope"] = why
    if irregular:  # the block list was not found: only token losses were checked
        for analysis in ("residual", "qk", "rope", "head_mask"):
            refused[analysis] = f"{irregular} (its blocks are not one list of its configured layers)."
    family = Family(
        name=config.model_type, kind=_kind(len(named), len(blocks), model), position=_position(model, rope_layout),
        layers=layers, resid=resid or "out", attn=attn if modules else None, out_proj=out_proj, interface=interface,
        base=find_decoder(model), pre_head=pre_head, attn_layers=attn_layers if interface else None,
        rope_layout=rope_layout, logits_post=post, unsupported=tuple(refused.items()), inferred=True,
        notes="adapter inferred from the module tree and checked on the model at load",
    )
    if "head_mask" in family.supports:
        layer = next(i for i, b in enumerate(blocks) if submodule(b, attn) is modules[0])
        why = _attempt(check_head_mask, LM(model, None, family, name=config.model_type), layer, ids)
        if why:
            family = _refuse(family, "head_mask", why)
    return family


def _attempt(check: Callable, *args):
    """``check(*args)``; a check that raises refuses its analysis with the error's first line."""
    try:
        return check(*args)
    except Exception as err:  # noqa: BLE001 - any failure of a probe means "not confirmed"
        why = f"its check raised {type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"
        return (None, why) if check in (check_residual, check_rope_layout) else why


def _d_model(model) -> int:
    return int(model.get_input_embeddings().weight.shape[1])


def _refuse(family: Family, analysis: str, why: str) -> Family:
    import dataclasses

    return dataclasses.replace(family, unsupported=(*family.unsupported, (analysis, why)))
