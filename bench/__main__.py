"""``python -m bench``: run the benchmark scripts and print one table of their figures.

Issue 9, part 4. Every script in ``bench/`` (``bench.BENCHES``) runs in a process of its own (so
one script's thread setting, memory or crash cannot touch another's figures) through its
``main(argv) -> list[dict]``; each ratio is measured inside that process (experiment and bare
forward of the same tokens, interleaved). The table has one line per (bench, subject, metric),
the values at each length in token columns (1K, 4K, 16K on a CPU; 8K, 32K on a GPU), the
target and whether it is met.

    python -m bench                       # every script, full size (CPU: long; GPU: 1B llama, bf16)
    python -m bench --quick               # 1K tokens, experiment table + capture + anisotropy + tasks
    python -m bench --only experiment_overhead,anisotropy [--quick] [--json rows.json]
    python -m bench --device cuda         # the same suite on a GPU
    python -m bench --list

Run it from the repository root (``bench`` is a folder there, not an installed package).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import BENCHES, QUICK

NO_DEVICE_OPTION = {"taskgen"}  # CPU-only tokenisation


def _child(name: str, rows_path: str, argv: list[str]) -> int:
    """Run one bench in this process and write its rows as JSON."""
    import importlib

    rows = importlib.import_module(f"bench.{name}").main(argv) or []
    Path(rows_path).write_text(json.dumps(rows, default=float))
    return 0


def run_bench(name: str, argv: list[str], verbose: bool,
              timeout: float | None = None) -> tuple[list[dict], float, str | None]:
    """(rows, seconds, error) of one bench run in a child process (stopped after ``timeout`` seconds)."""
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory(prefix="ctxlens-bench-") as tmp:
        rows_path = str(Path(tmp) / "rows.json")
        cmd = [sys.executable, "-m", "bench", "--child", name, "--rows", rows_path, "--", *argv]
        t = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=root, env=env, text=True, timeout=timeout,
                                  stdout=None if verbose else subprocess.PIPE, stderr=subprocess.PIPE)
        except subprocess.TimeoutExpired:
            return [], time.perf_counter() - t, f"stopped after its {timeout:.0f} s (--timeout)"
        seconds = time.perf_counter() - t
        if proc.returncode != 0 or not Path(rows_path).exists():
            tail = "\n".join((proc.stderr or "").strip().splitlines()[-15:])
            return [], seconds, f"exit status {proc.returncode}:\n{tail}"
        return json.loads(Path(rows_path).read_text()), seconds, None


def bench_argv(name: str, args) -> list[str]:
    argv = ["--quick"] if args.quick else []
    if args.device and name not in NO_DEVICE_OPTION:
        argv += ["--device", args.device]
    return argv


# -- the table -----------------------------------------------------------------------------------

def _tokens_label(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "NO"
    v = float(v)
    if v != v:
        return "nan"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.1e}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3f}"


def table(rows: list[dict]) -> str:
    """One line per (bench, subject, metric); token lengths as columns, then value, target, ok."""
    lengths = sorted({r["tokens"] for r in rows if r.get("tokens")})
    lines: dict[tuple, dict] = {}
    for r in rows:
        key = (r["bench"], r["subject"], r["metric"])
        line = lines.setdefault(key, {"values": {}, "value": None, "target": r.get("target"), "ok": []})
        if r.get("tokens"):
            line["values"][r["tokens"]] = r["value"]
        else:
            line["value"] = r["value"]
        if r.get("ok") is not None:
            line["ok"].append(bool(r["ok"]))
        line["target"] = line["target"] or r.get("target")
    header = ["bench", "subject", "metric", *(_tokens_label(n) for n in lengths), "value", "target", "ok"]
    body = [[b, s, m, *(_fmt(line["values"].get(n)) for n in lengths), _fmt(line["value"]),
             line["target"] or "", _fmt(all(line["ok"])) if line["ok"] else ""]
            for (b, s, m), line in lines.items()]
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(len(header))]
    text_cols = 3

    def fmt(row):
        cells = enumerate(zip(row, widths))
        return "  ".join(str(c).ljust(w) if i < text_cols else str(c).rjust(w) for i, (c, w) in cells)

    rule = "-" * len(fmt(header))
    return "\n".join([fmt(header), rule, *(fmt(r) for r in body)])


def machine() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    load = "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPU cores, {gpu}; torch {torch.__version__}; "
            f"load average {load}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description="Run the ctxlens benchmarks; print one table.")
    p.add_argument("--quick", action="store_true", help=f"small sizes; default subset: {', '.join(QUICK)}")
    p.add_argument("--only", help=f"comma-separated benches among: {', '.join(BENCHES)}")
    p.add_argument("--device", help="cpu | cuda (default: each script's own, cuda when available)")
    p.add_argument("--json", help="also write every row to this JSON file (rewritten after each bench)")
    p.add_argument("--verbose", action="store_true", help="show each script's own output")
    p.add_argument("--timeout", type=float, help="seconds one bench may run before it is stopped (its figures lost)")
    p.add_argument("--list", action="store_true", help="list the benches and exit")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--rows", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if args.child:
        return _child(args.child, args.rows, [a for a in rest if a != "--"])
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.list:
        print("\n".join(f"{b}{' (quick)' if b in QUICK else ''}" for b in BENCHES))
        return 0
    names = args.only.split(",") if args.only else list(QUICK if args.quick else BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        p.error(f"unknown benches {unknown}; choose from {', '.join(BENCHES)}")
    print(f"machine: {machine()}", flush=True)
    rows, failed, t0 = [], [], time.perf_counter()
    for name in names:
        got, seconds, error = run_bench(name, bench_argv(name, args), args.verbose, args.timeout)
        print(f"  {name}: {len(got)} figures in {seconds:.0f} s{' FAILED' if error else ''}",
              file=sys.stderr, flush=True)
        rows += got
        if error:
            failed.append((name, error))
        if args.json:  # after every bench, so a run stopped part-way keeps what it finished
            Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print()
    print(table(rows) if rows else "(no figures)")
    targeted = [r for r in rows if r.get("ok") is not None]
    misses = [r for r in targeted if not r["ok"]]
    print(f"\n{len(targeted) - len(misses)} of {len(targeted)} figures with a target meet it; "
          f"{time.perf_counter() - t0:.0f} s in all; load average now "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    for r in misses:
        at = f" at {_tokens_label(r['tokens'])} tokens" if r.get("tokens") else ""
        print(f"  miss: {r['bench']} / {r['subject']} / {r['metric']}{at}: {_fmt(r['value'])} (target {r['target']})")
    for name, error in failed:
        print(f"  failed: {name}: {error}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
