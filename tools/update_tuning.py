#!/usr/bin/env python3
"""Write the cuda backend's auto-selection tables from the tuning measurements.

    python tools/update_tuning.py                      # regenerate auto_fp16.json and auto_fp32.json
    python tools/update_tuning.py --add r.json [...]   # put polygemm bench --json runs first, then regenerate

The measurements live beside the tables, ``polygemm/backends/cuda/tuning/measurements/fp{16,32}.json``
(see the README there): runs of ``polygemm bench``, newest first. A table keeps, for every measured
shape, each predicated (auto-selectable) rung's TFLOP/s, so ``variant="auto"`` picks from
measurements, not guesses. Where several runs measured a rung at one shape, the cost model anchors
on the first run's record: ``--add`` puts a new run first.

A table is one GPU's: its dtype's :data:`TABLE_GPU` where that has records, else the GPU most of them ran on. It is
named rather than counted so that a run on another GPU, however many records it adds, does not move
every other record's pace (and with it auto's choices at shapes that run never timed).
A record from another GPU keeps its ratio to the vendor timed in the same run (the median of the
vendor figures beside every rung at that shape in that run) and is counted at the table GPU's
vendor pace at that shape (the median of the table GPU's vendor figures there): ``tflops`` =
ratio x that median. The record says so (``measured_on``, ``measured_tflops``). At a shape the
table GPU never timed the vendor on, the vendor's pace there is taken as the other GPU's (the
median beside every rung in that run) times the two GPUs' vendor ratio at the nearest shape (log
distance, batch counts included) both timed (that GPU's, never another's); shapes equally near
all count (their ratios' median, whatever the order of the runs). The record names those shapes
(``paced_at``: "4x8192x8192", a batch as "256 x 64x64x64", a tie as "A and B").
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


#: each table's GPU, whose vendor pace it counts every record at (where it measured the shape, or near it): float16
#: and float32 were tuned on the H200 first, float64 on the H100
TABLE_GPU = {"float16": "NVIDIA H200", "float32": "NVIDIA H200", "float64": "NVIDIA H100 80GB HBM3"}


def gpu_of(record: dict) -> str:
    """The GPU's name in a record's ``device`` ("NVIDIA H200 (cuda:0, sm_90; ...)" -> "NVIDIA H200")."""
    return str(record.get("device") or "").split(" (")[0]


def paced(records: list[dict], dtype: str = "") -> list[dict]:
    """The records of one dtype, those of another GPU than the table's counted at the table
    GPU's vendor pace (see the module's docstring). A record's ``_run`` (set by tables(): the run
    it came from) groups its run's vendor figures; it is dropped from the output."""
    gpus = Counter(gpu_of(r) for r in records)
    home = TABLE_GPU[dtype] if TABLE_GPU.get(dtype) in gpus else gpus.most_common(1)[0][0]
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


MEASUREMENTS = Path(__file__).resolve().parents[1] / "polygemm" / "backends" / "cuda" / "tuning" / "measurements"
FIELDS = ["variant", "m", "n", "k", "batch", "tflops", "vendor_tflops", "date"]


def dataset_files() -> list[Path]:
    """The measurement files, one per tuned dtype."""
    return sorted(MEASUREMENTS.glob("fp*.json"))


def dataset_records(path: Path) -> tuple[list[dict], list[dict]]:
    """A measurement file's sources (one per run: where it is kept and the command that measured
    it) and its records as ``polygemm bench`` wrote them, in order; ``_run`` names each record's run."""
    data = json.loads(path.read_text())
    assert data["fields"] == FIELDS, f"{path}: fields {data['fields']} (this tool reads {FIELDS})"
    sources, records = [], []
    try:
        shown = str(path.relative_to(ROOT))
    except ValueError:
        shown = str(path)
    for run in data["runs"]:
        sources.append({"file": f"{shown}#{run['run']}", "command": run["command"]})
        for row in run["rows"]:
            r = dict(zip(FIELDS, row))
            records.append({**r, "dtype": data["dtype"], "device": run["device"], "_run": run["run"]})
    return sources, records


def tables(paths: list[Path]) -> dict[str, dict]:
    """Each dtype's table ({"sources", "records"}) from the measurement files ``paths``."""
    eligible = {n for n, s in kernel_specs().items() if s.predicated}
    out: dict[str, dict] = {}
    for path in paths:
        sources, records = dataset_records(path)
        by_dtype: dict[str, list[dict]] = {}
        for r in records:
            if r["variant"].partition(":split_k=")[0] in eligible:  # rungs, and rungs with split K
                row = {k: r[k] for k in ("variant", "dtype", "m", "n", "k", "tflops", "vendor_tflops", "device", "date")}
                row["_run"] = r["_run"]  # (dropped from the table: paced() groups a run's vendor figures by it)
                if r.get("batch"):  # call-mode records of strided batches: auto's choice for batches
                    row["batch"] = r["batch"]
                by_dtype.setdefault(r["dtype"], []).append(row)
        for dtype, rows in by_dtype.items():
            out[dtype] = {"sources": sources, "records": paced(rows, dtype)}
    return out


def run_name(records: list[dict], taken: set[str]) -> str:
    """A new run's name: its GPU and the time of its first record ("h100-2026-11-26T2146")."""
    gpu = gpu_of(records[0]).removeprefix("NVIDIA ").split(" ")[0].lower() or "gpu"
    first = min(str(r.get("date") or "") for r in records)[:16].replace(":", "")
    name, i = f"{gpu}-{first}", 1
    while name in taken:
        i += 1
        name = f"{gpu}-{first}-{i}"
    return name


def add_runs(files: list[str]) -> int:
    """Put each ``polygemm bench --json`` file's cuda records first in its dtype's measurement file
    (the last file named ends up first)."""
    for f in files:
        data = json.loads(Path(f).read_text())
        records = [r for r in data["records"] if r.get("backend") == "cuda"]
        if not records:
            print(f"{f}: no cuda records", file=sys.stderr)
            return 1
        for dtype in sorted({r["dtype"] for r in records}):
            mine = [r for r in records if r["dtype"] == dtype]
            path = MEASUREMENTS / f"fp{8 * {'float16': 2, 'bfloat16': 2, 'float32': 4, 'float64': 8}[dtype]}.json"
            if dtype == "bfloat16":
                print(f"{f}: bfloat16 records are not tuned (bfloat16 runs on float16's choices); skipped", file=sys.stderr)
                continue
            dataset = json.loads(path.read_text()) if path.exists() else {"dtype": dtype, "fields": FIELDS, "runs": []}
            for device in dict.fromkeys(r["device"] for r in mine):
                rows = [r for r in mine if r["device"] == device]
                name = run_name(rows, {r["run"] for r in dataset["runs"]})
                dataset["runs"].insert(0, {"run": name, "device": device, "command": data.get("command", ""),
                                           "rows": [[r["variant"], r["m"], r["n"], r["k"], r.get("batch") or 0, r["tflops"],
                                                     r.get("vendor_tflops"), r["date"]] for r in rows]})
                print(f"{f}: {len(rows)} {dtype} records added to {path.name} as run {name}")
            write_dataset(path, dataset)
    return 0


def write_dataset(path: Path, dataset: dict) -> None:
    """One row a line: the file stays small and a diff shows the rows a run adds."""
    lines = ["{", f' "dtype": {json.dumps(dataset["dtype"])},', f' "fields": {json.dumps(dataset["fields"])},', ' "runs": [']
    for i, run in enumerate(dataset["runs"]):
        lines.append("  {" + f'"run": {json.dumps(run["run"])}, "device": {json.dumps(run["device"])},')
        lines.append(f'   "command": {json.dumps(run["command"])},')
        lines.append('   "rows": [')
        lines.append(",\n".join("    " + json.dumps(row) for row in run["rows"]))
        lines.append("   ]}" + ("," if i < len(dataset["runs"]) - 1 else ""))
    lines += [" ]", "}"]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--add"]:
        if len(argv) < 2 or add_runs(argv[1:]):
            print("usage: update_tuning.py [--add BENCH.json ...]", file=sys.stderr)
            return 1
    elif argv:
        print("usage: update_tuning.py [--add BENCH.json ...]", file=sys.stderr)
        return 2
    written = tables(dataset_files())
    if not written:
        print(f"no records of auto-selectable cuda rungs in {MEASUREMENTS}", file=sys.stderr)
        return 1
    for dtype, table in written.items():
        path = tuning_file(dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {len(table['records'])} {dtype} records to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
