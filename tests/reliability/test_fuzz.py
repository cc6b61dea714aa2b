"""Issue 32, item 8: every command's inputs, fuzzed.

A seeded generator makes hostile variants (random bytes, deep nesting, huge numbers, NaN, wrong
types, links, absurd sizes) of command-line options, model options, a run's ``config.yaml`` and
rows, a ``profile.json`` record, GGUF files (built with the ``gguf`` package, then cut, inflated or
corrupted), chat templates and ``tokenizer.json`` files, and feeds each to ``ctxlens.cli.main`` in
this process. Each case must:

* end with exit status 0, 1 or 2 (or argparse's usage error), never an exception, and a status 2
  says one ``ctxlens: error:`` sentence on stderr with no traceback;
* leave every file outside its output directory and the ctxlens home as it was (the inputs, a
  planted link's target);
* print no control character (a terminal escape sequence, a bidirectional override) from its inputs;
* end within ``CASE_SECONDS`` (a hang guard, not a speed test) and grow the process's peak memory by
  less than ``CASE_KIB``.

Model loading is replaced by a one-sentence refusal: every option is validated before a model loads,
so a case that gets that far has passed validation, and none costs a forward pass.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import struct
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError

SEED = 32
CASE_SECONDS = 20
CASE_KIB = 1_500_000  # peak RSS growth of one case
FIXTURES = Path(__file__).parents[1] / "report" / "data"
MODEL = "zoo:random-llama"

HOSTILE = ["", " ", "-1", "0", "-0", "1e308", "-1e308", "1e-320", "nan", "NaN", "inf", "-inf", "9" * 400,
           "99999999999999999999", "0x10", "1_000", "\uff11\uff12", "\x00", "\x1b[31mred\x1b[0m", "\u202eevil",
           "[" * 600, "{\"a\":" * 400 + "1" + "}" * 400, "true", "yes", "null", "[1,2]", "{}", '{"a": NaN}',
           "../../x", "/etc/passwd", "/dev/zero", "a,b,,c", "1,2,-3", "16,16,16", "16;rm -rf /", "x" * 5000,
           "{{ 7*7 }}", "<script>alert(1)</script>", "![i](http://h/x.png)", "%s%n", "'", "\"", "\\"]


# escapes and bidi overrides; not \r, which transformers' progress bars print
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Hung(BaseException):
    """A case ran past ``CASE_SECONDS`` (BaseException: no ``except Exception`` in ctxlens swallows it)."""


@dataclass
class Case:
    family: str
    argv: list[str]  # {in}, {out} and {victim} are replaced by the case's folders
    inputs: dict[str, bytes | tuple[str, str]] = field(default_factory=dict)  # name -> bytes, or ("link", target)
    setup: Callable[[Path], None] | None = None  # builds inputs that need code (run copies, GGUF files)
    refused: str = ""  # when set: the case must end in one error sentence that names this


def _random_text(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.choice(HOSTILE)
    if kind == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).decode("latin-1")
    if kind == 2:
        return str(rng.choice([1, -1]) * 10 ** rng.randrange(0, 40))
    return rng.choice(HOSTILE) + rng.choice(HOSTILE)


def _hostile_value(rng: random.Random, depth: int = 0):
    """A JSON/YAML value of a random wrong shape."""
    kind = rng.randrange(10)
    if kind == 0 and depth < 3:
        return {_random_text(rng)[:20]: _hostile_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    if kind == 1 and depth < 3:
        return [_hostile_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return rng.choice([float("nan"), float("inf"), -1, 0, 10 ** 30, 1e308, True, None, "", _random_text(rng),
                       [1, 2], {"a": 1}, 2 ** 63, -2 ** 63, 0.5])


def _dump(value) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


# -- case generators --------------------------------------------------------------------------------------------

def option_cases(rng: random.Random, n: int) -> list[Case]:
    import dataclasses

    from ctxlens.experiments.registry import experiments

    names = sorted(experiments())
    fields = {e: [f.name for f in dataclasses.fields(experiments()[e].Config)] for e in names}
    out = []
    for _ in range(n):
        exp = rng.choice(names + ["no-such-experiment", "../x"])
        args = ["run", exp, "--model", MODEL, "--out", "{out}/run", "--no-progress"]
        for _ in range(rng.randrange(1, 3)):
            name = rng.choice(fields.get(exp) or ["lengths"]) if rng.random() < 0.8 else _random_text(rng)[:12]
            args += [f"--{name.replace('_', '-')}", _random_text(rng)]
        out.append(Case("options", args))
    return out


MODEL_FLAGS = ["--dtype", "--device", "--device-map", "--rope-theta", "--rope-scaling", "--rope-layers",
               "--attn-implementation", "--revision", "--offload-folder"]


def model_option_cases(rng: random.Random, n: int) -> list[Case]:
    out = []
    for _ in range(n):
        flag = rng.choice(MODEL_FLAGS)
        value = _random_text(rng) if rng.random() < 0.6 else json.dumps(_hostile_value(rng))
        if rng.random() < 0.5:
            argv = ["run", "token-loss", "--model", MODEL, "--out", "{out}/run", "--no-progress", flag, value]
        elif flag in ("--dtype", "--device", "--attn-implementation", "--revision"):
            argv = ["profile", MODEL, "--out", "{out}/p", "--no-progress", flag, value]
        else:
            argv = ["profile", MODEL, "--out", "{out}/p", "--no-progress", rng.choice(["--budget", "--length"]),
                    _random_text(rng)]
        out.append(Case("model options", argv))
    return out


def export_option_cases(rng: random.Random, n: int) -> list[Case]:
    from ctxlens.tasks import RULER_TASKS

    flags = ["--lengths", "--n", "--seed", "--template", "--system-prompt", "--max-new-tokens", "--haystack-source",
             "--squad", "--hotpotqa", "--num_needle_k", "--type_haystack", "--placement", "--depths", "--gamma",
             "--num_hops", "--num_chains", "--dataset"]
    out = []
    for _ in range(n):
        args = {"--lengths": "1024", "--n": "1"}
        flag = rng.choice(flags)
        args[flag] = _random_text(rng)
        argv = ["tasks", "export", rng.choice(RULER_TASKS), "--tokenizer", "byte", "--out", "{out}/t", "--no-cache"]
        out.append(Case("export options", argv + [x for kv in args.items() for x in kv]))
    return out


def config_cases(rng: random.Random, n: int) -> list[Case]:
    import yaml

    keys = ["experiment", "model", "models", "out", "options", "model_options", "fingerprints", _random_text(rng)]
    out = []
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        elif kind == 1:
            raw = ("a:\n" + "".join("  " * (d + 1) + "a:\n" for d in range(rng.randrange(70, 400)))).encode()
        elif kind == 2:
            raw = b"a: &x [1]\nb: [*x, *x]\n"
        else:
            config = {"experiment": "token-loss", "model": MODEL, "out": "{out}/run",
                      "options": {"lengths": "16"}}
            for _ in range(rng.randrange(1, 4)):
                config[rng.choice(keys)] = _hostile_value(rng)
            raw = yaml.safe_dump(config, allow_unicode=True).replace("'{out}", "'{out}").encode()
        out.append(Case("run --config", ["run", "--config", "{in}/c.yaml"], {"c.yaml": raw}))
    return out


def _run_copy(name: str, mutate: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        run = folder / "in" / "run"
        shutil.copytree(FIXTURES / name, run)
        mutate(run)
    return setup


def _mutate_row(rng: random.Random) -> Callable[[Path], None]:
    seed = rng.random()

    def mutate(run: Path) -> None:
        from ctxlens.runner import RunStore

        r = random.Random(seed)
        row = json.loads((run / "results.jsonl").read_text().splitlines()[0])
        for _ in range(r.randrange(1, 4)):
            key = r.choice(list(row) + ["extra"])
            row[key] = _hostile_value(r)
        store = RunStore(run)
        store.commit(f"fuzz-{seed}", [row])
        store.close()
    return mutate


def _mutate_file(rng: random.Random, name: str) -> Callable[[Path], None]:
    seed = rng.random()

    def mutate(run: Path) -> None:
        r = random.Random(seed)
        path = run / name
        raw = path.read_bytes()
        kind = r.randrange(5)
        if kind == 0:
            raw = raw[:r.randrange(len(raw) + 1)]
        elif kind == 1:
            at = r.randrange(len(raw))
            raw = raw[:at] + bytes([r.randrange(256)]) + raw[at + 1:]
        elif kind == 2:
            raw = (b"[" * 5000 + b"]" * 5000) if name.endswith(".json") else b"a:\n" + b"  - " * 2000 + b"1\n"
        elif kind == 3:
            raw = _dump(_hostile_value(r)) if name.endswith(".json") else json.dumps(_hostile_value(r)).encode()
        else:
            path.unlink()
            path.symlink_to(run.parents[3] / "victim")
            return
        path.write_bytes(raw)
    return mutate


def run_dir_cases(rng: random.Random, n: int) -> list[Case]:
    out = []
    for _ in range(n):
        name = rng.choice(["token-loss", "niah-depth", "ruler", "loss-vs-length"])
        what = rng.choice(["row", "row", "config.yaml", "env.json", "results.jsonl", "units.jsonl"])
        mutate = _mutate_row(rng) if what == "row" else _mutate_file(rng, what)
        command = rng.choice(["card", "card", "report", "run"])
        if command == "card":
            argv = ["card", "{in}/run"]
        elif command == "report":
            argv = ["report", "{in}/run", "--out", "{out}/r.html"]
        else:  # a resume against the tampered directory: the directory is the output
            argv = ["run", name, "--model", MODEL, "--out", "{out}/run", "--no-progress"]

            def mutate(run, inner=mutate, name=name):
                inner(run)
                (run.parents[1] / "out").mkdir()
                shutil.move(run, run.parents[1] / "out" / "run")
        out.append(Case(f"{command} on a tampered run", argv, setup=_run_copy(name, mutate)))
    return out


def _profile_record() -> dict:
    from ctxlens.lm.info import ModelInfo

    info = ModelInfo("llama", "transformer", "rope", 128, False, 128, None, 64).as_dict()
    part = {"name": "niah-depth", "experiment": "niah-depth", "options": {"lengths": [128], "n_samples": 1},
            "model_options": {}, "units": 1, "tokens": 128, "planned_s": 1.0, "estimate_s": 1.0,
            "notes": ["\x1b[2J\x1b]0;pwned\x07 note"], "status": "planned"}
    state = {"label": "zoo-random-llama", "info": info,
             "throughput": {"prefill": 2000.0, "at": 512, "slope": 1e-8, "decode": 20.0, "seconds": 0.0},
             "setup_s": 0.1, "load_average": None,
             "size": {"length": 128, "scale": 0.1, "extrapolate": True, "reduced": [], "tokenizer": True},
             "notes": [], "skipped": {}, "left_out": {}, "adjustments": [], "parts": [part]}
    return {"budget_minutes": 1, "length": 128, "models": {MODEL: state}}


def _poke(value, rng: random.Random):
    """``value`` with one random place (at any depth) replaced by a hostile value or removed."""
    if isinstance(value, dict) and value and rng.random() < 0.7:
        key = rng.choice(list(value))
        if rng.random() < 0.2:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: _poke(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.7:
        i = rng.randrange(len(value))
        return value[:i] + [_poke(value[i], rng)] + value[i + 1:]
    return _hostile_value(rng)


def profile_cases(rng: random.Random, n: int) -> list[Case]:
    import ctxlens.profile.record as records

    out = []
    for _ in range(n):
        record = _profile_record()
        for _ in range(rng.randrange(1, 3)):
            record = _poke(record, rng)
        raw = _dump(record) if rng.random() < 0.9 else bytes(rng.randrange(256) for _ in range(50))
        if rng.random() < 0.5:
            argv = ["card", "{out}/p"]
        else:
            argv = ["profile", MODEL, "--out", "{out}/p", "--no-progress", "--budget", "1", "--length", "128"]

        def setup(folder: Path, raw=raw) -> None:
            (folder / "out" / "p").mkdir(parents=True)
            (folder / "out" / "p" / records.RECORD).write_bytes(raw)
        out.append(Case("profile record", argv, setup=setup))
    return out


def _small_gguf(path: Path, rng: random.Random) -> None:
    """A small valid GGUF (llama metadata, a byte vocabulary, one tensor) written with the ``gguf`` package."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(rng.choice([64, 128, 2 ** 32 - 1]))
    writer.add_block_count(1)
    writer.add_embedding_length(8)
    writer.add_head_count(2)
    writer.add_tokenizer_model("gpt2")
    tokens = [bytes([b]).decode("latin-1") for b in range(256)]
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([1] * len(tokens))
    writer.add_token_merges([])
    if rng.random() < 0.5:
        writer.add_chat_template(_template(rng))
    writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def gguf_cases(rng: random.Random, n: int) -> list[Case]:
    out = []
    for _ in range(n):
        seed = rng.random()

        def setup(folder: Path, seed=seed) -> None:
            r = random.Random(seed)
            path = folder / "in" / "m.gguf"
            _small_gguf(path, r)
            raw = bytearray(path.read_bytes())
            kind = r.randrange(5)
            if kind == 0:
                raw = raw[:r.randrange(4, len(raw))]
            elif kind == 1:  # a count or length inflated
                at = r.choice([8, 16]) if r.random() < 0.5 else r.randrange(24, min(len(raw), 4000) - 8)
                raw[at:at + 8] = struct.pack("<Q", r.choice([2 ** 63, 10 ** 12, 2 ** 32, 0]))
            elif kind == 2:
                for _ in range(r.randrange(1, 20)):
                    raw[r.randrange(len(raw))] = r.randrange(256)
            elif kind == 3:
                raw[4:8] = struct.pack("<I", r.choice([0, 1, 2, 4, 2 ** 31]))
            path.write_bytes(bytes(raw))
        out.append(Case("GGUF", ["tasks", "export", "niah_single_1", "--tokenizer", "{in}/m.gguf", "--lengths",
                                 "256", "--n", "1", "--template", "auto", "--out", "{out}/t", "--no-cache"],
                        setup=setup))
    return out


TEMPLATE_PIECES = ["{{ messages[0]['content'] }}", "{% for m in messages %}{{ m['content'] }}{% endfor %}",
                   "{{ 'x' * 10**9 }}",
                   "{% for a in range(10**6) %}{% for b in range(10**6) %}{% endfor %}{% endfor %}",
                   "{{ raise_exception('no') }}", "{% for %}", "{{ ''.__class__.__mro__ }}", "{{ 10 ** 10 ** 8 }}",
                   "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "{{ range(10**9)|list|length }}",
                   "{{ cycler.__init__.__globals__ }}", "{{ self }}", "{% include '/etc/passwd' %}",
                   "{% import 'x' as y %}", "{{ lipsum.__globals__ }}", "{{ messages|tojson }}", "{{ eos_token }}",
                   "{% set x = namespace(a=1) %}{{ x.a }}", "{{ (messages * 10**7)|length }}", "\x00", "{{",
                   "{% if add_generation_prompt %}<|assistant|>{% endif %}", "{{ 'a'|center(10**9) }}"]


def _template(rng: random.Random) -> str:
    return "".join(rng.choice(TEMPLATE_PIECES) for _ in range(rng.randrange(1, 4)))


def _tokenizer_folder(folder: Path, tokenizer_json: bytes | None = None, template: str | None = None) -> None:
    from ctxlens.data.tokenizer import EOS, byte_backend

    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer_json is None:
        byte_backend().save(str(folder / "tokenizer.json"))
    else:
        (folder / "tokenizer.json").write_bytes(tokenizer_json)
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS, "bos_token": EOS}))
    if template is not None:
        (folder / "chat_template.jinja").write_text(template)


def template_cases(rng: random.Random, n: int) -> list[Case]:
    out = []
    for _ in range(n):
        template = _template(rng)
        out.append(Case("chat template", ["tasks", "export", "niah_single_1", "--tokenizer", "{in}/tok", "--lengths",
                                          "512", "--n", "1", "--template", "chat", "--out", "{out}/t", "--no-cache"],
                        setup=lambda f, t=template: _tokenizer_folder(f / "in" / "tok", template=t)))
    return out


def tokenizer_cases(rng: random.Random, n: int) -> list[Case]:
    from ctxlens.data.tokenizer import byte_backend

    good = json.loads(byte_backend().to_str())
    out = []
    for _ in range(n):
        kind = rng.randrange(4)
        if kind == 0:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 500)))
        elif kind == 1:
            raw = b"[" * rng.randrange(100, 100_000) + b"]"
        else:
            raw = _dump(_poke(good, rng))
        out.append(Case("tokenizer.json", ["tasks", "export", "niah_single_1", "--tokenizer", "{in}/tok", "--lengths",
                                           "512", "--n", "1", "--out", "{out}/t", "--no-cache"],
                        setup=lambda f, raw=raw: _tokenizer_folder(f / "in" / "tok", tokenizer_json=raw)))
    return out


def link_cases(rng: random.Random) -> list[Case]:
    """Output folders holding planted ``*.tmp`` links (or an output file that is a link) to the victim, and a
    config file that is a link. (An ``--out`` the user names through a link is the user's choice and followed.)"""
    def plant(where: str, names: list[str]) -> Callable[[Path], None]:
        def setup(folder: Path) -> None:
            target = folder / "out" / where
            target.mkdir(parents=True, exist_ok=True)
            for name in names:
                (target / name.replace("{pid}", str(os.getpid()))).symlink_to(folder.parents[1] / "victim")
        return setup

    return [
        Case("links", ["tasks", "export", "niah_single_1", "--tokenizer", "byte", "--lengths", "1024", "--n", "1",
                       "--out", "{out}/t", "--no-cache"],
             setup=plant("t/1024/data/niah_single_1", [".validation.jsonl.{pid}.tmp", "validation.jsonl.tmp"])),
        Case("links", ["report", str(FIXTURES / "token-loss"), "--out", "{out}/r.html"],
             setup=plant(".", [".r.html.{pid}.tmp", "r.html"])),
        Case("links", ["run", "--config", "{in}/c.yaml"], {"c.yaml": ("link", "victim")}),
    ]


# -- issue 45: inputs bounded before they are read, count options, GGUF files and their cache ---------------------

BIG = 3 << 30  # bytes of a sparse file: no disk, and gigabytes of memory if it were read


def _sparse(path: Path, size: int = BIG) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


def _oversized(kind: str, r: random.Random) -> Callable[[Path], None]:
    """Inputs of ``kind`` too large (sparse, or one byte over the bound), nested too deeply, or a FIFO."""
    how = r.choice(["sparse", "over", "fifo", "nested"])

    def fill(path: Path, limit: int) -> None:
        if how == "sparse":
            _sparse(path)
        elif how == "over":
            path.write_text("{" + " " * limit + "}")
        elif how == "fifo":
            os.mkfifo(path)
        else:
            path.write_text('{"data": ' + "[" * 50_000 + "]" * 50_000 + "}")

    def setup(folder: Path) -> None:
        from ctxlens.lm.model_files import LIMITS

        if kind == "tokenizer":
            name = r.choice(["chat_template.jinja", "tokenizer_config.json", "tokenizer.json",
                             "special_tokens_map.json", "chat_template.json"])
            _tokenizer_folder(folder / "in" / "tok")
            target = folder / "in" / "tok" / name
            target.unlink(missing_ok=True)
            fill(target, LIMITS[name])
        elif kind == "model":
            model = folder / "in" / "model"
            model.mkdir()
            (model / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
            name = r.choice(["config.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"])
            (model / name).unlink(missing_ok=True)
            fill(model / name, LIMITS[name])
        else:  # a QA file
            fill(folder / "in" / "qa.json", 256 << 20)
    return setup


def bounded_file_cases(rng: random.Random, n: int) -> list[Case]:
    out = []
    for _ in range(n):
        kind = rng.choice(["tokenizer", "model", "qa"])
        r = random.Random(rng.random())
        if kind == "tokenizer":
            argv = ["tasks", "export", "niah_single_1", "--tokenizer", "{in}/tok", "--lengths", "512", "--n", "1",
                    "--template", rng.choice(["chat", "auto", "plain"]), "--out", "{out}/t", "--no-cache"]
        elif kind == "model":
            argv = rng.choice([["run", "token-loss", "--model", "{in}/model", "--out", "{out}/r", "--no-progress"],
                               ["profile", "{in}/model", "--out", "{out}/p", "--no-progress", "--budget", "1"]])
        else:
            flag, task = rng.choice([("--squad", "qa_1"), ("--hotpotqa", "qa_2")])
            argv = ["tasks", "export", task, "--tokenizer", "byte", "--lengths", "2048", "--n", "1", flag,
                    "{in}/qa.json", "--out", "{out}/t", "--no-cache"]
        out.append(Case(f"oversized {kind} file", argv, setup=_oversized(kind, r)))
    return out


COUNT_FLAGS = {"ruler": ["--n-samples"], "niah-depth": ["--n-samples"], "visible-fraction": ["--n-samples"],
               "position-weighted-qa": ["--n-samples"], "suffix-ppl": ["--n-sequences"],
               "head-masking": ["--n-passkey", "--detect-samples"], "rope-theta-sweep": ["--n-needles"],
               "rope-dims": ["--n-pairs"], "loss-vs-length": ["--n-boot"], "intrinsic-entropy": ["--kde-samples"]}
TASK_COUNTS = {"vt": ["--num_chains", "--num_hops"], "fwe": ["--coded_wordlen", "--vocab_size"],
               "cwe": ["--num_cw", "--freq_cw", "--freq_ucw"],
               "niah_multikey_1": ["--num_needle_k"], "niah_multivalue": ["--num_needle_v"],
               "niah_multiquery": ["--num_needle_q"]}
HUGE_COUNTS = ["1000000000", "4194305", "1000000", "100001", "3000", "26", "1", "0", "-1", "9" * 30]


def count_cases(rng: random.Random, n: int) -> list[Case]:
    """Count options of experiments (refused at option parsing) and of the task generators (refused before a
    draw that could never end), with huge, edge and capacity-exceeding values."""
    out = []
    for _ in range(n):
        value = rng.choice(HUGE_COUNTS)
        if rng.random() < 0.5:
            exp = rng.choice(sorted(COUNT_FLAGS))
            argv = ["run", exp, "--model", MODEL, "--out", "{out}/run", "--no-progress", rng.choice(COUNT_FLAGS[exp]),
                    value]
        else:
            task = rng.choice(sorted(TASK_COUNTS))
            length, n_samples = rng.choice([("1024", "1"), ("4096", "1"), ("131072", "1"), ("131072", "100000")])
            argv = ["tasks", "export", task, "--tokenizer", "byte", "--lengths", length, "--n", n_samples,
                    rng.choice(TASK_COUNTS[task]), value, "--out", "{out}/t", "--no-cache"]
        out.append(Case("count options", argv))
    return out


HUGE_INTEGERS = ["1" + "0" * 30, "-" + "1" * 30, "9223372036854775808", "-4097",
                 "1" + "0" * 4400]  # past every declared range (2^63: past a seed's); the last past int()'s text limit


def integer_option_cases(rng: random.Random, n: int) -> list[Case]:
    """Every integer option of every experiment (batch sizes, steps, widths, top-k, bins, lengths, seeds,
    layers), with values past its declared range: refused at parsing, before any model loads."""
    import dataclasses
    import typing

    from ctxlens.experiments.registry import experiments

    options = []
    for name, exp in sorted(experiments().items()):
        hints = typing.get_type_hints(exp.Config, include_extras=True)
        options += [(name, f.name) for f in dataclasses.fields(exp.Config)
                    if "int" in str(hints[f.name]).replace("Literal", "")]
    out = []
    for _ in range(n):
        exp, option = rng.choice(options)
        argv = ["run", exp, "--model", MODEL, "--out", "{out}/run", "--no-progress",
                f"--{option.replace('_', '-')}", rng.choice(HUGE_INTEGERS)]
        out.append(Case("integer options", argv, refused=option))
    return out


FILTER_PIECES = ["{{ (range(2000)|list)|tojson(indent=1000000) }}", "{{ range(2000)|map('center', 1000000)|join }}",
                 "{% set s = 'x' * 1000000 %}{% for _ in range(9) %}{% set s = s ~ s %}{% endfor %}{{ s|length }}",
                 "{{ ('x' * 30000000).split()|length }}", "{{ 'ab'|center(1000000)|wordwrap(3)|length }}",
                 "{{ range(100000)|batch(3)|list|tojson|length }}", "{{ range(10**6)|list|unique|list|length }}",
                 "{{ messages|tojson(indent=100) }}", "{{ messages[0]['content'] }}"]


def filter_template_cases(rng: random.Random, n: int) -> list[Case]:
    """Chat templates whose filters allocate where the counting guards do not count (``tojson`` with a huge
    indent, ``map('center')``, doubling with ``~``): stopped by the worker's memory cap or time bound."""
    out = []
    for _ in range(n):
        template = "".join(rng.choice(FILTER_PIECES) for _ in range(rng.randrange(1, 3)))
        out.append(Case("template filters", ["tasks", "export", "niah_single_1", "--tokenizer", "{in}/tok",
                                             "--lengths", "512", "--n", "1", "--template", "chat", "--out", "{out}/t",
                                             "--no-cache"],
                        setup=lambda f, t=template: _tokenizer_folder(f / "in" / "tok", template=t)))
    return out


def gguf_disagreeing_cases(rng: random.Random, n: int) -> list[Case]:
    """Valid GGUF files whose metadata disagrees with their tensors, and converted caches changed afterwards."""
    out = []
    for _ in range(n):
        seed = rng.random()

        def setup(folder: Path, seed=seed) -> None:
            from tests.lm.test_gguf import write_tiny_gguf

            r = random.Random(seed)
            path = folder / "in" / "m.gguf"
            if r.random() < 0.6:
                key = r.choice(["embedding_length", "vocab_size", "head_count", "block_count"])
                write_tiny_gguf(path, meta={key: r.choice([1, 3, 8, 48, 100])})
                return
            from ctxlens.lm import fingerprint, gguf

            write_tiny_gguf(path, d=r.choice([16, 32]))
            shutil.rmtree(gguf.cache_dir(gguf.content_sha256(path)), ignore_errors=True)  # an earlier case's
            cache = gguf.converted(path, "m.gguf")
            victim = r.choice(sorted(p for p in cache.iterdir() if p.name != gguf.SOURCE_FILE))
            kind = r.randrange(4)
            if kind == 0:
                raw = bytearray(victim.read_bytes())
                raw[r.randrange(len(raw))] ^= 0xFF
                victim.write_bytes(bytes(raw))
            elif kind == 1:
                victim.unlink()
            elif kind == 2:
                (cache / "added_tokens.json").write_text("{}")
            else:
                record = json.loads((cache / gguf.SOURCE_FILE).read_text())
                record["files"] = _hostile_value(r)
                (cache / gguf.SOURCE_FILE).write_text(json.dumps(record, allow_nan=True))
            fingerprint._HASHED.clear()  # as a new process
        argv = rng.choice([["tasks", "export", "niah_single_1", "--tokenizer", "{in}/m.gguf", "--lengths", "256", "--n",
                            "1", "--out", "{out}/t", "--no-cache"],
                           ["run", "token-loss", "--model", "{in}/m.gguf", "--out", "{out}/r", "--no-progress"]])
        out.append(Case("GGUF metadata or cache", argv, setup=setup))
    return out


def bound_cases() -> list[Case]:
    rng = random.Random(SEED + 45)
    return (bounded_file_cases(rng, 30) + count_cases(rng, 40) + gguf_disagreeing_cases(rng, 16)
            + integer_option_cases(rng, 60) + filter_template_cases(rng, 16))


def all_cases() -> list[Case]:
    rng = random.Random(SEED)
    return (option_cases(rng, 70) + model_option_cases(rng, 50) + export_option_cases(rng, 50)
            + config_cases(rng, 40) + run_dir_cases(rng, 70) + profile_cases(rng, 50) + gguf_cases(rng, 40)
            + template_cases(rng, 30) + tokenizer_cases(rng, 30) + link_cases(rng))


# -- the harness ---------------------------------------------------------------------------------------------------

def _tree(root: Path, skip: set[Path]) -> dict[str, tuple]:
    """Every path under ``root`` (not following links) but ``skip``: its kind, size, mtime and link target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in dirnames + filenames:
            path = here / name
            st = path.lstat()
            plain = not stat.S_ISDIR(st.st_mode)  # a folder's times change when its output folder is made
            out[str(path.relative_to(root))] = (st.st_mode, st.st_size if plain else 0, st.st_mtime_ns if plain else 0,
                                                os.readlink(path) if path.is_symlink() else None)
    return out


def _deny_loading(*args, **kwargs):
    raise CtxlensError("fuzz: the model would load here; every option passed validation.")


@pytest.fixture
def sandbox(tmp_path, monkeypatch, short_template_bound):  # templates past the bound: the cases check they end
    import ctxlens.lm.loading as loading

    home = tmp_path / "home"
    monkeypatch.setenv("CTXLENS_HOME", str(home))
    monkeypatch.setattr(loading, "load", _deny_loading)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim").write_text("precious")
    (tmp_path / "victim-dir").mkdir()
    return tmp_path


def _run_case(root: Path, i: int, case: Case) -> str | None:
    """Run one case; a description of what broke, or None."""
    folder = root / "cases" / str(i)
    (folder / "in").mkdir(parents=True)
    for name, data in case.inputs.items():
        if isinstance(data, tuple):
            (folder / "in" / name).symlink_to(root / data[1])
        else:
            (folder / "in" / name).write_bytes(data.replace(b"{out}", str(folder / "out").encode()))
    if case.setup is not None:
        case.setup(folder)
    argv = [a.replace("{in}", str(folder / "in")).replace("{out}", str(folder / "out")) for a in case.argv]
    before = _tree(root, {folder / "out", root / "home"})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    err, printed = io.StringIO(), io.StringIO()

    def hung(signum, frame):
        raise Hung

    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(printed):
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse's usage error
                code = exit_.code if exit_.code in (0, 2) else f"SystemExit({exit_.code})"
    except Hung:
        return f"ran past {CASE_SECONDS} s"
    except BaseException as exc:  # noqa: BLE001 - any exception out of main is a break
        where = [f"{Path(f.filename).name}:{f.lineno}" for f in traceback.extract_tb(exc.__traceback__)
                 if "/ctxlens/" in f.filename][-2:]
        return f"{type(exc).__name__} at {where}: {str(exc)[:200]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    said = err.getvalue()
    if code not in (0, 1, 2):
        return f"exit status {code!r}"
    if "Traceback" in said:
        return "a traceback on stderr"
    if CONTROL.search(printed.getvalue() + said):
        return f"a control character printed raw: {CONTROL.search(printed.getvalue() + said).group()!r}"
    if code == 2 and "usage:" not in said and (said.count("ctxlens: error:") != 1 or
                                               not said.strip().splitlines()[-1].startswith("ctxlens: error:")):
        return f"status 2 without one error sentence: {said[-300:]!r}"
    if case.refused and (code != 2 or case.refused not in said):
        return f"not refused naming {case.refused!r} (exit {code}): {said[-200:]!r}"
    if (root / "victim").read_text() != "precious" or any((root / "victim-dir").iterdir()):
        return "wrote through a link"
    after = _tree(root, {folder / "out", root / "home"})
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    if changed:
        return f"touched files outside its output: {sorted(changed)[:3]}"
    if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak > CASE_KIB:
        return "peak memory grew by more than 1.5 GB"
    return None


def test_fuzz_every_command(sandbox):
    cases = all_cases()
    breaks = []
    for i, case in enumerate(cases):
        why = _run_case(sandbox, i, case)
        if why is not None:
            breaks.append(f"{case.family} {[a[:60] for a in case.argv]}: {why}")
        shutil.rmtree(sandbox / "cases" / str(i), ignore_errors=True)
    assert len(cases) >= 400
    assert not breaks, f"{len(breaks)} of {len(cases)} inputs broke:\n" + "\n".join(breaks[:40])


def test_fuzz_bounds_and_caches(sandbox):
    """Issue 45's classes: files over their bound (sparse 3 GB, one byte over, FIFOs, deep nesting) in tokenizer
    folders, model directories and QA files; count options of experiments and task generators; GGUF files that
    disagree with themselves and converted caches changed afterwards; integer options past their declared ranges;
    chat templates whose filters allocate unseen by the counting guards. Same harness and bounds per case."""
    cases = bound_cases()
    breaks = []
    for i, case in enumerate(cases):
        why = _run_case(sandbox, i, case)
        if why is not None:
            breaks.append(f"{case.family} {[a[:60] for a in case.argv]}: {why}")
        shutil.rmtree(sandbox / "cases" / str(i), ignore_errors=True)
    assert len(cases) >= 160 and len({c.family for c in cases}) == 7
    assert not breaks, f"{len(breaks)} of {len(cases)} inputs broke:\n" + "\n".join(breaks[:40])
