"""A demanding user's edges, sixth round: what a NumPy user tries on the CPU beyond rounds two to
four: matmul's vectors beside lists and a vector result's out that is no array, the advice of
dtype errors (followed literally, it must work), alpha and beta of odd types, and
``polygemm bench --variants`` with a typo. Each test failed before the fix it names."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps import bench
from polygemm.apps.cli import main


# -- matmul: vectors beside lists ------------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b, named", [
    ([1.0, 2.0, 3.0], np.ones((2, 2)), "a, a vector of 3"),
    (np.ones((2, 2)), [1.0, 2.0, 3.0], "b, a vector of 3"),
    ((1.0, 2.0, 3.0), (1.0, 2.0), "a, a vector of 3, taken as a row 1×3; b, a vector of 2"),
])
def test_matmul_list_vector_of_the_wrong_length_is_a_shape_error(a, b, named):
    # a list (or tuple) vector of the wrong length had been AttributeError: 'list' object has no
    # attribute 'shape' (the message read the vector's .shape); numpy.matmul raises ValueError
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(pg.ShapeError, match=named):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("a, b", [
    (np.ones(2), [[1.0, 2.0], [3.0, 4.0]]),
    ([[1.0, 2.0], [3.0, 4.0]], np.ones(2)),
    ([1.0, 1.0], ((1.0, 2.0), (3.0, 4.0))),
    (np.ones(2), [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]),
])
def test_matmul_vector_beside_a_list_writes_into_out(a, b):
    # with out= a vector beside a list matrix had been AttributeError ('list' object has no
    # attribute 'shape': out's expected shape was read off the list); numpy.matmul takes it
    want = np.matmul(np.asarray(a), np.asarray(b))
    out = np.full(want.shape, np.nan)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want)
    with pytest.raises(pg.ShapeError, match=re.escape(f"out must have the result's shape {want.shape}")):
        pg.matmul(a, b, out=np.zeros(want.shape + (1,)), device="cpu")


# -- dtype errors whose advice must work when followed -------------------------------------------------------------


def test_a_list_beside_an_array_of_another_dtype_is_told_a_cast_a_list_has():
    # the DTypeError said "Cast one, e.g. b.astype(a.dtype)" with b a list (no astype) or a a list (no dtype)
    a32 = np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)") as info:
        pg.gemm(a32, [[1.0], [2.0]], device="cpu")
    assert "astype" not in str(info.value)
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(a, dtype=np\.float32\)"):
        pg.gemm([[1.0, 2.0]], a32, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)"):
        pg.matmul(a32, [1.0, 2.0], device="cpu")
    # two arrays keep their astype, the narrower cast up to numpy.matmul's result dtype (r15: b.astype(a.dtype) had
    # rounded the float64 b to float32)
    with pytest.raises(pg.DTypeError, match=r"a\.astype\(np\.float64\)"):
        pg.gemm(a32, np.ones((2, 2)), device="cpu")
    # the advice, followed, runs
    np.testing.assert_allclose(pg.gemm(a32, np.asarray([[1.0], [2.0]], dtype=np.float32), device="cpu"), [[3.0], [3.0]])


def test_c_of_another_dtype_is_told_how_to_cast_it():
    # "c must have the dtype of the result (float32); got float64" said nothing of what to do; for
    # float16 inputs a float32 c is what out_dtype=np.float32 takes
    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"got float64\. Cast it, e\.g\. np\.asarray\(c, dtype=np\.float32\)"):
        pg.gemm(a, a, [[1.0, 2.0], [3.0, 4.0]], beta=1.0, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"c\.astype\(np\.float32\)"):
        pg.gemm(a, a, np.ones((2, 2)), beta=1.0, device="cpu")
    h, c32 = a.astype(np.float16), np.ones((2, 2), np.float32)
    with pytest.raises(pg.DTypeError, match=r"c\.astype\(np\.float16\), or ask for a float32 result with out_dtype=np\.float32"):
        pg.gemm(h, h, c32, beta=1.0, device="cpu")
    np.testing.assert_array_equal(pg.gemm(h, h, c32, beta=1.0, out_dtype=np.float32, device="cpu"), np.full((2, 2), 3.0))


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.complex64])
def test_out_of_an_unsupported_dtype_is_not_told_to_convert_itself(dtype):
    # "Convert it, e.g. out.astype(np.float32)": followed, the result went into that copy and the
    # user's array was left as it was, silently. It now says to pass an out of the result's dtype.
    a = np.ones((2, 3), np.float32)
    out = np.zeros((2, 2), dtype)
    with pytest.raises(pg.DTypeError, match=r"out has dtype .*Pass an out of that dtype, e\.g\. np\.empty\(out\.shape, a\.dtype\)") as info:
        pg.gemm(a, a.T, out=out, device="cpu")
    assert "out.astype" not in str(info.value) and not out.any()
    with pytest.raises(pg.DTypeError, match="Pass an out of that dtype") as info:
        pg.matmul(a, np.ones(3, np.float32), out=np.zeros(2, dtype), device="cpu")
    assert "out.astype" not in str(info.value)


def test_a_masked_out_is_told_to_pass_its_data_not_a_filled_copy():
    # "Fill it first, e.g. out.filled(0)": a copy, which would have received the result instead of out
    a = np.ones((2, 3), np.float32)
    out = np.ma.zeros((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"out is a masked array.*out\.data") as info:
        pg.gemm(a, a.T, out=out, device="cpu")
    assert "filled" not in str(info.value)
    data = out.data
    assert pg.gemm(a, a.T, out=data, device="cpu") is data
    assert (out == 3.0).all()


# -- polygemm bench --variants -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_bench_checks_every_variant_name_before_timing(tmp_path, capsys, monkeypatch, mode):
    # call mode: --variants blas nosuch timed every shape with blas (on a GPU, the whole run), then
    # failed on the typo and wrote no --json; both modes printed the run's heading first
    def timed(*args, **kwargs):
        raise AssertionError("timed before the names were checked")

    monkeypatch.setattr(bench, "run_call_bench", timed)
    monkeypatch.setattr(bench, "run_bench", timed)
    out = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--mode", mode, "--shapes", "8x8x8", "--variants", "blas", "nosuch",
                 "--json", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "--variants: 'nosuch' is not a float32 variant of cpu" in captured.err
    assert "polygemm bench:" not in captured.out and not out.exists()


def test_bench_with_good_variant_names_still_runs(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--variants", "blas,reference", "--repeats", "1",
                 "--json", str(out), "--no-progress"]) == 0
    assert {r["variant"] for r in json.loads(out.read_text())["records"]} == {"blas", "reference"}


# -- alpha and beta ----------------------------------------------------------------------------------------------------


def test_a_timedelta_is_no_scale_factor():
    # alpha=np.timedelta64(1) (NumPy counts timedelta64 among its signed integers) was taken as 1.0,
    # silently, a float32 result; NumPy's product with it is a timedelta64 array, a result no GEMM gives
    a = np.ones((2, 2), np.float32)
    assert (np.ones(2) * np.timedelta64(1)).dtype.kind == "m"
    for bad in (np.timedelta64(1), np.array(np.timedelta64(2, "s"))):
        with pytest.raises(pg.ArgumentError, match=r"alpha must be a real number .*timedelta64"):
            pg.gemm(a, a, alpha=bad, device="cpu")
        with pytest.raises(pg.ArgumentError, match=r"beta must be a real number .*timedelta64"):
            pg.gemm(a, a, a, beta=bad, device="cpu")


def test_a_longdouble_beyond_float64_is_too_large_not_infinite():
    # alpha=np.longdouble("1e4000") is finite; the error had said "alpha must be finite"
    if not np.isfinite(np.longdouble("1e4000")):
        pytest.skip("longdouble is float64 here")
    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"alpha is too large for a float64") as info:
        pg.gemm(a, a, alpha=np.longdouble("1e4000"), device="cpu")
    assert "must be finite" not in str(info.value)
    with pytest.raises(pg.ArgumentError, match="alpha must be finite"):
        pg.gemm(a, a, alpha=np.longdouble("inf"), device="cpu")


def test_a_decimal_factor_is_told_what_is_taken():
    # "alpha must be a real number; got Decimal('0.5')": a Decimal is one; the message now says
    # what polygemm takes and how to get there
    from decimal import Decimal
    from fractions import Fraction

    a = np.ones((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"an int, a float, a Fraction or a NumPy real scalar.*float\(alpha\)"):
        pg.gemm(a, a, alpha=Decimal("0.5"), device="cpu")
    np.testing.assert_array_equal(pg.gemm(a, a, alpha=float(Decimal("0.5")), device="cpu"),
                                  pg.gemm(a, a, alpha=Fraction(1, 2), device="cpu"))


# -- matmul: out must be an array that receives the result ------------------------------------------------------------


class _Frame:
    """A table-like object (as pandas' or xarray's) with a shape, whose ``__array__`` gives a fresh copy."""

    def __init__(self, data):
        self._data = data

    @property
    def shape(self):
        return self._data.shape

    @property
    def ndim(self):
        return self._data.ndim

    def __array__(self, dtype=None, copy=None):
        return np.array(self._data, dtype=dtype, copy=True)


@pytest.mark.parametrize("make", [_Frame, memoryview], ids=["array-like", "memoryview"])
def test_matmul_vector_out_that_is_not_an_array_is_refused_not_left_unwritten(make):
    # matmul(matrix, vector, out=x) read x through np.asarray: for an object whose __array__ is a
    # copy the result went into that copy and x came back unwritten, silently (for a matrix result
    # gemm refused x, as numpy.matmul refuses non-arrays: "return arrays must be of ArrayType")
    a, v = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    target = np.zeros(2, np.float32)
    out = make(target)
    with pytest.raises(TypeError):
        np.matmul(a, v, out=out)
    with pytest.raises(pg.ArgumentError, match=rf"out must be a NumPy array .*got {type(out).__name__}"):
        pg.matmul(a, v, out=out, device="cpu")
    assert not target.any()
    assert pg.matmul(a, v, out=target, device="cpu") is target and (target == 3.0).all()
