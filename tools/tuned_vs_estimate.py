"""Compare two ``polygemm bench --json`` runs of the same shapes: auto on the cost model's estimate
alone (``POLYGEMM_TUNE_CACHE=0``) and auto reading the tuning cache (after ``polygemm tune``).

    python tools/tuned_vs_estimate.py ESTIMATE.json TUNED.json [--json OUT.json]

Prints, per shape, the variant each run chose, its µs per call and the speed-up (estimate µs /
tuned µs), then the geometric mean, the shapes that moved and how many got slower by over 5%
(run-to-run noise stays under that on a quiet GPU); with --json, the same as a file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from polygemm.apps.bench_records import load_records  # noqa: E402


def key(r: object) -> tuple[int, int, int, str, str]:
    return (r.m, r.n, r.k, r.layout, r.dtype)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("estimate", help="bench --json of the run with POLYGEMM_TUNE_CACHE=0")
    ap.add_argument("tuned", help="bench --json of the run reading the tuning cache")
    ap.add_argument("--json", metavar="PATH", help="write the comparison as JSON")
    args = ap.parse_args(argv)
    est = {key(r): r for r in load_records(args.estimate)}
    tun = {key(r): r for r in load_records(args.tuned)}
    rows = []
    for k in est:
        if k not in tun or not est[k].us_per_call or not tun[k].us_per_call:
            continue
        e, t = est[k], tun[k]
        rows.append({"m": k[0], "n": k[1], "k": k[2], "layout": k[3], "dtype": k[4], "estimate_variant": e.variant,
                     "estimate_us": e.us_per_call, "tuned_variant": t.variant, "tuned_us": t.us_per_call,
                     "speedup": e.us_per_call / t.us_per_call, "vendor_us": t.vendor_us_per_call or None})
    if not rows:
        print("no shape is in both runs", file=sys.stderr)
        return 1
    for r in rows:
        shape = f"{r['m']}x{r['n']}x{r['k']}" + (f":{r['layout']}" if r["layout"] != "nn" else "")
        moved = "" if r["estimate_variant"] == r["tuned_variant"] else f"  {r['estimate_variant']} -> {r['tuned_variant']}"
        print(f"{shape:24s} {r['dtype']:9s} {r['estimate_us']:10.1f} {r['tuned_us']:10.1f}  {r['speedup']:5.2f}x{moved}")
    geo = math.exp(sum(math.log(r["speedup"]) for r in rows) / len(rows))
    moved = [r for r in rows if r["estimate_variant"] != r["tuned_variant"]]
    geo_moved = math.exp(sum(math.log(r["speedup"]) for r in moved) / len(moved)) if moved else 1.0
    slower = sum(1 for r in rows if r["speedup"] < 1 / 1.05)
    print(f"{len(rows)} shapes: tuned auto {geo:.3f}x the estimate's (geometric mean); {len(moved)} shapes chose another "
          f"variant, {geo_moved:.3f}x there; {slower} slower by over 5%")
    if args.json:
        Path(args.json).write_text(json.dumps({"geomean": geo, "moved": len(moved), "geomean_moved": geo_moved,
                                               "slower_5pct": slower, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
