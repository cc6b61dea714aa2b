"""The columns each experiment's rows may carry, for the row readers (generated: do not edit).

Written by ``python -m ctxlens.experiments.catalog`` from the experiments' declarations
(``Experiment.declared``: the runner's columns and the experiment's own); the experiments import
torch, the readers (``ctxlens.row_access``, findings, report) must not, so they read this copy.
``tests/experiments/test_declared_names.py`` fails when it differs from the declarations.
"""

NAMES: dict[str, frozenset[str]] = {
    "accs-boundary": frozenset({
        "accs", "anisotropy", "bos", "boundary", "cross_cos", "cut_length", "experiment", "flag", "layer",
        "length", "level", "mean_dot", "model", "n", "n_sequences", "other_sample", "perturb_end",
        "perturb_start", "positions", "prefix_len", "rope_changed", "sample", "sample_self_sim", "seed",
        "self_sim", "source", "stream", "suffix_len", "window",
    }),
    "accs-layers": frozenset({
        "accs", "anisotropy", "bos", "boundary", "cross_cos", "cut_length", "experiment", "flag", "layer",
        "layer_type", "length", "level", "mean_dot", "model", "n", "n_sequences", "other_sample", "perturb_end",
        "perturb_start", "positions", "prefix_len", "rope_changed", "sample", "sample_self_sim", "seed",
        "self_sim", "source", "stream", "suffix_len", "window",
    }),
    "accs-length": frozenset({
        "accs", "anisotropy", "bos", "boundary", "compression_rate", "experiment", "flag", "layer", "length",
        "mean_dot", "model", "n", "n_sequences", "period_len", "perturb_end", "perturb_start", "positions",
        "prefix_len", "rope_changed", "seed", "self_sim", "source", "stream", "stride", "suffix_len", "window",
    }),
    "anisotropy-compression": frozenset({
        "anisotropy", "bin", "bos", "compression_rate", "cut_length", "effective_window", "experiment", "flag",
        "layer", "length", "mean_dot", "model", "n", "n_bins", "n_sequences", "perturbation", "positions",
        "prefix_len", "rate_high", "rate_low", "rope_changed", "seed", "source", "stream", "suffix_len",
        "window",
    }),
    "collapse-modes": frozenset({
        "anisotropy", "bos", "condition", "count", "cut_length", "experiment", "flag", "length", "model",
        "n_sequences", "nll", "prefix_len", "rank_high", "rank_low", "rope_changed", "seed", "source",
        "suffix_len", "token", "uniform_nll", "unigram_nll",
    }),
    "dominant-dimension": frozenset({
        "beyond_train", "bos", "distance_hi", "distance_lo", "dominant_dim", "experiment", "head", "kind",
        "layer", "layer_type", "length", "model", "n_dims", "n_distances", "n_pairs", "p_value", "rho",
        "rope_changed", "rope_theta", "rope_type", "seed", "source", "top_k", "train_length", "transform",
    }),
    "head-masking": frozenset({
        "beyond_train", "bos", "condition", "depth", "draw", "experiment", "flag", "fraction", "gold_logprob",
        "gold_tokens", "heads", "length", "model", "n", "n_masked", "n_tokens", "nll", "passkey_style", "ppl",
        "probe", "rope_changed", "score", "scored_by", "seed", "source", "task", "train_length", "transform",
    }),
    "intrinsic-entropy": frozenset({
        "after_final_norm", "bandwidth", "bos", "dim", "experiment", "fit", "flag", "index", "layer", "length",
        "model", "n_components", "n_eig", "n_kde", "n_points", "n_samples", "n_windows", "norm", "quantity",
        "replicate", "rope_changed", "source", "stage", "stderr", "threshold", "underpowered", "value", "x",
    }),
    "loss-vs-length": frozenset({
        "bos", "c0_at_bound", "c0_min", "ce", "ci_high", "ci_low", "experiment", "fit", "flag", "length",
        "model", "n_boot", "n_docs", "n_points", "n_scored", "quantity", "rope_changed", "sample", "scoring",
        "source", "stage", "stderr", "value", "visible_min", "weighted",
    }),
    "niah-depth": frozenset({
        "budget", "depth", "depth_percent", "depth_target", "depth_tokens", "experiment", "fill", "flag",
        "gold_logprob", "gold_tokens", "length", "metric", "model", "n_tokens", "outputs", "pred",
        "rope_changed", "sample", "sample_id", "score", "scored_by", "seed", "system_prompt", "task",
        "template", "to_end", "tokenization", "visible",
    }),
    "niah-format": frozenset({
        "budget", "depth", "depth_percent", "depth_target", "depth_tokens", "experiment", "fill", "flag",
        "gold_logprob", "gold_tokens", "haystack", "key", "length", "metric", "model", "n_tokens", "outputs",
        "pred", "rope_changed", "sample", "sample_id", "score", "scored_by", "seed", "system_prompt",
        "template", "to_end", "tokenization", "value", "visible",
    }),
    "optimal-context": frozenset({
        "bayes_risk", "best_epoch", "best_step", "best_val_loss", "ctl", "epochs", "experiment", "flag",
        "model", "n_train", "rope_changed", "seconds", "seed", "steps", "stopped_early",
    }),
    "parity-dimension": frozenset({
        "bayes", "experiment", "fit", "flag", "index", "length", "model", "n_points", "n_tasks", "paper",
        "quantity", "rope_changed", "stage", "stderr", "threshold", "value",
    }),
    "parity-table": frozenset({
        "bayes_risk", "best_step", "best_val", "ctl", "experiment", "gap", "loss", "model", "n", "paired_gap",
        "parameters", "rope_changed", "seed",
    }),
    "position-weighted-qa": frozenset({
        "budget", "depth_percent", "depth_target", "depth_tokens", "experiment", "fill", "flag", "fraction",
        "gamma", "gold_logprob", "gold_tokens", "length", "metric", "model", "n_tokens", "outputs", "pred",
        "rope_changed", "sample", "sample_id", "score", "scored_by", "seed", "system_prompt", "task",
        "template", "to_end", "tokenization", "visible",
    }),
    "positional-heads": frozenset({
        "beyond_train", "bos", "condition", "experiment", "fraction", "head", "heads", "kind", "layer",
        "layer_type", "length", "model", "n_dims", "n_distances", "n_heads_total", "n_pairs", "n_prompts",
        "n_selected", "p_bonferroni", "p_value", "prompt", "rank", "rank_by", "rho", "rho_mean", "rope_changed",
        "rope_theta", "rope_type", "seed", "significant", "significant_bonferroni", "source", "train_length",
        "transform",
    }),
    "rope-dim-ablation": frozenset({
        "ablation", "beyond_train", "bos", "delta", "distance_hi", "distance_lo", "dominant_dim", "experiment",
        "head", "kind", "layer", "layer_type", "length", "model", "n_dims", "n_distances", "n_pairs",
        "n_queries", "nll_ablated", "nll_base", "p_value", "pairs", "rho", "rope_changed", "rope_theta",
        "rope_type", "seed", "source", "train_length", "transform", "tv",
    }),
    "rope-dims": frozenset({
        "beyond_train", "bos", "count", "dim", "experiment", "head", "layer", "layer_type", "length", "model",
        "n_dims", "n_query_key_pairs", "rope_changed", "rope_theta", "rope_type", "seed", "share", "source",
        "top_k", "train_length", "transform",
    }),
    "rope-theta-sweep": frozenset({
        "accs", "accuracy", "anisotropy", "bos", "boundary", "cut_length", "experiment", "flag", "layer",
        "length", "mean_dot", "measure", "model", "n", "n_sequences", "n_tokens", "needle_depth",
        "needle_style", "needles_lost", "nll", "nll_se", "own_theta", "perturb_end", "perturb_start",
        "positions", "ppl", "prefix_len", "prompt_tokens", "rope_changed", "rope_layer_types", "seed",
        "self_sim", "source", "stream", "suffix_len", "theta", "window",
    }),
    "ruler": frozenset({
        "budget", "depth_percent", "depth_target", "depth_tokens", "experiment", "fill", "flag", "gold_logprob",
        "gold_tokens", "length", "metric", "model", "n_tokens", "outputs", "pred", "rope_changed", "sample",
        "sample_id", "score", "scored_by", "seed", "system_prompt", "task", "template", "to_end",
        "tokenization", "visible",
    }),
    "suffix-ppl": frozenset({
        "bos", "cut_length", "experiment", "flag", "length", "model", "n_sequences", "n_tokens", "nll",
        "nll_se", "ppl", "prefix_len", "rope_changed", "seed", "sequence", "sequence_nll", "source", "stage",
        "suffix_len",
    }),
    "token-loss": frozenset({
        "bos", "experiment", "flag", "length", "model", "n_tokens", "nll", "nll_last", "ppl", "rope_changed",
        "sample", "seed", "source",
    }),
    "visible-fraction": frozenset({
        "budget", "depth_percent", "depth_target", "depth_tokens", "experiment", "fill", "flag", "fraction",
        "gold_logprob", "gold_tokens", "length", "metric", "model", "n_tokens", "outputs", "pred",
        "rope_changed", "sample", "sample_id", "score", "scored_by", "seed", "system_prompt", "task",
        "template", "to_end", "tokenization", "visible",
    }),
}
