"""Regenerate the report's test fixtures: real run directories of every experiment, small.

    python tests/report/make_fixtures.py [NAME ...]      # default: every registered experiment

Each experiment runs with the small options its declaration gives (``Experiment.smoke``)
through the ordinary runner (``ctxlens.runner.execute.run``) on two tiny random-weight llamas,
``zoo:random-llama`` and a second one built here with another seed and renamed ``other-llama``
in the stored rows and config (so the fixtures hold no temporary paths); an experiment that trains
its own models runs on its ``smoke.fixture_model``. The numbers mean nothing about long context; they
only have the columns and shapes real runs have. ``tests/report/test_fixture_columns.py`` checks each
fixture against its experiment's declaration (every declared column present, every value in range)
and its smoke options, so a changed writer or declaration shows there until the fixture is made again.
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


def fixture_options(name: str) -> dict:
    """The experiment's declared smoke options, as the command line passes them ("16,32", "4")."""
    from ctxlens.experiments.registry import get_experiment

    return {k: ",".join(map(str, v)) if isinstance(v, list) else str(v)
            for k, v in get_experiment(name).smoke.options.items()}


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


def renamed(value, old: str, new: str):
    """``value`` with ``old`` replaced by ``new`` wherever it is a string or a key (the config's models,
    fingerprints, model_info, resolved options)."""
    if isinstance(value, dict):
        return {renamed(k, old, new): renamed(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, old, new) for v in value]
    return new if value == old else value


def rename(run_dir: Path, out: Path, old: str, new: str) -> None:
    """Copy a run directory, replacing model ``old`` by ``new`` in rows, unit keys and config."""
    import yaml

    from ctxlens.runner.store import RunStore, read_rows

    rows = iter(read_rows(run_dir))
    units = [json.loads(line) for line in (run_dir / "units.jsonl").read_text().splitlines()]
    if out.exists():
        shutil.rmtree(out)
    store = RunStore(out)
    store.write_config(renamed(yaml.safe_load((run_dir / "config.yaml").read_text()), old, new))
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
    run(name, ["zoo:random-llama", str(other)], raw, fixture_options(name), progress=False)
    rename(raw, HERE / name, str(other), OTHER)


def make_own(name: str) -> None:
    """An experiment that trains its own models, run unit by unit on its ``smoke.fixture_model``."""
    from ctxlens.core.env import environment
    from ctxlens.experiments.base import make_config
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.runner.execute import run_config
    from ctxlens.runner.store import RunStore

    exp = get_experiment(name)
    spec, options = exp.smoke.fixture_model, exp.smoke.options
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
    from ctxlens.experiments.registry import experiments

    declared = experiments()
    names = names or list(declared)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["CTXLENS_HOME"] = str(tmp / "home")
        other = tmp / OTHER
        other_llama(other)
        for name in names:
            print(f"{name} ...", flush=True)
            if declared[name].smoke.fixture_model:
                make_own(name)
            else:
                make(name, tmp, other)
            (HERE / name / ".ctxlens-lock").unlink(missing_ok=True)  # the writer's process id: not data


if __name__ == "__main__":
    main(sys.argv[1:])
