"""One generic registry (``ctxlens.core.registry``) behind every table of named things, and the
experiment declarations read from it: ``ctxlens run EXPERIMENT --help`` and ``ctxlens experiments``.
The experiment and task registries discover their modules: each module of the package (but its
declared helpers) must register, which the tests check on the package and on planted modules."""

import re
from collections import Counter
from dataclasses import dataclass

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import option
from ctxlens.core.registry import Registry, discover
from ctxlens.experiments.base import DemoStep, Experiment, Smoke
from ctxlens.experiments.catalog import options_help


# ------------------------------------------------------------------------------- Registry
def test_unknown_name_raises_one_sentence_with_a_suggestion():
    colours = Registry("colour")
    colours.add("green", 1)
    colours.add("purple", 2)
    with pytest.raises(CtxlensError) as err:
        colours["gren"]
    message = str(err.value)
    assert "Unknown colour 'gren'" in message and "Did you mean 'green'?" in message and "\n" not in message
    assert "purple" in message  # the full list


def test_double_registration_is_refused_and_keeps_the_first():
    colours = Registry("colour")
    colours.add("green", 1)
    with pytest.raises(ValueError, match="colour 'green' registered twice"):
        colours.add("green", 2)
    assert colours["green"] == 1 and colours.names() == ["green"]


def test_load_hook_runs_once_on_first_lookup():
    calls = []
    things = Registry("thing", load=lambda: (calls.append(1), things.add("a", "A")))
    assert calls == []
    assert "a" in things and things["a"] == "A" and list(things) == ["a"] and len(things) == 1
    assert calls == [1]


@pytest.mark.parametrize("module,attr,kind,typo,suggestion", [
    ("ctxlens.experiments.registry", "EXPERIMENTS", "experiment", "sufix-ppl", "suffix-ppl"),
    ("ctxlens.tasks.base", "TASKS", "task", "niah_singel_1", "niah_single_1"),
    ("ctxlens.report.registry", "PLOTTERS", "plotter", "sufix-ppl", "suffix-ppl"),
    ("ctxlens.lm.families", "FAMILIES", "model family", "lama", "llama"),
    ("ctxlens.core.papers", "PAPERS", "paper", "geometri", "geometry"),
])
def test_every_table_of_names_is_a_registry_with_suggestions(module, attr, kind, typo, suggestion):
    import importlib

    table = getattr(importlib.import_module(module), attr)
    assert isinstance(table, Registry) and table.kind == kind
    with pytest.raises(CtxlensError, match=f"Did you mean '{suggestion}'"):
        table[typo]


# ------------------------------------------------------------------------------- --help
@dataclass
class _Config:
    lengths: list[int] = option(factory=lambda: [128, 256], help="window lengths in tokens")
    scale: float | None = option(None, help="scale, or none for the model's")
    plain: int = 3


def _declared() -> Experiment:
    return Experiment("toy", _Config, lambda c: [], lambda *a: [], paper="geometry", section="Section 4",
                      smoke=Smoke({}, unmeasured="a toy"), demo=(DemoStep("own", {}),), doc="a toy.")


def _options(lines: list[str]) -> dict[str, list[str]]:
    """{flag: [type, default, help]} of the option lines (columns are 2+ spaces apart)."""
    cells = [re.split(r"\s{2,}", line.strip()) for line in lines if line.startswith("  --")]
    return {c[0]: c[1:] for c in cells if len(c) >= 3}


def test_options_help_lists_type_default_and_help_of_every_option():
    lines = options_help(_declared()).splitlines()
    assert lines[0] == "toy: a toy."
    assert lines[1] == "paper: How much do contextualized representations encode long-range context? (Section 4)"
    assert _options(lines) == {"--lengths": ["list[int]", "128,256", "window lengths in tokens"],
                               "--scale": ["float | None", "none", "scale, or none for the model's"],
                               "--plain": ["int", "3"]}


def test_run_experiment_help_lists_its_options(capsys):
    assert main(["run", "suffix-ppl", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: ctxlens run" in out and "--model MODEL" in out  # the run command's own flags first
    options = _options(out.splitlines())
    # suffix-ppl's Config: lengths [256, 512, 1024, 2048], suffix_len 32, source "sotu" (the natural text)
    assert options["--lengths"][:2] == ["list[int]", "256,512,1024,2048"]
    assert options["--suffix-len"][:2] == ["int", "32"]
    assert options["--source"][:2] == ["str", "sotu"]
    assert all(len(v) == 3 and v[2] for v in options.values())  # every option has its help text
    assert "the geometry paper" not in out and "How much do contextualized" in out


def test_run_help_with_a_typo_is_one_sentence_and_exit_2(capsys):
    assert main(["run", "sufix-ppl", "--help"]) == 2
    captured = capsys.readouterr()
    assert "usage" not in captured.out
    assert "Did you mean 'suffix-ppl'?" in captured.err and captured.err.count("\n") == 1


def test_experiments_lists_every_experiment_with_its_paper(capsys):
    from ctxlens.experiments.registry import experiments

    assert main(["experiments"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line.split()[2] for line in lines[1:]}
    assert set(listed) == set(experiments())
    assert listed["accs-layers"] == "geometry" and listed["ruler"] == "long-sequence"
    assert listed["token-loss"] == "-"


# ------------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("change,message", [
    ({"paper": "geometri"}, "Did you mean 'geometry'"),
    ({"smoke": Smoke({})}, "neither smoke.at_length nor why"),
    ({"demo": (DemoStep("zooo", {}),)}, "demo step on models 'zooo'"),
    ({"demo": (DemoStep("own", {}),)}, "demo step on models 'own'"),  # it loads a model
])
def test_a_declaration_that_cannot_be_read_is_refused_at_registration(change, message):
    from dataclasses import replace

    from ctxlens.experiments.registry import EXPERIMENTS, register

    bad = replace(_declared(), **{"name": "toy-refused", "demo": (DemoStep("zoo", {}),), **change})
    with pytest.raises(CtxlensError, match=message):
        register(bad)
    assert "toy-refused" not in EXPERIMENTS


# ------------------------------------------------------------------------------- discovery
def _origins(table: Registry, origin) -> Counter:
    return Counter(origin(entry) for _, entry in table.items())


def test_every_experiment_module_declares_exactly_one_experiment():
    """The experiments are what the modules of ``ctxlens.experiments`` declare: one each, no count by hand."""
    from ctxlens.experiments.registry import EXPERIMENTS, HELPERS

    modules = discover("ctxlens.experiments", HELPERS)
    by_module = _origins(EXPERIMENTS, lambda e: e.run.__module__)
    assert modules and all(by_module[m] == 1 for m in modules)
    builtin = [name for name, e in EXPERIMENTS.items() if e.run.__module__.startswith("ctxlens.")]
    assert len(builtin) == len(modules)  # and every built-in experiment comes from one of them
    assert not set(HELPERS) & {m.rsplit(".", 1)[1] for m in by_module}  # helpers declare none


def test_every_task_module_registers_its_tasks():
    from ctxlens.tasks import HELPERS, RULER_TASKS, tasks
    from ctxlens.tasks.base import TASKS

    modules = discover("ctxlens.tasks", HELPERS)
    by_module = _origins(TASKS, lambda t: t.build.__module__)
    assert modules and all(by_module[m] >= 1 for m in modules)
    assert {t.build.__module__ for t in tasks().values()} == set(modules)
    assert set(RULER_TASKS) <= set(tasks())  # the paper's 13 are all registered


SCRATCH = "scratch_unregistered"


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Plant modules in a package as a contributor would add them: ``plant(package, text)``;
    the package's path and the registries are restored afterwards."""
    import importlib
    import sys

    def plant(package: str, text: str, table: Registry) -> None:
        module = importlib.import_module(package)
        folder = tmp_path / package.replace(".", "_")
        folder.mkdir()
        (folder / f"{SCRATCH}.py").write_text(text)
        monkeypatch.setattr(module, "__path__", [*module.__path__, str(folder)])
        monkeypatch.setattr(table, "_entries", dict(table.as_dict()))  # what the scratch registers goes
        monkeypatch.delitem(sys.modules, f"{package}.{SCRATCH}", raising=False)

    yield plant
    for package in ("ctxlens.experiments", "ctxlens.tasks"):
        sys.modules.pop(f"{package}.{SCRATCH}", None)


def test_an_experiment_module_that_registers_nothing_is_named(scratch):
    from ctxlens.experiments.registry import EXPERIMENTS, load_builtin

    scratch("ctxlens.experiments", '"""A new experiment whose author forgot register()."""\n\n'
            "def run(lm, config, unit, cache):\n    return []\n", EXPERIMENTS)
    with pytest.raises(CtxlensError) as err:
        load_builtin()
    message = str(err.value)
    assert f"Module ctxlens.experiments.{SCRATCH} registers no experiment" in message and "\n" not in message
    assert "register(Experiment(...))" in message and "HELPERS" in message


def test_an_experiment_module_that_registers_two_is_named(scratch):
    from ctxlens.experiments.registry import EXPERIMENTS, load_builtin

    scratch("ctxlens.experiments", "from dataclasses import replace\n"
            "from ctxlens.experiments.registry import get_experiment, register\n\n"
            "def run(lm, config, unit, cache):\n    return []\n\n"
            "for name in ('scratch-one', 'scratch-two'):\n"
            "    register(replace(get_experiment('token-loss'), name=name, run=run))\n", EXPERIMENTS)
    with pytest.raises(CtxlensError, match=f"Module ctxlens.experiments.{SCRATCH} registers 2 experiments"):
        load_builtin()


def test_a_task_module_that_registers_nothing_is_named(scratch):
    from ctxlens.tasks import load_builtin
    from ctxlens.tasks.base import TASKS

    scratch("ctxlens.tasks", "def build(setup):\n    raise NotImplementedError\n", TASKS)
    with pytest.raises(CtxlensError, match=f"Module ctxlens.tasks.{SCRATCH} registers no task; .*HELPERS"):
        load_builtin()


def test_a_package_registry_loads_its_modules_and_says_again_what_failed(tmp_path, monkeypatch):
    """``Registry.load_package`` on a scratch package: helpers are skipped, a silent module is
    named, and a failed load is not taken for a finished one."""
    import sys

    package = tmp_path / "scratchpkg"
    package.mkdir()
    (package / "__init__.py").write_text("from ctxlens.core.registry import Registry\n"
                                         "COLOURS = Registry('colour', load=lambda: COLOURS.load_package("
                                         "'scratchpkg', ('helper',), origin=lambda e: e[0]))\n")
    (package / "helper.py").write_text("X = 1\n")
    (package / "green.py").write_text("from scratchpkg import COLOURS\nCOLOURS.add('green', (__name__, 2))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("scratchpkg", "scratchpkg.helper", "scratchpkg.green", "scratchpkg.silent"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    (package / "silent.py").write_text("Y = 2\n")
    import scratchpkg

    assert discover("scratchpkg", ("helper",)) == ["scratchpkg.green", "scratchpkg.silent"]
    for _ in range(2):  # the second lookup loads again and says the same
        with pytest.raises(CtxlensError, match="^Module scratchpkg.silent registers no colour; register one in it.$"):
            scratchpkg.COLOURS["green"]
    (package / "silent.py").unlink()  # the contributor removes it (or registers in it): the registry loads
    assert scratchpkg.COLOURS["green"] == ("scratchpkg.green", 2) and list(scratchpkg.COLOURS) == ["green"]
    assert "scratchpkg.helper" not in sys.modules  # helpers are not imported
