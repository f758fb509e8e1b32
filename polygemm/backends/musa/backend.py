"""The ``musa`` backend: the S4000 FP16 kernel in ``libpolygemm_musa``, bound with cffi.

The library comes in three flavors (``pgm_build_info``): ``musa`` (Moore Threads GPUs, the
product), ``cuda`` (the same kernel source on an NVIDIA GPU, to verify its logic) and
``host`` (the C ABI on the CPU, for CI). Users get ``device="musa"`` only from the
``musa`` flavor; the other two are emulations, enabled with ``POLYGEMM_MUSA_EMULATION=1``,
and every plan says so.

The kernel computes column-major ``C = alpha·A·B + beta·C``. Row-major problems use the
operand swap (``Cᵀ = Bᵀ·Aᵀ``); NumPy operands are uploaded in whichever order the kernel
needs (the upload is a copy anyway). Device operands (``MusaArray``) must already be in
one consistent order.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ...backend import Availability, Backend, Plan, Variant, host_layouts
from ...errors import ArgumentError, BackendUnavailableError, DTypeError, ShapeError, UnsupportedProblemError
from ...problem import GemmProblem, Operand
from .arrays import MusaArray
from .library import LibraryNotFound, NativeLibrary, load_library

__all__ = ["MusaBackend", "PreparedB", "session", "Session"]

_INT_MAX = 2**31 - 1
_VARIANTS = (
    Variant(
        "wmma_s4000",
        ("float16",),
        "S4000 kernel: 128x128x32 threadblock tile, 32x32x16 WMMA on 128-thread waves, async double buffer, CTA swizzle",
        layout="col",
        tile="threadblock 128x128x32, wave tile 32x32x16",
        requirements="any M, N, K >= 1; unaligned pointers or leading dimensions take a scalar-copy path",
    ),
    Variant(
        "mublas",
        ("float16",),
        "muBLAS mublasGemmEx (fp16 in/out, fp32 compute): the vendor column (musa flavor only)",
        layout="col",
        tile="muBLAS heuristics",
        auto=False,
        vendor=True,
    ),
)


def emulation_enabled() -> bool:
    return os.environ.get("POLYGEMM_MUSA_EMULATION", "").strip() == "1"


class Session:
    """The loaded library plus one handle per thread (handles serialize their calls)."""

    def __init__(self, nl: NativeLibrary, device: int = 0) -> None:
        self.nl = nl
        self.ffi, self.lib = nl.ffi, nl.lib
        self.device = device
        self._local = threading.local()

    def handle(self) -> Any:
        h = getattr(self._local, "handle", None)
        if h is None:
            out = self.ffi.new("pgm_handle **")
            self.nl.check(self.lib.pgm_handle_create(self.device, self.ffi.NULL, out), "pgm_handle_create")
            h = self.ffi.gc(out[0], self.lib.pgm_handle_destroy)
            self._local.handle = h
        return h

    def malloc(self, nbytes: int) -> int:
        out = self.ffi.new("void **")
        self.nl.check(self.lib.pgm_malloc(self.handle(), max(int(nbytes), 2), out), f"pgm_malloc({nbytes} bytes)")
        return int(self.ffi.cast("uintptr_t", out[0]))

    def free(self, ptr: int) -> None:
        self.nl.check(self.lib.pgm_free(self.handle(), self.ffi.cast("void *", ptr)), "pgm_free")

    def _buffer(self, host: np.ndarray, writable: bool = False) -> Any:
        # cffi wants C-contiguous memory; a Fortran-ordered array's transpose is exactly that
        flat = host if host.flags.c_contiguous else host.T
        if not flat.flags.c_contiguous:
            raise ArgumentError("host buffer must be C- or Fortran-contiguous")
        return self.ffi.from_buffer(flat, require_writable=writable)

    def h2d(self, ptr: int, host: np.ndarray) -> None:
        self.nl.check(self.lib.pgm_memcpy_h2d(self.handle(), self.ffi.cast("void *", ptr), self._buffer(host), host.nbytes), "pgm_memcpy_h2d")

    def d2h(self, host: np.ndarray, ptr: int) -> None:
        self.nl.check(self.lib.pgm_memcpy_d2h(self.handle(), self._buffer(host, True), self.ffi.cast("void *", ptr), host.nbytes), "pgm_memcpy_d2h")

    def d2d(self, dst: int, src: int, nbytes: int) -> None:
        self.nl.check(self.lib.pgm_memcpy_d2d(self.handle(), self.ffi.cast("void *", dst), self.ffi.cast("void *", src), nbytes), "pgm_memcpy_d2d")

    def device_name(self) -> str:
        buf = self.ffi.new("char[256]")
        self.nl.check(self.lib.pgm_device_name(self.device, buf, 256), "pgm_device_name")
        return self.ffi.string(buf).decode(errors="replace")

    def gemm(self, variant: str, m: int, n: int, k: int, alpha: float, a: int, lda: int, b: int, ldb: int, beta: float, c: int, ldc: int) -> None:
        fn = self.lib.pgm_mublas_gemm_f16 if variant == "mublas" else self.lib.pgm_gemm_f16
        cast = self.ffi.cast
        self.nl.check(fn(self.handle(), m, n, k, alpha, cast("void *", a), lda, cast("void *", b), ldb, beta, cast("void *", c), ldc),
                      "pgm_mublas_gemm_f16" if variant == "mublas" else "pgm_gemm_f16")


_session_lock = threading.Lock()
_session: Session | None = None


def session() -> Session:
    """The process-wide session (library loaded once); BackendUnavailableError if none."""
    global _session
    with _session_lock:
        if _session is None:
            try:
                _session = Session(load_library())
            except LibraryNotFound as exc:
                raise BackendUnavailableError(str(exc)) from exc
        return _session


class PreparedB:
    """B (K×N float16) transposed once into the library's layout, owned by the caller.

    Reuse it across ``MusaBackend.gemm_prepared`` calls; after B's data changes call
    ``update(new_b)``; ``release()`` (or a ``with`` block) frees it. Nothing is keyed on a
    pointer: a prepared object only ever holds what it was given.
    """

    def __init__(self, b: Any) -> None:
        self._s = session()
        arr = np.asfortranarray(_f16(b, "b"))
        if arr.ndim != 2:
            raise ShapeError(f"b must be 2-D; got shape {arr.shape}")
        self.shape = (int(arr.shape[0]), int(arr.shape[1]))
        self._obj: Any = None
        with MusaArray(self._s, self.shape, "F") as tmp:
            tmp.set(arr)
            out = self._s.ffi.new("pgm_prepared_b **")
            self._s.nl.check(self._s.lib.pgm_prepare_b(self._s.handle(), self.shape[0], self.shape[1], self._s.ffi.cast("void *", tmp.ptr), max(self.shape[0], 1), out), "pgm_prepare_b")
            self._obj = out[0]

    def update(self, b: Any) -> None:
        arr = np.asfortranarray(_f16(b, "b"))
        if arr.shape != self.shape:
            raise ShapeError(f"update() needs b of shape {self.shape}; got {arr.shape}")
        with MusaArray(self._s, self.shape, "F") as tmp:
            tmp.set(arr)
            self._s.nl.check(self._s.lib.pgm_prepared_b_update(self._s.handle(), self.handle, self._s.ffi.cast("void *", tmp.ptr), max(self.shape[0], 1)), "pgm_prepared_b_update")

    @property
    def handle(self) -> Any:
        if self._obj is None:
            raise ArgumentError("this PreparedB has been released")
        return self._obj

    def release(self) -> None:
        obj, self._obj = self._obj, None
        if obj is not None:
            self._s.nl.check(self._s.lib.pgm_prepared_b_release(obj), "pgm_prepared_b_release")

    def __enter__(self) -> "PreparedB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass


def _f16(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype != np.float16:
        raise DTypeError(f"{name} must be float16 for the musa backend; got {arr.dtype.name}")
    return arr


class MusaBackend(Backend):
    """Moore Threads GPUs through ``libpolygemm_musa`` (float16 in/out, float32 accumulation)."""

    name = "musa"
    priority = 400
    residencies = ("host", "musa")

    def probe(self) -> Availability:
        try:
            s = session()
        except BackendUnavailableError as exc:
            return Availability(False, str(exc))
        flavor = s.nl.flavor
        if flavor != "musa" and not emulation_enabled():
            return Availability(False, f"{s.nl.path} is the {flavor!r} flavor, an emulation of the MUSA backend; "
                                       f"set POLYGEMM_MUSA_EMULATION=1 to use it (tests), or build the musa flavor on an S4000 machine")
        count = s.ffi.new("int *")
        try:
            s.nl.check(s.lib.pgm_device_count(count), "pgm_device_count")
        except Exception as exc:
            return Availability(False, str(exc))
        if count[0] < 1:
            return Availability(False, f"{s.nl.path} ({flavor} flavor) sees no device")
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        return _VARIANTS

    def flavor(self) -> str:
        try:
            return session().nl.flavor
        except BackendUnavailableError:
            return "not loaded"

    def device_name(self) -> str:
        try:
            s = session()
            return f"{s.device_name()} [libpolygemm_musa {s.nl.flavor} flavor, {s.nl.build_info.get('arch', '?')}]"
        except Exception:
            return ""

    # -- planning ----------------------------------------------------------------------
    def _orientation(self, p: GemmProblem) -> tuple[bool, str]:
        """(swap, order the operands must have): the result's layout decides the swap."""
        layout = p.out.layout if p.out is not None else (p.c.layout if p.c is not None else "row")
        return layout == "row", layout

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        p = problem
        chosen = self.get_variant("wmma_s4000" if variant == "auto" else variant)
        self.check_problem(p, chosen)
        for op in p.operands():
            if op.max_offset > _INT_MAX:
                raise UnsupportedProblemError(f"{op.name} spans more than 2**31 elements; the MUSA kernel indexes with 32-bit integers")
        flavor = self.flavor()
        if chosen.name == "mublas" and flavor != "musa":
            raise UnsupportedProblemError(f"variant 'mublas' needs the musa flavor of libpolygemm_musa (muBLAS); this library is the {flavor} flavor")
        swap, layout = self._orientation(p)
        reason = "the S4000 kernel (the musa backend's auto variant)" if variant == "auto" else f"variant={variant!r} requested"
        plan = Plan(self.name, chosen.name, reason, p, device=self.device_name(), layouts=host_layouts(p))
        if flavor != "musa":
            plan.notes.append(f"EMULATION: libpolygemm_musa is the {flavor} flavor (POLYGEMM_MUSA_EMULATION=1); results verify the ABI/kernel logic, not S4000 speed")
        plan.launch = {"operand swap": "yes (C^T = B^T A^T)" if swap else "no", "storage order": f"{layout}-major"}
        if p.residency == "host":
            conv = [op.name for op in (p.a, p.b) if op.layout != layout]
            plan.copies.append("host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
            if conv:
                plan.copies.append(f"{', '.join(conv)} reordered to {layout}-major during the upload")
        else:
            bad = [op.describe() for op in p.operands() if op.layout != layout]
            if bad:
                raise UnsupportedProblemError(
                    f"musa device operands must share the result's memory order ({layout}-major); got " + "; ".join(bad)
                    + ". Create them with the same order (MusaArray.from_numpy keeps the NumPy order)"
                )
        if p.empty:
            plan.reason += "; empty product (M, N or K is 0)"
        return plan

    # -- running -------------------------------------------------------------------------
    def run(self, plan: Plan) -> Any:
        s = session()
        p = plan.problem
        swap, layout = self._orientation(p)
        order = "C" if layout == "row" else "F"
        owned: list[MusaArray] = []
        try:
            if p.residency == "host":
                def up(op: Operand) -> MusaArray:
                    arr = np.ascontiguousarray(op.array) if order == "C" else np.asfortranarray(op.array)
                    d = MusaArray(s, arr.shape, order)
                    owned.append(d)
                    d.set(arr)
                    return d

                a, b = up(p.a), up(p.b)
                if p.c is not None and p.beta != 0.0:
                    c = up(p.c)
                else:
                    c = MusaArray(s, (p.m, p.n), order)
                    owned.append(c)
                self._launch(s, plan.variant, p, swap, a.ptr, b.ptr, c.ptr, layout)
                res = c.get()
                if p.out is not None:
                    np.copyto(p.out.array, res)
                    return p.out.array
                return res
            # device operands
            if p.out is not None:
                dest_ptr, result = p.out.ptr, p.out.array
            else:
                result = MusaArray(s, (p.m, p.n), order)
                dest_ptr = result.ptr
            if p.c is not None and p.beta != 0.0 and not p.in_place and p.m * p.n:
                s.d2d(dest_ptr, p.c.ptr, p.m * p.n * 2)
            self._launch(s, plan.variant, p, swap, p.a.ptr, p.b.ptr, dest_ptr, layout, lds=(p.a.ld, p.b.ld, (p.out.ld if p.out is not None else None)))
            self.synchronize()
            return result
        finally:
            for d in owned:
                d.free()

    def _launch(self, s: Session, variant: str, p: GemmProblem, swap: bool, a: int, b: int, c: int, layout: str,
                lds: tuple[int | None, int | None, int | None] = (None, None, None)) -> None:
        lda = lds[0] or (p.k if layout == "row" else p.m)
        ldb = lds[1] or (p.n if layout == "row" else p.k)
        ldc = lds[2] or (p.n if layout == "row" else p.m)
        lda, ldb, ldc = max(lda, 1), max(ldb, 1), max(ldc, 1)
        if swap:  # row-major storage = the transpose in column-major terms
            s.gemm(variant, p.n, p.m, p.k, p.alpha, b, ldb, a, lda, p.beta, c, ldc)
        else:
            s.gemm(variant, p.m, p.n, p.k, p.alpha, a, lda, b, ldb, p.beta, c, ldc)

    def gemm_prepared(self, a: Any, prepared: PreparedB, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        """``alpha * a @ B + beta * c`` with a prepared B (NumPy float16 in and out)."""
        s = session()
        A = np.asfortranarray(_f16(a, "a"))
        if A.ndim != 2 or A.shape[1] != prepared.shape[0]:
            raise ShapeError(f"a has shape {A.shape}; the prepared B is {prepared.shape}, so a must be (M, {prepared.shape[0]})")
        m, k, n = A.shape[0], A.shape[1], prepared.shape[1]
        with MusaArray(s, A.shape, "F") as da, MusaArray(s, (m, n), "F") as dc:
            da.set(A)
            if c is not None and beta != 0.0:
                C = _f16(c, "c")
                if C.shape != (m, n):
                    raise ShapeError(f"c must have shape ({m}, {n}); got {C.shape}")
                dc.set(C)
            cast = s.ffi.cast
            s.nl.check(s.lib.pgm_gemm_f16_prepared(s.handle(), m, n, k, float(alpha), cast("void *", da.ptr), max(m, 1), prepared.handle,
                                                   float(beta), cast("void *", dc.ptr), max(m, 1)), "pgm_gemm_f16_prepared")
            return np.ascontiguousarray(dc.get())

    # -- device helpers -----------------------------------------------------------------
    def to_device(self, array: np.ndarray) -> MusaArray:
        return MusaArray.from_numpy(array)

    def to_host(self, array: Any) -> np.ndarray:
        if isinstance(array, MusaArray):
            return array.get()
        return np.asarray(array)

    def synchronize(self) -> None:
        s = session()
        s.nl.check(s.lib.pgm_synchronize(s.handle()), "pgm_synchronize")

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        s = session()

        def _time(fn: Callable[[], Any]) -> float:
            s.nl.check(s.lib.pgm_timer_begin(s.handle()), "pgm_timer_begin")
            fn()
            ms = s.ffi.new("float *")
            s.nl.check(s.lib.pgm_timer_end(s.handle(), ms), "pgm_timer_end")
            return float(ms[0]) / 1e3

        return _time
