#!/usr/bin/env python3
"""Row pitch and the TMA rungs (issue 13's shapes with a side of 1000): the same fp16 products
on compact operands and on views of buffers whose rows are padded to a multiple of 128 bytes.

A TMA box row is 128 bytes (64 halves, the 128-byte swizzle span). With a compact 1000-wide
operand a row is 2000 bytes, so every box row starts 80 bytes past a 128-byte boundary and
spans one more 32-byte sector than it moves. This script times the wgmma rungs, ``auto`` and
cuBLAS (the backend's ``variant="cublas"``, same operands) on both, in one process: random
normal inputs, warm-up, then rounds in which every entry is timed once (a batch of calls of
>= 20 ms, CUDA events, a new order every round); medians over the rounds.

    python docs/benchmarks/pitch_bench.py --json docs/benchmarks/h200_pitch_fp16.json [--rounds 7]
        [--shapes 4096x1000x4096 ...] [--variants hgemm_v2_wgmma_tma_cluster2 ...] [--pad b]

The operands are CuPy arrays, or torch tensors where CuPy is not installed.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

try:
    import cupy as xp

    def _randn(rows: int, cols: int):
        return xp.random.standard_normal((rows, cols), dtype=xp.float32).astype(xp.float16)

    _event, _sync, _name = xp.cuda.Event, xp.cuda.Device().synchronize, lambda: xp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    _elapsed_ms = xp.cuda.get_elapsed_time
except ImportError:  # torch instead
    import torch as xp

    def _randn(rows: int, cols: int):
        return xp.randn(rows, cols, device="cuda", dtype=xp.float16)

    _event, _sync, _name = (lambda: xp.cuda.Event(enable_timing=True)), xp.cuda.synchronize, xp.cuda.get_device_name
    _elapsed_ms = lambda s, e: s.elapsed_time(e)  # noqa: E731

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import polygemm as pg  # noqa: E402

SHAPES = [(4096, 1000, 4096), (4096, 1024, 4096), (1000, 4096, 4096), (1000, 3000, 2000), (1024, 3072, 2048),
          (1000, 1000, 4096), (1024, 1024, 4096), (4096, 1000, 16384)]
VARIANTS = ["hgemm_v2_wgmma_tma", "hgemm_v2_wgmma_tma_persistent", "hgemm_v2_wgmma_tma_128x192", "auto", "cublas"]


def operand(rows: int, cols: int, padded: bool):
    """rows x cols fp16, row-major; padded: a view of a buffer whose rows are a multiple of 64 halves."""
    width = (cols + 63) // 64 * 64 if padded else cols
    return _randn(rows, width)[:, :cols]


def _ld(x) -> int:
    """The row stride in elements (CuPy: bytes in .strides; torch: elements from .stride())."""
    return x.strides[0] // x.itemsize if hasattr(x, "strides") else x.stride(0)


def time_batch(fn, calls: int) -> float:
    start, end = _event(), _event()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return _elapsed_ms(start, end) / 1e3 / calls


def checked_calls(variants, a, b, c, tag: str = "") -> dict:
    """``{variant: call}`` for each variant whose ``polygemm.gemm(a, b, out=c)`` matches a float32
    product of the same operands; the others are reported and left out (one refusal must not
    lose the rest)."""
    ref = (a.astype("float32") @ b.astype("float32")) if hasattr(a, "astype") else (a.float() @ b.float())
    fns = {}
    for v in variants:
        try:
            c[...] = float("nan")
            pg.gemm(a, b, out=c, device="cuda", variant=v)
            _sync()
            got = c.astype("float32") if hasattr(c, "astype") else c.float()
            err = float(abs(got - ref).max() / abs(ref).max())
            if not err < 2e-3:
                print(f"  {v}{tag}: WRONG result (max rel err {err:.3g}); not timed", flush=True)
                continue
            fns[v] = (lambda v=v: pg.gemm(a, b, out=c, device="cuda", variant=v))
        except Exception as exc:
            print(f"  {v}{tag}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
    return fns


def median_times(fns: dict, rounds: int, rng: random.Random) -> dict:
    """Seconds per call of each entry: warm-up, then ``rounds`` rounds in which every entry is
    timed once (a batch of calls of >= 20 ms), in a new order every round; medians."""
    calls = {}
    for v, f in fns.items():
        for _ in range(5):
            f()
        one = time_batch(f, 5)
        calls[v] = max(3, min(500, int(0.02 / max(one, 1e-7)) + 1))
    times: dict = {v: [] for v in fns}
    order = list(fns)
    for _ in range(rounds):
        rng.shuffle(order)
        for v in order:
            times[v].append(time_batch(fns[v], calls[v]))
    return {v: statistics.median(t) for v, t in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", nargs="+", help="MxNxK shapes (default: the script's list)")
    ap.add_argument("--variants", nargs="+", help="rungs to time beside auto and cublas (default: the script's list)")
    ap.add_argument("--pad", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"],
                    help="the operands whose rows are padded in the padded case (default: all three)")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes] if args.shapes else SHAPES
    variants = list(dict.fromkeys((args.variants or VARIANTS) + ["auto", "cublas"]))
    rng = random.Random(1)
    records = []
    print(f"device {_name()}; median of {args.rounds} rounds, a new order every round", flush=True)
    for m, n, k in shapes:
        for padded in (False, True):
            pads = {x: padded and x in args.pad for x in "abc"}
            a, b, c = operand(m, k, pads["a"]), operand(k, n, pads["b"]), operand(m, n, pads["c"])
            fns = checked_calls(variants, a, b, c)
            chosen = {"auto": pg.explain(a, b, out=c, device="cuda").variant} if "auto" in fns else {}
            times = median_times(fns, args.rounds, rng)
            vendor = times.get("cublas", float("nan"))
            row = f"{m}x{n}x{k} {('padded' if len(args.pad) == 3 else '+'.join(args.pad) + ' padded') if padded else 'compact'}:"
            for v in fns:
                t = times[v]
                records.append({"m": m, "n": n, "k": k, "dtype": "float16", "rows": ("padded to 128 B" if len(args.pad) == 3 else f"{'+'.join(args.pad)} padded to 128 B") if padded else "compact",
                                "lda": _ld(a), "ldb": _ld(b), "ldc": _ld(c), "variant": v, "chosen": chosen.get(v, v),
                                "us": t * 1e6, "tflops": 2.0 * m * n * k / t / 1e12, "vendor_us": vendor * 1e6,
                                "ratio": vendor / t, "rounds": args.rounds, "device": _name()})
                row += f" {chosen.get(v, v)} {t * 1e6:.1f} us ({vendor / t:.2f}x)"
            print(row, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"command": "python docs/benchmarks/pitch_bench.py " + " ".join(sys.argv[1:]),
                                         "records": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
