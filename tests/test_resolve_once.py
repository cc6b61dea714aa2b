"""Issue 46 part 3: a model spec is resolved once, at the top, and what it resolved to
(``ctxlens.lm.specs.Resolved``) travels down: ``profile`` resolves each model once and hands the
object to ``read_info`` and ``load``; the loaded ``LM`` carries it to every part the runner runs, so
no part resolves it again; ``run`` resolves each model at most once for its plan, its config read
and its load. Measured before: 6 resolutions of ``zoo:rope`` in a profile whose suite plans every
part (``read_info`` in ``profile``, ``load``, and one ``read_info`` per part whose options depend
on the model), 2 in a run.

The resolver is wrapped (``ctxlens.zoo.registry.zoo_path``, what the ``zoo:`` resolver calls) and its
calls counted. The experiments' ``run`` is a stand-in that writes no row, so the count covers the
planning, loading and running of every part without their forwards."""

from __future__ import annotations

import dataclasses

import pytest

import ctxlens.runner.execute as execute
import ctxlens.zoo.registry as zoo_registry
from ctxlens.lm.specs import Resolved, as_resolved, resolved
from ctxlens.probes.throughput import Throughput
from ctxlens.profile.command import profile

SPEED = Throughput(prefill=2000.0, at=512, slope=1e-8, decode=20.0, seconds=0.0)


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """The names the ``zoo:`` resolver resolved, in order; every experiment's ``run`` writes no row."""
    calls: list[str] = []
    zoo_path, get_experiment = zoo_registry.zoo_path, execute.get_experiment
    monkeypatch.setattr(zoo_registry, "zoo_path", lambda name: calls.append(name) or zoo_path(name))
    monkeypatch.setattr(execute, "get_experiment", lambda name: dataclasses.replace(
        get_experiment(name), run=lambda lm, config, unit, cache: []))
    return calls


def test_a_profile_resolves_each_model_once(counted, tmp_path):
    done = profile(["zoo:rope"], 120, tmp_path / "p", progress=False, probe=lambda lm: SPEED, clock=lambda: 0.0)
    parts = done.record["models"]["zoo:rope"]["parts"]
    ran = {p["name"] for p in parts if p["status"] == "done"}
    assert {"niah-depth", "ruler", "head-masking", "intrinsic-entropy"} <= ran  # the parts with model defaults
    assert counted == ["rope"]  # before: 6


def test_a_run_resolves_each_model_once(counted, tmp_path):
    from ctxlens.runner.execute import run

    run("niah-depth", ["zoo:rope"], tmp_path / "r", {"lengths": [256], "depths": [50], "n_samples": 1},
        progress=False)
    assert counted == ["rope"]  # before: 2 (the plan's read_info, then load)


def test_resolved_says_what_the_spec_is_and_the_lm_keeps_it(counted, tmp_path):
    from ctxlens.lm.loading import load

    where = resolved("zoo:rope")
    assert (where.spec, where.kind, where.origin, where.name) == ("zoo:rope", "zoo", "zoo", "zoo:rope")
    assert where.train_length and where.digest is None
    assert as_resolved(where) is where  # resolved already: not again
    lm = load(where, device="cpu")
    assert lm.resolved is where and lm.name == "zoo:rope" and lm.train_length == where.train_length
    assert counted == ["rope"]  # resolved() above; load took the object as it was
    assert resolved("org/name") == Resolved("org/name", spec="org/name", kind="hub")
    (tmp_path / "config.json").write_text("{}")
    assert resolved(str(tmp_path)).kind == "dir"
