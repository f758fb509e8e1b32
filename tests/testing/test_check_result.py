"""polygemm.testing as a plugin author uses it: check_result, error_bound, reference_for."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm.errors import ArgumentError, ArgumentTypeError, DTypeError, PolygemmError, ShapeError
from polygemm.testing import Reference, assert_close, check_result, error_bound, reference_for, unit_roundoff
from tests.helpers import assert_matmul_within, cli, poisoned


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


ml_dtypes = pytest.importorskip("ml_dtypes")


DTYPES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]


DT_IDS = [d.name for d in DTYPES]


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


BF16 = np.dtype(ml_dtypes.bfloat16)


VARIANTS = ["auto", "reference", "numpy"]


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


SHAPES = [
    ((2, 1, 5, 4), (3, 4, 6)),  # broadcast both ways, 4-D
    ((5, 4), (3, 4, 6)),  # one a for the batch
    ((3, 5, 4), (4, 6)),  # one b for the batch
    ((1, 5, 4), (4, 6)),  # a batch of one stays a batch
    ((1, 5, 4), (3, 1, 4, 6)),
    ((0, 5, 4), (1, 4, 6)),  # an empty batch beside a batch of one
    ((2, 0, 5, 4), (4, 6)),
    ((3, 5, 0), (3, 0, 6)),  # K = 0 in a batch: zeros
]


def _views(rng):
    """(name, a, b): batches of every stride kind a NumPy user makes."""
    big = rand(rng, (6, 5, 4))
    b = rand(rng, (3, 4, 6))
    ro = rand(rng, (3, 5, 4))
    ro.flags.writeable = False
    return [
        ("every other matrix a[::2]", big[::2], b),
        ("reversed batch a[::-2]", big[::-2], b),
        ("reversed b", rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))[::-1]),
        ("moveaxis: the batch axis in the middle of memory", np.moveaxis(rand(rng, (5, 3, 4)), 1, 0), b),
        ("swapped batch axes", rand(rng, (3, 2, 5, 4)).swapaxes(0, 1), rand(rng, (2, 3, 4, 6))),
        ("Fortran-ordered stacks", np.asfortranarray(rand(rng, (3, 5, 4))), np.asfortranarray(b)),
        ("transposed matrices", rand(rng, (3, 4, 5)).swapaxes(1, 2), rand(rng, (3, 6, 4)).swapaxes(1, 2)),
        ("whole-array transpose", rand(rng, (4, 5, 3)).T, b),
        ("read-only batch", ro, b),
        ("a batch of one, columns reversed", rand(rng, (1, 5, 4))[:, :, ::-1], b),
        ("unit rows by None", rand(rng, (3, 4))[:, None, :], b),
        ("byte-swapped", rand(rng, (3, 5, 4)).astype(">f4"), b),
    ]


@pytest.fixture
def rng():
    return np.random.default_rng(19)


SENTINEL = -12345.0


@pytest.fixture
def rng_2():
    return np.random.default_rng(20)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def assert_within_2(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` (2-D) element-wise within the bound of the float64 reference, shape and dtype too."""
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta).compare(np.asarray(got))
    assert res.ok, res.message


class Tagged(np.ndarray):
    """A subclass carrying an attribute through its views, as astropy's and xarray's wrappers do."""

    def __new__(cls, x, tag=None):
        obj = np.asarray(x).view(cls)
        obj.tag = tag
        return obj

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", None)


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_overlap_check_too_hard_is_a_polygemm_error(rng, monkeypatch):
    from polygemm import problem

    def too_hard(*args, **kwargs):
        raise np.exceptions.TooHardError("exceeded max_work")

    monkeypatch.setattr(np, "shares_memory", too_hard)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 2))
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=np.empty((4, 2), np.float32), device="cpu")


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("k", [0, 1, 17])
def test_check_result_accepts_gemm_and_rejects_a_wrong_c_term(rng, dtype, k):
    a, b, c = _rand(rng, dtype, 5, k), _rand(rng, dtype, k, 3), _rand(rng, dtype, 5, 3)
    got = pg.gemm(a, b, c, alpha=1.5, beta=-2.0)
    res = check_result(got, a, b, c, 1.5, -2.0)
    assert res.ok and res.violations == 0 and 0.0 <= res.worst_ratio <= 1.0 and bool(res) is True, res.message
    assert res.message.startswith(f"all {got.size} elements within the bound")
    # the same result read as if beta were 0: the c term is missing, which the bound must see
    wrong = check_result(got, a, b, c, 1.5, 0.0)
    assert not wrong.ok and wrong.violations > 0 and bool(wrong) is False and "outside the bound" in wrong.message
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close(got, a, b, c, 1.5, 0.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_error_bound_is_the_documented_formula(rng, dtype):
    a, b, c = _rand(rng, dtype, 4, 6), _rand(rng, dtype, 6, 2), _rand(rng, dtype, 4, 2)
    tol = error_bound(a, b, c, 2.0, 3.0)
    a64, b64, c64 = (np.abs(x.astype(np.float64)) for x in (a, b, c))
    u_acc = unit_roundoff(np.float32 if dtype.itemsize == 2 else dtype)
    ref64 = 2.0 * (a.astype(np.float64) @ b.astype(np.float64)) + 3.0 * c.astype(np.float64)
    # the whole formula, u_out * |C_ref| too (error_bound without ref= computes it too)
    want = (2.0 * 6 * u_acc * 2.0 * (a64 @ b64) + 2.0 * u_acc * 3.0 * c64 + unit_roundoff(dtype) * np.abs(ref64)
            + float(pg.problem.finfo(dtype).tiny))
    assert tol.shape == (4, 2) and tol.dtype == np.float64
    np.testing.assert_allclose(tol, want, rtol=1e-12)
    ref = reference_for(a, b, c, 2.0, 3.0)
    assert isinstance(ref, Reference) and ref.out_dtype == dtype and ref.ref64.dtype == np.float64
    np.testing.assert_allclose(ref.ref64, ref64)
    np.testing.assert_allclose(ref.tol, tol, rtol=1e-12)  # one bound, with or without the reference at hand


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)], ids=["float16", "bfloat16"])
def test_check_result_of_a_float32_result_for_half_inputs(rng, dtype):
    a, b = _rand(rng, dtype, 6, 40), _rand(rng, dtype, 40, 5)
    wide = pg.gemm(a, b, out_dtype=np.float32)
    assert check_result(wide, a, b, out_dtype=np.float32).ok
    assert check_result(pg.gemm(a, b), a, b).ok


def test_check_result_inf_and_nan_in_inputs():
    a = np.array([[np.inf, 1.0], [np.nan, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([[1.0], [0.0]], np.float32)
    got = pg.gemm(a, b)
    assert np.isposinf(got[0, 0]) and np.isnan(got[1, 0]) and got[2, 0] == 1.0
    assert check_result(got, a, b).ok
    for bad in (np.array([[np.inf], [0.0], [1.0]], np.float32),  # NaN expected
                np.array([[-np.inf], [np.nan], [1.0]], np.float32),  # +inf expected
                np.array([[1e30], [np.nan], [1.0]], np.float32)):  # an infinite reference is matched exactly
        res = check_result(bad, a, b)
        assert not res.ok and res.violations == 1, res.message
    c = np.array([[np.nan], [np.nan], [np.nan]], np.float32)  # c unread with beta = 0 (BLAS)
    assert check_result(pg.gemm(a, b, c, beta=0.0), a, b, c, beta=0.0).ok


@pytest.mark.parametrize("args, kw, err, match", [
    (lambda a, b, c: (a, b.T), {}, ShapeError, r"a \(5, 4\) and b \(3, 4\) do not multiply"),
    (lambda a, b, c: (a[0], b), {}, ShapeError, r"^a must be a matrix.*1-D"),
    (lambda a, b, c: (a, b[:, 0]), {}, ShapeError, r"^b must be a matrix.*1-D"),
    (lambda a, b, c: (a, b, c.T, 1.0, 1.0), {}, ShapeError, r"^c must have the result's shape \(5, 3\).*got \(3, 5\)"),
    (lambda a, b, c: (a, b, c[:2], 1.0, 0.0), {}, ShapeError, r"^c must have the result's shape"),
    (lambda a, b, c: (np.stack([a, a]), np.stack([b, b, b])), {}, ShapeError, r"batch dimensions of a \(2, 5, 4\) and b \(3, 4, 3\)"),
    (lambda a, b, c: (a, b.astype(np.float64)), {}, DTypeError, r"a \(float32\) and b \(float64\) must have one dtype"),
    (lambda a, b, c: (a.astype(np.int32), b.astype(np.int32)), {}, DTypeError, r"^a has dtype int32;.*float16, bfloat16"),
    (lambda a, b, c: (a, b), {"out_dtype": np.complex64}, DTypeError, r"^out_dtype=complex64 for float32 inputs"),
    (lambda a, b, c: (a, b, c.astype(np.int8), 1.0, 1.0), {}, DTypeError, r"^c has dtype int8"),
    (lambda a, b, c: (a, b, None, "2"), {}, ArgumentError, r"^alpha must be a real number"),
    (lambda a, b, c: (a, b, c, 1.0, float("nan")), {}, ArgumentError, r"^beta must be finite"),
    (lambda a, b, c: (a, b), {"out_dtype": "int8"}, DTypeError, r"^out_dtype='int8' is int8; pass one of float16"),
    (lambda a, b, c: (a, b), {"out_dtype": "floaty"}, DTypeError, r"^out_dtype='floaty' is not a dtype"),
    (lambda a, b, c: (a, b), {"acc_dtype": np.int64}, DTypeError, r"^acc_dtype=.* is int64"),
], ids=["K-mismatch", "1-D a", "1-D b", "c transposed", "c short, beta 0", "batches", "a/b dtypes", "int", "complex out",
        "int c", "alpha str", "beta nan", "out_dtype int", "out_dtype typo", "acc_dtype int"])
def test_testing_arguments_passed_by_mistake_are_named(rng, args, kw, err, match):
    # each is named as the argument passed by mistake: NumPy's own errors (a gufunc signature, "operands could not be
    # broadcast", "not inexact", UFuncTypeError) or an IndexError (1-D a) would not name it, and a float64 b, complex
    # inputs with the imaginary parts dropped, a c of the wrong shape with beta = 0, or alpha = NaN (all-NaN
    # "violations") would pass
    a, b, c = _rand(rng, np.float32, 5, 4), _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 5, 3)
    result = a @ b
    for fn in (lambda *x, **k: check_result(result, *x, **k), error_bound, reference_for):
        with pytest.raises(err, match=match):
            fn(*args(a, b, c), **kw)
    assert issubclass(err, (ValueError, TypeError)) and issubclass(err, pg.PolygemmError)


def test_check_result_of_a_batch(rng):
    a, b = _rand(rng, np.float32, 3, 5, 7), _rand(rng, np.float32, 7, 2)
    c = _rand(rng, np.float32, 3, 5, 2)
    got = pg.gemm(a, b, c, beta=1.0)
    assert check_result(got, a, b, c, 1.0, 1.0).ok
    assert not check_result(got, a, b, c, 1.0, 0.0).ok
    assert error_bound(a, b).shape == (3, 5, 2)


@pytest.mark.parametrize("sa, sb", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_batches_broadcast_as_numpy_matmul_and_gemm_agrees_with_matmul(rng, sa, sb, dtype):
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    want_shape = np.matmul(a.astype(np.float32), b.astype(np.float32)).shape
    for variant in VARIANTS:
        got = pg.gemm(a, b, device="cpu", variant=variant)
        assert got.shape == want_shape and got.dtype == a.dtype, variant
        assert_within(got, a, b)
    via_matmul = pg.matmul(a, b, device="cpu")
    np.testing.assert_array_equal(via_matmul, pg.gemm(a, b, device="cpu"))  # the same call underneath
    assert via_matmul.dtype == a.dtype


def test_batch_views_of_every_stride_are_computed_and_left_as_they_were(rng):
    """Stepped, reversed, swapped, Fortran-ordered, read-only and byte-swapped batches: the
    result is numpy.matmul's within the bound, and the inputs are not written."""
    for name, a, b in _views(rng):
        a0, b0 = a.copy(), b.copy()
        for variant in VARIANTS:
            got = pg.gemm(a, b, device="cpu", variant=variant)
            assert got.shape == np.matmul(a, b).shape and got.dtype == np.float32, name
            res = check_result(got, a, b)
            assert res.ok, f"{name}, {variant}: {res.message}"
        np.testing.assert_array_equal(pg.matmul(a, b, device="cpu"), pg.gemm(a, b, device="cpu"))
        assert np.array_equal(a, a0) and np.array_equal(b, b0), name


@pytest.mark.parametrize("out_dtype", [None, np.float32], ids=["bf16", "f32"])
def test_bfloat16_long_k_stays_within_the_bound(rng, out_dtype):
    """K = 200000 of positive bfloat16 values (no cancellation to hide behind): the float32
    accumulation stays within the documented bound, per matrix of the batch; so does float16."""
    for dtype in (BF16, np.float16):
        a = rng.uniform(0, 1, (2, 3, 200_000)).astype(dtype)
        b = rng.uniform(0, 1, (200_000, 4)).astype(dtype)
        for variant in ("auto", "reference"):
            got = pg.gemm(a, b, device="cpu", variant=variant, out_dtype=out_dtype)
            assert got.dtype == (out_dtype or dtype)
            assert_within(got, a, b, out_dtype=out_dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, BF16])
def test_a_failed_check_gives_the_values_as_numbers(dtype):
    # the values are numbers, not NumPy 2's repr of float64 copies ("np.float64(nan)"), which would name a float64 for
    # a float16 or float32 result
    a = np.ones((2, 2), dtype)
    res = check_result(np.full((2, 2), np.nan, dtype), a, a)
    assert not res.ok and "first at (0, 0): got nan, reference 2.0, bound " in res.message
    assert "np.float64" not in res.message
    bad = np.full((2, 2), 3.0, dtype)
    assert "got 3.0, reference 2.0" in reference_for(a, a).compare(bad).message
    assert "(error 1, " in reference_for(a, a).compare(bad).message  # and how far past its bound
    assert "error" not in res.message  # a NaN has no error to give


def test_a_failed_check_says_the_error_against_the_bound():
    a = np.eye(3, dtype=np.float32)
    got = np.eye(3, dtype=np.float32)
    got[1, 2] = 0.5
    res = check_result(got, a, a)
    assert not res.ok and "first at (1, 2)" in res.message and "error 0.5," in res.message
    assert re.search(r"[0-9.e+]+x the bound\)", res.message), res.message


class _OtherDeviceArray:
    """An array of a plugin's device: its memory is no host memory NumPy can read."""

    def __init__(self, host):
        self._host = host

    @property
    def __polygemm_array_interface__(self):
        h = self._host
        return {"shape": h.shape, "typestr": h.dtype.str, "strides": None, "data": (h.ctypes.data, False), "version": 3,
                "device": "otherdev"}


def test_an_array_of_another_device_is_told_to_come_through_its_backends_to_host(rng):
    """A plugin's device array is refused naming the argument, its device and to_host, not compared as one object of
    shape ()."""
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    with pytest.raises(ArgumentTypeError, match=r"result is a _OtherDeviceArray.*'otherdev'.*to_host\(result\)"):
        check_result(_OtherDeviceArray(a @ b), a, b)
    with pytest.raises(ArgumentTypeError, match=r"^a is a _OtherDeviceArray.*to_host\(a\)"):
        error_bound(_OtherDeviceArray(a), b)
    assert check_result(np.float32(1), a, b).message == "result has shape (), expected (4, 3)"  # a host scalar: as before


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("k", [1, 7, 33])
def test_error_bound_alone_is_the_documented_bound(rng, dtype, k):
    # error_bound(a, b) without ref= keeps the bound's u_out * |C_ref| term (the result's rounding to its dtype) that
    # the README's and the module's formula give: without it a float16 product rounded correctly is up to 26 times
    # error_bound(a, b) off the reference, a bfloat16 one up to 1800 times, and a plugin author's own |C - C_ref| <=
    # error_bound(a, b) fails correct kernels where check_result (which passes ref=) does not
    a = rng.standard_normal((6, k)).astype(dtype)
    b = rng.standard_normal((k, 5)).astype(dtype)
    c = rng.standard_normal((6, 5)).astype(dtype)
    got = pg.gemm(a, b, c, alpha=1.5, beta=-0.5, device="cpu")
    ref64 = 1.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 0.5 * c.astype(np.float64)
    tol = error_bound(a, b, c, 1.5, -0.5)
    assert np.all(np.abs(got.astype(np.float64) - ref64) <= tol)
    np.testing.assert_allclose(tol, reference_for(a, b, c, 1.5, -0.5).tol, rtol=1e-12)
    assert np.all(tol >= unit_roundoff(dtype) * np.abs(ref64))


def test_check_result_with_nan_and_inf_inputs_and_k_zero():
    """NaN and Inf in a and b: gemm's result passes, a finite value where the reference is NaN fails naming
    both, an infinity of the wrong sign fails; K = 0 gives beta * c, and a NaN c with beta = 0 is not read."""
    a = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 1.0], [1.0, 1.0, 1.0]], np.float32)
    b = np.ones((3, 2), np.float32)
    b[0, 1] = 0.0  # inf * 0: NaN
    got = pg.gemm(a, b, device="cpu")
    assert check_result(got, a, b).ok
    bad = got.copy()
    bad[0, 0] = 0.0
    res = check_result(bad, a, b)
    assert not res.ok and res.violations == 1 and "first at (0, 0): got 0.0, reference nan" in res.message
    flipped = got.copy()
    flipped[1, 0] = -np.inf
    assert "first at (1, 0): got -inf, reference inf" in check_result(flipped, a, b).message
    a0, b0 = np.ones((2, 0), np.float16), np.ones((0, 3), np.float16)
    c = np.full((2, 3), 3.0, np.float16)
    assert check_result(pg.gemm(a0, b0, c, beta=2.0, device="cpu"), a0, b0, c, 1.0, 2.0).ok
    assert not check_result(np.zeros((2, 3), np.float16), a0, b0, c, 1.0, 2.0).ok
    nan_c = np.full((2, 3), np.nan, np.float16)
    assert check_result(np.zeros((2, 3), np.float16), a0, b0, nan_c, beta=0.0).ok


def test_c_that_does_not_broadcast_gets_no_broadcast_hint_and_c_over_a_batch_through_broadcast_to(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    with pytest.raises(ShapeError) as info:
        pg.gemm(a, b, np.ones(3), beta=1.0, device="cpu")
    assert "broadcast_to" not in str(info.value) and "got (3,)" in str(info.value)
    A, B = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    c = rng.standard_normal((3, 5))
    with pytest.raises(ShapeError, match=re.escape("np.broadcast_to(c, (2, 3, 5))")):
        pg.gemm(A, B, c, beta=2.0, device="cpu")
    got = pg.gemm(A, B, np.broadcast_to(c, (2, 3, 5)), beta=2.0, device="cpu")
    np.testing.assert_allclose(got, np.matmul(A, B) + 2.0 * c, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scalar", [np.float16(0.1), ml_dtypes.bfloat16(0.1), np.float32(0.1), 0.1,
                                    np.longdouble(0.1)], ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("variant", ["auto", "reference"])
def test_an_inexact_scalar_of_each_float_type_scales_by_its_own_value_not_by_point_one(rng, scalar, variant):
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    got = pg.gemm(a, b, c, alpha=scalar, beta=scalar, device="cpu", variant=variant)
    s = np.float64(scalar)  # float16(0.1) is 0.0999755859375, as numpy's own `scalar * x` uses it
    want = s * np.matmul(a, b) + s * c
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    if s != 0.1:
        assert not np.allclose(got, 0.1 * np.matmul(a, b) + 0.1 * c, rtol=1e-9, atol=0)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("scalar", [np.float64(0.5), np.longdouble(0.5), 2, np.int64(2), np.uint8(2)],
                         ids=lambda s: type(s).__name__)
def test_a_wider_scalar_or_python_int_never_widens_the_result(rng, dtype, scalar):
    a = rng.standard_normal((3, 4)).astype(dtype)
    b = rng.standard_normal((4, 5)).astype(dtype)
    c = rng.standard_normal((3, 5)).astype(dtype)
    got = pg.gemm(a, b, c, alpha=scalar, beta=scalar, device="cpu")
    assert got.dtype == np.dtype(dtype)
    want = float(scalar) * (np.matmul(a.astype(np.float64), b.astype(np.float64)) + c.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("sa, sb", [
    ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 6)), ((1, 1, 1, 3, 4), (4, 6)),
    ((0, 3, 4), (4, 6)), ((2, 0, 3, 4), (1, 4, 6)), ((2, 1, 3, 4), (0, 4, 6)), ((0, 3, 4), (1, 4, 6)),
    ((1, 0, 4), (3, 4, 6)), ((2, 3, 0), (2, 0, 5)),
], ids=str)
@pytest.mark.parametrize("fn", ["gemm", "matmul"])
def test_batched_operands_broadcast_and_empty_batches_as_numpy_matmul(rng, sa, sb, fn):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    want = np.matmul(a, b)
    got = getattr(pg, fn)(a, b, device="cpu")
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype
    assert got.flags.c_contiguous and got.flags.owndata
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # a broadcast batch written into an out of the result's shape
    out = np.full(want.shape, SENTINEL, np.float32)
    assert getattr(pg, fn)(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_the_result_is_a_new_array_and_no_input_of_any_layout_is_changed(rng):
    base_a = rng.standard_normal((6, 8))
    a = base_a[::2, ::-2]  # stepped and reversed: copied once
    b = np.asfortranarray(rng.standard_normal((4, 5)))
    c = np.broadcast_to(rng.standard_normal(5), (3, 5))  # read-only view
    saved = [x.copy() for x in (base_a, b, c)]
    got = pg.gemm(a, b, c, alpha=2, beta=np.float32(3), device="cpu")
    np.testing.assert_allclose(got, 2 * np.matmul(a, b) + 3 * c, rtol=1e-12, atol=1e-12)
    assert got.flags.owndata and got.flags.writeable and got.flags.c_contiguous
    assert not any(np.shares_memory(got, x) for x in (base_a, b, c))
    assert all(np.array_equal(x, s) for x, s in zip((base_a, b, c), saved))
    # a second call gives a second array, not the first one again
    again = pg.gemm(a, b, c, alpha=2, beta=np.float32(3), device="cpu")
    assert again is not got and not np.shares_memory(again, got) and np.array_equal(again, got)


@pytest.mark.parametrize("variant", ["auto", "blas", "numpy"])
def test_a_subnormal_beta_scales_c_at_its_own_value(variant, rng_2):
    """Beta as alpha: beta=1e-40 beside a c of 1e30 scales c by 1e-40 itself, not by a rounded 0.99999e-40."""
    a = rng_2.standard_normal((3, 4)).astype(np.float32)
    b = rng_2.standard_normal((4, 5)).astype(np.float32)
    c = np.full((3, 5), 1e30, np.float32)
    got = pg.gemm(a, b, c, beta=1e-40, device="cpu", variant=variant)
    assert_within(got, a, b, c, 1.0, 1e-40)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b + 1e-10, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_and_subclasses_give_numpys_result_type(rng):
    """np.matrix in, np.matrix out, of numpy.matmul's shape (matrix @ vector is a 1×M matrix: a matrix stays
    2-D), a subclass keeps its type and its attribute; every value within the bound."""
    m = np.asmatrix(f32(rng, 3, 4))
    v, w = f32(rng, 4), f32(rng, 3)
    for x, y in [(m, m.T), (m, v), (w, m)]:
        want = np.matmul(x, y)
        got = pg.matmul(x, y, device="cpu")
        assert type(got) is type(want) is np.matrix and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    t = Tagged(f32(rng, 3, 4), tag="meters")
    b = f32(rng, 4, 2)
    got = pg.gemm(t, b, device="cpu")
    assert type(got) is Tagged and got.tag == np.matmul(t, b).tag == "meters"
    assert_within_2(got, np.asarray(t), b)
    out = np.asmatrix(np.zeros((3, 2), np.float32))
    assert pg.gemm(np.asarray(t), b, out=out, device="cpu") is out
    assert_within_2(out, np.asarray(t), b)


def test_ragged_list_is_a_value_error_as_numpy_raises(rng):
    # a ragged list ([[1., 2.], [3.]]) is a ShapeError (a ValueError) naming the argument, as numpy.matmul raises
    # ValueError and `except ValueError` is written for it; as c too, not NumPy's bare ValueError from np.shape
    ragged = [[1.0, 2.0], [3.0]]
    with pytest.raises(ValueError):
        np.matmul(ragged, np.ones((2, 2)))
    b = np.ones((2, 2))
    for call, name in [(lambda: pg.matmul(ragged, b, device="cpu"), "a"), (lambda: pg.gemm(b, ragged, device="cpu"), "b"),
                       (lambda: pg.explain(ragged, b, device="cpu"), "a"),
                       (lambda: pg.matmul([1.0, [2.0, 3.0]], b, device="cpu"), "a")]:
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, pg.ShapeError)
        assert str(info.value).startswith(f"{name} could not be converted to an array")
        assert "rows all have the same length" in str(info.value) and ".." not in str(info.value)
    c = rng.standard_normal((2, 2))
    kept = c.copy()
    with pytest.raises(pg.ShapeError, match="^c could not be converted"):
        pg.gemm(b, b, [[1.0, 2.0], [3.0]], beta=1.0, device="cpu")
    with pytest.raises(pg.ShapeError, match="^a could not be converted"):
        pg.gemm(ragged, b, c, beta=1.0, out=c, device="cpu")
    np.testing.assert_array_equal(c, kept)


def test_zero_and_negative_stride_operands(rng):
    """broadcast_to views (a row or a column repeated: zero strides), reversed rows and columns (negative
    strides) and a batch broadcast from one matrix are read as the arrays they show, inputs unchanged."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    views_a = [np.broadcast_to(a[:1], (3, 4)), np.broadcast_to(a[:, :1], (3, 4)), a[::-1, ::-1], a[::-1], a.T.T[:, ::-1]]
    for x in views_a:
        kept = x.copy()
        got = pg.gemm(x, b[::-1], device="cpu")
        assert_within_2(got, np.ascontiguousarray(x), np.ascontiguousarray(b[::-1]))
        np.testing.assert_array_equal(x, kept)
    stack = np.broadcast_to(a, (2, 3, 3, 4))
    got = pg.matmul(stack, b, device="cpu")
    assert got.shape == (2, 3, 3, 5)
    assert_matmul_within(got, np.ascontiguousarray(stack), b)


def test_refusals_leave_c_updated_in_place_as_it_was(rng, tmp_path):
    """Each refusal of a call that would update ``c`` in place (``out=c``) leaves ``c`` as it was: a masked, int,
    ragged or object operand, a ``c`` of another byte order beside ``out``, an alpha that is no number, a K
    mismatch, an out_dtype that disagrees with ``out``."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    c = f32(rng, 3, 5)
    kept = c.copy()
    bad = [
        (dict(a=np.ma.array(a, mask=a > 0)), pg.ArgumentError),
        (dict(a=a.astype(np.int32)), pg.DTypeError),
        (dict(b=[[1.0] * 5] * 3 + [[1.0]]), pg.PolygemmError),  # a ShapeError, a PolygemmError as any refusal here
        (dict(b=b.astype(object)), pg.DTypeError),
        (dict(b=f32(rng, 3, 5)), pg.ShapeError),
        (dict(alpha="2"), pg.ArgumentTypeError),
        (dict(out_dtype=np.float64), pg.DTypeError),
        (dict(device="nope"), pg.BackendUnavailableError),
        (dict(variant="BLAS"), pg.PolygemmError),
    ]
    for change, error in bad:
        kw = dict(a=a, b=b, alpha=1.0, device="cpu")
        kw.update(change)
        with pytest.raises(error):
            pg.gemm(kw.pop("a"), kw.pop("b"), c, beta=1.0, out=c, **kw)
        np.testing.assert_array_equal(c, kept)
    # and the same call, right, afterwards
    assert pg.gemm(a, b, c, beta=1.0, out=c, device="cpu") is c
    assert_within_2(c, a, b, kept, 1.0, 1.0)


def test_gemm_check_at_k_zero_and_empty_m_in_bfloat16(capsys):
    for shape in ("8x8x0", "0x8x8"):
        rc, out, err = cli(capsys, ["gemm", "--shape", shape, "--device", "cpu", "--dtype", "bfloat16", "--check", "--seed", "3"])
        assert rc == 0 and "check: PASS" in out and err == "", (out, err)


def test_gemm_vector_a_is_told_the_row_and_matmul(rng):
    # a 1-D a is told the row it may be and of polygemm.matmul, which takes the vector as numpy.matmul does
    v = rng.standard_normal(3).astype(np.float32)
    m = rng.standard_normal((3, 2)).astype(np.float32)
    out = np.full((1, 2), 5.0, np.float32)
    with pytest.raises(ShapeError, match=re.escape(
            "a must be a matrix or a stack of matrices (at least 2-D); got 1-D with shape (3,), a vector. Pass it as a "
            "row, a[None, :] (1×3); polygemm.matmul takes vectors, as numpy.matmul does.")):
        pg.gemm(v, m, device="cpu", out=out)
    assert (out == 5.0).all()
    # both ways it names work
    np.testing.assert_allclose(pg.gemm(v[None, :], m, device="cpu"), (v @ m)[None, :], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pg.matmul(v, m, device="cpu"), v @ m, rtol=1e-5, atol=1e-6)


def test_gemm_vector_b_is_told_the_column_and_a_list_through_asarray(rng):
    # a vector b is a column; a list has no [:, None], so the hint indexes np.asarray(b)
    m = rng.standard_normal((2, 3)).astype(np.float64)
    with pytest.raises(ShapeError, match=re.escape("got 1-D with shape (3,), a vector. Pass it as a column, b[:, None] (3×1)")):
        pg.gemm(m, np.ones(3), device="cpu")
    with pytest.raises(ShapeError, match=re.escape("Pass it as a column, np.asarray(b)[:, None] (3×1); polygemm.matmul")):
        pg.gemm(m, [1.0, 2.0, 3.0], device="cpu")
    with pytest.raises(ShapeError, match=re.escape("Pass it as a row, np.asarray(a)[None, :] (1×2)")):
        pg.gemm((1.0, 2.0), m, device="cpu")
    np.testing.assert_allclose(pg.gemm(m, np.asarray([1.0, 2.0, 3.0])[:, None], device="cpu")[:, 0], m @ [1.0, 2.0, 3.0])


@pytest.mark.parametrize("scalar", [2.0, np.float32(2.0), np.array(2.0, np.float32)])
def test_gemm_scalar_operand_is_told_alpha(scalar):
    # a scalar a or b has no rows and columns, so it is not told to reshape: what scales a product is alpha
    # (numpy.matmul refuses scalars too, a ValueError)
    m = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"matmul"):
        np.matmul(m, scalar)
    with pytest.raises(ShapeError, match=re.escape("b must be a matrix or a stack of matrices (at least 2-D); got 0-D with "
                                                   "shape (), a scalar. Scale the product by it with alpha=")) as info:
        pg.gemm(m, scalar, device="cpu")
    assert "reshape" not in str(info.value) and isinstance(info.value, ValueError)
    np.testing.assert_array_equal(pg.gemm(m, m, alpha=scalar, device="cpu"), 2.0 * (m @ m))


def test_testing_keeps_the_row_hint_without_matmul():
    """polygemm.testing shares the check: the row and column hints, but matmul is gemm's to name."""
    from polygemm.testing import error_bound

    with pytest.raises(ShapeError, match=re.escape("a vector. Pass it as a row, a[None, :] (1×3).")) as info:
        error_bound(np.ones(3, np.float32), np.ones((3, 2), np.float32))
    assert "matmul" not in str(info.value)


@pytest.mark.parametrize("device", ["CPU", " cpu", "cpu ", "cpu:0", "Cpu:0", None, "auto", "AUTO", np.str_("cpu")])
def test_device_spellings_that_run_on_the_cpu(device, without_gpu, monkeypatch):
    """Device names in any case and with spaces, the CPU's one index, None and auto here."""
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(pg.gemm(a, a.T, device=device), a @ a.T)
    assert pg.last_plan().backend == "cpu"


@pytest.mark.parametrize("x, y", [
    ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.5], [0.0, 1.0]]),
    (((1.0, 2.0), (3.0, 4.0)), ((1.0, 0.5), (0.0, 1.0))),
    ([[np.float32(1), np.float32(2)]], [[np.float32(3)], [np.float32(4)]]),
    ([1.0, 2.0], [3.0, 4.0]),
    ([[1.0, 2.0]], [3.0, 4.0]),
    ([], []),
])
def test_sequences_through_matmul_match_numpy(x, y):
    """Lists and tuples of floats give numpy.matmul's value, dtype and shape."""
    want = np.matmul(x, y)
    got = pg.matmul(x, y, device="cpu")
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want)


def test_a_capital_c_is_told_c_and_following_it_works(ops):
    # gemm(a, b, C=c, beta=1) (BLAS's capital names) is told c, not only "unexpected keyword argument 'C'"
    a, b = ops
    c = poisoned()
    with pytest.raises(ArgumentTypeError, match=r"'C' \(did you mean 'c'\?\)"):
        pg.gemm(a, b, C=c, beta=1.0)
    assert (c == 7.0).all()
    np.testing.assert_allclose(pg.gemm(a, b, c=c, beta=1.0), a @ b + 7.0, rtol=1e-5, atol=1e-5)


def test_a_numpy_0d_array_is_its_value_and_a_one_element_one_is_told_item(ops):
    """A 0-D NumPy array is its value; a one-element one is told .item()."""
    a, b = ops
    np.testing.assert_array_equal(pg.gemm(a, b, alpha=np.array(2.0)), pg.gemm(a, b, alpha=2.0))
    with pytest.raises(ArgumentTypeError, match=r"a one-element array of 1 dimension is no scalar: pass alpha\.item\(\)$"):
        pg.gemm(a, b, alpha=np.array([2.0]))


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((4,), (4, 3)), ((4,), (4,)), ((2, 3, 4), (4,))])
def test_a_vector_result_owns_its_memory_as_numpys_does(shapes):
    rng = np.random.default_rng(28)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got, want = polygemm.matmul(a, b, device="cpu"), np.matmul(a, b)
    assert got.shape == np.shape(want) and got.flags.owndata and got.base is None
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_bound_over_an_overflowing_abs_product_takes_the_exact_answer():
    from polygemm.testing import check_result

    a, b = np.array([[1e308, 1.0, -1e308]]), np.ones((3, 1))
    assert check_result(np.array([[1.0]]), a, b).ok  # |A| @ |B| overflows: the bound with it
    assert not check_result(np.array([[np.nan]]), a, b).ok


def test_the_checks_refuse_what_gemm_refuses():
    from polygemm.errors import ArgumentError
    from polygemm.testing import check_result, error_bound

    a = np.ones((2, 3), np.float32)
    with pytest.raises(ArgumentError, match=r"beta=2\.0 needs c"):
        check_result(polygemm.gemm(a, a.T), a, a.T, None, 1.0, 2.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ArgumentError, match="constant must be a finite real number >= 0"):
            error_bound(a, a.T, constant=bad)


def test_auto_takes_a_variant_spelling_the_backend_parses_itself(monkeypatch):
    """device='auto' asks a backend whose get_variant takes the name, beyond the static tables: cuda's
    "rung:split_k=8", which device='cuda' runs, is not refused as "cuda: has no variant ..."."""
    be = polygemm.get_backend("cpu")
    plain = type(be).get_variant

    def get_variant(self_or_name, name=None):  # "blas:fast" spelled as the cuda backend spells its splits
        name = self_or_name if name is None else name
        return plain(be, name.partition(":")[0] if name.startswith("blas:") else name)

    monkeypatch.setattr(be, "get_variant", get_variant)
    a = np.ones((3, 4), np.float32)
    got = polygemm.gemm(a, a.T, variant="blas:fast")
    np.testing.assert_array_equal(got, a @ a.T)
    with pytest.raises(PolygemmError, match="has no variant 'nope:fast'"):
        polygemm.gemm(a, a.T, variant="nope:fast")


def test_alpha_and_beta_may_be_zero_dimensional_arrays(rng):
    # alpha=np.array(0.5) (a 0-D array, what np.asarray of a scalar or a reduction with out gives) is its value, as
    # NumPy takes it
    a, b = _operands(rng)
    c = rng.standard_normal((4, 3)).astype(np.float32)
    want = pg.gemm(a, b, c, alpha=0.5, beta=2.0)
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=np.array(0.5), beta=np.array(2, np.int64)), want)
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=np.array(0.5, np.float32), beta=np.float64(2.0)), want)
    for bad in (np.array([0.5]), np.array(True), np.array(1 + 1j), np.array(np.nan)):
        with pytest.raises(ArgumentError, match="alpha must be"):
            pg.gemm(a, b, alpha=bad)


def test_a_list_beside_an_array_of_another_dtype_is_told_a_cast_a_list_has():
    # a list has no astype (b) and no dtype (a): the DTypeError names a cast a list has
    a32 = np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)") as info:
        pg.gemm(a32, [[1.0], [2.0]], device="cpu")
    assert "astype" not in str(info.value)
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(a, dtype=np\.float32\)"):
        pg.gemm([[1.0, 2.0]], a32, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)"):
        pg.matmul(a32, [1.0, 2.0], device="cpu")
    # two arrays keep their astype, the narrower cast up to numpy.matmul's result dtype (b.astype(a.dtype) would
    # round the float64 b to float32)
    with pytest.raises(pg.DTypeError, match=r"a\.astype\(np\.float64\)"):
        pg.gemm(a32, np.ones((2, 2)), device="cpu")
    # the advice, followed, runs
    np.testing.assert_allclose(pg.gemm(a32, np.asarray([[1.0], [2.0]], dtype=np.float32), device="cpu"), [[3.0], [3.0]])


def test_c_of_another_dtype_is_told_how_to_cast_it():
    # a c of another dtype is told what to do; for float16 inputs a float32 c is what out_dtype=np.float32 takes
    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"got float64\. Cast it, e\.g\. np\.asarray\(c, dtype=np\.float32\)"):
        pg.gemm(a, a, [[1.0, 2.0], [3.0, 4.0]], beta=1.0, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"c\.astype\(np\.float32\)"):
        pg.gemm(a, a, np.ones((2, 2)), beta=1.0, device="cpu")
    h, c32 = a.astype(np.float16), np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"c\.astype\(np\.float16\) \(which rounds float32 values that float16 cannot hold; those of 65520 or more overflow to inf\), or ask for a float32 result with out_dtype=np\.float32"):
        pg.gemm(h, h, c32, beta=1.0, device="cpu")
    np.testing.assert_array_equal(pg.gemm(h, h, c32, beta=1.0, out_dtype=np.float32, device="cpu"), np.full((2, 2), 3.0))


def test_a_decimal_factor_is_told_what_is_taken():
    # a Decimal is a real number: the message says what polygemm takes and how to get there
    from decimal import Decimal
    from fractions import Fraction

    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"an int, a float, a Fraction or a NumPy real scalar.*float\(alpha\)"):
        pg.gemm(a, a, alpha=Decimal("0.5"), device="cpu")
    np.testing.assert_array_equal(pg.gemm(a, a, alpha=float(Decimal("0.5")), device="cpu"),
                                  pg.gemm(a, a, alpha=Fraction(1, 2), device="cpu"))


def test_a_device_index_of_other_digits_is_no_crash_and_cpu_0_still_runs():
    # "cpu:²" is refused as a device index, not a bare ValueError from int(), and "cpu:١" (an Arabic-Indic one) is not
    # run as cpu:1
    a = np.ones((2, 2))
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'cpu:²'"):
        pg.gemm(a, a, device="cpu:²")
    with pytest.raises(pg.ArgumentError, match="ASCII digits"):
        pg.gemm(a, a, device="cpu:\u0661")
    np.testing.assert_array_equal(pg.gemm(a, a, device="cpu:0"), a @ a)


@pytest.mark.parametrize("dtype, value", [
    (np.float16, 300.0), (np.float16, 1e-5), ("bfloat16", 3e19), ("bfloat16", 1e-30),
    (np.float32, 3e19), (np.float32, 1e-30), (np.float64, 1e-200),
], ids=["f16-over", "f16-under", "bf16-over", "bf16-under", "f32-over", "f32-under", "f64-under"])
@pytest.mark.parametrize("variant", ["auto", "reference"])
def test_checking_a_result_that_overflows_or_underflows_is_quiet_under_seterr_raise(dtype, value, variant):
    # check_result rounded the reference to the output type (to compare what overflows it) and
    # formed the bound's products with FloatingPointError on under np.seterr(all="raise"), a RuntimeWarning
    # (an error under -W error) otherwise: for exactly the results the bound is written to judge
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a = np.full((3, 4), value, dt)
    b = np.full((4, 2), value, dt)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        r = pg.gemm(a, b, device="cpu", variant=variant)
        res = check_result(r, a, b)
        assert res.ok, res.message
        bad = r.astype(np.float64)
        bad[0, 0] = 1.0 if not np.isfinite(bad[0, 0]) else bad[0, 0] * 0.5 + 1.0  # still judged: a wrong result fails
        assert not check_result(bad.astype(dt), a, b).ok


def test_beta_defaults_as_gemm_defaults_it():
    # gemm(a, b, c) is a @ b + c: the check of that result with the same arguments passes, and without c beta is 0
    rng = np.random.default_rng(5)
    a, b, c = (rng.random(s).astype(np.float32) for s in [(3, 4), (4, 5), (3, 5)])
    got = pg.gemm(a, b, c, device="cpu")
    assert check_result(got, a, b, c).ok
    assert not check_result(got, a, b, c, beta=0.0).ok
    assert_close(got, a, b, c)
    assert check_result(pg.gemm(a, b, device="cpu"), a, b).ok


def test_error_bound_refuses_a_reference_of_another_shape():
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    assert error_bound(a, b, ref=np.full((3, 2), 4.0)).shape == (3, 2)
    for ref in (np.float64(1e30), np.ones((2, 3))):  # a scalar would broadcast to a bound any result meets
        with pytest.raises(ShapeError, match=r"ref must be .* shape \(3, 2\)"):
            error_bound(a, b, ref=ref)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_results_are_checked_part_by_part(rng, dtype):
    """A complex product is bounded as the real one it equals: gemm's result passes; one part of one element moved
    by more than its bound fails, named by the element and the part; a real result for complex inputs fails by its
    dtype, and a real out_dtype is refused."""
    def crand(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)

    a, b, c = crand(2, 17, 33), crand(33, 9), crand(2, 17, 9)
    got = pg.gemm(a, b, c, alpha=0.5, beta=-2.0, device="cpu")
    assert check_result(got, a, b, c, 0.5, -2.0).ok
    tol = error_bound(a, b, c, 0.5, -2.0)
    assert tol.shape == got.shape and tol.dtype == np.float64 and (tol > 0).all()
    moved = got.copy()
    moved[1, 3, 4] += 3j * tol[1, 3, 4]
    res = check_result(moved, a, b, c, 0.5, -2.0)
    assert not res.ok and res.violations == 1 and "(1, 3, 4) (imaginary part)" in res.message
    moved = got.copy()
    moved[0, 16, 8] -= 3 * tol[0, 16, 8]
    assert "(0, 16, 8) (real part)" in check_result(moved, a, b, c, 0.5, -2.0).message
    assert "expected complex" in check_result(got.real.copy(), a, b, c, 0.5, -2.0).message
    with pytest.raises(DTypeError, match="a complex product has a complex result"):
        error_bound(a, b, out_dtype=np.float64)


def test_complex_parts_are_held_to_their_own_bounds_and_infinities_as_complex_arithmetic_makes_them():
    """A part that overflows does not loosen the other part's bound; an infinity of the inputs may come out as
    Inf + NaN·i (plain complex arithmetic) or NaN + NaN·i (BLAS), but not as a finite value; a complex c for a real
    product is refused, not read without its imaginary parts."""
    a = np.array([[3e38 + 1j, 0]], np.complex64)
    b = np.array([[10 + 0j], [0]], np.complex64)
    got = pg.gemm(a, b, device="cpu")
    assert np.isposinf(got.real[0, 0]) and check_result(got, a, b).ok
    got.imag = 12345
    res = check_result(got, a, b)
    assert not res.ok and "(imaginary part)" in res.message
    a = np.array([[np.inf + 0j, 1 + 1j], [1, 2 - 1j]])
    b = np.array([[1 + 0j, 2], [1 - 1j, 3]])
    with np.errstate(invalid="ignore"):
        plain = np.array([[sum(a[i, k] * b[k, j] for k in range(2)) for j in range(2)] for i in range(2)])
    assert np.isposinf(plain[0, 0].real) and check_result(plain, a, b).ok
    plain[0, 0] = 5.0
    assert "(0, 0) (real part)" in check_result(plain, a, b).message
    x, y = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(DTypeError, match=r"c \(complex64\) and a \(float32\) must both be complex or both real"):
        check_result(x @ y, x, y, np.full((2, 2), 1 + 5j, np.complex64))
