#!/usr/bin/env python3
"""Kernel-mode bandwidth of the skinny rungs beside cuBLAS, in one process (issue 13).

For each product M x N x K (row-major A and C; B row-major, N contiguous, or column-major,
K contiguous) the raw launches of a skinny rung, of cuBLAS (the backend's ``cublas``
variant) and of the general rung auto would otherwise take (``hgemm_v3_wgmma_pingpong`` for
float16, ``cm_v13_cp_async_narrow_tile`` for float32) are timed on the same device arrays.
Timing: a spin kernel first keeps the GPU busy while Python queues a batch of launches, so
the events around the batch measure back-to-back kernels, not launch overhead; inputs rotate
over enough sets that B never stays in the 60 MB L2 between launches; every round times each
kernel once, in turn; the median over rounds is reported. Bandwidth counts A, B and C once:
(M*K + K*N) * itemsize + M*N * out itemsize bytes over the kernel's time, and its fraction
of the H200's 4.8 TB/s HBM peak. Each rung's result is checked against cuBLAS's first.

    python docs/benchmarks/skinny_bench.py --json OUT.json [--rounds 7] [--quick] [--tune]

``--tune`` adds builds of the rungs with other compile-time settings (``SK_*`` macros) beside
the shipped ones; ``--mirror`` times small N (row-major C) through the "col" rungs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402

HBM_PEAK = 4.8e12  # bytes/s, the H200's datasheet figure
L2_BYTES = 60 << 20
GENERAL = {"float16": "hgemm_v3_wgmma_pingpong", "float32": "cm_v13_cp_async_narrow_tile"}

_SPIN = cp.RawKernel(r"""
extern "C" __global__ void pg_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}""", "pg_spin")


def _spin(us: float) -> None:
    _SPIN((1,), (1,), (np.int64(us * 2000),))  # ~2 GHz SM clock


@dataclasses.dataclass
class Timed:
    """One kernel on one product: its launchers (one per rotating input set) and times."""

    label: str
    calls: list[Callable[[], None]]
    times: list[float] = dataclasses.field(default_factory=list)

    def run(self, iters: int, spin_us: float) -> None:
        _spin(spin_us)
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for i in range(iters):
            self.calls[i % len(self.calls)]()
        e1.record()
        e1.synchronize()
        self.times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3 / iters)


def _launcher(be: Any, variant: str, a: Any, b: Any, c: Any, extra: dict[str, int] | None = None) -> Callable[[], None]:
    """``be.launcher`` for ``variant``; ``extra`` macros (e.g. SK_WARPS) replace the shipped build
    (block size following SK_WARPS) on a copy of the plan's launch."""
    lau = be.launcher(variant, a, b, c)
    if extra:
        pl = lau.launch
        defines = tuple(sorted({**dict(pl.lp.defines), **extra}.items()))
        block = (32 * extra["SK_WARPS"], 1, 1) if "SK_WARPS" in extra else pl.lp.block
        lp = dataclasses.replace(pl.lp, defines=defines, block=block)
        lau.launch = dataclasses.replace(pl, lp=lp, _kernel=None, _pack=None)
        lau.launch.kernel()
    return lau


def _rel_err(x: Any, ref: Any) -> float:
    x64, r64 = cp.asnumpy(x).astype(np.float64), cp.asnumpy(ref).astype(np.float64)
    return float(np.max(np.abs(x64 - r64)) / max(np.max(np.abs(r64)), 1e-30))


def bench_shape(be: Any, m: int, n: int, k: int, dtype: str, b_layout: str, variant: str, rounds: int,
                tune: list[dict[str, int]], others: bool, a_layout: str = "row") -> list[dict[str, Any]]:
    """Time ``variant`` (and its tuning builds), cuBLAS and the general rung on one product."""
    item = np.dtype(dtype).itemsize
    big = k * max(m, n) * item  # the long operand (B, or A when the small side is N)
    sets = max(2, min(16, math.ceil(3 * L2_BYTES / big)))
    rng = cp.random.default_rng(12345)
    ops = []
    for _ in range(sets):
        a = rng.standard_normal((m, k), dtype=cp.float32).astype(dtype)
        if a_layout == "col":
            a = cp.asfortranarray(a)
        b = rng.standard_normal((k, n), dtype=cp.float32).astype(dtype)
        if b_layout == "col":
            b = cp.asfortranarray(b)
        ops.append((a, b, cp.full((m, n), cp.nan, dtype=dtype)))
    kernels = [Timed("cublas", [_launcher(be, "cublas", *o) for o in ops]),
               Timed(variant, [_launcher(be, variant, *o) for o in ops])]
    for extra in tune:
        label = variant + "+" + ",".join(f"{k_}={v}" for k_, v in extra.items())
        kernels.append(Timed(label, [_launcher(be, variant, *o, extra=extra) for o in ops]))
    if others:
        try:
            kernels.append(Timed(GENERAL[dtype], [_launcher(be, GENERAL[dtype], *o) for o in ops]))
        except Exception as exc:  # the general rung is a comparison only: report and go on
            print(f"{GENERAL[dtype]} not timed at {m}x{n}x{k}: {exc}", flush=True)
    # correctness against cuBLAS on set 0 (NaN-poisoned C first)
    errs: dict[str, float] = {}
    kernels[0].calls[0]()
    ref = ops[0][2].copy()
    for kern in kernels[1:]:
        ops[0][2].fill(cp.nan)
        kern.calls[0]()
        cp.cuda.Device().synchronize()
        errs[kern.label] = _rel_err(ops[0][2], ref)
    # warm-up, then the CPU cost of a call (sizes the spin that hides it) and the batch size
    for kern in kernels:
        for call in kern.calls:
            call()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for kern in kernels:
        for _ in range(4):
            for call in kern.calls:
                call()
    cpu = (time.perf_counter() - t0) / (4 * len(kernels) * sets)
    cp.cuda.Device().synchronize()
    est = max(k * (m + n) * item / HBM_PEAK, 2e-6)  # an estimate of one kernel, for the batch size
    iters = max(2 * sets, min(400, int(0.01 / est)))
    spin_us = 1.3 * iters * cpu * 1e6 + 50
    for _ in range(rounds):
        for kern in kernels:
            kern.run(iters, spin_us)
    out_item = item
    nbytes = (m * k + k * n) * item + m * n * out_item
    vendor = statistics.median(kernels[0].times)
    recs = []
    for kern in kernels:
        t = statistics.median(kern.times)
        recs.append({
            "mode": "kernel", "m": m, "n": n, "k": k, "dtype": dtype, "a_layout": a_layout, "b_layout": b_layout, "variant": kern.label,
            "seconds": t, "vendor_seconds": vendor, "gbps": nbytes / t / 1e9, "vendor_gbps": nbytes / vendor / 1e9,
            "hbm_fraction": nbytes / t / HBM_PEAK, "vendor_hbm_fraction": nbytes / vendor / HBM_PEAK,
            "speedup_vs_vendor": vendor / t, "tflops": 2 * m * n * k / t / 1e12, "vendor_tflops": 2 * m * n * k / vendor / 1e12,
            "rel_err_vs_vendor": errs.get(kern.label, 0.0), "input_sets": sets, "batch": iters, "rounds": rounds,
            "min_seconds": min(kern.times), "max_seconds": max(kern.times),
        })
    return recs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="M in {1, 16} only")
    ap.add_argument("--tune", action="store_true",
                    help="also builds of 8 warps (SK_WARPS=8), one and two threadblocks per SM (SK_MIN_BLOCKS)")
    ap.add_argument("--mirror", action="store_true", help="also small N through the col rungs")
    ap.add_argument("--dtypes", nargs="+", default=["float16", "float32"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[4096, 8192])
    ap.add_argument("--ms", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    args = ap.parse_args()
    be = pg.get_backend("cuda")
    ms = [1, 16] if args.quick else args.ms
    # --tune: the compile-time settings tried beside the shipped build, by dtype and B layout
    w8b2 = [{"SK_WARPS": 8}, {"SK_WARPS": 8, "SK_MIN_BLOCKS": 2}]
    tune = {(dt, bl): w8b2 for dt in ("float16", "float32") for bl in ("row", "col")} if args.tune else {}
    records: list[dict[str, Any]] = []
    t_start = time.time()
    for dtype in args.dtypes:
        short = "fp16" if dtype == "float16" else "fp32"
        for size in args.sizes:
            for b_layout in ("row", "col"):
                for m in ms:
                    recs = bench_shape(be, m, size, size, dtype, b_layout, f"skinny_v1_{short}_row", args.rounds,
                                       tune.get((dtype, b_layout), []), others=True)
                    records += recs
                    for r in recs:
                        print(f"{dtype} {m}x{size}x{size} B {b_layout:3s} {r['variant']:34s} {r['seconds'] * 1e6:9.2f} us "
                              f"{r['gbps']:7.0f} GB/s ({r['hbm_fraction']:.2f} of peak) x{r['speedup_vs_vendor']:.2f} vs cuBLAS "
                              f"err {r['rel_err_vs_vendor']:.1e}", flush=True)
                if args.mirror:  # small N, row-major C: the col rung (kernel M = N); A is the long operand
                    for n in (1, 4, 16):  # A's layout takes the place of B's: A is the kernel's B
                        recs = bench_shape(be, size, n, size, dtype, "row", f"skinny_v1_{short}_col", args.rounds, [],
                                           others=False, a_layout=b_layout)
                        for r in recs:
                            r["note"] = "small N through the col rung; a_layout is the layout of the kernel's B (user A)"
                            print(f"{dtype} {size}x{n}x{size} A {b_layout:3s} {r['variant']:34s} {r['seconds'] * 1e6:9.2f} us "
                                  f"{r['gbps']:7.0f} GB/s ({r['hbm_fraction']:.2f}) x{r['speedup_vs_vendor']:.2f} err {r['rel_err_vs_vendor']:.1e}",
                                  flush=True)
                        records += recs
        Path(args.json).write_text(json.dumps({"command": " ".join(sys.argv), "device": be.capabilities().device_name,
                                               "records": records}, indent=1))
    print(f"{len(records)} records in {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
