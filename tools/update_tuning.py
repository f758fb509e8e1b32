#!/usr/bin/env python3
"""Write the cuda backend's auto-selection table from ``polygemm bench --json`` output.

    python tools/update_tuning.py docs/benchmarks/h200_fp32.json [more.json ...]

Keeps, for every benchmarked shape, each predicated (auto-selectable) rung's measured
TFLOP/s, so ``variant="auto"`` picks from measurements, not guesses.

A table is one GPU's: the GPU most of its records ran on (the H200 for the committed tables).
A record from another GPU (a run the device tool gave an H100 for) keeps its ratio to the
vendor timed in the same run (the median of the vendor figures beside every rung at that shape
in that file) and is counted at the table GPU's vendor pace at that shape (the median of the
table GPU's vendor figures there): ``tflops`` = ratio x that median. The record says so
(``measured_on``, ``measured_tflops``). At a shape the table GPU never timed the vendor on, the
vendor's pace there is taken as the other GPU's (the median beside every rung in that run) times
the two GPUs' vendor ratio at the nearest shape (log distance, batch counts included) both timed
(that GPU's, never another's); shapes equally near all count (their ratios' median, whatever the
order of the files). The record names those shapes (``paced_at``: "4x8192x8192", a batch as
"256 x 64x64x64", a tie as "A and B").
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polygemm.backends.cuda.catalog import tuning_file  # noqa: E402
from polygemm.backends.cuda.cost import shape_distance  # noqa: E402
from polygemm.backends.cuda.variants import kernel_specs  # noqa: E402


def gpu_of(record: dict) -> str:
    """The GPU's name in a record's ``device`` ("NVIDIA H200 (cuda:0, sm_90; ...)" -> "NVIDIA H200")."""
    return str(record.get("device") or "").split(" (")[0]


def paced(records: list[dict]) -> list[dict]:
    """The records of one dtype, those of another GPU than the table's counted at the table
    GPU's vendor pace (see the module's docstring). A record's ``_run`` (set by main: the file
    it came from) groups its run's vendor figures; it is dropped from the output."""
    home = Counter(gpu_of(r) for r in records).most_common(1)[0][0]
    vendor: dict[tuple, list[float]] = {}
    for r in records:
        if gpu_of(r) == home and float(r.get("vendor_tflops") or 0) > 0:
            vendor.setdefault((r["m"], r["n"], r["k"], r.get("batch") or 1), []).append(float(r["vendor_tflops"]))
    # the other GPUs' vendor pace per run and shape: the median of the vendor figures timed
    # beside every rung at that shape in that run (one figure beside a 20 us kernel can be off
    # by 3x; the run's median keeps the run's clocks without that noise)
    beside: dict[tuple, list[float]] = {}
    for r in records:
        if gpu_of(r) != home and float(r.get("vendor_tflops") or 0) > 0:
            beside.setdefault((r.get("_run"), gpu_of(r), r["m"], r["n"], r["k"], r.get("batch") or 1), []).append(float(r["vendor_tflops"]))
    # at a shape the table's GPU never timed the vendor on, the vendor's pace there is the other
    # GPU's times the two GPUs' vendor ratio at the nearest shape both timed (log distance): a
    # bandwidth-bound shape takes a bandwidth-bound neighbour's ratio, not one average. Each
    # other GPU's ratios are its own (its runs' figures pooled, never another GPU's)
    other_pace: dict[tuple, list[float]] = {}
    for (_, gpu, *shape), figures in beside.items():
        other_pace.setdefault((gpu, tuple(shape)), []).extend(figures)
    both: dict[str, dict[tuple, float]] = {}
    for (gpu, shape), f in other_pace.items():
        if shape in vendor:
            both.setdefault(gpu, {})[shape] = statistics.median(vendor[shape]) / statistics.median(f)

    def ratio_near(gpu: str, shape: tuple) -> tuple[float, list[tuple]] | None:
        """The GPUs' vendor ratio at the nearest shape both timed and the shapes it came from:
        shapes equally near (to rounding: log(8) - log(4) and log(16) - log(8) differ in their
        last bit) all count, their ratios' median, whatever order the runs came in."""
        ratios = both.get(gpu)
        if not ratios:
            return None
        dist = {o: shape_distance(shape, o) for o in ratios}
        least = min(dist.values())
        near = sorted(o for o, d in dist.items() if d <= least + 1e-9 * max(least, 1.0))
        return statistics.median(ratios[o] for o in near), near

    def named(shape: tuple) -> str:  # as explain names a measured shape: "256 x 64x64x64" for a batch
        mnk = "x".join(str(v) for v in shape[:3])
        return f"{shape[3]} x {mnk}" if shape[3] > 1 else mnk

    out, left_out, near_count = [], 0, 0
    for r in records:
        run = r.get("_run")
        r = {k: v for k, v in r.items() if k != "_run"}
        if gpu_of(r) == home:
            out.append(r)
            continue
        shape = (r["m"], r["n"], r["k"], r.get("batch") or 1)
        if not float(r.get("vendor_tflops") or 0) > 0:
            left_out += 1
            continue
        run_pace = statistics.median(beside[(run, gpu_of(r), *shape)])
        ref = vendor.get(shape)
        extra = {}
        if ref:
            pace = statistics.median(ref)
        else:
            got = ratio_near(gpu_of(r), shape)
            if got is None:
                left_out += 1
                continue
            pace = run_pace * got[0]
            extra = {"paced_at": " and ".join(named(o) for o in got[1])}
            near_count += 1
        out.append({**r, "tflops": float(r["tflops"]) / run_pace * pace, "vendor_tflops": pace,
                    "measured_on": gpu_of(r), "measured_tflops": float(r["tflops"]), **extra})
    moved = sum(1 for r in out if "measured_on" in r)
    if moved or left_out:
        print(f"{home} table: {moved} records of other GPUs counted at its vendor's pace ({near_count} of them at a shape it "
              f"never timed, by the two vendors' ratio at the nearest shape both timed), {left_out} left out")
    return out


def main(paths: list[str]) -> int:
    eligible = {n for n, s in kernel_specs().items() if s.predicated}
    by_dtype: dict[str, list[dict]] = {}
    sources = []
    for p in paths:
        if not Path(p).exists():  # a recipe lists each GPU's file; the GPUs not lent yet have none
            print(f"{p}: not measured (no such file); skipped", file=sys.stderr)
            continue
        data = json.loads(Path(p).read_text())
        sources.append({"file": str(Path(p)), "command": data.get("command", "")})
        for r in data["records"]:
            if r["backend"] == "cuda" and r["variant"].partition(":split_k=")[0] in eligible:  # rungs, and rungs with split K
                row = {k: r[k] for k in ("variant", "dtype", "m", "n", "k", "tflops", "vendor_tflops", "device", "date")}
                row["_run"] = str(p)  # (dropped from the table: paced() groups a run's vendor figures by it)
                if r.get("batch"):  # call-mode records of strided batches: auto's choice for batches
                    row["batch"] = r["batch"]
                by_dtype.setdefault(r["dtype"], []).append(row)
    if not by_dtype:
        print("no records of auto-selectable cuda rungs found", file=sys.stderr)
        return 1
    for dtype, records in by_dtype.items():
        by_dtype[dtype] = paced(records)
    for dtype, records in by_dtype.items():
        path = tuning_file(dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"sources": sources, "records": records}, indent=1) + "\n")
        print(f"wrote {len(records)} {dtype} records to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
