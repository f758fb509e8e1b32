#!/usr/bin/env python3
"""What a call with a new shape pays once: the cuda backend's ``plan(problem, "auto")`` (the cost
model ranking every candidate, the launch fitted), timed on the CPU against a stand-in sm_90
device (no GPU needed: a plan's choice reads only the device's capability and limits).

Each shape is planned ``--repeats`` times with fresh problems (a backend's plans are not cached;
the plan cache sits in front of it, in ``polygemm.gemm``); the median is reported, after one
warm-up plan that loads the tables and fits the models (once per process).

    python docs/benchmarks/plan_bench.py [--repeats 15] > docs/benchmarks/cpu_plan_time.txt
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from polygemm.backends.cuda.backend import CudaBackend  # noqa: E402
from polygemm.problem import normalize  # noqa: E402

SHAPES = [(16, 4096, 4096), (17, 4096, 4096), (512, 512, 16384), (1000, 3000, 2000), (1000, 1000, 4096),
          (4096, 4096, 4096), (257, 300, 64)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    be = CudaBackend()
    be._rt = types.SimpleNamespace(cc=(9, 0), name="stand-in sm_90", arch="sm_90", max_smem_per_block=232448)
    print(f"CPU {platform.machine()} ({platform.processor() or 'unknown'}), Python {platform.python_version()}; "
          f"cuda backend plan(problem, 'auto') against a stand-in sm_90 device, median of {args.repeats}")
    for dt in (np.float16, np.float32):
        t0 = time.perf_counter()
        be.plan(normalize(np.ones((8, 8), dt), np.ones((8, 8), dt)), "auto")
        print(f"{np.dtype(dt).name}: first plan of the process (tables loaded, models fitted) {1e3 * (time.perf_counter() - t0):.1f} ms")
        for m, n, k in SHAPES:
            a, b = np.ones((m, k), dt), np.ones((k, n), dt)
            times, variant = [], ""
            for _ in range(args.repeats):
                p = normalize(a, b)
                t = time.perf_counter()
                variant = be.plan(p, "auto").variant
                times.append(time.perf_counter() - t)
            print(f"  {m}x{n}x{k:<6d} {1e3 * statistics.median(times):7.2f} ms  -> {variant}")


if __name__ == "__main__":
    main()
