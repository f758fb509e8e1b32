"""The cuda backend's ``verify=`` check on the device (kernels/verify/freivalds.cu): ``C·r``, ``B·r``
and ``A·(B·r)`` and each row's comparison computed where the product ran, on the call's stream, into
stream-ordered scratch; the host reads back one small record (counts, the worst ratio, the first
rows that failed), not the vectors. A failed check is run again from the other side (the transposed
product, ``Cᵀ = Bᵀ·Aᵀ``, by the same kernels with the strides swapped) to name the columns.

The check's geometry and estimated cost are :mod:`.verify_geometry`'s (pure, unit-tested without a GPU), its
scratch :mod:`.verify_scratch`'s.
"""

from __future__ import annotations

import functools
import math
import struct
from typing import Any

import numpy as np

from ...backend import Plan
from ...core.problem import common_stream
from ...core.read import read_operand
from ...core.views import operand_view
from ...errors import PolygemmError
from ...verification.report import SHOWN, CheckReport, Finding
from ...verification.threshold import coefficients
from .device import runtime_for
from .scratch import block_bytes
from .verify_geometry import (MATVEC_BLOCK, RECORD, SHOWN_DEVICE, VERIFY_SOURCE, Strided, checks_on_device, dtype_name,
                              largest, matvec_geometry, strided)
from .verify_scratch import CHECKED_BLOCKS, forget_scratch, record_buffer, take_scratch

__all__ = ["device_check", "checked_execute", "Checked", "retry_variant", "copy_dense"]

#: each kernel's parameters as struct codes (Kernel.struct_for): packed at once, not one NumPy scalar at a time
_WALK = ("q", "q", "q", "Q", "q", "q", "q", "Q", "q", "Q", "q")  # rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs
_SCALARS = ("f", "f", "d", "d", "d", "d", "d")  # alpha, beta, ka, kc0, kc, t0, out_max
_CODES = {
    "matvec": _WALK + ("Q", "Q", "Q"),                          # y, z, norm
    "judge": _WALK + ("Q", "Q", "Q", "Q") + _SCALARS + ("Q", "Q"),   # yC, zC, yC0, zC0, the scalars, record, host's
    "prepare": ("q", "Q", "q", "Q", "Q"),
    "norms": ("q", "Q", "Q"),
    "compare": ("q", "Q", "Q", "Q", "Q", "Q", "Q") + _SCALARS + ("Q", "Q"),
}


#: (runtime, entry) -> (kernel, its parameters' packer): looked up once a process
_kernels: dict[tuple[Any, str], tuple[Any, Any]] = {}


def _kernel(rt: Any, entry: str, codes: str, grid: tuple[int, int, int],
            block: tuple[int, int, int] = (256, 1, 1)) -> tuple[Any, Any]:
    """``(go, pack)``: ``go(pack(*args), stream)`` queues ``entry`` of the check's source at this geometry, its
    parameters packed by ``_CODES[codes]``."""
    known = _kernels.get((rt, entry))
    if known is None:
        fn = rt.function(VERIFY_SOURCE, entry)
        known = _kernels[(rt, entry)] = (fn, fn.struct_for(_CODES[codes]).pack)
    return known[0].launcher(grid, block), known[1]


def _elementwise(n: int) -> tuple[int, int, int]:
    """The grid of a launch of 256 threads a block over ``n`` elements (the kernels loop over what it leaves)."""
    return (max(1, min(-(-n // 256), 65535)), 1, 1)


@functools.lru_cache(maxsize=256)
def _pieces(sizes: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Offsets of scratch pieces of ``sizes`` bytes, one after another, each on a block boundary
    (:func:`.scratch.block_bytes`: the matrix-vector kernel reads r and the norms 16 bytes at a time), and the
    bytes they take."""
    offsets, at = [], 0
    for size in sizes:
        offsets.append(at)
        at += block_bytes(size)
    return tuple(offsets), at


#: the record's counts and worst ratio, as they lead it (RECORD's first four fields)
_HEAD = struct.Struct("<IIfI")


class _Side:
    """The check of ``res = alpha·left·right + beta·c0`` along res's rows, for operands of one layout, worked out once
    (a loop of checked calls over arrays of one layout repeats it with other pointers, scalars and seeds).

    Scratch, in one piece: the record; the sums of squares and magnitudes (float64: squares of float32 values as
    small as 1e-25 or as large as 1e20 neither underflow nor overflow there) of B's, C's and C0's rows and A's;
    the float32 sums (B·r, C·r, C0·r, A·(B·r)); the norms of B's rows; r. The record and the sums (slices of a row
    add into them) are zeroed by the launch that makes r. C·r comes first: the product has just written C, and much
    of it is still in the L2 cache. The pass over A judges each row as it ends where no row is sliced (else a
    compare launch does), and the pass over B stores its rows' norms where none is (else a norms launch does): four
    launches and the read-back for most products."""

    def __init__(self, rt: Any, left: Strided, right: Strided, res: Strided, c0: Strided | None, count: int, co: Any,
                 out_max: float) -> None:
        rows, inner, width = left.rows, left.cols, right.cols
        sms = int(getattr(rt, "sms", 132))
        n_right = right.batch * inner
        total = count * rows
        squares = n_right + 2 * total  # B's, C's and C0's rows, one after another
        (rec, zsq, za, ysum, ya, nrm, r), self.nbytes = _pieces((RECORD.itemsize, 8 * squares, 8 * total, 4 * squares,
                                                                   4 * total, 4 * n_right, 4 * width))
        # B's first in each group: A·(B·r) reads B·r and B's norms 16 bytes at a time from their starts
        zb, zc, z0 = zsq, zsq + 8 * n_right, zsq + 8 * (n_right + total)
        yb, yc, y0 = ysum, ysum + 4 * n_right, ysum + 4 * (n_right + total)
        self.at = (rec, zb, zc, z0, yb, yc, y0, za, ya, nrm, r)  # offsets into the scratch
        self._placed: tuple[int, tuple[int, ...]] = (-1, ())  # the last scratch and the pieces' addresses in it
        self.right, self.res, self.c0 = right, res.batched(count), None if c0 is None else c0.batched(count)
        self.words, self.width, self.total, self.n_right = (ya + 4 * total) // 4, width, total, n_right  # words: the record, every sum
        self.step = inner if right.batch > 1 else 0
        self.consts = (co.a, co.c0, co.c, co.t0, out_max)
        self.prepare = _kernel(rt, "pg_verify_prepare", "prepare", _elementwise(max(self.words, width)))
        self.c_pass = self._matvec(rt, self.res, sms)
        self.c0_pass = None if self.c0 is None else self._matvec(rt, self.c0, sms)
        self.b_pass = self._matvec(rt, right, sms)
        # without its norms from the pass over B (its rows sliced across blocks), a launch of their own
        self.norms = None if self.b_pass[2] else _kernel(rt, "pg_verify_norms", "norms", _elementwise(n_right))
        a = Strided(left.ptr, rows, inner, left.rs, left.cs, left.bs, left.kind, count)
        self.a = a
        mode, grid = matvec_geometry(a, sms)
        if grid[1] == 1:  # A·(B·r), |A|·||B_k|| and each row judged as it ends
            self.judge: tuple[Any, Any] | None = _kernel(rt, f"pg_verify_matvec_judge_{a.kind}_m{mode}", "judge", grid, MATVEC_BLOCK)
            self.a_pass = None
            self.compare = None
        else:
            self.judge = None
            self.a_pass = self._matvec(rt, a, sms)
            self.compare = _kernel(rt, "pg_verify_compare", "compare", _elementwise(total))

    @staticmethod
    def _matvec(rt: Any, x: Strided, sms: int) -> tuple[Any, Any, bool]:
        """(go, pack, whole rows) of the matrix-vector launch over ``x`` (the entry of its walk): y = X·v (float32) and
        z = |X|·w (or X²·1 without w; float64) into zeroed y and z, and the rows' norms where each row is in one block
        (whole rows: else no norms are stored)."""
        mode, grid = matvec_geometry(x, sms)
        go, pack = _kernel(rt, f"pg_verify_matvec_{x.kind}_m{mode}", "matvec", grid, MATVEC_BLOCK)
        return go, pack, grid[1] == 1

    def run(self, rt: Any, ptr_a: int, ptr_b: int, ptr_c: int, ptr_c0: int, alpha: float, beta: float, seed: int,
            stream: int, scratch: int = 0) -> np.ndarray:
        """Queue the check for operands at these pointers (of the layout it was made for), wait, and return this thread's
        page-locked record (read it before the thread's next check). ``scratch``: :attr:`nbytes` of the caller's, on
        ``stream`` (0: taken here and given back)."""
        mine = not scratch
        if mine:
            scratch, kept = take_scratch(rt, self.nbytes, stream)
        try:
            placed = self._placed
            if placed[0] != scratch:  # (a loop of checks takes the same scratch each time)
                placed = self._placed = (scratch, tuple(scratch + off for off in self.at))
            rec, zb, zc, z0, yb, yc, y0, za, ya, nb, r = placed[1]
            go, pack = self.prepare
            go(pack(self.words, scratch, self.width, seed, r), stream)
            x = self.res  # C·r and ||C_i||² (the same r)
            go, pack, _ = self.c_pass
            go(pack(x.rows, x.cols, x.batch, ptr_c, x.rs, x.cs, x.bs, r, 0, 0, 0, yc, zc, 0), stream)
            if self.c0_pass is not None and self.c0 is not None:  # C0·r and ||C0_i||² (each matrix's)
                w = self.c0
                go, pack, _ = self.c0_pass
                go(pack(w.rows, w.cols, w.batch, ptr_c0, w.rs, w.cs, w.bs, r, 0, 0, 0, y0, z0, 0), stream)
            x = self.right  # B·r, B's rows' sums of squares and norms
            go, pack, _ = self.b_pass
            go(pack(x.rows, x.cols, x.batch, ptr_b, x.rs, x.cs, x.bs, r, 0, 0, 0, yb, zb, nb), stream)
            if self.norms is not None:
                go, pack = self.norms
                go(pack(self.n_right, zb, nb), stream)
            a, step = self.a, self.step
            c0s = (y0, z0) if self.c0 is not None else (0, 0)
            host, mapped = record_buffer(rt)  # the last launch writes the record there where it is mapped
            if self.judge is not None:
                go, pack = self.judge
                go(pack(a.rows, a.cols, a.batch, ptr_a, a.rs, a.cs, a.bs, yb, step, nb, step, yc, zc, *c0s, alpha, beta,
                        *self.consts, rec, mapped), stream)
            else:
                go, pack, _ = self.a_pass  # type: ignore[misc]
                go(pack(a.rows, a.cols, a.batch, ptr_a, a.rs, a.cs, a.bs, yb, step, nb, step, ya, za, 0), stream)
                go, pack = self.compare  # type: ignore[misc]
                go(pack(self.total, yc, zc, ya, za, *c0s, alpha, beta, *self.consts, rec, mapped), stream)
            if not mapped:  # into page-locked memory, queued: one wait for the check and its record
                rt.cu.copy_to_host_async(host, rec, stream)
            rt.cu.synchronize_stream(stream)
        except BaseException:
            if mine:
                if kept:  # work may still be queued on it: given back in stream order, and the next check takes another
                    forget_scratch(rt)
                rt.release(scratch, stream)
            raise
        if mine and not kept:
            rt.release(scratch, stream)
        return host


def _one_side(rt: Any, left: Strided, right: Strided, res: Strided, c0: Strided | None, count: int, alpha: float, beta: float,
              seed: int, co: Any, out_max: float, stream: int) -> np.ndarray:
    """The check along ``res``'s rows made and run once (the columns' side of a failed or partly unchecked check):
    a copy of its record."""
    side = _Side(rt, left, right, res, c0, count, co, out_max)
    return side.run(rt, left.ptr, right.ptr, res.ptr, 0 if c0 is None else c0.ptr, alpha, beta, seed, stream).copy()


def _findings(rec: np.ndarray, rows: int, batch: tuple[int, ...]) -> tuple[Finding, ...]:
    shown = min(int(rec["shown"][0]), SHOWN_DEVICE)
    found = sorted(zip(rec["index"][0][:shown].tolist(), rec["diff"][0][:shown].tolist(), rec["thr"][0][:shown].tolist()))
    out = []
    for t, diff, thr in found[:SHOWN]:
        b, i = divmod(int(t), rows)
        where = tuple(int(x) for x in np.unravel_index(b, batch)) if batch else ()
        out.append(Finding(i, float(diff), float(thr), where))
    return tuple(out)


class _Unwalkable(Exception):
    """An operand whose matrices or batch the matrix-vector kernel cannot walk as it lies."""


def _operand(name: str, x: Any, p: Any, rows: int, cols: int, dtype: str) -> Strided:
    """``x`` (an operand of the call, or its result) as the kernels walk it: its own layout, leading dimension
    and one batch stride (0: one matrix for the whole batch), read from the array itself, so that an operand the
    call had made whole first (a torch view no kernel addresses) is refused here rather than misread."""

    op = read_operand(name, x)
    if op.dtype.name != dtype or op.shape != (rows, cols):
        raise _Unwalkable(name)
    dims = op.batch_dims
    shape = tuple(d for d, _ in dims)
    if not dims or all(st == 0 for _, st in dims):
        stride = 0
    else:
        stride = dims[-1][1]
        want = stride
        for size, st in reversed(dims):  # one stride walks the flattened batch: each outer stride the inner span
            if st != want and size > 1:
                raise _Unwalkable(name)
            want *= size
        if shape != tuple(p.batch)[-len(shape):] or (len(shape) < len(p.batch) and math.prod(p.batch[:-len(shape)]) > 1):
            raise _Unwalkable(name)  # a batch broadcast over outer dimensions: not one stride
    return strided(op.ptr, rows, cols, op.layout, op.ld, stride, p.count, dtype)


#: each layout's check along the rows (:class:`_Side`, and the walks of A, B, C and c it was made from), by the
#: operands' view keys, their pointers' 16-byte alignment (the passes' loads) and the precision; None where the
#: kernels cannot walk an operand as it lies
_Made = tuple[_Side, Strided, Strided, Strided, "Strided | None"]
_sides: dict[tuple[Any, ...], _Made | None] = {}
_SIDES_KEPT = 256


def _side_for(rt: Any, p: Any, a: Any, b: Any, c: Any, result: Any, beta: float, precision: str,
              at: int | None = None) -> _Made | None:
    """The check along the rows for these operands and the walks it reads, read from the arrays themselves (None: an
    operand the kernels cannot walk as it is, made whole for the product). ``at``: where the result lies instead (a
    copy of ``result``'s strides in scratch)."""
    count, m, n, k = p.count, p.m, p.n, p.k
    dt, out_dt = dtype_name(p.dtype), dtype_name(p.out_dtype)
    try:
        A = _operand("a", a, p, m, k, dt)
        B = _operand("b", b, p, k, n, dt)
        C = _operand("out", result, p, m, n, out_dt)
        if at is not None:
            C = C.at(at)
        C0 = _operand("c", c, p, m, n, out_dt) if c is not None and beta != 0.0 else None
    except (PolygemmError, _Unwalkable):  # an operand the kernels cannot walk as it is (made whole for the product)
        return None
    f32 = np.dtype(np.float32)
    co = coefficients(k, n, p.dtype, p.out_dtype, f32, f32, compensated=True, precision=precision)
    return _Side(rt, A, B, C, C0, count, co, largest(p.out_dtype)), A, B, C, C0


_MISSING = object()


def device_check(rt: Any, plan: Plan, a: Any, b: Any, c: Any, result: Any, alpha: float, beta: float, seed: int,
                 about: dict[str, str]) -> CheckReport | None:
    """Check ``result`` of ``plan`` on the device (None when the device check does not apply: host operands,
    dtypes the kernels do not read, an empty product). A loop of checked calls over arrays of one layout works the
    check out once (:class:`_Side`) and then only packs this call's pointers, scalars and seed."""
    p = plan.problem
    if not checks_on_device(p):
        return None
    # the threshold allows for the error of the path that ran (a call asking "medium" of a variant as accurate as SGEMM
    # is held to SGEMM's bound)
    precision = plan.precision_met
    with_c = c is not None and beta != 0.0
    va, vb, vr = operand_view(a), operand_view(b), operand_view(result)
    vc = operand_view(c) if c is not None else None
    # the stream the product was queued on, found as the call found it (CuPy's and torch's current one)
    stream = common_stream([v[2] for v in (va, vb, vc, vr) if v is not None])
    keyed = va is not None and vb is not None and vr is not None and (vc is not None or not with_c)
    pushed = rt.enter()
    try:
        made: _Made | None
        if keyed:
            pa, pb, pr, pc = va[1], vb[1], vr[1], vc[1] if with_c else 0  # type: ignore[index]
            key = (rt, va[0], vb[0], vc[0] if with_c else None, vr[0], precision, tuple(p.batch),  # type: ignore[index]
                   pa % 16, pb % 16, pr % 16, pc % 16)
            kept = _sides.get(key, _MISSING)
            if kept is _MISSING:
                kept = _side_for(rt, p, a, b, c, result, beta, precision)
                if len(_sides) >= _SIDES_KEPT:  # a caller of ever new layouts: start over
                    _sides.clear()
                _sides[key] = kept
            made = kept  # type: ignore[assignment]
        else:
            made = _side_for(rt, p, a, b, c, result, beta, precision)
        if made is None:
            return None
        side, A, B, C, C0 = made
        if not keyed:
            pa, pb, pr, pc = A.ptr, B.ptr, C.ptr, 0 if C0 is None else C0.ptr
        if stream == -1 or stream is None:
            if stream == -1:
                rt.cu.check(rt.cu.lib.cuCtxSynchronize(), "cuCtxSynchronize")
            stream = 0
        return _judged(rt, p, made, pa, pb, pr, pc, alpha, beta, seed, stream, precision, about)
    finally:
        if pushed:
            rt.leave()


def _judged(rt: Any, p: Any, made: _Made, pa: int, pb: int, pr: int, pc: int, alpha: float, beta: float, seed: int,
            stream: int, precision: str, about: dict[str, str], scratch: int = 0) -> CheckReport:
    """Run the check ``made`` for operands at these pointers on ``stream`` (the device's context current), wait, and
    judge its record; where it failed or left rows unchecked, check the other side too. ``scratch``: the caller's for
    the first side (0: taken by it)."""
    side, A, B, C, C0 = made
    host = side.run(rt, pa, pb, pr, pc, alpha, beta, seed, stream, scratch)
    failed, unchecked, worst, shown = _HEAD.unpack_from(host.data)
    rows: tuple[Finding, ...] = ()
    columns: tuple[Finding, ...] = ()
    failed_columns: int | None = None
    if failed or unchecked or shown:
        rows = _findings(host.copy(), p.m, p.batch)
    # the other side (Cᵀ = Bᵀ·Aᵀ, the same kernels with the strides swapped): on a failure, to name the columns; where
    # rows were left unchecked (a NaN or an infinity in B reaches every row's B·r), to check the columns that are finite
    if failed or unchecked:
        A, B, C, C0 = A.at(pa), B.at(pb), C.at(pr), None if C0 is None else C0.at(pc)  # this call's (the walks: the first's)
        f32 = np.dtype(np.float32)
        cco = coefficients(p.k, p.m, p.dtype, p.out_dtype, f32, f32, compensated=True, precision=precision)
        crec = _one_side(rt, B.t, A.t, C.t, None if C0 is None else C0.t, p.count, alpha, beta, seed ^ 0x5DEECE66D, cco,
                         largest(p.out_dtype), stream)
        columns = _findings(crec, p.n, p.batch)
        failed_columns = int(crec["failed"][0])
        if not failed and failed_columns:
            failed = failed_columns
    return CheckReport.of(failed == 0, p.count * p.m - unchecked, unchecked, failed, rows, columns,
                          float("inf") if failed else worst, f"the device ({rt.name})", about, failed_columns=failed_columns)


class Checked:
    """A product :func:`checked_execute` computed into scratch and checked there: its ``report``. Where the check
    passed, the product is in ``out`` already (a copy queued on the call's stream) and the scratch given back; else
    :meth:`deliver` writes it into ``out`` all the same (``verify="warn"``) and :meth:`close` gives the scratch back."""

    __slots__ = ("report", "_rt", "_ptr", "_out_ptr", "_nbytes", "_stream", "_kept")

    def __init__(self, report: CheckReport, rt: Any, ptr: int, out_ptr: int, nbytes: int, stream: int,
                 kept: bool = False) -> None:
        self.report, self._rt, self._ptr, self._out_ptr, self._nbytes, self._stream = report, rt, ptr, out_ptr, nbytes, stream
        self._kept = kept

    def deliver(self, current: bool = False) -> None:
        """Queue the copy of the checked product into ``out`` and give the scratch back after it. ``current``: the
        caller holds the device's context (no need to ask)."""
        rt = self._rt
        if not self._ptr:
            return
        pushed = False if current else rt.enter()
        try:
            rt.cu.copy_device_async(self._out_ptr, self._ptr, self._nbytes, self._stream)
        finally:
            try:
                self._give_back()
            finally:
                if pushed:
                    rt.leave()

    def close(self) -> None:
        """Give the scratch back (after the work queued on the call's stream), ``out`` left as it was."""
        if not self._ptr:
            return
        rt = self._rt
        pushed = rt.enter()
        try:
            self._give_back()
        finally:
            if pushed:
                rt.leave()

    def _give_back(self) -> None:
        """:meth:`close` with the device's context current."""
        ptr, self._ptr = self._ptr, 0
        if ptr:
            CHECKED_BLOCKS.give_back(self._rt, ptr, self._stream, self._kept)


#: checked_execute's checks, by the plan they check (held with it: its id is not reused while it is kept), whether c
#: is read, and the operands' 16-byte alignment: the check worked out once and the result's bytes (None: checked by the
#: caller instead, a result of its own)
_planned: dict[tuple[int, bool, int, int, int], tuple[Plan, "tuple[_Made, int, int] | None"]] = {}


def _planned_check(rt: Any, plan: Plan, call: Any, with_c: bool) -> tuple[_Made, int, int] | None:
    """(the check, the result's bytes, the scratch's offset past it) for calls of ``plan`` with ``call``'s operands, or
    None (see :func:`checked_execute`)."""
    p = plan.problem
    o = p.out
    if o is None or not checks_on_device(p):
        return None
    nbytes = p.count * p.m * p.n * p.out_dtype.itemsize
    if o.nbytes_span != nbytes or o.extent[0] != 0:  # gaps between its matrices or rows: written by its own library
        return None
    made = _side_for(rt, p, call.a, call.b, call.c, call.out, call.beta, plan.precision_met, at=0)
    return None if made is None else (made, nbytes, block_bytes(nbytes))


def checked_execute(execute: Any, rt: Any, plan: Plan, call: Any, seed: int, about: dict[str, str]) -> Checked | None:
    """Compute the product of ``call`` (bound to ``plan``, with ``out``) into scratch of ``out``'s strides by
    ``execute(plan, call)``, check it there and, where it passed, queue its copy into ``out``: one product, one check,
    one copy, and ``out`` untouched unless the check passed. None where this does not apply (no ``out``, ``out`` not
    one dense span, dtypes the kernels do not read, operands on several streams, an operand the kernels cannot walk):
    the caller checks a result of its own instead."""
    stream = call.stream
    if stream == -1:
        return None
    with_c = call.c is not None and call.beta != 0.0
    key = (id(plan), with_c, call.a_ptr % 16, call.b_ptr % 16, call.c_ptr % 16 if with_c else 0)
    known = _planned.get(key)
    if known is None or known[0] is not plan:
        found = _planned_check(rt, plan, call, with_c)
        if len(_planned) >= _SIDES_KEPT:  # a caller of ever new layouts: start over
            _planned.clear()
        _planned[key] = (plan, found)
    else:
        found = known[1]
    if found is None:
        return None
    made, nbytes, at = found
    stream = 0 if stream is None else stream
    pushed = rt.enter()
    try:
        # the product and the check's scratch in one block, given back after the copy into out, queued on the same
        # stream (a block kept by the thread could be written by its next product on another stream while the copy still
        # reads it; on a default stream, which orders every call on it, the block is kept for the stream)
        ptr, kept = CHECKED_BLOCKS.take(rt, at + made[0].nbytes, stream)
        try:
            execute(plan, type(call)(call.a, call.b, call.c, call.out, call.a_ptr, call.b_ptr, call.c_ptr, ptr, call.alpha,
                                     call.beta, call.stream, None, True))
            report = _judged(rt, plan.problem, made, call.a_ptr, call.b_ptr, ptr, call.c_ptr if with_c else 0, call.alpha,
                             call.beta, seed, stream, plan.precision_met, about, ptr + at)
        except BaseException:
            CHECKED_BLOCKS.give_back(rt, ptr, stream, kept)
            raise
        checked = Checked(report, rt, ptr, call.out_ptr, nbytes, stream, kept)
        if report.ok:
            checked.deliver(current=True)
        return checked
    finally:
        if pushed:
            rt.leave()


#: copy_dense's bytes for a result and an out of these view keys (0: not one dense span of one kind of array)
_dense: dict[tuple[Any, Any], int] = {}
_DENSE_KEPT = 1024


def _dense_bytes(result: Any, vr: tuple[Any, ...], vo: tuple[Any, ...]) -> int:
    """The bytes one device copy moves from ``result`` into ``out`` (their views ``vr`` and ``vo``), or 0 where that
    does not apply."""
    if len(vr[0]) < 8 or len(vo[0]) < 8 or vr[0][0] != "cuda" or vo[0][0] != "cuda" \
            or vr[0][1:4] != vo[0][1:4] or vr[0][6:8] != vo[0][6:8]:  # (the same kind of array on the same device)
        return 0
    shape, strides, dtype = vr[0][1:4]
    if not isinstance(dtype, np.dtype) or not isinstance(shape, tuple):  # CuPy's views: strides in bytes
        return 0
    size = math.prod(shape)
    flags = getattr(result, "flags", None)
    if size == 0 or flags is None or not (flags.c_contiguous or flags.f_contiguous):
        return 0  # gaps between the elements, or elements sharing memory: not one span (out has the same strides)
    return int(size * dtype.itemsize)


def copy_dense(result: Any, out: Any) -> bool:
    """Copy a checked ``result`` into ``out`` by one stream-ordered device copy where both are C- or Fortran-ordered
    CuPy arrays of one shape, strides and dtype on one device, on the stream they name, in that device's context;
    False where that does not apply (the caller copies by the array library)."""
    vr, vo = operand_view(result), operand_view(out)
    if vr is None or vo is None:
        return False
    key = (vr[0], vo[0])
    nbytes = _dense.get(key)
    if nbytes is None:
        nbytes = _dense_bytes(result, vr, vo)
        if len(_dense) >= _DENSE_KEPT:  # a caller of ever new layouts: start over
            _dense.clear()
        _dense[key] = nbytes
    if not nbytes:
        return False
    rt = runtime_for(int(vr[0][7]))  # the arrays' device (CuPy's device id): its context, and its streams
    stream = common_stream([vr[2], vo[2]])
    if stream == -1:
        return False
    pushed = rt.enter()
    try:
        rt.cu.copy_device_async(vo[1], vr[1], nbytes, 0 if stream is None else stream)
    finally:
        if pushed:
            rt.leave()
    return True


def retry_variant(plan: Plan, known: Any) -> str | None:
    """The variant a retry runs: the next of auto's candidates that could take these operands (another rung),
    or None (the same call again). ``known(label)``: whether the backend takes that variant name."""
    current = plan.variant.partition(":")[0]
    for label, why in plan.candidates:
        if ", but" in why or " " in label or label.partition(":")[0] == current or not known(label):
            continue
        return str(label)
    return None


