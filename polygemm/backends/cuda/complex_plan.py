"""Complex products on the cuda backend: the variants that take them, their plan (four real products of one
real launch plan, :mod:`.complex_launch`) and a call's run, on device operands and on host ones.

The real plan is the one the backend makes for an ``m x n x k`` product of compact row-major planes of the
parts' dtype (complex64: float32, so ``precision=`` chooses its rung as for float32; complex128: float64),
with the call's batch as a batch of planes: auto's choice, or the rung a ``variant=`` names.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Protocol, Sequence

import numpy as np

from ...backend import Plan, Variant, host_layouts, store_result
from ...core.operand import Operand
from ...core.problem import Call, GemmProblem
from ...interop import raw_view
from .complex_launch import REAL_OF, ComplexLaunch, plane_ld
from .emulated_launch import EmulatedLaunch
from .launch import PaddedLaunch, PanelLaunch, PreparedLaunch
from .decisions import CudaPlan, batch_bytes, compact_ld, plan_mats
from .device import CudaRuntime
from .planning import Mat


class RealPlanner(Protocol):
    """What the complex plan asks of the backend: its rules, its variants and the plan of a real problem on a device."""

    @property
    def name(self) -> str: ...

    def check_problem(self, problem: GemmProblem, variant: Variant | None = None) -> None: ...

    def get_variant(self, name: str) -> Variant: ...

    def plan_real(self, problem: GemmProblem, variant: str, rt: Any) -> Plan: ...

__all__ = ["RealPlanner", "with_complex", "real_problem", "plan_complex", "queue_complex", "run_complex_host", "METHOD"]

#: how a complex product is computed, as a plan says it
METHOD = ("four real products (4M: Cr = Ar·Br - Ai·Bi, Ci = Ar·Bi + Ai·Br) on planar copies of the real and imaginary "
          "parts; 4M rather than 3M (three products of sums) keeps each part's error that of its real products, where "
          "3M's differences can cancel")


@functools.lru_cache(maxsize=None)
def _with_complex(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    rows = []
    for v in variants:
        extra = tuple(c for c, r in REAL_OF.items() if r in v.dtypes and c not in v.dtypes)
        rows.append(replace(v, dtypes=v.dtypes + extra) if extra else v)
    return tuple(rows)


def with_complex(variants: Sequence[Variant]) -> tuple[Variant, ...]:
    """``variants`` with complex64 added to each that computes float32 and complex128 to each that computes
    float64: a complex product runs as real products of that rung."""
    return _with_complex(tuple(variants))


def real_problem(p: GemmProblem) -> GemmProblem:
    """The real product each of a complex problem's four runs: ``m x n x k`` on compact row-major planes
    (rows padded to 16 bytes) of the parts' dtype, in scratch (no pointer yet), over the call's batch (an
    operand broadcast over it is one plane for all); beta 1 (the second product of each pair accumulates)."""
    rdt = np.dtype(REAL_OF[p.dtype.name])
    size = rdt.itemsize
    count = p.count

    def plane(name: str, rows: int, cols: int, batched: bool) -> Operand:
        ld = plane_ld(cols, size)
        stride = rows * ld if batched and count > 1 else 0
        return Operand(name, None, (rows, cols), rdt, "row", ld, "cuda", 0, batch_dims=((count, stride),) if p.batch else (),
                       batch_stride=stride, batch_count=count)

    sa, sb, _, _ = batch_bytes(p)
    a = plane("a", p.m, p.k, sa != 0)
    b = plane("b", p.k, p.n, sb != 0)
    out = plane("out", p.m, p.n, True)
    return GemmProblem(p.m, p.n, p.k, rdt, a, b, None, out, p.alpha, 1.0, "cuda", batch=p.batch, kind=p.kind,
                       precision=p.precision)


def plan_complex(be: RealPlanner, p: GemmProblem, variant: str, rt: Any) -> Plan:
    """The plan of complex problem ``p`` on ``rt``'s device (None: planned without one, for explain and tests)."""
    be.check_problem(p, be.get_variant(variant) if variant != "auto" else None)
    real = REAL_OF[p.dtype.name]
    sa, sb, sc, sd = batch_bytes(p)
    a, b, dest = plan_mats(p)
    c: Mat | None = None
    if p.c is not None:
        c = Mat("c", p.m, p.n, p.c.layout, p.c.ld, 0, p.c.itemsize) if p.residency == "cuda" else \
            Mat("c", p.m, p.n, p.result_layout, compact_ld(p.result_layout, p.m, p.n), 0, p.out_dtype.itemsize)
    if p.residency == "host":  # a compact upload in the result's layout, at the uploads' strides
        sc = p.m * p.n * p.out_dtype.itemsize if p.c is not None and p.c.batch_stride else 0
    size = np.dtype(real).itemsize
    inner = be.plan_real(real_problem(p), variant, rt)
    decided: CudaPlan = inner.private
    if p.empty:
        plan = Plan(be.name, inner.variant, f"{p.dtype.name}: empty product (M, N, K or the batch is 0): no GEMM kernel launched"
                    + ("; the result is beta·c (or zeros), written part by part" if p.k == 0 and p.m * p.n * p.count else ""),
                    p, device=inner.device, layouts=host_layouts(p))
        empty = ComplexLaunch(None, rt, p.m, p.n, p.k, p.count, size, a, b, c, dest, (sa, sb, sc, sd), conj=_conj(p))
        plan.private = CudaPlan(empty, p.result_layout, (sa, sb, sc, sd), rt)
        return plan
    real_launch = decided.launch
    assert real_launch is None or isinstance(real_launch, (PreparedLaunch, PanelLaunch, PaddedLaunch, EmulatedLaunch))
    # the whole batch in one launch per product where the rung has a batched build (a plan without a device: where
    # the real plan names no launch per matrix)
    batched = p.count == 1 or (bool(real_launch.lp.batch_count) if real_launch is not None else "batch" not in inner.launch)
    launch = ComplexLaunch(real_launch, rt, p.m, p.n, p.k, p.count, size, a, b, c, dest, (sa, sb, sc, sd), batched, _conj(p))
    plan = Plan(be.name, inner.variant, f"{p.dtype.name} as {METHOD}; each a {real} product on the {real} rung: {inner.reason}",
                p, device=inner.device, layouts=host_layouts(p), padding=inner.padding, candidates=inner.candidates)
    lda, ldb, ldc = launch.lds
    plan.copies = ["a -> Ar, Ai; b -> Br, Bi" + ("; c -> Cr, Ci (beta != 0)" if p.c is not None and p.beta != 0 else "")
                   + f"; Cr, Ci -> the result's real and imaginary parts: compact row-major {real} planes (pitches {lda}, {ldb}, "
                   f"{ldc}: rows padded to 16 bytes) in stream-ordered scratch of {launch.nbytes} bytes, freed after the call"]
    if p.residency == "host":
        plan.copies.insert(0, "host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
    plan.launch = dict(inner.launch)
    plan.launch["complex"] = f"4M: 4 {real} products of this launch plan per " + ("call" if p.count == 1 else "batch")
    if p.count > 1:
        plan.launch["batch"] = ("one planar copy of the whole batch, each of the 4 products one batched launch" if launch.batched
                                else f"one planar copy of the whole batch, then {p.count} products per real product, one launch "
                                     f"each (the rung has no batched build): {4 * p.count} launches")
    plan.notes = list(inner.notes)
    conjugated = [name for name, flag in zip("abc", launch.conj) if flag]
    if conjugated:
        plan.notes.append(f"{', '.join(conjugated)}: torch's lazy conjugate, read as torch reads it: its imaginary plane copied "
                          f"negated (no conjugated copy made)")
    if p.dtype.name == "complex64":
        plan.notes.append(f"precision={p.precision!r} applies to the four float32 products")
    plan.private = CudaPlan(launch, p.result_layout, (sa, sb, sc, sd), rt)
    return plan


def _conj(p: GemmProblem) -> tuple[bool, bool, bool]:
    """Which of A, B and C0 hold their values' conjugates (read with the imaginary plane negated)."""
    return (p.a.conj, p.b.conj, p.c is not None and p.c.conj)


def queue_complex(p: GemmProblem, decided: CudaPlan, call: Call, dest: int, stream: int) -> None:
    """Queue a complex call's work on ``stream`` into ``dest`` (the device's context current)."""
    launch = decided.launch
    assert isinstance(launch, ComplexLaunch)
    reads_c = call.c is not None and call.beta != 0.0
    launch.run(call.a_ptr, call.b_ptr, call.c_ptr if reads_c else 0, dest, call.alpha, call.beta, stream, launch.conj)


def run_complex_host(rt: CudaRuntime, p: GemmProblem, decided: CudaPlan, call: Call) -> Any:
    """A complex product of host operands: compact uploads, the device run, the result copied back."""
    launch = decided.launch
    assert isinstance(launch, ComplexLaunch)
    layout = decided.result_layout
    out = call.out
    if p.m * p.n * p.count == 0:
        return store_result(np.zeros(p.result_shape, p.out_dtype), out)
    drv = rt.drv
    launch.build()  # built before any allocation
    sa, sb, sc, _ = launch.strides
    allocs: list[Any] = []
    try:
        def upload(host: Any, layout_: str, stride: int) -> int:
            host = np.asarray(host, dtype=p.dtype)
            if host.ndim > 2 and stride == 0:  # broadcast over the batch: one matrix
                host = host.reshape(host.shape[-2:])
            arr = np.ascontiguousarray(host if layout_ == "row" else np.swapaxes(host, -1, -2))
            buf = rt.allocate(max(arr.nbytes, 1))
            allocs.append(buf)
            drv.memcpy_htod(buf, raw_view(arr))
            return int(buf)

        a = upload(call.a, p.a.layout, sa)
        b = upload(call.b, p.b.layout, sb)
        c = upload(np.broadcast_to(call.c, p.result_shape) if sc else call.c, layout, sc) \
            if call.c is not None and call.beta != 0.0 else 0
        buf = rt.allocate(p.count * p.m * p.n * p.out_dtype.itemsize)
        allocs.append(buf)
        launch.run(a, b, c, int(buf), call.alpha, call.beta, 0)
        if layout == "row":
            res = np.empty(p.result_shape, p.out_dtype)
        else:
            res = np.swapaxes(np.empty(p.batch + (p.n, p.m), p.out_dtype), -1, -2)
        drv.memcpy_dtoh(raw_view(res if layout == "row" else np.swapaxes(res, -1, -2)), int(buf))  # waits for the launches
    finally:
        for x in allocs:
            x.free()
    return store_result(res, out)
