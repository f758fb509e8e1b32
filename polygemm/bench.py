"""``polygemm bench``: time polygemm against the vendor library in the same process.

Two modes. ``--mode call`` (the default) times what a user gets: the public
``polygemm.gemm(a, b, out=out, ...)`` on device arrays (or, with ``--inputs numpy``, NumPy in
and out), wall clock per call over many calls back to back, beside the vendor library called
the way its users call it (``cupy.matmul``/``torch.matmul`` on the same arrays, ``numpy.matmul``
on the CPU). ``--mode kernel`` times each variant's raw launch with the backend's device events
beside the backend's vendor variant (cuBLAS for cuda, NumPy's BLAS for cpu).

Either way: warm-up first, two rotating input sets of random normal data (never zeros; laid
out from one pool of normals per run, see ``_Normals``), the median of several repeats of a
batch of calls (``--repeats auto``: more for small products, fewer for large ones), TFLOP/s =
2·M·N·K / t, and the vendor timed in turn with polygemm, repeat by repeat, each ratio using
those neighbouring timings. In kernel mode, ``--variants auto`` launches the rung ``auto``
chooses for each shape (recorded as ``variant``, with ``requested="auto"``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shlex
import statistics
import sys
import tempfile
import time
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Callable, Sequence

import numpy as np

from . import registry
from .backend import Backend
from .cli import did_you_mean, non_negative_int, parse_shape, positive_int, special_file, split_names
from .errors import ArgumentError, BackendUnavailableError, PolygemmError, UnsupportedProblemError

__all__ = ["PRESETS", "BenchRecord", "run_bench", "run_call_bench", "CallTimed", "add_parser", "to_markdown", "load_records",
           "default_shapes", "sweep_shapes", "auto_repeats", "SWEEP_MN", "SWEEP_K"]

#: the ``sweep`` preset's axes (issue 13): M and N values, and K values
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
    tile), and the GEMV pair 1×8192×8192 and 8192×1×8192 (issue 13's target shapes).
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
    mode: str = "kernel"  # "kernel": raw launches, device events; "call": polygemm.gemm, wall clock
    us_per_call: float = 0.0
    vendor_us_per_call: float = 0.0
    inputs: str = "device"  # call mode: "device" arrays or "numpy" in and out
    vendor_call: str = ""  # call mode: how the vendor was called, e.g. "cupy.matmul(a, b, out=out)"
    copy_share: float | None = None  # call mode, numpy inputs: share of the call spent outside the device call
    requested: str = ""  # call mode: the variant asked for ("auto", or a name); ``variant`` is the one that ran
    batch: int = 0  # call mode: matrices of a strided batch (0: one product); flops count them all
    result: str = "out"  # call mode: "out" (both write into a given out=) or "new" (each call makes its result)


def load_records(path: str) -> list[BenchRecord]:
    """The records of a ``--json`` file (``{"command": ..., "records": [...]}``) as BenchRecord
    objects; keys this version does not know are ignored, missing ones take their defaults."""
    with open(path) as fh:
        data = json.load(fh)
    if isinstance(data, dict) and "records" not in data:
        raise ValueError("no 'records' list in it (polygemm bench --json writes {\"command\": ..., \"records\": [...]})")
    rows = data["records"] if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError("its records are not a list of objects (polygemm bench --json writes one object per timing)")
    known = {f.name for f in fields(BenchRecord)}
    required = [f.name for f in fields(BenchRecord) if f.default is MISSING and f.default_factory is MISSING]
    floats = {f.name for f in fields(BenchRecord) if f.type in ("float", float)}
    out = []
    for i, row in enumerate(rows, 1):
        lacks = [name for name in required if name not in row]
        if lacks:
            raise ValueError(f"record {i} lacks {', '.join(map(repr, lacks))} (polygemm bench --json writes these fields "
                             "in every record; this file comes from another tool?)")
        # a field of another type ("m": "8", "tflops": "fast", "variant": ["a"]) had been taken as it was and
        # failed later, inside plot's sums and sorts, as a traceback: say which record and field instead
        for f in fields(BenchRecord):
            if f.name in row and not _field_fits(f.type, row[f.name]):
                raise ValueError(f"record {i} has {f.name}={row[f.name]!r} ({type(row[f.name]).__name__}); polygemm bench "
                                 f"--json writes {_FIELD_KINDS.get(str(f.type), str(f.type))} there")
            # a count out of range (m=-5, or a dimension past any float: 10**400) had been drawn as an "empty product"
            # or ended plot in an OverflowError traceback: bench writes sizes and counts of 0 or more, below 2**63
            if str(f.type) == "int" and f.name in row and not 0 <= row[f.name] < 2**63:
                said = repr(row[f.name]) if len(repr(row[f.name])) <= 24 else f"{str(row[f.name])[:12]}... ({len(str(row[f.name]))} digits)"
                raise ValueError(f"record {i} has {f.name}={said}; polygemm bench --json writes a whole number "
                                 "from 0 to 2**63 - 1 there")
        # a figure nobody measured (no vendor timing) is written as null: it reads back as nan
        out.append(BenchRecord(**{k: (float("nan") if v is None and k in floats else v) for k, v in row.items() if k in known}))
    return out


#: how a record field's type is said in load_records' error
_FIELD_KINDS = {"int": "a whole number", "float": "a number (or null: not measured)", "str": "a string",
                "float | None": "a number or null"}


def _field_fits(kind: Any, value: Any) -> bool:
    """Whether ``value`` read from JSON is what a BenchRecord field of type ``kind`` (its annotation,
    a string) holds: bools are no numbers, whole-number floats no counts; null only for figures."""
    kind = str(kind)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "float | None"):
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if kind == "str":
        return isinstance(value, str)
    return True


def _json_safe(value: Any) -> Any:
    """A record's field for strict JSON: a figure that is not finite (nan: not measured) is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _read_umask() -> int:
    """The process's umask (read once, at import: reading it means setting it, which would race
    with other threads creating files if done per write)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_file(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` whole or not at all: ``write(fh)`` fills a temporary file beside it, which
    then replaces ``path`` (a failure or Ctrl-C while writing leaves the previous file as it
    was and no temporary behind). A target that exists and is no regular file (``/dev/null``, ``/dev/stdout``'s pipe,
    a FIFO) is written into: replacing it had turned ``/dev/null`` into a regular file for the whole machine, and
    ``/dev/stdout`` into a traceback at the end of the run. An OSError is an ArgumentError naming ``path``."""
    if special_file(path):
        try:
            with open(path, "wb" if binary else "w") as fh:
                write(fh)
        except OSError as exc:
            raise ArgumentError(f"could not write {path}: {exc.strerror or exc}") from None
        return
    shown = path
    path = os.path.realpath(path)  # through a symlink to the file it names (the link stays a link)
    folder = os.path.dirname(path)
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o666 & ~_UMASK
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=folder)
    except OSError as exc:  # a folder gone since the check before the run (or a link to none): said, not a traceback
        raise ArgumentError(f"could not write {shown}: {exc.strerror or exc} ({folder})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def default_shapes(be: Backend) -> list[str]:
    """``--shapes`` when none are given: the ``cpu`` preset where the work runs on the host
    (the cpu backend, or an emulation built for the host), ``square`` on a GPU."""
    host_only = tuple(getattr(be, "residencies", ("host",))) == ("host",)
    try:
        emulated = callable(getattr(be, "flavor", None)) and be.flavor() == "host"  # type: ignore[attr-defined]
    except Exception:
        emulated = False
    return ["cpu"] if host_only or emulated else ["square"]


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
    return list(dict.fromkeys(shapes))  # presets may overlap: each shape once


class _Normals:
    """Random normal operands without drawing every element anew: one pool of normals per run,
    laid out cyclically from a random start for each operand. The pool's length is a prime, so
    the rows of an operand start at different places in it (no two rows repeat each other)
    and two operands differ; values are never all zeros. Drawing 8192×16384 normals takes
    seconds of host time, a pooled copy a fraction of that, which is what lets the sweep's
    large shapes fit its budget."""

    LENGTH = 4_194_301  # a prime below 2**22: 16 MiB of float32

    def __init__(self, rng: np.random.Generator, dtype: Any) -> None:
        self.rng = rng
        self.pool = rng.standard_normal(self.LENGTH, dtype=np.float32).astype(dtype)

    def __call__(self, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64))
        start = int(self.rng.integers(self.LENGTH))
        out = np.empty(size, self.pool.dtype)
        head = min(size, self.LENGTH - start)
        out[:head] = self.pool[start:start + head]
        out[head:min(size, self.LENGTH)] = self.pool[:min(size, self.LENGTH) - head]
        done = min(size, self.LENGTH)
        while done < size:  # doubling copies of what is already laid out: one pass over ``out``
            step = min(done, size - done)
            out[done:done + step] = out[:step]
            done += step
        return out.reshape(shape)


class _Runner:
    """Queues one product on prepared operands; device backends avoid the API overhead.
    ``variant="auto"`` runs the rung auto chooses for the problem; ``ran`` names it."""

    def __init__(self, be: Backend, variant: str, a: Any, b: Any, c: Any) -> None:
        self._close: Callable[[], None] = lambda: None
        launch = be.launcher(variant, a, b, c, 1.0, 0.0)
        if launch is not None:
            ran = launch.variant
            if ran != variant and variant != "auto":  # e.g. a TMA rung handing an unaligned problem to another rung
                launch.close()
                raise UnsupportedProblemError(f"{variant} does not run this problem itself ({ran} would)")
            self.ran: str = ran
            self.call: Callable[[], None] = launch
            self._close = launch.close
        else:
            from .api import explain, gemm

            self.ran = explain(a, b, device=be.name, variant=variant, out=c).variant

            def call() -> None:
                gemm(a, b, device=be.name, variant=variant, out=c)

            self.call = call

    def close(self) -> None:
        self._close()


class _Timed:
    """One variant ready to time: warmed up, with a batch of calls sized to ``min_seconds``."""

    def __init__(self, be: Backend, variant: str, sets: list[tuple[Any, Any, Any]], min_seconds: float) -> None:
        self.timer = be.timer()
        self.be = be
        self.runners = [_Runner(be, variant, *s) for s in sets]
        try:
            with be.active():
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

        with self.be.active():
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


def _too_large(m: int, n: int, k: int, lead: tuple[int, ...], itemsize: int, sets: int) -> str:
    """What a shape whose host operands could not be allocated says (as ``polygemm gemm`` says it)."""
    count = int(np.prod(lead)) if lead else 1
    need = sets * count * (m * k + k * n + m * n) * itemsize
    return (f"{'x'.join(map(str, lead + (m, n, k)))}: operands and a result of that size need about {need / 2**30:.1f} GiB "
            f"of host memory, more than this machine can give")


def _skip_too_large(why: str, too_large: list[str] | None, progress: Callable[[str], None] | None,
                    step: Callable[[], None] | None) -> None:
    """A shape whose host arrays do not fit: left out, said, and kept in ``too_large`` (the command's
    error at the end); without that list (a library caller) a MemoryError naming the shape."""
    if too_large is None:
        raise MemoryError(why)
    too_large.append(why)
    if progress:
        progress(f"{why.split(':', 1)[0]} not timed: {why.split(': ', 1)[1]}")
    if step:
        step()


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
    MemoryError naming it).
    """
    be = registry.get_backend(device)
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    table = [v for v in be.variants() if dtype in v.dtypes]
    vendor = next((v.name for v in table if v.vendor), None)
    names = [v.name for v in table if not v.vendor] if variants == "all" else list(variants)
    _check_variant_names(be, device, dtype, names, modified=True)  # a backend may take modified names (cuda: "rung:split_k=8")
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rng = np.random.default_rng()
    records: list[BenchRecord] = []
    np_dtype = np.dtype(dtype)
    normals = _Normals(rng, np_dtype)
    for (m, n, k) in shapes:
        flops = 2.0 * m * n * k
        try:
            host = [(normals((m, k)), normals((k, n))) for _ in range(sets)]
            dev = [(be.to_device(a), be.to_device(b), be.to_device(np.zeros((m, n), np_dtype))) for a, b in host]
        except MemoryError:  # had ended the run in a traceback, the shapes timed before it lost
            _skip_too_large(_too_large(m, n, k, (), np_dtype.itemsize, sets), too_large, progress, None)
            if step is not None:  # one tick per (shape, variant), timed or not
                for _ in names:
                    step()
            continue
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
                requested="auto" if name == "auto" else "",
            )
            records.append(rec)
            if sink is not None:
                sink.append(rec)
            if progress:
                label = f"auto -> {ran}" if name == "auto" else name
                beside = f"{rec.ratio:.2f}x {vendor}" if vendor and rec.ratio == rec.ratio else \
                    ("no vendor variant to compare" if not vendor else f"{vendor} not timed")
                progress(f"{m}x{n}x{k} {label:28s} {_rate(rec.tflops)}  ({beside})")
            if step:
                step()
        if vend is not None:
            vend.close()
        del dev
    return records


# -- call mode: the public polygemm.gemm beside the vendor as its users call it -------------

@dataclass
class _ArrayLib:
    """How a user holds arrays on this backend's device, and how they call the vendor there."""

    name: str
    to_device: Callable[[np.ndarray], Any]
    empty: Callable[[tuple[int, int], Any], Any]
    vendor: Callable[[Any, Any, Any], Any]  # vendor(a, b, out) on these arrays
    vendor_call: str
    host_vendor: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]  # numpy in, numpy out
    host_vendor_call: str
    vendor_new: Callable[[Any, Any], Any] | None = None  # vendor(a, b): a new result per call (--result new)
    vendor_new_call: str = ""


def _array_lib(be: Backend, dtype: str, prefer: str = "auto") -> _ArrayLib:
    """CuPy, else torch (or the one ``prefer`` names), else the backend's own device arrays
    (vendor through its vendor variant)."""
    def np_vendor(a: Any, b: Any, out: Any) -> Any:
        if a.dtype.name in ("float16", "bfloat16"):  # NumPy's BLAS has no 16-bit floats: float32 in, as polygemm promises
            return np.copyto(out, np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype))
        return np.matmul(a, b, out=out)

    if "host" in be.residencies and len(be.residencies) == 1:
        if prefer not in ("auto", "numpy"):  # it had been ignored: the run timed NumPy arrays all the same
            raise UnsupportedProblemError(f"--array-lib {prefer}: backend {be.name!r} takes host (NumPy) arrays, so its call is "
                                          "timed on NumPy arrays; omit --array-lib")
        return _ArrayLib("numpy", lambda x: x, lambda shape, dt: np.empty(shape, dt), np_vendor,
                         "numpy.matmul(a, b, out=out)", np_vendor, "numpy.matmul(a, b, out=out)")
    if dtype == "bfloat16" and prefer == "cupy":
        raise UnsupportedProblemError("--array-lib cupy: CuPy has no bfloat16; use torch")
    if be.name == "cuda" and prefer in ("auto", "cupy") and dtype != "bfloat16":
        try:
            import cupy as cp

            return _ArrayLib("cupy", cp.asarray, lambda shape, dt: cp.empty(shape, dt), lambda a, b, out: cp.matmul(a, b, out=out),
                             "cupy.matmul(a, b, out=out)",
                             lambda a, b, out: cp.matmul(cp.asarray(a), cp.asarray(b)).get(out=out),
                             "cupy.matmul(cupy.asarray(a), cupy.asarray(b)).get(out=out)", cp.matmul, "cupy.matmul(a, b)")
        except ImportError:
            if prefer == "cupy":
                raise UnsupportedProblemError("--array-lib cupy: cupy is not importable") from None
    if be.name == "cuda" and prefer in ("auto", "torch"):
        try:
            import torch

            tdt = getattr(torch, dtype)
            bf16 = dtype == "bfloat16"  # NumPy (ml_dtypes) and torch share bfloat16's bits, not a DLPack dtype

            def to_torch(x: np.ndarray) -> Any:
                return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if bf16 else torch.from_numpy(x)

            def to_numpy(t: Any) -> np.ndarray:
                return t.cpu().view(torch.int16).numpy().view(np_dtype) if bf16 else t.cpu().numpy()

            np_dtype = np.dtype(dtype)
            return _ArrayLib("torch", lambda x: to_torch(x).cuda(), lambda shape, dt: torch.empty(shape, dtype=tdt, device="cuda"),
                             lambda a, b, out: torch.matmul(a, b, out=out), "torch.matmul(a, b, out=out)",
                             lambda a, b, out: np.copyto(out, to_numpy(torch.matmul(to_torch(a).cuda(), to_torch(b).cuda()))),
                             "torch.matmul(a.cuda(), b.cuda()).cpu()", torch.matmul, "torch.matmul(a, b)")
        except ImportError:
            if prefer == "torch":  # as --array-lib cupy without CuPy: not a silent run on other arrays
                raise UnsupportedProblemError("--array-lib torch: torch is not importable") from None
    from .api import gemm

    vendor = next((v.name for v in be.variants() if v.vendor and dtype in v.dtypes), None)
    if vendor is None:
        raise UnsupportedProblemError(f"backend {be.name!r} has no vendor variant for {dtype} to compare the call with")
    through = lambda a, b, out: gemm(a, b, device=be.name, variant=vendor, out=out)  # noqa: E731
    return _ArrayLib(be.name, be.to_device, lambda shape, dt: be.to_device(np.empty(shape, dt)), through,
                     f"polygemm.gemm(a, b, out=out, variant={vendor!r})", through, f"polygemm.gemm(a, b, out=out, variant={vendor!r})",
                     lambda a, b: gemm(a, b, device=be.name, variant=vendor), f"polygemm.gemm(a, b, variant={vendor!r})")


class CallTimed:
    """Calls rotating over input sets, timed by the wall clock: ``batch`` calls back to back
    between two device synchronizations, divided by ``batch`` (call mode's method; the
    benchmark scripts under docs/benchmarks and tools time the call with it too). The
    constructor warms the calls up and sizes the batch to ``min_seconds``; :meth:`once` times
    one batch, in seconds per call."""

    def __init__(self, fns: list[Callable[[], Any]], sync: Callable[[], None], min_seconds: float, max_calls: int = 5000) -> None:
        self.fns, self.sync = fns, sync
        for f in fns:  # warm-up: compilation, plan cache, handles, memory pools
            f()
        sync()
        probe = max(len(fns), 4)
        one = self._batch(probe)
        calls = max(len(fns), min(max_calls, int(min_seconds / max(one, 1e-7)) + 1))
        self.calls = calls + (-calls) % len(fns)

    def _batch(self, calls: int) -> float:
        fns, n = self.fns, len(self.fns)
        self.sync()
        t0 = time.perf_counter()
        for i in range(calls):
            fns[i % n]()
        self.sync()
        return (time.perf_counter() - t0) / calls

    def once(self) -> float:
        return self._batch(self.calls)


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
) -> list[BenchRecord]:
    """Time ``polygemm.gemm(a, b, out=out, device=device, variant=variant)`` per call beside the
    vendor called as its users call it, interleaved repeat by repeat (see the module docstring).

    ``inputs="device"``: device arrays of the user's library (CuPy, else torch, else the
    backend's own); ``"numpy"``: NumPy in and out (host copies included; ``copy_share`` is
    the part of the call not spent in the device-array call). ``progress`` gets one line per
    shape; ``step`` is called once per shape done, timed or not. ``batch`` > 0 times a strided
    batch of that many products per call (the vendor's batched GEMM, e.g. ``torch.matmul`` on
    3-D tensors, i.e. ``cublasGemmStridedBatchedEx``); ``array_lib`` picks cupy or torch.
    ``result="new"`` (device inputs): no ``out``, each call makes its result, as
    ``c = polygemm.gemm(a, b)`` beside ``c = cupy.matmul(a, b)`` (the allocation in both).
    ``sink``, when given, gets each record as soon as it is timed. A shape whose host arrays do
    not fit in memory is left out and said in ``too_large`` when given (else a MemoryError naming it).
    """
    from .api import gemm, last_plan

    be = registry.get_backend(device)
    av = be.probe()
    if not av.ok:
        raise BackendUnavailableError(f"device {device!r} is unavailable: {av.reason}")
    if inputs not in ("device", "numpy"):
        raise UnsupportedProblemError(f"--inputs must be device or numpy; got {inputs!r}")
    _check_variant_names(be, device, dtype, [variant], modified=False)
    lib = _array_lib(be, dtype, array_lib)
    host_only = lib.name == "numpy"
    if result not in ("out", "new"):
        raise UnsupportedProblemError(f"--result must be out or new; got {result!r}")
    new = result == "new"
    if new and (inputs != "device" or host_only or lib.vendor_new is None):
        # it had ended "NumPy inputs always make a new result: use --inputs numpy", said to --inputs numpy too, while
        # NumPy calls are timed writing into out= (gemm(a, b, out=o) beside numpy.matmul(a, b, out=out))
        why = (f"backend {be.name!r} takes NumPy arrays" if host_only else "--inputs numpy times NumPy arrays"
               if inputs != "device" else f"{lib.name} arrays have no vendor call that makes a new result")
        raise UnsupportedProblemError(f"--result new times device arrays of a GPU backend (each call's result made on the device); "
                                      f"{why}, whose calls are timed writing into out= (--result out, the default): omit --result")
    lead = (batch,) if batch else ()
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rng = np.random.default_rng()
    np_dtype = np.dtype(dtype)
    normals = _Normals(rng, np_dtype)
    sync = be.synchronize
    records: list[BenchRecord] = []
    for (m, n, k) in shapes:
        flops = 2.0 * m * n * k * max(batch, 1)
        try:
            host = [(normals(lead + (m, k)), normals(lead + (k, n)), np.empty(lead + (m, n), np_dtype)) for _ in range(sets)]
            if inputs == "numpy" or host_only:
                sets_ = host
                vendor_fn, vendor_call = (lib.host_vendor, lib.host_vendor_call) if not host_only else (lib.vendor, lib.vendor_call)
            else:
                sets_ = [(lib.to_device(a), lib.to_device(b), lib.empty(lead + (m, n), np_dtype)) for a, b, _ in host]
                vendor_fn, vendor_call = lib.vendor, lib.vendor_call
        except MemoryError:  # had ended the run in a traceback, the shapes timed before it lost
            _skip_too_large(_too_large(m, n, k, lead, np_dtype.itemsize, sets), too_large, progress, step)
            continue
        if new:
            assert lib.vendor_new is not None
            vendor_new, vendor_call = lib.vendor_new, lib.vendor_new_call
            ours = [(lambda a=a, b=b: gemm(a, b, device=device, variant=variant)) for a, b, _ in sets_]
            theirs = [(lambda a=a, b=b: vendor_new(a, b)) for a, b, _ in sets_]
        else:
            ours = [(lambda a=a, b=b, o=o: gemm(a, b, out=o, device=device, variant=variant)) for a, b, o in sets_]
            theirs = [(lambda a=a, b=b, o=o: vendor_fn(a, b, o)) for a, b, o in sets_]
        try:
            timed = CallTimed(ours, sync, min_seconds)
        except UnsupportedProblemError as exc:
            if progress:
                progress(f"{m}x{n}x{k} {variant} not timed: {exc}")
            if step:
                step()
            continue
        ran = last_plan()
        chosen = ran.variant if ran is not None else variant
        vend: CallTimed | None = None
        try:
            vend = CallTimed(theirs, sync, min_seconds)
        except PolygemmError as exc:  # e.g. muBLAS absent from an emulation build: timed alone, as kernel mode does
            if progress:
                progress(f"{m}x{n}x{k} vendor {vendor_call} not timed: {exc}")
        times, vtimes = [], []
        for _ in range(repeats):
            if vend is not None:
                vtimes.append(vend.once())
            times.append(timed.once())
        share = None
        if inputs == "numpy" and not host_only:
            dev = [(lib.to_device(a), lib.to_device(b), lib.empty(lead + (m, n), np_dtype)) for a, b, _ in host]
            dev_t = statistics.median(CallTimed([(lambda a=a, b=b, o=o: gemm(a, b, out=o, device=device, variant=variant)) for a, b, o in dev],
                                                 sync, min_seconds).once() for _ in range(repeats))
            share = max(0.0, 1.0 - dev_t / statistics.median(times))
            del dev
        t, vt = statistics.median(times), statistics.median(vtimes) if vtimes else float("nan")
        rec = BenchRecord(
            be.name, chosen, dtype, m, n, k, flops / t / 1e12, flops / max(times) / 1e12, flops / min(times) / 1e12,
            t * 1e3, lib.name, flops / vt / 1e12, vt / t, be.device_name(), date, repeats, timed.calls,
            "interleaved", "call", t * 1e6, vt * 1e6, "numpy" if host_only else inputs, vendor_call, share, variant, batch, result,
        )
        records.append(rec)
        if sink is not None:
            sink.append(rec)
        if progress:
            extra = f", copies {share:.0%} of the call" if share is not None else ""
            beside = f"{rec.ratio:.2f}x {vendor_call}: {rec.vendor_us_per_call:.1f} us" if vtimes else f"{vendor_call} not timed"
            progress(f"{f'{batch}x' if batch else ''}{m}x{n}x{k} gemm({variant}) -> {chosen:28s} {rec.us_per_call:10.1f} us/call  {_rate(rec.tflops)}  "
                     f"({beside}{extra})")
        if step:
            step()
        del sets_, ours, theirs
    return records


def _rate(tflops: float) -> str:
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
    """One table per dtype and inputs: per-call wall time and throughput beside the vendor."""
    lines: list[str] = []
    for dtype in sorted({r.dtype for r in records}):
        for inputs, result in (("device", "out"), ("device", "new"), ("numpy", "out")):
            rs = [r for r in records if r.dtype == dtype and r.inputs == inputs and (r.result or "out") == result]
            if not rs:
                continue
            ours = "polygemm.gemm(a, b)" if result == "new" else ("polygemm.gemm(a, b, out=out)" if inputs == "device" else "polygemm.gemm")
            lines.append(f"### {rs[0].backend} {dtype}, {inputs} arrays: `{ours}` per call beside `{rs[0].vendor_call}`\n")
            share = any(r.copy_share is not None for r in rs)
            chose = "variant auto chose" if all((r.requested or "auto") == "auto" for r in rs) else "variant that ran"
            lines.append(f"| shape | {chose} | µs/call | vendor µs/call | FLOP/s | vendor FLOP/s | ratio |" + (" copy share |" if share else ""))
            lines.append("|---|---|---|---|---|---|---|" + ("---|" if share else ""))
            for r in rs:
                timed = r.vendor_us_per_call == r.vendor_us_per_call  # a vendor not timed (NaN) is "–", as in kernel mode's tables
                cells = [f"{f'{r.batch} × ' if r.batch else ''}{r.m}×{r.n}×{r.k}", f"`{r.variant}`", f"{r.us_per_call:.1f}",
                         f"{r.vendor_us_per_call:.1f}" if timed else "–", _rate(r.tflops).strip(),
                         _rate(r.vendor_tflops).strip() if timed else "–", f"**{r.ratio:.2f}×**" if timed else "–"]
                if share:
                    cells.append(f"{r.copy_share:.0%}" if r.copy_share is not None else "–")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def to_markdown(records: list[BenchRecord], command: str) -> str:
    """A table per dtype: variants down, shapes across, 'TFLOP/s (ratio to vendor)'."""
    lines = [f"Command: `{command}`", ""]
    if not records:
        return "\n".join(lines + ["(no records)"])
    r0 = records[0]
    if r0.mode == "call":
        sync = "" if r0.vendor_variant == "numpy" else " between device synchronizations"  # numpy: a host backend
        lines.insert(0, f"Device: {r0.device}; date {r0.date}; wall clock per call over {r0.calls_per_repeat}+ calls back to back"
                        f"{sync}, median of {r0.repeats} repeats, vendor timed beside polygemm repeat by repeat.\n")
        return "\n".join(lines + [call_markdown(records)])
    how = ("vendor timed beside each variant, repeat by repeat" if r0.method == "interleaved"
           else f"each kernel {r0.method} alone before its repeats")
    lines.insert(0, f"Device: {r0.device}; date {r0.date}; median of {r0.repeats} repeats; two rotating input sets; {how}.\n")
    for dtype in sorted({r.dtype for r in records}):
        rs = [r for r in records if r.dtype == dtype]
        shapes = list(dict.fromkeys((r.m, r.n, r.k) for r in rs))
        variants = list(dict.fromkeys(r.variant for r in rs))
        vendor = rs[0].vendor_variant or "vendor"
        timed = any(r.vendor_tflops == r.vendor_tflops for r in rs)  # a backend without a vendor variant has none
        unit = _unit([r.tflops for r in rs] + [r.vendor_tflops for r in rs])
        beside = f"ratio to {vendor} in the same run" if timed else "no vendor variant to compare"
        lines.append(f"### {rs[0].backend} {dtype}: {unit[0]} ({beside})\n")
        lines.append("| variant | " + " | ".join(f"{m}×{n}×{k}" for m, n, k in shapes) + " |")
        lines.append("|---|" + "---|" * len(shapes))
        timed_at = {(r.m, r.n, r.k): [x.vendor_tflops for x in rs if (x.m, x.n, x.k) == (r.m, r.n, r.k) and x.vendor_tflops == x.vendor_tflops]
                    for r in rs}  # records without a vendor timing (nan) say nothing of its pace
        vend = {s: statistics.median(v) if v else float("nan") for s, v in timed_at.items()}
        if timed:
            lines.append(f"| **{vendor}** (median of its timings beside each rung) | " + " | ".join(_num(vend[s], unit) for s in shapes) + " |")
        by = {(r.variant, r.m, r.n, r.k): r for r in rs}
        for v in variants:
            cells = []
            for s in shapes:
                r = by.get((v, *s))
                cells.append("–" if r is None else (f"{_num(r.tflops, unit)} ({r.ratio:.2f}×)" if r.ratio == r.ratio else _num(r.tflops, unit)))
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


class _Progress:
    """A progress bar on a terminal (tqdm, else rich), the result lines printed above it; plain
    lines where there is no terminal, with ``--no-progress``, or with neither installed."""

    def __init__(self, total: int, desc: str, bar: bool) -> None:
        self._tqdm: Any = None
        self._rich: Any = None
        self._task: Any = None
        if not bar or total <= 0:
            return
        try:
            from tqdm import tqdm

            try:  # a terminal that reports no width (some ptys) gets a fixed one
                width = os.get_terminal_size(sys.stdout.fileno()).columns
            except (OSError, ValueError):
                width = 0
            size: dict[str, Any] = {"dynamic_ncols": True} if width > 0 else {"ncols": 100}
            self._tqdm = tqdm(total=total, desc=desc, unit="run", file=sys.stdout, leave=False, **size)
            return
        except ImportError:
            pass
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self._rich = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TimeRemainingColumn(), console=Console(file=sys.stdout), transient=True)
            self._rich.start()
            self._task = self._rich.add_task(desc, total=total)
        except ImportError:
            self._rich = None

    @property
    def active(self) -> bool:
        return self._tqdm is not None or self._rich is not None

    def line(self, text: str) -> None:
        if self._tqdm is not None:
            self._tqdm.write(text, file=sys.stdout)
        elif self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def step(self) -> None:
        if self._tqdm is not None:
            self._tqdm.update(1)
        elif self._rich is not None:
            self._rich.advance(self._task)

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._rich is not None:
            self._rich.stop()
        self._tqdm = self._rich = None

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _intro(be: Backend, device: str, dtype: str, mode: str, inputs: str, shapes: Sequence[tuple[int, int, int]], preset: str) -> str:
    """The first line of a run: what is timed and, per backend, what the untimed warm-up covers."""
    host_only = tuple(getattr(be, "residencies", ("host",))) == ("host",)
    what = ("polygemm.gemm per call, wall clock, beside the vendor as its users call it" if mode == "call"
            else "each variant's raw launch beside the backend's vendor variant")
    if host_only:
        warm = "warm-up calls first, not timed"
    elif mode == "call" and inputs == "numpy":
        warm = "warm-up calls (compilation, module load) first, not timed; every timed call copies host<->device"
    else:
        warm = "warm-up calls (compilation, module load) first, not timed; the data stays on the device"
    return f"polygemm bench: {device} {dtype}, {mode} mode, {len(shapes)} shapes{preset}: {what}; {warm}"


def _bench_device(device: str | None) -> str:
    """``--device`` as every command reads it: a name, or auto ($POLYGEMM_DEVICE, else the
    available backend of highest priority). Returns the backend's own name (a plugin's entry
    point as spelt, ``cuda:1`` with its index); raises BackendUnavailableError, before anything
    is timed, for a name that is unknown, unavailable here or an index the backend refuses,
    saying so when the name came from $POLYGEMM_DEVICE."""
    name = registry.resolve_device(device)
    if name == "auto":
        for info in registry.backends():
            if info.available:
                return info.name
        raise BackendUnavailableError("no backend is available to benchmark")
    info, index, env = registry.locate_device(device)
    found = info.name
    if not info.available:
        raise BackendUnavailableError(f"device {found!r} is unavailable: {info.reason}{env}", details=info.detail)
    if index is None:
        return found
    try:
        registry.get_backend(f"{found}:{index}")
    except BackendUnavailableError as exc:
        raise BackendUnavailableError(f"{exc}{env}", details=exc.details) from None
    return f"{found}:{index}"


def _check_variant_names(be: Backend, device: str, dtype: str, names: Sequence[str], modified: bool) -> None:
    """UnsupportedProblemError for the first of ``names`` that is not a ``dtype`` variant of
    ``be`` (nor ``auto``); ``modified``: names the backend modifies (cuda's
    ``rung:split_k=8``, taken by kernel mode) count as their variant."""
    known = {v.name for v in be.variants() if dtype in v.dtypes}
    for name in names:
        if name == "auto" or name in known:
            continue
        ok = False
        if modified:
            try:
                ok = be.get_variant(name).name in known
            except PolygemmError:
                pass
        if not ok:
            raise UnsupportedProblemError(f"--variants: {name!r} is not a {dtype} variant of {device}; known: auto, {', '.join(sorted(known))}")


def cmd_bench(args: argparse.Namespace) -> int:
    def shapes_of(items: Sequence[str]) -> list[tuple[int, int, int]]:
        try:
            return parse_shapes(items)
        except argparse.ArgumentTypeError as exc:
            words = [p.strip() for item in items for p in item.split(",") if p.strip() and "x" not in p.lower()]
            raise ArgumentError(f"--shapes: {exc}{did_you_mean(words, PRESETS)}; presets: {', '.join(PRESETS)}") from None

    shapes = shapes_of(args.shapes) if args.shapes else []
    # the parser's types check these (a usage error, exit 2); a Namespace made by hand is checked here
    if not 0 <= args.settle < float("inf"):  # nan and inf too (inf had settled for ever)
        raise ArgumentError(f"--settle must be >= 0 seconds and finite; got {args.settle}")
    if args.repeats != "auto" and args.repeats < 1:
        raise ArgumentError(f"--repeats must be at least 1 or auto; got {args.repeats}")
    # an option of the other mode had been ignored without a word: "--mode kernel --batch 64" timed single products and
    # "--settle 1" in call mode interleaved as ever, records that look like what was asked for and are not
    if args.mode == "kernel":
        given = [f"--{opt} {value}" for opt, value, default in
                 (("batch", args.batch, 0), ("inputs", args.inputs, "device"), ("result", args.result, "out"),
                  ("array-lib", args.array_lib, "auto")) if value != default]
        if given:
            raise ArgumentError(f"{', '.join(given)}: {'call-mode options' if len(given) > 1 else 'a call-mode option'}, which kernel mode "
                                "(each variant's raw launch) does not use; pass --mode call, or omit "
                                f"{'them' if len(given) > 1 else 'it'}")
    elif args.settle > 0:
        raise ArgumentError(f"--settle {args.settle:g}: a kernel-mode option, which call mode (polygemm.gemm per call) does "
                            "not use; pass --mode kernel, or omit it")
    if args.plot:  # before any timing: a missing dependency must not cost the run
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ArgumentError(f"--plot needs matplotlib ({exc}); install it with pip install 'polygemm[plot]'") from None
    device = _bench_device(args.device)
    be = registry.get_backend(device)
    preset = ""
    if not args.shapes:  # per device: seconds on a CPU, the large cubes on a GPU
        chosen = default_shapes(be)
        shapes, preset = shapes_of(chosen), f" (preset {', '.join(chosen)})"
    if args.max_dim is not None:
        kept = [s for s in shapes if max(s) <= args.max_dim]
        if len(kept) < len(shapes):
            preset += f" ({len(shapes) - len(kept)} more above --max-dim {args.max_dim} left out)"
        shapes = kept
        if not shapes:
            raise ArgumentError(f"--max-dim {args.max_dim} leaves out every shape; nothing to time")
    empty = [s for s in shapes if min(s) == 0]
    if empty:  # no arithmetic to time: 0 FLOP/s, a ratio of two overheads, and no place on a size axis
        raise ArgumentError(f"--shapes {'x'.join(map(str, empty[0]))}: a product with a zero dimension does no arithmetic; "
                            "nothing to time (every dimension must be >= 1)")
    # --repeats auto: a count per shape (auto_repeats); runs of shapes sharing one are timed together
    itemsize = 2 if "16" in args.dtype else (8 if "64" in args.dtype else 4)
    chunks: list[tuple[int, list[tuple[int, int, int]]]] = []
    for shape in shapes:
        reps = auto_repeats(*shape, itemsize=itemsize) if args.repeats == "auto" else args.repeats
        if chunks and chunks[-1][0] == reps:
            chunks[-1][1].append(shape)
        else:
            chunks.append((reps, [shape]))
    command = "polygemm " + shlex.join(args.argv)
    bar = not args.no_progress and sys.stdout.isatty()
    # "--variants ," had timed nothing and exited 0 (an empty --json): split_names refuses it
    given = split_names("--variants", args.variants, "variant", "polygemm variants lists them", "all") or []
    names = given or ["auto"]
    if args.mode == "call" and names == ["all"]:  # every variant of the dtype, each through the public call
        names = [v.name for v in be.variants() if args.dtype in v.dtypes and not v.vendor]
    if names != ["all"]:  # every name checked before anything is timed (a typo in the last had cost the run)
        _check_variant_names(be, device, args.dtype, names, modified=args.mode == "kernel")
    print(_intro(be, device, args.dtype, args.mode, args.inputs, shapes, preset), flush=True)
    records: list[BenchRecord] = []  # every record as soon as it is timed: what Ctrl-C keeps
    too_large: list[str] = []  # shapes whose host arrays did not fit: left out, the others timed, exit 2
    try:
        if args.mode == "call":
            with _Progress(len(names) * len(shapes), f"bench {device}", bar) as prog:
                for name in names:
                    for reps, part in chunks:
                        run_call_bench(device, args.dtype, part, variant=name, inputs=args.inputs, repeats=reps,
                                       progress=prog.line, step=prog.step, batch=args.batch, array_lib=args.array_lib,
                                       result=args.result, sink=records, too_large=too_large)
        else:
            variants: Sequence[str] | str = "all" if given in ([], ["all"]) else given
            count = (len([v for v in be.variants() if args.dtype in v.dtypes and not v.vendor]) if variants == "all" else len(variants))
            with _Progress(count * len(shapes), f"bench {device}", bar) as prog:
                for reps, part in chunks:
                    run_bench(device, args.dtype, variants, part, repeats=reps, settle=args.settle,
                              progress=prog.line, step=prog.step, sink=records, too_large=too_large)
    except MemoryError as exc:  # past the operands (a call's work arrays): the records timed so far kept
        sys.stdout.flush()
        written = _write_outputs(args, records, command) if records else []
        kept = f"; the {len(records)} record(s) timed before it written to {', '.join(written)}" if written else ""
        print(f"polygemm: error: out of host memory while timing ({exc or 'MemoryError'}); pick smaller shapes "
              f"(or --max-dim N){kept}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        sys.stdout.flush()
        written = _write_outputs(args, records, command, interrupted=True) if records else []
        kept = (f"the {len(records)} record{'s' if len(records) != 1 else ''} timed so far written to {', '.join(written)}"
                if written else (f"{len(records)} records timed so far, not written (no --json or --markdown)" if records
                                 else "nothing was timed; no file written"))
        print(f"polygemm: interrupted: {kept}", file=sys.stderr)
        return 130
    written = _write_outputs(args, records, command)
    if written:  # say where the results went (plot -o says so too); the run had ended on its last timing line
        print(f"wrote {', '.join(written)}")
    if too_large:  # the shapes asked for and not timed: a usage error, as polygemm gemm's for such a --shape
        shown = sorted(set(too_large), key=too_large.index)
        print(f"polygemm: error: {len(shown)} shape{'s' if len(shown) > 1 else ''} not timed, too large for this machine: "
              f"{shown[0]}{f' (and {len(shown) - 1} more)' if len(shown) > 1 else ''}; pick smaller --shapes (or --max-dim N"
              f"{', a smaller --batch' if args.batch else ''})", file=sys.stderr)
        return 2
    return 0


def _write_outputs(args: argparse.Namespace, records: list[BenchRecord], command: str, interrupted: bool = False) -> list[str]:
    """Write --json, --markdown and --plot (each whole or not at all); the paths written."""
    written = []
    if args.json:
        payload: dict[str, Any] = {"command": command}
        if interrupted:
            payload["interrupted"] = True  # the records of a run cut short (Ctrl-C)
        payload["records"] = [{k: _json_safe(v) for k, v in asdict(r).items()} for r in records]
        write_file(args.json, lambda fh: json.dump(payload, fh, indent=1, allow_nan=False))
        written.append(args.json)
    if args.markdown:
        text = to_markdown(records, command) + "\n"
        if interrupted:
            text = f"**Interrupted** (Ctrl-C): the {len(records)} records timed before it.\n\n" + text
        write_file(args.markdown, lambda fh: fh.write(text))
        written.append(args.markdown)
    if args.plot and records:
        from .plot import plot_records

        plot_records(records, args.plot)
        written.append(args.plot)
    return written


def _repeats_arg(text: str) -> int | str:
    """``--repeats``: an integer >= 1, or ``auto`` (:func:`auto_repeats` per shape)."""
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or auto; got {text!r}") from None


def _seconds_arg(text: str) -> float:
    """``--settle``: seconds, a finite number >= 0 (inf had settled for ever, nan not at all)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds and finite; got {text!r}")
    return value


def _preset_summary(shapes: Sequence[tuple[int, int, int]]) -> str:
    """``1024³..8192³`` for cubes, else the shapes themselves, for --help; the sweep's axes."""
    if list(shapes) == PRESETS["sweep"]:
        return (f"{len(shapes)} shapes: M, N in {{{', '.join(map(str, SWEEP_MN))}}} against K in {{{', '.join(map(str, SWEEP_K))}}}, "
                "diagonal and skinny both ways, plus odd sizes")
    cubes = [m for m, n, k in shapes if m == n == k]
    text = [f"{cubes[0]}³..{cubes[-1]}³"] if len(cubes) > 3 else [f"{c}³" for c in cubes]
    text += [f"{m}x{n}x{k}" for m, n, k in shapes if not m == n == k]
    return ", ".join(text)


def add_parser(sub: Any) -> None:
    s = sub.add_parser("bench", help="time polygemm against the vendor library (same process)")
    s.add_argument("--device", default=None, help="backend to time (default: $POLYGEMM_DEVICE, else the best available)")
    s.add_argument("--mode", choices=["call", "kernel"], default="call",
                   help="call: the public polygemm.gemm per call (wall clock) beside the vendor as its users call it; "
                        "kernel: each variant's raw launch (device events) beside the backend's vendor variant")
    s.add_argument("--inputs", choices=["device", "numpy"], default="device",
                   help="call mode: device arrays (CuPy, else torch) with out=, or NumPy in and out (copies included)")
    s.add_argument("--result", choices=["out", "new"], default="out",
                   help="call mode, device arrays: out: both calls write into a given out= array; new: each call makes its "
                        "result (polygemm.gemm(a, b) beside cupy.matmul(a, b)), the allocation timed in both")
    s.add_argument("--array-lib", choices=["auto", "cupy", "torch"], default="auto",
                   help="call mode: whose device arrays and matmul (auto: CuPy, else torch)")
    s.add_argument("--batch", type=non_negative_int, default=0, metavar="N",
                   help="call mode: a strided batch of N products per call (vendor: its batched GEMM, e.g. torch.matmul on 3-D)")
    s.add_argument("--dtype", default="float32", choices=["float16", "bfloat16", "float32", "float64"],
                   help="element type of A, B and C (bfloat16: ml_dtypes' for NumPy, torch's on the device)")
    s.add_argument("--variants", nargs="+", default=None,
                   help="variant names (comma or space separated); call mode default: auto; kernel mode default: all, "
                        "and auto there is the raw launch of the rung auto picks for each shape")
    s.add_argument("--shapes", nargs="+", default=None,
                   help="MxNxK items and presets: " + "; ".join(f"{name} ({_preset_summary(shapes)})" for name, shapes in PRESETS.items())
                        + ". Default: square on a GPU (cuda, musa), cpu on the CPU (seconds on 2 cores)")
    s.add_argument("--repeats", type=_repeats_arg, default=5,
                   help="timed repeats, the median reported; auto: by each shape's FLOPs and bytes, 7 for the smallest "
                        "(launch-bound) products, 5, 3 for the largest (see bench.auto_repeats)")
    s.add_argument("--max-dim", type=positive_int, default=None, metavar="N",
                   help="leave out the shapes with a dimension above N (e.g. the sweep preset's small end on a CPU)")
    s.add_argument("--settle", type=_seconds_arg, default=0.0, metavar="SECONDS",
                   help="kernel mode: run each kernel alone this long before timing its repeats (sustained clocks) "
                        "instead of interleaving the vendor repeat by repeat")
    s.add_argument("--json", metavar="PATH", help="write the records as JSON")
    s.add_argument("--markdown", metavar="PATH", help="write the tables as markdown")
    s.add_argument("--plot", metavar="PATH", help="chart of FLOP/s against problem size with min-max bars, in the format the "
                                                  "extension names (PNG without one; needs matplotlib: pip install 'polygemm[plot]'; "
                                                  "checked before any timing)")
    s.add_argument("--no-progress", action="store_true",
                   help="plain result lines, no progress bar (a bar is drawn only on a terminal, with tqdm or rich installed)")
    s.set_defaults(fn=cmd_bench)
