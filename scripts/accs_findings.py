"""Measure the zoo for the qualitative ACCS findings of seed 000 and record whether each holds.

Seed 000 ("How much do contextualized representations encode long-range context?"):

1. ``rope-accs-falls-with-depth`` (Section 4, Figure 1): on ``zoo:rope`` within its training
   length, ACCS falls with layer depth.
2. ``local-plateau`` (Section 5.2, Figure 4, Table 4): ``zoo:mamba2``, ``zoo:mlstm`` and
   ``zoo:alibi`` show a flat ACCS plateau while only the distant prefix is shuffled.
3. ``hybrid-no-plateau`` (same): ``zoo:griffin`` and ``zoo:hybrid`` fall steadily instead.
4. ``rope-no-plateau-beyond-training`` (same): ``zoo:rope`` beyond its training length is
   contextualized by the whole prefix (no plateau either).

The criteria are in ``ctxlens.findings.accs`` (fixed from the paper's numbers,
before any zoo run). Every model is also measured untrained (random weights of the same zoo
spec, seed ``--seed``) as a control: a finding that holds for the untrained control as well
(``control_reproduced``) says little about what training taught. The runs go through the
ordinary runner into ``--runs`` (resumable); the JSON written to OUT holds the settings, every
measured number and, per finding and model, ``reproduced``: true, false, or null when undecided
or when the model is not available (``status`` then says why).

    python scripts/accs_findings.py findings.json [--runs runs/accs-findings] [--device cuda]
    python scripts/accs_findings.py /tmp/f.json --substitute zoo:random-llama --n-sequences 2  # logic only
    python scripts/accs_findings.py /tmp/f.json --zoo rope --model rope=path/to/checkpoint
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ctxlens.core.errors import CtxlensError
from ctxlens.findings.accs import FAR_BOUNDARY, PLATEAU_THRESHOLD, depth_trend, plateau
from ctxlens.runner.execute import run

ZOO = ("rope", "alibi", "mamba2", "mlstm", "griffin", "hybrid")
PLATEAU_FINDINGS = {  # finding: (models, plateau expected?)
    "local-plateau": (("mamba2", "mlstm", "alibi"), True),
    "hybrid-no-plateau": (("griffin", "hybrid"), False),
    "rope-no-plateau-beyond-training": (("rope",), False),
}


def _args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="JSON file to write")
    p.add_argument("--runs", default=None, help="run directories (default: OUT without suffix + '-runs')")
    p.add_argument("--zoo", default=",".join(ZOO), help="zoo names to measure")
    p.add_argument("--substitute", default=None, help="model spec to use for every zoo name (logic checks only)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=SPEC",
                   help="model spec to use for one zoo name (repeatable; logic checks, other checkpoints)")
    p.add_argument("--no-controls", action="store_true", help="skip the untrained controls")
    p.add_argument("--training-length", type=int, default=512, help="the zoo's training length")
    p.add_argument("--layers-length", type=int, default=None, help="accs-layers length (default: training length)")
    p.add_argument("--boundary-lengths", default=None, help="accs-boundary lengths (default: 1x and 4x training)")
    p.add_argument("--n-sequences", type=int, default=32)
    p.add_argument("--suffix-len", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", default="builtin:test")
    p.add_argument("--device", default=None)
    return p.parse_args(argv)


def untrained(name: str, root: Path, seed: int) -> str:
    """A saved random-init model of zoo spec ``name`` (built once under ``root``); its path."""
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.zoo.specs import build_config, get_spec
    from ctxlens.zoo.tokenizer import byte_tokenizer

    path = root / f"untrained-{name}"
    if not (path / "config.json").is_file():
        tok = byte_tokenizer()
        torch.manual_seed(seed)
        AutoModelForCausalLM.from_config(build_config(get_spec(name), len(tok), tok.eos_token_id)).save_pretrained(path)
        tok.save_pretrained(path)
    return str(path)


def measure(label: str, spec: str, runs: Path, common: dict, layers_len: int, boundary_lens: list[int],
            model_options: dict) -> dict:
    """{"accs_layers": depth trend + rows, "accs_boundary": {length: plateau + rows}} of one model."""
    def rows_of(experiment: str, options: dict) -> list[dict]:
        store = run(experiment, [spec], runs / f"{experiment}-{label}", {**common, **options}, model_options,
                    progress=False)
        return [r for r in store.rows() if r["model"] == spec]

    out = {"spec": spec}
    rows = rows_of("accs-layers", {"lengths": [layers_len]})
    out["accs_layers"] = {**depth_trend(rows), "rows": _slim(rows)}
    rows = rows_of("accs-boundary", {"lengths": boundary_lens})
    out["accs_boundary"] = {}
    for length in boundary_lens:
        at = [r for r in rows if r["length"] == length]
        out["accs_boundary"][str(length)] = {**plateau(at), "rows": _slim(at)}
    return out


def _slim(rows: list[dict]) -> list[dict]:
    keep = ("length", "boundary", "layer", "stream", "n", "self_sim", "anisotropy", "accs", "flag")
    return [{k: r.get(k) for k in keep} for r in rows]


def main(argv=None) -> dict:
    args = _args(argv)
    out = Path(args.out)
    runs = Path(args.runs) if args.runs else out.with_name(out.stem + "-runs")
    names = [n for n in args.zoo.split(",") if n]
    train_len = args.training_length
    layers_len = args.layers_length or train_len
    boundary_lens = [int(x) for x in (args.boundary_lengths or f"{train_len},{4 * train_len}").split(",")]
    common = {"source": args.source, "n_sequences": args.n_sequences, "suffix_len": args.suffix_len,
              "batch_size": args.batch_size, "seed": args.seed}
    model_options = {"device": args.device} if args.device else {}
    specs = {name: args.substitute or f"zoo:{name}" for name in names}
    specs.update(dict(m.split("=", 1) for m in args.model))
    report = {
        "paper": "How much do contextualized representations encode long-range context? (seed 000)",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "settings": {**common, "models": specs, "training_length": train_len, "layers_length": layers_len,
                     "boundary_lengths": boundary_lens, "controls": not args.no_controls},
        "criteria": {
            "depth": "spearman(layer, ACCS) < 0 and ACCS(last layer) < ACCS(first layer); "
                     "residual stream after the mixer",
            "plateau": f"(ACCS(b_min) - ACCS({FAR_BOUNDARY})) / (ACCS(b_min) - ACCS(1.0)) < {PLATEAU_THRESHOLD}; "
                       "last layer, residual stream; threshold fixed from the paper's Table 4 before any zoo run",
        },
        "measurements": {}, "controls": {}, "errors": {}, "findings": [],
    }
    for name in names:
        try:
            report["measurements"][name] = measure(name, specs[name], runs, common, layers_len, boundary_lens,
                                                   model_options)
        except CtxlensError as err:
            report["errors"][name] = str(err)
            continue
        if not args.no_controls and name in ZOO:
            control = untrained(name, runs, args.seed)
            report["controls"][name] = measure(f"untrained-{name}", control, runs, common, layers_len,
                                               boundary_lens, model_options)
    report["findings"] = findings(report, names, layers_len, boundary_lens, train_len)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    for f in report["findings"]:
        print(f"{f['id']:<34} {f['model']:<8} length {f['length']:>6}  reproduced: {str(f['reproduced']):<5}  "
              f"untrained control: {f['control_reproduced']}")
    return report


def findings(report: dict, names: list[str], layers_len: int, boundary_lens: list[int], train_len: int) -> list[dict]:
    """One record per (finding, model, length) with the numbers behind the verdict."""
    found = []

    def record(fid: str, name: str, length: int, pick) -> None:
        got, control = report["measurements"].get(name), report["controls"].get(name)
        numbers, verdict = pick(got) if got else (None, None)
        found.append({"id": fid, "model": name, "length": length, "numbers": numbers, "reproduced": verdict,
                      "control_reproduced": pick(control)[1] if control else None,
                      "status": "measured" if got else report["errors"].get(name, "not measured")})

    def depth(m: dict):
        trend = m["accs_layers"]
        return {k: trend.get(k) for k in ("layers", "accs", "spearman")}, trend["reproduced"]

    def plateau_verdict(length: int, want: bool):
        def pick(m: dict):
            p = m["accs_boundary"][str(length)]
            numbers = {k: p.get(k) for k in ("layer", "boundaries", "accs", "plateau_ratio")}
            return numbers, None if p["plateau"] is None else p["plateau"] == want
        return pick

    if "rope" in names:
        record("rope-accs-falls-with-depth", "rope", layers_len, depth)
    for fid, (models, want) in PLATEAU_FINDINGS.items():
        for name in (m for m in models if m in names):
            for length in boundary_lens:
                if fid.startswith("rope") and length <= train_len:
                    continue  # this finding is about lengths beyond training
                record(fid, name, length, plateau_verdict(length, want))
    return found


if __name__ == "__main__":
    main()
