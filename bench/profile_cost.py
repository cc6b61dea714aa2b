"""What ``ctxlens profile`` costs at a model's training length, on random weights of its real shape (issue 35, part 2).

The shape (config) and tokenizer come from a directory holding ``config.json`` and the tokenizer
files of a real model (say the converted SmolLM2 or Gemma-3 GGUF in ``$CTXLENS_HOME/gguf/``). The
weights are drawn at random (seed 0) by transformers' own initialisation and saved beside them, so
every forward costs what the real model's does; the findings mean nothing and are not printed. The
profile runs without ``--length`` (L = the training length, the needle also at 2L), and the bench
prints the plan, each part's planned and spent seconds and tokens, and whether the whole suite fit
the budget.

    python bench/profile_cost.py --shape DIR --device cuda --budget 3
    python bench/profile_cost.py --shape DIR --device cpu --budget 2 --length 512     # a CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json", "tokenizer.model")


def random_model(shape: Path, into: Path) -> Path:
    """A ``save_pretrained`` directory with ``shape``'s config and tokenizer and random weights (seed 0)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(shape)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(into)
    for name in TOKENIZER_FILES:
        if (shape / name).is_file():
            shutil.copy(shape / name, into / name)
    return into


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", required=True, help="a directory with config.json and the tokenizer files")
    p.add_argument("--budget", type=float, default=3.0, help="minutes")
    p.add_argument("--device", default=None, help="cpu | cuda (default: the profile's own choice)")
    p.add_argument("--length", type=int, default=None, help="L (default: the training length, as a profile takes it)")
    p.add_argument("--out", default=None, help="keep the profile directory here (default: a temporary one)")
    args = p.parse_args(argv)
    from ctxlens.profile import profile

    shape = Path(args.shape)
    if not (shape / "config.json").is_file():
        raise SystemExit(f"--shape {shape} has no config.json; give a model directory with its config and tokenizer.")
    with tempfile.TemporaryDirectory(prefix="ctxlens-shape-") as tmp:
        model = random_model(shape, Path(tmp) / f"random-{shape.name}")
        out = Path(args.out) if args.out else Path(tmp) / "profile"
        began = time.perf_counter()
        options = {"device": args.device} if args.device else None
        profile([str(model)], args.budget, out, model_options=options, progress=False, length=args.length)
        wall = time.perf_counter() - began
        record = json.loads((out / "profile.json").read_text())
    entry = next(iter(record["models"].values()))
    length = entry["size"]["length"]
    subject = f"random {shape.name} at L = {length}"
    rows, spent = [], 0.0
    print(f"{'part':<22} {'status':<9} {'tokens':>11} {'planned s':>10} {'spent s':>9}")
    for part in entry["parts"]:
        done = part.get("status") == "done"
        spent += part.get("spent_s") or 0.0
        print(f"{part['name']:<22} {part.get('status', ''):<9} {part.get('tokens') or 0:>11,} "
              f"{part.get('planned_s') or 0:>10.1f} {part.get('spent_s') or 0:>9.1f}", flush=True)
        if done:
            rows.append({"bench": "profile_cost", "subject": f"{subject}: {part['name']}", "metric": "spent s",
                         "value": part["spent_s"], "tokens": part.get("tokens")})
    left = [part["name"] for part in entry["parts"] if part.get("status") != "done"]
    rows.append({"bench": "profile_cost", "subject": subject, "metric": "parts spent s", "value": round(spent, 1)})
    rows.append({"bench": "profile_cost", "subject": subject, "metric": "wall s (load, probe, parts)",
                 "value": round(wall, 1), "target": f"<= {args.budget * 60:.0f}", "ok": wall <= args.budget * 60})
    print(f"{subject}: parts {spent:.0f} s, wall {wall:.0f} s for a {args.budget:g}-minute budget; "
          f"setup {entry.get('setup_s')} s; left out or not done: {', '.join(left) or 'none'}", flush=True)
    return rows


if __name__ == "__main__":
    main()
