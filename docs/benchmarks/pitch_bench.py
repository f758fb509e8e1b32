#!/usr/bin/env python3
"""Row pitch and the TMA rungs (issue 13's shapes with a side of 1000): the same fp16 products
on compact operands and on views of buffers whose rows are padded to a multiple of 128 bytes.

A TMA box row is 128 bytes (64 halves, the 128-byte swizzle span). With a compact 1000-wide
operand a row is 2000 bytes, so every box row starts 80 bytes past a 128-byte boundary and
spans one more 32-byte sector than it moves. This script times the wgmma rungs, ``auto`` and
cuBLAS (the backend's ``variant="cublas"``, same operands) on both, in one process: random
normal inputs, warm-up, then rounds in which every entry is timed once (a batch of calls of
>= 20 ms, CUDA events, a new order every round); medians over the rounds.

    python docs/benchmarks/pitch_bench.py --json docs/benchmarks/h200_pitch_fp16.json [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402

SHAPES = [(4096, 1000, 4096), (4096, 1024, 4096), (1000, 4096, 4096), (1000, 3000, 2000), (1024, 3072, 2048),
          (1000, 1000, 4096), (1024, 1024, 4096), (4096, 1000, 16384)]
VARIANTS = ["hgemm_v2_wgmma_tma", "hgemm_v2_wgmma_tma_persistent", "hgemm_v2_wgmma_tma_128x192", "auto", "cublas"]


def operand(rows: int, cols: int, padded: bool) -> torch.Tensor:
    """rows x cols fp16, row-major; padded: a view of a buffer whose rows are a multiple of 64 halves."""
    width = (cols + 63) // 64 * 64 if padded else cols
    return torch.randn(rows, width, device="cuda", dtype=torch.float16)[:, :cols]


def time_batch(fn, calls: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(1)
    records = []
    print(f"device {torch.cuda.get_device_name()}; median of {args.rounds} rounds, a new order every round", flush=True)
    for m, n, k in SHAPES:
        for padded in (False, True):
            a, b, c = operand(m, k, padded), operand(k, n, padded), operand(m, n, padded)
            ref = (a.float() @ b.float()).half()
            fns, chosen = {}, {}
            for v in VARIANTS:
                try:
                    if v == "auto":
                        chosen[v] = pg.explain(a, b, out=c, device="cuda").variant
                    c.fill_(float("nan"))
                    pg.gemm(a, b, out=c, device="cuda", variant=v)
                    torch.cuda.synchronize()
                    err = float((c.float() - ref.float()).abs().max() / ref.float().abs().max())
                    if not err < 2e-3:
                        print(f"  {v}: WRONG result (max rel err {err:.3g}); not timed", flush=True)
                        continue
                    fns[v] = (lambda v=v: pg.gemm(a, b, out=c, device="cuda", variant=v))
                except Exception as exc:  # one refusal must not lose the rest
                    print(f"  {v}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
            calls = {}
            for v, f in fns.items():
                for _ in range(5):
                    f()
                one = time_batch(f, 5)
                calls[v] = max(3, min(500, int(0.02 / max(one, 1e-7)) + 1))
            times = {v: [] for v in fns}
            order = list(fns)
            for _ in range(args.rounds):
                rng.shuffle(order)
                for v in order:
                    times[v].append(time_batch(fns[v], calls[v]))
            vendor = statistics.median(times["cublas"]) if "cublas" in times else float("nan")
            row = f"{m}x{n}x{k} {'padded' if padded else 'compact'}:"
            for v in fns:
                t = statistics.median(times[v])
                records.append({"m": m, "n": n, "k": k, "dtype": "float16", "rows": "padded to 128 B" if padded else "compact",
                                "lda": a.stride(0), "ldb": b.stride(0), "ldc": c.stride(0), "variant": v, "chosen": chosen.get(v, v),
                                "us": t * 1e6, "tflops": 2.0 * m * n * k / t / 1e12, "vendor_us": vendor * 1e6,
                                "ratio": vendor / t, "rounds": args.rounds, "device": torch.cuda.get_device_name()})
                row += f" {chosen.get(v, v)} {t * 1e6:.1f} us ({vendor / t:.2f}x)"
            print(row, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": "python docs/benchmarks/pitch_bench.py " + " ".join(sys.argv[1:]),
                                         "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
