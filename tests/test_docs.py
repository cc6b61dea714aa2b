"""The README is a front door and the pages in ``docs/`` stay true (issue 46, part 4).

- ``README.md`` has at most 300 lines, and its set-up commands are the ones ``.ci/run`` runs;
- every relative Markdown link in ``README.md`` and ``docs/**/*.md`` reaches an existing file, and
  every ``#anchor`` a heading of the target (GitHub's rule for heading anchors);
- every command in a fenced code block that starts with ``ctxlens `` parses with the CLI's own
  parser, nothing run: extra options only where ``ctxlens`` takes them (``run``, ``tasks export``),
  a ``run``'s experiment registered and each extra option a field of its ``Config``. Optional
  groups (``[--out DIR]``) are parsed with their contents; a command with a shell placeholder
  (``<...>`` or ``...``) is skipped, since it is not meant to run as written (none is, today).
  ``tasks export``'s extra options are RULER's task options and are not checked here;
- every ``python path/to/script.py`` and ``python -m module`` names a file or module that exists
  (an upper-case placeholder such as ``bench/NAME.py`` must match at least one file), and every
  inline path under the repository's top folders exists (but ``GONE``: paths named as history);
- the Python blocks of ``docs/contributing.md`` are copied from ``docs/examples/adding_an_experiment.py``,
  and that example runs end to end (in a subprocess: it registers an experiment, which must not
  leak into this process's registry).

Each helper is also given a small broken case, so that each check can fail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLE = ROOT / "docs" / "examples" / "adding_an_experiment.py"
MAX_README_LINES = 300

FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.M | re.S)  # ```lang\nbody```
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCRIPT = re.compile(r"\bpython(?:3(?:\.\d+)?)?[ \t]+(?:(-m)[ \t]+([\w.]+)|([\w./-]+\.py)\b)")
TOP_FOLDERS = ("src/", "tests/", "bench/", "scripts/", "reference/", "docs/", ".ci/")
# paths the docs name as history, not as files of the tree: where reference/profile was first written
GONE = {"reference/profile-new"}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --------------------------------------------------------------------------------------------- helpers
def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced code block."""
    return [(m.group(2).strip(), m.group(3)) for m in FENCE.finditer(text)]


def prose(text: str) -> str:
    """``text`` without its fenced blocks, inline code and HTML comments (where links are not links)."""
    text = FENCE.sub("", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (Markdown marks dropped) lower-cased, every character but
    letters, digits, '-', '_' and spaces dropped, spaces turned into '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.lower()
    return "".join(c for c in text if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a Markdown text; a repeated one gets -1, -2, ... as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", text)):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """Every relative link of ``page`` that reaches no file, or an anchor that no heading of its target has."""
    text = page.read_text() if text is None else text
    problems = []
    for target in LINK.findall(prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked here
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve()
        if path and not file.exists():
            problems.append(f"{target}: no such file {file}")
            continue
        if anchor and not (path and (file.is_dir() or file.suffix != ".md")):
            if anchor not in anchors(file.read_text() if path else text):
                problems.append(f"{target}: no heading '#{anchor}' in {file.name if path else page.name}")
    return problems


def ctxlens_commands(text: str) -> list[str]:
    """The ``ctxlens ...`` commands of the fenced blocks: continuation lines joined, ``a && b`` split."""
    commands = []
    for _, body in fenced_blocks(text):
        for line in body.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                if part.strip().startswith("ctxlens "):
                    commands.append(" ".join(part.split()))
    return commands


def has_placeholder(command: str) -> bool:
    return "..." in command or bool(re.search(r"<[^>]*>", command))


def command_problem(command: str) -> str | None:
    """Why ``command`` (one ``ctxlens ...`` line) would not parse, or None; nothing is run."""
    from ctxlens.cli import _parser
    from ctxlens.experiments.registry import get_experiment

    command = re.sub(r"\[(--[^\[\]]*)\]", r"\1", command)  # an optional group: parse its contents
    argv = shlex.split(command, comments=True)[1:]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            args, extra = _parser().parse_known_args(argv)
        except SystemExit:
            return err.getvalue().strip().splitlines()[-1]
    if args.command == "tasks" and args.action == "export":
        return None
    if extra and args.command != "run":
        return f"unrecognized arguments: {' '.join(extra)}"
    if args.command != "run" or args.experiment is None:
        return None
    try:
        config = get_experiment(args.experiment).Config
    except Exception as err:  # an unknown name: the registry's sentence
        return str(err)
    fields = {f.name for f in dataclasses.fields(config)}
    for i, token in enumerate(extra):
        if token.startswith("--"):
            name = token[2:].partition("=")[0].replace("-", "_")
            if name not in fields:
                return f"{args.experiment} has no option --{token[2:].partition('=')[0]}"
        elif i == 0 or not extra[i - 1].startswith("--"):
            return f"unexpected argument {token!r}"
    return None


def missing_scripts(text: str) -> list[str]:
    """Every ``python FILE.py`` / ``python -m MODULE`` of ``text`` whose file or module does not exist."""
    missing = []
    for m in SCRIPT.finditer(text):
        if m.group(1):  # python -m MODULE
            module = m.group(2)
            local = ROOT / module.replace(".", "/")
            if not (local.is_dir() or local.with_suffix(".py").exists() or importlib.util.find_spec(module)):
                missing.append(f"python -m {module}")
        else:
            path = m.group(3)
            pattern = re.sub(r"\b[A-Z][A-Z_]+\b", "*", path)  # bench/NAME.py: some bench/*.py
            if not list(ROOT.glob(pattern)):
                missing.append(f"python {path}")
    return missing


def missing_paths(text: str) -> list[str]:
    """Every inline-code path under the repository's top folders (``tests/test_x.py``, ``src/ctxlens/``)
    that does not exist."""
    spans = re.findall(r"`([^`\s]+)`", FENCE.sub("", text))
    return [s for s in spans if s.startswith(TOP_FOLDERS) and s not in GONE and not (ROOT / s.rstrip("/")).exists()]


# ---------------------------------------------------------------------------------------- the checks
def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"
    # and it links every page of docs/
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(prose(README.read_text()))}
    pages = {p.resolve() for p in PAGES if p.parent.name == "docs" and p.name != "README.md"}
    assert pages <= linked, f"README.md does not link {sorted(p.name for p in pages - linked)}"


def test_the_readmes_set_up_commands_are_the_ones_ci_runs():
    """The README's fenced shell commands before its first profile are lines of ``.ci/run`` (which adds
    ``CTXLENS_REQUIRE_REAL=1`` to the test command: environment assignments are compared without)."""
    text = README.read_text()
    setup = text[text.index("## Set up"):text.index("\n## ", text.index("## Set up") + 1)]
    strip = lambda line: re.sub(r"\b[A-Z_]+=\S+\s+", "", line).strip()  # noqa: E731
    ci = {strip(line) for line in (ROOT / ".ci" / "run").read_text().splitlines()}
    commands = [line for lang, body in fenced_blocks(setup) if lang == "bash" for line in body.splitlines()]
    assert len(commands) == 3  # install and run the demo; the reference models; the test suite
    assert all(strip(c) in ci for c in commands), [c for c in commands if strip(c) not in ci]
    assert any("python -m pytest -n auto --dist loadgroup" in c for c in commands)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_reaches_a_file_and_heading(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_ctxlens_command_in_a_code_block_parses(page):
    commands = [c for c in ctxlens_commands(page.read_text()) if not has_placeholder(c)]
    assert {c: command_problem(c) for c in commands if command_problem(c)} == {}


def test_the_docs_hold_ctxlens_commands_to_check():
    assert sum(len(ctxlens_commands(p.read_text())) for p in PAGES) >= 30


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_script_and_module_named_exists(page):
    assert missing_scripts(page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_repository_path_named_exists(page):
    assert missing_paths(page.read_text()) == []


def test_the_contributing_guides_code_is_the_example_files():
    example = EXAMPLE.read_text()
    blocks = [body for lang, body in fenced_blocks((ROOT / "docs" / "contributing.md").read_text()) if lang == "python"]
    assert len(blocks) == 2  # the experiment's declaration and its plotter
    assert all(block in example for block in blocks), "docs/contributing.md quotes lines the example does not have"


def test_the_example_registers_an_experiment_and_runs_it_on_a_zoo_model(tmp_path):
    from ctxlens.experiments.registry import experiments
    from ctxlens.runner import read_rows

    out = tmp_path / "run"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_rows(out)
    assert len(rows) == 4  # two windows at each of two lengths
    assert {(r["model"], r["experiment"]) for r in rows} == {("zoo:rope", "early-late-loss")}
    assert sorted((r["length"], r["sample"]) for r in rows) == [(64, 0), (64, 1), (128, 0), (128, 1)]
    for r in rows:
        assert r["n_tokens"] == (r["length"] - 1) // 4
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("nll_early", "nll_late"))
        assert r["gain"] == pytest.approx(r["nll_early"] - r["nll_late"])
    assert (out / "report.html").is_file() and "early-late-loss" in (out / "report.html").read_text()
    assert len(done.stdout.strip().splitlines()) >= len(rows)
    assert "early-late-loss" not in experiments()  # registered in the example's process only


# ----------------------------------------------------------------------------- the checks can fail
@pytest.mark.parametrize("heading, anchor", [
    ("Set up", "set-up"),
    ("A first profile: SmolLM2-135M at L = 1024 on natural text",
     "a-first-profile-smollm2-135m-at-l--1024-on-natural-text"),
    ("Representation geometry: *How much?* (`geometry`)", "representation-geometry-how-much-geometry"),
    ("What the core provides, and where it comes from", "what-the-core-provides-and-where-it-comes-from"),
    ("snake_case and -dashes-", "snake_case-and--dashes-"),
])
def test_slug_follows_githubs_rule(heading, anchor):
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor():
    assert anchors("# A\n\n## Notes\n\n```\n# not a heading\n```\n\n## Notes\n") == {"a", "notes", "notes-1"}


@pytest.mark.parametrize("text, broken", [
    ("[ok](card.md) and [ok](card.md#how-each-line-is-tested) and [web](https://example.org/x)", 0),
    ("[missing file](no-such-page.md)", 1),
    ("[missing heading](card.md#no-such-heading)", 1),
    ("[missing heading here](#no-such-heading)\n\n# Here\n", 1),
    ("[ok here](#here)\n\n# Here\n", 0),
    ("`[in code](no-such-page.md)` and\n```\n[in a block](no-such-page.md)\n```\n", 0),
])
def test_broken_links_are_caught(text, broken):
    assert len(broken_links(ROOT / "docs" / "page.md", text)) == broken


@pytest.mark.parametrize("command, ok", [
    ("ctxlens run suffix-ppl --model zoo:rope --out runs/x --lengths 128,256 --n-sequences 2", True),
    ("ctxlens demo [--out ctxlens-demo] [--quick]", True),
    ("ctxlens run suffix-ppl --model m --out o --rope-scaling '{\"rope_type\": \"yarn\"}'", True),
    ("ctxlens tasks export niah_single_1 --tokenizer byte --num_needle_k 4 --out data", True),
    ("ctxlens run no-such-experiment --model zoo:rope --out runs/x", False),
    ("ctxlens run suffix-ppl --model zoo:rope --out runs/x --lenghts 128", False),
    ("ctxlens profile ref:smollm2-135m --budgett 10", False),
    ("ctxlens card", False),
    ("ctxlens profile", False),
    ("ctxlens nosuchcommand", False),
])
def test_bad_ctxlens_commands_are_caught(command, ok):
    assert (command_problem(command) is None) == ok


def test_commands_are_found_in_blocks_only_and_placeholders_are_recognised():
    text = "`ctxlens inline`\n\n```bash\nctxlens run ruler \\\n  --lengths 4096\n. x && ctxlens demo\n```\n"
    assert ctxlens_commands(text) == ["ctxlens run ruler --lengths 4096", "ctxlens demo"]
    assert has_placeholder("ctxlens zoo train [NAME ...]") and has_placeholder("ctxlens card <dir>")
    assert not has_placeholder("ctxlens card prof")


@pytest.mark.parametrize("text, missing", [
    ("`python reference/side_by_side.py` and `python -m pytest` and `python -m bench --quick`", 0),
    ("`python bench/NAME.py --quick`", 0),
    ("`python scripts/no_such_script.py`", 1),
    ("```bash\npython -m no_such_module_of_ctxlens\n```", 1),
])
def test_missing_scripts_are_caught(text, missing):
    assert len(missing_scripts(text)) == missing


def test_missing_paths_are_caught():
    assert missing_paths("`tests/test_docs.py`, `src/ctxlens/`, `zoo:rope`, `tests/no_such_test.py`") == [
        "tests/no_such_test.py"]
