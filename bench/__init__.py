"""ctxlens benchmarks: speed and memory targets measured as ratios within one process.

Each ``bench/NAME.py`` runs on its own (``python bench/NAME.py [--quick]``) and exposes
``main(argv) -> list[dict]``: the rows it measured (``bench``, ``subject``, ``metric``, ``value``,
optional ``tokens``, ``target``, ``ok``). ``python -m bench`` runs them all, or a chosen subset,
each in its own process, and prints one table (see ``bench/__main__.py``).
"""

BENCHES = (
    "experiment_overhead",
    "capture_overhead",
    "accs_overhead",
    "loss_vs_length",
    "dominant_dimension",
    "anisotropy",
    "taskgen",
    "train_throughput",
    "parity_table_form",
    "prefix_share",
    "forced_scoring",
    "progress_overhead",
    "suite_overhead",
)
# ``--quick``: the experiment table at 1K tokens plus the anisotropy, task-generation and prefix-sharing figures
QUICK = ("experiment_overhead", "capture_overhead", "anisotropy", "taskgen", "prefix_share")
