"""Issue 45: every input bounded before it is read, every count option bounded, GGUF files that disagree
with themselves and a deeply nested QA file refused in one sentence, and the GGUF conversion cache
verified on every use.

Each test stands for one break of the issue and fails on the code before its fix: the files over their
bound were read whole (a file one byte over its bound was accepted), count options of 10^9 were accepted
and generators drew for ever, a GGUF with a wrong ``embedding_length`` raised transformers' RuntimeError
(one with a block too many loaded with random weights), a nested ``--squad`` file raised RecursionError,
and a changed cache was loaded as it was. Huge files are sparse: they take no disk, and a read of them
would take gigabytes of memory."""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.core import files
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import MAX_COUNT, make_config

GB3 = 3 << 30
MIB = 1 << 20


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))


@contextmanager
def within(seconds: int):
    """Fail (instead of hanging) when the block runs past ``seconds``."""
    def late(signum, frame):
        raise TimeoutError(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def sparse(path: Path, size: int = GB3) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def last_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("ctxlens: error:") and err.count("ctxlens: error:") == 1, err[-500:]
    return line


def tokenizer_folder(folder: Path, config: dict | None = None) -> Path:
    from ctxlens.data.tokenizer import EOS, byte_backend

    folder.mkdir(parents=True)
    byte_backend().save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(config or {"eos_token": EOS, "bos_token": EOS}))
    return folder


def export(tmp_path, tokenizer: str, *extra: str, task: str = "niah_single_1", length: str = "512") -> int:
    return main(["tasks", "export", task, "--tokenizer", tokenizer, "--lengths", length, "--n", "1",
                 "--out", str(tmp_path / "t"), "--no-cache", *extra])


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# -- 1: model and tokenizer files bounded on the open file, before any read ------------------------------------

@pytest.mark.parametrize("name, limit", [("chat_template.jinja", 1 * MIB), ("tokenizer_config.json", 64 * MIB)])
def test_a_huge_chat_template_or_tokenizer_config_is_refused_unread(tmp_path, capsys, name, limit):
    folder = tokenizer_folder(tmp_path / "tok")
    sparse(folder / name)
    before = peak_kib()
    with within(30):
        assert export(tmp_path, str(folder), "--template", "chat") == 2
    said = last_error(capsys)
    assert name in said and "3,221,225,472 bytes" in said and f"{limit >> 20} MiB" in said
    assert peak_kib() - before < 500_000  # the 3 GB were not read
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("name, limit", [("chat_template.jinja", 1 * MIB), ("tokenizer_config.json", 64 * MIB)])
def test_a_file_one_byte_over_its_bound_is_refused(tmp_path, capsys, name, limit):
    """Valid files one byte over the bound: the code before issue 45 read and used them."""
    from ctxlens.data.tokenizer import EOS

    folder = tokenizer_folder(tmp_path / "tok")
    if name == "chat_template.jinja":
        body = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        (folder / name).write_text(body + " " * (limit + 1 - len(body)))
    else:
        body = json.dumps({"eos_token": EOS, "bos_token": EOS})
        (folder / name).write_text(body + " " * (limit + 1 - len(body)))
    assert export(tmp_path, str(folder), "--template", "chat" if name.startswith("chat") else "plain") == 2
    said = last_error(capsys)
    assert name in said and f"{limit + 1:,} bytes" in said


def test_a_chat_template_in_tokenizer_config_is_bounded_too(tmp_path, capsys):
    from ctxlens.data.tokenizer import EOS

    template = "{{ messages[0]['content'] }}" + " " * MIB
    folder = tokenizer_folder(tmp_path / "tok", {"eos_token": EOS, "bos_token": EOS, "chat_template": template})
    assert export(tmp_path, str(folder), "--template", "chat") == 2
    assert "chat template" in last_error(capsys)


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "chat_template.jinja", "tokenizer.json",
                                  "model.safetensors.index.json", "additional_chat_templates/tool_use.jinja"])
def test_a_model_directory_is_checked_before_transformers_reads_it(tmp_path, name):
    """``read_info`` and ``load`` of a local directory: every file transformers reads whole is bounded first."""
    from ctxlens.lm.info import read_info

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    if name == "config.json":  # valid JSON, one byte over its bound
        text = json.dumps({"model_type": "llama", "hidden_size": 8})
        (model / name).write_text(text + " " * (16 * MIB + 1 - len(text)))
    else:
        (model / name).parent.mkdir(exist_ok=True)
        sparse(model / name)
    with pytest.raises(CtxlensError, match=rf"'{model / name}' is [0-9,]+ bytes, more than the [0-9]+ MiB"):
        read_info(str(model))


@pytest.fixture
def hub(monkeypatch):
    """A hub that lists ``listed`` ({file: size}) for every repo and caches ``cached`` ({file: path}); the
    transformers reads that would follow fail the test."""
    import types

    import huggingface_hub
    import transformers

    state: dict = {"listed": {}, "cached": {}, "asked": 0}

    def model_info(self, repo_id, revision=None, files_metadata=False, timeout=None):
        state["asked"] += 1
        if state["listed"] is None:
            raise OSError("no network")
        return types.SimpleNamespace(siblings=[types.SimpleNamespace(rfilename=n, size=b)
                                               for n, b in state["listed"].items()])

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the suite runs offline
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, name, revision=None: state["cached"].get(name))
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", lambda *a, **k: pytest.fail("transformers read"))
    return state


@pytest.mark.parametrize("name, size", [("chat_template.jinja", GB3), ("tokenizer_config.json", 64 * MIB + 1),
                                        ("additional_chat_templates/tool_use.jinja", 2 * MIB)])
def test_a_hub_model_whose_listed_files_are_over_their_bounds_is_refused_before_download(tmp_path, capsys, hub,
                                                                                       name, size):
    """Issue 45: a hub id's files were downloaded and read whole by transformers before ctxlens saw them;
    now the sizes the hub lists are checked first, in one sentence, and transformers is never called."""
    hub["listed"] = {"config.json": 700, "model.safetensors": GB3, name: size}  # weights are not read whole
    code = main(["run", "token-loss", "--model", "org/model", "--out", str(tmp_path / "r"), "--no-progress"])
    said = last_error(capsys)
    assert code == 2 and f"'{name}' of hub model 'org/model' is {size:,} bytes" in said and "--revision" in said
    assert hub["asked"] >= 1 and not (tmp_path / "r").exists()  # planning and loading each ask


def test_a_hub_models_cached_copy_is_checked_on_its_file_and_no_listing_is_no_refusal(tmp_path, hub, monkeypatch):
    import huggingface_hub

    from ctxlens.lm import model_files

    hub["cached"] = {"tokenizer_config.json": str(sparse(tmp_path / "tokenizer_config.json"))}
    with pytest.raises(CtxlensError, match="tokenizer_config.json' is 3,221,225,472 bytes, more than the 64 MiB"):
        model_files.check_hub("org/model")
    hub["cached"], hub["listed"] = {}, None  # no network: only the cache is checked, transformers says the rest
    model_files.check_hub("org/model")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    hub["listed"] = {"chat_template.jinja": GB3}
    model_files.check_hub("org/model")  # offline: the hub is not asked
    assert hub["asked"] == 1
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    hub["listed"] = {"config.json": 700, "tokenizer.json": 30 * MIB}  # real sizes pass
    model_files.check_hub("org/model")


def test_a_fifo_in_a_model_directory_is_refused_not_waited_on(tmp_path):
    from ctxlens.lm.info import read_info

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    os.mkfifo(model / "tokenizer_config.json")
    with within(20), pytest.raises(CtxlensError, match="not a regular file"):
        read_info(str(model))


def test_the_bounded_readers_check_the_open_file(tmp_path):
    """``files.read_text(path, limit)`` (for run-side readers such as ``--findings``) and ``read_input``."""
    big = sparse(tmp_path / "findings.json")
    before = peak_kib()
    with pytest.raises(CtxlensError, match="findings.json' is 3,221,225,472 bytes, more than the 64 MiB"):
        files.read_text(big, 64 * MIB, "Findings file")
    with pytest.raises(CtxlensError, match="more than the 64 MiB"):
        files.read_input(big, 64 * MIB, "Findings file")
    assert peak_kib() - before < 500_000
    small = tmp_path / "small.json"
    small.write_text("[]")
    assert files.read_text(small, 2) == "[]" and files.read_input(small, 2) == b"[]"


# -- 4: QA files --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["nested", "huge"])
def test_a_hostile_squad_file_is_one_sentence(tmp_path, capsys, kind):
    path = tmp_path / "squad.json"
    if kind == "nested":  # RecursionError before issue 45
        path.write_text('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        sparse(path)
    with within(30):
        assert export(tmp_path, "byte", "--squad", str(path), task="qa_1", length="2048") == 2
    said = last_error(capsys)
    assert ("nested deeper" in said) if kind == "nested" else ("256 MiB" in said)


# -- 2: count options ---------------------------------------------------------------------------------------------

COUNTS = ("n_samples", "n_sequences", "n_passkey", "detect_samples", "n_needles", "n_pairs", "kde_samples", "n_boot",
          "n_draws")


MORE = [("dominant-dimension", "n_bins"), ("rope-dim-ablation", "n_bins"),  # 16 GB at 10^9 bins
        ("accs-length", "period_len"), ("accs-length", "stride")]  # 23 GB (killed) at 10^9 tokens


def _count_options() -> list[tuple[str, str]]:
    import dataclasses

    from ctxlens.experiments.registry import experiments

    return [(name, f.name) for name, exp in sorted(experiments().items()) for f in dataclasses.fields(exp.Config)
            if f.name in COUNTS] + MORE


@pytest.mark.parametrize("experiment, option", _count_options())
def test_every_count_option_is_bounded_at_parsing(experiment, option):
    from ctxlens.core.options import MAX_TOKENS
    from ctxlens.experiments.registry import get_experiment

    most = MAX_TOKENS if option in ("period_len", "stride") else MAX_COUNT
    with pytest.raises(CtxlensError, match=rf"Option '{option}' must be in \[[0-9], {most:,}\], got 1000000000"):
        make_config(get_experiment(experiment).Config, {option: 10**9})


def _integer_options() -> list[tuple[str, str]]:
    import dataclasses
    import typing

    from ctxlens.experiments.registry import experiments

    out = []
    for name, exp in sorted(experiments().items()):
        hints = typing.get_type_hints(exp.Config, include_extras=True)
        out += [(name, f.name) for f in dataclasses.fields(exp.Config)
                if "int" in str(hints[f.name]).replace("Literal", "") and f.init]
    return out


@pytest.mark.parametrize("experiment, option", _integer_options())
def test_every_integer_option_of_every_experiment_has_a_declared_range(experiment, option):
    """Issue 45, item 4: no integer option takes any integer. Before, 45 options of 24 experiments (batch
    sizes, training steps, widths, top-k, queries, bins, lengths, seeds, layers) took 10^12: a batch or a
    width that size allocates until the machine gives out, a negative seed was numpy's traceback. A
    value past the range is one sentence naming the option and its range; a list option checks each
    item."""
    from ctxlens.experiments.registry import get_experiment

    config = get_experiment(experiment).Config
    for value in (10**30, -(10**30), [10**30]):
        with pytest.raises(CtxlensError) as refused:
            make_config(config, {option: value})
        said = str(refused.value)
        assert "\n" not in said and option in said and ("must be" in said or "not taken by" in said), said


def test_n_samples_of_a_task_experiment_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    import ctxlens.lm.loading as loading

    monkeypatch.setattr(loading, "load", lambda *a, **k: pytest.fail("the model loaded"))
    code = main(["run", "ruler", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"), "--no-progress",
                 "--n-samples", "1000000000"])
    assert code == 2 and "1000000000" in last_error(capsys)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("task, option, value, length, said", [
    ("vt", "--num_chains", "1000000000", "4096", "from 1 to 4,194,304"),  # looped for ever
    ("vt", "--num_hops", "100000", "4096", "100,001 variables"),  # looped for ever
    ("vt", "--num_chains", "3000", "131072", "variable names"),  # the example's 3-letter names ran out: for ever
    ("fwe", "--coded_wordlen", "1000000000", "4096", "from 1 to 64"),  # 3.3 GB and growing
    ("fwe", "--vocab_size", "1000000000", "4096", "from 0 to 4,194,304"),  # grew without bound
    ("fwe", "--coded_wordlen", "1", "4096", "give only 26"),  # 1-letter words ran out: drew for ever
    ("fwe", "--vocab_size", "1", "4096", "4 words at least"),  # IndexError
    ("fwe", "--vocab_size", "1000000", "131072", "could never appear"),  # minutes of fitting words never shown
    ("cwe", "--num_cw", "1000000000", "4096", "from 1 to 4,194,304"),
])
def test_task_count_options_are_bounded_by_what_the_generator_can_produce(tmp_path, capsys, task, option, value,
                                                                         length, said):
    start = time.perf_counter()
    with within(60):
        assert export(tmp_path, "byte", option, value, task=task, length=length) == 2
    assert said in last_error(capsys) and time.perf_counter() - start < 30


def test_a_batch_larger_than_the_machine_is_refused_before_it_is_built(tmp_path, capsys):
    with within(30):
        assert main(["tasks", "export", "niah_single_1", "--tokenizer", "byte", "--lengths", "4000000", "--n",
                     "100000", "--out", str(tmp_path / "t"), "--no-cache"]) == 2
    said = last_error(capsys)
    assert "100,000 samples" in said and "GiB" in said


def test_the_chain_names_are_the_same_as_before(tmp_path):
    """The distinct-name draw now keeps a set beside the list: the same names in the same order."""
    import random
    import string

    from ctxlens.tasks.vt import chains

    def before(rng, n_chains, n_hops, letters):  # the loop as it was
        names: list[str] = []
        while len(names) < n_chains * (n_hops + 1):
            name = "".join(rng.choices(string.ascii_uppercase, k=letters))
            if name not in names:
                names.append(name)
        return names

    names, _ = chains(random.Random(3), 40, 9, 3)
    assert [n for chain in names for n in chain] == before(random.Random(3), 40, 9, 3)


# -- 3 and 5a: GGUF files ----------------------------------------------------------------------------------------

def _tiny(tmp_path, **kw) -> Path:
    from tests.lm.test_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path / "tiny.gguf", **kw)


def _cache_entries() -> list[str]:
    from ctxlens.core.paths import home

    root = home() / "gguf"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


@pytest.mark.parametrize("meta, said", [
    ({"embedding_length": 48}, "disagrees with itself"),  # RuntimeError before issue 45
    ({"vocab_size": 100}, "disagrees with itself"),  # RuntimeError
    ({"head_count": 8}, "disagrees with itself"),  # RuntimeError
    ({"block_count": 3}, "lacks 9 tensor"),  # loaded, with a third block of random weights
    ({"head_count": 100}, "transformers cannot read the GGUF file"),  # StrictDataclassClassValidationError
])
def test_a_gguf_whose_metadata_disagrees_with_its_tensors_is_one_sentence(tmp_path, capsys, meta, said):
    import ctxlens

    path = _tiny(tmp_path, meta=meta)
    with pytest.raises(CtxlensError, match=said):
        ctxlens.load(str(path))
    assert _cache_entries() == []
    code = main(["run", "token-loss", "--model", str(path), "--out", str(tmp_path / "r"), "--no-progress",
                 "--lengths", "16", "--n-samples", "1"])
    assert code == 2 and said in last_error(capsys)


def test_a_changed_gguf_cache_is_refused_and_converted_anew_once_deleted(tmp_path):
    import shutil

    import ctxlens
    from ctxlens.lm import fingerprint, gguf

    path = _tiny(tmp_path)
    ctxlens.load(str(path))
    (sha,) = _cache_entries()
    cache = gguf.cache_dir(sha)
    record = json.loads((cache / gguf.SOURCE_FILE).read_text())
    assert set(record["files"]) == {p.name for p in cache.iterdir()} - {gguf.SOURCE_FILE}
    weights = cache / "model.safetensors"
    original = weights.read_bytes()
    raw = bytearray(original)
    raw[-3] ^= 0xFF  # a byte of the last tensor
    weights.write_bytes(bytes(raw))
    fingerprint._HASHED.clear()  # as a new process
    with pytest.raises(CtxlensError, match=r"model.safetensors changed since the conversion\); delete that directory"):
        ctxlens.load(str(path))
    weights.write_bytes(original)
    (cache / "tokenizer_config.json").rename(tmp_path / "aside.json")  # a tokenizer file taken away
    with pytest.raises(CtxlensError, match="tokenizer_config.json is missing"):
        ctxlens.load(str(path))
    (tmp_path / "aside.json").rename(cache / "tokenizer_config.json")
    (cache / "added_tokens.json").write_text("{}")  # a file planted
    with pytest.raises(CtxlensError, match="added_tokens.json was added"):
        ctxlens.load(str(path))
    shutil.rmtree(cache)  # what the sentence says to do
    assert ctxlens.load(str(path)).tokenizer is not None and _cache_entries() == [sha]


def test_a_changed_cache_named_by_its_path_is_not_taken_for_the_gguf(tmp_path):
    """``--model ~/.cache/ctxlens/gguf/<sha>``: the weights record named the GGUF's digest from the record alone."""
    import ctxlens
    from ctxlens.lm import fingerprint, gguf
    from ctxlens.lm.info import read_info

    path = _tiny(tmp_path)
    ctxlens.load(str(path))
    (sha,) = _cache_entries()
    cache = gguf.cache_dir(sha)
    assert read_info(str(cache)).weights["digest"] == f"sha256:{sha}"
    weights = cache / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-3] ^= 0xFF
    weights.write_bytes(bytes(raw))
    fingerprint._HASHED.clear()
    with pytest.raises(CtxlensError, match="changed since the conversion"):
        read_info(str(cache))


def test_a_record_naming_another_file_is_refused(tmp_path):
    import ctxlens
    from ctxlens.lm import gguf

    path = _tiny(tmp_path)
    ctxlens.load(str(path))
    (sha,) = _cache_entries()
    record_file = gguf.cache_dir(sha) / gguf.SOURCE_FILE
    record = json.loads(record_file.read_text())
    record_file.write_text(json.dumps({**record, "sha256": "0" * 64}))
    with pytest.raises(CtxlensError, match="names another file"):
        ctxlens.load(str(path))


def test_a_cache_of_an_earlier_ctxlens_is_converted_again_not_trusted(tmp_path, monkeypatch):
    import ctxlens
    from ctxlens.lm import gguf

    path = _tiny(tmp_path)
    ctxlens.load(str(path))
    (sha,) = _cache_entries()
    cache = gguf.cache_dir(sha)
    record = json.loads((cache / gguf.SOURCE_FILE).read_text())
    digests = record.pop("files")
    (cache / gguf.SOURCE_FILE).write_text(json.dumps(record))  # as an earlier ctxlens wrote it
    raw = bytearray((cache / "model.safetensors").read_bytes())
    raw[-3] ^= 0xFF  # changed while nothing vouched for it
    (cache / "model.safetensors").write_bytes(bytes(raw))
    converted, convert = [], gguf.convert
    monkeypatch.setattr(gguf, "convert", lambda *a: converted.append(a) or convert(*a))
    ctxlens.load(str(path))
    assert len(converted) == 1 and _cache_entries() == [sha]
    assert json.loads((cache / gguf.SOURCE_FILE).read_text())["files"] == digests  # the same bytes as converted
    assert not [p for p in cache.parent.iterdir() if p.name.startswith(".")]  # the old one moved aside and removed
