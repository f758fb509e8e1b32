#!/usr/bin/env python3
"""The call's host path at small and mid shapes, fp16 on CuPy arrays: wall clock per call of
``polygemm.gemm(a, b, out=o)`` and ``polygemm.gemm(a, b)`` (a new result each call) beside
``cupy.matmul`` called the same two ways; 600 calls back to back between two device
synchronizations, two input sets alternating, median of 9. Run once per package to compare
(``PYTHONPATH`` picks it; the tag names it in the output):

    PYTHONPATH=<old checkout> python3 docs/benchmarks/call_overhead_ab.py HEAD
    python3 docs/benchmarks/call_overhead_ab.py NEW
"""

from __future__ import annotations

import statistics
import sys
import time

import cupy as cp

import polygemm as pg

SHAPES = [(256, 256, 64), (4096, 16, 4096), (17, 4096, 4096), (64, 4096, 4096), (1000, 3000, 2000), (16, 4096, 4096)]


def main() -> None:
    tag = sys.argv[1] if len(sys.argv) > 1 else "run"
    for m, n, k in SHAPES:
        sets = [(cp.random.standard_normal((m, k)).astype(cp.float16), cp.random.standard_normal((k, n)).astype(cp.float16),
                 cp.empty((m, n), cp.float16)) for _ in range(2)]
        ways = {
            "gemm(out)": [(lambda a=a, b=b, o=o: pg.gemm(a, b, out=o)) for a, b, o in sets],
            "gemm()": [(lambda a=a, b=b: pg.gemm(a, b)) for a, b, _ in sets],
            "cupy(out)": [(lambda a=a, b=b, o=o: cp.matmul(a, b, out=o)) for a, b, o in sets],
            "cupy()": [(lambda a=a, b=b: cp.matmul(a, b)) for a, b, _ in sets],
        }
        row = {}
        for name, fns in ways.items():
            for _ in range(30):  # warm-up: plans, kernels, pools
                for f in fns:
                    f()

            def wall(fns=fns) -> float:
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                for i in range(600):
                    fns[i & 1]()
                cp.cuda.Device().synchronize()
                return (time.perf_counter() - t0) / 600 * 1e6

            row[name] = statistics.median(wall() for _ in range(9))
        print(f"{tag:4s} {m}x{n}x{k:<6d} gemm(out) {row['gemm(out)']:6.1f}  gemm() {row['gemm()']:6.1f}  cupy(out) {row['cupy(out)']:6.1f}  "
              f"cupy() {row['cupy()']:6.1f}  ratio(out) {row['cupy(out)'] / row['gemm(out)']:.2f}  ratio() {row['cupy()'] / row['gemm()']:.2f}",
              flush=True)


if __name__ == "__main__":
    main()
