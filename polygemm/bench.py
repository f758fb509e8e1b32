"""``polygemm bench``: time variants against the vendor library in the same process.

Each (variant, shape) is timed with the backend's device events after warm-up, over two
rotating input sets of random normal data (never zeros), as the median of several
repeats of a batch of calls; TFLOP/s = 2·M·N·K / t. The vendor variant of the same
backend (cuBLAS for cuda, NumPy's BLAS for cpu) is timed on the same buffers, in turn
with each variant, repeat by repeat, and each ratio uses those neighbouring timings.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import shlex
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import registry
from .backend import Backend
from .cli import parse_shape
from .errors import BackendUnavailableError, PolygemmError, UnsupportedProblemError

__all__ = ["PRESETS", "BenchRecord", "run_bench", "add_parser", "to_markdown"]

PRESETS: dict[str, list[tuple[int, int, int]]] = {
    "square": [(s, s, s) for s in (1024, 2048, 4096, 6144, 8192)],
    "odd": [(4095, 4097, 4093), (1000, 3000, 2000), (16, 4096, 4096), (8192, 8192, 512), (512, 512, 16384)],
    "small": [(128, 128, 128), (255, 257, 129), (512, 512, 512)],
}


@dataclass
class BenchRecord:
    backend: str
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    tflops: float
    tflops_min: float
    tflops_max: float
    ms: float
    vendor_variant: str
    vendor_tflops: float
    ratio: float
    device: str
    date: str
    repeats: int
    calls_per_repeat: int
    method: str = "interleaved"  # or "settled <s> s": each kernel run alone that long first


def parse_shapes(items: Sequence[str]) -> list[tuple[int, int, int]]:
    shapes: list[tuple[int, int, int]] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part in PRESETS:
                shapes.extend(PRESETS[part])
            else:
                shapes.append(parse_shape(part))
    return shapes


class _Runner:
    """Queues one product on prepared operands; device backends avoid the API overhead."""

    def __init__(self, be: Backend, variant: str, a: Any, b: Any, c: Any) -> None:
        self._close: Callable[[], None] = lambda: None
        launcher = getattr(be, "launcher", None)
        if launcher is not None:
            launch = launcher(variant, a, b, c, 1.0, 0.0)
            ran = getattr(launch, "variant", variant)
            if ran != variant:  # e.g. a TMA rung handing an unaligned problem to another rung
                launch.close()
                raise UnsupportedProblemError(f"{variant} does not run this problem itself ({ran} would)")
            self.call: Callable[[], None] = launch
            self._close = launch.close
        else:
            from .api import gemm

            def call() -> None:
                gemm(a, b, device=be.name, variant=variant, out=c)

            self.call = call

    def close(self) -> None:
        self._close()


@contextlib.contextmanager
def _active(be: Backend) -> Iterator[None]:
    rt = getattr(be, "runtime", None)
    if rt is not None and hasattr(rt, "active"):
        with rt.active():
            yield
    else:
        yield


class _Timed:
    """One variant ready to time: warmed up, with a batch of calls sized to ``min_seconds``."""

    def __init__(self, be: Backend, variant: str, sets: list[tuple[Any, Any, Any]], min_seconds: float) -> None:
        self.timer = be.timer()
        self.be = be
        self.runners = [_Runner(be, variant, *s) for s in sets]
        try:
            with _active(be):
                for r in self.runners:  # warm-up: compilation, module load, handle creation
                    r.call()
                be.synchronize()
                one = self.timer(lambda: [r.call() for r in self.runners]) / len(self.runners)
            calls = max(len(self.runners), min(200, int(min_seconds / max(one, 1e-7)) + 1))
            self.calls = calls + (-calls) % len(self.runners)
        except BaseException:
            self.close()
            raise

    def once(self) -> float:
        """Seconds per call over one batch, rotating the input sets."""
        def batch() -> None:
            for i in range(self.calls):
                self.runners[i % len(self.runners)].call()

        with _active(self.be):
            return self.timer(batch) / self.calls

    def settle(self, seconds: float) -> None:
        """Run batches for ``seconds`` so the clocks reach this kernel's own steady state."""
        if seconds <= 0:
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.once()

    def close(self) -> None:
        for r in self.runners:
            r.close()


def run_bench(
    device: str,
    dtype: str,
    variants: Sequence[str] | str,
    shapes: Sequence[tuple[int, int, int]],
    *,
    repeats: int = 5,
    min_seconds: float = 0.02,
    sets: int = 2,
    settle: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> list[BenchRecord]:
    """Benchmark ``variants`` (or ``"all"``) of backend ``device`` on ``shapes``.

    By default the vendor is timed beside each variant, repeat by repeat. With ``settle`` >
    0 each kernel instead runs alone for ``settle`` seconds and then has its repeats timed
    back to back (vendor, then variant): on a GPU at its power cap, interleaving lets the
    kernel that draws more power slow the one timed right after it, and settling gives each
    its own sustained clock.
    """
    be = registry.get_backend(device)
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    table = [v for v in be.variants() if dtype in v.dtypes]
    vendor = next((v.name for v in table if v.vendor), None)
    names = [v.name for v in table if not v.vendor] if variants == "all" else list(variants)
    known = {v.name for v in table}
    for name in names:
        if name not in known:
            raise UnsupportedProblemError(f"--variants: {name!r} is not a {dtype} variant of {device}; known: {', '.join(sorted(known))}")
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rng = np.random.default_rng()
    records: list[BenchRecord] = []
    np_dtype = np.dtype(dtype)
    for (m, n, k) in shapes:
        flops = 2.0 * m * n * k
        host = [(rng.standard_normal((m, k), dtype=np.float32).astype(np_dtype), rng.standard_normal((k, n), dtype=np.float32).astype(np_dtype)) for _ in range(sets)]
        dev = [(be.to_device(a), be.to_device(b), be.to_device(np.zeros((m, n), np_dtype))) for a, b in host]
        vend: _Timed | None = None
        if vendor is not None:
            try:
                vend = _Timed(be, vendor, dev, min_seconds)
            except PolygemmError as exc:  # e.g. muBLAS absent from an emulation build
                if progress:
                    progress(f"{m}x{n}x{k} vendor {vendor} not timed: {exc}")
        for name in names:
            # The vendor is timed right beside each variant, repeat by repeat: a GPU that
            # heats up and throttles over a long run then slows both alike.
            try:
                timed = _Timed(be, name, dev, min_seconds)
            except UnsupportedProblemError as exc:
                if progress:
                    progress(f"{m}x{n}x{k} {name:28s} not timed: {exc}")
                continue
            times, vtimes = [], []
            try:
                if settle > 0:
                    if vend is not None:
                        vend.settle(settle)
                        vtimes = [vend.once() for _ in range(repeats)]
                    timed.settle(settle)
                    times = [timed.once() for _ in range(repeats)]
                else:
                    for _ in range(repeats):
                        if vend is not None:
                            vtimes.append(vend.once())
                        times.append(timed.once())
            finally:
                timed.close()
            calls = timed.calls
            t = statistics.median(times)
            vendor_t = statistics.median(vtimes) if vtimes else float("nan")
            rec = BenchRecord(
                be.name, name, dtype, m, n, k, flops / t / 1e12, flops / max(times) / 1e12, flops / min(times) / 1e12,
                t * 1e3, vendor or "", flops / vendor_t / 1e12, vendor_t / t, be.device_name(), date, repeats, calls,
                f"settled {settle:g} s" if settle > 0 else "interleaved",
            )
            records.append(rec)
            if progress:
                progress(f"{m}x{n}x{k} {name:28s} {rec.tflops:8.2f} TFLOP/s  ({rec.ratio:.2f}x {vendor})")
        if vend is not None:
            vend.close()
        del dev
    return records


def to_markdown(records: list[BenchRecord], command: str) -> str:
    """A table per dtype: variants down, shapes across, 'TFLOP/s (ratio to vendor)'."""
    lines = [f"Command: `{command}`", ""]
    if not records:
        return "\n".join(lines + ["(no records)"])
    r0 = records[0]
    how = ("vendor timed beside each variant, repeat by repeat" if r0.method == "interleaved"
           else f"each kernel {r0.method} alone before its repeats")
    lines.insert(0, f"Device: {r0.device}; date {r0.date}; median of {r0.repeats} repeats; two rotating input sets; {how}.\n")
    for dtype in sorted({r.dtype for r in records}):
        rs = [r for r in records if r.dtype == dtype]
        shapes = list(dict.fromkeys((r.m, r.n, r.k) for r in rs))
        variants = list(dict.fromkeys(r.variant for r in rs))
        vendor = rs[0].vendor_variant or "vendor"
        lines.append(f"### {rs[0].backend} {dtype}: TFLOP/s (ratio to {vendor} in the same run)\n")
        lines.append("| variant | " + " | ".join(f"{m}×{n}×{k}" for m, n, k in shapes) + " |")
        lines.append("|---|" + "---|" * len(shapes))
        vend = {(r.m, r.n, r.k): statistics.median(x.vendor_tflops for x in rs if (x.m, x.n, x.k) == (r.m, r.n, r.k)) for r in rs}
        lines.append(f"| **{vendor}** (median of its timings beside each rung) | " + " | ".join(f"{vend[s]:.1f}" for s in shapes) + " |")
        by = {(r.variant, r.m, r.n, r.k): r for r in rs}
        for v in variants:
            cells = []
            for s in shapes:
                r = by.get((v, *s))
                cells.append(f"{r.tflops:.1f} ({r.ratio:.2f}×)" if r else "–")
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append(ladder_tables(rs))
    return "\n".join(lines)


def ladder_tables(records: list[BenchRecord]) -> str:
    """Step-by-step tables, one per ladder (variant-name prefix before ``_v``): each rung's
    TFLOP/s, ratio to the vendor and gain over the previous rung at the largest cubes."""
    all_cubes = sorted({r.m for r in records if r.m == r.n == r.k})
    cubes = [c for c in (4096, 8192) if c in all_cubes] or all_cubes[-2:]  # the targets' sizes
    if not cubes:
        return ""
    by = {(r.variant, r.m): r for r in records if r.m == r.n == r.k}
    ladders: dict[str, list[str]] = {}
    for r in records:
        if "_v" in r.variant:
            ladders.setdefault(r.variant.split("_v")[0], [])
            if r.variant not in ladders[r.variant.split("_v")[0]]:
                ladders[r.variant.split("_v")[0]].append(r.variant)
    out = []
    for ladder, rungs in ladders.items():
        if len(rungs) < 2:
            continue
        out.append(f"#### Ladder `{ladder}`: step by step\n")
        head = " | ".join(f"{c}³ TFLOP/s | vs vendor | step" for c in cubes)
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
                cells.append(f"{r.tflops:.1f} | {r.ratio:.2f}× | {step}")
                prev[c] = r.tflops
            out.append(f"| {v} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def cmd_bench(args: argparse.Namespace) -> int:
    shapes = parse_shapes(args.shapes)
    variants: Sequence[str] | str = "all" if args.variants in (["all"], None) else [v for item in args.variants for v in item.split(",") if v]
    command = "polygemm " + shlex.join(args.argv)
    if args.settle < 0:
        raise SystemExit("polygemm bench: --settle must be >= 0 seconds")
    records = run_bench(args.device, args.dtype, variants, shapes, repeats=args.repeats, settle=args.settle,
                        progress=lambda s: print(s, flush=True))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": command, "records": [asdict(r) for r in records]}, fh, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(to_markdown(records, command) + "\n")
    if args.plot:
        from .plot import plot_records

        plot_records(records, args.plot)
    return 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("bench", help="time variants against the vendor library (same process, device events)")
    s.add_argument("--device", default="cuda")
    s.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"])
    s.add_argument("--variants", nargs="+", default=["all"], help="variant names (comma or space separated) or all")
    s.add_argument("--shapes", nargs="+", default=["square"], help="MxNxK items and presets: " + ", ".join(PRESETS))
    s.add_argument("--repeats", type=int, default=5)
    s.add_argument("--settle", type=float, default=0.0, metavar="SECONDS",
                   help="run each kernel alone this long before timing its repeats (sustained clocks) "
                        "instead of interleaving the vendor repeat by repeat")
    s.add_argument("--json", metavar="PATH")
    s.add_argument("--markdown", metavar="PATH")
    s.add_argument("--plot", metavar="PATH", help="PNG of TFLOP/s against size (needs matplotlib)")
    s.set_defaults(fn=cmd_bench)
