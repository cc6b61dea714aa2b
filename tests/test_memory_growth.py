"""Big-O hygiene (issue 9, part 5): no experiment's memory grows faster than linearly in length,
nor with layers x length x d_model, unless the user asked for exactly that.

Every experiment that runs a language model over token windows is run on a tiny llama at two
lengths (256 and 1024 tokens) and its peak tensor memory compared: 4x the length may cost at
most 4x the memory (times 1.25 for fixed costs that do not scale, such as accumulators and
the windows' cache keys). The experiments that capture every layer are also run with 2 and 8
layers at both lengths: what each added layer adds to the peak may not grow with the length
(beyond the same 1.25x and 1/16 of one float32 [L, d] tensor); keeping every layer's whole
residual stream, for instance, adds one [L, d] tensor per layer, 4x more at 4x the length.

How memory is measured. ``tracemalloc`` sees Python's allocator only, not torch's; the resident
set (``getrusage``) also counts the Python heap, glibc's cached free blocks and, in one process,
whatever ran before. Instead, the torch profiler with ``profile_memory=True`` receives an event
from torch's CPU allocator for every tensor storage and kernel workspace allocated or freed
(``[memory]`` events with signed byte counts); the running sum of those events over one run of
the experiment is the tensor memory it holds at each moment, and its maximum is the peak on top
of what was alive before (the model's weights). It is exact for tensors and deterministic.

Controls keep the test honest: the bare forward grows linearly by this measure, the eager
attention that returns every L x L attention matrix grows about 16x (so quadratic growth is
seen), and capturing the residual stream at every position of every layer grows with the layer
count (so layers x L x d growth is seen).

Not measured, by definition (``EXCLUDED``): the generation tasks (prompts built by the task
engine and decoded by a backend; their memory is the backend's KV cache) and the experiments
that train small MLPs on sparse parity (no language model, no length to scale). The q/k
experiments run with ``n_queries`` set: with every query (``n_queries=0``, seed 003's setting)
they compute each query's logits against every earlier key, L^2 work by definition, whose
working set ``ctxlens.probes.qk`` caps at ``WORK_BYTES``.
"""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from ctxlens.experiments import experiments, get_experiment, make_config
from tests.conftest import build_lm

SHORT, LONG = 256, 1024
SLACK = 1.25


def _seq(n: int = 2) -> dict:
    return {"source": "random", "n_sequences": n, "batch_size": n, "suffix_len": 32}


# experiment -> options at length L (tiny sizes: the point is how memory scales, not the figures)
MEASURED = {
    "token-loss": lambda L: {"source": "random", "lengths": [L], "n_samples": 1},
    "suffix-ppl": lambda L: {**_seq(), "lengths": [L]},
    "loss-vs-length": lambda L: {"source": "random", "lengths": [L // 2, L], "n_samples": 1, "n_scored": 2},
    "collapse-modes": lambda L: {**_seq(), "length": L, "long_length": L, "conditions": ["base", "shuffled"],
                                 "frequency_source": "random", "frequency_tokens": 2048, "rank_bins": 8},
    "intrinsic-entropy": lambda L: {"source": "random", "lengths": [L // 2, L], "n_samples": 4, "entropy_n": [2],
                                    "thresholds": [0.05], "kde_samples": 4},
    "rope-theta-sweep": lambda L: {**_seq(), "thetas": [50000.0], "ppl_lengths": [L], "accs_lengths": [L],
                                   "needle_lengths": []},
    "accs-layers": lambda L: {**_seq(), "lengths": [L], "layers": None},
    "accs-boundary": lambda L: {**_seq(), "lengths": [L], "boundaries": [0.5, 1.0]},
    "accs-length": lambda L: {**_seq(), "lengths": [L]},
    "anisotropy-compression": lambda L: {**_seq(2), "lengths": [L], "windows": [16, 0], "n_bins": 2,
                                         "layers": None},
    "rope-dims": lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_pairs": 500},
    "dominant-dimension": lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_queries": 64},
    "positional-heads": lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_queries": 64},
    "rope-dim-ablation": lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "ablations": ["high:25%"],
                                    "n_queries": 64},
    "head-masking": lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "tasks": ["perplexity"],
                               "fractions": [0.25], "n_draws": 1, "detect_length": L, "detect_samples": 1,
                               "n_queries": 64},
}
# experiments whose options capture every layer, run again at 2 and 8 layers
ALL_LAYERS = ["accs-layers", "anisotropy-compression"]

EXCLUDED = {
    "ruler": "generation task", "niah-depth": "generation task", "niah-format": "generation task",
    "visible-fraction": "generation task", "position-weighted-qa": "generation task",
    "parity-dimension": "trains an MLP on sparse parity; no language model",
    "optimal-context": "trains MLPs on sparse parity; no language model",
    "parity-table": "trains a small transformer on sparse parity; no language model",
}


def peak_bytes(fn) -> int:
    """Peak of the running sum of torch CPU allocations minus frees while ``fn`` runs."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def run_all(lm, name: str, length: int):
    exp = get_experiment(name)
    config = make_config(exp.Config, MEASURED[name](length))

    def go():
        cache = {}
        for unit in exp.plan(config):
            exp.run(lm, config, unit, cache)

    return go


def per_layer_bytes(work, length: int) -> float:
    """Bytes one added layer adds to the peak of ``work(lm, length)`` (2 -> 8 layers)."""
    peaks = []
    for layers in (2, 8):
        deep = build_lm("llama", num_hidden_layers=layers)
        work(deep, SHORT)()  # warm-up
        peaks.append(peak_bytes(work(deep, length)))
    return (peaks[1] - peaks[0]) / 6


def grows_with_layers_x_length(work) -> tuple[bool, float, float]:
    """(verdict, per-layer bytes at SHORT, at LONG): does a layer's share grow with the length?"""
    short, long = per_layer_bytes(work, SHORT), per_layer_bytes(work, LONG)
    tolerance = LONG * build_lm("llama").config.hidden_size * 4 / 16  # 1/16 of a float32 [LONG, d]
    return long > SLACK * max(short, 0.0) + tolerance, short, long


@pytest.fixture(scope="module")
def lm():
    return build_lm("llama")


def test_every_experiment_is_measured_or_excluded_with_a_reason():
    names = set(experiments())
    assert not set(MEASURED) & set(EXCLUDED)
    assert names <= set(MEASURED) | set(EXCLUDED), sorted(names - set(MEASURED) - set(EXCLUDED))


def test_the_measure_sees_linear_and_quadratic_growth(lm):
    """Controls: the bare forward is linear; eager attention returning every L x L matrix is quadratic."""
    ids = {n: torch.randint(0, 256, (1, n), generator=torch.Generator().manual_seed(0)) for n in (SHORT, LONG)}

    def bare(n):
        with torch.inference_mode():
            lm.base_forward(ids[n])

    def all_attention_matrices(n):
        with torch.inference_mode():
            lm.model.base_model(ids[n], output_attentions=True, use_cache=False)

    bare(SHORT)
    linear = peak_bytes(lambda: bare(LONG)) / peak_bytes(lambda: bare(SHORT))
    assert 3.0 <= linear <= 4 * SLACK
    implementation = lm.model.config._attn_implementation
    lm.model.set_attn_implementation("eager")
    try:
        quadratic = peak_bytes(lambda: all_attention_matrices(LONG)) / peak_bytes(lambda: all_attention_matrices(SHORT))
    finally:
        lm.model.set_attn_implementation(implementation)
    assert quadratic > 10


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_memory_grows_at_most_linearly_with_length(lm, name):
    run_all(lm, name, SHORT)()  # warm-up: one-time allocations are not growth
    short = peak_bytes(run_all(lm, name, SHORT))
    long = peak_bytes(run_all(lm, name, LONG))
    assert long <= LONG / SHORT * SLACK * short, f"{name}: {short} -> {long} bytes ({long / short:.1f}x)"


def test_the_measure_sees_growth_with_layers_x_length():
    """Control: keeping every position of every layer grows with layers x length x d."""
    def keep_everything(lm, length):
        ids = torch.randint(0, 256, (1, length), generator=torch.Generator().manual_seed(0))
        return lambda: lm.capture(ids, residual="all")

    grows, short, long = grows_with_layers_x_length(keep_everything)
    assert grows and long > 3 * short


@pytest.mark.parametrize("name", ALL_LAYERS)
def test_every_layer_experiments_do_not_grow_with_layers_x_length(name):
    grows, short, long = grows_with_layers_x_length(lambda lm, length: run_all(lm, name, length))
    assert not grows, f"{name}: each layer adds {short:.0f} bytes at {SHORT} tokens, {long:.0f} at {LONG}"
