#!/usr/bin/env python3
"""Write docs/results.md, and the results table of README.md, from the curated result files.

    python tools/results_page.py           # write both
    python tools/results_page.py --check   # exit 1 if either differs from what it would write

A curated file, ``docs/results/<gpu>-<benchmark>.json``, holds one benchmark's figures of one GPU:
``title``, ``gpu``, ``date``, ``about``, ``vendor`` (what each figure is divided by), ``view`` (how
the page lays it out), ``commands`` (the commands that measured it) and ``records`` (those of
``polygemm bench --json``, each with ``run``: the index of its command) or ``rows`` (those of
``polygemm matrix --json``). Put a new run's records there (``polygemm bench --json`` output, only the
rows the page should show) and rerun this tool.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
README_BEGIN = "<!-- results table: written by tools/results_page.py -->"
README_END = "<!-- end of results table -->"
#: the file the README's table comes from, and the run in it (the call on one GPU, against the vendor)
README_SOURCE = "h100-fastest-vendor.json"

ORDER = ["fastest-vendor", "real", "long-k", "call", "call-overhead", "squares", "targets", "skinny", "batched", "ladders", "sweep", "dask", "conformance",
         "precision", "verify"]

INTRO = """\
# Results

Today's figures of polygemm against the vendor library, one section per benchmark and GPU. Every
figure comes from `polygemm bench` (or `polygemm matrix`, `tools/bench_dask.py`) with the vendor timed
**in the same process, beside each polygemm call or kernel, repeat by repeat**; the ratio is
polygemm's speed over the vendor's (above 1: polygemm is faster; bold: under 0.9). Each section
names the card, the date, the vendor figure and the commands that produced it. The vendor figures:

- **Call figures** (`--mode call`) time `polygemm.gemm` as a user calls it, beside `torch.matmul`
  (cuBLASLt) and `cupy.matmul` (cuBLAS), divided by the faster of the two at each shape. The large
  squares' and the strided batches' sections compare with one of them (up to 8% slower than the
  other): their ratios are upper bounds.
- **Kernel figures** (`--mode kernel`) time a rung's raw launch against cuBLAS called directly (TF32
  off; fp32 compute for fp16 and bf16); "settled" runs each kernel alone for a second first.

Each section shows one benchmark's committed run; the H200 and the H100 sections come from
different days, so compare ratios, not times, across cards. This page is written by
`python tools/results_page.py` from the curated files in [results/](results/); older figures are
in the git history.
"""


def shape(r: dict) -> str:
    mnk = f"{r['m']}×{r['n']}×{r['k']}" + (f" {r['layout']}" if r.get("layout", "nn") != "nn" else "")
    return f"{r['batch']} × {mnk}" if r.get("batch") else mnk


def ratio(r: dict) -> str:
    v = r.get("ratio")
    if v is None:
        return "–"
    return f"**{v:.2f}×**" if v < 0.9 else f"{v:.2f}×"


def dtype_name(dtype: str) -> str:
    return {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}.get(dtype, dtype)


def run_label(r: dict, mode_only: bool = False) -> str:
    mode = r.get("mode") or "kernel"
    if str(r.get("method") or "").startswith("settled"):
        mode = "kernel settled"
    return mode if mode_only else f"{dtype_name(r['dtype'])} {mode}"


def figures(r: dict) -> tuple[str, str]:
    """polygemm's and the vendor's figure: µs per call in call mode, TFLOP/s for a kernel."""
    if r.get("mode") == "call" and r.get("us_per_call") is not None:
        vendor = r.get("vendor_us_per_call")
        return f"{r['us_per_call']:.1f} µs", f"{vendor:.1f} µs" if vendor is not None else "–"
    vendor = r.get("vendor_tflops")
    return f"{r['tflops']:.1f}", f"{vendor:.1f}" if vendor is not None else "–"


def rows_view(data: dict) -> list[str]:
    out = ["| shape | dtype | auto's rung | polygemm | vendor | ratio |", "|---|---|---|---|---|---|"]
    for r in data["records"]:
        ours, theirs = figures(r)
        vendor = r.get("vendor_call") or r.get("vendor_variant") or ""
        out.append(f"| {shape(r)} | {dtype_name(r['dtype'])} | `{r['variant']}` | {ours} | {theirs} ({vendor.split('(')[0]}) | {ratio(r)} |")
    return out


def vendors_view(data: dict) -> list[str]:
    """One row a shape and dtype: polygemm, torch.matmul and cupy.matmul per call, the ratio to the
    faster of the two and its range over the repeats."""
    out = ["| shape | dtype | auto's rung | polygemm | torch.matmul | cupy.matmul | ratio to the faster | range |",
           "|---|---|---|---|---|---|---|---|"]
    for r in data["records"]:
        t, c = r.get("torch_us_per_call"), r.get("cupy_us_per_call")
        cells = [f"{v:.1f} µs" + (" ◂" if r.get("vendor") == name else "") if v is not None else "–"
                 for name, v in (("torch", t), ("cupy", c))]
        span = f"{r['ratio_min']:.2f}–{r['ratio_max']:.2f}×" if r.get("ratio_min") is not None else "–"
        out.append(f"| {shape(r)} | {dtype_name(r['dtype'])} | `{r['variant']}` | {r['us_per_call']:.1f} µs | "
                   f"{cells[0]} | {cells[1]} | {ratio(r)} | {span} |")
    return out + ["", "◂ the faster vendor path at that shape, the one the ratio divides by."]


def pivot_view(data: dict) -> list[str]:
    """One row a shape, one column a run (dtype and mode): the ratio, auto's rung of the first column."""
    cols = list(dict.fromkeys(run_label(r) for r in data["records"]))
    shapes = list(dict.fromkeys(shape(r) for r in data["records"]))
    cell = {(shape(r), run_label(r)): r for r in data["records"]}
    out = ["| shape | " + " | ".join(cols) + " | auto's rung (first column that ran it) |", "|---|" + "---|" * (len(cols) + 1)]
    for s in shapes:
        first = next(cell[(s, c)] for c in cols if (s, c) in cell)
        out.append(f"| {s} | " + " | ".join(ratio(cell[(s, c)]) if (s, c) in cell else "" for c in cols) + f" | `{first['variant']}` |")
    return out


def ladder_view(data: dict) -> list[str]:
    """Per dtype: one row a rung, one column a shape, the ratio to cuBLAS."""
    out: list[str] = []
    for run in sorted({r["run"] for r in data["records"]}):
        recs = [r for r in data["records"] if r["run"] == run]
        shapes = list(dict.fromkeys(shape(r) for r in recs))
        cell = {(r["variant"], shape(r)): r for r in recs}
        dtype = dtype_name(recs[0]["dtype"])
        if out:
            out.append("")
        out += [f"{dtype}, ratio to cuBLAS:", "", "| rung | " + " | ".join(shapes) + " |", "|---|" + "---|" * len(shapes)]
        for variant in dict.fromkeys(r["variant"] for r in recs):
            out.append(f"| `{variant}` | " + " | ".join(ratio(cell[(variant, s)]) if (variant, s) in cell else "" for s in shapes) + " |")
    return out


def summary_view(data: dict) -> list[str]:
    out = ["| run | shapes | geometric mean | worst (shape) | under 0.9× |", "|---|---|---|---|---|"]
    for label in dict.fromkeys(run_label(r) for r in data["records"]):
        recs = [r for r in data["records"] if run_label(r) == label and r.get("ratio")]
        gmean = math.exp(sum(math.log(r["ratio"]) for r in recs) / len(recs))
        worst = min(recs, key=lambda r: r["ratio"])
        under = sum(r["ratio"] < 0.9 for r in recs)
        out.append(f"| {label} | {len(recs)} | {gmean:.2f}× | {worst['ratio']:.2f}× ({shape(worst)}) | {under} |")
    return out


def matrix_view(data: dict) -> list[str]:
    counts: Counter = Counter((r["backend"], r["dtype"], r["status"]) for r in data["rows"])
    variants: dict[tuple, set] = {}
    for r in data["rows"]:
        variants.setdefault((r["backend"], r["dtype"]), set()).add(r["variant"])
    out = ["| backend | dtype | variants | pass | fail | skip |", "|---|---|---|---|---|---|"]
    for key in sorted(variants):
        out.append(f"| {key[0]} | {key[1]} | {len(variants[key])} | " + " | ".join(str(counts[(*key, s)]) for s in ("pass", "fail", "skip")) + " |")
    return out


def dask_view(data: dict) -> list[str]:
    out = ["| GPUs | inputs | polygemm.dask.gemm | dask.array.matmul | ratio |", "|---|---|---|---|---|"]
    recs = data["records"]
    for r in recs:
        if r["impl"] != "polygemm.dask":
            continue
        v = next(o for o in recs if o["impl"] != r["impl"] and o["gpus"] == r["gpus"] and o["inputs"] == r["inputs"])
        out.append(f"| {r['gpus']} | {r['inputs']} | {r['seconds']:.3f} s ({r['tflops']:.0f} TFLOP/s) | "
                   f"{v['seconds']:.3f} s ({v['tflops']:.0f} TFLOP/s) | {v['seconds'] / r['seconds']:.2f}× |")
    first = recs[0]
    out += ["", f"{first['m']}×{first['n']}×{first['k']} {first['dtype']}, chunks of {first['chunk']}. A product's wall clock: persist "
            "the result, wait for every block, synchronize every GPU; best of 3 after a warm-up. `persist`: the inputs where the "
            "scheduler left them (transfers between GPUs included); `replicate`: every input block copied to every worker first "
            "(the product alone)."]
    return out


def real_view(data: dict) -> list[str]:
    """One row a run (a dtype of the real-workload preset): products, geometric mean of the ratios,
    how many are under 0.85×, and the three worst with auto's rung there."""
    out = ["| run | products | geometric mean | under 0.85× | worst three (auto's rung) |", "|---|---|---|---|---|"]
    for label in dict.fromkeys(run_label(r) for r in data["records"]):
        recs = [r for r in data["records"] if run_label(r) == label and r.get("ratio")]
        if not recs:
            out.append(f"| {label} | 0 | – | – | no product has a vendor timing |")
            continue
        gmean = math.exp(sum(math.log(r["ratio"]) for r in recs) / len(recs))
        worst = sorted(recs, key=lambda r: r["ratio"])[:3]
        under = sum(r["ratio"] < 0.85 for r in recs)
        out.append(f"| {label} | {len(recs)} | {gmean:.2f}× | {under} | "
                   + "; ".join(f"{r['ratio']:.2f}× {shape(r)} (`{r['variant']}`)" for r in worst) + " |")
    return out


def verify_view(data: dict) -> list[str]:
    """verify=: one row a timed shape (the call without and with the check), the real preset's geometric mean, and
    the fault campaign's counts."""
    out = ["| shape | dtype | auto's rung | call | verified | overhead |", "|---|---|---|---|---|---|"]
    for r in data["records"]:
        if "us_per_call_verified" in r and not r.get("preset"):
            out.append(f"| {shape(r)} | {dtype_name(r['dtype'])} | `{r.get('variant', '')}` | {r['us_per_call']:.1f} µs | "
                       f"{r['us_per_call_verified']:.1f} µs | {100 * (r['us_per_call_verified'] / r['us_per_call'] - 1):+.1f}% |")
    laid = {x.get("layout", "nn") for x in data["records"] if x.get("preset") == "real" and "m" in x}
    how = "nn" if laid <= {"nn"} else "in its layouts"
    notes = [f"The real preset ({r['shapes']}" + (f" of its {r['of']}" if r.get("of", r["shapes"]) != r["shapes"] else "")
             + f" shapes timed, fp16, {how}): geometric mean overhead {100 * r['geomean_overhead']:+.1f}%."
             for r in data["records"] if "geomean_overhead" in r]
    notes += [f"Fault campaign: {r['detected']} of {r['injected']} single-element faults beyond the threshold detected; "
              f"{r['false_alarms']} false alarms in {r['clean']} correct products." for r in data["records"] if r.get("campaign")]
    return out + ([""] + notes if notes else [])


def precision_view(data: dict) -> list[str]:
    """Products of a dtype and precision: polygemm's call and the vendor's, and the error against the reference
    beside the bound that holds for it."""
    out = ["| shape | dtype | precision | polygemm's rung | polygemm | vendor | ratio | max rel. error | bound |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in data["records"]:
        v = r["vendor_us_per_call"] / r["us_per_call"]
        out.append(f"| {shape(r)} | {r['dtype']} | {r['precision']} | `{r['variant']}` | {r['us_per_call']:.0f} µs | "
                   f"{r['vendor_us_per_call']:.0f} µs ({r['vendor']}) | {ratio({'ratio': v})} | {r['max_rel_err']:.1e} | {r['bound']:.1e} |")
    return out


VIEWS = {"vendors": vendors_view, "rows": rows_view, "targets": pivot_view, "modes": pivot_view, "ladder": ladder_view, "summary": summary_view,
         "matrix": matrix_view, "dask": dask_view, "real": real_view, "verify": verify_view,
         "precision": precision_view}


def _joined(abouts: Iterable[str]) -> str:
    """The files' ``about`` texts as one: each sentence once (files of one benchmark share their opening words)."""
    seen: dict[str, None] = {}
    for about in abouts:
        for sentence in re.split(r"(?<=\.) ", about.strip()):
            seen.setdefault(sentence, None)
    return " ".join(seen)


def section(group: list[tuple[str, dict]]) -> list[str]:
    """The section of one benchmark on one GPU: its files' tables one after the other (a table's
    heading once), their commands in one block."""
    data = group[0][1]
    views = {d["view"] for _, d in group}
    if len(views) > 1:  # one table heading for the group: its files must share a view
        raise SystemExit(f"{', '.join(n for n, _ in group)}: one benchmark and GPU with views {sorted(views)}; give them one view")
    links = ", ".join(f"[results/{name}](results/{name})" for name, _ in group)
    days = sorted({dates(d) for _, d in group})
    about = _joined(d["about"] for _, d in group)
    out = [f"## {data['title']}: {data['gpu'].removeprefix('NVIDIA ')}", "",
           f"{data['gpu']}, {' and '.join(days)} ({links}). {about} Vendor: {data['vendor']}.", ""]
    commands: list[str] = []
    for i, (_, d) in enumerate(group):
        table = VIEWS[d["view"]](d)
        out += table if i == 0 else table[2:]
        commands += d["commands"]
    return out + ["", "```"] + commands + ["```", ""]


def groups(files: list[tuple[str, dict]]) -> list[list[tuple[str, dict]]]:
    """The files in sections: one section a benchmark and GPU (the real preset's dtypes, each a
    file, share one), in the page's order."""
    out: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for name, data in files:
        out.setdefault((data["benchmark"], data["gpu"]), []).append((name, data))
    return list(out.values())


def dates(data: dict) -> str:
    """The day of the file's runs, or the first and last day."""
    days = sorted({str(r["date"])[:10] for r in data.get("records", []) if r.get("date")}) or [data["date"]]
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def load() -> list[tuple[str, dict]]:
    files = [(p.name, json.loads(p.read_text())) for p in sorted(RESULTS.glob("*.json"))]
    return sorted(files, key=lambda f: (ORDER.index(f[1]["benchmark"]) if f[1]["benchmark"] in ORDER else len(ORDER), f[0]))


def page(files: list[tuple[str, dict]]) -> str:
    lines = INTRO.splitlines() + [""]
    sections = groups(files)
    lines += ["Sections: " + ", ".join(f"[{d['title'].split(':')[0].split(' (')[0].lower()}, {d['gpu'].removeprefix('NVIDIA ').split(' ')[0]}]"
                                     f"(#{anchor(d)})" for d in (g[0][1] for g in sections)), ""]
    for group in sections:
        lines += section(group)
    return "\n".join(lines).rstrip() + "\n"


def anchor(data: dict) -> str:
    """GitHub's anchor of a section heading."""
    text = f"{data['title']}: {data['gpu'].removeprefix('NVIDIA ')}".lower()
    return "".join(c if c.isalnum() or c in "-_ " else "" for c in text).replace(" ", "-")


def readme_table(files: list[tuple[str, dict]]) -> str:
    data = dict(files)[README_SOURCE]
    recs = data["records"]
    lines = [README_BEGIN, "",
             f"`polygemm.gemm` per call on device arrays with `out=`, against the faster of `torch.matmul` (cuBLASLt) and "
             f"`cupy.matmul` (cuBLAS) timed in the same process, {data['gpu']}, {dates(data)} (a ratio above 1: polygemm is "
             "faster; bold: under 0.9). The fp32 rows were timed by `tools/precision_bench.py` (CUDA events around 10 calls "
             "back to back), the others by `polygemm bench --mode call`. All figures, their commands and vendors: "
             "[docs/results.md](docs/results.md).", "",
             "| shape | dtype | polygemm (µs) | faster vendor (µs) | ratio |", "|---|---|---|---|---|"]
    for r in recs:
        lines.append(f"| {shape(r)} | {dtype_name(r['dtype'])} | {r['us_per_call']:.1f} | "
                     f"{r['vendor_us_per_call']:.1f} ({r['vendor']}) | {ratio(r)} |")
    return "\n".join(lines + ["", README_END])


def new_readme(table: str) -> str:
    text = README.read_text()
    if README_BEGIN not in text:
        raise SystemExit(f"README.md has no '{README_BEGIN}' line to write the table after")
    head, rest = text.split(README_BEGIN, 1)
    tail = rest.split(README_END, 1)[1]
    return head + table + tail


def main(argv: list[str]) -> int:
    files = load()
    want = {PAGE: page(files), README: new_readme(readme_table(files))}
    if argv == ["--check"]:
        stale = [p.name for p, text in want.items() if p.read_text() != text]
        if stale:
            print(f"{', '.join(stale)}: not what the curated files give; run python tools/results_page.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: results_page.py [--check]", file=sys.stderr)
        return 2
    for path, text in want.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
