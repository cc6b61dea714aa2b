"""Regenerate the report's test fixtures: real run directories of every experiment, small.

    python tests/report/make_fixtures.py [NAME ...]      # default: every experiment below

Each experiment runs through the ordinary runner (``ctxlens.runner.execute.run``) on two tiny
random-weight llamas, ``zoo:random-llama`` and a second one built here with another seed and
renamed ``other-llama`` in the stored rows (so the fixtures hold no temporary paths). The
numbers mean nothing about long context; they only have the columns and shapes real runs have.
Output: ``tests/report/data/NAME/`` (config.yaml, env.json, results.jsonl, units.jsonl).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent / "data"
OTHER = "other-llama"

SMALL = {
    "token-loss": {"lengths": "16,32", "n_samples": "2"},
    "accs-layers": {"lengths": "48,96", "n_sequences": "4", "suffix_len": "8"},
    "accs-boundary": {"lengths": "64", "n_sequences": "4", "suffix_len": "8", "boundaries": "0,0.25,0.5,0.75,1.0"},
    "accs-length": {"lengths": "64,128", "n_sequences": "4", "suffix_len": "8", "period_len": "16", "stride": "4"},
    "anisotropy-compression": {"lengths": "64", "windows": "1,4,16,0", "n_bins": "2", "n_sequences": "4",
                               "suffix_len": "8"},
    "suffix-ppl": {"lengths": "32,64,128", "n_sequences": "4", "suffix_len": "8"},
    "rope-theta-sweep": {"thetas": "1000,10000,100000", "ppl_lengths": "64", "accs_lengths": "64",
                         "needle_lengths": "160", "n_needles": "4", "n_sequences": "4", "suffix_len": "8"},
    "collapse-modes": {"length": "32", "long_length": "64", "suffix_len": "4", "n_sequences": "2",
                       "frequency_tokens": "4000", "rank_bins": "16"},
    "rope-dims": {"lengths": "64", "n_samples": "2", "n_pairs": "100"},
    "dominant-dimension": {"lengths": "32,64", "n_samples": "2", "top_k": "8", "n_bins": "4", "train_length": "48"},
    "positional-heads": {"lengths": "64", "n_samples": "2", "top_k": "8", "fractions": "0.25,0.5"},
    "head-masking": {"lengths": "128,256", "n_samples": "1", "n_passkey": "2", "depths": "0.1,0.9",
                     "fractions": "0.25", "n_draws": "3", "detect_length": "64", "detect_samples": "1",
                     "top_k": "8", "train_length": "128"},
    "rope-dim-ablation": {"lengths": "32,64", "n_samples": "1", "n_queries": "8", "top_k": "8", "n_bins": "4",
                          "train_length": "48"},
    "loss-vs-length": {"lengths": "2,4,8,16,32", "n_samples": "3", "n_scored": "4"},
    "intrinsic-entropy": {"lengths": "4,8,16", "n_samples": "48", "entropy_n": "2,4", "thresholds": "0.01,0.1",
                          "kde_samples": "48", "eigen_rows": "24"},
    "parity-dimension": {"n_bits": "8", "first_max_bit": "3", "steps": "1500", "n_eval": "400", "hidden": "32",
                         "feature_dim": "8"},
    "ruler": {"tasks": "niah_single_1,vt,qa_1", "lengths": "512,1024", "n_samples": "2", "max_new_tokens": "6"},
    "niah-depth": {"lengths": "512,768", "depths": "0,50,100", "n_samples": "2", "max_new_tokens": "6"},
    "niah-format": {"lengths": "512", "depths": "0,100", "values": "numbers,words", "n_samples": "1",
                    "max_new_tokens": "6"},
    "visible-fraction": {"tasks": "vt,qa_1", "max_length": "1024", "fractions": "0.25,0.5,1.0", "n_samples": "2",
                         "max_new_tokens": "6"},
    "position-weighted-qa": {"max_length": "1024", "gammas": "0,2", "fractions": "0.5,1.0", "n_samples": "2",
                             "max_new_tokens": "6"},
}
# experiments that train their own small models: run() gets the model spec, not an LM
TRAINING = {"optimal-context": ("parity-mlp", {"sizes": [200, 800], "lengths": [5, 7, 9], "n_bits": 10,
                                               "tasks_per_bit": 1, "first_max_bit": 3, "max_epochs": 15,
                                               "patience": 3, "val_size": 400, "hidden": 32}),
            "parity-table": ("parity-transformer", {"seeds": [0, 1], "ctls": [17, 30, 50], "steps": 40, "batch": 32,
                                                    "eval_every": 20, "val_size": 256, "test_size": 256, "lr": 3e-3,
                                                    "warmup": 5, "threads": 1})}


def other_llama(path: Path) -> None:
    """A second tiny random llama (seed 1) with the byte tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(1)
    config = tiny_config("llama", vocab_size=len(tok), max_position_embeddings=4096,
                         bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)


def rename(run_dir: Path, out: Path, old: str, new: str) -> None:
    """Copy a run directory, replacing model ``old`` by ``new`` in rows, unit keys and config."""
    import yaml

    from ctxlens.runner.store import RunStore, read_rows

    rows = iter(read_rows(run_dir))
    units = [json.loads(line) for line in (run_dir / "units.jsonl").read_text().splitlines()]
    if out.exists():
        shutil.rmtree(out)
    store = RunStore(out)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["models"] = [new if m == old else m for m in config["models"]]
    store.write_config(config)
    env = json.loads((run_dir / "env.json").read_text())
    env["argv"] = ["ctxlens", "(fixture)"]
    store.write_env(env)
    for unit in units:
        chunk = [next(rows) for _ in range(unit["rows"])]
        chunk = [{**r, "model": new if r["model"] == old else r["model"]} for r in chunk]
        key = json.loads(unit["unit"])
        key["model"] = new if key["model"] == old else key["model"]
        store.commit(RunStore.unit_key(key), chunk)


def make(name: str, tmp: Path, other: Path) -> None:
    from ctxlens.runner.execute import run

    raw = tmp / name
    run(name, ["zoo:random-llama", str(other)], raw, SMALL[name], progress=False)
    rename(raw, HERE / name, str(other), OTHER)


def make_training(name: str, tmp: Path) -> None:
    from ctxlens.core.env import environment
    from ctxlens.experiments.base import make_config
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.runner.execute import run_config
    from ctxlens.runner.store import RunStore

    spec, options = TRAINING[name]
    exp = get_experiment(name)
    config = make_config(exp.Config, options)
    out = HERE / name
    if out.exists():
        shutil.rmtree(out)
    store = RunStore(out)
    store.write_config(run_config(name, [spec], options, {}))
    store.write_env({**environment(), "argv": ["ctxlens", "(fixture)"]})
    cache: dict = {}
    for unit in exp.plan(config):
        unit = {"model": spec, "experiment": name, **unit}
        store.commit(RunStore.unit_key(unit), [{**unit, **row} for row in exp.run(spec, config, unit, cache)])


def main(names: list[str]) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = names or [*SMALL, *TRAINING]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["CTXLENS_HOME"] = str(tmp / "home")
        other = tmp / OTHER
        other_llama(other)
        for name in names:
            print(f"{name} ...", flush=True)
            if name in TRAINING:
                make_training(name, tmp)
            else:
                make(name, tmp, other)


if __name__ == "__main__":
    main(sys.argv[1:])
