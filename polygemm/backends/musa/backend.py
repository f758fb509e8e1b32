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

import contextlib
import os
from typing import Any, Callable, Sequence

import numpy as np

from ...core.env import env_flag
from ...backend import Availability, Backend, Plan, Variant, check_call, host_layouts, store_result
from ...errors import ArgumentError, BackendUnavailableError, DeviceError, PolygemmError, UnsupportedProblemError
from ...problem import Call, GemmProblem, Operand
from .arrays import MusaArray
from .library import LibraryNotFound
from .prepared import PreparedB, gemm_prepared as _gemm_prepared
from . import sessions
from .sessions import Session, session

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
    """``$POLYGEMM_MUSA_EMULATION`` on (1, true, yes, on, any case: :func:`polygemm.core.env.env_flag`).
    A value of no on/off spelling raises ArgumentError naming it (the probe reports it as the
    reason): a typo must not quietly mean "off"."""
    return env_flag("POLYGEMM_MUSA_EMULATION")


def _read_as(op: Operand, layout: str) -> int | None:
    """``op``'s leading dimension when read in ``layout`` order (None: it cannot be): its own in
    its own order; a single contiguous row or column, or an empty matrix, reads either way."""
    if op.layout == layout:
        return op.ld
    if op.rows * op.cols == 0:
        return max(op.cols if layout == "row" else op.rows, 1)
    if (op.rows == 1 and op.layout == "row") or (op.cols == 1 and op.layout == "col"):
        return 1  # its elements are adjacent: the other order steps over no line
    return None


class MusaBackend(Backend):
    """Moore Threads GPUs through ``libpolygemm_musa`` (float16 in/out, float32 accumulation)."""

    name = "musa"
    priority = 400
    residencies = ("host", "musa")
    float32_scalars = True
    #: NumPy stacks of matrices (numpy.matmul broadcasting), one product a launch; a MusaArray is one matrix
    batched = True
    broadcasts_host_batches = True  # each matrix is read through np.broadcast_to: any batch strides, no copy first

    def probe(self) -> Availability:
        """One-line reasons (at most 120 characters, no library path); the whole text, e.g.
        every place the library was looked for, rides along as ``detail`` (``polygemm info -v``)."""

        def unavailable(reason: str, detail: str = "") -> Availability:
            av = Availability(False, reason)
            detail = detail.strip()
            if detail and detail != reason.strip():
                object.__setattr__(av, "detail", detail)  # the registry reads an optional ``detail``
            return av

        try:
            s = sessions.session()
        except BackendUnavailableError as exc:
            cause = exc.__cause__
            detail = getattr(exc, "details", "") or (cause.details() if isinstance(cause, LibraryNotFound) else "")
            lines = detail.splitlines()
            if lines and lines[0].strip() == str(exc).strip():  # said once: the reason, then the places tried
                detail = "\n".join(lines[1:])
            return unavailable(str(exc), detail)
        flavor = s.nl.flavor
        try:
            emulate = flavor == "musa" or emulation_enabled()
        except ArgumentError as exc:  # a typo ("ture") is said, not taken for off; the spellings on info -v's lines
            given = os.environ.get("POLYGEMM_MUSA_EMULATION", "")
            return unavailable(f"POLYGEMM_MUSA_EMULATION={given[:12]!r} is not on or off; set it to 1 to use libpolygemm_musa's "
                               f"{flavor!r} flavor (an emulation)", f"{exc}\nlibrary: {s.nl.path}")
        if not emulate:
            return unavailable(f"libpolygemm_musa is the {flavor!r} flavor (an emulation): set POLYGEMM_MUSA_EMULATION=1 to use it",
                               f"library: {s.nl.path}\nuse it for tests with POLYGEMM_MUSA_EMULATION=1, "
                               f"or build the musa flavor on an S4000 machine")
        count = s.ffi.new("int *")
        try:
            s.nl.check(s.lib.pgm_device_count(count), "pgm_device_count")
        except Exception as exc:
            return unavailable(str(exc))
        if count[0] < 1:
            return unavailable(f"libpolygemm_musa ({flavor} flavor) sees no device", f"library: {s.nl.path}")
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        return _VARIANTS

    def flavor(self) -> str:
        try:
            return sessions.session().nl.flavor
        except BackendUnavailableError:
            return "not loaded"

    def device_name(self) -> str:
        try:
            s = sessions.session()
            return f"{s.device_name()} [libpolygemm_musa {s.nl.flavor} flavor, {s.nl.build_info.get('arch', '?')}]"
        except Exception:
            return ""

    # -- planning ----------------------------------------------------------------------
    def _orientation(self, p: GemmProblem) -> tuple[bool, str]:
        """(swap, order the operands must have): the result's layout decides the swap, else the
        first operand whose order is not a matter of reading (a single row or column, or an
        empty matrix, reads either way: see :func:`_read_as`)."""
        ops = [op for op in (p.out, p.c if p.beta != 0.0 else None, p.a, p.b) if op is not None]  # (a c not read: no say)
        layout = next((op.layout for op in ops if _read_as(op, "row" if op.layout == "col" else "col") is None), "row")
        return layout == "row", layout

    def refusal(self, problem: GemmProblem, variant: Variant | None = None) -> PolygemmError | None:
        """The base rules, then the kernel's 32-bit sizes and offsets (so that device="auto" passes such a product
        on to the next backend)."""
        refused = super().refusal(problem, variant)
        if refused is not None:
            return refused
        p = problem
        if p.batch and p.residency != "host":
            return UnsupportedProblemError(
                f"backend 'musa' takes stacks of matrices (batch shape {tuple(p.batch)}) as NumPy arrays only, a product a "
                f"launch; its device arrays (MusaArray) are single matrices: pass each product's 2-D operands in a call of "
                f"its own, or the stacks as NumPy arrays")
        for op in p.operands():
            if op.max_offset > _INT_MAX:
                return UnsupportedProblemError(f"{op.name} spans more than 2**31 elements; the MUSA kernel indexes with 32-bit integers")
        if p.m and p.n and max(p.m, p.n, p.k, p.m * p.n) > _INT_MAX:
            return UnsupportedProblemError(f"{p.shape_str()} is beyond the MUSA kernel's 32-bit sizes and indices; split the product into blocks")
        return None

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        p = problem
        chosen = self.get_variant("wmma_s4000" if variant == "auto" else variant)
        self.check_problem(p, chosen)
        flavor = self.flavor()
        if chosen.name == "mublas" and flavor != "musa":
            raise UnsupportedProblemError(f"variant 'mublas' needs the musa flavor of libpolygemm_musa (muBLAS); this library is the "
                                          f"{flavor} flavor, which runs variant='wmma_s4000' (or 'auto')")
        swap, layout = self._orientation(p)
        reason = "the S4000 kernel (the musa backend's auto variant)" if variant == "auto" else f"variant={variant!r} requested"
        plan = Plan(self.name, chosen.name, reason, p, device=self.device_name(), layouts=host_layouts(p))
        if flavor != "musa":
            plan.notes.append(f"EMULATION: libpolygemm_musa is the {flavor} flavor (POLYGEMM_MUSA_EMULATION=1); results verify the ABI/kernel logic, not S4000 speed")
        plan.launch = {"operand swap": "yes (C^T = B^T A^T)" if swap else "no", "storage order": f"{layout}-major"}
        if p.batch:
            plan.launch["batch"] = f"{p.count} products, each uploaded, launched and downloaded in turn"
        lds = tuple(None if op is None else _read_as(op, layout) for op in (p.a, p.b, p.c, p.out))
        plan.private = (swap, layout, lds)  # lds: each operand's leading dimension read in that order (None: it cannot be)
        if p.residency == "host" and p.m and p.n:  # (an empty result is made on the host: nothing moves)
            conv = [op.name for op in (p.a, p.b) if op.layout != layout]
            plan.copies.append("host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
            if conv:
                plan.copies.append(f"{', '.join(conv)} reordered to {layout}-major during the upload")
        elif p.residency != "host":
            bad = [op.describe() for op, ld in zip((p.a, p.b, p.c if p.beta != 0.0 else None, p.out), lds) if op is not None and ld is None]
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
        return self.execute(plan, Call.from_problem(plan.problem))

    def execute(self, plan: Plan, call: Call) -> Any:
        if not call.matched:  # a call the core did not bind: its operands must be the plan's
            check_call(plan, call)
        s = sessions.session()
        p = plan.problem
        swap, layout, lds = plan.private
        order = "C" if layout == "row" else "F"
        if p.residency == "host":
            if p.m == 0 or p.n == 0 or p.count == 0:
                return store_result(np.zeros(p.result_shape, p.out_dtype), call.out)
            read_c = call.c is not None and call.beta != 0.0
            if not p.batch:
                return store_result(self._host_product(s, plan.variant, p, swap, order, call, call.a, call.b,
                                                       call.c if read_c else None), call.out)
            # a stack: each matrix through np.broadcast_to (a broadcast operand is one matrix, any strides walk the batch)
            a_all = np.broadcast_to(call.a, p.batch + (p.m, p.k))
            b_all = np.broadcast_to(call.b, p.batch + (p.k, p.n))
            c_all = np.broadcast_to(call.c, p.result_shape) if read_c else None
            res = np.empty(p.result_shape, p.out_dtype)
            for i in np.ndindex(*p.batch):
                res[i] = self._host_product(s, plan.variant, p, swap, order, call, a_all[i], b_all[i],
                                            None if c_all is None else c_all[i])
            return store_result(res, call.out)
        owned: list[MusaArray] = []
        held = contextlib.ExitStack()  # the caller's arrays held for the call: another thread's free() waits for it
        try:
            for x in {id(x): x for x in (call.a, call.b, call.c, call.out) if isinstance(x, MusaArray)}.values():
                held.enter_context(x.in_use())
            # device operands: all in the result's memory order (the plan checked)
            if call.out is not None:
                dest_ptr, dest_ld, result = call.out_ptr, lds[3], call.out
            else:
                result = MusaArray(s, (p.m, p.n), order)
                dest_ptr, dest_ld = result.ptr, max(p.n if layout == "row" else p.m, 1)
            if p.m == 0 or p.n == 0:
                return result
            target, target_ld = dest_ptr, dest_ld
            if call.c is not None and call.beta != 0.0 and not p.in_place:
                # c's values go into a scratch result first: a failed launch leaves out as it was
                scratch = MusaArray(s, (p.m, p.n), order)
                owned.append(scratch)
                target, target_ld = scratch.ptr, max(p.n if layout == "row" else p.m, 1)
                self._copy_lines(s, p, layout, call.c_ptr, lds[2], target, target_ld)
            self._launch(s, plan.variant, p, swap, call, call.a_ptr, call.b_ptr, target, (lds[0], lds[1], target_ld))
            if target != dest_ptr:
                self._copy_lines(s, p, layout, target, target_ld, dest_ptr, dest_ld)
            self.synchronize()
            return result
        finally:
            held.close()
            for d in owned:
                d.free()

    def _host_product(self, s: Session, variant: str, p: GemmProblem, swap: bool, order: str, call: Call, a: np.ndarray,
                      b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
        """One product of host matrices: a, b (and c, where it is read) uploaded in ``order``, the kernel, the result
        downloaded; the device memory goes back on every path."""
        owned: list[MusaArray] = []

        def up(arr: np.ndarray) -> MusaArray:
            arr = np.ascontiguousarray(arr) if order == "C" else np.asfortranarray(arr)
            d = MusaArray(s, arr.shape, order)
            owned.append(d)
            d.set(arr)
            return d

        try:
            da, db = up(a), up(b)
            if c is not None:
                dc = up(c)
            else:
                dc = MusaArray(s, (p.m, p.n), order)
                owned.append(dc)
            self._launch(s, variant, p, swap, call, da.ptr, db.ptr, dc.ptr, (None, None, None))
            return dc.get()
        finally:
            for d in owned:
                d.free()

    @staticmethod
    def _copy_lines(s: Session, p: GemmProblem, layout: str, src: int, src_ld: int, dst: int, dst_ld: int) -> None:
        """Copy an M×N fp16 matrix between device buffers of one memory order, honouring each
        one's leading dimension (one block when both are compact)."""
        lines, length = (p.m, p.n) if layout == "row" else (p.n, p.m)
        if src_ld == length and dst_ld == length:
            s.d2d(dst, src, lines * length * 2)
            return
        for i in range(lines):
            s.d2d(dst + i * dst_ld * 2, src + i * src_ld * 2, length * 2)

    def _launch(self, s: Session, variant: str, p: GemmProblem, swap: bool, call: Call, a: int, b: int, c: int,
                lds: tuple[int | None, int | None, int | None]) -> None:
        layout = "row" if swap else "col"
        lda = lds[0] or (p.k if layout == "row" else p.m)
        ldb = lds[1] or (p.n if layout == "row" else p.k)
        ldc = lds[2] or (p.n if layout == "row" else p.m)
        lda, ldb, ldc = max(lda, 1), max(ldb, 1), max(ldc, 1)
        if not swap:
            s.gemm(variant, p.m, p.n, p.k, call.alpha, a, lda, b, ldb, call.beta, c, ldc)
            return
        try:  # row-major storage = the transpose in column-major terms
            s.gemm(variant, p.n, p.m, p.k, call.alpha, b, ldb, a, lda, call.beta, c, ldc)
        except DeviceError as exc:  # the library names its own operands: say which of the user's they are
            raise DeviceError(f"{exc} [row-major operands run as C^T = B^T A^T: the library's A (m={p.n}, lda={ldb}) is your b, "
                              f"its B (ldb={lda}) your a]") from exc

    def gemm_prepared(self, a: Any, prepared: PreparedB, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
        """``alpha * a @ B + beta * c`` with a prepared B (NumPy float16 in and out); see prepared.py."""
        return _gemm_prepared(a, prepared, c, alpha=alpha, beta=beta)

    # -- device helpers -----------------------------------------------------------------
    def to_device(self, array: np.ndarray) -> MusaArray:
        return MusaArray.from_numpy(array)

    def to_host(self, array: Any) -> np.ndarray:
        if isinstance(array, MusaArray):
            return array.get()
        return np.asarray(array)

    def copy_result(self, result: Any, out: Any) -> bool:
        """A checked result into a musa ``out`` (verify= with out): device copies, a line at a time
        where both hold their lines in one order, else an element at a time. False for other arrays."""
        try:
            src, dst = result.__polygemm_array_interface__, out.__polygemm_array_interface__
        except AttributeError:
            return False
        if src.get("device") != "musa" or dst.get("device") != "musa":
            return False
        m, n = (int(d) for d in dst["shape"])
        if m == 0 or n == 0:
            return True
        s = sessions.session()
        (srs, scs), (drs, dcs) = (x.get("strides") or (2 * n, 2) for x in (src, dst))
        sp, dp = int(src["data"][0]), int(dst["data"][0])
        if scs == 2 and dcs == 2:
            lines, length, sl, dl = m, n, srs, drs
        elif srs == 2 and drs == 2:
            lines, length, sl, dl = n, m, scs, dcs
        else:
            for i in range(m):
                for j in range(n):
                    s.d2d(dp + i * drs + j * dcs, sp + i * srs + j * scs, 2)
            return True
        if sl == dl == 2 * length:
            s.d2d(dp, sp, lines * length * 2)
        else:
            for i in range(lines):
                s.d2d(dp + i * dl, sp + i * sl, length * 2)
        return True

    def synchronize(self) -> None:
        s = sessions.session()
        s.nl.check(s.lib.pgm_synchronize(s.handle()), "pgm_synchronize")

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        s = sessions.session()

        def _time(fn: Callable[[], Any]) -> float:
            s.nl.check(s.lib.pgm_timer_begin(s.handle()), "pgm_timer_begin")
            fn()
            ms = s.ffi.new("float *")
            s.nl.check(s.lib.pgm_timer_end(s.handle(), ms), "pgm_timer_end")
            return float(ms[0]) / 1e3

        return _time
