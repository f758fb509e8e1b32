"""The ``cpu`` backend: NumPy's BLAS for users, and the reference every backend is verified against.

``variant="auto"`` runs ``blas``: ``numpy.matmul`` in the input precision (float16 and
bfloat16 through float32, their accumulation type). ``reference`` computes in float64 and
rounds once to the output dtype, so its only error is that final rounding; every check
compares with it. ``numpy`` is the same computation as ``blas`` kept as the CPU vendor column
of benchmarks (never auto). bfloat16 arrays are ``ml_dtypes.bfloat16`` NumPy arrays.

Complex and integer inputs are computed as ``numpy.matmul`` computes them: complex64 and
complex128 through the complex BLAS (their reference in complex128), integers exactly in their
own dtype, wrapping modulo 2**bits on overflow (the reference in 64-bit integers, whose wrap
then cast is the same residue), bool as the logical product. Every float32 path is SGEMM-level,
so each precision ("highest", "high", "medium") is met by computing as it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ...backend import Availability, Backend, Plan, Variant, check_call, host_layouts, store_result
from ...core.dtypes import COMPLEX_DTYPES, INTEGER_DTYPES
from ...problem import HALF_DTYPES, Call, GemmProblem, as_dtype
from ...core.exact import exact_integer_product

__all__ = ["CpuReferenceBackend", "reference", "round_once"]

_DTYPES = ("float16", "bfloat16", "float32", "float64") + COMPLEX_DTYPES + INTEGER_DTYPES
_VARIANTS = (
    Variant("blas", _DTYPES, "numpy.matmul (the CPU BLAS) in the input precision, float16 and bfloat16 through float32: what auto runs",
            layout="any", out_dtypes=("float32",)),
    Variant("reference", _DTYPES, "float64 (complex128; integers: exact) product of the inputs, rounded once to the output dtype "
            "(what every check compares with)", layout="any", auto=False, out_dtypes=("float32",)),
    Variant("numpy", _DTYPES, "numpy.matmul in the input precision, float16 and bfloat16 through float32 (the CPU BLAS; vendor column of benchmarks)",
            layout="any", auto=False, vendor=True, out_dtypes=("float32",)),
)


def round_once(x: np.ndarray, dtype: Any) -> np.ndarray:
    """float64 ``x`` rounded to ``dtype`` once, to nearest (ties to even).

    NumPy's casts do that for its own types; ml_dtypes casts float64 to bfloat16 through
    float32, two roundings that can land one bfloat16 ulp off. For bfloat16, ``x`` is first
    rounded to float32 *to odd* (truncated, the last bit set when anything was dropped):
    float32 keeps 16 more bits than bfloat16, so the second rounding is then exact.
    """
    d = as_dtype(dtype)
    if d.name != "bfloat16":
        return x.astype(d)
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        away = np.abs(f.astype(np.float64)) > np.abs(x)  # rounded away from zero (inf included): step back
        f = np.where(away, np.nextafter(f, np.float32(0)), f)
        inexact = np.isfinite(x) & (f.astype(np.float64) != x)
        bits = f.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32).astype(d)


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0, dtype: Any = None) -> np.ndarray:
    """``alpha * a @ b + beta * c`` computed in float64, rounded once to ``dtype``.

    ``dtype`` defaults to ``a``'s. ``c`` is not read when ``beta == 0`` (BLAS semantics:
    NaN in ``c`` does not propagate then). Complex inputs are computed in complex128, integer
    and bool inputs exactly (:func:`~polygemm.core.exact.exact_integer_product`).
    """
    out_dtype = as_dtype(dtype if dtype is not None else np.asarray(a).dtype)
    if out_dtype.name in INTEGER_DTYPES:
        return exact_integer_product(np.asarray(a), np.asarray(b), c, alpha, beta, out_dtype)
    wide = np.complex128 if np.asarray(a).dtype.kind == "c" or out_dtype.kind == "c" else np.float64
    with np.errstate(all="ignore"):  # NaN/Inf propagate and results underflow as IEEE says, whatever np.seterr says
        acc = np.matmul(np.asarray(a, dtype=wide), np.asarray(b, dtype=wide))
        if alpha != 1.0:
            acc *= alpha
        if beta != 0.0 and c is not None:
            acc += beta * np.asarray(c, dtype=wide)
        return round_once(acc, out_dtype)


# Not polygemm.core.scalars.fits_float32, on purpose: that one tests the value itself against float32's
# range (a GPU kernel's scalar must be in range before conversion), this one the value after
# NumPy's rounding to ``work`` (float32 or float64 here). They differ only where the rounding
# lands inside the range: |value| in (FLOAT32_MAX, 2**128 - 2**103), rounding down to FLOAT32_MAX,
# and in [2**-126 - 2**-150, 2**-126), rounding up to the smallest normal. There this accepts
# float32 (off by under half a float32 ulp) and fits_float32 would send the scaling to float64,
# changing some results (78 of a 64x64 float32 product's 4096 at alpha = 2**-126 - 2**-151).
def _scaled(res: np.ndarray, work: Any, alpha: float, beta: float, c: np.ndarray | None) -> np.ndarray:
    """``alpha * res + beta * c`` (``c`` None: no term) in ``work``, in place in ``res`` (of that dtype)."""
    if alpha != 1.0:
        res *= work(alpha)
    if c is not None:
        res += work(beta) * c.astype(work, copy=False)
    return res


def _fits(work: Any, value: float) -> bool:
    """Whether ``value`` survives conversion to ``work``: no overflow, and no nonzero below the
    work type's normal numbers unless exactly representable there (a float32 subnormal keeps
    fewer bits: alpha=1e-45 would scale by 1.4e-45, every result 40% off polygemm's bound)."""
    with np.errstate(over="ignore", under="ignore"):
        w = work(value)
    if not np.isfinite(w):
        return False
    # (abs and .real: a complex work type holds a real alpha in its real part)
    return value == 0.0 or float(abs(w)) >= float(np.finfo(work).tiny) or float(w.real) == value


def _quiet_state() -> Any:
    """NumPy 2's error state is a context variable holding an "extobj"; np.errstate makes a new one on every entry,
    half the cost of a small product's whole call. The quiet one is made once here and set and reset around each
    product, as np.errstate itself does (per thread and per asyncio task, restored on the way out; its buffer size
    and error callback are those at import). None where NumPy
    has no such variable (1.x: a global error object), or where setting it does not make np.geterr() all "ignore"
    (internals changed): np.errstate then, as a decorator."""
    try:
        from numpy._core._multiarray_umath import _extobj_contextvar, _make_extobj  # type: ignore[import-not-found, unused-ignore]

        quiet = _make_extobj(all="ignore")
        token = _extobj_contextvar.set(quiet)
        try:
            seen = np.geterr()
        finally:
            _extobj_contextvar.reset(token)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if set(seen.values()) != {"ignore"}:
        return None
    return quiet, _extobj_contextvar.set, _extobj_contextvar.reset


_STATE = _quiet_state()
if _STATE is not None:
    _QUIET, _set_state, _reset_state = _STATE
else:
    _QUIET = None


_matmul = np.matmul
#: the work types whose products can overflow where float64's do not
_NARROW = (np.dtype(np.float32), np.dtype(np.complex64))


def _matmul_quietly(a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """numpy.matmul with inf and NaN as IEEE says, silently (as every other path), whatever np.seterr says."""
    token = _set_state(_QUIET)
    try:
        return _matmul(a, b, out)  # type: ignore[no-any-return]  # (out positional: the ufunc parses no keyword)
    finally:
        _reset_state(token)


if _QUIET is None:
    @np.errstate(all="ignore")  # one call sets and resets NumPy's error state
    def _matmul_quietly(a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        """numpy.matmul with inf and NaN as IEEE says, silently (as every other path), whatever np.seterr says."""
        return np.matmul(a, b, out=out)  # type: ignore[no-any-return]


# The product's rough time, for what explain says of a check beside it: rates measured on a 2-core x86-64 machine (AMD
# EPYC with AVX-512, NumPy 2.4 and its OpenBLAS), a BLAS thread's GFLOP/s of 2·M·N·K; float16 and bfloat16 are widened
# to float32 first and a result of theirs narrowed from it (ns an element, NumPy's casts); integers go through NumPy's
# own loops, on one thread, bool through NumPy's logical loop.
_GFLOPS_PER_THREAD = {"float32": 95.0, "float64": 50.0, "complex64": 25.0, "complex128": 12.0}
_HALF_WIDEN_NS = {"float16": 1.8, "bfloat16": 0.4}
_HALF_NARROW_NS = {"float16": 2.5, "bfloat16": 0.4}
_INTEGER_GFLOPS = 1.0
#: bool: NumPy's logical product, measured on random halves true (64 GFLOP/s-equivalent at 256³, 260 at 1000³; sparse
#: inputs run far slower)
_BOOL_GFLOPS = 100.0
_CALL_US = 5.0


def _blas_threads() -> int:
    """The threads the BLAS takes: as $OPENBLAS_NUM_THREADS, $OMP_NUM_THREADS or $MKL_NUM_THREADS say, else one a
    CPU this process may run on."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        try:
            threads = int(os.environ.get(var, ""))
        except ValueError:
            continue
        if threads > 0:
            return threads
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _CpuPlan:
    """What the cpu backend decided at plan time (``Plan.private``)."""

    #: numpy.matmul gives the result (into out, when given): nothing scaled, added or cast
    direct: bool
    #: the float64 reference, rounded once
    reference: bool
    #: float16 or bfloat16 inputs, computed in float32
    half: bool
    #: the dtype numpy.matmul computes in (its scalar type)
    work: Any
    out_dtype: np.dtype
    #: integer or bool inputs: computed exactly (alpha and beta whole numbers)
    integer: bool = False


class CpuReferenceBackend(Backend):
    """NumPy on the CPU: always available, priority 0 (``auto`` takes it last)."""

    name = "cpu"
    priority = 0
    residencies = ("host",)
    batched = True  # numpy.matmul broadcasts batches itself
    broadcasts_host_batches = True  # so a broadcast batch is not copied for it

    def verify_retry_variant(self, plan: Plan) -> str | None:
        """The variant ``verify="retry"`` runs: the float64 reference where the product ran on the BLAS (the same BLAS
        again would repeat a result it rounded or overflowed in the input precision), else the same again."""
        return "reference" if plan.variant != "reference" else None

    def product_cost_us(self, plan: Plan) -> float:
        """A rough estimate of ``plan``'s product in µs on this machine's BLAS (rates of a small x86-64 server, per
        BLAS thread: within a factor of two or so where the CPU is alike, further off elsewhere)."""
        p = plan.problem
        flops = 2.0 * p.count * p.m * p.n * p.k
        name = p.dtype.name
        if name == "bool":  # NumPy's own loop, which stops at the first pair of trues: dense inputs run fastest
            return _CALL_US + flops / (_BOOL_GFLOPS * 1e3)
        if name in INTEGER_DTYPES:
            return _CALL_US + flops / (_INTEGER_GFLOPS * 1e3)
        if plan.variant == "reference":  # in float64 (complex128), rounded once
            work = "complex128" if p.dtype.kind == "c" else "float64"
        else:
            work = "float32" if name in HALF_DTYPES else name
        us = _CALL_US + flops / (_GFLOPS_PER_THREAD.get(work, 50.0) * _blas_threads() * 1e3)
        if plan.variant != "reference":
            if name in HALF_DTYPES:
                us += p.count * (p.m * p.k + p.k * p.n) * _HALF_WIDEN_NS[name] / 1e3
            if p.out_dtype.name in HALF_DTYPES:
                us += p.count * p.m * p.n * _HALF_NARROW_NS[p.out_dtype.name] / 1e3
        return us

    def probe(self) -> Availability:
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        return _VARIANTS

    def device_name(self) -> str:
        import platform

        return f"CPU ({platform.machine() or 'unknown'}), NumPy {np.__version__}"

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        chosen = self.get_variant("blas" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        reason = "the CPU's BLAS through numpy.matmul (auto; variant='reference' is the float64 reference)" if variant == "auto" else f"variant={variant!r} requested"
        if problem.empty:
            reason += "; empty product (M, N or K is 0): no multiplication"
        plan = Plan(self.name, chosen.name, reason, problem, device=self.device_name(), layouts=host_layouts(problem))
        p = problem
        half = p.dtype.name in HALF_DTYPES
        integer = p.dtype.name in INTEGER_DTYPES
        if integer or p.dtype.name in COMPLEX_DTYPES:
            plan.notes.append(f"{p.dtype.name} is computed as numpy.matmul computes it ("
                              + ("exactly, wrapping modulo 2**bits on overflow" if p.dtype.kind in "iu" else
                                 "the logical product" if p.dtype.kind == "b" else "the complex BLAS")
                              + ("); the cpu backend computes it, where GPU backends refuse it (device='auto' takes it here)"
                                 if integer else "); the cuda backend computes it on the GPU as four real products"))
        # numpy.matmul gives the result itself, written straight into out (no temporary), when nothing is scaled,
        # added or cast (the cache key fixes alpha == 1 and beta == 0 for the plan's calls), and a new result of its
        # own is C-ordered: one matrix (a batch's result follows permuted batch axes of the operands)
        direct = chosen.name in ("numpy", "blas") and p.alpha == 1.0 and p.beta == 0.0 and not half and p.out_dtype == p.dtype \
            and (not p.batch or p.out is not None)
        plan.private = _CpuPlan(direct, chosen.name == "reference", half, np.float32 if half else p.dtype.type, p.out_dtype, integer)
        return plan

    def run(self, plan: Plan) -> Any:
        return self.execute(plan, Call.from_problem(plan.problem))

    def direct_host_call(self, plan: Plan) -> Callable[[Any, Any, Any], Any] | None:
        decided = plan.private
        return _matmul_quietly if isinstance(decided, _CpuPlan) and decided.direct else None

    def execute(self, plan: Plan, call: Call) -> Any:
        if not call.matched:
            check_call(plan, call)
        decided: _CpuPlan = plan.private
        if decided.direct:  # decided at plan time
            return _matmul_quietly(call.a, call.b, call.out)
        a, b, c, out = call.a, call.b, call.c, call.out
        if decided.reference or decided.integer:  # integers: numpy.matmul's residue, scaled and added exactly
            return store_result(reference(a, b, c, call.alpha, call.beta, decided.out_dtype), out)
        alpha, beta = call.alpha, call.beta
        work = decided.work
        with np.errstate(all="ignore"):
            if decided.half:  # float16 and bfloat16 go through float32, the accumulation type polygemm promises for them
                a, b = a.astype(work), b.astype(work)
            res = np.matmul(a, b)
            add = beta != 0.0 and c is not None
            if alpha != 1.0 or add:
                narrow = res.dtype in _NARROW
                if not (_fits(work, alpha) and _fits(work, beta)):
                    # scalars beyond the work type's range scale in float64 (complex128 for complex64)
                    work = np.complex128 if np.issubdtype(work, np.complexfloating) else np.float64
                    res = res.astype(work)
                res = _scaled(res, work, alpha, beta, c if add else None)
                if narrow and res.dtype in _NARROW and not np.isfinite(res).all():
                    # A·B, alpha·A·B or beta·c past float32's range where the sum may not be (a small alpha, a c of the
                    # other sign): all of it again in float64, where the reference computes it (a pass over the result,
                    # paid by calls that scale or add only)
                    work = np.complex128 if res.dtype.kind == "c" else np.float64
                    res = _scaled(np.matmul(a.astype(work), b.astype(work)), work, alpha, beta, c if add else None)
            if res.dtype != decided.out_dtype:
                res = res.astype(decided.out_dtype)
        if out is None:  # a result of its own, C-ordered whatever the operands' order (numpy.matmul's result follows
            # permuted batch axes, and the float32 copies of 16-bit operands keep their order)
            return res if res.flags.c_contiguous else np.ascontiguousarray(res)
        np.copyto(out, res)
        return out
