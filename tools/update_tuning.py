#!/usr/bin/env python3
"""Write the cuda backend's auto-selection table from ``polygemm bench --json`` output.

    python tools/update_tuning.py docs/benchmarks/h200_fp32.json [more.json ...]

Keeps, for every benchmarked shape, each predicated (auto-selectable) rung's measured
TFLOP/s, so ``variant="auto"`` picks from measurements, not guesses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from polygemm.backends.cuda.catalog import tuning_file  # noqa: E402
from polygemm.backends.cuda.variants import kernel_specs  # noqa: E402


def main(paths: list[str]) -> int:
    eligible = {n for n, s in kernel_specs().items() if s.predicated}
    by_dtype: dict[str, list[dict]] = {}
    sources = []
    for p in paths:
        data = json.loads(Path(p).read_text())
        sources.append({"file": str(Path(p)), "command": data.get("command", "")})
        for r in data["records"]:
            if r["backend"] == "cuda" and r["variant"].partition(":split_k=")[0] in eligible:  # rungs, and rungs with split K
                row = {k: r[k] for k in ("variant", "dtype", "m", "n", "k", "tflops", "vendor_tflops", "device", "date")}
                if r.get("batch"):  # call-mode records of strided batches: auto's choice for batches
                    row["batch"] = r["batch"]
                by_dtype.setdefault(r["dtype"], []).append(row)
    if not by_dtype:
        print("no records of auto-selectable cuda rungs found", file=sys.stderr)
        return 1
    for dtype, records in by_dtype.items():
        path = tuning_file(dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"sources": sources, "records": records}, indent=1) + "\n")
        print(f"wrote {len(records)} {dtype} records to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
