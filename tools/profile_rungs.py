#!/usr/bin/env python3
"""Run each named cuda variant once on device arrays, for a profiler to observe.

    ncu --clock-control none --metrics <...> --csv python3 tools/profile_rungs.py \
        --dtype float32 --shape 2048x2048x2048 cm_v02_smem_tiling cm_v04_conflict_free_smem

Each variant launches exactly once (compilation happens on the host before it), so a
profiler filtering on kernel names sees one launch per variant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polygemm as pg  # noqa: E402
from polygemm.apps.arguments import parse_shape  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", type=parse_shape, default=(2048, 2048, 2048))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("variants", nargs="+")
    args = ap.parse_args()
    be = pg.get_backend("cuda")
    m, n, k = args.shape
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(args.dtype)
    b = rng.standard_normal((k, n)).astype(args.dtype)
    da, db = be.to_device(a), be.to_device(b)
    dc = be.to_device(np.zeros((m, n), args.dtype))
    for v in args.variants:  # one launch each (beta = 0: replays by the profiler are idempotent)
        pg.gemm(da, db, out=dc, device="cuda", variant=v)
        print(f"profiled {v} at {m}x{n}x{k}", flush=True)
    return 0


if __name__ == "__main__":
    from polygemm.apps.tool import run_tool

    run_tool(main, "profile_rungs.py")
