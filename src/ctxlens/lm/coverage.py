"""Coverage: which analyses pass their independent checks on every decoder type transformers has.

For each in-scope model type of transformers' causal-LM mapping (``ctxlens.lm.tiny_any``) this
builds a tiny random model, wraps it with ``ctxlens.lm.from_model`` (the path a loaded model
takes, hand-written family or inferred adapter) and runs five checks, each against a truth
that does not go through ctxlens:

- ``token_loss``: ``lm.token_losses`` vs ``F.cross_entropy`` of the model's own logits;
- ``residual``:   ``lm.capture(residual=...)`` at every layer vs the block output of a forward
                  in which that layer's MLP / FFN / MoE branch outputs zero (the geometry paper, Section 3:
                  the residual stream after the context-mixing sublayer);
- ``qk``:         softmax of captured post-RoPE q k^T (scaled, soft-capped, causal / sliding mask,
                  attention sinks) vs transformers' eager attention probabilities;
- ``head_mask``:  ``lm.mask_heads`` logits vs the model with that head's output-projection
                  weight columns zeroed (the rope-distance paper, Section 5);
- ``rope``:       ``lm.set_rope(theta=...)`` logits vs a model built from the edited config with
                  the same weights (the rope-distance paper, Section 4.2.2).

Each check ends ``pass``, ``fail`` (what differed, or the exception's first line),
``unsupported`` (the adapter declines the analysis for this model, with its reason) or ``n/a``
(the model has no attention / no MLP branch / no RoPE). Every check builds its own copy of the
model (same seed, same weights), so one check's edits never reach another.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import cast

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModelForCausalLM

from ctxlens.core.errors import unknown
from ctxlens.lm import tiny_any
from ctxlens.lm.attention import scaling_of
from ctxlens.lm.loading import from_model
from ctxlens.lm.rope import rotary_modules

ANALYSES = ("token_loss", "residual", "qk", "head_mask", "rope")
STATUSES = ("pass", "fail", "unsupported", "n/a")
SEQ = 24  # tokens per probe; longer than the tiny sliding windows (16), so their masks bite
RTOL = 1e-4  # allowed max |difference| relative to max(1, max |reference|)

# Direct children of a block that are its MLP / FFN / MoE branch (by attribute or class name).
_MLP_NAMES = ("mlp", "feed_forward", "ffn", "mlp_block", "block_sparse_moe", "moe", "shared_mlp", "channel_mixer",
              "shared_experts", "shared_expert", "experts", "feedforward", "moe_block", "dense_mlp",
              "fc2")  # fc2: the second MLP linear of blocks that hold fc1/fc2 directly (opt, xglm, biogpt)
# class-name endings (not substrings: "Qwen3_5MoeGatedDeltaNet" is a mixer, not an MoE)
_MLP_CLASSES = ("MLP", "Mlp", "FeedForward", "Moe", "MoE", "MoeBlock", "MoEBlock", "Experts", "FFN", "Ffn",
                "SparseMoe", "MoELayer", "MoeLayer")


@dataclass
class Check:
    status: str  # pass | fail | unsupported | n/a
    reason: str = ""


@dataclass
class TypeCoverage:
    """The five checks of one model type."""

    model_type: str
    kind: str = "?"
    built: Check = field(default_factory=lambda: Check("pass"))
    checks: dict[str, Check] = field(default_factory=dict)
    seconds: float = 0.0


def _first_line(err: BaseException) -> str:
    return tiny_any._first_line(err)


def _close(got: torch.Tensor, want: torch.Tensor, what: str) -> Check:
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


# -- models ---------------------------------------------------------------------------------------
class Builder:
    """Fresh copies of one tiny model: the one ctxlens wraps and independent references."""

    def __init__(self, model_type: str, seed: int = 0, build: Callable | None = None):
        self.model_type, self.seed = model_type, seed
        self._build = build or (lambda **kw: tiny_any.build_tiny(model_type, seed=seed, **kw))
        self.state = self._build().state_dict()

    def model(self, **config_overrides) -> transformers.PreTrainedModel:
        """A new model of the same weights (config overrides go to the tiny config)."""
        m = self._build(**config_overrides)
        m.load_state_dict(self.state)
        return m.eval()

    def from_config(self, config, attn_implementation: str | None = None) -> torch.nn.Module:
        kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
        torch.manual_seed(self.seed)
        m = AutoModelForCausalLM.from_config(config, dtype=torch.float32, **kwargs)
        m.load_state_dict(self.state)
        return m.eval()

    def lm(self):
        return from_model(self.model(), name=self.model_type)


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()  # [1, seq, vocab]


def _unsupported(lm, analysis: str) -> Check | None:
    try:
        lm.family.require(analysis, lm.name)
    except Exception as err:  # noqa: BLE001 - the adapter's own sentence is the reason
        msg = str(err).split("; pick")[0]
        return Check("unsupported", msg.split(" analysis: ", 1)[-1])
    return None


def _module_name(model: torch.nn.Module, module: torch.nn.Module) -> str:
    return next(n for n, m in model.named_modules() if m is module)


# -- token losses -----------------------------------------------------------------------------------
def check_token_loss(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    got = lm.token_losses(ids)[0]  # [seq-1]
    logits = _logits(b.model(), ids)[0]  # [seq, vocab], the model's own forward
    want = F.cross_entropy(logits[:-1], ids[0, 1:], reduction="none")
    return _close(got, want, "token losses")


# -- residual after the mixer --------------------------------------------------------------------------
def mlp_children(block: torch.nn.Module) -> list[torch.nn.Module]:
    """The block's MLP / FFN / MoE branches (direct children), found by attribute or class name."""
    out: list[torch.nn.Module] = []
    linears: list[torch.nn.Module] = []
    for name, child in block.named_children():
        cls = type(child).__name__
        if "Attention" in cls or "Norm" in cls:
            continue
        if name in _MLP_NAMES or cls.endswith(_MLP_CLASSES):
            out.append(child)
        elif isinstance(child, torch.nn.Linear):
            linears.append(child)
    if out:
        return out
    # no MLP module: its last Linear writes the branch back to the stream (opt's fc1 -> fc2)
    return linears[-1:] if len(linears) >= 2 else []


def _zero_output(module, args, kwargs, out):
    """The branch outputs zero; an MLP that adds the residual itself (bloom's) returns that residual."""
    first = out[0] if isinstance(out, (tuple, list)) else out
    residual = kwargs.get("residual", args[1] if len(args) > 1 else None)
    zero = residual if isinstance(residual, torch.Tensor) and residual.shape == first.shape else torch.zeros_like(first)
    return (zero,) + tuple(out[1:]) if isinstance(out, (tuple, list)) else zero


def _block_output_without_mlp(model, layers_path: str, layer: int, ids: torch.Tensor) -> torch.Tensor | None:
    """[1, seq, d_model] block ``layer``'s output when its MLP branches output zero (None: no MLP)."""
    block = model.get_submodule(layers_path)[layer]
    mlps = mlp_children(block)
    if not mlps:
        return None
    seen: dict = {}

    def keep(module, args, out):
        seen.setdefault("h", out[0] if isinstance(out, (tuple, list)) else out)

    handles = [m.register_forward_hook(_zero_output, with_kwargs=True) for m in mlps]
    handles.append(block.register_forward_hook(keep))
    try:
        _logits(model, ids)
    finally:
        for h in handles:
            h.remove()
    return seen["h"]


def _input_plus_mixer(model, layers_path: str, layer: int, ids: torch.Tensor) -> torch.Tensor | None:
    """[1, seq, d_model] block input + output of its one non-norm child (a mamba block's mixer):
    what the block output must be if it is the residual after the mixer; None for other blocks."""
    block = model.get_submodule(layers_path)[layer]
    mixers = [c for _, c in block.named_children() if "Norm" not in type(c).__name__]
    if len(mixers) != 1:
        return None
    seen: dict = {}

    def keep_in(module, args, kwargs):
        seen.setdefault("x", args[0] if args else kwargs.get("hidden_states"))

    def keep_out(module, args, out):
        seen.setdefault("y", out[0] if isinstance(out, (tuple, list)) else out)

    handles = [block.register_forward_pre_hook(keep_in, with_kwargs=True), mixers[0].register_forward_hook(keep_out)]
    try:
        _logits(model, ids)
    finally:
        for h in handles:
            h.remove()
    return seen["x"] + seen["y"]


def check_residual(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    declined = _unsupported(lm, "residual")
    if declined:
        return declined
    positions = list(range(0, ids.shape[1], 5))
    cap = lm.capture(ids, residual="all", positions=positions)
    checked, skipped = [], []
    for layer in range(lm.n_layers):
        mode = lm.family.resid_mode(lm.config, layer)
        want = _block_output_without_mlp(b.model(), lm.family.layers, layer, ids)
        if want is None:
            if mode != "out":
                return Check("fail", f"layer {layer} has no MLP branch to zero but the residual is read at '{mode}'")
            want = _input_plus_mixer(b.model(), lm.family.layers, layer, ids)
            if want is None:
                skipped.append(layer)
                continue
        res = _close(cap.residual[layer], want[:, positions], f"layer {layer}")
        if res.status != "pass":
            return res
        checked.append(layer)
    if not checked:
        return Check("n/a", "no block has an MLP branch; the residual is the block output")
    return Check("pass", f"layers {checked}" + (f" (no MLP: {skipped})" if skipped else ""))


# -- post-RoPE q/k vs eager attention ------------------------------------------------------------------
_Q_PROJECTIONS = ("q_proj", "qkv_proj", "c_attn", "query_key_value", "Wqkv", "q_a_proj", "query")


def has_attention(model: torch.nn.Module) -> bool:
    """Any softmax-attention module (class name with 'Attention', not linear attention)."""
    return any("Attention" in type(m).__name__ and "Linear" not in type(m).__name__
               and any(hasattr(m, a) for a in _Q_PROJECTIONS)
               for m in model.modules())


def sliding_window(module) -> int | None:
    """The module's window: its own attribute, else its layer type in the config, else the config's."""
    if hasattr(module, "sliding_window"):
        return module.sliding_window
    config = getattr(module, "config", None)
    types = getattr(config, "layer_types", None)
    if types is not None and getattr(module, "layer_idx", None) is not None:
        return getattr(config, "sliding_window", None) if types[module.layer_idx] == "sliding_attention" else None
    return getattr(config, "sliding_window", None)


def probabilities_from_qk(q: torch.Tensor, k: torch.Tensor, module,
                          allowed: torch.Tensor | None = None) -> torch.Tensor:
    """[heads, n, n] softmax(q k^T * scaling) with the module's soft-cap, mask and sinks.

    q, k: [heads, n, head_dim] post-RoPE over positions 0..n-1 (k with kv heads repeated).
    allowed: [n, n] or [heads, n, n] bool mask (default: causal, with the module's sliding window).
    """
    n = q.shape[1]
    scores = q.float() @ k.float().transpose(-1, -2) * scaling_of(module)
    config = getattr(module, "config", None)
    cap = getattr(module, "attn_logit_softcapping", None) or getattr(config, "attn_logit_softcapping", None)
    if cap:
        scores = torch.tanh(scores / cap) * cap
    if allowed is None:
        i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
        allowed = j <= i
        window = sliding_window(module)
        if window:
            allowed = allowed & (j > i - int(window))
    scores = scores.masked_fill(~allowed, float("-inf"))
    sinks = getattr(module, "sinks", None)
    if isinstance(sinks, torch.Tensor):
        sink = sinks.float().reshape(-1, 1, 1).expand(-1, n, 1)
        return torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    return torch.softmax(scores, dim=-1)


def _eager_probabilities(model, module_name: str, ids: torch.Tensor) -> torch.Tensor:
    """[heads, n, n] attention probabilities of ``module_name`` in an eager forward."""
    seen = {}

    def hook(m, args, out):
        seen["p"] = out[1]

    handle = model.get_submodule(module_name).register_forward_hook(hook)
    try:
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False, output_attentions=True)
    finally:
        handle.remove()
    if seen.get("p") is None:
        raise RuntimeError(f"eager attention of {module_name} returned no probabilities")
    return seen["p"][0]


def check_qk(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    if not has_attention(lm.model):
        return Check("n/a", "the model has no softmax attention")
    declined = _unsupported(lm, "qk")
    if declined:
        return declined
    layers = lm.attention_layers()
    if not layers:
        return Check("fail", "the model has attention but the adapter finds no attention layer")
    eager = b.from_config(copy.deepcopy(b.model().config), attn_implementation="eager")
    for layer in layers:
        module = lm.attention(layer)
        cap = lm.capture(ids, qk=[layer])
        want = _eager_probabilities(eager, _module_name(lm.model, module), ids)  # [heads, n, n]
        # the mask (causal, sliding, chunked ...) is read off the eager probabilities: what is checked is q and k
        got = probabilities_from_qk(cap.queries[layer][0], cap.keys[layer][0], module, allowed=want > 0)
        if isinstance(getattr(module, "sinks", None), torch.Tensor):  # any sink formula scales whole rows
            got, want = got / got.sum(-1, keepdim=True), want / want.sum(-1, keepdim=True)
        res = _close(got, want, f"layer {layer} probabilities")
        if res.status != "pass":
            return res
    return Check("pass", f"layers {layers}")


# -- head masking vs zeroed output-projection columns ----------------------------------------------------
def _zero_head_columns(proj: torch.nn.Module, head: int, n_heads: int) -> None:
    """Zero the weights that read head ``head`` of the projection's input."""
    w = cast(torch.Tensor, proj.weight)  # Linear: [out, in]; GPT-2's Conv1D: [in, out]
    conv1d = type(proj).__name__ == "Conv1D"
    width = (w.shape[0] if conv1d else w.shape[1]) // n_heads
    with torch.no_grad():
        if conv1d:
            w[head * width:(head + 1) * width, :] = 0
        else:
            w[:, head * width:(head + 1) * width] = 0


def check_head_mask(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    if not has_attention(lm.model):
        return Check("n/a", "the model has no softmax attention")
    declined = _unsupported(lm, "head_mask")
    if declined:
        return declined
    layers = lm.attention_layers()
    if not layers:
        return Check("fail", "the model has attention but the adapter finds no attention layer")
    layer, head = layers[-1], lm.n_heads - 1
    with lm.mask_heads({layer: [head]}):
        got = _logits(lm.model, ids)
    ref = b.model()
    attn = lm.attention(layer)
    has_config = hasattr(attn, "config")
    own = (getattr(attn, "num_heads", 0) or getattr(attn.config, "num_attention_heads", 0)) if has_config else 0
    n_heads = int(own) or lm.n_heads
    _zero_head_columns(ref.get_submodule(_module_name(lm.model, lm.out_proj(layer))), head, n_heads)
    want = _logits(ref, ids)
    if torch.allclose(want, _logits(b.model(), ids)):
        return Check("fail", f"zeroing head {head} of layer {layer} changes nothing; the check cannot tell")
    res = _close(got, want, f"layer {layer} head {head} logits")
    return Check("pass", f"layer {layer} head {head}") if res.status == "pass" else res


# -- set_rope vs a model built from the edited config ------------------------------------------------------
def _thetas(params) -> list[float]:
    if not isinstance(params, dict):
        return []
    if "rope_theta" in params:
        return [float(params["rope_theta"])]
    return [t for p in params.values() for t in _thetas(p)]


def _text(config):
    """The config that holds the RoPE parameters (the text config of a multimodal wrapper)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def check_rope(b: Builder, ids: torch.Tensor) -> Check:
    lm = b.lm()
    if not rotary_modules(lm.model):  # rope_parameters alone (granitemoehybrid's NoPE default) rotate nothing
        return Check("n/a", "the model has no rotary embedding")
    declined = _unsupported(lm, "rope")
    if declined:
        return declined
    original = copy.deepcopy(b.model().config)
    theta = 4.0 * max(_thetas(_text(original).rope_parameters) or [10000.0])
    params = lm.set_rope(theta=theta)
    if theta not in _thetas(params):
        return Check("fail", f"set_rope(theta={theta:g}) returned parameters without that theta: {params}")
    got = _logits(lm.model, ids)
    edited = copy.deepcopy(original)
    old = _text(original).rope_parameters
    if "rope_theta" in old:  # one RoPE for every layer
        _text(edited).rope_parameters = copy.deepcopy(params)
    else:  # a RoPE per layer type: set_rope's default edits the global layers (every type without one)
        present = set(getattr(_text(original), "layer_types", None) or old)  # types some layer has
        want_types = [t for t in old if old[t] is not None and t == "full_attention" and t in present] or \
            [t for t in old if old[t] is not None and t in present]
        if sorted(params) != sorted(want_types):
            return Check("fail", f"set_rope's default changed layer types {sorted(params)}, not {want_types}")
        new = copy.deepcopy(dict(old))
        for t in want_types:
            new[t] = {**new[t], "rope_theta": theta}
        _text(edited).rope_parameters = new
    want = _logits(b.from_config(edited), ids)
    if torch.allclose(want, _logits(b.model(), ids)):
        return Check("fail", f"theta {theta:g} changes nothing at {ids.shape[1]} tokens; the check cannot tell")
    res = _close(got, want, f"logits at theta {theta:g}")
    return Check("pass", f"theta {theta:g}") if res.status == "pass" else res


CHECKS: dict[str, Callable[[Builder, torch.Tensor], Check]] = {
    "token_loss": check_token_loss, "residual": check_residual, "qk": check_qk,
    "head_mask": check_head_mask, "rope": check_rope,
}


# -- one type, all types ------------------------------------------------------------------------------
def _kind(builder: Builder) -> str:
    try:
        return builder.lm().family.kind
    except Exception:  # noqa: BLE001 - no adapter: the checks say why
        return "?"


def check_type(model_type: str, seed: int = 0, build: Callable | None = None,
               checks: Iterable[str] = ANALYSES) -> TypeCoverage:
    """Build ``model_type`` tiny and run the named checks; exceptions become failures."""
    start = time.perf_counter()
    row = TypeCoverage(model_type)
    try:
        builder = Builder(model_type, seed, build)
    except Exception as err:  # noqa: BLE001 - a type that does not build is a reported failure
        row.built = Check("fail", _first_line(err))
        row.checks = {a: Check("fail", "does not build") for a in checks}
        row.seconds = time.perf_counter() - start
        return row
    row.kind = _kind(builder)
    ids = probe_ids(int(builder.model().get_output_embeddings().weight.shape[0]))
    for name in checks:
        try:
            row.checks[name] = CHECKS[name](builder, ids)
        except Exception as err:  # noqa: BLE001 - every exception is a failed check with its first line
            row.checks[name] = Check("fail", _first_line(err))
    row.seconds = time.perf_counter() - start
    return row


def run(types: Iterable[str] | None = None, threads: int = 1,
        progress: Callable[[TypeCoverage], None] | None = None) -> dict:
    """The coverage of ``types`` (default: every in-scope type) and the out-of-scope list, as JSON-able dict."""
    import logging
    import warnings

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    start = time.perf_counter()
    rows, out = [], []
    wanted = list(types) if types is not None else None
    for t in wanted or []:
        if t not in tiny_any.causal_lm_types():
            raise unknown("model type", t, tiny_any.causal_lm_types())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.getLogger("ctxlens").setLevel(logging.ERROR)
            for t in tiny_any.causal_lm_types() if wanted is None else wanted:
                category, reason = tiny_any.scope(t)
                if category != tiny_any.IN_SCOPE:
                    out.append({"type": t, "category": category, "reason": reason})
                    continue
                row = check_type(t)
                rows.append(row)
                if progress:
                    progress(row)
    finally:
        torch.set_num_threads(previous)
        transformers.logging.set_verbosity(verbosity)
    return {
        "transformers": transformers.__version__, "torch": torch.__version__, "threads": threads,
        "seconds": round(time.perf_counter() - start, 2),
        "types": [asdict(r) for r in rows], "out_of_scope": out,
    }


def counts(result: dict) -> dict[str, dict[str, int]]:
    """{analysis: {status: number of types}} over the in-scope types of ``result``."""
    table = {a: dict.fromkeys(STATUSES, 0) for a in ("built", *ANALYSES)}
    for row in result["types"]:
        table["built"][row["built"]["status"]] += 1
        for a, c in row["checks"].items():
            table[a][c["status"]] += 1
    return table


# -- rendering -----------------------------------------------------------------------------------------
_MARK = {"pass": "pass", "fail": "FAIL", "unsupported": "unsup.", "n/a": "n/a"}


def _grid(header: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        line = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731
        return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    return [line(header), *(line(r) for r in rows)]


def render(result: dict, markdown: bool = False, per_type: bool = True) -> str:
    """The coverage table (one row per type unless ``per_type`` is off), the counts per analysis,
    the failures and declines with reasons, the out-of-scope types."""
    rows = result["types"]
    out = []
    table = [[r["model_type"], r["kind"],
              *(_MARK[r["checks"][a]["status"]] if a in r["checks"] else "-" for a in ANALYSES)] for r in rows]
    if per_type:
        out += _grid(["type", "kind", *ANALYSES], table, markdown)
    n = len(rows)
    built = sum(r["built"]["status"] == "pass" for r in rows)
    out += ["", f"{n} decoder-only text types checked ({built} build) in {result['seconds']:.0f} s "
                f"(transformers {result['transformers']}, {result['threads']} thread):", ""]
    c = counts(result)
    out += _grid(["analysis", *STATUSES], [[a, *(str(c[a][s]) for s in STATUSES)] for a in ANALYSES], markdown)
    failures = [[r["model_type"], a, ch["reason"]] for r in rows
                for a, ch in ([("built", r["built"])] if r["built"]["status"] == "fail" else r["checks"].items())
                if ch["status"] == "fail"]
    if failures:
        out += ["", "Failures:", ""] + _grid(["type", "analysis", "reason"], failures, markdown)
    unsupported = [[r["model_type"], a, ch["reason"]] for r in rows for a, ch in r["checks"].items()
                   if ch["status"] == "unsupported"]
    if unsupported:
        out += ["", "Declined by the adapter:", ""] + _grid(["type", "analysis", "reason"], unsupported, markdown)
    if result["out_of_scope"]:
        out += ["", f"Out of scope ({len(result['out_of_scope'])} types, not counted):", ""]
        by_cat: dict[str, list[str]] = {}
        for o in result["out_of_scope"]:
            by_cat.setdefault(o["category"], []).append(o["type"])
        out += _grid(["category", "types"], [[k, ", ".join(v)] for k, v in by_cat.items()], markdown)
    return "\n".join(out)


__all__ = ["ANALYSES", "CHECKS", "Check", "STATUSES", "TypeCoverage", "check_type", "counts", "render", "run"]
