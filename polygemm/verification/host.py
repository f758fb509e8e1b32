"""The check on the host (NumPy, float64): a Freivalds test of a product whose operands and result
are (or were copied to) host arrays. The cpu and musa backends' results are checked here, and so are
those of a backend with no check of its own on its device."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dtypes import finfo
from .report import SHOWN, CheckReport, Finding
from .threshold import Coefficients, coefficients

__all__ = ["host_check", "compare_rows", "signs"]

_F64 = np.dtype(np.float64)


def signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """A fresh random vector of ±1 (float64)."""
    return rng.integers(0, 2, n).astype(np.float64) * 2.0 - 1.0


def compare_rows(got: np.ndarray, want: np.ndarray, mags: tuple[np.ndarray, np.ndarray, np.ndarray], co: Coefficients,
                 out_max: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (failed, unchecked, |got - want|, threshold). ``mags``: |alpha|·|A|·(|B|·1), |beta|·|C0|·1
    and |C|·1 of each row. A row is unchecked when its threshold or expected value is not finite (an
    operand holds a NaN or infinity, or the sums overflow), or when its checksum is not finite and an
    element of it may rightly overflow the result's dtype (its magnitude bound exceeds the largest finite)."""
    ya, c0a, ca = mags
    with np.errstate(all="ignore"):
        thr = co.a * ya + co.c0 * c0a + co.c * ca + co.t0
        diff = np.abs(got - want)
        unchecked = ~np.isfinite(thr) | ~np.isfinite(want) | (~np.isfinite(got) & (ya + c0a > out_max))
        failed = ~unchecked & ~(diff <= thr)  # a NaN difference fails
    return failed, unchecked, diff, thr


def _findings(failed: np.ndarray, diff: np.ndarray, thr: np.ndarray) -> tuple[Finding, ...]:
    found = []
    for idx in np.argwhere(failed)[:SHOWN]:
        pos = tuple(int(i) for i in idx)
        found.append(Finding(pos[-1], float(diff[pos]), float(thr[pos]), pos[:-1]))
    return tuple(found)


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64, copy=False)


def host_check(a: Any, b: Any, c0: Any, result: Any, alpha: float, beta: float, *, dtype: np.dtype, out_dtype: np.dtype,
               rng: np.random.Generator, scalar_dtype: np.dtype | None = None, **about: str) -> CheckReport:
    """Check ``result`` against ``alpha * a @ b + beta * c0`` (host arrays, batches broadcast as numpy.matmul
    does; ``c0``: c's values before the product, None when beta is 0). ``about``: backend, device, variant,
    shape and where, for the report."""
    a64, b64, r64 = _f64(a), _f64(b), _f64(result)
    m, k = a64.shape[-2:]
    n = b64.shape[-1]
    use_c = c0 is not None and beta != 0.0
    c64 = _f64(c0) if use_c else None
    out_max = float(finfo(out_dtype).max)
    with np.errstate(all="ignore"):
        r = signs(rng, n)
        want = alpha * (a64 @ (b64 @ r)[..., None])[..., 0]
        ya = abs(alpha) * (np.abs(a64) @ np.abs(b64).sum(-1)[..., None])[..., 0]
        if c64 is not None:
            want = want + beta * (c64 @ r)
            c0a = abs(beta) * np.abs(c64).sum(-1)
        else:
            c0a = np.zeros(())
        got, ca = r64 @ r, np.abs(r64).sum(-1)
        shape = np.broadcast_shapes(got.shape, want.shape)
        ya, c0a = np.broadcast_to(ya, shape), np.broadcast_to(c0a, shape)
    co = coefficients(k, n, dtype, out_dtype, _F64, scalar_dtype)
    failed, unchecked, diff, thr = compare_rows(got, np.broadcast_to(want, shape), (ya, c0a, ca), co, out_max)
    count = int(failed.sum())
    with np.errstate(all="ignore"):
        ratios = np.where(failed | unchecked, 0.0, diff / np.where(thr > 0, thr, np.inf))
    worst = float("inf") if count else (float(ratios.max()) if ratios.size else 0.0)
    columns: tuple[Finding, ...] = ()
    if count:  # which columns: the same test from the other side, r·C against ((r·A)·B + r·C0)
        with np.errstate(all="ignore"):
            s = signs(rng, m)
            cwant = alpha * ((s @ a64)[..., None, :] @ b64)[..., 0, :]
            cya = abs(alpha) * ((np.abs(a64).sum(-2))[..., None, :] @ np.abs(b64))[..., 0, :]
            cc0a: Any = np.zeros(())
            if c64 is not None:
                cwant = cwant + beta * (s @ c64)
                cc0a = abs(beta) * np.abs(c64).sum(-2)
            cgot, cca = s @ r64, np.abs(r64).sum(-2)
            cshape = np.broadcast_shapes(cgot.shape, cwant.shape)
            cfail, _, cdiff, cthr = compare_rows(cgot, np.broadcast_to(cwant, cshape), (np.broadcast_to(cya, cshape),
                                                 np.broadcast_to(cc0a, cshape), cca), coefficients(k, m, dtype, out_dtype, _F64, scalar_dtype), out_max)
        columns = _findings(cfail, cdiff, cthr)
    return CheckReport(count == 0, int(failed.size - unchecked.sum()), int(unchecked.sum()), count, _findings(failed, diff, thr),
                       columns, worst, **about)
