"""Task generation speed and exact-length fill: ctxlens's fitter vs a RULER-style fit, same run.

The long-sequence paper's RULER tasks are sized by repeated re-tokenisation (RULER's generators binary-search
the haystack size with a full tokenisation per step, then tokenise every sample again and step
down while it is too long). This script times ``ctxlens.tasks.generate`` (incremental piece
counting, exact fit) against a re-implementation of that RULER procedure on the same tokenizer:
a byte-level BPE trained here on the built-in corpus. Both build the same task structure; the
RULER-style side is charged its tokenisations, not RULER's other costs (nltk, wonderwords).

Prints, per task and length: samples per second of each, the speed ratio, and the fill
(prompt tokens + budget) / L of each (mean and min). Targets: ratio >= 10, mean fill >= 0.995,
min fill >= 0.99. Then, for every task, the whole-process CPU and peak-memory ratio of
``ctxlens tasks export`` against a RULER-style process (``bench/taskproc.py``; SmolLM2's
tokenizer, 4096 tokens, 50 samples, one thread each; ``--quick``: niah_single_1 only). Target 10x.

    python bench/taskgen.py [--quick] [--n 100] [--lengths 4096,16384,65536] [--vocab 4096]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from ctxlens.tasks import generate
from ctxlens.tasks import words as W
from ctxlens.tasks.cwe import ANSWER_PREFIX as CWE_PREFIX
from ctxlens.tasks.cwe import TEMPLATE as CWE_TEMPLATE
from ctxlens.tasks.fwe import ANSWER_PREFIX as FWE_PREFIX
from ctxlens.tasks.fwe import TEMPLATE as FWE_TEMPLATE
from ctxlens.tasks.fwe import counts
from ctxlens.tasks.haystack import NEEDLE, NOISE
from ctxlens.tasks.niah import ANSWER_PREFIX as NIAH_PREFIX
from ctxlens.tasks.niah import TEMPLATE as NIAH_TEMPLATE
from ctxlens.tasks.niah import singular
from ctxlens.tasks.vt import ANSWER_PREFIX as VT_PREFIX
from ctxlens.tasks.vt import TEMPLATE as VT_TEMPLATE

TASKS = ("niah_single_1", "niah_multikey_3", "vt", "cwe", "fwe")
BUDGET = {"niah_single_1": 128, "niah_multikey_3": 128, "vt": 30, "cwe": 120, "fwe": 50}


def train_tokenizer(vocab: int, n_bytes: int):
    """A GPT-2-style byte-level BPE trained on the built-in corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from ctxlens.data import corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    text = corpus.corpus_text(0, n_bytes, split="train")
    tok.train_from_iterator([text[i:i + 10_000] for i in range(0, len(text), 10_000)], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


# -- RULER-style builders: text for a haystack size, as RULER's generate_input_output ------------

def _niah(rng: random.Random, n: int, needle_haystack: bool) -> str:
    kind = "uuids" if needle_haystack else "numbers"
    key = W.draw("uuids" if needle_haystack else "words", rng)
    needle = NEEDLE.format(type_needle_v=kind, key=key, value=W.draw(kind, rng))
    if needle_haystack:
        lines = [NEEDLE.format(type_needle_v=kind, key=W.uuid4(rng), value=W.uuid4(rng)) for _ in range(n)]
    else:
        lines = [NOISE] * n
    lines.insert(rng.randrange(n + 1), needle)
    template = singular(NIAH_TEMPLATE + NIAH_PREFIX)
    return template.format(type_needle_v=kind[:-1], context="\n".join(lines), query=key)


def _vt(rng: random.Random, n: int, example: str) -> str:
    lines = [NOISE] * n
    names = ["".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=5)) for _ in range(5)]
    chain = [f"VAR {names[0]} = {rng.randint(10000, 99998)}"]
    chain += [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(4)]
    for j, pos in enumerate(sorted(rng.sample(range(n + 1), 5))):
        lines.insert(pos + j, chain[j])
    task = (VT_TEMPLATE + VT_PREFIX).format(context="\n".join(lines), query=chain[0].split("= ")[1], num_v=5)
    return example + "\n" + task


def _cwe(rng: random.Random, n: int, short: bool) -> str:
    pool = W.word_pool(n)
    chosen = rng.sample(pool, n)
    reps = (6, 1) if short else (30, 3)
    items = chosen[:10] * reps[0] + chosen[10:] * reps[1]
    rng.shuffle(items)
    return (CWE_TEMPLATE + CWE_PREFIX).format(context=" ".join(f"{i + 1}. {w}" for i, w in enumerate(items)))


def _fwe(rng: random.Random, n: int, vocab: list[str]) -> str:
    text = [w for w, c in zip(vocab, counts(n, len(vocab), 2.0)) for _ in range(c)]
    rng.shuffle(text)
    return (FWE_TEMPLATE + FWE_PREFIX).format(context=" ".join(text))


def ruler_style(task: str, tok, length: int, n: int) -> list[int]:
    """RULER's procedure: binary search of the haystack size, then per sample: build, tokenise,
    step down while too long. Returns each sample's prompt tokens."""
    budget, rng = BUDGET[task], random.Random(0)
    count = lambda text: len(tok(text).input_ids)  # noqa: E731
    example = _vt(random.Random(1), 5, "")[:600] if task == "vt" else ""
    vocab = W.pseudo_words(max(5, (length - budget) // 50)) if task == "fwe" else []
    if task == "fwe":
        vocab[0] = "..."
    build = {"niah_single_1": lambda k: _niah(rng, k, False), "niah_multikey_3": lambda k: _niah(rng, k, True),
             "vt": lambda k: _vt(rng, k, example), "cwe": lambda k: _cwe(rng, k, length < 4096),
             "fwe": lambda k: _fwe(rng, k, vocab)}[task]
    inc = {"niah_single_1": 25, "niah_multikey_3": 25, "vt": 10, "cwe": 10, "fwe": max(1, length // 32)}[task]
    if task == "fwe":  # RULER's fwe: grow by L/32 words while it fits
        size = (length - budget) // 6
        while count(build(size)) < length - budget:
            size += inc
        size -= inc
    else:  # RULER's bracket: 3x the estimate from `inc` units (cwe: 2x, estimated from 4096 words)
        probe = 4096 if task == "cwe" else inc
        per = count(build(probe)) / probe
        lo, hi, size = inc, max(int(length / per * (2 if task == "cwe" else 3)), 2 * inc), inc
        while lo <= hi:
            mid = (lo + hi) // 2
            if count(build(mid)) + budget <= length:
                size, lo = mid, mid + 1
            else:
                hi = mid - 1
    out = []
    for _ in range(n):
        used = size
        while True:
            text = build(used)
            tokens = count(text)
            if tokens + budget <= length or used <= inc:
                break
            used -= inc
        if task.startswith("niah"):
            count(text[: text.find("One of the special magic")])  # RULER's token_position_answer
        out.append(tokens)
    return out


def fills(tokens: list[int], budget: int, length: int) -> tuple[float, float]:
    f = [(t + budget) / length for t in tokens]
    return statistics.mean(f), min(f)


def main(argv=None) -> list[dict]:
    """Print the table; return one row per (task, length, figure) for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true", help="small run (under 30 s): 10 samples, 4K and 16K")
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--lengths", default="4096,16384,65536")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--process-tokenizer", default="ref:smollm2-135m",
                   help="tokenizer of the whole-process table (bench/taskproc.py); the trained BPE when absent")
    p.add_argument("--process-n", type=int, default=50)
    p.add_argument("--process-length", type=int, default=4096)
    args = p.parse_args(argv)
    n, lengths = (10, [4096, 16384]) if args.quick else (args.n, [int(x) for x in args.lengths.split(",")])
    t0 = time.perf_counter()
    tok = train_tokenizer(1024 if args.quick else args.vocab, 300_000 if args.quick else 2_000_000)
    print(f"tokenizer: byte-level BPE, vocab {len(tok)}, trained in {time.perf_counter() - t0:.1f} s; {n} samples")
    print(f"{'task':16} {'L':>6} {'ours/s':>8} {'ruler/s':>8} {'ratio':>6} {'fill ours':>16} {'fill ruler':>16}")
    ratios, our_fills, out = [], [], []
    for length in lengths:
        for task in TASKS:
            from ctxlens.tasks import dataset

            dataset._ENCODERS.clear()  # no piece cache carried over from another task or length
            t = time.perf_counter()
            ours = generate(task, tok, length, n, seed=0, template="plain", cache=False)
            t_ours = time.perf_counter() - t
            t = time.perf_counter()
            theirs = ruler_style(task, tok, length, n)
            t_ruler = time.perf_counter() - t
            f_ours = fills([s.n_tokens for s in ours], BUDGET[task], length)
            f_ruler = fills(theirs, BUDGET[task], length)
            ratios.append(t_ruler / t_ours)
            our_fills += [s.fill for s in ours]
            print(f"{task:16} {length:>6} {n / t_ours:>8.1f} {n / t_ruler:>8.1f} {t_ruler / t_ours:>6.1f} "
                  f"{f_ours[0]:>8.4f}/{f_ours[1]:.4f} {f_ruler[0]:>8.4f}/{f_ruler[1]:.4f}")
            row = {"bench": "taskgen", "subject": task, "tokens": length}
            out += [{**row, "metric": "speed: ours / RULER-style", "value": t_ruler / t_ours, "target": ">= 10",
                     "ok": t_ruler / t_ours >= 10, "samples_per_s": n / t_ours},
                    {**row, "metric": "fill (mean)", "value": f_ours[0], "target": ">= 0.995",
                     "ok": f_ours[0] >= 0.995},
                    {**row, "metric": "fill (min)", "value": f_ours[1], "target": ">= 0.99", "ok": f_ours[1] >= 0.99}]
    print(f"speed ratio: median {statistics.median(ratios):.1f}, min {min(ratios):.1f} (target >= 10); "
          f"our fill: mean {statistics.mean(our_fills):.4f}, min {min(our_fills):.4f} (targets 0.995 / 0.99)")
    out += _process_table(args, tok)
    return out


def _process_table(args, tok) -> list[dict]:
    """Whole-process CPU and memory of every task vs a RULER-style process (bench/taskproc.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import taskproc

    tasks = ["niah_single_1"] if args.quick else None
    return taskproc.process_table(args.process_tokenizer, args.process_length, args.process_n, tasks, fallback=tok)


if __name__ == "__main__":
    main()
