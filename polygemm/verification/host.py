"""The check on the host (NumPy, float64): a Freivalds test of a product whose operands and result
are (or were copied to) host arrays. The cpu and musa backends' results are checked here, and so are
those of a backend with no check of its own on its device."""

from __future__ import annotations

import math
import threading
from typing import Any, Iterator

import numpy as np

from ..core.complex_form import part_dtype, real_form, stacked
from ..core.dtypes import finfo
from ..core.exact import exact_integer_product
from .report import SHOWN, CheckReport, Finding
from .threshold import Coefficients, coefficients

__all__ = ["host_check", "compare_rows", "signs", "row_thresholds", "may_overflow"]

_F64 = np.dtype(np.float64)
_F64_MAX = float(np.finfo(np.float64).max)


def signs(rng: np.random.Generator, n: int) -> np.ndarray:
    """A fresh random vector of ±1 (float64)."""
    return rng.integers(0, 2, n).astype(np.float64) * 2.0 - 1.0


def compare_rows(got: np.ndarray, want: np.ndarray, mags: tuple[np.ndarray, np.ndarray, np.ndarray], co: Coefficients,
                 out_max: float, width: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (failed, unchecked, |got - want|, threshold). ``mags``: |alpha|·(|A|·||B_k||_2), |beta|·||C0_i||_2
    and ||C_i||_2 of each row; ``width``: the elements a row's checksum adds. A row is unchecked when its threshold or
    expected value is not finite (an operand holds a NaN or infinity, or the sums overflow), when its checksum is not
    finite and an element of it may rightly overflow the result's dtype (its magnitude bound exceeds the largest
    finite), or when its checksum is not finite though its elements are, which float64's own sum of them can be (its
    1-norm, at most sqrt(width) times the 2-norm, past float64's largest: float64 results near their range's end)."""
    ya, c0a, ca = mags
    with np.errstate(all="ignore"):
        side = co.a * ya + co.c0 * c0a + co.t0  # the operands' part: not finite, the row cannot be checked
        thr = side + co.c * ca
        diff = np.abs(got - want)
        finite = np.isfinite(got)
        unchecked = ~np.isfinite(side) | ~np.isfinite(want) | (~finite & (ya + c0a > out_max)) | \
            (~finite & np.isfinite(ca) & (ca * math.sqrt(max(width, 1)) > _F64_MAX))
        failed = ~unchecked & (~finite | ~(diff <= thr))  # a NaN or infinity the operands do not explain fails
    return failed, unchecked, diff, thr


def _findings(failed: np.ndarray, diff: np.ndarray, thr: np.ndarray, exact: bool = False) -> tuple[Finding, ...]:
    found = []
    for idx in np.argwhere(failed)[:SHOWN]:
        pos = tuple(int(i) for i in idx)
        found.append(Finding(pos[-1], float(diff[pos]), float(thr[pos]), pos[:-1], exact))
    return tuple(found)


def _f64(x: Any) -> np.ndarray:
    """``x`` in float64. A NaN or infinity is a value the check reads like any other, a signalling NaN too (a flipped
    exponent bit makes one, and widening it raises the invalid-operation flag): the callers widen inside their
    ``np.errstate(all="ignore")``, one for the whole check rather than one a widening."""
    return np.asarray(x).astype(np.float64, copy=False)


def _norms(x: np.ndarray, axis: int) -> np.ndarray:
    """2-norms along ``axis``; where the squares would underflow or overflow float64 (float64 values beyond about
    1e±150), of the values scaled by their largest magnitude first."""
    sq = np.square(x).sum(axis)
    plain: np.ndarray = np.sqrt(sq)
    if sq.size and 1e-280 < sq.min() and sq.max() < 1e280:
        # every row's largest magnitude lies within 1e±140 (its square is at most the sum, at least the sum over the
        # row's length): nothing to scale, the common case, known from two reductions instead of six operations
        return plain
    top = np.abs(x).max(axis) if x.shape[axis] else np.zeros_like(plain)
    off = (top > 0) & np.isfinite(top) & ((top < 1e-150) | (top > 1e150))
    if off.any():
        scale = np.where(off, top, 1.0)
        scaled = np.sqrt(np.square(x / np.expand_dims(scale, axis)).sum(axis)) * scale
        plain = np.where(off, scaled, plain)
    return plain


def _side(a64: np.ndarray, b64: np.ndarray, c64: np.ndarray | None, r64: np.ndarray, alpha: float, beta: float,
          r: np.ndarray, rows: bool) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(C·r, alpha·A·(B·r) + beta·C0·r, magnitudes) along rows, or along columns (r·C against (r·A)·B + r·C0)."""
    if rows:
        want = alpha * (a64 @ (b64 @ r)[..., None])[..., 0]
        ya = abs(alpha) * (np.abs(a64) @ _norms(b64, -1)[..., None])[..., 0]
        got, ca = r64 @ r, _norms(r64, -1)
        c0a: Any = np.zeros(())
        if c64 is not None:
            want, c0a = want + beta * (c64 @ r), abs(beta) * _norms(c64, -1)
    else:
        want = alpha * ((r @ a64)[..., None, :] @ b64)[..., 0, :]
        ya = abs(alpha) * (_norms(a64, -2)[..., None, :] @ np.abs(b64))[..., 0, :]
        got, ca = r @ r64, _norms(r64, -2)
        c0a = np.zeros(())
        if c64 is not None:
            want, c0a = want + beta * (r @ c64), abs(beta) * _norms(c64, -2)
    shape = np.broadcast_shapes(got.shape, want.shape)

    def spread(x: np.ndarray) -> np.ndarray:  # (broadcast_to is several µs of Python: skipped where it would change nothing)
        return x if x.shape == shape else np.broadcast_to(x, shape)

    return got, spread(want), (spread(ya), spread(c0a), ca)


#: float64 elements of one widened block (512 KiB, within a core's L2): the rows' side reads each operand once, a
#: block of rows at a time, widened into one buffer kept per thread, rather than widening whole matrices. A fresh
#: float64 copy of a whole matrix costs, besides writing it out and reading it back, a page fault per 4 KiB the first
#: time it is touched (the allocator hands large blocks back to the system when they are freed): on a 2-core machine,
#: several times the matrix-vector products' own time at 256³ float32. Larger blocks cost fewer calls (a 2048-wide
#: matrix: 32 rows a block); smaller ones would fall out of fewer caches.
_BLOCK = 1 << 16
_scratch = threading.local()


def _buffer(size: int) -> np.ndarray:
    """``size`` float64 elements of this thread's widening buffer (a row longer than a block: one of its own)."""
    if size > _BLOCK:
        return np.empty(size)
    buf = getattr(_scratch, "buf", None)
    if buf is None:
        buf = _scratch.buf = np.empty(_BLOCK)
    return buf[:size]


def _widened(x3: np.ndarray) -> Iterator[tuple[slice, slice, np.ndarray, np.ndarray]]:
    """(batch slice, row slice, the part of ``x3`` (G, R, K) they take, that part in float64) for blocks covering
    ``x3``: whole matrices, several at a time where they are small, else rows of one. The float64 block is the
    thread's buffer, overwritten by the next: its user may change it in place."""
    g_all, rows_all, k = x3.shape
    rows = max(1, _BLOCK // max(k, 1))
    if rows >= rows_all:
        per = max(1, _BLOCK // max(rows_all * k, 1))
        spans: Iterator[tuple[slice, slice]] = ((slice(g, g + per), slice(None)) for g in range(0, g_all, per))
    else:
        spans = ((slice(g, g + 1), slice(i, i + rows)) for g in range(g_all) for i in range(0, rows_all, rows))
    for gs, rs in spans:
        part = x3[gs, rs]
        buf = _buffer(part.size).reshape(part.shape)
        np.copyto(buf, part, casting="unsafe")  # a signalling NaN widens quietly: the caller's errstate
        yield gs, rs, part, buf


def _square_norms(buf: np.ndarray, part: np.ndarray, ones: np.ndarray) -> np.ndarray:
    """:func:`_norms` along the last axis of ``part`` (widened in ``buf``, squared in place, summed as a product with
    ``ones``: a pass of the BLAS rather than of NumPy's pairwise sums, in float64 either way); where a row needs
    scaling, of ``part`` widened once more (rare: values beyond about 1e±140)."""
    sq = np.square(buf, out=buf) @ ones
    if sq.size and 1e-280 < sq.min() and sq.max() < 1e280:
        return np.sqrt(sq)  # type: ignore[no-any-return]
    return _norms(part.astype(np.float64), -1)


def _stacked3(x: np.ndarray, batch: tuple[int, ...]) -> np.ndarray | None:
    """``x`` (..., R, K) as (G, R, K) without copying: G = 1 where its batch holds one matrix, else its batch
    broadcast to ``batch`` and flattened; None where that takes a copy (the caller widens it whole)."""
    if x.ndim == 2:
        return x[None]
    lead = x.shape[:-2]
    if math.prod(lead) == 1:
        return x.reshape((1,) + x.shape[-2:])
    if lead == batch and len(lead) == 1:
        return x
    whole = np.broadcast_to(x, batch + x.shape[-2:])
    shape = (-1,) + x.shape[-2:]
    try:  # the batch flattened without a copy: NumPy raises where the strides need one
        return np.reshape(whole, shape, copy=False)
    except ValueError:
        return None
    except TypeError:  # NumPy before 2.1 (no copy=): a view's shape set in place raises where reshape would copy
        flat = whole.view()
        try:
            flat.shape = shape
        except AttributeError:
            return None
        return flat


def _times(x: np.ndarray, gs: slice, rs: slice, vec: np.ndarray, out: np.ndarray, batched: bool) -> None:
    """``out[gs, rs] = x @ vec`` row by row: ``x`` a block (g, rows, K) of an operand's rows, ``batched`` where that
    operand holds a matrix a product of the batch (else one for all); ``vec`` (Gv, K), a vector a product (Gv = 1:
    one for all); ``out`` (G, R)."""
    if vec.shape[0] == 1:
        out[gs, rs] = x @ vec[0]
    elif batched:
        out[gs, rs] = np.matmul(x, vec[gs, :, None])[..., 0]
    else:  # one matrix's rows against every product's vector: one matrix-matrix product
        out[:, rs] = (x[0] @ vec.T).T


def _rows_side(a: np.ndarray, b: np.ndarray, c0: np.ndarray | None, result: np.ndarray | None, alpha: float, beta: float,
               r: np.ndarray, batch: tuple[int, ...] = ()
               ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """:func:`_side` along rows, each operand read once in float64 blocks (None where an operand's batch cannot be
    flattened without a copy: the caller widens them whole). The sums are those of :func:`_side` (each row's in
    float64), perhaps in another order: the threshold bounds the check's own rounding in any order. ``result`` None:
    the magnitudes alone, of a product of ``batch`` (its checksum and norms zeros)."""
    m, n = a.shape[-2], b.shape[-1]
    shape = (result.shape if result is not None else batch + (m, n))
    batch = shape[:-2]
    if math.prod(batch) == 0:
        return None
    a3, b3 = _stacked3(a, batch), _stacked3(b, batch)
    r3 = None if result is None else _stacked3(result, batch)
    c3 = None if c0 is None else _stacked3(c0, batch) if c0.ndim >= 2 and c0.shape[-2:] == shape[-2:] else None
    if a3 is None or b3 is None or (r3 is None and result is not None) or (c3 is None and c0 is not None):
        return None
    ga, gb = a3.shape[0], b3.shape[0]
    ones = np.ones(n)
    v, nb = np.empty(b3.shape[:2]), np.empty(b3.shape[:2])  # B·r and B's row norms, a vector a matrix of B
    for gs, rs, part, x in _widened(b3):
        v[gs, rs] = x @ r
        nb[gs, rs] = _square_norms(x, part, ones)
    g = max(ga, gb)
    want, ya = np.empty((g, m)), np.empty((g, m))
    for gs, rs, _, x in _widened(a3):
        _times(x, gs, rs, v, want, ga > 1)
        _times(np.abs(x, out=x), gs, rs, nb, ya, ga > 1)
    want *= alpha
    ya *= abs(alpha)
    if r3 is not None:
        got, ca = np.empty((r3.shape[0], m)), np.empty((r3.shape[0], m))
        for gs, rs, part, x in _widened(r3):
            got[gs, rs] = x @ r
            ca[gs, rs] = _square_norms(x, part, ones)
        got, ca = got.reshape(shape[:-1]), ca.reshape(shape[:-1])
    else:
        got = ca = np.zeros(shape[:-1])

    def shaped(x: np.ndarray) -> np.ndarray:  # (G, R) as the batch's (G > 1) or one for all (G = 1)
        return x.reshape((batch if x.shape[0] > 1 else ()) + x.shape[1:])

    want, ya = shaped(want), shaped(ya)
    c0a: Any = np.zeros(())
    if c3 is not None:
        c0r, c0n = np.empty(c3.shape[:2]), np.empty(c3.shape[:2])
        for gs, rs, part, x in _widened(c3):
            c0r[gs, rs] = x @ r
            c0n[gs, rs] = _square_norms(x, part, ones)
        want, c0a = want + beta * shaped(c0r), abs(beta) * shaped(c0n)

    def spread(x: np.ndarray) -> np.ndarray:
        return x if x.shape == got.shape else np.broadcast_to(x, got.shape)

    return got, spread(want), (spread(ya), spread(c0a), ca)


def host_check(a: Any, b: Any, c0: Any, result: Any, alpha: float, beta: float, *, dtype: np.dtype, out_dtype: np.dtype,
               rng: np.random.Generator, scalar_dtype: np.dtype | None = None, about: dict[str, str] | None = None,
               precision: str = "highest", fold: int = 0, skip: np.ndarray | None = None) -> CheckReport:
    """Check ``result`` against ``alpha * a @ b + beta * c0`` (host arrays, batches broadcast as numpy.matmul
    does; ``c0``: c's values before the product, None when beta is 0). ``about``: backend, device, variant
    and shape, for the report; ``precision``: the one the call asked (its bound sets the threshold). A complex product
    is checked as the real one it equals (:func:`~polygemm.core.complex_form.real_form`); ``fold``: its rows (M) when
    these operands are that real form, whose rows i and M + i are row i's two parts, counted and named as one row;
    ``skip``: rows (of these operands) left unchecked whatever their values, on the rows' side only."""
    if 0 in np.shape(result):  # an empty result (M, N or the batch 0): nothing to check, and no work of M's or N's size
        return CheckReport.of(True, 0, 0, 0, (), (), 0.0, "the host", about or {})
    if dtype.kind in "iub" or out_dtype.kind in "iub":
        return _integer_check(a, b, c0, result, alpha, beta, out_dtype=out_dtype, rng=rng, about=about)
    if any(x is not None and np.iscomplexobj(x) for x in (a, b, c0, result)) or dtype.kind == "c":
        return _complex_check(a, b, c0, result, alpha, beta, dtype=dtype, out_dtype=out_dtype, rng=rng, scalar_dtype=scalar_dtype,
                              about=about, precision=precision)
    out_max = float(finfo(out_dtype).max)
    a, b, result = np.asarray(a), np.asarray(b), np.asarray(result)
    c0 = np.asarray(c0) if c0 is not None and beta != 0.0 else None
    m, k = a.shape[-2:]
    n = b.shape[-1]
    r = signs(rng, n)
    with np.errstate(all="ignore"):
        sides = _rows_side(a, b, c0, result, alpha, beta, r)
        if sides is None:
            sides = _side(_f64(a), _f64(b), None if c0 is None else _f64(c0), _f64(result), alpha, beta, r, True)
        got, want, mags = sides
    failed, unchecked, diff, thr = compare_rows(got, want, mags, coefficients(k, n, dtype, out_dtype, _F64, scalar_dtype, precision=precision), out_max, n)
    if skip is not None:
        failed, unchecked = failed & ~skip, unchecked | skip
    if fold:  # a row of the result fails where either part fails, named by the part that is further off
        with np.errstate(all="ignore"):
            first = np.nan_to_num(diff[..., :fold] / thr[..., :fold], nan=np.inf) >= np.nan_to_num(diff[..., fold:] / thr[..., fold:], nan=np.inf)
        diff, thr = np.where(first, diff[..., :fold], diff[..., fold:]), np.where(first, thr[..., :fold], thr[..., fold:])
        failed, unchecked = failed[..., :fold] | failed[..., fold:], unchecked[..., :fold] & unchecked[..., fold:]
    count = int(failed.sum())
    with np.errstate(all="ignore"):
        ratios = np.where(failed | unchecked, 0.0, diff / np.where(thr > 0, thr, np.inf))
    worst = float("inf") if count else (float(ratios.max()) if ratios.size else 0.0)
    columns: tuple[Finding, ...] = ()
    failed_columns: int | None = None
    skipped = int(unchecked.sum())
    rows = _findings(failed, diff, thr) if count else ()
    # the same test from the other side: on a failure, to name the columns; where rows were left unchecked (a NaN or an
    # infinity in B reaches every row's B·r), to check the columns whose operands are finite
    if count or skipped:
        with np.errstate(all="ignore"):  # (rare: widened whole)
            a64, r64, c064 = _f64(a), _f64(result), None if c0 is None else _f64(c0)
            # A's rows that hold a NaN or an infinity left out of r·A, r·C and r·C0 (their elements of C are rightly not
            # finite, and r·A would carry one into every column): the columns are checked over A's finite rows, so a
            # NaN in A beside one in B (which left every row unchecked above) still leaves the rest checked
            bad = ~np.isfinite(a64).all(axis=-1, keepdims=True)
            if bad.any():
                a64, r64 = np.where(bad, 0.0, a64), np.where(bad, 0.0, r64)
                c064 = None if c064 is None else np.where(bad, 0.0, c064)
            cgot, cwant, cmags = _side(a64, _f64(b), c064, r64, alpha, beta, signs(rng, m), False)
        cfail, _, cdiff, cthr = compare_rows(cgot, cwant, cmags, coefficients(k, m, dtype, out_dtype, _F64, scalar_dtype, precision=precision), out_max, m)
        columns, failed_columns = _findings(cfail, cdiff, cthr), int(cfail.sum())
        if not count and columns:
            count, worst = failed_columns, float("inf")
    return CheckReport.of(count == 0, int(failed.size) - skipped, skipped, count, rows, columns, worst, "the host", about or {},
                          failed_columns)


def _integer_check(a: Any, b: Any, c0: Any, result: Any, alpha: float, beta: float, *, out_dtype: np.dtype,
                   rng: np.random.Generator, about: dict[str, str] | None) -> CheckReport:
    """:func:`host_check` of an integer or bool product, exact: integers wrap modulo ``2**bits`` whatever the order
    of their sums, so ``C·r`` equals ``alpha·A·(B·r) + beta·C0·r`` modulo ``2**bits`` (sums in 64-bit integers,
    compared in the result's dtype) and any element off by anything moves its row's sum (r is ±1, odd). A bool
    product (any of a[i, k] and b[k, j]) is checked as the positivity of its counts: the product once more, on the
    BLAS (counts up to K are whole numbers float32 holds exactly below 2**24, float64 below 2**53; NumPy's 64-bit
    integer matmul has no BLAS and takes a hundred times as long)."""
    av, bv, rv = np.asarray(a), np.asarray(b), np.asarray(result)
    cv = None if c0 is None else np.asarray(c0)
    if out_dtype.kind == "b":
        k = av.shape[-1]
        counts = np.float32 if k < 2**24 else np.float64 if k < 2**53 else np.int64
        with np.errstate(all="ignore"):
            bad = np.broadcast_to(np.matmul(av.astype(counts), bv.astype(counts)) > 0, rv.shape) != rv.astype(bool)

        def side(along_rows: bool) -> tuple[np.ndarray, np.ndarray]:
            axis = -1 if along_rows else -2
            return bad.any(axis=axis), bad.sum(axis=axis).astype(np.float64)  # (elements wrong, counted)
    else:
        work = np.uint64 if out_dtype.kind == "u" else np.int64

        def side(along_rows: bool) -> tuple[np.ndarray, np.ndarray]:
            r: np.ndarray = signs(rng, rv.shape[-1] if along_rows else rv.shape[-2]).astype(work)
            with np.errstate(all="ignore"):
                if along_rows:  # C·r against alpha·A·(B·r) + beta·C0·r
                    got = rv.astype(work) @ r
                    want = exact_integer_product(av, (bv.astype(work) @ r)[..., None],
                                                 None if cv is None else (cv.astype(work) @ r)[..., None], alpha, beta, out_dtype)[..., 0]
                else:  # r·C against alpha·(r·A)·B + beta·r·C0
                    got = r @ rv.astype(work)
                    want = exact_integer_product((r @ av.astype(work))[..., None, :], bv,
                                                 None if cv is None else (r @ cv.astype(work))[..., None, :], alpha, beta, out_dtype)[..., 0, :]
            got_d = got.astype(out_dtype)
            want_d = np.broadcast_to(want, got_d.shape)
            # off by the difference modulo 2**bits, as the signed integer of the width (one element's fault moves its
            # row's and its column's sums by the same amount, up to sign)
            with np.errstate(all="ignore"):
                off = (got_d.astype(work) - want_d.astype(work)).astype(np.dtype(f"int{8 * out_dtype.itemsize}"))
            return got_d != want_d, np.abs(off.astype(np.float64))

    failed_rows, diff = side(True)
    failed = int(failed_rows.sum())
    rows: tuple[Finding, ...] = ()
    columns: tuple[Finding, ...] = ()
    failed_columns: int | None = None
    if failed:
        rows = _findings(failed_rows, diff, np.zeros(diff.shape), exact=True)
        failed_cols, cdiff = side(False)
        columns, failed_columns = _findings(failed_cols, cdiff, np.zeros(cdiff.shape), exact=True), int(failed_cols.sum())
    return CheckReport.of(failed == 0, int(failed_rows.size), 0, failed, rows, columns, 0.0, "the host", about or {},
                          failed_columns)


def _complex_check(a: Any, b: Any, c0: Any, result: Any, alpha: float, beta: float, *, dtype: np.dtype, out_dtype: np.dtype,
                   rng: np.random.Generator, scalar_dtype: np.dtype | None, about: dict[str, str] | None,
                   precision: str = "highest") -> CheckReport:
    """:func:`host_check` of a complex product through its real form, each part's error bounded as its real products'
    (complex64: float32's, complex128: float64's); a failed row is named by its row of the result (real or imaginary
    part alike)."""
    m = np.asarray(a).shape[-2]
    part, out_part = (part_dtype(d) if d.kind == "c" else np.dtype(np.float64) for d in (dtype, out_dtype))
    with np.errstate(all="ignore"):  # a signalling NaN widens quietly
        big, b_ = real_form(a, b)
        c_ = stacked(c0) if c0 is not None and beta != 0.0 else None
        r_ = stacked(result)
    # complex arithmetic carries a NaN or an infinity from one part into the other (inf * 0 in one part's sums is a NaN
    # in the other's, beta * c with a NaN in c's real part a NaN in both): a row is unchecked in both parts where its
    # operands are not finite in either, or where its result is not finite and either part may rightly overflow.
    # Those rows are skipped rather than their operands altered: the columns' side reads the same operands, and a NaN
    # written into A's rows would reach every column's r·A. The columns' side needs no such mask: a column of the real
    # form holds both parts of its column, so a non-finite part of B's or c's column, or a part that may overflow,
    # leaves the whole column unchecked.
    with np.errstate(all="ignore"):
        bad = ~np.isfinite(big).all(-1)
        if c_ is not None:
            bad = bad | ~np.isfinite(c_).all(-1)
        over = may_overflow(big, b_, c_, alpha, beta, out_part) & ~np.isfinite(r_).all(-1)
        both = (bad | over)[..., :m] | (bad | over)[..., m:]
    skip = np.concatenate([both, both], -1) if both.any() else None
    return host_check(big, b_, c_, r_, alpha, beta, dtype=part, out_dtype=out_part, rng=rng, scalar_dtype=scalar_dtype,
                      about=about, precision=precision, fold=m, skip=skip)


def row_thresholds(a: Any, b: Any, c0: Any, result: Any, alpha: float, beta: float, *, dtype: np.dtype, out_dtype: np.dtype,
                   check_dtype: np.dtype = _F64, scalar_dtype: np.dtype | None = None, compensated: bool = False) -> np.ndarray:
    """Each row's threshold (shape: the result's, less its last axis) for the check with its sums in
    ``check_dtype`` (float64: the host's check; float32 and ``compensated``: a device's): a fault that moves
    one element of a row by more than it is caught unless the row's rounding error cancels it; by more than
    twice it, always."""
    with np.errstate(all="ignore"):
        a64, b64, r64 = _f64(a), _f64(b), _f64(result)
        k, n = a64.shape[-1], b64.shape[-1]
        c64 = _f64(c0) if c0 is not None and beta != 0.0 else None
        _, _, (ya, c0a, ca) = _side(a64, b64, c64, r64, alpha, beta, np.ones(n), True)
        co = coefficients(k, n, dtype, out_dtype, np.dtype(check_dtype), scalar_dtype, compensated)
        thr: np.ndarray = co.a * ya + co.c0 * c0a + co.c * ca + co.t0
    return thr


def may_overflow(a: Any, b: Any, c0: Any, alpha: float, beta: float, out_dtype: np.dtype) -> np.ndarray:
    """Per row: whether an element of it may rightly overflow ``out_dtype`` (the row's magnitude bound exceeds the
    largest finite value), where the check takes a NaN or infinity for the product's own (such rows are unchecked
    when their checksum is not finite)."""
    a, b = np.asarray(a), np.asarray(b)
    c = np.asarray(c0) if c0 is not None and beta != 0.0 else None
    ones = np.ones(b.shape[-1])
    with np.errstate(all="ignore"):
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], () if c is None else c.shape[:-2])
        sides = _rows_side(a, b, c, None, alpha, beta, ones, batch)
        if sides is None:
            a64, b64 = _f64(a), _f64(b)
            sides = _side(a64, b64, None if c is None else _f64(c), np.zeros(a64.shape[:-1] + (b64.shape[-1],)), alpha, beta,
                          ones, True)
        _, _, (ya, c0a, _) = sides
        over: np.ndarray = ~(ya + c0a <= float(finfo(out_dtype).max))
    return over
