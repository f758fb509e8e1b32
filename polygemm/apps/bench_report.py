"""What ``polygemm bench`` reports: the markdown tables, the rate and ratio figures of its
lines, and the spread of each ratio over the repeats, with a warning where it is wide."""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Sequence

from .bench_layout import shape_text
from .bench_records import BenchRecord

__all__ = ["WIDE_SPREAD", "rate_text", "spread_text", "wide_spread", "spread_warning", "call_markdown", "to_markdown",
           "ladder_tables"]

#: a ratio whose per-repeat values span more than this share of it is called wide (the machine was noisy)
WIDE_SPREAD = 0.10


def spread_text(record: BenchRecord) -> str:
    """The ratio's range over the repeats, ``0.98-1.12x``; "" where the vendor was not timed."""
    lo, hi = record.ratio_min, record.ratio_max
    if not (lo == lo and hi == hi):
        return ""
    return f"{lo:.2f}-{hi:.2f}x" + (" (wide)" if wide_spread(record) else "")


def wide_spread(record: BenchRecord) -> bool:
    """Whether the ratio's per-repeat values span more than :data:`WIDE_SPREAD` of it."""
    return record.ratio_spread == record.ratio_spread and record.ratio_spread > WIDE_SPREAD


def spread_warning(records: Sequence[BenchRecord]) -> str | None:
    """One line when some ratios are wide (None when none is): how many, the widest, what to do."""
    wide = [r for r in records if wide_spread(r)]
    if not wide:
        return None
    worst = max(wide, key=lambda r: r.ratio_spread)
    shape = f"{f'{worst.batch}x' if worst.batch else ''}{shape_text(worst.m, worst.n, worst.k, worst.layout)} {worst.variant}"
    return (f"warning: {len(wide)} of {len(records)} ratios vary by more than {WIDE_SPREAD:.0%} across their repeats "
            f"(widest: {shape}, {worst.ratio_min:.2f}-{worst.ratio_max:.2f}x around {worst.ratio:.2f}x); the machine is "
            "noisy: read those ratios as rough, or rerun with more --repeats on a quiet machine")


def _warning_lines(records: Sequence[BenchRecord]) -> list[str]:
    warning = spread_warning(records)
    return ["", f"**{warning[0].upper()}{warning[1:]}**", ""] if warning else []


def rate_text(tflops: float) -> str:
    """TFLOP/s, or GFLOP/s where TFLOP/s would round to nothing."""
    return f"{tflops:8.2f} TFLOP/s" if tflops >= 0.1 else f"{tflops * 1e3:8.2f} GFLOP/s"


def _unit(tflops: Sequence[float]) -> tuple[str, float]:
    """One unit for a table: ("TFLOP/s", 1) where its largest figure is at least 1 TFLOP/s,
    else ("GFLOP/s", 1000) so CPU figures do not round to 0.0."""
    finite = [t for t in tflops if t == t]
    return ("TFLOP/s", 1.0) if finite and max(finite) >= 1.0 else ("GFLOP/s", 1e3)


def _num(tflops: float, unit: tuple[str, float]) -> str:
    """``tflops`` in ``unit``: one decimal, two below 10 GFLOP/s; "–" for a figure not measured."""
    if not tflops == tflops:
        return "–"
    v = tflops * unit[1]
    return f"{v:.1f}" if unit[0] == "TFLOP/s" or not v < 10 else f"{v:.2f}"


def call_markdown(records: list[BenchRecord]) -> str:
    """One table per dtype and inputs: per-call wall time and throughput beside the vendor,
    the ratio with its range over the repeats; on a GPU each vendor library's time where it
    was measured (torch, cupy), the faster of them the anchor."""
    lines: list[str] = []
    for dtype in sorted({r.dtype for r in records}):
        for inputs, result in (("device", "out"), ("device", "new"), ("numpy", "out"), ("numpy", "new")):
            rs = [r for r in records if r.dtype == dtype and r.inputs == inputs and (r.result or "out") == result]
            if not rs:
                continue
            ours = "polygemm.gemm(a, b)" if result == "new" else ("polygemm.gemm(a, b, out=out)" if inputs == "device" else "polygemm.gemm")
            libs = [lib for lib in ("torch", "cupy") if any(getattr(r, f"{lib}_us_per_call") is not None for r in rs)]
            calls = list(dict.fromkeys(r.vendor_call for r in rs))
            beside = (f"the faster of {' and '.join(f'{lib}.matmul' for lib in libs)} (the vendor column says which)"
                      if len(libs) > 1 else f"`{calls[0]}`" if len(calls) == 1 else ", ".join(f"`{c}`" for c in calls))
            lines.append(f"### {rs[0].backend} {dtype}, {inputs} arrays: `{ours}` per call beside {beside}\n")
            share = any(r.copy_share is not None for r in rs)
            chose = "variant auto chose" if all((r.requested or "auto") == "auto" for r in rs) else "variant that ran"
            layouts = any(r.layout != "nn" for r in rs)  # the column where some product is not A @ B as stored
            heads = ["shape"] + (["layout"] if layouts else []) + [chose, "µs/call"] + [f"{lib}.matmul µs/call" for lib in libs] + \
                ["vendor µs/call", "FLOP/s", "vendor FLOP/s", "ratio", "ratio range over the repeats"] + (["copy share"] if share else [])
            lines.append("| " + " | ".join(heads) + " |")
            lines.append("|" + "---|" * len(heads))
            for r in rs:
                timed = r.vendor_us_per_call == r.vendor_us_per_call  # a vendor not timed (NaN) is "–", as in kernel mode's tables
                cells = [f"{f'{r.batch} × ' if r.batch else ''}{r.m}×{r.n}×{r.k}"] + ([r.layout] if layouts else []) + \
                    [f"`{r.variant}`", f"{r.us_per_call:.1f}"]
                for lib in libs:
                    us = getattr(r, f"{lib}_us_per_call")
                    cells.append("–" if us is None else f"{us:.1f}")
                which = f" ({r.vendor})" if len(libs) > 1 and r.vendor else ""
                cells += [f"{r.vendor_us_per_call:.1f}{which}" if timed else "–", rate_text(r.tflops).strip(),
                          rate_text(r.vendor_tflops).strip() if timed else "–", f"**{r.ratio:.2f}×**" if timed else "–",
                          spread_text(r) or "–"]
                if share:
                    cells.append(f"{r.copy_share:.0%}" if r.copy_share is not None else "–")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def _span(values: Iterable[Any]) -> str:
    """``7`` where every record took one count, ``5 to 7`` where they differ (``--repeats auto``; calls a repeat)."""
    seen = sorted({v for v in values if v is not None})
    if not seen:
        return "?"
    return str(seen[0]) if len(seen) == 1 else f"{seen[0]} to {seen[-1]}"


def to_markdown(records: list[BenchRecord], command: str) -> str:
    """A table per dtype: variants down, shapes across, 'TFLOP/s (ratio to vendor) [ratio range]'
    (call mode: :func:`call_markdown`), and the warning of :func:`spread_warning` where it applies."""
    lines = [f"Command: `{command}`", ""]
    if not records:
        return "\n".join(lines + ["(no records)"])
    r0 = records[0]
    repeats = _span(r.repeats for r in records)  # --repeats auto: each shape its own counts
    if r0.mode == "call":
        sync = "" if r0.vendor_variant == "numpy" else " between device synchronizations"  # numpy: a host backend
        calls = _span(r.calls_per_repeat for r in records)
        lines.insert(0, f"Device: {r0.device}; date {r0.date}; wall clock per call over {calls} calls back to back"
                        f"{sync}, median of {repeats} repeats, vendor timed beside polygemm repeat by repeat.\n")
        return "\n".join(lines + [call_markdown(records)] + _warning_lines(records))
    how = ("vendor timed beside each variant, repeat by repeat" if r0.method == "interleaved"
           else f"each kernel {r0.method} alone before its repeats")
    lines.insert(0, f"Device: {r0.device}; date {r0.date}; median of {repeats} repeats; two rotating input sets; {how}.\n")
    for dtype in sorted({r.dtype for r in records}):
        rs = [r for r in records if r.dtype == dtype]
        shapes = list(dict.fromkeys((r.m, r.n, r.k, r.layout) for r in rs))
        variants = list(dict.fromkeys(r.variant for r in rs))
        vendor = rs[0].vendor_variant or "vendor"
        timed = any(r.vendor_tflops == r.vendor_tflops for r in rs)  # a backend without a vendor variant has none
        unit = _unit([r.tflops for r in rs] + [r.vendor_tflops for r in rs])
        beside = f"ratio to {vendor} in the same run" if timed else "no vendor variant to compare"
        lines.append(f"### {rs[0].backend} {dtype}: {unit[0]} ({beside})\n")
        lines.append("| variant | " + " | ".join(shape_text(*s, sep="×") for s in shapes) + " |")
        lines.append("|---|" + "---|" * len(shapes))
        timed_at = {(r.m, r.n, r.k, r.layout): [x.vendor_tflops for x in rs if (x.m, x.n, x.k, x.layout) == (r.m, r.n, r.k, r.layout)
                                                and x.vendor_tflops == x.vendor_tflops] for r in rs}  # records without a vendor timing (nan) say nothing of its pace
        vend = {s: statistics.median(v) if v else float("nan") for s, v in timed_at.items()}
        if timed:
            lines.append(f"| **{vendor}** (median of its timings beside each rung) | " + " | ".join(_num(vend[s], unit) for s in shapes) + " |")
        by = {(r.variant, r.m, r.n, r.k, r.layout): r for r in rs}
        for v in variants:
            cells = []
            for s in shapes:
                r = by.get((v, *s))
                if r is None:
                    cells.append("–")
                elif r.ratio == r.ratio:
                    spread = spread_text(r)
                    cells.append(f"{_num(r.tflops, unit)} ({r.ratio:.2f}×)" + (f" [{spread}]" if spread else ""))
                else:
                    cells.append(_num(r.tflops, unit))
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(ladder_tables(rs))
    return "\n".join(lines + _warning_lines(records))


def ladder_tables(records: list[BenchRecord]) -> str:
    """Step-by-step tables, one per ladder (variant-name prefix before ``_v``): each rung's
    TFLOP/s, ratio to the vendor and gain over the previous rung at the largest cubes."""
    all_cubes = sorted({r.m for r in records if r.m == r.n == r.k and r.layout == "nn"})
    cubes = [c for c in (4096, 8192) if c in all_cubes] or all_cubes[-2:]  # the targets' sizes
    if not cubes:
        return ""
    by = {(r.variant, r.m): r for r in records if r.m == r.n == r.k and r.layout == "nn"}
    ladders: dict[str, list[str]] = {}
    for r in records:
        if "_v" in r.variant:
            ladders.setdefault(r.variant.split("_v")[0], [])
            if r.variant not in ladders[r.variant.split("_v")[0]]:
                ladders[r.variant.split("_v")[0]].append(r.variant)
    out = []
    unit = _unit([r.tflops for r in records])
    for ladder, rungs in ladders.items():
        if len(rungs) < 2:
            continue
        out.append(f"#### Ladder `{ladder}`: step by step\n")
        head = " | ".join(f"{c}³ {unit[0]} | vs vendor | step" for c in cubes)
        out.append(f"| rung | {head} |")
        out.append("|---|" + "---|---|---|" * len(cubes))
        prev: dict[int, float] = {}
        for v in rungs:
            cells = []
            for c in cubes:
                r = by.get((v, c))
                if r is None:
                    cells.append("– | – | –")
                    continue
                step = f"{r.tflops / prev[c]:.2f}×" if c in prev else "–"
                cells.append(f"{_num(r.tflops, unit)} | {r.ratio:.2f}× | {step}")
                prev[c] = r.tflops
            out.append(f"| {v} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)

