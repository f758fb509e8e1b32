"""``polygemm.matmul`` held to numpy.matmul's shape rules."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError
from polygemm.testing import assert_close


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_matmul_of_none_says_none_not_scalar(rng):
    # matmul(None, b) says what gemm takes and that it got None, not that None is a scalar (0-D NoneType)
    a, b = _operands(rng)
    with pytest.raises(ArgumentError, match="a must be a vector, a matrix .*got None"):
        pg.matmul(None, b)
    with pytest.raises(ArgumentError, match="b must be a vector, a matrix .*got None"):
        pg.matmul(a[0], None)


def test_matmul_empty_list_column_of_the_wrong_length_is_a_shape_error():
    # the ShapeError's message is written for an empty column too (its shape is read, not indexed)
    with pytest.raises(pg.ShapeError, match=r"b, a vector of 0, taken as a column 0×1"):
        pg.matmul([1.0], [])
    with pytest.raises(pg.ShapeError, match=r"a\.shape\[-1\] \(K=2\) must equal b\.shape\[-2\] \(0\)"):
        pg.matmul(np.ones((3, 2)), [])


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matmul_returns_the_subclass_numpy_returns(rng):
    m = np.matrix(_f32(rng, 3, 4))
    v, u = _f32(rng, 4), _f32(rng, 3)
    for a, b, A, B in ((m, v, np.asarray(m), v[:, None]), (u, m, u[None, :], np.asarray(m)), (m, m.T, np.asarray(m), np.asarray(m).T)):
        want, got = np.matmul(a, b), pg.matmul(a, b)
        assert type(got) is type(want) is np.matrix and got.shape == want.shape
        assert_close(np.asarray(got).reshape(A.shape[0], B.shape[1]), A, B)


@pytest.mark.parametrize("out_shape", [(8,), ()], ids=["1-D", "0-D"])
def test_an_out_of_fewer_dimensions_than_the_result_is_refused_naming_the_results_shape(out_shape):
    """A matrix result into a 1-D or 0-D out: refused as numpy.matmul refuses it, with the shape out must have
    (a reshape to rows x cols of a 0-D array is no way out)."""
    a, b = np.ones((2, 3)), np.ones((3, 4))
    out = np.zeros(out_shape)
    with pytest.raises(ValueError):
        np.matmul(a, b, out=out)
    with pytest.raises(pg.ShapeError, match=re.escape(f"out must have the result's shape (2, 4); got {out_shape}")):
        pg.matmul(a, b, out=out, device="cpu")
    assert not out.any()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_a_new_result_is_c_ordered_whatever_the_batch_axes_order(dtype):
    """Operands whose batch axes are permuted or broadcast, and transposed matrices: polygemm's new result is C-ordered
    (numpy.matmul's follows permuted batch axes; float32 copies of 16-bit operands kept their order)."""
    a = np.arange(120, dtype=dtype).reshape(2, 3, 4, 5).transpose(1, 0, 2, 3) % 7
    b = np.arange(180, dtype=dtype).reshape(2, 3, 5, 6).transpose(1, 0, 2, 3) % 5
    for x, y in ((a, b), (np.broadcast_to(a[:1], a.shape), b.swapaxes(-1, -2).copy().swapaxes(-1, -2))):
        got = pg.matmul(x, y, device="cpu")
        assert got.flags.c_contiguous and got.dtype == dtype
        np.testing.assert_allclose(got.astype(np.float64), np.matmul(x.astype(np.float64), y.astype(np.float64)), rtol=1e-2)


@pytest.mark.parametrize("out", [lambda: np.empty((2, 0), ">f4"), lambda: np.zeros((5, 2, 4), np.float32)[..., :0].transpose(1, 0, 2)])
def test_an_empty_out_of_any_strides_is_written_and_returned(out):
    """An out with no elements shares no memory between them, whatever strides NumPy gave it: the call returns it, as
    numpy.matmul does, not refused as overlapping."""
    o = out()
    a = np.ones(o.shape[:-2] + (o.shape[-2], 3), np.float32)
    b = np.ones((3, 0), np.float32)
    assert pg.matmul(a, b, out=o, device="cpu") is o
    assert pg.gemm(a, b, out=o, device="cpu") is o


def test_an_out_list_of_numpy_scalars_is_values_not_outputs():
    # a list of NumPy scalars is values (an array-like gemm refuses as out), not a list of output arrays
    with pytest.raises(pg.PolygemmError) as info:
        pg.matmul(np.ones((2, 3)), np.ones((3, 4)), out=[np.float64(0)] * 8)
    assert "arrays" not in str(info.value).split("got")[-1]
