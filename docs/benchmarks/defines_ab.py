#!/usr/bin/env python3
"""One row as shipped against the same row built with extra macros, through the public call
beside ``cupy.matmul``: the A/B test of a kernel knob before it becomes a row of its own.

The row is built twice in this process: as shipped, and as ``<row>_ab`` with ``--define``'s
macros added (registered in this process only, nothing is written to variants.json). Every
shape runs both builds and ``cupy.matmul`` on the same CuPy operands: each build once first
(its result checked against a float64 product), then rounds in which each is called back to back
for about 25 ms between two synchronizations (``polygemm.bench.CallTimed``, call mode's method),
the order alternating between rounds; medians over the rounds, µs per call.

    python docs/benchmarks/defines_ab.py --row hgemm_v2_wgmma_tma_persistent --define HG2_EPILOGUE=3 --smem 231424 \\
        --shapes 8192x1000x512 8192x8192x512 --json docs/benchmarks/h100_ab_persistent_tma_store_fp16.json

``--field`` sets the build's variant-table fields instead of (or beside) macros, e.g. how the
planner launches it: ``--row skinny_v2_fp16_row --field walks_strips=false``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402
from polygemm.backends.cuda import variants as cuda_variants  # noqa: E402
from polygemm.bench import CallTimed  # noqa: E402
from polygemm.cli import parse_shape  # noqa: E402

SUFFIX = "_ab"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", required=True, help="a row of the cuda backend's variant table")
    ap.add_argument("--define", nargs="+", default=[], metavar="NAME=VALUE", help="macros added to the row's build")
    ap.add_argument("--field", nargs="+", default=[], metavar="NAME=VALUE",
                    help="the build's variant-table fields set otherwise (KernelSpec's; true/false or an integer), "
                         "e.g. walks_strips=false: how the planner launches it")
    ap.add_argument("--shapes", nargs="+", required=True, metavar="MxNxK")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--smem", type=int, default=0, metavar="BYTES",
                    help="the build's dynamic shared memory, where the macros change it (e.g. HG2_EPILOGUE=3 or "
                         "PG_STAGES; polygemm.backends.cuda.tma.hgemm_v2_layout computes it for the wgmma rows)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()

    defines = {}
    for d in args.define:
        name, sep, value = d.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            ap.error(f"--define {d!r}: expected NAME=INTEGER")
        defines[name] = int(value)
    fields: dict[str, bool | int] = {}
    for f in args.field:
        name, sep, value = f.partition("=")
        known = {x.name for x in dataclasses.fields(cuda_variants.KernelSpec) if str(x.type) in ("bool", "int")}
        if not sep or name not in known or not (value in ("true", "false") or value.lstrip("-").isdigit()):
            ap.error(f"--field {f!r}: expected NAME=true|false|INTEGER, NAME a bool or int field of KernelSpec")
        fields[name] = value == "true" if value in ("true", "false") else int(value)
    if not defines and not fields:
        ap.error("give --define or --field: the build must differ from the row as shipped")
    if args.row not in cuda_variants.kernel_specs():
        ap.error(f"--row {args.row!r}: not a row of the cuda backend (polygemm variants lists them)")
    built = cuda_variants.measurement_build(args.row, SUFFIX, defines, "docs/benchmarks/defines_ab.py")
    if args.smem:  # the launch gives the kernel the row's declared shared memory: the build's own here
        if "smem_bytes" in fields:
            ap.error("give the build's shared memory once: --smem or --field smem_bytes=")
        fields["smem_bytes"] = args.smem
    if fields:
        specs = cuda_variants.kernel_specs()
        specs[built] = dataclasses.replace(specs[built], **fields)
        cuda_variants.variant_table.cache_clear()
    import cupy as cp  # after the arguments are checked: a wrong one is told so without a GPU

    records = []
    for shape in args.shapes:
        m, n, k = parse_shape(shape)
        rng = cp.random.default_rng()
        a = rng.standard_normal((m, k), dtype=cp.float32).astype(args.dtype)
        b = rng.standard_normal((k, n), dtype=cp.float32).astype(args.dtype)
        out = cp.empty((m, n), args.dtype)
        ref = cp.matmul(a.astype(cp.float64), b.astype(cp.float64))
        errors = {}
        for v in (args.row, built):
            pg.gemm(a, b, out=out, device="cuda", variant=v)
            errors[v] = float(cp.abs(out.astype(cp.float64) - ref).max() / cp.abs(ref).max())
        sync = cp.cuda.Device().synchronize
        timers = {v: CallTimed([lambda v=v: pg.gemm(a, b, out=out, device="cuda", variant=v)], sync, 25e-3) for v in (args.row, built)}
        timers["cupy"] = CallTimed([lambda: cp.matmul(a, b, out=out)], sync, 25e-3)
        times: dict[str, list[float]] = {v: [] for v in timers}
        for r in range(args.rounds):
            for v in ([args.row, built, "cupy"] if r % 2 == 0 else ["cupy", built, args.row]):
                times[v].append(timers[v].once() * 1e6)
        med = {v: statistics.median(t) for v, t in times.items()}
        rec = {"m": m, "n": n, "k": k, "dtype": args.dtype, "row": args.row, "defines": defines, "fields": fields,
               "shipped_us": med[args.row], "built_us": med[built], "cupy_us": med["cupy"],
               "shipped_rel_error": errors[args.row], "built_rel_error": errors[built], "rounds": times}
        records.append(rec)
        print(f"{m}x{n}x{k} {args.dtype}: {args.row} {med[args.row]:.1f} µs, with {' '.join(args.define + args.field)} {med[built]:.1f} µs "
              f"({med[args.row] / med[built]:.3f}x), cupy.matmul {med['cupy']:.1f} µs; rel. errors {errors[args.row]:.1e} / {errors[built]:.1e}")
    import cupy

    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    args.json.write_text(json.dumps({"device": dev, "command": "python " + " ".join(sys.argv), "records": records}, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
