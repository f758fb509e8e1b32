#!/usr/bin/env python3
"""How a split-K slice is published: every thread's own fence (``PG_SPLIT_FENCES=1``, the
earlier builds) against one release by the group's first thread after the barrier (``=0``, the
default), through the public call beside ``cupy.matmul``. (The knob covered stream-K's partial
tiles too when ``h100_split_sync_ab*_fp16_fp32.json`` were measured; stream-K kept its fences
on those figures, see common.cuh, so its cases are gone from the list.)

Each row below is built twice in this process: as shipped, and as ``<row>_thread_fences`` with
``PG_SPLIT_FENCES=1`` (registered in this process only). Every case runs both builds and
``cupy.matmul`` on the same CuPy operands: each build twice first (its two results must match bit
for bit, and the two builds' results are compared), then rounds in which each is called back to
back for about 25 ms between two synchronizations (``polygemm.apps.bench.CallTimed``, call mode's
method), the order alternating between rounds; medians over the rounds, µs per call.

    python docs/benchmarks/split_sync_ab.py --json docs/benchmarks/h100_split_sync_ab_fp16_fp32.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402
from polygemm.backends.cuda import variants as cuda_variants  # noqa: E402
from polygemm.apps.bench import CallTimed  # noqa: E402

SUFFIX = "_thread_fences"
#: (dtype, shape, row, K-slices): the split plans of issue 13's shapes and the sweep's
CASES = [("float16", (512, 512, 16384), "hgemm_v2_wgmma_tma_128x128", ":split_k=8"),
         ("float16", (1000, 1000, 16384), "hgemm_v2_wgmma_tma_cluster2", ":split_k=4"),
         ("float16", (4096, 128, 16384), "hgemm_v3_wgmma_pingpong", ":split_k=4"),
         ("float16", (128, 4096, 16384), "hgemm_v2_wgmma_tma_128x64", ":split_k=2"),
         ("float16", (16, 4096, 4096), "hgemm_v2_wgmma_tma_64x256", ":split_k=8"),
         ("float32", (512, 512, 16384), "cm_v13_cp_async_narrow_tile", ":split_k=16"),
         ("float32", (128, 128, 16384), "cm_v13_cp_async_narrow_tile", ":split_k=64"),
         ("float32", (1000, 1000, 16384), "cm_v12_cp_async", ":split_k=4")]


def register(rows: set[str]) -> None:
    """Add ``<row>_thread_fences`` (the row with PG_SPLIT_FENCES=1) to this process's table."""
    for row in rows:
        cuda_variants.measurement_build(row, SUFFIX, {"PG_SPLIT_FENCES": 1}, "docs/benchmarks/split_sync_ab.py")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    import cupy as cp

    register({row for _, _, row, _ in CASES})
    records = []
    for dtype, (m, n, k), row, split in CASES:
        rng = cp.random.default_rng()
        a = rng.standard_normal((m, k), dtype=cp.float32).astype(dtype)
        b = rng.standard_normal((k, n), dtype=cp.float32).astype(dtype)
        out = cp.empty((m, n), dtype)
        ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        fences, release = row + SUFFIX + split, row + split
        results = {}
        for v in (fences, release):
            pg.gemm(a, b, out=out, device="cuda", variant=v)
            results[v] = out.copy()
            pg.gemm(a, b, out=out, device="cuda", variant=v)
            if not bool((out == results[v]).all()):
                raise SystemExit(f"{v} at {m}x{n}x{k}: two calls differ")
        err = float(cp.abs(results[release].astype(cp.float64) - ref).max() / cp.abs(ref).max())
        sync = cp.cuda.Device().synchronize
        timers = {v: CallTimed([lambda v=v: pg.gemm(a, b, out=out, device="cuda", variant=v)], sync, 25e-3) for v in (fences, release)}
        timers["cupy"] = CallTimed([lambda: cp.matmul(a, b, out=out)], sync, 25e-3)
        times: dict[str, list[float]] = {v: [] for v in timers}
        for r in range(args.rounds):
            for v in ([fences, release, "cupy"] if r % 2 == 0 else ["cupy", release, fences]):
                times[v].append(timers[v].once() * 1e6)
        med = {v: statistics.median(t) for v, t in times.items()}
        rec = {"dtype": dtype, "m": m, "n": n, "k": k, "variant": release, "us_thread_fences": round(med[fences], 2),
               "us_one_release": round(med[release], 2), "vendor": "cupy.matmul", "vendor_us": round(med["cupy"], 2),
               "speedup": round(med[fences] / med[release], 4), "bitwise_same": bool((results[fences] == results[release]).all()),
               "max_rel_err": err, "rounds": args.rounds}
        print(json.dumps(rec), flush=True)
        records.append(rec)
    doc = {"command": "python docs/benchmarks/split_sync_ab.py " + " ".join(sys.argv[1:]),
           "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "records": records}
    args.json.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
