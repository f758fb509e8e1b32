#!/usr/bin/env python3
"""Per-block timelines of the wgmma rung's persistent and stream-K rows (HG2_TRACE builds).

    python3 tools/trace_items.py --shapes 1000x3000x2000 4096x4096x4096 \
        --variants hgemm_v2_wgmma_tma_persistent hgemm_v2_wgmma_tma_streamk \
        --json traces.json

Each named row of ``hgemm/v2_wgmma_tma.cu`` is built once more with HG2_TRACE=1 (as
``<row>_trace``, registered in this process only): the first consumer lane of every block
writes its SM clock and the global timer at fixed points of its walk (the kernel's HG2_TRACE
comment lists them). The tool times each traced row per call beside ``cupy.matmul`` in the same
rounds (the marks cost a few stores per tile), checks its result against ``cupy.matmul``, then
launches it once more with the records zeroed and reads them back. It prints, per row and
shape: the blocks' spread of finishing times, the main loop's time per k-tile, the wait for an
item's first stage, the epilogue, and for stream-K the cost of storing and flagging a partial
tile and of waiting for and adding the later runs. The JSON keeps every block's marks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polygemm as pg  # noqa: E402
from polygemm.backends.cuda import variants as cuda_variants  # noqa: E402
from polygemm.apps.bench import CallTimed  # noqa: E402
from polygemm.apps.arguments import parse_shape  # noqa: E402

SUFFIX = "_trace"
MARKS = 128  # words per block: SM clocks [0, 64), global timer [64, 128)
ITEMS = 16  # item records per block (marks for the first 14)
DONE, STORED, FENCED, MET = 62, 57, 58, 59  # the kernel's HG2_TRACE marks


def register(names: list[str]) -> list[str]:
    """Add ``<name>_trace`` (the same row with HG2_TRACE=1) to this process's variant table."""
    specs = cuda_variants.kernel_specs()
    for name in names:
        spec = specs.get(name)
        if spec is None or spec.source.name != "v2_wgmma_tma.cu":
            raise SystemExit(f"--variants {name}: not a row of hgemm/v2_wgmma_tma.cu (HG2_TRACE lives there)")
    return [cuda_variants.measurement_build(name, SUFFIX, {"HG2_TRACE": 1}, "tools/trace_items.py") for name in names]


def trace_once(be, a, b, out, variant: str) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """One launch of ``variant`` with its records zeroed first: (marks, items) per block."""
    import cupy as cp

    kernel = pg.explain(a, b, out=out, device="cuda", variant=variant).private.launch.kernel()
    pushed = be.runtime.enter()
    try:
        marks_at, marks_size = kernel.global_address("hg2_trace")
        items_at, items_size = kernel.global_address("hg2_trace_items")
    finally:
        if pushed:
            be.runtime.leave()
    cp.cuda.runtime.memset(marks_at, 0, marks_size)
    cp.cuda.runtime.memset(items_at, 0, items_size)
    cp.cuda.Device().synchronize()
    pg.gemm(a, b, out=out, device="cuda", variant=variant)
    cp.cuda.Device().synchronize()
    marks = np.empty(marks_size // 8, np.uint64)
    items = np.empty(items_size // 8, np.uint64)
    cp.cuda.runtime.memcpy(marks.ctypes.data, marks_at, marks_size, cp.cuda.runtime.memcpyDeviceToHost)
    cp.cuda.runtime.memcpy(items.ctypes.data, items_at, items_size, cp.cuda.runtime.memcpyDeviceToHost)
    return marks.reshape(-1, MARKS).astype(np.int64), items.reshape(-1, ITEMS).astype(np.int64)


def blocks_of(marks: np.ndarray, items: np.ndarray) -> list[dict]:
    """Every block that ran: its marks in ns from the earliest block's start, its items."""
    half = MARKS // 2
    ran = np.nonzero(marks[:, half])[0]
    t0 = int(marks[ran, half].min())
    out = []
    for b in ran:
        wall = {i: (int(marks[b, half + i]) - t0) / 1e3 for i in range(half - 1) if marks[b, half + i]}
        span = int(marks[b, half + DONE] - marks[b, half])
        ghz = (marks[b, DONE] - marks[b, 0]) / span if marks[b, DONE] and span > 0 else 0.0
        its = [{"unit": int(x >> 32), "kb": int((x >> 16) & 0xFFFF), "ke": int(x & 0xFFFF)} for x in items[b] if x]
        out.append({"block": int(b), "sm": int(marks[b, half - 1]), "us": wall, "items": its, "sm_ghz": round(float(ghz), 3)})
    return out


def summary(blocks: list[dict], kt_total: int) -> dict:
    """Medians (and maxima) over the blocks' items, in µs."""
    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 3) if xs else None

    def top(xs: list[float]) -> float | None:
        return round(max(xs), 3) if xs else None

    per_kt, first, epilogue, fixup, stores, fence, barrier, signal = ([] for _ in range(8))
    ends = [blk["us"][DONE] for blk in blocks if DONE in blk["us"]]
    for blk in blocks:
        w = blk["us"]
        for j, it in enumerate(blk["items"][:14]):
            begin, arrived, retired, done = (w.get(q + 4 * j) for q in (1, 2, 3, 4))
            if None in (begin, arrived, retired, done):
                continue
            per_kt.append((retired - arrived) / max(it["ke"] - it["kb"], 1))
            first.append(arrived - begin)
            # the next item's start (marked for j < 14 only: 1 + 4 * 14 is mark 57, STORED), else the walk's end
            nxt = w.get(1 + 4 * (j + 1)) if j + 1 < 14 else None
            nxt = w.get(DONE) if nxt is None else nxt
            if it["kb"] > 0 and STORED in w:  # a later run of a shared tile: its slot stored and flagged
                stores.append(w[STORED] - retired)
                fence.append(w[FENCED] - w[STORED])
                barrier.append(w[MET] - w[FENCED])
                signal.append(done - w[MET])
            elif it["ke"] < kt_total:  # the tile's first run: waits for and adds the later runs
                fixup.append(done - retired)
                if nxt is not None:
                    epilogue.append(nxt - done)
            elif nxt is not None:
                epilogue.append(nxt - done)
    return {
        "blocks": len(blocks), "end_min": round(min(ends), 3) if ends else None, "end_median": med(ends),
        "end_max": top(ends), "main_us_per_ktile": med(per_kt), "main_us_per_ktile_max": top(per_kt),
        "first_stage_wait": med(first), "epilogue": med(epilogue), "epilogue_max": top(epilogue),
        "partial_stores": med(stores), "partial_stores_max": top(stores), "partial_fence": med(fence),
        "partial_barrier": med(barrier), "partial_signal": med(signal), "fixup": med(fixup), "fixup_max": top(fixup),
        "sm_ghz": med([blk["sm_ghz"] for blk in blocks if blk["sm_ghz"]]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=[(1000, 3000, 2000), (4096, 4096, 4096)])
    ap.add_argument("--variants", nargs="+", default=["hgemm_v2_wgmma_tma_persistent", "hgemm_v2_wgmma_tma_streamk"])
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds (median), each ~20 ms of calls")
    ap.add_argument("--json", type=Path, help="write the summaries and every block's marks here")
    args = ap.parse_args()
    if args.json is not None and not str(args.json).strip():
        ap.error("--json: give a file name")

    import cupy as cp

    be = pg.get_backend("cuda")
    traced = register(args.variants)
    dt = cp.float16  # fp16 operands and result (CuPy has no bfloat16 to time beside)
    records = []
    for m, n, k in args.shapes:
        rng = cp.random.default_rng()
        a = rng.standard_normal((m, k), dtype=cp.float32).astype(dt)
        b = rng.standard_normal((k, n), dtype=cp.float32).astype(dt)
        out = cp.empty((m, n), dt)
        ref = cp.matmul(a.astype(cp.float32), b.astype(cp.float32))
        kt_total = -(-k // 64)
        for v in traced:
            pg.gemm(a, b, out=out, device="cuda", variant=v)
            err = float(cp.abs(out.astype(cp.float32) - ref).max() / cp.abs(ref).max())
            sync = cp.cuda.Device().synchronize
            ours = CallTimed([lambda: pg.gemm(a, b, out=out, device="cuda", variant=v)], sync, 20e-3)
            theirs = CallTimed([lambda: cp.matmul(a, b, out=out)], sync, 20e-3)
            rounds = [(ours.once() * 1e6, theirs.once() * 1e6) for _ in range(args.rounds)]
            us, vendor_us = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
            blocks = blocks_of(*trace_once(be, a, b, out, v))
            rec = {"m": m, "n": n, "k": k, "dtype": "float16", "variant": v, "us": round(us, 2),
                   "vendor": "cupy.matmul", "vendor_us": round(vendor_us, 2), "ratio": round(vendor_us / us, 3),
                   "max_rel_err": err, "summary": summary(blocks, kt_total), "blocks": blocks}
            records.append(rec)
            s = rec["summary"]
            print(f"{m}x{n}x{k} {v}: {us:.1f} us per call (cupy.matmul {vendor_us:.1f}, {rec['ratio']:.3f}x); "
                  f"{s['blocks']} blocks end {s['end_min']}-{s['end_max']} us (median {s['end_median']}), "
                  f"main {s['main_us_per_ktile']} us/k-tile (max {s['main_us_per_ktile_max']}) at {s['sm_ghz']} GHz, "
                  f"first stage {s['first_stage_wait']}, epilogue {s['epilogue']}; stream-K: slot stores {s['partial_stores']} "
                  f"(max {s['partial_stores_max']}), fence {s['partial_fence']}, barrier {s['partial_barrier']}, "
                  f"flag {s['partial_signal']}, fixup {s['fixup']} (max {s['fixup_max']})", flush=True)
    if args.json is not None:
        doc = {"command": "python3 tools/trace_items.py " + " ".join(sys.argv[1:]),
               "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "records": records}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(doc) + "\n")
        tmp.replace(args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    from polygemm.apps.tool import run_tool

    run_tool(main, "trace_items.py")
