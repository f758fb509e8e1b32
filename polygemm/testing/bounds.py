"""The error bound every correctness check uses (ARCHITECTURE.md, "Numerics").

A result C is correct when, elementwise, ``|C - C_ref| <= tol`` with

    tol = c * K * u_acc * |alpha| * (|A| @ |B|) + c * u_acc * |beta| * |C_in|
          + u_out * |C_ref| + tiny_out

``C_ref`` is the float64 reference, ``u_acc`` the unit roundoff of the accumulation type,
``u_out`` that of the output type and ``tiny_out`` its smallest normal (so results that
underflow are not failed). NaN in the reference must be NaN in the result; an infinite
reference must be matched exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["unit_roundoff", "accumulation_dtype", "error_bound", "check_result", "CheckResult", "assert_close"]

#: Default safety constant ``c`` of the bound.
BOUND_CONSTANT = 2.0


def unit_roundoff(dtype: object) -> float:
    """Unit roundoff (half an ulp of 1) of a floating dtype: 2**-24 for float32."""
    return float(np.finfo(np.dtype(dtype)).eps) / 2.0


def accumulation_dtype(dtype: object) -> np.dtype:
    """The accumulation type polygemm promises for inputs of ``dtype`` (fp16 -> fp32)."""
    d = np.dtype(dtype)
    return np.dtype(np.float32) if d == np.float16 else d


def error_bound(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    *,
    out_dtype: object = None,
    acc_dtype: object = None,
    ref: np.ndarray | None = None,
    constant: float = BOUND_CONSTANT,
) -> np.ndarray:
    """Elementwise tolerance for ``alpha * a @ b + beta * c`` (see the module docstring)."""
    a64 = np.abs(np.asarray(a, dtype=np.float64))
    b64 = np.abs(np.asarray(b, dtype=np.float64))
    out_dtype = np.dtype(out_dtype if out_dtype is not None else np.asarray(a).dtype)
    acc = np.dtype(acc_dtype) if acc_dtype is not None else accumulation_dtype(np.asarray(a).dtype)
    u_acc, u_out = unit_roundoff(acc), unit_roundoff(out_dtype)
    k = a64.shape[1]
    with np.errstate(invalid="ignore", over="ignore"):
        tol = constant * max(k, 1) * u_acc * abs(alpha) * np.nan_to_num(a64 @ b64, nan=0.0, posinf=0.0)
        if beta != 0.0 and c is not None:
            tol += constant * u_acc * abs(beta) * np.nan_to_num(np.abs(np.asarray(c, dtype=np.float64)), nan=0.0, posinf=0.0)
        if ref is not None:
            tol += u_out * np.nan_to_num(np.abs(ref), nan=0.0, posinf=0.0)
    tol += float(np.finfo(out_dtype).tiny)
    return tol


@dataclass(frozen=True)
class CheckResult:
    """Outcome of comparing a result with the reference under the bound."""

    ok: bool
    violations: int
    worst_ratio: float
    message: str

    def __bool__(self) -> bool:
        return self.ok


def check_result(
    result: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 0.0,
    *,
    out_dtype: object = None,
    acc_dtype: object = None,
) -> CheckResult:
    """Compare ``result`` with the float64 reference elementwise under :func:`error_bound`."""
    from ..backends.cpu_ref import reference

    out_dtype = np.dtype(out_dtype if out_dtype is not None else np.asarray(a).dtype)
    result = np.asarray(result)
    m, n = np.shape(a)[0], np.shape(b)[1]
    if result.shape != (m, n):
        return CheckResult(False, -1, float("inf"), f"result has shape {result.shape}, expected {(m, n)}")
    ref64 = reference(a, b, c, alpha, beta, np.float64)
    tol = error_bound(a, b, c, alpha, beta, out_dtype=out_dtype, acc_dtype=acc_dtype, ref=ref64)
    r = result.astype(np.float64)
    # The output format cannot hold what overflows it: the reference rounded to it is the target.
    ref_out = ref64.astype(out_dtype).astype(np.float64) if out_dtype != np.float64 else ref64
    nan_ref = np.isnan(ref_out)
    inf_ref = np.isinf(ref_out)
    finite = ~(nan_ref | inf_ref)
    bad_nan = nan_ref & ~np.isnan(r)
    bad_inf = inf_ref & (r != ref_out)
    with np.errstate(invalid="ignore"):
        err = np.abs(r - ref64)
        bad_fin = finite & ~(err <= tol)  # NaN in r fails here too
        ratio = np.where(finite, err / tol, 0.0)
    bad = bad_nan | bad_inf | bad_fin
    count = int(bad.sum())
    worst = float(np.nanmax(ratio)) if ratio.size and np.isfinite(ratio).any() else (float("inf") if count else 0.0)
    if count == 0:
        return CheckResult(True, 0, worst, f"all {r.size} elements within the bound (worst error/bound = {worst:.3g})")
    idx = tuple(int(x) for x in np.argwhere(bad)[0])
    return CheckResult(
        False,
        count,
        worst,
        f"{count} of {r.size} elements outside the bound; first at {idx}: got {r[idx]!r}, reference {ref64[idx]!r}, bound {tol[idx]:.3g}",
    )


def assert_close(result: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0, **kw: object) -> None:
    """Raise AssertionError with details unless ``result`` is within the bound."""
    res = check_result(result, a, b, c, alpha, beta, **kw)  # type: ignore[arg-type]
    if not res.ok:
        raise AssertionError(res.message)
