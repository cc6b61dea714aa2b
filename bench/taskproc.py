"""Whole-process cost of making a RULER dataset: ``ctxlens tasks export`` vs a RULER-style process.

The long-sequence paper's RULER makes each task's data in a process of its own (``prepare.py`` runs
``scripts/data/synthetic/<task>.py``), which loads the tokenizer through transformers'
``AutoTokenizer`` and sizes every prompt by re-tokenising it (a binary search of the haystack
size, then per sample: build, tokenise, step down while too long; the needle tasks tokenise the
text before the answer once more for ``token_position_answer``). ``--baseline`` below is that
process re-implemented on ctxlens's task texts (RULER's templates, needles, noise, essays from the
built-in corpus, the QA documents); it is charged its imports, its tokenizer load and its
tokenisations, not RULER's other costs (nltk, wonderwords, yaml).

For every one of the 13 tasks both run as child processes on the same tokenizer, one thread
each, and the table gives the ratio of CPU seconds (user + system) and of peak resident memory,
each from the child's own ``wait4`` resource usage. Target: 10x on both.

    python bench/taskproc.py [--tokenizer ref:smollm2-135m] [--length 4096] [--n 50] [--tasks niah_single_1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
              "RAYON_RS_NUM_CPUS": "1", "RAYON_NUM_THREADS": "1"}
ROOT = Path(__file__).resolve().parents[1]


# -- the RULER-style process ------------------------------------------------------------------------

def _needle_kind(kind: str, rng: random.Random) -> str:
    from ctxlens.tasks import words

    return words.draw(kind, rng)


def _niah_text(args: dict, n: int, rng: random.Random, essay: list[str]) -> tuple[str, str]:
    """RULER's niah ``generate_input_output(num_haystack)``: (text, first answer)."""
    from ctxlens.tasks.haystack import NEEDLE, NOISE
    from ctxlens.tasks.niah import ANSWER_PREFIX, DEPTHS, TEMPLATE, singular

    k, v, q = args["num_needle_k"], args["num_needle_v"], args["num_needle_q"]
    tk, tv, hay = args["type_needle_k"], args["type_needle_v"], args["type_haystack"]
    keys = [_needle_kind(tk, rng) for _ in range(max(k, q))]
    values = [[_needle_kind(tv, rng) for _ in range(v)] for _ in keys]
    needles = [NEEDLE.format(type_needle_v=tv, key=key, value=val) for key, vals in zip(keys, values) for val in vals]
    rng.shuffle(needles)
    if hay == "essay":
        text = " ".join(essay[:n])
        sents = re.split(r"(?<=[.!?]) ", text.strip())
        depths = sorted(rng.sample(DEPTHS, len(needles)))
        at = [0] + [int(len(sents) * d / 100) for d in depths] + [len(sents)]
        parts = []
        for i in range(1, len(at)):
            parts.append(" ".join(sents[at[i - 1]:at[i]]))
            if i - 1 < len(needles):
                parts.append(needles[i - 1])
        context = " ".join(parts)
    else:
        lines = [NOISE] * n if hay == "noise" else [
            NEEDLE.format(type_needle_v=tv, key=_needle_kind(tk, rng), value=_needle_kind(tv, rng)) for _ in range(n)]
        for needle in needles:
            lines.insert(rng.randint(0, len(lines)), needle)
        context = "\n".join(lines)
    asked = rng.sample(range(len(keys)), q)
    query = keys[asked[0]] if q == 1 else ", ".join(keys[i] for i in asked[:-1]) + ", and " + keys[asked[-1]]
    template, noun = TEMPLATE + ANSWER_PREFIX, tv
    if q * v == 1:
        template, noun = singular(template), tv[:-1]
    return template.format(type_needle_v=noun, context=context, query=query), values[asked[0]][0]


def _qa_text(dataset: str, index: int, n: int, rng: random.Random) -> tuple[str, str]:
    """RULER's qa ``generate_input_output(index, num_docs)``: golden documents among random others."""
    from ctxlens.tasks.qa import ANSWER_PREFIX, DOCUMENT, TEMPLATE
    from ctxlens.tasks.qa_data import open_qa

    source = open_qa(dataset)
    qa = source.qas[index % len(source.qas)]
    others = [i for i in range(len(source.docs)) if i not in set(qa.context)]
    picked = list(qa.context) + rng.sample(others, max(0, min(n, len(source.docs)) - len(qa.context)))
    rng.shuffle(picked)
    context = "\n\n".join(DOCUMENT.format(i=i + 1, document=source.docs[d]) for i, d in enumerate(picked))
    return (TEMPLATE + ANSWER_PREFIX).format(context=context, query=qa.query), qa.outputs[0]


def _builder(task: str, length: int):
    """(build(size, index) -> (text, answer), increment, budget) of RULER's generator for ``task``."""
    import taskgen

    from ctxlens.data import corpus
    from ctxlens.tasks import get_task

    spec = get_task(task)
    rng = random.Random(42)
    if spec.family == "niah":
        essay = corpus.corpus_text(0, 400_000, split="train").split() if spec.options["type_haystack"] == "essay" \
            else []
        inc = 500 if essay else (25 if length >= 4096 else 5)
        return (lambda size, i: _niah_text(spec.options, size, rng, essay)), inc, spec.budget
    if spec.family == "qa":
        return (lambda size, i: _qa_text(spec.options["dataset"], i, size, rng)), 10, spec.budget
    if task == "vt":
        example = taskgen._vt(random.Random(1), 5, "")[:600]
        return (lambda size, i: (taskgen._vt(rng, size, example), "")), 10, spec.budget
    if task == "cwe":
        return (lambda size, i: (taskgen._cwe(rng, size, length < 4096), "")), 10, spec.budget
    vocab = taskgen.W.pseudo_words(max(5, (length - spec.budget) // 50))
    vocab[0] = "..."
    return (lambda size, i: (taskgen._fwe(rng, size, vocab), "")), max(1, length // 32), spec.budget


def baseline(task: str, tokenizer_dir: str, length: int, n: int, out: str) -> None:
    """One RULER-style process: AutoTokenizer, binary search of the size, per-sample fit, JSONL."""
    import numpy  # noqa: F401 - every RULER generator imports it
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    count = lambda text: len(tok.tokenize(text))  # noqa: E731 - RULER's text_to_tokens
    build, inc, budget = _builder(task, length)
    if task == "fwe":  # RULER's fwe: grow by L/32 words while it fits
        size = (length - budget) // 6
        while count(build(size, 0)[0]) < length - budget:
            size += inc
        size = max(inc, size - inc)
    else:
        probe = 4096 if task == "cwe" else inc
        per = count(build(probe, 0)[0]) / probe
        lo, hi, size = inc, max(int(length / per * (2 if task == "cwe" else 3)), 2 * inc), inc
        while lo <= hi:
            mid = (lo + hi) // 2
            if count(build(mid, 0)[0]) + budget <= length:
                size, lo = mid, mid + 1
            else:
                hi = mid - 1
    records = []
    for index in range(n):
        used = size
        while True:
            text, answer = build(used, index)
            total = count(text) + budget
            if total <= length or used <= inc:
                break
            used -= inc
        record = {"index": index, "input": text, "outputs": [answer], "length": total}
        if task.startswith("niah"):
            at = text.find(answer)
            record.update(index=at, token_position_answer=count(text[:at]))
        records.append(record)
    folder = Path(out) / task
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "validation.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


# -- measuring both ---------------------------------------------------------------------------------

def measure(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MiB) of one process running ``argv``.

    Linux charges a child the peak memory of the image it was forked from, so the process is
    started by a small stdlib-only launcher (``--launch``), not by this (larger) one."""
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench")])}
    done = subprocess.run([sys.executable, "-S", __file__, "--launch", *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} failed: {done.stderr[-500:]}")
    cpu, rss = json.loads(done.stdout.strip().splitlines()[-1])
    return cpu, rss


def launch(argv: list[str]) -> None:
    """Run ``argv`` and print [CPU seconds, peak RSS MiB] from its own ``wait4`` usage."""
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = child.stderr.read() if child.stderr else b""
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(err.decode(errors="replace"))
        sys.exit(1)
    print(json.dumps([usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024]))


def tokenizer_dir(spec: str, fallback=None) -> tuple[str, str]:
    """(directory holding ``spec``'s tokenizer files, what it is); both sides load the same files.
    When ``spec`` cannot be had (a reference model not installed), ``fallback`` (a transformers
    tokenizer) is saved to a temporary directory instead."""
    import ctxlens.zoo  # noqa: F401 - ref: and zoo: resolvers
    from ctxlens.core.errors import CtxlensError
    from ctxlens.lm.specs import resolve

    try:
        return (spec if Path(spec).is_dir() else resolve(spec)), spec
    except CtxlensError as err:
        if fallback is None:
            raise
        folder = tempfile.mkdtemp(prefix="ctxlens-taskproc-")
        fallback.save_pretrained(folder)
        return folder, f"the trained BPE ({err})"


def process_table(spec: str, length: int, n: int, tasks: list[str] | None = None, fallback=None) -> list[dict]:
    """Print ctxlens vs RULER-style whole-process CPU and memory per task; return one row per figure."""
    from ctxlens.tasks import RULER_TASKS

    folder, what = tokenizer_dir(spec, fallback)
    print(f"\nwhole process, one thread each: ctxlens tasks export vs RULER-style (AutoTokenizer), tokenizer {what}, "
          f"L={length}, {n} samples")
    print(f"{'task':16} {'cpu ours':>9} {'cpu ruler':>10} {'ratio':>6} {'MiB ours':>9} {'MiB ruler':>10} {'ratio':>6}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks or RULER_TASKS:
            ours = measure([sys.executable, "-m", "ctxlens", "tasks", "export", task, "--tokenizer", folder,
                            "--lengths", str(length), "--n", str(n), "--out", f"{tmp}/ours", "--no-cache"])
            theirs = measure([sys.executable, __file__, "--baseline", task, folder, str(length), str(n),
                              f"{tmp}/ruler"])
            cpu, mem = theirs[0] / ours[0], theirs[1] / ours[1]
            print(f"{task:16} {ours[0]:>8.2f}s {theirs[0]:>9.2f}s {cpu:>6.1f} {ours[1]:>9.0f} {theirs[1]:>10.0f} "
                  f"{mem:>6.1f}")
            row = {"bench": "taskgen", "subject": task, "tokens": length}
            rows += [{**row, "metric": "process CPU: RULER-style / ours", "value": cpu, "target": ">= 10",
                      "ok": cpu >= 10, "cpu_s": ours[0], "ruler_cpu_s": theirs[0]},
                     {**row, "metric": "process peak RSS: RULER-style / ours", "value": mem, "target": ">= 10",
                      "ok": mem >= 10, "rss_mib": ours[1], "ruler_rss_mib": theirs[1]}]
    return rows


def main(argv=None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--launch"]:
        launch(argv[1:])
        return []
    p = argparse.ArgumentParser()
    p.add_argument("--tokenizer", default="ref:smollm2-135m")
    p.add_argument("--length", type=int, default=4096)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--tasks", default="", help="comma-separated (default: the 13 RULER tasks)")
    p.add_argument("--baseline", nargs=5, metavar=("TASK", "DIR", "LENGTH", "N", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.baseline:
        task, folder, length, n, out = args.baseline
        baseline(task, folder, int(length), int(n), out)
        return []
    return process_table(args.tokenizer, args.length, args.n, [t for t in args.tasks.split(",") if t] or None)


if __name__ == "__main__":
    main()
