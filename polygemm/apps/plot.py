"""``polygemm bench --plot`` and ``polygemm plot``: throughput against problem size, one line
per variant; with ``polygemm plot --heatmap``, the ratio to the vendor over a sweep of shapes.

x is the problem's size as a number, the cube root of M·N·K (N for an N³ problem), on a
log-2 axis; y is TFLOP/s (GFLOP/s where every figure is below 1 TFLOP/s) from 0. Lines join
the square problems; other shapes are open markers at their cube root, named along the
bottom. Error bars span the fastest and slowest repeat (``tflops_min``/``tflops_max``). The
vendor is a thick black line with square markers (a second vendor library timed beside the call,
torch's and cupy's, dashed grey with diamonds).

Kernel-mode records give one line per variant (a ladder's rungs in one colour map, light to
dark); call-mode records give one line per requested variant, "polygemm.gemm (auto)", beside
the vendor as its users call it. Needs matplotlib (``pip install 'polygemm[plot]'``);
rendering uses the Agg backend.

The heatmap (:func:`plot_heatmap`) has one row of panels per dtype and mode: one panel per K
(rows M, columns N) for each K with at least four shapes, and a strip of the other shapes;
each cell is coloured by polygemm's speed over the vendor's on a diverging map centred at 1.0
(log scale, 1/4× to 4×) with the ratio written in it. :func:`summarize` gives the geometric
mean and the worst shape behind each row's title (``polygemm plot`` prints them). Neither
needs a GPU: both read the records ``polygemm bench --json`` wrote.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import ArgumentError
from .bench_records import load_records
from .outputs import image_format, write_file

__all__ = ["plot_records", "plot_heatmap", "summarize", "SweepSummary", "add_parser"]


def _save(fig: Any, path: str, **kw: Any) -> None:
    """``fig.savefig`` to exactly ``path``, in the format its extension names (PNG where it has
    none: matplotlib would have written ``path + ".png"``), whole or not at all."""
    fmt = image_format(path)
    write_file(path, lambda fh: fig.savefig(fh, format=fmt, **kw), binary=True)


def _empty_products(records: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """(records of products with arithmetic, records of empty products: a zero dimension)."""
    kept = [r for r in records if r.m * r.n * r.k > 0]
    return kept, [r for r in records if not r.m * r.n * r.k > 0]


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
        libs = [(lib, us) for lib in ("torch", "cupy") if (us := getattr(r, f"{lib}_us_per_call", None)) is not None]
        if libs:  # each vendor library timed beside the call: a line of its own, whichever was the faster
            for lib, us in libs:
                flops = 2.0 * r.m * r.n * r.k * max(getattr(r, "batch", 0), 1)
                vendors.setdefault(f"{lib}.matmul{how}{tag(r)} (vendor)", []).append((r, flops / us / 1e6 if us > 0 else float("nan")))
            continue
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


def plot_records(records: Sequence[Any], path: str, option: str = "--plot") -> None:
    """Write a PNG of ``records`` (BenchRecord objects, kernel or call mode) to ``path``.

    ``option`` is the command-line option that asked for the chart, named when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError as exc:
        raise ArgumentError(f"{option} needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from exc
    records, _ = _empty_products(records)  # no place on a log size axis (cmd_plot says which it left out)
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
    for i, (vlabel, pts) in enumerate(vendors):  # black, then grey and dashed, so that two vendors (torch, cupy) tell apart
        draw([(r, v, v, v) for r, v in pts], vlabel, color=("black", "dimgray", "gray")[min(i, 2)], marker="sDv"[min(i, 2)],
             markersize=6.5, linewidth=3.0, linestyle=("-", "--", ":")[min(i, 2)], err=False, zorder=4)

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
    _save(fig, path, dpi=120, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)


# -- the sweep: geometric mean, worst shape and the heatmap of the ratio to the vendor --------

Shape = tuple[int, int, int, int, str]  # (M, N, K, batch, layout): batch 0 for one product; layout "nn", "nt", "tn" or "tt"


@dataclass(frozen=True)
class SweepSummary:
    """One dtype and mode of a sweep: polygemm's speed over the vendor's, shape by shape.

    ``ratios`` holds, for each shape with a vendor timing, the best ratio among the records of
    that shape (kernel mode: the fastest of the rungs timed; call mode: the variant asked for,
    normally auto), ``variants`` the variant that reached it. ``geomean`` is their geometric
    mean; ``worst`` the shape of the smallest ratio.
    """

    mode: str
    dtype: str
    device: str
    ours: str
    vendor: str
    ratios: dict[Shape, float]
    variants: dict[Shape, str]

    @property
    def geomean(self) -> float:
        vals = list(self.ratios.values())
        return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")

    @property
    def worst(self) -> Shape:
        return min(self.ratios, key=lambda s: self.ratios[s])

    @property
    def worst_ratio(self) -> float:
        return self.ratios[self.worst]

    @property
    def label(self) -> str:
        return f"{self.dtype}, {self.mode} mode: {self.ours} / {self.vendor}"

    def line(self) -> str:
        """One sentence: shapes, geometric mean, worst shape (and the variant there)."""
        if not self.ratios:
            return f"{self.label} on {self.device}: no shape has a vendor timing"
        w = self.worst
        shapes = f"{len(self.ratios)} shape{'' if len(self.ratios) == 1 else 's'}"
        return (f"{self.label} on {self.device}: {shapes}, geometric mean {self.geomean:.2f}x, "
                f"worst {self.worst_ratio:.2f}x at {_shape_text(w)} ({self.variants[w]})")


def _shape_text(s: Shape) -> str:
    m, n, k, batch, layout = s
    text = f"{m}x{n}x{k}" + ("" if layout == "nn" else f":{layout}")
    return f"{batch} x {text}" if batch else text


def summarize(records: Sequence[Any]) -> list[SweepSummary]:
    """One :class:`SweepSummary` per (mode, dtype, inputs) of ``records``, in order of first
    appearance. Records whose ratio is not a finite positive number (no vendor timing) are left
    out of the ratios."""
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for r in records:
        mode = getattr(r, "mode", "kernel")
        groups.setdefault((mode, r.dtype, getattr(r, "inputs", "device") if mode == "call" else ""), []).append(r)
    out: list[SweepSummary] = []
    for (mode, dtype, inputs), rs in groups.items():
        ratios: dict[Shape, float] = {}
        variants: dict[Shape, str] = {}
        for r in rs:
            ratio = float(r.ratio)
            if not (ratio > 0 and math.isfinite(ratio)):
                continue
            shape = (r.m, r.n, r.k, int(getattr(r, "batch", 0) or 0), str(getattr(r, "layout", "") or "nn"))
            if shape not in ratios or ratio > ratios[shape]:
                ratios[shape], variants[shape] = ratio, r.variant
        if mode == "call":
            asked = sorted({getattr(r, "requested", "") or "auto" for r in rs})
            ours = f"polygemm.gemm({', '.join(asked)}" + (", numpy in/out)" if inputs == "numpy" else ")")
            calls = sorted({_short_call(r.vendor_call) if r.vendor_call else r.vendor_variant for r in rs})
            vendor = ", ".join(calls)
        else:
            names = sorted({r.variant for r in rs})
            auto = any(getattr(r, "requested", "") == "auto" for r in rs)
            ours = "raw launch of auto's rung" if auto else (names[0] if len(names) == 1 else f"best of {len(names)} rungs")
            vendor = ", ".join(sorted({r.vendor_variant or "vendor" for r in rs}))
        out.append(SweepSummary(mode, dtype, rs[0].device, ours, vendor, ratios, variants))
    return out


def _on_grid(s: Shape) -> bool:
    """Whether a shape is drawn in its K's M×N grid: one product with operands as stored (a
    batch, or another layout of the same sizes, is listed beside the grid instead)."""
    return s[3] == 0 and s[4] == "nn"


def _panels(summary: SweepSummary) -> tuple[list[int], list[Shape]]:
    """(the K values drawn as an M×N grid, each with at least four shapes; the other shapes)."""
    by_k: dict[int, list[Shape]] = {}
    for s in summary.ratios:
        if _on_grid(s):
            by_k.setdefault(s[2], []).append(s)
    grid = sorted(k for k, shapes in by_k.items() if len(shapes) >= 4)
    rest = sorted((s for s in summary.ratios if not _on_grid(s) or s[2] not in grid), key=lambda s: (s[0] * s[1] * s[2], s))
    return grid, rest


def plot_heatmap(records: Sequence[Any], path: str) -> list[SweepSummary]:
    """Write a PNG of polygemm's speed over the vendor's for every shape of ``records`` to
    ``path`` (see the module docstring) and return the summaries drawn, one per row of panels.
    Raises ValueError when no record has a vendor timing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        from matplotlib.colors import Normalize
        from matplotlib.patches import Rectangle
    except ImportError as exc:
        raise ArgumentError(f"--heatmap needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from exc
    summaries = [s for s in summarize(records) if s.ratios]
    if not summaries:
        raise ValueError("no benchmark record with a vendor timing to draw")
    limit = 2.0  # log2: the colours span 1/4x .. 4x; cells beyond take the end colours
    norm = Normalize(vmin=-limit, vmax=limit)
    cmap = plt.get_cmap("RdBu")  # red: slower than the vendor, white: even, blue: faster
    layouts = [_panels(s) for s in summaries]

    def cells(summary: SweepSummary, k: int) -> tuple[list[int], list[int]]:
        shapes = [s for s in summary.ratios if s[2] == k and _on_grid(s)]
        return sorted({s[0] for s in shapes}), sorted({s[1] for s in shapes})

    widths = [max([len(cells(s, k)[1]) for s, (grid, _) in zip(summaries, layouts) for k in grid[i:i + 1]] or [0])
              for i in range(max(len(g) for g, _ in layouts))]
    strip = any(rest for _, rest in layouts)
    ratios_w = [max(w, 2) for w in widths] + ([1.8] if strip else [])
    rows_h = max([len(cells(s, k)[0]) for s, (grid, _) in zip(summaries, layouts) for k in grid] + [len(r) for _, r in layouts] + [2])
    fig = plt.figure(figsize=(max(9.0, 0.62 * sum(ratios_w) + 2.6 + 0.9 * len(ratios_w)), (0.42 * rows_h + 2.1) * len(summaries) + 0.8),
                     layout="constrained")
    subfigs = fig.subfigures(len(summaries), 1, squeeze=False)[:, 0]
    image = None
    for sub, summary, (grid, rest) in zip(subfigs, summaries, layouts):
        axes = sub.subplots(1, len(ratios_w), squeeze=False, gridspec_kw={"width_ratios": ratios_w})[0]
        worst = summary.worst
        sub.suptitle(f"{summary.label}\ngeometric mean {summary.geomean:.2f}× over {len(summary.ratios)} shapes, worst "
                     f"{summary.worst_ratio:.2f}× at {_shape_text(worst).replace('x', '×')} ({summary.variants[worst]})",
                     fontsize=10)
        for i, ax in enumerate(axes):
            if i < len(widths) and i < len(grid):
                k = grid[i]
                ms, ns = cells(summary, k)
                values = np.full((len(ms), len(ns)), np.nan)
                for s, ratio in summary.ratios.items():
                    if s[2] == k and _on_grid(s):
                        values[ms.index(s[0]), ns.index(s[1])] = ratio
                ax.set_title(f"K = {k}", fontsize=9)
                ax.set_xticks(range(len(ns)), [str(n) for n in ns], fontsize=8, rotation=45)
                ax.set_yticks(range(len(ms)), [str(m) for m in ms], fontsize=8)
                ax.set_xlabel("N", fontsize=9)
                ax.set_ylabel("M", fontsize=9)
                mark = (ms.index(worst[0]), ns.index(worst[1])) if worst[2] == k and _on_grid(worst) else None
            elif i == len(ratios_w) - 1 and strip and rest:
                values = np.array([[summary.ratios[s]] for s in rest])
                ax.set_title("other shapes", fontsize=9)
                ax.set_xticks([])
                ax.set_yticks(range(len(rest)), [_shape_text(s).replace("x", "×") for s in rest], fontsize=8)
                ax.yaxis.tick_right()
                mark = (rest.index(worst), 0) if worst in rest else None
            else:
                ax.axis("off")
                continue
            ax.set_facecolor("0.93")  # shapes not in the sweep
            shown = np.ma.masked_invalid(np.log2(np.where(values > 0, values, np.nan)))
            image = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
            for (y, x), ratio in np.ndenumerate(values):
                if ratio == ratio:
                    dark = abs(math.log2(ratio)) > 1.1
                    ax.text(x, y, f"{ratio:.2f}", ha="center", va="center", fontsize=7.5, color="white" if dark else "black")
            if mark is not None:
                ax.add_patch(Rectangle((mark[1] - 0.5, mark[0] - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2.0))
            ax.tick_params(length=2)
        bar = sub.colorbar(image, ax=list(axes), shrink=0.9, pad=0.02)
        ticks = [0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0]
        bar.set_ticks([math.log2(t) for t in ticks], labels=[f"{t:g}×" for t in ticks], fontsize=8)
        bar.set_label("polygemm / vendor speed", fontsize=8)
    fig.suptitle(f"polygemm sweep on {summaries[0].device}: speed over the vendor's in the same run\n"
                 "(grey: shape not in the sweep; box: the worst shape)", fontsize=11)
    _save(fig, path, dpi=110)
    plt.close(fig)
    return summaries


def cmd_plot(args: argparse.Namespace) -> int:
    if args.heatmap and not args.output:
        raise ArgumentError("--heatmap draws a chart: name the file with -o/--output (e.g. -o heatmap.png)")
    if args.output:
        for name in args.files:  # the chart would overwrite the records it is drawn from
            if os.path.exists(args.output) and os.path.exists(name) and os.path.samefile(name, args.output):
                raise ArgumentError(f"-o/--output {args.output} is one of the record files read; name another file for "
                                    f"the chart (e.g. {os.path.splitext(args.output)[0]}.png)")
    records: list[Any] = []
    for name in args.files:
        try:
            records += load_records(name)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ArgumentError(f"cannot read benchmark records from {name}: {exc}") from None
    if not records:
        raise ArgumentError("no benchmark records in " + ", ".join(args.files))
    records, empty = _empty_products(records)
    if empty:  # an older bench timed them: no arithmetic, and no place on a log size axis
        shapes = ", ".join(dict.fromkeys(f"{r.m}x{r.n}x{r.k}" for r in empty))
        print(f"polygemm plot: left out {len(empty)} record{'s' if len(empty) != 1 else ''} of an empty product ({shapes})",
              file=sys.stderr)
        if not records:
            raise ArgumentError("no benchmark records of a product with arithmetic in " + ", ".join(args.files))
    for summary in summarize(records):
        print(summary.line())
    if args.output:
        try:
            if args.heatmap:
                plot_heatmap(records, args.output)
            else:
                plot_records(records, args.output, option="-o/--output")
        except ValueError as exc:  # nothing to draw (e.g. no vendor timing for a heatmap)
            if isinstance(exc, ArgumentError):
                raise
            raise ArgumentError(f"{', '.join(args.files)}: {exc}; nothing written to {args.output}") from None
        print(f"wrote {args.output}")
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("plot", help="summarize and plot benchmark records (polygemm bench --json files) without re-running them")
    s.add_argument("files", nargs="+", metavar="JSON", help="files polygemm bench --json wrote; their records are read together")
    s.add_argument("-o", "--output", metavar="PNG", help="write the chart (needs matplotlib) in the format its extension names (.png, .svg, .pdf, ...; PNG without one); "
                        "without -o only the summary is printed")
    s.add_argument("--heatmap", action="store_true",
                   help="the ratio to the vendor shape by shape (rows M, columns N, a panel per K; one row of panels per dtype "
                        "and mode) instead of throughput against problem size")
    s.set_defaults(fn=cmd_plot)
