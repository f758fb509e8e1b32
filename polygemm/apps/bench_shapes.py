"""The shapes ``polygemm bench`` times: its presets (``square``, ``sweep``, ``real``, ...), the
default per backend, ``--shapes`` parsing (``MxNxK``, or ``MxNxK:LAYOUT`` with the operands'
layout, :class:`Shape`), and ``--repeats auto``'s count per shape."""

from __future__ import annotations

import argparse
import re
from typing import Sequence

from ..backend import Backend
from .arguments import parse_shape
from .bench_real import REAL_WORKLOADS, real_shapes
from .bench_layout import LAYOUT_FORM, LAYOUTS, Shape, layout_of, parse_layout, shape_text

__all__ = ["PRESETS", "SWEEP_MN", "SWEEP_K", "sweep_shapes", "auto_repeats", "default_shapes", "parse_shapes",
           "parse_bench_shape", "reads_as_shape", "preset_summary", "runs_on_host", "GPU_PRESETS", "Shape", "LAYOUTS", "layout_of",
           "shape_text", "REAL_WORKLOADS", "real_shapes"]

#: the ``sweep`` preset's axes: M and N values, and K values
SWEEP_MN: tuple[int, ...] = (1, 16, 64, 128, 512, 1000, 4096, 8192)
SWEEP_K: tuple[int, ...] = (512, 4096, 16384)


def sweep_shapes() -> list[tuple[int, int, int]]:
    """The ``sweep`` preset: 60 of the 8 × 8 × 3 = 192 products M×N×K with M, N in
    ``SWEEP_MN`` and K in ``SWEEP_K``, plus the odd sizes, in this order.

    All 192 would take about three times the GPU time, so for each K the preset keeps
      * the diagonal M = N, every value (8): every M and every N meets every K, and it holds
        the squares (512³, 4096³), the large outputs (8192×8192×512, a short K) and
        K ≫ M, N (64×64×16384, 512×512×16384);
      * skinny M against a long N: M ∈ {1, 16, 64, 128, 1000} × N = P (5), decode steps
        and GEMV-like rows, 1000 for a tall tile's ragged edge;
      * its mirror, skinny N: M = P × N ∈ {1, 16, 64, 128, 1000} (5), so both operand
        orders of a skinny product are measured;
    where the long side P is 8192 at K = 512 and 4096 at K = 4096 and 16384 (an 8192×16384
    operand in ten shapes would double the sweep's host time for drawing and copying data,
    and 8192×8192×16384 already has one). Then the odd sizes: 4095×4097×4093 (no dimension
    a multiple of 8), 1000×3000×2000, 17×4096×4096 and 4096×17×4096 (one past a 16-row
    tile), and the GEMV pair 1×8192×8192 and 8192×1×8192.
    """
    shapes: list[tuple[int, int, int]] = []
    for k in SWEEP_K:
        long_side = 8192 if k == 512 else 4096
        shapes += [(v, v, k) for v in SWEEP_MN]
        shapes += [(s, long_side, k) for s in (1, 16, 64, 128, 1000)]
        shapes += [(long_side, s, k) for s in (1, 16, 64, 128, 1000)]
    shapes += [(4095, 4097, 4093), (1000, 3000, 2000), (17, 4096, 4096), (4096, 17, 4096), (1, 8192, 8192), (8192, 1, 8192)]
    return list(dict.fromkeys(shapes))


def auto_repeats(m: int, n: int, k: int, itemsize: int = 4) -> int:
    """``--repeats auto``: the timed repeats (each a batch of calls) an M×N×K product gets,
    fewer the longer one call takes.

    One call is estimated from the problem's FLOPs and bytes at an H200's order of magnitude,
    2·M·N·K / 400 TFLOP/s (50 TFLOP/s for 4-byte elements) plus (M·K + K·N + M·N)·itemsize /
    4 TB/s. Under 20 µs (launch-bound, the noisiest; a repeat is a batch of many calls
    costing ``min_seconds``, whatever the size) 7 repeats; under 1 ms 5; longer 3 (a repeat
    is then at least two calls of milliseconds each, vendor and polygemm alike). The median
    of the repeats is reported, after the warm-up, as with a fixed count.
    """
    flops_rate = 50e12 if itemsize >= 4 else 400e12
    est = 2.0 * m * n * k / flops_rate + (m * k + k * n + m * n) * itemsize / 4e12
    return 7 if est < 20e-6 else (5 if est < 1e-3 else 3)


PRESETS: dict[str, list[tuple[int, int, int]]] = {
    "square": [(s, s, s) for s in (1024, 2048, 4096, 6144, 8192)],
    "odd": [(4095, 4097, 4093), (1000, 3000, 2000), (16, 4096, 4096), (8192, 8192, 512), (512, 512, 16384)],
    "small": [(128, 128, 128), (255, 257, 129), (512, 512, 512)],
    "overhead": [(128, 128, 128), (256, 256, 256), (1024, 1024, 1024)],
    # decode steps and GEMV both ways (small M, small N): what the skinny rungs are tuned on
    "skinny": [(1, 4096, 4096), (1, 8192, 8192), (2, 4096, 4096), (4, 8192, 8192), (8, 4096, 4096), (16, 4096, 4096),
               (16, 8192, 8192), (4096, 1, 4096), (8192, 1, 8192), (8192, 8, 8192), (4096, 16, 4096), (1, 1024, 1024),
               (16, 1024, 16384), (17, 4096, 4096), (4096, 17, 4096), (32, 4096, 4096), (16, 16, 16384)],
    # the default on the CPU: seconds in either mode on 2 cores
    "cpu": [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (255, 257, 129)],
    # M, N and K across decode steps, skinny, square and K >> M, N products (see sweep_shapes)
    "sweep": sweep_shapes(),
    # the GEMMs of current models with their operand layouts (see bench_real.real_workloads): Shape objects
    "real": [*real_shapes()],
}

#: presets sized for a GPU, refused on a host backend (hours there) unless --max-dim trims them
GPU_PRESETS: tuple[str, ...] = ("real",)


def runs_on_host(be: Backend) -> bool:
    """Whether ``be``'s work runs on the host: the cpu backend, or an emulation built for the host."""
    if tuple(getattr(be, "residencies", ("host",))) == ("host",):
        return True
    try:
        return callable(getattr(be, "flavor", None)) and be.flavor() == "host"  # type: ignore[attr-defined]
    except Exception:
        return False


def default_shapes(be: Backend) -> list[str]:
    """``--shapes`` when none are given: the ``cpu`` preset where the work runs on the host
    (the cpu backend, or an emulation built for the host), ``square`` on a GPU."""
    return ["cpu"] if runs_on_host(be) else ["square"]


def parse_bench_shape(text: str) -> tuple[int, int, int]:
    """``MxNxK`` -> (M, N, K); ``MxNxK:LAYOUT`` -> a :class:`Shape` of that layout. Raises
    argparse.ArgumentTypeError naming the accepted form."""
    size, colon, layout = text.partition(":")
    try:
        m, n, k = parse_shape(size)
    except argparse.ArgumentTypeError:
        if not colon:
            raise
        raise argparse.ArgumentTypeError(f"{text!r} has no MxNxK of three non-negative integers before ':'; a shape is "
                                         f"{LAYOUT_FORM}") from None
    if not colon:
        return m, n, k
    return Shape(m, n, k, parse_layout(layout, text))


def reads_as_shape(text: str) -> bool:
    """Whether ``text`` reads as a shape (``MxNxK[:LAYOUT]``) rather than a file name or a word."""
    try:
        parse_bench_shape(text)
    except argparse.ArgumentTypeError:
        return False
    return True


def parse_shapes(items: Sequence[str]) -> list[tuple[int, int, int]]:
    """The shapes of ``--shapes`` items (comma or space separated ``MxNxK[:LAYOUT]`` and preset
    names), each once, in order; a layout other than ``nn`` makes a :class:`Shape`."""
    shapes: list[tuple[int, int, int]] = []
    for item in items:
        if re.fullmatch(r"\s*\d+\s*,\s*\d+\s*,\s*\d+\s*", item):  # "128,64,32": one shape, its sizes comma separated
            m, n, k = (x.strip() for x in item.split(","))
            raise argparse.ArgumentTypeError(f"{item!r}: a shape is written {m}x{n}x{k} (commas separate shapes)")
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part.lower() in PRESETS:  # (in any case, as dtypes, devices and layouts are)
                shapes.extend(PRESETS[part.lower()])
            else:
                shapes.append(parse_bench_shape(part))
    if items and not shapes:  # "--shapes ,": a usage error, not a run of nothing
        raise argparse.ArgumentTypeError(f"{' '.join(map(repr, items))} names no shape; name shapes MxNxK[:LAYOUT], comma "
                                         f"or space separated, or a preset")
    return list(dict.fromkeys(shapes))  # presets may overlap: each shape once


def preset_summary(shapes: Sequence[tuple[int, int, int]]) -> str:
    """``1024³..8192³`` for cubes, else the shapes themselves, for --help; the sweep's axes, the real preset's models."""
    if list(shapes) == PRESETS["sweep"]:
        return (f"{len(shapes)} shapes: M, N in {{{', '.join(map(str, SWEEP_MN))}}} against K in {{{', '.join(map(str, SWEEP_K))}}}, "
                "diagonal and skinny both ways, plus odd sizes")
    if list(shapes) == PRESETS["real"]:
        return (f"{len(shapes)} products of current models with their weight layouts, for GPUs: Llama-3 8B and 70B, "
                "Mixtral 8x7B, Qwen2.5-7B at 1 to 16384 tokens, BERT-base, ResNet-50, unaligned and prime sizes")
    cubes = [m for m, n, k in shapes if m == n == k]
    text = [f"{cubes[0]}³..{cubes[-1]}³"] if len(cubes) > 3 else [f"{c}³" for c in cubes]
    text += [shape_text(*s, layout_of(s)) for s in shapes if not s[0] == s[1] == s[2]]
    return ", ".join(text)
