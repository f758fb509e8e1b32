"""The error bound: tight enough to catch real errors, loose enough for honest rounding."""

from __future__ import annotations

import numpy as np
import pytest

from polygemm.testing import check_result, error_bound, unit_roundoff


def test_unit_roundoff():
    assert unit_roundoff(np.float32) == 2.0**-24
    assert unit_roundoff(np.float16) == 2.0**-11


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_accepts_float32_accumulation_rejects_one_ulp_bias(rng, dtype):
    a = rng.standard_normal((64, 300)).astype(dtype)
    b = rng.standard_normal((300, 48)).astype(dtype)
    honest = (a.astype(np.float32) @ b.astype(np.float32)).astype(dtype)
    assert check_result(honest, a, b).ok
    ref = a.astype(np.float64) @ b.astype(np.float64)
    wrong = ref.astype(dtype).copy()
    wrong[3, 7] = ref[3, 7] + 0.05 * np.abs(a[3]).astype(np.float64) @ np.abs(b[:, 7]).astype(np.float64)
    res = check_result(wrong, a, b)
    assert not res.ok and "(3, 7)" in res.message


def test_nan_where_reference_is_finite_fails(rng):
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 4)).astype(np.float32)
    got = a @ b
    got[0, 0] = np.nan
    assert not check_result(got, a, b).ok


def test_cancellation_does_not_fail(rng):
    a = np.array([[1e4, 1.0, -1e4]], np.float32)
    b = np.array([[1.0], [1.0], [1.0]], np.float32)
    got = (a @ b)
    assert check_result(got, a, b).ok
    assert error_bound(a, b)[0, 0] > 0


def test_shape_mismatch_reported(rng):
    a = np.ones((2, 2), np.float32)
    assert "shape" in check_result(np.ones((3, 3)), a, a).message


def test_shape_checks_shared_with_gemm(rng):
    """polygemm.testing refuses a 1-D operand and a c of another shape in gemm's own words (one
    check each, in polygemm.problem): how to reshape, and how to pass a c that broadcasts."""
    import re

    import polygemm as pg
    from polygemm.testing import reference_for

    a = rng.standard_normal((2, 5, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    c_row = rng.standard_normal((1, 3)).astype(np.float32)
    for call in (lambda *x, **k: pg.gemm(*x, device="cpu", **k), error_bound, reference_for):
        # a vector b is told to pass it as a column, not "Reshape it, e.g. b.reshape(rows, cols)" as a scalar would
        # be; gemm also names polygemm.matmul
        with pytest.raises(pg.ShapeError, match=r"^b must be a matrix .*1-D with shape \(4,\), a vector\. Pass it as a column, "
                                                r"b\[:, None\] \(4×1\)"):
            call(a, b[:, 0])
        with pytest.raises(pg.ShapeError, match=re.escape("c must have the result's shape (2, 5, 3) for a (2, 5, 4) and b (4, 3); "
                                                          "got (1, 3). It broadcasts to that shape: pass it broadcast, "
                                                          "e.g. np.broadcast_to(c, (2, 5, 3))")):
            call(a, b, c_row, beta=1.0)
    # the difference that stays: c in another float dtype than the result's is gemm's error, not the bound's
    assert reference_for(a, b, c_row.astype(np.float64).repeat(5, 0)[None].repeat(2, 0), 1.0, 1.0).tol.shape == (2, 5, 3)


def test_a_result_readable_only_through_dlpack_is_checked_by_its_values(rng):
    from tests.helpers import DLPackOnly

    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    good = a @ b
    assert check_result(DLPackOnly(good), a, b).ok
    bad = good.copy()
    bad[0, 0] += 1.0
    assert not check_result(DLPackOnly(bad), a, b).ok


def test_an_array_whose_dlpack_fails_is_read_through_numpy():
    from polygemm.testing.bounds import host_array

    class DLPackBroken:
        """Claims DLPack, fails it, but NumPy reads it (an object that wraps another library's array)."""

        def __dlpack__(self, **kwargs):
            raise RuntimeError("export not supported")

        def __dlpack_device__(self):
            return (1, 0)

        def __array__(self, dtype=None, copy=None):
            return np.full((2, 2), 3.0, np.float32)

    got = host_array("result", DLPackBroken())
    assert isinstance(got, np.ndarray) and got.shape == (2, 2) and (got == 3.0).all()


def test_a_float32_sum_that_overflows_on_its_way_is_within_the_bound_where_the_accumulator_may_overflow():
    """[3e38, 3e38, -3e38] @ ones in float32: the BLAS's running sum overflows to inf, although the exact sum fits.
    Where |alpha| |A| @ |B| passes the accumulator's range such an infinity is the product's own, as verify= takes it;
    a NaN there, or an infinity where the range holds, still fails."""
    import polygemm as pg

    a = np.tile(np.float32([3e38, 3e38, -3e38]), (2, 1))
    b = np.ones((3, 2), np.float32)
    got = pg.gemm(a, b, device="cpu")
    assert np.isinf(got).all() and check_result(got, a, b).ok
    nan = got.copy()
    nan[0, 0] = np.nan
    assert not check_result(nan, a, b).ok
    small = np.ones((2, 3), np.float32)
    assert not check_result(np.full((2, 2), np.inf, np.float32), small, b).ok


def test_a_failed_check_reports_a_worst_ratio_above_one_whatever_failed():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    r = a @ a
    r[0, 0] = np.nan
    res = check_result(r, a, a)
    assert not res.ok and res.violations == 1 and res.worst_ratio > 1


@pytest.mark.parametrize("dtype,words", [(np.int8, "is int8; pass one of"), ("nope", "not a dtype"), (None, "None is no dtype")])
def test_unit_roundoff_of_no_floating_dtype_is_a_dtype_error_naming_it(dtype, words):
    from polygemm.errors import DTypeError
    from polygemm.testing import accumulation_dtype

    with pytest.raises(DTypeError, match=words):
        unit_roundoff(dtype)
    with pytest.raises(DTypeError, match=words):
        accumulation_dtype(dtype)


def test_check_result_of_no_array_says_so_in_polygemms_errors():
    from polygemm.errors import ArgumentTypeError, ShapeError

    a = np.ones((2, 1))
    with pytest.raises(ShapeError, match=r"^result is not an array of one shape"):
        check_result([[1.0], [1.0, 2.0]], a, a.T)
    with pytest.raises(ArgumentTypeError, match=r"^result must be an array.*NoneType"):
        check_result(None, a, a.T)


def test_a_float16_result_whose_rounding_may_overflow_passes_as_inf_or_within_the_bound():
    """65519.9985 summed in float32 is 65520, which float16 stores as inf (gemm's result, and numpy.matmul's); an exact
    65520 stored as 65504 is 16 off, within its bound of 32: both pass. An infinity of the other sign, or a finite value
    past the bound, fails."""
    import polygemm as pg

    t = [60000, 5504, 15.9921875, 2**-8, 2**-9, 2**-11]
    a, b = np.array([t], np.float16), np.ones((len(t), 1), np.float16)
    got = pg.gemm(a, b, device="cpu")
    with np.errstate(over="ignore"):  # (NumPy's own float16 product overflows too)
        theirs = np.matmul(a, b)
    assert np.isinf(got).all() and check_result(got, a, b).ok and check_result(theirs, a, b).ok
    t = [60000, 5504, 15.9921875] + [2**-10] * 8
    a, b = np.array([t], np.float16), np.ones((len(t), 1), np.float16)
    assert check_result(np.full((1, 1), 65504, np.float16), a, b).ok
    for wrong in (-np.inf, 65472):
        assert not check_result(np.full((1, 1), wrong, np.float16), a, b).ok


def test_where_partial_sums_may_overflow_a_finite_result_is_held_to_its_terms_bound_and_a_nan_needs_both_signs():
    # [1e20, -1e20, 1] @ [1e20, 1e20, 5] in float32: +1e40 and -1e40 overflow apiece, inf - inf is NaN (gemm's and
    # numpy's answer); [3e38, 3e38, -3e38] @ ones: only the positive terms may overflow, so -1 or a NaN fails
    import polygemm as pg

    a, b = np.array([[1e20, -1e20, 1]], np.float32), np.array([[1e20], [1e20], [5]], np.float32)
    assert np.isnan(pg.gemm(a, b, device="cpu")).all() and check_result(pg.gemm(a, b, device="cpu"), a, b).ok
    assert check_result(np.full((1, 1), np.inf, np.float32), a, b).ok and check_result(np.full((1, 1), 5, np.float32), a, b).ok
    a, b = np.array([[3e38, 3e38, -3e38]], np.float32), np.ones((3, 1), np.float32)
    for wrong in (-1.0, np.nan, -np.inf):
        assert not check_result(np.full((1, 1), wrong, np.float32), a, b).ok
    assert check_result(np.full((1, 1), 3e38, np.float32), a, b).ok


def test_a_float64_reference_whose_own_sums_overflow_is_computed_wider_where_the_machine_has_it():
    if np.finfo(np.longdouble).max <= np.finfo(np.float64).max:
        pytest.skip("this machine's long double is float64: no wider reference")
    a, b = np.array([[1e200, -1e200, 1]]), np.array([[1e200], [1e200], [5]])
    assert check_result(np.array([[5.0]]), a, b).ok  # (the terms, 1e400, bound any finite value: float64 cannot)
    a, b = np.array([[1e308, 1e308, -1e308]]), np.ones((3, 1))
    assert check_result(np.array([[1e308]]), a, b).ok
