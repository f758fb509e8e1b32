#!/usr/bin/env python3
"""The same fp16 products with A and B each row- or column-major, through ``polygemm.gemm``.

Operand layouts: ``rr`` (A and B row-major), ``cc`` (both column-major: views of transposed
C-contiguous arrays), ``rc`` (A row-major, B column-major), ``cr``. For each shape and layout
it checks every named variant against a float32 product of the same operands, then times the
variants, cuBLAS (the backend's ``variant="cublas"``, same operands) and ``cupy.matmul(a, b,
out=c)`` as CuPy's users call it: a batch of calls of >= 20 ms between CUDA events, 7 rounds,
a new order every round, medians. ``--layouts rc`` alone is ``x @ W.T`` of a ``torch.nn.Linear``
weight W (N×K, row-major).

    python docs/benchmarks/layout_bench.py --variants hgemm_v2_wgmma_tma_64x128_cluster2 \\
        --shapes 1000x1000x4096 1000x1000x16384 --json out.json

Needs CuPy. Through the call, so a product shorter than the call's host time is timed at the
host's pace.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import cupy as xp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pitch_bench import checked_calls, median_times  # noqa: E402  (the same method, one place)

LAYOUTS = ("rr", "cc", "rc", "cr")


def randn(rows: int, cols: int):
    return xp.random.standard_normal((rows, cols), dtype=xp.float32).astype(xp.float16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--shapes", nargs="+", required=True, help="MxNxK")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS), help="operand layouts (default: all four)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rng = random.Random(1)
    records = []
    device = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        for lay in args.layouts:
            a = randn(m, k) if lay[0] == "r" else randn(k, m).T
            b = randn(k, n) if lay[1] == "r" else randn(n, k).T
            c = randn(m, n)
            fns = checked_calls(list(dict.fromkeys(args.variants + ["cublas"])), a, b, c, tag=f" {lay}")
            fns["cupy.matmul"] = lambda a=a, b=b, c=c: xp.matmul(a, b, out=c)
            times = median_times(fns, args.rounds, rng)
            vendor = times.get("cublas", float("nan"))
            matmul = times["cupy.matmul"]
            row = f"{shape} {lay}:"
            for v in fns:
                t = times[v]
                records.append({"m": m, "n": n, "k": k, "dtype": "float16", "layout": lay, "variant": v, "us": t * 1e6,
                                "ratio": vendor / t, "ratio_matmul": matmul / t, "mode": "call", "rounds": args.rounds,
                                "device": device})
                row += f" {v} {t * 1e6:.1f} us ({vendor / t:.2f}x, {matmul / t:.2f}x matmul)"
            print(row, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": "python docs/benchmarks/layout_bench.py " + " ".join(sys.argv[1:]),
                                         "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
