"""The error bound every correctness check uses (ARCHITECTURE.md, "Numerics").

A result C is correct when, elementwise, ``|C - C_ref| <= tol`` with

    tol = c * K * u_acc * |alpha| * (|A| @ |B|) + c * u_acc * |beta| * |C_in|
          + u_out * |C_ref| + tiny_out

``C_ref`` is the float64 reference, ``u_acc`` the unit roundoff of the accumulation type,
``u_out`` that of the output type and ``tiny_out`` its smallest normal (so results that
underflow are not failed). Unit roundoffs: 2**-11 float16, 2**-8 bfloat16, 2**-24 float32,
2**-53 float64; float16 and bfloat16 inputs accumulate in float32. Where the exact value is not finite (an infinity
or a NaN among the operands), the result must be that infinity, or NaN where it is NaN. Where it is finite, an
infinity of its sign passes where the value within the bound reaches past the result dtype's largest number (its
rounding may overflow: a float16 result of 65519.9 summed in float32); and where ``|alpha| |A| @ |B|`` passes the
accumulator's range (``error_bound`` gives an infinite bound there), an infinity of the sign whose terms may overflow,
or a NaN where both signs' may, while a finite result, whose sums did not overflow, is held to the bound of its terms.
A float64 reference whose own sums overflow though the operands are finite is computed in the machine's long double
where that is wider.

A complex product is bounded as the real one it equals (``[[Ar, -Ai], [Ai, Ar]] · [[Br], [Bi]]``, over 2K, its
parts of complex64 float32's, of complex128 float64's): :func:`check_result` holds each part of each element to its
own bound (:func:`error_bound` gives each element the larger of its parts'); where the reference is not finite in
either part, the result must not be finite either (complex arithmetic makes Inf + NaN·i or NaN + NaN·i of one
infinity of the inputs, as its order of operations goes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import math
import sys

from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..core.complex_form import part_dtype, real_form, stacked
from ..core.dtypes import COMPLEX_DTYPES, HALF_DTYPES, SUPPORTED_DTYPES, as_dtype, finfo, native_dtype, parse_dtype
from ..core.inputs import ArrayInput, ScalarInput
from ..core.layout import check_c_shape, check_ndim
from ..core.precision import MEDIUM_INPUT_ERROR, parse_precision
from ..core.scalars import parse_scalar
from ..interop.cuda_array_interface import device_interface
from ..interop.dlpack import dlpack_interface
from ..interop.torch import torch_resolved

__all__ = ["unit_roundoff", "accumulation_dtype", "error_bound", "check_result", "reference_for", "Reference", "CheckResult", "assert_close"]

#: Default safety constant ``c`` of the bound.
BOUND_CONSTANT = 2.0
#: the dtypes the bound is defined for
BOUNDED_DTYPES: tuple[str, ...] = SUPPORTED_DTYPES + COMPLEX_DTYPES


def unit_roundoff(dtype: object) -> float:
    """Unit roundoff (half an ulp of 1) of a floating dtype: 2**-24 for float32, 2**-8 for
    bfloat16 (8 significant bits); DTypeError for a dtype that has none (an integer dtype, None)."""
    return float(finfo(_float_dtype("dtype", dtype)).eps) / 2.0


def accumulation_dtype(dtype: object) -> np.dtype:
    """The accumulation type polygemm promises for inputs of ``dtype`` (fp16, bf16 -> fp32)."""
    d = _float_dtype("dtype", dtype)
    return np.dtype(np.float32) if d.name in HALF_DTYPES else d


def _float_dtype(name: str, value: object) -> np.dtype:
    """``out_dtype`` / ``acc_dtype`` as one of polygemm's dtypes; DTypeError naming ``name`` otherwise
    (NumPy's own "data type 'int8' not inexact" named neither the argument nor what is accepted). None is no dtype
    here (NumPy would read it as float64)."""
    if value is None:
        raise DTypeError(f"{name}=None is no dtype; pass one of {', '.join(BOUNDED_DTYPES)}")
    try:
        dt = as_dtype(value)
    except TypeError:  # torch.float32 and the like by name, else a DTypeError naming ``name``
        dt = parse_dtype(name, value)
    dt = native_dtype(dt)  # inputs in another byte order (a.dtype of '>f4'): the values are what is compared
    if dt.name not in BOUNDED_DTYPES:
        raise DTypeError(f"{name}={value!r} is {dt.name}; pass one of {', '.join(BOUNDED_DTYPES)}")
    return dt


def host_array(name: str, x: object) -> np.ndarray:
    """``x`` as a NumPy array of its values, whatever array a gemm took or returned: NumPy's, torch's (CPU or CUDA,
    bfloat16 too, gradient and lazy negation aside), CuPy's, or another DLPack array's. ``np.asarray`` had refused
    a torch bfloat16 tensor ("unsupported ScalarType BFloat16"), though gemm takes and returns them."""
    if isinstance(x, np.ndarray):
        return x
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        t = torch_resolved(name, x.detach()).cpu()  # a lazy negation read as its values, as gemm reads it
        if t.dtype != torch.bfloat16:
            viewed: np.ndarray = t.numpy()
            return viewed
        x = t  # bfloat16: through DLPack below, as gemm reads it (ml_dtypes.bfloat16)
    get = getattr(x, "get", None)
    if callable(get) and type(x).__module__.partition(".")[0] == "cupy":
        return np.asarray(get())
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            kind, data, _ = dlpack_interface(name, x)
        except Exception:  # noqa: BLE001 - NumPy's own reading below says what is wrong
            kind = ""
        if kind == "host":
            return np.asarray(data)
    if x is None or isinstance(x, (str, bytes)):
        raise ArgumentTypeError(f"{name} must be an array (the product to check); got {type(x).__name__}")
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # a ragged list: NumPy's "setting an array element with a sequence"
        raise ShapeError(f"{name} is not an array of one shape (a ragged list?): {exc}") from None
    if arr.dtype == object and arr.ndim == 0:
        # another device's array (a plugin's, a MusaArray): NumPy wraps it as one object, whose shape () would be
        # compared with the result's; its values are on the device, read back by its backend's to_host
        try:
            found = device_interface(x, name)
        except Exception:  # noqa: BLE001 - an interface that cannot be read: no device array either
            found = None
        if found is not None:
            raise ArgumentTypeError(f"{name} is a {type(x).__name__}, an array on device {found[0]!r}, whose values the "
                                    f"host cannot read: pass its backend's copy, polygemm.get_backend(...).to_host({name})")
    return arr


def _operands(a: object, b: object, c: object, alpha: object, beta: object) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, float, float]:
    """The arguments of :func:`error_bound` / :func:`reference_for` checked as ``gemm`` checks them,
    each refusal naming the argument: a plugin author's slip (``b.T`` for ``b``, a 1-D ``a``, an integer ``a``,
    a complex ``c`` beside real operands, a ``c`` of another shape, alpha given as a string) would otherwise meet
    NumPy's own errors, an IndexError, or pass with imaginary parts dropped."""
    arrays: list[np.ndarray | None] = []
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x is None and name == "c":
            arrays.append(None)
            continue
        arr = host_array(name, x)
        check_ndim(name, arr.shape)
        # not problem's dtype check: any of these dtypes is taken for c too (gemm wants c in the result's dtype)
        if arr.dtype.name not in BOUNDED_DTYPES:
            raise DTypeError(f"{name} has dtype {arr.dtype.name}; polygemm's bound is defined for {', '.join(BOUNDED_DTYPES)} "
                             f"(bfloat16: ml_dtypes.bfloat16); integer products are exact: compare them with numpy.matmul's")
        arrays.append(arr)
    a64, b64, c64 = arrays
    assert a64 is not None and b64 is not None
    # compared in native byte order, as gemm compares them (it reads a byte-swapped operand through a copy): a '>f4'
    # beside a '<f4' is one dtype
    if native_dtype(a64.dtype) != native_dtype(b64.dtype):
        raise DTypeError(f"a ({a64.dtype.name}) and b ({b64.dtype.name}) must have one dtype, as gemm takes them")
    if c64 is not None and (c64.dtype.kind == "c") != (a64.dtype.kind == "c"):  # as gemm refuses it: no part dropped
        raise DTypeError(f"c ({c64.dtype.name}) and a ({a64.dtype.name}) must both be complex or both real, as gemm takes "
                         f"them: c has the result's dtype")
    if a64.shape[-1] != b64.shape[-2]:
        raise ShapeError(f"a {a64.shape} and b {b64.shape} do not multiply: a has {a64.shape[-1]} columns, b {b64.shape[-2]} rows")
    try:
        lead = tuple(np.broadcast_shapes(a64.shape[:-2], b64.shape[:-2]))
    except ValueError:
        raise ShapeError(f"the batch dimensions of a {a64.shape} and b {b64.shape} do not broadcast") from None
    full = lead + (a64.shape[-2], b64.shape[-1])
    if c64 is not None:
        check_c_shape(c64.shape, full, a64.shape, b64.shape)
    if beta is None:  # as gemm defaults it: gemm(a, b, c) is a @ b + c
        beta = 0.0 if c is None else 1.0
    alpha_f, beta_f = parse_scalar("alpha", alpha), parse_scalar("beta", beta)
    if beta_f != 0.0 and c64 is None:  # as gemm refuses it: a check of a product gemm does not compute proves nothing
        raise ArgumentError(f"beta={beta_f!r} needs c: pass c (shape {full}) or beta=0, as polygemm.gemm takes them")
    return a64, b64, c64, alpha_f, beta_f


def error_bound(
    a: ArrayInput,
    b: ArrayInput,
    c: ArrayInput | None = None,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    *,
    out_dtype: object = None,
    acc_dtype: object = None,
    ref: ArrayInput | None = None,
    constant: float = BOUND_CONSTANT,
    precision: str | None = None,
) -> np.ndarray:
    """Elementwise tolerance for ``alpha * a @ b + beta * c`` (see the module docstring); ``beta`` defaults as
    ``polygemm.gemm`` defaults it (1 with ``c``, else 0), here and in :func:`reference_for`, :func:`check_result` and
    :func:`assert_close`. ``precision`` (``"highest"``, ``"high"``, ``"medium"``; None: ``"highest"``) is the class the
    product was computed at: ``"medium"`` allows float32 inputs rounded once to bfloat16 (2·2^-8 of ``|A|@|B|`` more);
    other dtypes are computed as they are, whatever it says.

    ``ref``: the float64 reference, when the caller has it; without it the reference is computed
    here, since its ``u_out * |C_ref|`` term (the rounding of the result to its dtype) is part of
    the bound: without it, a float16 or bfloat16 result rounded correctly would be many times
    ``error_bound(a, b)`` off the reference."""
    return _bounds(a, b, c, alpha, beta, out_dtype=out_dtype, acc_dtype=acc_dtype, ref=None if ref is None else np.asarray(ref),
                   constant=constant, precision=precision)[0]


def _bounds(a: object, b: object, c: object, alpha: object, beta: object, *, out_dtype: object, acc_dtype: object,
            ref: np.ndarray | None, constant: float, precision: str | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`error_bound`'s bound, and the bound of a finite result: the same but where a partial sum may overflow the
    accumulator (its bound infinite there: an infinity or a NaN is a right answer), where a finite result means none
    did, and the terms of the sums bound it as anywhere else."""
    a, b, c, alpha, beta = _operands(a, b, c, alpha, beta)
    if not (isinstance(constant, (int, float, np.integer, np.floating)) and not isinstance(constant, bool)
            and math.isfinite(constant) and constant >= 0):
        raise ArgumentError(f"constant must be a finite real number >= 0 (the bound's safety factor, {BOUND_CONSTANT} by default); "
                            f"got {constant!r}")
    medium = precision is not None and parse_precision(precision) == "medium"
    if ref is not None:  # the caller's reference: of the result's shape (a scalar would broadcast to any bound)
        full = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (a.shape[-2], b.shape[-1])
        ref = np.asarray(ref)
        complex_in = native_dtype(a.dtype).kind == "c"
        if ref.shape != full or ref.dtype.kind not in ("c" if complex_in else "fiu"):
            raise ShapeError(f"ref must be the {'complex128' if complex_in else 'float64'} reference of the result's shape "
                             f"{full}; got {ref.dtype.name} of shape {ref.shape}")
    if native_dtype(a.dtype).name in COMPLEX_DTYPES:
        both = _complex_bound(a, b, c, alpha, beta, out_dtype, acc_dtype, ref, constant, precision)
        return both, both
    if ref is None:
        from ..backends.cpu_ref import reference

        ref = reference(a, b, c, alpha, beta, np.float64)
    a64 = np.abs(np.asarray(a, dtype=np.float64))
    b64 = np.abs(np.asarray(b, dtype=np.float64))
    out_dtype = _result_dtype(a, out_dtype)
    acc = _acc_dtype(a, acc_dtype)
    u_acc, u_out = unit_roundoff(acc), unit_roundoff(out_dtype)
    k = a64.shape[-1]
    # all="ignore": products that underflow or overflow are the cases the bound is written for (tiny_out,
    # infinities), never an error, whatever np.seterr says (seterr(all="raise") would make them raise)
    with np.errstate(all="ignore"):
        # where |A| @ |B| overflows float64, so does the bound: any finite result is within it (taken as 0, the exact
        # answer of a product that cancels, [1e308, 1, -1e308] @ ones, would fail)
        u_in = MEDIUM_INPUT_ERROR if medium and native_dtype(a.dtype).name == "float32" else 0.0
        scale = abs(alpha) * (a64 @ b64)
        tol = (constant * max(k, 1) * u_acc + u_in) * np.nan_to_num(scale, nan=0.0, posinf=np.inf)
        finite = tol
        if acc != np.float64:  # |alpha| |A| @ |B| past the accumulator's range: a partial sum may rightly overflow
            tol = np.where(scale > float(finfo(acc).max), np.inf, tol)
        rest: Any = float(finfo(out_dtype).tiny)
        if beta != 0.0 and c is not None:
            rest = rest + constant * u_acc * abs(beta) * np.nan_to_num(np.abs(np.asarray(c, dtype=np.float64)), nan=0.0, posinf=0.0)
        if ref is not None:
            rest = rest + u_out * np.nan_to_num(np.abs(ref), nan=0.0, posinf=0.0)
    return tol + rest, finite + rest


def _acc_dtype(a: np.ndarray, acc_dtype: object) -> np.dtype:
    """The accumulator the bound assumes: ``acc_dtype`` checked, else the inputs' (float32 for 16-bit ones)."""
    return _float_dtype("acc_dtype", acc_dtype) if acc_dtype is not None else accumulation_dtype(native_dtype(a.dtype))


def _result_dtype(a: np.ndarray, out_dtype: object) -> np.dtype:
    """``out_dtype`` (None: ``a``'s) checked as :func:`_float_dtype` checks it, complex for complex inputs only and
    real for real ones (gemm computes no other)."""
    out = _float_dtype("out_dtype", out_dtype if out_dtype is not None else a.dtype)
    if (out.kind == "c") != (native_dtype(a.dtype).kind == "c"):
        raise DTypeError(f"out_dtype={out.name} for {a.dtype.name} inputs: a complex product has a complex result and a "
                         f"real one a real result; pass out_dtype=None (the inputs' dtype)")
    return out


def _complex_bound(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, alpha: float, beta: float, out_dtype: object,
                   acc_dtype: object, ref: np.ndarray | None, constant: float, precision: str | None) -> np.ndarray:
    """:func:`error_bound` of a complex product: each element's the larger of its parts' (:func:`_parts_bound`)."""
    return _larger_part(_parts_bound(a, b, c, alpha, beta, out_dtype, acc_dtype, ref, constant, precision))


def _larger_part(parts: np.ndarray) -> np.ndarray:
    """Each element's larger bound of the two parts' (``parts``: the real parts' rows over the imaginary parts')."""
    m = parts.shape[-2] // 2
    larger: np.ndarray = np.maximum(parts[..., :m, :], parts[..., m:, :])
    return larger


def _parts_bound(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, alpha: float, beta: float, out_dtype: object,
                 acc_dtype: object, ref: np.ndarray | None, constant: float, precision: str | None) -> np.ndarray:
    """The bound of a complex product's parts: the real form's (its operands in the parts' dtype, exact), the real
    parts' rows over the imaginary parts'."""
    part = part_dtype(native_dtype(a.dtype))
    out = part_dtype(_result_dtype(a, out_dtype))
    acc = part_dtype(_float_dtype("acc_dtype", acc_dtype)) if acc_dtype is not None else part
    big, b_ = real_form(a, b)
    c_ = stacked(c).astype(out) if c is not None and beta != 0.0 else None
    return error_bound(big.astype(part), b_.astype(part), c_, alpha, beta, out_dtype=out, acc_dtype=acc,
                       ref=None if ref is None else stacked(ref), constant=constant, precision=precision)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing a result with the reference under the bound."""

    ok: bool
    violations: int
    worst_ratio: float
    message: str

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Reference:
    """The float64 reference and its elementwise bound, computed once, compared often (a complex product's: its
    complex128 reference, each element's bound the larger of its parts'; ``parts``, where given, each part's own,
    the real parts' rows over the imaginary parts', which :meth:`compare` holds each part to)."""

    ref64: np.ndarray
    tol: np.ndarray
    out_dtype: np.dtype
    parts: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: the bound of a finite result where ``tol`` is infinite because a partial sum may overflow the accumulator (a
    #: finite result means none did); None: ``tol`` throughout
    finite_tol: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: where a partial sum may overflow to +inf, and where to -inf (the positive and the negative terms' sums past the
    #: accumulator's range); None: nowhere
    overflows: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def compare(self, result: ArrayInput) -> CheckResult:
        """Check ``result`` elementwise against the reference under the bound. A result of another
        shape, or an array of another dtype than the reference's ``out_dtype``, fails saying so."""
        given = getattr(result, "dtype", None)
        result = host_array("result", result)
        if result.shape != self.ref64.shape:
            return CheckResult(False, -1, float("inf"), f"result has shape {result.shape}, expected {self.ref64.shape}")
        # an array of another dtype fails by its dtype, saying so: a float16 result for float32 inputs is no matter of
        # the bound, and a float64 one would pass it (gemm's contract broken)
        if given is not None and result.dtype.name != self.out_dtype.name:  # by name: byte order is no matter
            # the hint only where it applies, a float32 result of 16-bit inputs (not a float16 result checked with
            # out_dtype=np.float32 given: narrower, and out_dtype passed already)
            wider = result.dtype.name == "float32" and self.out_dtype.name in HALF_DTYPES
            return CheckResult(False, -1, float("inf"), f"result has dtype {result.dtype.name}, expected {self.out_dtype.name}"
                                                        + (" (pass out_dtype=np.float32 for a result stored wider)" if wider else ""))
        ref64, tol, out_dtype = self.ref64, self.tol, self.out_dtype
        m = ref64.shape[-2]
        parts = ref64.dtype.kind == "c"
        with np.errstate(all="ignore"):  # a signalling NaN (a flipped exponent bit) raises the invalid flag as it widens
            if parts:  # each element's real and imaginary parts, each within its part's bound
                tol = self.parts if self.parts is not None else np.concatenate([tol, tol], -2)
                ref64, r, out_dtype = stacked(ref64), stacked(result), part_dtype(out_dtype)
            else:
                r = result.astype(np.float64)
        # What overflows the output format: the reference rounded to it is the target. That rounding overflows
        # (and underflows) on purpose: all="ignore" keeps it quiet whatever np.seterr or -W error says
        # (np.seterr(all="raise") would raise FloatingPointError for exactly the results compared here).
        with np.errstate(all="ignore"):
            ref_out = ref64.astype(out_dtype).astype(np.float64) if out_dtype != np.float64 else ref64
        nan_ref = np.isnan(ref_out)
        inf_ref = np.isinf(ref_out)
        finite = ~(nan_ref | inf_ref)
        with np.errstate(all="ignore"):
            err = np.abs(r - ref64)
            if parts:
                bad = (nan_ref & ~np.isnan(r)) | (inf_ref & (r != ref_out)) | (finite & ~(err <= tol))  # NaN in r fails
                ratio = np.where(finite, err / tol, 0.0)
            else:
                bad, ratio, finite, tol = self._real_violations(r, ref64, tol, err, out_dtype)
        size = r.size
        if parts:
            # an element whose exact reference is not finite in either part (an infinity or NaN of the inputs): complex
            # arithmetic gives Inf + NaN·i or NaN + NaN·i as its order of operations goes (BLAS the latter), so the
            # result must not be finite either (in some part); the other elements part by part (a part that overflows
            # the result's dtype must match the reference's infinity, the other stay within its own bound)
            off = ~np.isfinite(ref64[..., :m, :]) | ~np.isfinite(ref64[..., m:, :])
            lost = off & np.isfinite(r[..., :m, :]) & np.isfinite(r[..., m:, :])
            # where one part overflows the result's dtype, scaling the element by alpha (a complex multiply: Inf·0) may
            # make the other part a NaN: taken as the overflow's, a finite wrong value there still fails
            over = inf_ref[..., :m, :] | inf_ref[..., m:, :]
            nan_ok = np.concatenate([over, over], -2) & np.isnan(r)
            bad = bad & ~nan_ok
            bad = np.concatenate([lost | (~off & bad[..., :m, :]), ~off & bad[..., m:, :]], -2)
            size //= 2
        count = int(bad.sum()) if not parts else int((bad[..., :m, :] | bad[..., m:, :]).sum())
        worst = float(np.nanmax(ratio)) if ratio.size and np.isfinite(ratio).any() else (float("inf") if count else 0.0)
        if count and not worst > 1.0:  # a violation the ratio cannot measure (a NaN, an infinity off the reference)
            worst = float("inf")
        if count == 0:
            return CheckResult(True, 0, worst, f"all {size} elements within the bound (worst error/bound = {worst:.3g})")
        idx = tuple(int(x) for x in np.argwhere(bad)[0])
        where, part = idx, ""
        if parts:  # named by the element and its part
            row = idx[-2]
            where, part = idx[:-2] + (row % m, idx[-1]), (" (real part)" if row < m else " (imaginary part)")
        return CheckResult(
            False,
            count,
            worst,
            # the values as numbers: NumPy 2's repr of the float64 copies ("got np.float64(nan)") would name a float64
            # for a float32 or float16 result
            f"{count} of {size} elements outside the bound; first at {where}{part}: got {float(r[idx])!r}, reference "
            f"{float(ref64[idx])!r}, bound {tol[idx]:.3g}"
            + (f" (error {err[idx]:.3g}, {ratio[idx]:.3g}x the bound)" if np.isfinite(ratio[idx]) and finite[idx]
               and np.isfinite(err[idx]) else ""),
        )


    def _real_violations(self, r: np.ndarray, ref64: np.ndarray, tol: np.ndarray, err: np.ndarray,
                         out_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The elements of a real result off the reference (and each error's ratio to its bound, where the reference
        is finite, and the bound each element was held to). Where the exact value is finite: a finite result within the bound (where a partial sum
        may overflow the accumulator, the bound of a finite result: none did), an infinity of its sign where the
        value's rounding to the result's dtype may overflow it (within the bound of its largest finite number), or
        a NaN or an infinity where a partial sum may overflow. Where it is not (an infinity or a NaN of the inputs):
        the same infinity, or a NaN."""
        exact = np.isfinite(ref64)
        over = np.isinf(tol) & exact
        bound = tol if self.finite_tol is None else np.where(over, self.finite_tol, tol)
        r_finite = np.isfinite(r)
        within = r_finite & (err <= bound)
        rounded_over = np.isinf(r) & (np.sign(r) == np.sign(ref64)) & (np.abs(ref64) + bound >= float(finfo(out_dtype).max))
        if self.overflows is not None:  # an infinity of a sign whose terms may overflow; NaN where both signs' may
            up, down = self.overflows
            over = over & ((np.isposinf(r) & up) | (np.isneginf(r) & down) | (np.isnan(r) & up & down))
        else:
            over = over & ~r_finite
        ok = np.where(exact, within | rounded_over | over, (np.isnan(ref64) & np.isnan(r)) | (r == ref64))
        return ~ok, np.where(exact & r_finite, err / bound, 0.0), exact, bound


def _overflow_signs(a: np.ndarray, b: np.ndarray, alpha: float, acc: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Where the sum of ``alpha * a @ b``'s positive terms passes ``acc``'s range, and where its negative terms' does:
    a partial sum may overflow to +inf, or to -inf, only there (to NaN only where both may)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ap, an, bp, bn = np.maximum(a64, 0.0), np.maximum(-a64, 0.0), np.maximum(b64, 0.0), np.maximum(-b64, 0.0)
    with np.errstate(all="ignore"):
        up, down = abs(alpha) * (ap @ bp + an @ bn), abs(alpha) * (ap @ bn + an @ bp)
    limit = float(finfo(acc).max)
    return (up > limit, down > limit) if alpha >= 0 else (down > limit, up > limit)


def _wide_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, alpha: float, beta: float) -> np.ndarray | None:
    """The reference where float64's own sums overflow though the operands are finite (``[1e200, -1e200, 1] @ [1e200,
    1e200, 5]`` is 5, float64's NaN): computed in the wider long double where this machine has one, rounded once to
    float64; None where it has none."""
    wide = np.longdouble
    if float(np.finfo(wide).max) <= float(np.finfo(np.float64).max):
        return None
    with np.errstate(all="ignore"):
        acc = np.matmul(np.asarray(a, dtype=wide), np.asarray(b, dtype=wide)) * wide(alpha)
        if beta != 0.0 and c is not None:
            acc = acc + wide(beta) * np.asarray(c, dtype=wide)
        rounded: np.ndarray = acc.astype(np.float64)
        return rounded


def reference_for(
    a: ArrayInput,
    b: ArrayInput,
    c: ArrayInput | None = None,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    *,
    out_dtype: object = None,
    acc_dtype: object = None,
    precision: str | None = None,
) -> Reference:
    """Compute the float64 reference of ``alpha * a @ b + beta * c`` and its bound once."""
    from ..backends.cpu_ref import reference

    a, b, c, alpha, beta = _operands(a, b, c, alpha, beta)
    out = _result_dtype(a, out_dtype)
    if out.kind == "c":
        ref64 = reference(a, b, c, alpha, beta, np.complex128)
        each = _parts_bound(a, b, c, alpha, beta, out, acc_dtype, ref64, BOUND_CONSTANT, precision)
        return Reference(ref64, _larger_part(each), out, each)
    ref64 = reference(a, b, c, alpha, beta, np.float64)
    if not np.isfinite(ref64).all() and all(x is None or np.isfinite(x).all() for x in (a, b, c if beta != 0.0 else None)):
        wide = _wide_reference(a, b, c, alpha, beta)  # float64's own sums overflowed: the exact value, where it can be had
        ref64 = ref64 if wide is None else wide
    tol, finite = _bounds(a, b, c, alpha, beta, out_dtype=out, acc_dtype=acc_dtype, ref=ref64, constant=BOUND_CONSTANT,
                          precision=precision)
    signs = None
    if (np.isinf(tol) & np.isfinite(ref64)).any():  # (rare: partial sums that may overflow the accumulator)
        acc = _acc_dtype(a, acc_dtype)
        signs = _overflow_signs(a, b, alpha, acc)
    return Reference(ref64, tol, out, finite_tol=finite, overflows=signs)


def check_result(
    result: ArrayInput,
    a: ArrayInput,
    b: ArrayInput,
    c: ArrayInput | None = None,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    *,
    out_dtype: object = None,
    acc_dtype: object = None,
    precision: str | None = None,
) -> CheckResult:
    """Compare ``result`` with the float64 reference elementwise under :func:`error_bound`."""
    return reference_for(a, b, c, alpha, beta, out_dtype=out_dtype, acc_dtype=acc_dtype, precision=precision).compare(result)


def assert_close(result: ArrayInput, a: ArrayInput, b: ArrayInput, c: ArrayInput | None = None, alpha: ScalarInput = 1.0,
                 beta: ScalarInput | None = None, **kw: object) -> None:
    """Raise AssertionError with details unless ``result`` is within the bound."""
    res = check_result(result, a, b, c, alpha, beta, **kw)  # type: ignore[arg-type]
    if not res.ok:
        raise AssertionError(res.message)
