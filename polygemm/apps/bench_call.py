"""``polygemm bench --mode call``: the public ``polygemm.gemm`` per call, beside the vendor
libraries called as their users call them.

On a cuda device the anchor is the fastest vendor path a user has: ``torch.matmul`` and
``cupy.matmul`` are each timed where installed (on their own arrays, holding the same random
data, ``out=`` given as polygemm's is), interleaved repeat by repeat with polygemm's call, and
the ratio is taken to the faster of them; both times are recorded. A host backend is timed
beside ``numpy.matmul``; another device backend beside its vendor variant through the call.
"""

from __future__ import annotations

import datetime as _dt
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .. import gemm, last_plan, registry
from ..backend import Backend
from ..core.dtypes import as_dtype
from ..errors import ArgumentError, BackendUnavailableError, DTypeError, PolygemmError, ShapeError, UnsupportedProblemError
from ..interop.torch import torch_from_host, torch_host_array
from .bench_inputs import Normals, check_fits, check_variant_names, in_layout, operands, skip_too_large, too_large_text
from .bench_layout import layout_of, shape_text
from .bench_records import BenchRecord
from .bench_report import rate_text, spread_text
from .bench_timing import CallTimed, ratio_range

__all__ = ["ArrayLib", "Vendor", "call_setup", "CallTimings", "time_interleaved", "run_call_bench", "REFUSALS"]

#: what a backend raises for a product it does not compute (the shape, the dtype, a layout or value it does not take):
#: that product is not timed, the others are; anything else (a device failure) ends the run
REFUSALS = (ShapeError, DTypeError, ArgumentError, UnsupportedProblemError)


@dataclass
class ArrayLib:
    """Whose arrays: how host data becomes one of them, how an output is made, and how one is
    transposed as a view (None: a backend's own arrays, whose ``to_device`` keeps a column-major
    host view column-major)."""

    name: str
    to_device: Callable[[np.ndarray], Any]
    empty: Callable[[tuple[int, ...], Any], Any]
    transpose: Callable[[Any], Any] | None = None


@dataclass
class Vendor:
    """One vendor path, called as its users call it: on ``lib``'s arrays with ``out=``
    (``matmul(a, b, out)``), making a new result (``matmul_new(a, b)``), or NumPy in and out
    (``host_matmul(a, b, out)``); each with the text the records and tables show."""

    name: str
    lib: ArrayLib
    matmul: Callable[[Any, Any, Any], Any]
    call: str
    host_matmul: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]
    host_call: str
    matmul_new: Callable[[Any, Any], Any] | None = None
    new_call: str = ""


def _swap(x: Any) -> Any:
    """The transposed view of the last two axes (NumPy, CuPy and torch spell it alike), as ``W.T``."""
    return x.swapaxes(-1, -2)


def _numpy_vendor(dtype: str) -> tuple[ArrayLib, Vendor]:
    """NumPy's calls for ``dtype``, chosen once: the timed call is the vendor's own, with nothing decided per call
    (``dtype.name`` alone costs about as much as a small product)."""
    if dtype in ("float16", "bfloat16"):  # NumPy's BLAS has no 16-bit floats: float32 in, as polygemm promises
        def np_matmul(a: Any, b: Any, out: Any) -> Any:
            return np.copyto(out, np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype))

        def np_new(a: Any, b: Any) -> Any:
            return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    else:
        matmul = np.matmul

        def np_matmul(a: Any, b: Any, out: Any) -> Any:
            return matmul(a, b, out=out)

        def np_new(a: Any, b: Any) -> Any:
            return a @ b

    lib = ArrayLib("numpy", lambda x: x, lambda shape, dt: np.empty(shape, dt), _swap)
    return lib, Vendor("numpy", lib, np_matmul, "numpy.matmul(a, b, out=out)", np_matmul, "numpy.matmul(a, b, out=out)",
                       np_new, "a @ b")


def _cupy_vendor() -> tuple[ArrayLib, Vendor]:
    import cupy as cp

    lib = ArrayLib("cupy", cp.asarray, lambda shape, dt: cp.empty(shape, dt), _swap)
    return lib, Vendor("cupy", lib, lambda a, b, out: cp.matmul(a, b, out=out), "cupy.matmul(a, b, out=out)",
                       lambda a, b, out: cp.matmul(cp.asarray(a), cp.asarray(b)).get(out=out),
                       "cupy.matmul(cupy.asarray(a), cupy.asarray(b)).get(out=out)", cp.matmul, "cupy.matmul(a, b)")


def _torch_vendor(dtype: str) -> tuple[ArrayLib, Vendor]:
    import torch

    tdt = getattr(torch, dtype)
    to_torch = torch_from_host  # (NumPy and torch share bfloat16's bits, not a DLPack dtype)
    lib = ArrayLib("torch", lambda x: to_torch(x).cuda(), lambda shape, dt: torch.empty(shape, dtype=tdt, device="cuda"), _swap)
    return lib, Vendor("torch", lib, lambda a, b, out: torch.matmul(a, b, out=out), "torch.matmul(a, b, out=out)",
                       lambda a, b, out: np.copyto(out, torch_host_array(torch.matmul(to_torch(a).cuda(), to_torch(b).cuda()))),
                       "torch.matmul(a.cuda(), b.cuda()).cpu()", torch.matmul, "torch.matmul(a, b)")


def _variant_vendor(be: Backend, dtype: str) -> tuple[ArrayLib, Vendor]:
    """A device backend without CuPy or torch: its own arrays, its vendor variant through the call."""
    name = next((v.name for v in be.variants() if v.vendor and dtype in v.dtypes), None)
    if name is None:
        raise UnsupportedProblemError(f"backend {be.name!r} has no vendor variant for {dtype} to compare the call with")
    through = lambda a, b, out: gemm(a, b, device=be.name, variant=name, out=out)  # noqa: E731
    lib = ArrayLib(be.name, be.to_device, lambda shape, dt: be.to_device(np.empty(shape, dt)))
    call = f"polygemm.gemm(a, b, out=out, variant={name!r})"
    return lib, Vendor(name, lib, through, call, through, call, lambda a, b: gemm(a, b, device=be.name, variant=name),
                       f"polygemm.gemm(a, b, variant={name!r})")


def call_setup(be: Backend, dtype: str, prefer: str = "auto") -> tuple[ArrayLib, list[Vendor]]:
    """(the arrays polygemm's call is timed on, the vendor paths timed beside it).

    A host backend: NumPy arrays beside ``numpy.matmul``. cuda: CuPy's arrays, else torch's
    (or the library ``prefer`` names), beside every one of ``torch.matmul`` and ``cupy.matmul``
    that is installed (CuPy has no bfloat16). Otherwise, or with neither installed: the
    backend's own device arrays beside its vendor variant."""
    if "host" in be.residencies and len(be.residencies) == 1:
        if prefer not in ("auto", "numpy"):
            raise UnsupportedProblemError(f"--array-lib {prefer}: backend {be.name!r} takes host (NumPy) arrays, so its call is "
                                          "timed on NumPy arrays; omit --array-lib")
        lib, vendor = _numpy_vendor(dtype)
        return lib, [vendor]
    if dtype == "bfloat16" and prefer == "cupy":
        raise UnsupportedProblemError("--array-lib cupy: CuPy has no bfloat16; use torch")
    found: dict[str, tuple[ArrayLib, Vendor]] = {}
    if be.name == "cuda":
        makers: dict[str, Callable[[], tuple[ArrayLib, Vendor]]] = {"torch": lambda: _torch_vendor(dtype)}
        if dtype != "bfloat16":
            makers["cupy"] = _cupy_vendor
        for name, make in makers.items():
            try:
                found[name] = make()
            except ImportError:
                pass
    if prefer in ("cupy", "torch") and prefer not in found:  # not a silent run on other arrays
        if be.name != "cuda":
            raise UnsupportedProblemError(f"--array-lib {prefer}: backend {be.name!r} is timed on its own device arrays; "
                                          "omit --array-lib")
        raise UnsupportedProblemError(f"--array-lib {prefer}: {prefer} is not importable")
    if not found:
        lib, vendor = _variant_vendor(be, dtype)
        return lib, [vendor]
    arrays = prefer if prefer in found else ("cupy" if "cupy" in found else "torch")
    return found[arrays][0], [vendor for _, vendor in found.values()]


@dataclass
class CallTimings:
    """Seconds per call, repeat by repeat: polygemm's, and each vendor's timed beside it."""

    ours: list[float] = field(default_factory=list)
    vendors: dict[str, list[float]] = field(default_factory=dict)

    def fastest(self) -> str | None:
        """The vendor of the lowest median time (None: no vendor timed)."""
        timed = {name: statistics.median(ts) for name, ts in self.vendors.items() if ts}
        return min(timed, key=lambda name: timed[name]) if timed else None


def time_interleaved(ours: CallTimed, vendors: dict[str, CallTimed], repeats: int) -> CallTimings:
    """``repeats`` rounds, each timing one batch of every vendor, then one of polygemm's: a
    machine whose clocks or load drift over the run then slows all of them alike."""
    out = CallTimings(vendors={name: [] for name in vendors})
    for _ in range(repeats):
        for name, timed in vendors.items():
            out.vendors[name].append(timed.once())
        out.ours.append(ours.once())
    return out


def run_call_bench(
    device: str,
    dtype: str,
    shapes: Sequence[tuple[int, int, int]],
    *,
    variant: str = "auto",
    inputs: str = "device",
    repeats: int = 5,
    min_seconds: float = 0.05,
    sets: int = 2,
    progress: Callable[[str], None] | None = None,
    step: Callable[[], None] | None = None,
    batch: int = 0,
    array_lib: str = "auto",
    result: str = "out",
    sink: list[BenchRecord] | None = None,
    too_large: list[str] | None = None,
    setup: tuple[ArrayLib, list[Vendor]] | None = None,
) -> list[BenchRecord]:
    """Time ``polygemm.gemm(a, b, out=out, device=device, variant=variant)`` per call beside the
    vendor paths of :func:`call_setup`, interleaved repeat by repeat (:func:`time_interleaved`);
    the median after warm-up, on random normal data.

    ``inputs="device"``: device arrays of the user's library; ``"numpy"``: NumPy in and out
    (host copies included; ``copy_share`` is the part of the call not spent in the device-array
    call). ``progress`` gets one line per shape; ``step`` is called once per shape done, timed or
    not. ``batch`` > 0 times a strided batch of that many products per call (the vendors'
    batched GEMM, e.g. ``torch.matmul`` on 3-D tensors); ``array_lib`` picks cupy or torch for
    polygemm's arrays. ``result="new"`` (device inputs, or a host backend's NumPy arrays): no ``out``, each call
    makes its result, as ``c = polygemm.gemm(a, b)`` beside ``c = cupy.matmul(a, b)`` or ``c = a @ b`` (the
    allocation in both).
    ``sink``, when given, gets each record as soon as it is timed. A shape whose host arrays do
    not fit in memory is left out and said in ``too_large`` when given (else a MemoryError naming it).
    A shape may be a :class:`.bench_layout.Shape`: its operands, polygemm's and the vendors' alike,
    are then laid out as its layout says (B = W.T for ``nt``, a transposed view of a C-ordered
    array), which its record keeps in ``layout``; a plain triple is ``nn``. ``setup``: :func:`call_setup`'s answer for
    this backend, dtype and ``array_lib``, where the caller found it already (a bench of several runs finds it once).
    """
    be = registry.get_backend(device)
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    if inputs not in ("device", "numpy"):
        raise UnsupportedProblemError(f"--inputs must be device or numpy; got {inputs!r}")
    check_variant_names(be, device, dtype, [variant])
    lib, vendors = setup if setup is not None else call_setup(be, dtype, array_lib)
    host_only = lib.name == "numpy"
    if result not in ("out", "new"):
        raise UnsupportedProblemError(f"--result must be out or new; got {result!r}")
    new = result == "new"
    if new and not host_only and (inputs != "device" or any(v.matmul_new is None for v in vendors)):
        # a device backend's NumPy calls copy to the device and back into out= (the result's copy is the call's)
        why = ("--inputs numpy times NumPy arrays copied to the device and back" if inputs != "device"
               else f"{lib.name} arrays have no vendor call that makes a new result")
        raise UnsupportedProblemError(f"--result new times calls that make their result (on a GPU backend, on the device); "
                                      f"{why}, whose calls are timed writing into out= (--result out, the default): omit --result")
    on_host = inputs == "numpy" or host_only
    if batch and not host_only and lib.transpose is None and any("t" in layout_of(s) for s in shapes):
        # the backend's own arrays keep a transposed 2-D view column-major, but a batch of them is copied C-ordered:
        # its record would say the layout while the call read another
        raise UnsupportedProblemError(f"--batch with a transposed layout (:tn, :nt, :tt) needs arrays of a library that "
                                      f"holds a transposed batch as a view: pass --array-lib cupy or torch, or drop the layout "
                                      f"or --batch ({lib.name} arrays copy it)")
    lead = (batch,) if batch else ()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    np_dtype = as_dtype(dtype)
    normals = Normals(np.random.default_rng(), np_dtype)
    sync = be.synchronize
    records: list[BenchRecord] = []
    for shape in shapes:
        m, n, k = shape
        layout = layout_of(shape)
        said = shape_text(m, n, k, layout)
        flops = 2.0 * m * n * k * max(batch, 1)
        try:
            check_fits(m, n, k, lead, np_dtype.itemsize, sets)
            host = [(*operands(normals, lead, m, n, k, layout), np.empty(lead + (m, n), np_dtype)) for _ in range(sets)]
            by_lib: dict[str, list[tuple[Any, Any, Any]]] = {}
            if on_host:
                by_lib[lib.name] = host
            for x in [lib] + ([] if on_host else [v.lib for v in vendors]):
                if x.name not in by_lib:  # each library's own arrays, holding the same data in the same layout
                    by_lib[x.name] = [(in_layout(a, x.to_device, layout[0] == "t", x.transpose),
                                       in_layout(b, x.to_device, layout[1] == "t", x.transpose),
                                       x.empty(lead + (m, n), np_dtype)) for a, b, _ in host]
        except (MemoryError, ValueError, OverflowError):  # this shape left out (NumPy: past its sizes); the others timed, kept
            skip_too_large(too_large_text(m, n, k, lead, np_dtype.itemsize, sets, layout), too_large, progress, step)
            continue
        mine = by_lib[lib.name]
        ours: list[Callable[[], Any]]
        if new:
            ours = [(lambda a=a, b=b: gemm(a, b, device=device, variant=variant)) for a, b, _ in mine]
        else:
            ours = [(lambda a=a, b=b, o=o: gemm(a, b, out=o, device=device, variant=variant)) for a, b, o in mine]
        try:
            timed = CallTimed(ours, sync, min_seconds)
        except REFUSALS as exc:  # a product this backend refuses (its dtype, a layout, a size): the other shapes are timed
            if progress:
                progress(f"{said} {variant} not timed: {exc}")
            if step:
                step()
            continue
        ran = last_plan()
        chosen = ran.variant if ran is not None else variant
        vend: dict[str, CallTimed] = {}
        calls: dict[str, str] = {}
        for v in vendors:
            fns, calls[v.name] = _vendor_calls(v, host if on_host else by_lib[v.lib.name], new, on_host and not host_only)
            try:
                vend[v.name] = CallTimed(fns, sync, min_seconds)
            except MemoryError:
                raise
            except Exception as exc:  # e.g. muBLAS absent from an emulation build, a library refusing the problem
                if progress:
                    reason: object = exc if isinstance(exc, PolygemmError) else f"{type(exc).__name__}: {exc}"
                    progress(f"{said} vendor {calls[v.name]} not timed: {reason}")
        timings = time_interleaved(timed, vend, repeats)
        share = None
        if inputs == "numpy" and not host_only:
            dev = [(in_layout(a, lib.to_device, layout[0] == "t", lib.transpose), in_layout(b, lib.to_device, layout[1] == "t", lib.transpose),
                    lib.empty(lead + (m, n), np_dtype)) for a, b, _ in host]
            try:  # the same product on device arrays: the copies' share of the call
                dev_t = statistics.median(CallTimed([(lambda a=a, b=b, o=o: gemm(a, b, out=o, device=device, variant=variant))
                                                     for a, b, o in dev], sync, min_seconds).once() for _ in range(repeats))
                share = max(0.0, 1.0 - dev_t / statistics.median(timings.ours))
            except REFUSALS:  # the backend takes these device arrays in no layout of this shape's: no share
                pass
            del dev
        rec = _record(be, chosen, dtype, (m, n, k), flops, timings, vendors[0].name, calls, date, timed.calls)
        rec.inputs, rec.copy_share, rec.requested, rec.batch, rec.result = "numpy" if host_only else inputs, share, variant, batch, result
        rec.layout = layout
        records.append(rec)
        if sink is not None:
            sink.append(rec)
        if progress:
            progress(_line(rec, variant, timings))
        if step:
            step()
        del by_lib, mine, ours, vend
    return records


def _vendor_calls(v: Vendor, sets: list[tuple[Any, Any, Any]], new: bool, host_copies: bool) -> tuple[list[Callable[[], Any]], str]:
    """The calls of vendor ``v`` over the input sets, and how they are written."""
    if new:
        assert v.matmul_new is not None
        matmul_new = v.matmul_new
        return [(lambda a=a, b=b: matmul_new(a, b)) for a, b, _ in sets], v.new_call
    fn, text = (v.host_matmul, v.host_call) if host_copies else (v.matmul, v.call)
    return [(lambda a=a, b=b, o=o: fn(a, b, o)) for a, b, o in sets], text


def _record(be: Backend, chosen: str, dtype: str, shape: tuple[int, int, int], flops: float, timings: CallTimings,
            first_vendor: str, calls: dict[str, str], date: str, calls_per_repeat: int) -> BenchRecord:
    """The record of one shape: polygemm's median, each vendor's, the ratio to the fastest vendor and its range."""
    times = timings.ours
    t = statistics.median(times)
    anchor = timings.fastest()
    vtimes = timings.vendors[anchor] if anchor is not None else []
    vt = statistics.median(vtimes) if vtimes else float("nan")
    m, n, k = shape

    def us(name: str) -> float | None:
        ts = timings.vendors.get(name)
        return statistics.median(ts) * 1e6 if ts else None

    rec = BenchRecord(
        be.name, chosen, dtype, m, n, k, flops / t / 1e12, flops / max(times) / 1e12, flops / min(times) / 1e12,
        t * 1e3, anchor or first_vendor, flops / vt / 1e12, vt / t, be.device_name(), date, len(times), calls_per_repeat,
        "interleaved", "call", t * 1e6, vt * 1e6, vendor_call=calls.get(anchor or first_vendor, ""),
        torch_us_per_call=us("torch"), cupy_us_per_call=us("cupy"), vendor=anchor,
    )
    rec.ratio_min, rec.ratio_max, rec.ratio_spread = ratio_range(vtimes, times)
    return rec


def _line(rec: BenchRecord, variant: str, timings: CallTimings) -> str:
    """The progress line of one shape: polygemm's time, the ratio to the fastest vendor with its range, every vendor's time."""
    extra = f", copies {rec.copy_share:.0%} of the call" if rec.copy_share is not None else ""
    if rec.vendor is not None:
        others = [f"{name} {statistics.median(ts) * 1e6:.1f} us" for name, ts in timings.vendors.items() if ts and name != rec.vendor]
        beside = (f"{rec.ratio:.2f}x {rec.vendor_call}: {rec.vendor_us_per_call:.1f} us, {spread_text(rec)} over the repeats"
                  + (f"; {', '.join(others)}" if others else ""))
    else:
        beside = f"{rec.vendor_call} not timed"
    return (f"{f'{rec.batch}x' if rec.batch else ''}{shape_text(rec.m, rec.n, rec.k, rec.layout)} gemm({variant}) -> {rec.variant:28s} "
            f"{rec.us_per_call:10.1f} us/call  {rate_text(rec.tflops)}  ({beside}{extra})")
