#!/usr/bin/env python3
"""Rows of ``docs/results/<gpu>-precision.json``: ``polygemm.gemm`` per call beside the fastest vendor
(``polygemm bench --mode call``: device arrays, CuPy else torch, interleaved repeats), with the error
of polygemm's result against the float64 reference and the bound that holds for it.

    python tools/precision_results.py --dtype float64 --shapes 4096x4096x4096 8192x8192x8192 real \\
        --out $OUT/h100-precision-float64.json

Each row: ``dtype, precision, m, n, k, us_per_call, vendor_us_per_call, vendor, max_rel_err, bound``,
and besides them ``variant`` (the rung that ran), ``within_bound`` and ``worst_ratio`` (the largest
elementwise error over its bound; <= 1 within it) and ``device``. ``max_rel_err`` and ``bound`` are
normwise, both over the largest magnitude of the reference: max|C - C_ref| / max|C_ref| and
max(tol) / max|C_ref|, tol the elementwise bound of :func:`polygemm.testing.error_bound` (for a float64
product computed in float64, 2 K 2**-53 |A| @ |B| + 2**-53 |C_ref|). The inputs are standard normal
(``bench``'s data); the error is measured on one fresh set per shape, the time on ``bench``'s own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polygemm as pg  # noqa: E402
from polygemm.apps.bench_call import run_call_bench  # noqa: E402
from polygemm.apps.bench_shapes import parse_shapes  # noqa: E402
from polygemm.testing import reference_for  # noqa: E402


def _device_arrays() -> tuple[Any, Any]:
    """(host -> device, device -> host) of CuPy, else torch."""
    try:
        import cupy as cp

        return cp.asarray, cp.asnumpy
    except ImportError:
        import torch

        return (lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()), (lambda t: t.cpu().numpy())


def error_row(m: int, n: int, k: int, dtype: str, seed: int) -> dict[str, Any]:
    """polygemm's result on device arrays of one random product against the float64 reference."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    to_dev, to_host = _device_arrays()
    got = to_host(pg.gemm(to_dev(a), to_dev(b), device="cuda"))
    variant = pg.last_plan().variant
    ref = reference_for(a, b)
    scale = float(np.max(np.abs(ref.ref64))) or 1.0
    check = ref.compare(got)
    return {"variant": variant, "max_rel_err": float(np.max(np.abs(got.astype(np.float64) - ref.ref64))) / scale,
            "bound": float(np.max(ref.tol)) / scale, "within_bound": bool(check.ok), "worst_ratio": float(check.worst_ratio)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="float64", choices=["float16", "bfloat16", "float32", "float64"])
    ap.add_argument("--precision", default="highest", help="the label the rows carry (the precision the call ran at)")
    ap.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "8192x8192x8192"],
                    help="MxNxK shapes and bench presets (e.g. real)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="the JSON file to write ({\"command\": ..., \"records\": [...]})")
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)  # a preset's layouts are timed as given; the error is measured on row-major operands
    rows = []
    for rec in run_call_bench("cuda", args.dtype, shapes, repeats=args.repeats, progress=lambda line: print(line, flush=True)):
        row = {"dtype": args.dtype, "precision": args.precision, "m": rec.m, "n": rec.n, "k": rec.k,
               "us_per_call": rec.us_per_call, "vendor_us_per_call": rec.vendor_us_per_call, "vendor": rec.vendor,
               "device": rec.device}
        row.update(error_row(rec.m, rec.n, rec.k, args.dtype, args.seed))
        print(f"  {rec.m}x{rec.n}x{rec.k}: max_rel_err {row['max_rel_err']:.3g} (bound {row['bound']:.3g}, "
              f"{'within' if row['within_bound'] else 'OUTSIDE'} it elementwise), {row['variant']}", flush=True)
        rows.append(row)
    Path(args.out).write_text(json.dumps({"command": "python tools/precision_results.py " + " ".join(argv), "records": rows}, indent=1) + "\n")
    return 0 if all(r["within_bound"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
