#!/usr/bin/env python3
"""complex64 (and complex128) through polygemm's call against ``cupy.matmul`` on the same CuPy arrays, written to
--out as JSON records with the fields of docs/results/<gpu>-precision.json:
``{"dtype", "precision", "m", "n", "k", "us_per_call", "vendor_us_per_call", "vendor", "max_rel_err", "bound", ...}``.

Each time is the median over --repeats of the mean of --calls calls queued back to back into one ``out`` (CUDA
events around them), after a warm-up; the call is ``polygemm.gemm(a, b, out=out, device="cuda")`` as a GPU user
makes it. ``max_rel_err`` is the largest ``|got - ref| / (|a|·|b|)`` over the result's elements, ``ref`` the
complex128 product (cupy.matmul in complex128 on the device); ``bound`` the complex bound the tests hold results to
(4 (K + 2) u); ``vendor_max_rel_err`` the same for cupy.matmul. ``ratio`` is vendor time over polygemm's (the
target: at least 0.9 for complex64 at 4096³).

    python3 tools/complex_bench.py --out $OUT/complex.json                     # complex64 at 4096³
    python3 tools/complex_bench.py --dtypes complex64 complex128 --shapes 4096x4096x4096 8192x8192x8192 --out $OUT/c.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polygemm as pg  # noqa: E402


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.lower().split("x"))
    return m, n, k


def _time(cp: Any, fn: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean µs of ``calls`` calls of ``fn`` back to back (CUDA events)."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls)
    return statistics.median(times)


def _rel_err(cp: Any, got: Any, ref: Any, mag: Any) -> float:
    err = cp.abs(got.astype(cp.complex128) - ref) / cp.maximum(mag, cp.finfo(cp.float64).tiny)
    return float(err.max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", type=_shape, default=[(4096, 4096, 4096)], help="MxNxK (default 4096x4096x4096)")
    ap.add_argument("--dtypes", nargs="+", default=["complex64"], choices=["complex64", "complex128"])
    ap.add_argument("--precision", default=None, help="polygemm's precision= for complex64 (default: the process default)")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="JSON file of the records (printed as well)")
    args = ap.parse_args()

    import cupy as cp

    records = []
    for dtype in args.dtypes:
        u = float(np.finfo(np.float32 if dtype == "complex64" else np.float64).eps) / 2
        for m, n, k in args.shapes:
            rng = cp.random.default_rng(7)
            draw = lambda shape: (rng.standard_normal(shape, dtype=cp.float64) + 1j * rng.standard_normal(shape, dtype=cp.float64)).astype(dtype)  # noqa: E731
            a, b = draw((m, k)), draw((k, n))
            out, vout = cp.empty((m, n), dtype), cp.empty((m, n), dtype)
            kw = {"precision": args.precision} if args.precision else {}
            ours = _time(cp, lambda: pg.gemm(a, b, out=out, device="cuda", **kw), args.calls, args.repeats)
            plan = pg.last_plan()
            theirs = _time(cp, lambda: cp.matmul(a, b, out=vout), args.calls, args.repeats)
            ref = cp.matmul(a.astype(cp.complex128), b.astype(cp.complex128))
            mag = cp.matmul(cp.abs(a).astype(cp.float64), cp.abs(b).astype(cp.float64))
            pg.gemm(a, b, out=out, device="cuda", **kw)
            cp.matmul(a, b, out=vout)
            flops = 8.0 * m * n * k
            rec = {"dtype": dtype, "precision": plan.precision.split()[0] if plan.precision else "", "m": m, "n": n, "k": k,
                   "us_per_call": round(ours, 2), "vendor_us_per_call": round(theirs, 2), "vendor": "cupy.matmul",
                   "ratio": round(theirs / ours, 3), "tflops": round(flops / ours / 1e6, 2),
                   "vendor_tflops": round(flops / theirs / 1e6, 2),
                   "max_rel_err": _rel_err(cp, out, ref, mag), "vendor_max_rel_err": _rel_err(cp, vout, ref, mag),
                   "bound": 4 * (k + 2) * u, "variant": plan.variant, "device": plan.device}
            records.append(rec)
            print(json.dumps(rec), flush=True)
            del a, b, out, vout, ref, mag
            cp.get_default_memory_pool().free_all_blocks()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"benchmark": "complex", "records": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()
