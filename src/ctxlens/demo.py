"""``ctxlens demo``: every experiment on the trained zoo, the papers' findings checked, one report.

The zoo (``ctxlens.core.zoo_facts``, ``ctxlens.zoo.specs``) is six matched byte-level models trained
at a 512-byte context, the ctxlens-sized version of the matched models of the geometry paper ("How much
do contextualized representations encode long-range context?", Section 3, Table 1). The demo runs a curated suite
that covers every experiment of the four papers on the zoo models that are trained on this
machine (each experiment on the models it applies to: the RoPE analyses of the rope-distance paper on
``zoo:rope`` only; ``parity-dimension``, ``optimal-context`` and ``parity-table`` train their own small
models;
each experiment declares its steps, ``Experiment.demo``, and ``suite()`` reads them), then
computes the headline findings (``ctxlens.findings``), writes ``findings.json`` and the report,
and prints the report's path. A zoo model that is not trained is skipped with a note,
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxlens.core.zoo_facts import ZOO_NAMES

QUICK_NAMES = ("rope", "mamba2")  # the quick suite's models: one attention, one recurrent


@dataclass(frozen=True)
class Step:
    """One run of the suite: an experiment's declared ``DemoStep`` (see ``ctxlens.experiments.base``),
    run into ``DIR/run_name``."""

    experiment: str
    models: str  # "zoo", "rope" or "own"
    full: dict
    quick: dict | None  # None: left out of the quick suite
    controls: tuple[str, ...]
    model_options: dict
    run_name: str


def suite() -> list[Step]:
    """Every experiment's declared demo steps, by paper (in ``ctxlens.core.papers`` order) then name."""
    from ctxlens.experiments.registry import by_paper

    return [Step(e.name, d.models, d.full, d.quick, d.controls, d.model_options, d.run or e.name)
            for e in by_paper() for d in e.demo]


# ------------------------------------------------------------------------------- models
def trained_zoo(names: Sequence[str] = ZOO_NAMES) -> tuple[dict[str, str], list[str]]:
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
              steps: list[Step] | None = None) -> list[dict]:
    """Run every step of ``suite`` that has its models into ``out/NAME`` (and the control steps on
    the untrained copies, ``controls``: {zoo name: spec}, into ``out/controls``); print one line
    per step and return one record per step (seconds, and the models that failed or why it was
    skipped)."""
    log = []
    steps = [s for s in steps or suite() if not quick or s.quick is not None]
    for i, step in enumerate(steps, start=1):
        options = step.quick if quick else step.full
        assert options is not None  # a quick suite keeps only the steps with quick options
        names = _names(step, models)
        specs = [models[n] for n in names]
        record: dict[str, object] = {"experiment": step.experiment, "run": step.run_name, "models": specs}
        head = f"[{i:>2}/{len(steps)}] {step.run_name:<30}"
        if step.models != "own" and not names:
            note = f"needs zoo:{step.models}, which is not trained" if step.models != "zoo" else "no zoo model"
            print(f"{head} skipped: {note}", flush=True)
            log.append({**record, "skipped": note})
            continue
        started = time.perf_counter()
        failed = run_models(step.experiment, specs, out / step.run_name, options, step.model_options)
        known = controls or {}
        control_specs = [known[n] for n in names if n in step.controls and n in known]
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
    wanted = {n for s in suite() for n in s.controls}
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
    report = build_report(runs, out / "report.html", findings=findings, title="ctxlens demo",
                          card_models=list(models.values()))  # the card: the zoo models, not their controls
    counts = {s: sum(f["status"] == s for f in findings) for s in STATUSES}
    print("\nfindings: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n or s != "not applicable"))
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
