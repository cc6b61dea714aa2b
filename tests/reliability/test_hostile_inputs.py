"""Issue 32: a profile directory, run directory, template or row from someone else is data, never
authority: it cannot run code, write outside ``--out``, hang, exhaust memory or end in a traceback.

Each test stands for one break of the issue and failed before its fix. Profiles run in-process on
``zoo:random-llama`` with a fake runner and probe (no suite forward); templates render through
``FileTokenizer`` without transformers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ctxlens.profile.record as records
from ctxlens.cli import main
from ctxlens.core import files, yaml_safe
from ctxlens.core.errors import CtxlensError
from ctxlens.profile import command, planning, resume
from ctxlens.runner import RunStore

SPEED = {"prefill": 2000.0, "at": 512, "slope": 1e-8, "decode": 20.0, "seconds": 0.0}
MODEL = "zoo:random-llama"
FIXTURES = Path(__file__).parents[1] / "report" / "data"


class Runner:
    """Stands for ``ctxlens.runner.execute.run``: records what each part was asked to run with."""

    def __init__(self):
        self.calls: list[tuple[Path, dict]] = []

    def __call__(self, experiment, models, out, options, model_options, **kw):
        self.calls.append((out, dict(model_options)))
        out.mkdir(parents=True, exist_ok=True)


def _record(**part_changes) -> dict:
    """A resumable profile record of one planned part (``niah-depth``) for ``MODEL``."""
    from ctxlens.lm.info import ModelInfo

    info = ModelInfo("llama", "transformer", "rope", 128, False, 128, None, 64).as_dict()
    part = {"name": "niah-depth", "experiment": "niah-depth", "options": {"lengths": [128], "n_samples": 1},
            "model_options": {}, "units": 1, "tokens": 128, "planned_s": 1.0, "estimate_s": 1.0, "notes": [],
            "status": "planned", **part_changes}
    state = {"label": "zoo-random-llama", "info": info, "throughput": dict(SPEED), "setup_s": 0.1,
             "load_average": None, "size": {"length": 128, "scale": 0.1, "extrapolate": True, "reduced": [],
                                            "tokenizer": True},
             "notes": [], "skipped": {}, "left_out": {}, "adjustments": [], "parts": [part]}
    return {"budget_minutes": 1, "length": 128, "source": "sotu", "models": {MODEL: state}}


def _profile(out: Path, record: dict | None = None, runner: Runner | None = None, **kw):
    if record is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / records.RECORD).write_text(json.dumps(record))
    return command.profile([MODEL], 1, out, progress=False, length=128, clock=lambda: 0.0,
                           probe=lambda lm: None, runner=runner or Runner(), **kw)


# -- 1, 2: a record is data, never authority ------------------------------------------------------------

def test_a_record_cannot_enable_remote_code_or_add_model_options(tmp_path):
    runner = Runner()
    out = tmp_path / "p"
    with pytest.raises(CtxlensError, match="model option"):
        _profile(out, _record(model_options={"trust_remote_code": True}), runner)
    assert runner.calls == []
    done = _profile(tmp_path / "q", _record(model_options={"allow_extrapolation": True}), runner)
    assert done.failed == 0 and runner.calls[0][1] == {"allow_extrapolation": True}


@pytest.mark.parametrize("where, value", [("label", "../../X"), ("label", "{abs}"), ("label", ".."),
                                          ("name", "../../../X"), ("name", "a/b"), ("experiment", "token-loss")])
def test_labels_and_part_names_are_plain_names(tmp_path, where, value):
    value = value.replace("{abs}", str(tmp_path / "abs-X"))
    record = _record()
    if where == "label":
        record["models"][MODEL]["label"] = value
    else:
        record["models"][MODEL]["parts"][0][where] = value
    runner = Runner()
    with pytest.raises(CtxlensError, match=r"profile\.json"):
        _profile(tmp_path / "a" / "b" / "p", record, runner)
    assert runner.calls == [] and not (tmp_path / "X").exists() and not (tmp_path / "abs-X").exists()


@pytest.mark.parametrize("change", ["list", "models-string", "extra-key", "part-extra-key", "throughput-string",
                                    "throughput-negative", "info-list", "parts-dict", "budget-string"])
def test_a_profile_record_of_the_wrong_shape_is_one_sentence(tmp_path, capsys, change):
    record = _record()
    state = record["models"][MODEL]
    edits = {"list": lambda: [record], "models-string": lambda: {**record, "models": "x"},
             "extra-key": lambda: {**record, "evil": 1},
             "part-extra-key": lambda: state["parts"][0].update(evil=1),
             "throughput-string": lambda: state["throughput"].update(prefill="fast"),
             "throughput-negative": lambda: state["throughput"].update(prefill=-1.0),
             "info-list": lambda: state.update(info=[1]), "parts-dict": lambda: state.update(parts={}),
             "budget-string": lambda: {**record, "budget_minutes": "1"}}
    changed = edits[change]()
    out = tmp_path / "p"
    out.mkdir()
    (out / records.RECORD).write_text(json.dumps(changed if changed is not None else record))
    before = (out / records.RECORD).read_bytes()
    assert main(["profile", MODEL, "--budget", "1", "--length", "128", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and "profile.json" in err and err.count("\n") == 1
    assert (out / records.RECORD).read_bytes() == before


# -- 3: the profile holds its own lock -----------------------------------------------------------------------

def test_a_second_profile_into_one_out_is_refused(tmp_path, capsys):
    out = tmp_path / "p"
    out.mkdir()
    (out / records.RECORD).write_text(json.dumps(_record()))
    before = (out / records.RECORD).read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(out / command.LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); print('held', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(["profile", MODEL, "--budget", "1", "--length", "128", "--out", str(out), "--no-progress"])
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    err = capsys.readouterr().err
    assert "being written by process" in err and err.count("\n") == 1
    assert (out / records.RECORD).read_bytes() == before  # the first profile's plan is kept


# -- 6: temporary files are created exclusively, never through a planted link ----------------------------------

def test_a_planted_tmp_link_never_redirects_the_profile_record(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    out = tmp_path / "p"
    out.mkdir()
    for name in (f".{records.RECORD}.tmp", f".{records.RECORD}.{os.getpid()}.tmp"):
        (out / name).symlink_to(target)
    records.write(out, {"models": {}})
    assert target.read_text() == "precious"
    assert json.loads((out / records.RECORD).read_text()) == {"schema": 1, "models": {}}


def test_a_planted_tmp_link_never_redirects_atomic_writes(tmp_path):
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    (tmp_path / f".out.txt.{os.getpid()}.tmp").symlink_to(target)
    files.atomic_write(tmp_path / "out.txt", "new")
    assert target.read_text() == "precious" and (tmp_path / "out.txt").read_text() == "new"


def test_a_planted_tmp_link_never_redirects_tasks_export(tmp_path, capsys):
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    folder = tmp_path / "out" / "1024" / "data" / "niah_single_1"
    folder.mkdir(parents=True)
    for name in ("validation.jsonl.tmp", f".validation.jsonl.{os.getpid()}.tmp"):
        (folder / name).symlink_to(target)
    assert main(["tasks", "export", "niah_single_1", "--tokenizer", "byte", "--lengths", "1024", "--n", "1",
                 "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    assert target.read_text() == "precious"
    assert (folder / "validation.jsonl").stat().st_size > 0


@pytest.mark.parametrize("command_line", [
    ["tasks", "export", "niah_single_1", "--tokenizer", "byte", "--lengths", "1024", "--n", "1", "--no-cache",
     "--out", "{file}/sub"],
    ["report", str(FIXTURES / "token-loss"), "--out", "{file}/sub/r.html"],
])
def test_a_path_under_a_file_is_one_sentence(tmp_path, capsys, command_line):
    file = tmp_path / "plain.txt"
    file.write_text("keep")
    assert main([a.replace("{file}", str(file)) for a in command_line]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and err.count("\n") == 1 and "plain.txt" in err
    assert file.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_one_sentence(tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert main(["report", str(FIXTURES / "token-loss"), "--out", str(folder / "r.html")]) == 2
    finally:
        folder.chmod(0o700)
    assert capsys.readouterr().err.startswith("ctxlens: error:")


# -- 7: numeric options have an upper bound, checked before any model loads ---------------------------------

@pytest.mark.parametrize("args", [["--budget", "1e308"], ["--budget", "1e9"], ["--length", "10000000000000"]])
def test_huge_budgets_and_lengths_are_refused_before_loading(tmp_path, capsys, args):
    start = time.perf_counter()
    assert main(["profile", "zoo:no-such-model-loaded", *args, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error: --") and "at most" in err
    assert time.perf_counter() - start < 5 and not (tmp_path / "p").exists()


@pytest.mark.parametrize("args", [["--n", "1000000000"], ["--lengths", "100000000000000"], ["--seed", "-1"],
                                  ["--max-new-tokens", "1000000000"]])
def test_tasks_export_bounds_its_numbers(tmp_path, capsys, args):
    given = {"--n": "1", "--lengths": "256", "--seed": "0", **dict(zip(args[::2], args[1::2]))}
    argv = ["tasks", "export", "niah_single_1", "--tokenizer", "byte", "--out", str(tmp_path / "o"), "--no-cache"]
    start = time.perf_counter()
    assert main(argv + [x for kv in given.items() for x in kv]) == 2
    assert time.perf_counter() - start < 5
    assert capsys.readouterr().err.startswith("ctxlens: error:")


# -- 8: Markdown cells from data are inert -----------------------------------------------------------------------

def _unescaped(cell: str) -> str:
    """``cell`` with every backslash escape (``\\X``) removed: what is left is live Markdown."""
    return re.sub(r"\\.", "", cell)


@pytest.mark.parametrize("name", ["<script>alert(1)</script>", "![t](http://host/x.png)", "[a](javascript:x)",
                                  "`code` *em* _u_ a\\|b &amp;"])
def test_markdown_cells_escape_html_and_link_syntax(name):
    from ctxlens.findings.card import Line
    from ctxlens.report.card import _md, card_markdown

    live = _unescaped(_md(name))
    assert "<" not in live and not any(c in live for c in "[]`*|")  # no tag, link, image, code, emphasis or cell break
    line = Line("effective_length", name, 0.5, name, "", "holds")
    md = card_markdown({name: [line]})
    body = _unescaped(md.splitlines()[-1])
    assert "<script" not in md and "[" not in body and "](" not in body
    assert "**" in md  # the card's own bold markup still works


def test_markdown_keeps_the_cards_bold_and_escapes_inside_it():
    from ctxlens.findings.card import Line
    from ctxlens.report.card import card_markdown

    md = card_markdown({"m": [Line("effective_length", "m", 0.5, "0.5 <b>**x**", "n = 3", "holds")]})
    assert "**0.5 &lt;b>\\*\\*x\\*\\***; n = 3; holds" in md


# -- 9: tracebacks become one sentence ----------------------------------------------------------------------------

DEEP = "[" * 350 + "]" * 350
DEEPER = "[" * 100_000 + "]" * 100_000  # past the JSON parser's own recursion


def test_deep_yaml_and_json_are_one_sentence():
    with pytest.raises(CtxlensError, match="nested"):
        yaml_safe.load(DEEP, "x.yaml")
    with pytest.raises(CtxlensError, match="nested"):
        yaml_safe.load_json(DEEP, "x.json")
    assert yaml_safe.load_json('{"a": [1, {"b": 2}]}', "x.json") == {"a": [1, {"b": 2}]}


def _deep_run(tmp_path: Path, name: str) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "token-loss", run)
    (run / name).write_text(DEEPER if name.endswith(".json") else DEEP)
    return run


@pytest.mark.parametrize("argv", [
    lambda t: ["run", "--config", str(t / "deep.yaml")],
    lambda t: ["run", "token-loss", "--model", MODEL, "--out", str(t / "o"), "--rope-scaling", DEEP],
    lambda t: ["report", str(FIXTURES / "token-loss"), "--out", str(t / "r.html"), "--findings", str(t / "deep.json")],
    lambda t: ["report", str(_deep_run(t, "config.yaml")), "--out", str(t / "r.html")],
    lambda t: ["report", str(_deep_run(t, "env.json")), "--out", str(t / "r.html")],
    lambda t: ["card", str(_deep_run(t, "env.json"))],
])
def test_deep_nesting_never_tracebacks(tmp_path, capsys, argv):
    (tmp_path / "deep.yaml").write_text(DEEP)
    (tmp_path / "deep.json").write_text(DEEPER)
    code = main(argv(tmp_path))
    assert code in (0, 1, 2)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err


def _export_with_tokenizer_json(tmp_path, text: str) -> int:
    """``tasks export`` with a tokenizer folder whose ``tokenizer.json`` is ``text``."""
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(text)
    (folder / "tokenizer_config.json").write_text("{}")
    return main(["tasks", "export", "niah_single_1", "--tokenizer", str(folder), "--lengths", "256", "--n", "1",
                 "--out", str(tmp_path / "o"), "--no-cache"])


def test_deep_tokenizer_json_is_one_sentence(tmp_path, capsys):
    assert _export_with_tokenizer_json(tmp_path, DEEP) == 2
    assert "tokenizer.json" in capsys.readouterr().err


@pytest.mark.parametrize("shape", ['{"model": 1}', "[1, 2]", '{"model": {"type": "BPE"}, "added_tokens": 3}'])
def test_a_tokenizer_json_of_the_wrong_shape_is_one_sentence(tmp_path, capsys, shape):
    assert _export_with_tokenizer_json(tmp_path, shape) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and "tokenizer.json" in err


@pytest.mark.parametrize("device", ["cuda:7", "nonsense", "meta", "cuda"])
def test_a_device_the_machine_lacks_is_refused_before_loading(tmp_path, capsys, device):
    import torch

    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if device == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has 8 GPUs")
    import ctxlens.lm.loading as loading

    calls = []
    real = loading.load
    loading.load = lambda *a, **k: calls.append(a) or real(*a, **k)
    try:
        code = main(["run", "token-loss", "--model", MODEL, "--out", str(tmp_path / "o"), "--device", device,
                     "--lengths", "16", "--no-progress"])
    finally:
        loading.load = real
    assert code == 2 and calls == []
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and "--device" in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("scaling", ["[1,2]", '{"rope_type": "linear", "factor": NaN}', '"linear"',
                                     '{"rope_type": "linear", "factor": -2}',
                                     '{"rope_type": "linear", "factor": true}'])
def test_rope_scaling_has_a_schema(tmp_path, capsys, scaling):
    code = main(["run", "token-loss", "--model", MODEL, "--out", str(tmp_path / "o"), "--rope-scaling", scaling,
                 "--lengths", "16", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and "rope" in err.lower() and not (tmp_path / "o").exists()


@pytest.mark.parametrize("model", [["a", "b"], {"a": 1}, 3])
@pytest.mark.parametrize("cmd", ["card", "report"])
def test_a_row_whose_model_is_not_a_name_is_skipped_with_a_warning(tmp_path, capsys, model, cmd):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "niah-depth", run)
    row = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    store = RunStore(run)
    store.commit("extra", [{**row, "model": model}])
    store.close()
    argv = ["card", str(run)] if cmd == "card" else ["report", str(run), "--out", str(tmp_path / "r.html")]
    assert main(argv) in (0, 1)
    said = capsys.readouterr().err if cmd == "card" else (tmp_path / "r.html").read_text()
    assert "rows skipped" in said


# -- 4: hostile chat templates ---------------------------------------------------------------------------------------

def _template_folder(tmp_path: Path, template: str) -> Path:
    """A byte-level tokenizer folder whose chat template is ``template``."""
    from ctxlens.data.tokenizer import EOS, byte_backend

    folder = tmp_path / "tok"
    folder.mkdir(exist_ok=True)
    byte_backend().save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS, "bos_token": EOS}))
    (folder / "chat_template.jinja").write_text(template)
    return folder


HOSTILE = {
    "nested loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}x",
    "string times": "{{ 'x' * 10**9 }}",
    "list times": "{{ ([1] * 10**9)|length }}",
    "power": "{{ 10 ** (10 ** 8) }}",
    "huge join": "{{ range(100000)|join('x' * 100000) }}",
    "wide center": "{{ 'x'|center(1000000000) }}",
    "str method": "{{ 'ab'.ljust(1000000000) }}",
    "huge range": "{{ range(10**9)|list|length }}",
    "raise": "{{ raise_exception('System role not supported') }}",
    "syntax": "{% for %}",
    "recursion": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "sandbox": "{{ ''.__class__.__mro__ }}",
    "output": "{% for a in range(100000) %}{{ 'y' * 100000 }}{% endfor %}",
    "nested list tojson": "{{ ([[0]*2**25]*2**25)|tojson }}",  # issue 45, item 7: 2**50 items serialised
    "nested list set": "{% set a = [0]*2**24 %}{% set b = [a]*4 %}{{ b|tojson|length }}",
    "replace": "{{ ('x' * 100000).replace('', 'y' * 100000) }}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_chat_templates_end_in_one_sentence_quickly(tmp_path, name, short_template_bound):
    import resource

    from ctxlens.tasks.export import load_tokenizer
    from ctxlens.tasks.render import frame_for

    folder = _template_folder(tmp_path, HOSTILE[name] + "{{ messages[0]['content'] }}")
    tok = load_tokenizer(str(folder))
    start = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CtxlensError, match="chat_template.jinja") as err:
        frame_for(tok, "chat")
    assert time.perf_counter() - start < 15
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 600_000  # KiB: no gigabytes
    assert "\n" not in str(err.value)


def test_an_ordinary_template_still_renders(tmp_path):
    from ctxlens.tasks.export import load_tokenizer
    from ctxlens.tasks.render import frame_for

    template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{{ eos_token }}{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    frame = frame_for(load_tokenizer(str(_template_folder(tmp_path, template))), "chat", "none")
    assert frame.head == "<|user|>" and frame.tail.endswith("<|assistant|>")


@pytest.mark.parametrize("value", ["/etc/passwd", "http://host/v1", "../x"])
def test_a_run_config_cannot_choose_paths_or_endpoints(value):
    from ctxlens.experiments.base import make_config
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.runner import plans

    exp = get_experiment("ruler")
    for key in ("haystack_source", "api_base"):
        with pytest.raises(CtxlensError, match="config.yaml"):
            plans.for_model(exp, {}, make_config(exp.Config, {}), MODEL, {MODEL: {key: value}}, [], False)


@pytest.mark.parametrize("argv", [["report", str(FIXTURES / "ruler"), "--out", "{tmp}/r.html", "--threshold", "1e308"],
                                  ["card", str(FIXTURES / "ruler"), "--threshold", "nan"],
                                  ["report", str(FIXTURES / "ruler"), "--out", "{tmp}/r.html", "--threshold", "-5"],
                                  ["run", "token-loss", "--model", MODEL, "--out", "{tmp}/o", "--rope-theta", "1e308"]])
def test_thresholds_and_rope_theta_are_bounded(tmp_path, capsys, argv):
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    assert capsys.readouterr().err.startswith("ctxlens: error: --")
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "o").exists()


# -- 10: notes from a record print inert -------------------------------------------------------------------------------

ESCAPES = "\x1b[2J\x1b]0;pwned\x07\r\u202eevil"


def test_a_records_notes_print_without_terminal_escapes(capsys):
    from ctxlens.core.terminal import printable

    state = _record(notes=[f"note {ESCAPES}"])["models"][MODEL]
    state["notes"], state["adjustments"] = [f"model {ESCAPES}"], [f"adjusted {ESCAPES}"]
    state["skipped"], state["left_out"] = {"rope-dims": ESCAPES}, {"ruler": ESCAPES}
    planning.print_plan(MODEL, state, 60.0)
    printed = capsys.readouterr().out
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", printed.replace("\n", ""))
    assert printed.count("\\x1b[2J\\x1b]0;pwned\\x07\\r\\u202eevil") == 5  # each shown, escaped
    assert printable("tab\tand 'quotes' é") == "tab\tand 'quotes' é"


# -- issue 45, item 1: nothing is written or moved through a planted link -----------------------------------

def test_a_planted_part_directory_link_sends_no_run_outside_the_profile(tmp_path):
    """A link planted where a part's run directory goes (``DIR/<model>/<part>`` -> elsewhere) is one
    sentence; the runner is never called and nothing appears at the link's target."""
    out, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    elsewhere.mkdir()
    record = _record()
    (out / "zoo-random-llama").mkdir(parents=True)
    (out / "zoo-random-llama" / "niah-depth").symlink_to(elsewhere, target_is_directory=True)
    runner = Runner()
    with pytest.raises(CtxlensError, match="is a symbolic link; ctxlens never writes or moves a part's run"):
        _profile(out, record, runner)
    assert runner.calls == [] and list(elsewhere.iterdir()) == []


def test_a_planted_superseded_link_moves_nothing_out_of_the_profile(tmp_path):
    """``--redo`` moves a part's earlier run into ``DIR/<model>/.superseded``; planted as a link to another
    place, it is refused and the run stays where it was."""
    out, elsewhere = tmp_path / "p", tmp_path / "elsewhere"
    elsewhere.mkdir()
    record = _record(status="done", spent_s=1.0)
    where = out / "zoo-random-llama"
    (where / "niah-depth").mkdir(parents=True)
    (where / "niah-depth" / "config.yaml").write_text("experiment: niah-depth\n")
    (where / resume.SUPERSEDED).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(CtxlensError, match="is a symbolic link"):
        _profile(out, record, Runner(), redo=("niah-depth",))
    assert (where / "niah-depth" / "config.yaml").is_file() and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("where, key", [("state", "notes"), ("state", "skipped"), ("state", "left_out"),
                                        ("state", "adjustments"), ("part", "options"), ("part", "units"),
                                        ("part", "tokens"), ("part", "notes"), ("count", "n_samples")])
def test_a_record_missing_what_the_command_reads_back_is_one_sentence(tmp_path, where, key):
    """Issue 45, item 10: a profile.json the validator accepted with an optional key removed raised
    KeyError, and one with a sample count of 0 ZeroDivisionError; both are one sentence now."""
    record = _record()
    state = record["models"][MODEL]
    if where == "state":
        del state[key]
    elif where == "part":
        del state["parts"][0][key]
    else:
        state["parts"][0]["options"][key] = 0
    runner = Runner()
    with pytest.raises(CtxlensError, match=r"profile\.json is not a profile record ctxlens wrote"):
        _profile(tmp_path / "p", record, runner)
    assert runner.calls == []
