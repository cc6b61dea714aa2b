"""``ctxlens demo``: every experiment on the trained zoo, the papers' findings checked, one report.

The zoo (``ctxlens.zoo.specs``) is six matched byte-level models trained at a 512-byte context,
the ctxlens-sized version of the matched models of seed 000 ("How much do contextualized
representations encode long-range context?", Section 3, Table 1). The demo runs a curated suite
that covers every experiment of the four papers on the zoo models that are trained on this
machine (each experiment on the models it applies to: the RoPE analyses of seed 003 on
``zoo:rope`` only; ``parity-dimension``, ``optimal-context`` and ``parity-table`` train their own
small models),
then computes the headline findings (``ctxlens.findings``), writes ``findings.json`` and the
report, and prints the report's path. A zoo model that is not trained is skipped with a note,
and the findings that need it are marked "not measured".

    ctxlens demo [--out DIR] [--quick]

Layout of DIR (every run directory resumes: running the same command again skips finished units)::

    EXPERIMENT/                one run per experiment, the zoo models side by side
    untrained/untrained-NAME/  random-weight copies of the zoo specs (full demo only)
    controls/EXPERIMENT/       the ACCS runs again on those copies: the findings' untrained controls
    findings.json, report.html, report-figures/

so ``ctxlens report DIR --out other.html`` redraws the report (findings included) from the files.
An experiment that fails on one model is printed, noted in the findings and skipped for that
model only; the exit status is then 1 (0 otherwise), and the report is written either way.

The full suite takes about four minutes on one CPU core (the budget is ten on a 2-core CPU);
``--quick`` (what the tests run, under a minute) keeps every experiment but uses at most two zoo
models, fewer samples and no controls.
Sizes here are chosen for time alone; the findings' criteria are fixed in ``ctxlens.findings``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ctxlens.zoo.specs import RECIPE

ZOO_NAMES = ("rope", "alibi", "mamba2", "mlstm", "griffin", "hybrid")
QUICK_NAMES = ("rope", "mamba2")  # the quick suite's models: one attention, one recurrent
TRAIN_LENGTH = RECIPE.seq_len  # the zoo's training context: 512 bytes
T = TRAIN_LENGTH


@dataclass(frozen=True)
class Step:
    """One experiment of the suite, run into ``DIR/NAME`` (``name`` defaults to the experiment).

    ``models``: ``"zoo"`` every available zoo model, ``"rope"`` the RoPE model only, ``"own"``
    none (the experiment trains its own). ``quick``: the options of the quick suite (``None``:
    left out of it). ``controls``: the zoo names whose untrained copies the full suite runs it on
    too (those a finding's control needs)."""

    experiment: str
    models: str
    full: dict
    quick: dict | None = None
    controls: tuple[str, ...] = ()
    model_options: dict = field(default_factory=dict)
    name: str = ""

    @property
    def run_name(self) -> str:
        return self.name or self.experiment


_GEOMETRY = {"source": "builtin:test", "suffix_len": 32, "batch_size": 8}
_TASK = {"batch_size": 8}
_ROPE = {"source": "builtin:test", "train_length": T}
_EXTRAPOLATE = {"allow_extrapolation": True}
_BOUNDARIES = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]  # b_min, 0.5 and 1.0 are what the plateau criterion reads

SUITE: list[Step] = [
    # seed 000: representation geometry
    Step("accs-layers", "zoo", {**_GEOMETRY, "lengths": [T], "n_sequences": 16},
         {**_GEOMETRY, "lengths": [T], "n_sequences": 4}, controls=("rope",)),
    Step("accs-boundary", "zoo", {**_GEOMETRY, "lengths": [T], "n_sequences": 8, "boundaries": _BOUNDARIES},
         {**_GEOMETRY, "lengths": [T], "n_sequences": 4, "boundaries": [0.1, 0.5, 1.0]},
         controls=("alibi", "mamba2", "mlstm", "griffin", "hybrid")),
    Step("accs-boundary", "rope", {**_GEOMETRY, "lengths": [4 * T], "n_sequences": 4, "boundaries": _BOUNDARIES},
         None, controls=("rope",), model_options=_EXTRAPOLATE, name="accs-boundary-beyond-training"),
    Step("accs-length", "zoo", {**_GEOMETRY, "lengths": [T, 2 * T], "n_sequences": 2},
         {**_GEOMETRY, "lengths": [T, 2 * T], "n_sequences": 2}, model_options=_EXTRAPOLATE),
    Step("anisotropy-compression", "zoo", {**_GEOMETRY, "lengths": [T], "n_sequences": 8, "windows": [1, 0],
                                           "n_bins": 2},
         {**_GEOMETRY, "lengths": [T], "n_sequences": 4, "windows": [1, 0], "n_bins": 2}),
    Step("suffix-ppl", "zoo", {**_GEOMETRY, "lengths": [T // 4, T, 2 * T], "n_sequences": 4},
         {**_GEOMETRY, "lengths": [T // 4, T], "n_sequences": 2}, model_options=_EXTRAPOLATE),
    Step("collapse-modes", "zoo", {**_GEOMETRY, "length": T, "long_length": 2 * T, "n_sequences": 4,
                                   "frequency_tokens": 100_000, "rank_bins": 32},
         {**_GEOMETRY, "length": T, "long_length": 2 * T, "n_sequences": 2, "frequency_tokens": 20_000,
          "rank_bins": 16}, model_options=_EXTRAPOLATE),
    Step("rope-theta-sweep", "rope", {**_GEOMETRY, "thetas": [2500.0, 1e4, 4e4, 1.6e5], "ppl_lengths": [T, 2 * T],
                                      "accs_lengths": [2 * T], "needle_lengths": [T // 2, T, 2 * T],
                                      "n_sequences": 4, "n_needles": 8},
         {**_GEOMETRY, "thetas": [1e4, 1e5], "ppl_lengths": [T], "accs_lengths": [T], "needle_lengths": [T],
          "n_sequences": 2, "n_needles": 2}, model_options=_EXTRAPOLATE),
    # seed 001: intrinsic entropy, context-length scaling, sparse parity
    Step("loss-vs-length", "zoo", {"source": "builtin:test", "lengths": [4, 16, 64, 256], "n_samples": 4,
                                   "n_scored": 4},
         {"source": "builtin:test", "lengths": [4, 64, T], "n_samples": 2, "n_scored": 4}),
    Step("intrinsic-entropy", "zoo", {"source": "builtin:test", "lengths": [16, 32, 64, 128, 256, T],
                                      "n_samples": 96, "entropy_n": [8, 16, 32], "kde_samples": 96},
         {"source": "builtin:test", "lengths": [16, 64, T], "n_samples": 24, "entropy_n": [8, 16],
          "kde_samples": 24}),
    Step("parity-dimension", "own", {}, {"steps": 1500}),
    Step("optimal-context", "own", {"grid": "reduced", "threads": 1},
         {"sizes": [200, 800], "lengths": [3, 6, 20], "max_epochs": 2, "val_size": 200, "threads": 1}),
    Step("parity-table", "own", {"steps": 500, "eval_every": 250, "test_size": 10000, "threads": 1},
         {"steps": 40, "batch": 32, "eval_every": 20, "val_size": 256, "test_size": 256, "ctls": [17, 50],
          "threads": 1}),
    Step("visible-fraction", "zoo", {**_TASK, "tasks": ["qa_1", "fwe"], "max_length": 2 * T,
                                     "fractions": [0.25, 0.5, 1.0], "n_samples": 2, "max_new_tokens": 16},
         {**_TASK, "tasks": ["fwe"], "max_length": T, "fractions": [0.5, 1.0], "n_samples": 2,
          "max_new_tokens": 4}),
    Step("position-weighted-qa", "zoo", {**_TASK, "max_length": 2 * T, "gammas": [0.0, 2.0],
                                         "fractions": [0.5, 1.0], "n_samples": 2, "max_new_tokens": 16},
         {**_TASK, "max_length": 2 * T, "gammas": [0.0], "fractions": [1.0], "n_samples": 2, "max_new_tokens": 4}),
    # seed 002: RULER, needle depth and format
    Step("ruler", "zoo", {**_TASK, "tasks": ["niah_single_1", "niah_single_2", "fwe"],
                          "lengths": [T, 2 * T], "n_samples": 2, "max_new_tokens": 24},
         {**_TASK, "tasks": ["niah_single_1", "fwe"], "lengths": [T], "n_samples": 2, "max_new_tokens": 4}),
    # the zoo retrieves nothing in RULER's wording, so the depth sweep asks in the corpus's (niah_corpus)
    Step("niah-depth", "zoo", {**_TASK, "task": "niah_corpus", "lengths": [T, 2 * T], "depths": [0.0, 50.0, 100.0],
                               "n_samples": 48, "max_new_tokens": 6},
         {**_TASK, "task": "niah_corpus", "lengths": [T, 2 * T], "depths": [0.0, 50.0, 100.0], "n_samples": 2,
          "max_new_tokens": 6}),
    Step("niah-format", "zoo", {**_TASK, "lengths": [T], "haystacks": ["essay", "repeat"], "values": ["numbers"],
                                "n_samples": 2, "max_new_tokens": 10},
         {**_TASK, "lengths": [T], "haystacks": ["repeat"], "values": ["numbers"], "depths": [50.0],
          "n_samples": 2, "max_new_tokens": 4}),
    # seed 003: RoPE dimensions and positional heads
    Step("rope-dims", "rope", {**_ROPE, "lengths": [T], "n_samples": 2, "n_pairs": 500},
         {**_ROPE, "lengths": [T], "n_samples": 1, "n_pairs": 100}),
    Step("dominant-dimension", "rope", {**_ROPE, "lengths": [T, 2 * T], "n_samples": 2, "n_queries": 64},
         {**_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 16}, model_options=_EXTRAPOLATE),
    Step("positional-heads", "rope", {**_ROPE, "lengths": [T], "n_samples": 8, "n_queries": 128},
         {**_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 32}),
    Step("head-masking", "rope", {**_ROPE, "lengths": [T, 2 * T], "tasks": ["passkey", "perplexity"],
                                  "detect_length": T, "detect_samples": 8, "n_queries": 128, "n_draws": 5,
                                  "n_passkey": 4},
         {**_ROPE, "lengths": [T], "tasks": ["passkey"], "detect_length": T, "detect_samples": 1, "n_draws": 2,
          "n_passkey": 2, "n_queries": 32}, model_options=_EXTRAPOLATE),
    Step("rope-dim-ablation", "rope", {**_ROPE, "lengths": [T, 2 * T], "n_samples": 2, "n_queries": 32},
         {**_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 16, "measures": ["loss", "attention"]},
         model_options=_EXTRAPOLATE),
    Step("token-loss", "zoo", {"source": "builtin:test", "lengths": [T], "n_samples": 2},
         {"source": "builtin:test", "lengths": [T], "n_samples": 1}),
]


# ------------------------------------------------------------------------------- models
def trained_zoo(names=ZOO_NAMES) -> tuple[dict[str, str], list[str]]:
    """({name: "zoo:NAME"} of the trained zoo models, [names not trained])."""
    from ctxlens.zoo.registry import trained_path

    found = {n: f"zoo:{n}" for n in names if trained_path(n) is not None}
    return found, [n for n in names if n not in found]


def untrained_copy(name: str, root: Path, seed: int = 0) -> str:
    """A saved random-init model of zoo spec ``name`` under ``root`` (built once); its path."""
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.zoo.specs import build_config, get_spec
    from ctxlens.zoo.tokenizer import byte_tokenizer

    path = root / f"untrained-{name}"
    if not (path / "config.json").is_file():
        tok = byte_tokenizer()
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(build_config(get_spec(name), len(tok), tok.eos_token_id))
        model.save_pretrained(path)
        tok.save_pretrained(path)
    return str(path)


def _names(step: Step, models: dict[str, str]) -> list[str]:
    """The zoo names (keys of ``models``) that ``step`` runs on."""
    if step.models == "own":
        return []
    return [n for n in models if step.models == "zoo" or n == step.models]


# ------------------------------------------------------------------------------- the demo
def run_models(experiment: str, specs: list[str], path: Path, options: dict, model_options: dict) -> dict[str, str]:
    """Run ``experiment`` on each model in turn into ``path``, so that one model's failure does
    not stop the others; {spec: error} of the models that failed (``{"": error}`` for an
    experiment that trains its own models)."""
    from ctxlens.runner.execute import run

    failed = {}
    for spec in specs or [""]:
        try:
            run(experiment, [spec] if spec else [], path, options, model_options, progress=False)
        except Exception as err:  # noqa: BLE001 - one failure must not end the demo; it is printed and recorded
            failed[spec] = f"{type(err).__name__}: {err}"
    done = [s for s in specs if s not in failed]
    if done and len(specs) > 1:  # every unit is committed: this loads nothing, it records the models in config.yaml
        run(experiment, done, path, options, model_options, progress=False)
    return failed


def run_suite(out: Path, models: dict[str, str], quick: bool, controls: dict[str, str] | None = None,
              suite: list[Step] = SUITE) -> list[dict]:
    """Run every step of ``suite`` that has its models into ``out/NAME`` (and the control steps on
    the untrained copies, ``controls``: {zoo name: spec}, into ``out/controls``); print one line
    per step and return one record per step (seconds, and the models that failed or why it was
    skipped)."""
    log = []
    steps = [s for s in suite if not quick or s.quick is not None]
    for i, step in enumerate(steps, start=1):
        options = step.quick if quick else step.full
        names = _names(step, models)
        record = {"experiment": step.experiment, "run": step.run_name, "models": [models[n] for n in names]}
        head = f"[{i:>2}/{len(steps)}] {step.run_name:<30}"
        if step.models != "own" and not names:
            note = f"needs zoo:{step.models}, which is not trained" if step.models != "zoo" else "no zoo model"
            print(f"{head} skipped: {note}", flush=True)
            log.append({**record, "skipped": note})
            continue
        started = time.perf_counter()
        failed = run_models(step.experiment, record["models"], out / step.run_name, options,
                            step.model_options)
        control_specs = [controls[n] for n in names if n in step.controls and n in (controls or {})]
        if control_specs:
            failed.update(run_models(step.experiment, control_specs, out / "controls" / step.run_name, options,
                                     step.model_options))
        seconds = time.perf_counter() - started
        print(f"{head} {seconds:6.1f} s  {', '.join(names) or 'own models'}", flush=True)
        for spec, error in failed.items():
            print(f"    FAILED on {spec or step.experiment}: {error}", flush=True)
        log.append({**record, "seconds": round(seconds, 1), **({"errors": failed} if failed else {})})
    return log


def demo(out: str | Path = "ctxlens-demo", quick: bool = False, models: dict[str, str] | None = None) -> int:
    """Run the suite, compute the findings, write ``findings.json`` and the report; print its path.

    ``models``: {zoo name: model spec} to measure instead of the trained zoo (e.g. a checkpoint
    of one's own); by default every trained zoo model. ``quick``: the quick suite on at most
    two of them (``QUICK_NAMES`` first)."""
    from transformers.utils import logging as hf_logging

    from ctxlens.core.errors import CtxlensError
    from ctxlens.findings import compute_findings
    from ctxlens.report import build_report
    from ctxlens.report.findings import STATUSES
    from ctxlens.results import is_run_dir

    hf_logging.disable_progress_bar()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if models is None:
        models, missing = trained_zoo()
        print(f"ctxlens demo: {len(models)} of {len(ZOO_NAMES)} zoo models are trained"
              + (f" ({', '.join(models)})" if models else ""))
        for name in missing:
            print(f"  zoo:{name} is not trained; `ctxlens zoo train {name}`")
    if quick:
        models = _quick_models(models)
        print(f"quick suite on {', '.join(models) or 'no zoo model'}: fewer samples, no untrained controls")
    wanted = {n for s in SUITE for n in s.controls}
    controls = {} if quick else {n: untrained_copy(n, out / "untrained") for n in models if n in wanted}
    log = run_suite(out, models, quick, controls)
    runs = [p for p in (out, out / "controls") if p.is_dir() and any(is_run_dir(c) for c in p.iterdir())]
    if not runs:
        raise CtxlensError(f"No experiment of the demo wrote results into {out}; see the errors above.")
    failures: dict[str, str] = {}
    for r in (r for r in log if r.get("errors")):
        said = "; ".join(f"{s or r['experiment']}: {e}" for s, e in r["errors"].items())
        failures[r["experiment"]] = "; ".join(filter(None, [failures.get(r["experiment"]), said]))
    findings = compute_findings(runs, models=models, controls=controls, failures=failures)
    (out / "findings.json").write_text(json.dumps({"findings": findings, "models": models, "controls": controls,
                                                    "quick": quick, "steps": log}, indent=1, default=str) + "\n")
    report = build_report(runs, out / "report.html", findings=findings, title="ctxlens demo")
    counts = {s: sum(f["status"] == s for f in findings) for s in STATUSES}
    print("\nfindings: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for f in findings:
        print(f"  {f['status']:<15} {f['finding']}")
    failed = sum(len(r.get("errors", {})) for r in log)
    if failed:
        print(f"\n{failed} experiment run(s) FAILED (see above and the findings' notes); the report shows the rest.")
    print(f"\ndemo finished in {time.perf_counter() - started:.0f} s; report:")
    print(report.path)
    return 1 if failed else 0


def _quick_models(models: dict[str, str]) -> dict[str, str]:
    """At most two models: those of ``QUICK_NAMES`` that are present, else the first two."""
    picked = {n: models[n] for n in QUICK_NAMES if n in models}
    for n in models:
        if len(picked) >= 2:
            break
        picked.setdefault(n, models[n])
    return picked
