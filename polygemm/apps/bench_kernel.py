"""``polygemm bench --mode kernel``: each variant's raw launch, timed by the backend's device
events, beside the backend's vendor variant (cuBLAS for cuda, NumPy's BLAS for cpu)."""

from __future__ import annotations

import datetime as _dt
import statistics
from typing import Callable, Sequence

import numpy as np

from .. import registry
from ..core.dtypes import as_dtype
from ..errors import BackendUnavailableError, PolygemmError, UnsupportedProblemError
from .bench_inputs import Normals, check_fits, check_variant_names, operands, skip_too_large, too_large_text
from .bench_layout import layout_of, shape_text
from .bench_records import BenchRecord
from .bench_report import rate_text, spread_text
from .bench_timing import KernelTimed, ratio_range

__all__ = ["run_bench"]


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
    step: Callable[[], None] | None = None,
    sink: list[BenchRecord] | None = None,
    too_large: list[str] | None = None,
) -> list[BenchRecord]:
    """Benchmark ``variants`` (or ``"all"``) of backend ``device`` on ``shapes``.

    By default the vendor is timed beside each variant, repeat by repeat. With ``settle`` >
    0 each kernel instead runs alone for ``settle`` seconds and then has its repeats timed
    back to back (vendor, then variant): on a GPU at its power cap, interleaving lets the
    kernel that draws more power slow the one timed right after it, and settling gives each
    its own sustained clock.

    ``progress`` gets one line per result (or per problem not timed); ``step`` is called once
    per (shape, variant) done, timed or not (a progress bar's tick). ``sink``, when given, gets
    each record as soon as it is timed (what an interrupted run keeps). A shape whose host
    operands do not fit in memory is left out and said in ``too_large`` when given (else a
    MemoryError naming it). A :class:`.bench_layout.Shape` in ``shapes`` has its operands laid
    out as its layout says (kept in its records' ``layout``); a plain triple is ``nn``.
    """
    be = registry.get_backend(device)
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    table = [v for v in be.variants() if dtype in v.dtypes]
    vendor = next((v.name for v in table if v.vendor), None)
    names = [v.name for v in table if not v.vendor] if variants == "all" else list(variants)
    check_variant_names(be, device, dtype, names)
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rng = np.random.default_rng()
    records: list[BenchRecord] = []
    np_dtype = as_dtype(dtype)
    normals = Normals(rng, np_dtype)
    for shape in shapes:
        m, n, k = shape
        layout = layout_of(shape)
        said = shape_text(m, n, k, layout)
        flops = 2.0 * m * n * k
        try:
            check_fits(m, n, k, (), np_dtype.itemsize, sets)
            host = [operands(normals, (), m, n, k, layout) for _ in range(sets)]
            # the backend's own arrays: its to_device keeps a transposed (column-major) view so
            dev = [(be.to_device(a), be.to_device(b), be.to_device(np.zeros((m, n), np_dtype))) for a, b in host]
        except (MemoryError, ValueError, OverflowError):  # this shape left out (NumPy: past its sizes); the others timed, kept
            skip_too_large(too_large_text(m, n, k, (), np_dtype.itemsize, sets, layout), too_large, progress, None)
            if step is not None:  # one tick per (shape, variant), timed or not
                for _ in names:
                    step()
            continue
        vend: KernelTimed | None = None
        if vendor is not None:
            try:
                vend = KernelTimed(be, vendor, dev, min_seconds)
            except PolygemmError as exc:  # e.g. muBLAS absent from an emulation build
                if progress:
                    progress(f"{said} vendor {vendor} not timed: {exc}")
        for name in names:
            # The vendor is timed right beside each variant, repeat by repeat: a GPU that
            # heats up and throttles over a long run then slows both alike.
            try:
                timed = KernelTimed(be, name, dev, min_seconds)
            except UnsupportedProblemError as exc:
                if progress:
                    progress(f"{said} {name:28s} not timed: {exc}")
                if step:
                    step()
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
            ran = timed.runners[0].ran  # auto: the rung it chose; otherwise ``name``
            rec = BenchRecord(
                be.name, ran, dtype, m, n, k, flops / t / 1e12, flops / max(times) / 1e12, flops / min(times) / 1e12,
                t * 1e3, vendor or "", flops / vendor_t / 1e12, vendor_t / t, be.device_name(), date, repeats, calls,
                f"settled {settle:g} s" if settle > 0 else "interleaved", "kernel", t * 1e6, vendor_t * 1e6,
                requested="auto" if name == "auto" else "", vendor=vendor if vtimes else None,
            )
            rec.ratio_min, rec.ratio_max, rec.ratio_spread = ratio_range(vtimes, times)
            rec.layout = layout
            records.append(rec)
            if sink is not None:
                sink.append(rec)
            if progress:
                label = f"auto -> {ran}" if name == "auto" else name
                beside = f"{rec.ratio:.2f}x {vendor}, {spread_text(rec)} over the repeats" if vendor and rec.ratio == rec.ratio else \
                    ("no vendor variant to compare" if not vendor else f"{vendor} not timed")
                progress(f"{said} {label:28s} {rate_text(rec.tflops)}  ({beside})")
            if step:
                step()
        if vend is not None:
            vend.close()
        del dev
    return records

