"""Exact anisotropy in O(n d) vs the paper's estimate from sampled pairs, in one run.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section 3
estimates anisotropy (the mean pairwise cosine) from 500M sampled token pairs. ctxlens computes
it exactly over all n (n - 1) ordered pairs with the closed form (|sum u|^2 - n) / (n (n - 1)),
streaming batches through ``AnisotropyAccumulator``. This script times both on the same
vectors (rows drawn around a shared direction, anisotropy about 0.3), prints the time ratio
sampled / exact and the absolute error of the sampled estimate, and checks the closed form
against a brute-force Gram matrix over the first ``--brute`` rows.

    python bench/anisotropy.py                      # n=100K, d=4096, 500M pairs (use a GPU)
    python bench/anisotropy.py --quick              # n=20K, d=256, 2M pairs: ~15 s on a CPU
    python bench/anisotropy.py --device cpu         # full size on a CPU: times 5M of the 500M
                                                    # pairs and scales linearly (labelled as such)

Sampling is a loop of equal chunks, so its time is linear in the pairs; ``--time-pairs`` times a
prefix of them and scales to ``--pairs``. The error printed is then that of the shorter sample
(larger than 500M pairs would give, by about sqrt(pairs / time_pairs)).
"""

from __future__ import annotations

import argparse

import torch

from ctxlens.core.timing import timed_value as timed
from ctxlens.metrics.geometry import AnisotropyAccumulator


def make_vectors(n: int, d: int, device: str, seed: int = 0) -> torch.Tensor:
    """[n, d] float32: a shared direction (norm 0.65 sqrt(d)) plus standard normal noise."""
    g = torch.Generator(device=device).manual_seed(seed)
    direction = torch.randn(d, generator=g, device=device)
    direction *= 0.65 * d ** 0.5 / direction.norm()
    return torch.randn(n, d, generator=g, device=device) + direction


def exact(x: torch.Tensor, batch: int) -> float:
    acc = AnisotropyAccumulator()
    for s in range(0, x.shape[0], batch):
        acc.update(x[s:s + batch])  # [batch, d]
    return acc.result()["anisotropy"]


def sampled(x: torch.Tensor, pairs: int, chunk: int, seed: int = 1) -> float:
    """Mean cosine over ``pairs`` uniformly sampled ordered pairs i != j (float32 dots, float64 sum)."""
    u = x / x.norm(dim=1, keepdim=True)  # [n, d]
    n = u.shape[0]
    g = torch.Generator(device=u.device).manual_seed(seed)
    total, done = 0.0, 0
    while done < pairs:
        m = min(chunk, pairs - done)
        i = torch.randint(0, n, (m,), generator=g, device=u.device)
        j = torch.randint(0, n - 1, (m,), generator=g, device=u.device)
        j = j + (j >= i)  # uniform over j != i
        total += float((u[i] * u[j]).sum(1).double().sum())
        done += m
    return total / pairs


def brute(x: torch.Tensor) -> float:
    u = x.double()
    u = u / u.norm(dim=1, keepdim=True)  # [m, d]
    gram = u @ u.T  # [m, m]
    m = u.shape[0]
    return float((gram.sum() - gram.diagonal().sum()) / (m * (m - 1)))


def main(argv=None) -> list[dict]:
    """Print the report; return its figures as rows for ``python -m bench``."""
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--pairs", type=int, default=500_000_000)
    p.add_argument("--chunk", type=int, default=1 << 16, help="sampled pairs per step")
    p.add_argument("--batch", type=int, default=8192, help="rows per accumulator update")
    p.add_argument("--brute", type=int, default=4096, help="rows for the brute-force check")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--time-pairs", type=int, default=None,
                   help="sample only this many pairs and scale the time to --pairs "
                        "(default: all on a GPU or with --quick, 5M on a CPU)")
    p.add_argument("--quick", action="store_true", help="n=20K, d=256, 2M pairs")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.n, args.d, args.pairs = 20_000, 256, 2_000_000
    elif args.time_pairs is None and args.device == "cpu":
        args.time_pairs = 5_000_000  # 500M gathered pairs of 4096 floats take hours on a CPU
    x = make_vectors(args.n, args.d, args.device)
    print(f"n={args.n} d={args.d} pairs={args.pairs:,} on {args.device}, {torch.get_num_threads()} threads")
    check_rows = x[: args.brute]
    err_closed = abs(exact(check_rows, args.batch) - brute(check_rows))
    print(f"closed form vs brute-force Gram over {check_rows.shape[0]} rows: |diff| = {err_closed:.2e}")
    a_exact, t_exact = timed(lambda: exact(x, args.batch), args.device)
    drawn = min(args.pairs, args.time_pairs or args.pairs)
    a_sampled, t_drawn = timed(lambda: sampled(x, drawn, args.chunk), args.device)
    t_sampled = t_drawn * args.pairs / drawn
    scaled = f" (timed {drawn:,} pairs in {t_drawn:.3f} s, scaled linearly)" if drawn < args.pairs else ""
    print(f"exact    anisotropy {a_exact:.8f}  {t_exact:9.3f} s")
    print(f"sampled  anisotropy {a_sampled:.8f}  {t_sampled:9.3f} s{scaled}  "
          f"|error| = {abs(a_sampled - a_exact):.2e} ({drawn:,} pairs)")
    print(f"time ratio sampled / exact = {t_sampled / t_exact:.1f}")
    subject = f"exact O(nd) vs {args.pairs:,} sampled pairs (n={args.n}, d={args.d})"
    if drawn < args.pairs:
        subject += f"; sampling timed on {drawn:,} pairs and scaled"
    row = {"bench": "anisotropy", "subject": subject}
    return [
        {**row, "metric": "time: sampled / exact", "value": t_sampled / t_exact, "seconds": t_exact,
         "sampled_seconds": t_sampled},
        {**row, "metric": "|sampled - exact| anisotropy", "value": abs(a_sampled - a_exact)},
        {**row, "metric": "|closed form - brute Gram|", "value": err_closed},
    ]


if __name__ == "__main__":
    main()
