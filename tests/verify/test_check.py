"""The check's numerics on the cpu backend: no false alarm on correct products of many shapes, dtypes,
layouts and scalings (float16 with K = 262144 among them), even at the tests' whole error bound; a
single wrong element above the threshold caught; NaN, infinities and overflow handled."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import error_bound, inject_fault
from polygemm.testing.bounds import reference_for
from polygemm.verification import host
from polygemm.verification.host import host_check, row_thresholds, signs

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def _draw(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_no_false_alarm_on_random_shapes_layouts_and_scalars(rng, dtype):
    for _ in range(40):
        m, n, k = (int(x) for x in rng.integers(1, 70, 3))
        a = _draw(rng, (m, k), dtype, 10.0 ** rng.uniform(-3, 3))
        b = _draw(rng, (k, n), dtype, 10.0 ** rng.uniform(-3, 3))
        if rng.random() < 0.5:
            a = np.asfortranarray(a)
        if rng.random() < 0.5:
            b = b.T.copy().T
        alpha = float(rng.choice([1.0, -0.5, 3.0]))
        if rng.random() < 0.5:
            c = _draw(rng, (m, n), dtype, float(np.abs(a.astype(np.float64)).max()))
            got = pg.gemm(a, b, c, alpha=alpha, beta=float(rng.choice([1.0, -2.0])), verify="raise")
        else:
            got = pg.gemm(a, b, alpha=alpha, verify="raise")
        assert got.shape == (m, n)


def test_no_false_alarm_on_batches_and_a_wider_result(rng):
    a = _draw(rng, (4, 1, 30, 20), np.float16)
    b = _draw(rng, (3, 20, 25), np.float16)
    assert pg.gemm(a, b, verify="raise", out_dtype=np.float32).shape == (4, 3, 30, 25)
    assert pg.gemm(a, b, verify="raise", variant="reference").shape == (4, 3, 30, 25)


def test_no_false_alarm_on_float16_with_k_262144_and_badly_scaled_rows(rng):
    k = 262_144
    a = rng.standard_normal((4, k)) * np.array([[1e-4], [1.0], [3.0], [1e-7]])
    a = a.astype(np.float16)
    b = (rng.standard_normal((k, 3)) * np.array([[1e-3, 1.0, 3.0]])).astype(np.float16)
    got = pg.gemm(a, b, verify="raise")
    assert np.isfinite(got.astype(np.float32)).all()
    # and all-positive inputs (no cancellation: the sums grow with K)
    pos = np.abs(a[:2]).astype(np.float16)
    pg.gemm(pos, np.abs(b).astype(np.float16), out_dtype=np.float32, verify="raise")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_result_off_by_the_whole_test_bound_passes(rng, dtype):
    """Every element of the result off by 0.999 of the bound the tests allow, each with the sign of the
    check's own r (the worst a correct product can do to the check): no alarm."""
    m, n, k = 33, 47, 129
    a, b = _draw(rng, (m, k), dtype), _draw(rng, (k, n), dtype)
    c = _draw(rng, (m, n), dtype)
    ref = reference_for(a, b, c, 1.5, -0.5)
    seed = int(rng.integers(1 << 30))
    r = signs(np.random.default_rng(seed), n)
    bad = ref.ref64 + 0.999 * ref.tol * r[None, :]
    report = host_check(a, b, c, bad, 1.5, -0.5, dtype=np.dtype(dtype), out_dtype=np.dtype(dtype),
                        rng=np.random.default_rng(seed))
    assert report.ok, report.message()
    assert report.worst_ratio < 1.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_one_element_twice_the_threshold_off_is_always_caught(rng, dtype):
    caught = 0
    for _ in range(30):
        m, n, k = (int(x) for x in rng.integers(1, 60, 3))
        a, b = _draw(rng, (m, k), dtype), _draw(rng, (k, n), dtype)
        res = pg.gemm(a, b)
        i, j = int(rng.integers(m)), int(rng.integers(n))
        thr = row_thresholds(a, b, None, res, 1.0, 0.0, dtype=np.dtype(dtype), out_dtype=np.dtype(dtype))
        value = float(res[i, j]) + float(rng.choice([-1, 1])) * 2.01 * float(thr[i]) * (1 + rng.random())
        if not np.isfinite(np.asarray(value, dtype)) or float(np.asarray(value, dtype)) == float(res[i, j]):
            continue
        with inject_fault(i, j, value=value):
            with pytest.raises(pg.VerificationError) as exc:
                pg.gemm(a, b, verify="raise")
        assert exc.value.report.rows[0].index == i
        caught += 1
    assert caught >= 20


def test_threshold_is_well_below_the_product_itself(rng):
    """The threshold is tight enough to matter: for float32 of K = 256, an error of a tenth of a typical
    element's size is caught."""
    a, b = _draw(rng, (16, 256), np.float32), _draw(rng, (256, 64), np.float32)
    res = pg.gemm(a, b)
    thr = row_thresholds(a, b, None, res, 1.0, 0.0, dtype=np.dtype(np.float32), out_dtype=np.dtype(np.float32))
    typical = np.abs(res.astype(np.float64)).mean()
    assert (thr < 0.1 * typical).all()


def test_nan_and_infinite_inputs_are_no_false_alarm(rng):
    a, b = _draw(rng, (8, 6), np.float32), _draw(rng, (6, 5), np.float32)
    a[2, 3] = np.nan
    b[1, 4] = np.inf
    got = pg.gemm(a, b, verify="raise")
    assert np.isnan(got[2]).all()


def test_a_fault_beside_a_nan_in_b_is_caught_from_the_columns_side(rng):
    # a NaN in B reaches every row's B·r, so no row can be checked; the columns whose operands are finite still can
    a, b = _draw(rng, (64, 64), np.float32), _draw(rng, (64, 64), np.float32)
    b[0, 0] = np.nan
    assert np.isnan(pg.gemm(a, b, verify="raise")[:, 0]).all()  # no false alarm: the NaN column is the product's own
    with inject_fault(10, 20, value=1e4):
        with pytest.raises(pg.VerificationError, match=r"columns 20 \(off by") as err:
            pg.gemm(a, b, verify="raise")
    assert err.value.report.unchecked == 64 and "columns' side" in str(err.value)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_complex_nan_and_infinity_crossing_into_the_other_part_are_no_false_alarm(dtype):
    # beta * c with a NaN (or an infinity) in c's real part is a NaN in both parts, as inf * 0 in alpha * (A·B) is
    a = np.ones((2, 2), dtype)
    for bad in (np.nan, np.inf, 1j * np.inf):
        c = np.zeros((2, 2), dtype)
        c[0, 0] = bad
        got = pg.gemm(a, a, c, verify="raise")
        assert not np.isfinite(got[0, 0]) and (got.ravel()[1:] == 2).all()
    big = np.finfo(dtype).max
    got = pg.gemm(np.full((1, 2), big / 2, dtype), np.full((2, 2), 2, dtype), verify="raise", variant="reference")
    assert not np.isfinite(got).any()
    ok = (np.ones((3, 4)) + 1j).astype(dtype)
    with inject_fault(2, 1, value=1e3):  # a complex row whose operands are finite is still checked
        with pytest.raises(pg.VerificationError):
            pg.gemm(ok, ok.T, c=np.where(np.arange(9).reshape(3, 3) == 0, np.nan, 0).astype(dtype), verify="raise")


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("where, bad", [("a", np.inf), ("b", np.inf), ("b", complex(0, np.inf)), ("c", np.nan), ("c", complex(0, np.nan))])
def test_a_complex_fault_beside_a_non_finite_operand_is_caught_as_a_real_ones_is(rng, dtype, where, bad):
    """A complex product with an infinity or a NaN in one row's (or column's) operands: no false alarm on the correct
    product, and a fault where the operands are finite caught, from the rows' side or, where B's NaN or infinity
    leaves every row unchecked (or the fault shares its row with c's), from the columns' side, as a real product's."""
    def draw(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)

    ops = {"a": draw((50, 40)), "b": draw((40, 30)), "c": draw((50, 30))}
    ops[where][0, 0] = bad
    a, b, c = ops["a"], ops["b"], ops["c"]
    got = pg.gemm(a, b, c, beta=1.0, verify="raise")
    assert not np.isfinite(got[0, 0])
    faults = [(10, 10)] + ([(0, 10)] if where != "a" else [])  # row 0 of A not finite: its row and every column unchecked
    for row, col in faults:
        with inject_fault(row, col, value=1e6):
            with pytest.raises(pg.VerificationError) as err:
                pg.gemm(a, b, c, beta=1.0, verify="raise")
        report = err.value.report
        named = [f.index for f in report.rows] + [f.index for f in report.columns]
        assert report.failed == 1 and (row in named or col in named), str(err.value)
        if where == "b" or row == 0:
            assert [f.index for f in report.columns] == [col] and "columns' side" in str(err.value)


def test_a_complex_fault_is_one_row_of_the_result_not_two_of_its_real_form(rng):
    """Both parts of element (17, 5) wrong: "1 of 30 rows", row 17 once (its real form has 60 rows, two for each)."""
    a = (rng.standard_normal((30, 20)) + 1j * rng.standard_normal((30, 20))).astype(np.complex64)
    b = (rng.standard_normal((20, 25)) + 1j * rng.standard_normal((20, 25))).astype(np.complex64)
    with inject_fault(17, 5, value=100 + 100j):
        with pytest.raises(pg.VerificationError) as err:
            pg.gemm(a, b, verify="raise")
    report = err.value.report
    assert report.failed == 1 and report.checked == 30 and [f.index for f in report.rows] == [17]
    assert "1 of 30 rows" in str(err.value) and [f.index for f in report.columns] == [5]


def test_float16_overflow_is_no_false_alarm_but_a_nan_where_none_belongs_is_caught(rng):
    a = np.full((4, 8), 200.0, np.float16)
    b = np.full((8, 3), 100.0, np.float16)  # 8 * 20000 = 160000 > 65504: every element overflows to inf
    got = pg.gemm(a, b, verify="raise")
    assert np.isinf(got).all()
    small = _draw(rng, (6, 6), np.float16)
    with inject_fault(1, 1, value=float("nan")):
        with pytest.raises(pg.VerificationError, match="non-finite"):
            pg.gemm(small, small, verify="raise")


def test_error_bound_and_the_check_agree_on_a_correct_cpu_product(rng):
    a, b = _draw(rng, (20, 300), np.float16), _draw(rng, (300, 10), np.float16)
    got = pg.gemm(a, b, verify="raise")
    assert (np.abs(got.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64)) <= error_bound(a, b)).all()


def test_float64_beyond_the_range_of_its_squares_is_no_false_alarm(rng):
    a = rng.standard_normal((6, 40)) * np.logspace(-200, 200, 6)[:, None]
    b = rng.standard_normal((40, 5)) * 1e-100
    got = pg.gemm(a, b, verify="raise")
    assert np.isfinite(got).all()
    with inject_fault(2, 3, value=float(got[2, 3]) * 1.5 + 1e-300):
        with pytest.raises(pg.VerificationError):
            pg.gemm(a, b, verify="raise")


#: (A, B, C0) shapes: rows longer than a block, several rows a block, several matrices a block, batches of A, of B or
#: of both, broadcast batches (some flattened without a copy, some widened whole), a C0 of its own batch or none
BLOCKED_SHAPES = [((13, 150), (150, 40), None), ((13, 150), (150, 40), (13, 40)), ((3, 5, 8), (3, 8, 6), (3, 5, 6)),
                  ((4, 20, 7), (7, 11), (11,)), ((20, 7), (4, 7, 11), (20, 11)), ((1, 6, 5), (3, 5, 7), None),
                  ((4, 1, 6, 5), (3, 5, 7), None), ((2, 3, 9, 4), (4, 30), (2, 3, 9, 30)), ((0, 6, 5), (5, 7), None)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_the_rows_side_read_in_blocks_sums_what_the_operands_widened_whole_do(rng, dtype, monkeypatch):
    """The host check reads its operands a block of rows at a time into a float64 buffer (here blocks of 100 elements):
    its checksums and magnitudes are those of the operands widened whole, but for float64's rounding, whatever the
    batches, broadcasts and layouts; and with such blocks a correct product passes and a wrong element is named."""
    monkeypatch.setattr(host, "_BLOCK", 100)
    monkeypatch.setattr(host, "_scratch", threading.local())  # a buffer of that size
    for a_shape, b_shape, c_shape in BLOCKED_SHAPES:
        a, b = _draw(rng, a_shape, dtype), _draw(rng, b_shape, dtype)
        a = a if rng.random() < 0.5 else np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2)  # column-major
        result = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
        c = None if c_shape is None else _draw(rng, c_shape, dtype, 3.0)
        if np.dtype(dtype) == np.float64 and a.shape[-2] > 3:  # rows whose squares leave float64's range: scaled first
            a[..., 1, :] *= 1e200
            b[..., 0, :] *= 1e-170
            result[..., 2, :] *= 1e-200
        r = signs(rng, b.shape[-1])
        wide = [None if x is None else x.astype(np.float64) for x in (a, b, c, result)]
        with np.errstate(all="ignore"):
            blocked = host._rows_side(a, b, c, result, -1.5, 0.5, r)
            got, want, (ya, c0a, ca) = host._side(*wide, -1.5, 0.5, r, True)
        if blocked is None:  # widened whole: a broadcast batch that does not flatten, C0 broadcast along rows, no batch
            assert (a_shape, c_shape) in (((4, 1, 6, 5), None), ((4, 20, 7), (11,)), ((0, 6, 5), None))
            continue
        bgot, bwant, (bya, bc0a, bca) = blocked
        assert all(x.shape == got.shape for x in (bgot, bwant, bya, bc0a, bca))
        for x, y in ((bya, ya), (bc0a, c0a), (bca, ca)):  # sums of magnitudes: nothing cancels
            np.testing.assert_allclose(x, np.broadcast_to(y, got.shape), rtol=1e-12, atol=0)
        root = np.sqrt(b.shape[-1])  # signed sums, off by at most their order's rounding of their magnitudes' sums
        assert (np.abs(bgot - got) <= 1e-12 * root * ca).all()
        assert (np.abs(bwant - want) <= 1e-12 * root * (ya + c0a)).all()
        with np.errstate(all="ignore"):  # the magnitudes alone (may_overflow's): the same
            _, _, (oya, oc0a, _) = host._rows_side(a, b, c, None, -1.5, 0.5, r, result.shape[:-2])
        assert np.array_equal(oya, bya) and np.array_equal(oc0a, bc0a)
    a, b = _draw(rng, (2, 30, 40), dtype), _draw(rng, (40, 24), dtype)
    res = pg.gemm(a, b)
    kw = dict(dtype=np.dtype(dtype), out_dtype=np.dtype(dtype), rng=rng)
    assert host_check(a, b, None, res, 1.0, 0.0, **kw).ok
    thr = row_thresholds(a, b, None, res, 1.0, 0.0, dtype=np.dtype(dtype), out_dtype=np.dtype(dtype))
    res[1, 17, 5] = float(res[1, 17, 5]) + 3.0 * float(thr[1, 17])
    report = host_check(a, b, None, res, 1.0, 0.0, **kw)
    assert not report.ok and (report.rows[0].batch, report.rows[0].index) == ((1,), 17)


def test_a_medium_precision_product_is_checked_against_its_own_bound(rng):
    # inputs rounded to bfloat16 (8 bits: within medium's 10-bit bound's constant for one operand) and K = 4, where
    # the float32 bound's K·u is smallest: the asked precision's bound, not float32's, sets the threshold
    a = rng.standard_normal((64, 4)).astype(np.float32)
    b = rng.standard_normal((4, 48)).astype(np.float32)
    rounded = a.astype(ml_dtypes.bfloat16).astype(np.float32)
    result = (rounded.astype(np.float64) @ b).astype(np.float32)
    about = {"backend": "cpu", "device": "", "variant": "", "shape": ""}
    kw = dict(dtype=np.dtype(np.float32), out_dtype=np.dtype(np.float32), about=about)
    assert host_check(a, b, None, result, 1.0, 0.0, rng=rng, precision="medium", **kw).ok
    assert not host_check(a, b, None, result, 1.0, 0.0, rng=rng, **kw).ok  # at float32's bound it is a fault


INTS = ["int8", "uint8", "int16", "int32", "int64", "uint64"]


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("mode", ["raise", "warn", "retry"])
def test_integer_products_are_checked_exactly_with_no_false_alarm(rng, dtype, mode):
    """Integers wrap modulo 2**bits, and so does their check: products that overflow their dtype, batches
    broadcast as numpy.matmul broadcasts them, alpha and beta, all pass."""
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 9, 40), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (40, 5), dtype=dtype, endpoint=True)
    c = rng.integers(info.min, info.max, (3, 9, 5), dtype=dtype, endpoint=True)
    with np.errstate(over="ignore"):
        assert np.array_equal(pg.gemm(a, b, verify=mode), np.matmul(a, b))
        got = pg.gemm(a, b, c, alpha=3, beta=2, verify=mode)
        assert np.array_equal(got, np.matmul(a, b) * dtype_of(dtype, 3) + dtype_of(dtype, 2) * c)
    assert np.array_equal(pg.matmul(a[0, 0], b, verify=mode), np.matmul(a[0, 0], b))


def dtype_of(dtype, value):
    return np.array(value).astype(dtype)


@pytest.mark.parametrize("dtype", ["int16", "uint32", "bool"])
def test_a_wrong_integer_or_bool_element_is_caught_and_named(rng, dtype):
    a = rng.integers(0, 3, (6, 5)).astype(dtype)
    b = rng.integers(0, 3, (5, 4)).astype(dtype)
    out = np.full((6, 4), 1, dtype)
    with pytest.raises(pg.VerificationError) as err:
        with inject_fault(2, 3, bit=0):
            pg.gemm(a, b, out=out, verify="raise")
    msg = str(err.value)
    assert "rows 2" in msg and "columns 3" in msg and "exact check" in msg and dtype in msg
    with inject_fault(2, 3, bit=0):
        with pytest.warns(pg.VerificationWarning):
            pg.gemm(a, b, verify="warn")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint64"])
def test_an_integer_fault_is_off_by_its_signed_difference_on_both_sides(rng, dtype):
    """An element set 100 from its value is off by the difference modulo 2**bits as a signed integer, the same for
    its row and its column (not 170 for the one and 86 for the other)."""
    a = rng.integers(0, 4, (5, 4)).astype(dtype)
    b = rng.integers(0, 4, (4, 6)).astype(dtype)
    true = int((a.astype(np.int64) @ b.astype(np.int64))[2, 3])
    with inject_fault(2, 3, value=true + 100):
        with pytest.raises(pg.VerificationError) as err:
            pg.matmul(a, b, verify="raise")
    off = 100 if dtype != "int8" or true + 100 <= 127 else None
    msg = str(err.value)
    assert msg.count("off by ") == 2 and (off is None or msg.count(f"off by {off},") == 2), msg


def test_bit_faults_reach_every_element_size_and_values_past_the_dtype_are_refused():
    """A bit of a complex128 element (its 128 bits: the real part's, then the imaginary part's) is flipped like any
    other; a value past a float result's largest finite one is refused by name, not stored as an infinity with a
    NumPy overflow warning."""
    z = np.full((2, 2), 1 + 1j)
    for bit in (62, 64 + 62):  # an exponent bit of the real part, then of the imaginary part
        with inject_fault(0, 1, bit=bit) as fault:
            with pytest.raises(pg.VerificationError, match="rows 0"):
                pg.matmul(z, z, verify="raise")
        assert fault.hits == 1
    x = np.ones((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"value=1e\+300 is past the float32 result's largest finite value"):
        with inject_fault(0, 0, value=1e300):
            pg.matmul(x, x, verify="raise")
    with inject_fault(0, 0, value=float("inf")):
        with pytest.raises(pg.VerificationError):
            pg.matmul(x, x, verify="raise")


def test_integer_products_pass_their_check_under_the_process_default(rng, monkeypatch):
    a = rng.integers(-5, 5, (4, 7)).astype(np.int32)
    pg.set_verify("raise")
    try:
        assert np.array_equal(pg.matmul(a, a.T), a @ a.T)
        assert pg.explain(a, a.T, verify="raise").problem.dtype == np.dtype(np.int32)
    finally:
        pg.set_verify(None)


def test_a_fault_beside_a_nan_in_a_and_one_in_b_is_caught_over_the_finite_rows(rng):
    # B's NaN reaches every row's B·r and A's every column's r·A: the columns are checked over A's finite rows
    a = rng.standard_normal((16, 12)).astype(np.float32)
    b = rng.standard_normal((12, 16)).astype(np.float32)
    a[0, 0] = np.nan
    b[0, 0] = np.nan
    pg.gemm(a, b, verify="raise")
    with pg.testing.inject_fault(5, 5, value=1e6), pytest.raises(pg.VerificationError) as info:
        pg.gemm(a, b, verify="raise")
    assert [f.index for f in info.value.report.columns] == [5]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_float64_results_near_the_largest_finite_are_no_false_alarm(rng, dtype):
    # a row of 1e308, 1e308, -1e308: float64's own sum of the row can overflow where every element is finite
    a = np.array([[1e308]], dtype)
    b = np.array([[1.0, 1.0, -1.0]], dtype)
    for _ in range(64):  # (the overflow depends on r's signs)
        pg.gemm(a, b, verify="raise")
    with pg.testing.inject_fault(0, 1, value=1.0), pytest.raises(pg.VerificationError):
        pg.gemm(np.array([[1e300]], dtype), b, verify="raise")


def test_a_bool_product_is_recounted_on_the_blas_and_explain_prices_it_beside_the_product(rng, monkeypatch):
    """The bool check counts A·B in floating point (exact below 2**24 terms), through the BLAS rather than NumPy's
    64-bit integer loops: every wrong element, true or false, is still caught, and explain prices the check at about
    the product's own cost, not a fraction of an integer product's."""
    from polygemm.verification import host

    a, b = rng.random((40, 300)) < 0.02, rng.random((300, 30)) < 0.02  # sparse: falses and trues both in the result
    widened = []
    real_matmul = np.matmul

    def spy(x, y, *args, **kwargs):
        widened.append((x.dtype, y.dtype))
        return real_matmul(x, y, *args, **kwargs)

    monkeypatch.setattr(host.np, "matmul", spy)
    want = a @ b
    assert want.any() and not want.all()
    pg.matmul(a, b, verify="raise")
    assert (np.float32, np.float32) in widened and (np.int64, np.int64) not in widened, widened
    for i, j in (tuple(np.argwhere(want)[0]), tuple(np.argwhere(~want)[0])):
        with pytest.raises(pg.VerificationError, match=rf"rows {i}\b"):
            with inject_fault(int(i), int(j), value=not want[i, j]):
                pg.matmul(a, b, verify="raise")
    big = np.ones((1000, 1000), bool)
    note = next(line for line in str(pg.explain(big, big, verify="raise")).splitlines() if "verify=" in line)
    assert "on the BLAS" in note and ("about as much as the product's" in note or "times the product's" in note), note


def test_a_fault_interrupted_as_it_is_registered_leaves_nothing_registered(monkeypatch):
    # a KeyboardInterrupt landing just after inject_fault registered its fault, before the block runs: the fault goes
    # with the with statement all the same (left registered, it would corrupt every later verified product that fits it)
    from polygemm.testing import faults as testing_faults
    from polygemm.verification import faults

    real = faults.add_fault

    def interrupted(fault):
        real(fault)
        raise KeyboardInterrupt

    monkeypatch.setattr(testing_faults, "add_fault", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with inject_fault(0, 0, value=1e4):
            pass
    assert not faults._faults
    a = np.ones((4, 4), np.float32)
    pg.gemm(a, a, device="cpu", verify="raise")  # a clean call after it
