#!/usr/bin/env python3
"""Every precision through polygemm's call beside the vendor on the same CuPy arrays, written to --out as JSON
records with the fields of docs/results/<gpu>-precision.json:
``{"dtype", "precision", "m", "n", "k", "us_per_call", "vendor_us_per_call", "vendor", "max_rel_err", "bound", ...}``.

The vendor is the faster of ``torch.matmul`` (where torch is installed; float32 with TF32 off, its default) and
``cupy.matmul``, each timed on the same operands. Each time is the median over --repeats of the mean of --calls
calls queued back to back into one ``out`` (CUDA events around them), after a warm-up; the calls interleave (ours,
torch's, CuPy's, in turn). The call is ``polygemm.gemm(a, b, out=out, device="cuda", precision=...)`` as a GPU
user makes it. ``max_rel_err`` is the largest ``|got - ref| / (|a|·|b|)`` over the result's elements, ``ref`` the
product in float64 (complex128) on the device; ``bound`` the bound the tests hold results to at the precision
that ran, per element of ``|a|·|b|`` (:func:`bound_for`), and ``within_bound`` whether the error is inside it (the
exit status is 1 when one is not); ``vendor_max_rel_err`` the same for the vendor. ``ratio`` is the vendor's time
over polygemm's. ``--shapes`` takes bench's presets too (``real``: each product timed row-major).

    python3 tools/precision_bench.py --dtypes float32 --precision highest medium --shapes 4096x4096x4096 8192x8192x8192 --out $OUT/p.json
    python3 tools/precision_bench.py --dtypes float64 --shapes real --repeats 3 --out $OUT/f64-real.json
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
from polygemm.apps.bench_shapes import parse_shapes  # noqa: E402


def bound_for(dtype: str, used: str, k: int) -> float:
    """The bound the tests hold a product of ``dtype`` computed at precision ``used`` to, per element of
    ``|a|·|b|``: real 2 K u, complex 4 (K + 2) u (u the parts' unit roundoff), and for float32 and complex64 at
    ``"medium"`` the inputs' rounding to 10 bits besides (2·2^-11)."""
    u = float(np.finfo(np.float32 if dtype in ("float32", "complex64") else np.float64).eps) / 2
    bound = 4 * (k + 2) * u if dtype.startswith("complex") else 2 * k * u
    return bound + (2 * 2.0 ** -11 if used == "medium" and dtype in ("float32", "complex64") else 0.0)


def _time_interleaved(cp: Any, fns: list[Callable[[], Any]], calls: int, repeats: int) -> list[float]:
    """For each of ``fns``: the median over ``repeats`` of the mean µs of ``calls`` calls back to back (CUDA events),
    the functions taking turns within each repeat, after one warm-up call each."""
    for fn in fns:
        fn()
    cp.cuda.Device().synchronize()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(calls):
                fn()
            stop.record()
            stop.synchronize()
            times[i].append(cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls)
    return [statistics.median(t) for t in times]


def _rel_err(cp: Any, got: Any, ref: Any, mag: Any) -> float:
    err = cp.abs(got.astype(ref.dtype) - ref) / cp.maximum(mag, cp.finfo(cp.float64).tiny)
    return float(err.max())


_WIDE = {"float32": "float64", "float64": "float64", "complex64": "complex128", "complex128": "complex128"}
_TORCH = {"float32": "float32", "float64": "float64", "complex64": "complex64", "complex128": "complex128"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=["4096x4096x4096"],
                    help="MxNxK shapes and bench presets (e.g. real; timed row-major whatever a preset's layout)")
    ap.add_argument("--dtypes", nargs="+", default=["float32"], choices=list(_WIDE))
    ap.add_argument("--precision", nargs="+", default=[None],
                    help="polygemm's precision= for float32 and complex64 (several: one record each; default: the process default)")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="JSON file of the records (printed as well)")
    args = ap.parse_args(argv)
    shapes = [(int(s[0]), int(s[1]), int(s[2])) for s in parse_shapes(args.shapes)]

    import cupy as cp

    try:
        import torch
        torch_ok = torch.cuda.is_available()
    except ImportError:
        torch, torch_ok = None, False
    records = []
    for dtype in args.dtypes:
        complex_ = dtype.startswith("complex")
        for m, n, k in shapes:
            rng = cp.random.default_rng(7)

            def draw(shape: tuple[int, int]) -> Any:
                x = rng.standard_normal(shape, dtype=cp.float64)
                if complex_:
                    x = x + 1j * rng.standard_normal(shape, dtype=cp.float64)
                return x.astype(dtype)

            a, b = draw((m, k)), draw((k, n))
            out, vout = cp.empty((m, n), dtype), cp.empty((m, n), dtype)
            vendors: list[tuple[str, Callable[[], Any], Any]] = [("cupy.matmul", lambda: cp.matmul(a, b, out=vout), vout)]
            if torch_ok:
                ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
                tout = torch.empty((m, n), dtype=getattr(torch, _TORCH[dtype]), device="cuda")
                vendors.append(("torch.matmul", lambda: torch.matmul(ta, tb, out=tout), tout))
            ref = cp.matmul(a.astype(_WIDE[dtype]), b.astype(_WIDE[dtype]))
            mag = cp.matmul(cp.abs(a).astype(cp.float64), cp.abs(b).astype(cp.float64))
            for precision in args.precision:
                kw = {"precision": precision} if precision else {}
                ours = lambda: pg.gemm(a, b, out=out, device="cuda", **kw)  # noqa: E731
                times = _time_interleaved(cp, [ours] + [f for _, f, _ in vendors], args.calls, args.repeats)
                ours()
                cp.cuda.Device().synchronize()
                errs = {}
                for name, fn, res in vendors:
                    fn()
                    cp.cuda.Device().synchronize()
                    errs[name] = _rel_err(cp, cp.asarray(res), ref, mag)
                best = min(range(len(vendors)), key=lambda i: times[1 + i])
                vendor, theirs = vendors[best][0], times[1 + best]
                flops = (8.0 if complex_ else 2.0) * m * n * k
                plan = pg.explain(a, b, out=out, device="cuda", **kw)
                used = plan.precision.split()[0].rstrip(";") if plan.precision else ""
                err = _rel_err(cp, out, ref, mag)
                bound = bound_for(dtype, used, k)
                rec = {"dtype": dtype, "precision": used,
                       "m": m, "n": n, "k": k, "us_per_call": round(times[0], 2), "vendor_us_per_call": round(theirs, 2),
                       "vendor": vendor, **{f"{name.split('.')[0]}_us_per_call": round(times[1 + i], 2) for i, (name, _, _) in enumerate(vendors)},
                       "ratio": round(theirs / times[0], 3), "tflops": round(flops / times[0] / 1e6, 2),
                       "vendor_tflops": round(flops / theirs / 1e6, 2),
                       "max_rel_err": err, "vendor_max_rel_err": errs[vendor], "bound": bound, "within_bound": err <= bound,
                       "variant": plan.variant, "device": plan.device}
                records.append(rec)
                print(json.dumps(rec), flush=True)
            del a, b, out, vout, ref, mag
            vendors.clear()
            cp.get_default_memory_pool().free_all_blocks()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"benchmark": "precision", "records": records}, indent=1) + "\n")
    return 0 if all(r["within_bound"] for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
