"""``polygemm bench --plot``: throughput against problem size, one line per variant.

x is the problem's size as a number, the cube root of M·N·K (N for an N³ problem), on a
log-2 axis; y is TFLOP/s (GFLOP/s where every figure is below 1 TFLOP/s) from 0. Lines join
the square problems; other shapes are open markers at their cube root, named along the
bottom. Error bars span the fastest and slowest repeat (``tflops_min``/``tflops_max``). The
vendor is a thick black line with square markers.

Kernel-mode records give one line per variant (a ladder's rungs in one colour map, light to
dark); call-mode records give one line per requested variant, "polygemm.gemm (auto)", beside
the vendor as its users call it. Needs matplotlib (``pip install 'polygemm[plot]'``);
rendering uses the Agg backend.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

__all__ = ["plot_records"]


def _size(r: Any) -> float:
    return float(r.m * r.n * r.k) ** (1.0 / 3.0)


def _cube(r: Any) -> bool:
    return r.m == r.n == r.k


def _short_call(call: str) -> str:
    """``cupy.matmul(a, b, out=out)`` -> ``cupy.matmul``; longer expressions stay whole."""
    head = call.split("(", 1)[0]
    return head if call.count("(") == 1 else call


def _groups(records: Sequence[Any]) -> tuple[list[tuple[str, str, list[Any]]], list[tuple[str, list[tuple[Any, float]]]]]:
    """([(label, ladder, records)], [(vendor label, [(record, vendor tflops)])]) for the records."""
    call = [r for r in records if getattr(r, "mode", "kernel") == "call"]
    kernel = [r for r in records if getattr(r, "mode", "kernel") != "call"]
    dtypes = {r.dtype for r in records}
    tag = (lambda r: f" {r.dtype}") if len(dtypes) > 1 else (lambda r: "")
    ours: dict[str, tuple[str, list[Any]]] = {}
    vendors: dict[str, list[tuple[Any, float]]] = {}
    inputs = {getattr(r, "inputs", "device") for r in call}
    for r in call:
        how = f", {r.inputs} in/out" if len(inputs) > 1 and r.inputs == "numpy" else (", device arrays" if len(inputs) > 1 else "")
        label = f"polygemm.gemm ({getattr(r, 'requested', '') or 'auto'}{how}){tag(r)}"
        ours.setdefault(label, ("", []))[1].append(r)
        vlabel = f"{_short_call(r.vendor_call) if r.vendor_call else r.vendor_variant}{how}{tag(r)} (vendor)"
        vendors.setdefault(vlabel, []).append((r, r.vendor_tflops))
    vend_kernel: dict[str, dict[tuple[int, int, int, str], list[tuple[Any, float]]]] = {}
    for r in kernel:
        ladder = r.variant.split("_v")[0] if "_v" in r.variant else ""
        ours.setdefault(f"{r.variant}{tag(r)}", (ladder, []))[1].append(r)
        vlabel = f"{r.vendor_variant or 'vendor'}{tag(r)} (vendor)"
        vend_kernel.setdefault(vlabel, {}).setdefault((r.m, r.n, r.k, r.dtype), []).append((r, r.vendor_tflops))
    for vlabel, by_shape in vend_kernel.items():
        # the vendor was timed beside each variant: one point per shape, the median of those
        pts = []
        for items in by_shape.values():
            vals = sorted(v for _, v in items if v == v)
            if vals:
                pts.append((items[0][0], vals[len(vals) // 2] if len(vals) % 2 else 0.5 * (vals[len(vals) // 2 - 1] + vals[len(vals) // 2])))
        vendors.setdefault(vlabel, []).extend(pts)
    return [(label, ladder, rs) for label, (ladder, rs) in ours.items()], list(vendors.items())


def _chosen(records: Sequence[Any]) -> str:
    """Call mode: which variant each requested one ran, shape by shape, for a note by the legend."""
    by: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if getattr(r, "mode", "kernel") == "call":
            by.setdefault((getattr(r, "requested", "") or "auto", r.variant), []).append(
                f"{r.m}³" if _cube(r) else f"{r.m}×{r.n}×{r.k}")
    if not by:
        return ""
    lines = ["variant that ran:"]
    for (asked, ran), shapes in by.items():
        lines.append(f"{asked} → {ran}:")
        row = ""
        for s in shapes:  # wrapped at about 34 characters
            piece = s if not row else ", " + s
            if len(row) + len(piece) > 34:
                lines.append("  " + row + ",")
                row = s
            else:
                row += piece
        lines.append("  " + row)
    return "\n".join(lines)


def _colors(groups: list[tuple[str, str, list[Any]]], plt: Any) -> dict[str, Any]:
    """A ladder's rungs share a colour map, lighter to darker up the ladder; the rest tab10."""
    # (colour map, first rung, last rung): distinct hue families, so two ladders never meet
    maps = [("viridis", 0.9, 0.0), ("YlOrRd", 0.35, 1.0), ("RdPu", 0.35, 1.0), ("Greys", 0.35, 0.85)]
    ladders: dict[str, list[str]] = {}
    for label, ladder, _ in groups:
        if ladder:
            ladders.setdefault(ladder, []).append(label)
    colors: dict[str, Any] = {}
    for i, (ladder, labels) in enumerate(ladders.items()):
        if len(labels) < 3:
            continue
        name, first, last = maps[i % len(maps)]
        cmap = plt.get_cmap(name)
        for j, label in enumerate(labels):
            colors[label] = cmap(first + (last - first) * j / max(len(labels) - 1, 1))
    cycle = plt.get_cmap("tab10")
    free = [label for label, _, _ in groups if label not in colors]
    for j, label in enumerate(free):
        colors[label] = cycle(j % 10)
    return colors


def plot_records(records: Sequence[Any], path: str) -> None:
    """Write a PNG of ``records`` (BenchRecord objects, kernel or call mode) to ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError as exc:
        from .errors import ArgumentError

        raise ArgumentError(f"--plot needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from exc
    if not records:
        raise ValueError("no benchmark records to plot")
    groups, vendors = _groups(records)
    values = [r.tflops_max for _, _, rs in groups for r in rs] + [v for _, pts in vendors for _, v in pts]
    finite = [v for v in values if v == v and v != math.inf]
    unit, scale = ("TFLOP/s", 1.0) if finite and max(finite) >= 1.0 else ("GFLOP/s", 1e3)
    colors = _colors(groups, plt)
    many = len(groups) + len(vendors) > 8
    fig, ax = plt.subplots(figsize=(12.5 if many else 10, 6.2))
    ladder_styles: dict[str, str] = {}

    def draw(rs_vals: list[tuple[Any, float, float, float]], label: str, **style: Any) -> None:
        """Points (record, y, ylo, yhi): a line through the cubes, open markers elsewhere."""
        rs_vals = sorted((p for p in rs_vals if p[1] == p[1]), key=lambda p: _size(p[0]))
        cubes = [p for p in rs_vals if _cube(p[0])]
        joined = cubes if len(cubes) >= 2 else rs_vals
        rest = [p for p in rs_vals if p not in joined]
        err = style.pop("err", True)
        for pts, open_marker in ((joined, False), (rest, True)):
            if not pts:
                continue
            xs = [_size(p[0]) for p in pts]
            ys = [p[1] * scale for p in pts]
            kw = dict(style)
            if open_marker:
                kw.update(linestyle="none", markerfacecolor="white")
                kw.pop("label", None)
            else:
                kw["label"] = label
            if err:
                lo = [max(p[1] - p[2], 0.0) * scale for p in pts]
                hi = [max(p[3] - p[1], 0.0) * scale for p in pts]
                ax.errorbar(xs, ys, yerr=[lo, hi], capsize=2.5, elinewidth=0.9, **kw)
            else:
                ax.plot(xs, ys, **kw)

    for label, ladder, rs in groups:
        if ladder and ladder not in ladder_styles:
            ladder_styles[ladder] = ["-", "--", "-.", ":"][len(ladder_styles) % 4]
        pts = [(r, r.tflops, r.tflops_min, r.tflops_max) for r in rs]
        draw(pts, label, color=colors[label], marker="o", markersize=4.5, linewidth=1.4,
             linestyle=ladder_styles.get(ladder, "-"), zorder=3)
    for vlabel, pts in vendors:
        draw([(r, v, v, v) for r, v in pts], vlabel, color="black", marker="s", markersize=6.5, linewidth=3.0,
             err=False, zorder=4)

    ax.set_xscale("log", base=2)
    sizes = sorted({_size(r) for _, _, rs in groups for r in rs} | {_size(r) for _, pts in vendors for r, _ in pts})
    left, right = min(sizes) / 1.3, max(sizes) * 1.2
    ax.set_xlim(left, right)
    ticks = [2.0 ** e for e in range(int(math.floor(math.log2(left))), int(math.ceil(math.log2(right))) + 1)]
    ticks = [t for t in ticks if left <= t <= right]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{int(t)}" for t in ticks])
    ax.set_ylim(0, ax.get_ylim()[1] * 1.05)
    # the shapes that are not cubes: named on the top axis where they sit on the size axis
    odd = sorted({(r.m, r.n, r.k): _size(r) for r in records if not _cube(r)}.items(), key=lambda kv: kv[1])
    if odd:
        for _, x in odd:
            ax.axvline(x, color="0.8", linewidth=0.8, linestyle=":", zorder=1)
        top = ax.secondary_xaxis("top")
        top.xaxis.set_major_locator(FixedLocator([x for _, x in odd]))
        top.xaxis.set_minor_locator(NullLocator())
        top.set_xticklabels([f"{m}×{n}×{k}" for (m, n, k), _ in odd], rotation=60, ha="left", fontsize=7.5, color="0.3")
        top.tick_params(axis="x", length=3, pad=1)
    ax.set_xlabel("problem size: (M·N·K)^(1/3), i.e. N for an N×N×N product (log scale); "
                  "open markers: non-square shapes", fontsize=9)
    ax.set_ylabel(unit + " (2·M·N·K / time)", fontsize=9)
    r0 = records[0]
    modes = {getattr(r, "mode", "kernel") for r in records}
    if modes == {"call"}:
        how = "polygemm.gemm per call (wall clock) beside the vendor as its users call it"
    elif modes == {"kernel"}:
        how = "kernel mode: each variant launched directly, beside the vendor library" + ("" if getattr(r0, "method", "interleaved") == "interleaved" else f" ({r0.method})")
    else:
        how = "kernel and call mode"
    dtypes = ", ".join(sorted({r.dtype for r in records}))
    ax.set_title(f"polygemm bench: {r0.backend} {dtypes} on {r0.device}\n{how}\n"
                 f"median of {r0.repeats} repeats; bars: fastest to slowest repeat", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ncol = 2 if len(groups) + len(vendors) > 14 else 1
    ax.legend(fontsize=8, ncol=ncol, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    chose = _chosen(records)
    if chose:
        ax.text(1.01, 0.0, chose, transform=ax.transAxes, ha="left", va="bottom", fontsize=7, color="0.25")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
