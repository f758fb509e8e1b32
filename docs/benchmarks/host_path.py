#!/usr/bin/env python3
"""Where a cached call's host time goes, on the machine that runs it: CuPy (or torch) operands, fp16.

For each shape: wall clock per call of ``polygemm.gemm(a, b, out=o)`` and
``cupy.matmul(a, b, out=o)`` (``torch.matmul`` with ``--lib torch``; and both making a new result) back to back, two input sets
alternating, the ways timed in turn round by round, median of 9; then the
stages of polygemm's call timed alone in loops of their own (binding the call to its cached
plan, reading one operand's view, preparing the launch, queueing it), and a cProfile of the
call's functions by their own time. At a launch-sized shape (64×64×64) the device is idle and
the wall clock per call is the host path.

    python3 docs/benchmarks/host_path.py [--lib cupy|torch] [--shapes 64x64x64 1000x3000x2000] [--profile]

Two versions of the package compare run by run in turn (``PYTHONPATH`` picks one; the first line
printed names it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from typing import Any, Callable

import polygemm as pg
from polygemm import api
from polygemm.problem import operand_view

print(f"polygemm from {pg.__file__}", flush=True)


_sync: Callable[[], Any] = lambda: None  # the operands' library's device synchronize, set by main()


def per_call(fn: Callable[[int], Any], calls: int = 2000, rounds: int = 7) -> float:
    """Median over rounds of the wall µs per call, ``calls`` calls back to back between two syncs."""
    return interleaved({"": fn}, calls, rounds)[""]


def interleaved(ways: dict[str, Callable[[int], Any]], calls: int = 2000, rounds: int = 9) -> dict[str, float]:
    """:func:`per_call` of several ways, round by round in turn (the host's pace drifts over a
    run: each round times every way once), median per way."""
    for fn in ways.values():
        for i in range(200):
            fn(i)
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, fn in ways.items():
            _sync()
            t0 = time.perf_counter()
            for i in range(calls):
                fn(i)
            _sync()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=["64x64x64", "1000x3000x2000", "1000x1000x4096", "512x512x16384"])
    ap.add_argument("--profile", action="store_true", help="also print the cProfile of 20000 calls at each shape")
    ap.add_argument("--lib", choices=("cupy", "torch"), default="cupy", help="the operands' library and its matmul (default: cupy)")
    args = ap.parse_args()
    global _sync
    if args.lib == "cupy":
        import cupy as xp

        _sync = xp.cuda.Device().synchronize
        matmul = xp.matmul

        def make(shape: tuple[int, int]) -> Any:
            return xp.random.standard_normal(shape).astype(xp.float16)
    else:
        import torch as xp

        _sync = xp.cuda.synchronize
        matmul = xp.matmul

        def make(shape: tuple[int, int]) -> Any:
            return xp.randn(shape, device="cuda").half()
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        sets = [(make((m, k)), make((k, n)), make((m, n))) for _ in range(2)]
        row = interleaved({
            f"{args.lib}.matmul(out)": lambda i: matmul(sets[i & 1][0], sets[i & 1][1], out=sets[i & 1][2]),
            "gemm(out)": lambda i: pg.gemm(sets[i & 1][0], sets[i & 1][1], out=sets[i & 1][2]),
            f"{args.lib}.matmul()": lambda i: matmul(sets[i & 1][0], sets[i & 1][1]),
            "gemm()": lambda i: pg.gemm(sets[i & 1][0], sets[i & 1][1]),
        })
        variant = pg.last_plan().variant
        a0, b0, o0 = sets[0]
        row["operand_view(a)"] = per_call(lambda i: operand_view(a0), calls=20000)
        row["_bind"] = per_call(lambda i: api._bind(a0, b0, None, 1.0, 0.0, None, "auto", o0), calls=20000)
        entry, call, _ = api._bind(a0, b0, None, 1.0, 0.0, None, "auto", o0)
        backend = entry.backend
        row["execute"] = per_call(lambda i: backend.execute(entry.plan, call))
        decided = entry.plan.private
        launch = decided.launch
        stream = call.stream if call.stream is not None else 0
        row["prepare"] = per_call(lambda i: launch.prepare(call.a_ptr, call.b_ptr, call.out_ptr, 1.0, 0.0, stream), calls=20000)
        prepared = launch.prepare(call.a_ptr, call.b_ptr, call.out_ptr, 1.0, 0.0, stream)
        if type(prepared) is bytes:
            row["launch (queue only)"] = per_call(lambda i: launch.launch(prepared, stream))
        print(f"{args.lib} {shape} fp16, auto = {variant}: " + ", ".join(f"{name} {us:.2f}" for name, us in row.items()) + " (µs)", flush=True)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for i in range(20000):
                pg.gemm(sets[i & 1][0], sets[i & 1][1], out=sets[i & 1][2])
            prof.disable()
            _sync()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            print(text.getvalue(), flush=True)


if __name__ == "__main__":
    main()
