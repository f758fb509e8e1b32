"""A NumPy user's everyday calls on the cpu backend held against ``numpy.matmul`` and NumPy's own conventions,
nineteenth round (CPU): the result dtype for every pair of dtypes (the four polygemm computes in, and the integer,
bool and complex ones NumPy computes and polygemm refuses), bfloat16 where NumPy widens it, an ``out`` of every
memory order (C, Fortran, row- and column-padded views of a larger array, transposed and stepped batches, a single
row or column at a step) written with the memory around it untouched, the ``out`` layouts NumPy takes and polygemm
refuses left as they were, ``c`` in each broadcast form NumPy would take (refused with the broadcast_to hint, and
the broadcast view giving the bits of the full array), ``alpha``/``beta`` as inexact NumPy scalars of each float type
(used at their own value, the result keeping the operands' dtype where NumPy's promotion would widen it), batched
operands broadcasting and empty batch dimensions against ``numpy.matmul``, vectors through ``polygemm.matmul``,
and what ``polygemm.gemm`` returns: a new array owning its memory, or ``out`` itself, and never a changed input.
No defect was found this round: every test checks an edge that was right."""

from __future__ import annotations

import itertools
import re

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]
SENTINEL = -12345.0


@pytest.fixture
def rng():
    return np.random.default_rng(19)


# -- dtypes ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("da_, db_", list(itertools.product(FLOATS, FLOATS)), ids=str)
def test_every_float_pair_gives_its_dtype_or_names_the_dtype_numpy_matmul_computes_in(da_, db_):
    a = (np.arange(12).reshape(3, 4) % 5).astype(da_)
    b = (np.arange(20).reshape(4, 5) % 3).astype(db_)
    want = np.matmul(a, b)
    if da_ == db_:
        got = pg.gemm(a, b, device="cpu")
        # one dtype in, that dtype out (NumPy's matmul widens bfloat16 to float32; polygemm keeps it)
        assert got.dtype == da_
        assert want.dtype == (np.float32 if da_ == BF16 else da_)
        assert np.array_equal(got.astype(np.float64), want.astype(np.float64))  # small integers: exact in all four
        return
    with pytest.raises(DTypeError, match="must share one dtype") as info:
        pg.gemm(a, b, device="cpu")
    casts = set(re.findall(r"\.astype\(np\.(\w+)\)", str(info.value)))
    # the first cast the message offers is to the dtype numpy.matmul computes the pair in
    first = re.search(r"\.astype\(np\.(\w+)\)", str(info.value))
    assert first is not None and first.group(1) == want.dtype.name, (str(info.value), want.dtype)
    assert want.dtype.name in casts


@pytest.mark.parametrize("other", [np.int8, np.uint8, np.int32, np.int64, np.bool_, np.complex64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("side", ["a", "b"])
def test_dtypes_numpy_computes_and_polygemm_refuses_name_the_operand(other, side):
    f = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    a = f[0].astype(other) if side == "a" else f[0]
    b = f[1].astype(other) if side == "b" else f[1]
    assert np.matmul(a, b).shape == (3, 5)  # NumPy computes every one of them
    with pytest.raises(DTypeError, match=rf"^{side} has dtype {np.dtype(other).name}; polygemm supports float16"):
        pg.gemm(a, b, device="cpu")
    with pytest.raises(DTypeError, match=rf"^{side} has dtype {np.dtype(other).name}"):
        pg.matmul(a, b, device="cpu")


def test_bfloat16_stays_bfloat16_and_out_dtype_float32_gives_numpys_dtype_and_values(rng):
    a = rng.standard_normal((3, 4)).astype(BF16)
    b = rng.standard_normal((4, 5)).astype(BF16)
    assert pg.matmul(a, b, device="cpu").dtype == BF16 and np.matmul(a, b).dtype == np.float32
    wide = pg.gemm(a, b, out_dtype=np.float32, device="cpu")
    want = np.matmul(a.astype(np.float32), b.astype(np.float32))
    assert wide.dtype == np.matmul(a, b).dtype
    np.testing.assert_allclose(wide, want, rtol=1e-6, atol=1e-6)
    # a Fortran-ordered float32 out is the same request, written in place
    out = np.full((3, 5), SENTINEL, np.float32, order="F")
    assert pg.gemm(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


# -- out of each memory order ---------------------------------------------------------------------------------------


def _outs():
    """(name, the larger array, the out view into it, a's shape, b's shape)"""
    def mk(shape, order="C"):
        return np.full(shape, SENTINEL, order=order)
    cases = []
    base = mk((3, 5)); cases.append(("C", base, base, (3, 4), (4, 5)))
    base = mk((3, 5), "F"); cases.append(("F", base, base, (3, 4), (4, 5)))
    base = mk((4, 8)); cases.append(("row-padded", base, base[1:, 2:7], (3, 4), (4, 5)))
    base = mk((6, 5), "F"); cases.append(("column-padded", base, base[1:4], (3, 4), (4, 5)))
    base = mk((5, 7)); cases.append(("transposed slice", base, base[:, 1:4].T, (3, 4), (4, 5)))
    base = mk((2, 5, 3)); cases.append(("batch of column-major", base, base.transpose(0, 2, 1), (2, 3, 4), (2, 4, 5)))
    base = mk((3, 2, 5)); cases.append(("batch axis in the middle", base, base.transpose(1, 0, 2), (2, 3, 4), (2, 4, 5)))
    base = mk((5, 3, 5)); cases.append(("stepped batch", base, base[::2], (3, 3, 4), (4, 5)))
    base = mk((2, 10)); cases.append(("one row at a step", base, base[:1, ::2], (1, 4), (4, 5)))
    base = mk((6, 2)); cases.append(("one column at a step", base, base[::2, 1:], (3, 4), (4, 1)))
    base = mk((2, 5, 6, 3)); cases.append(("broadcast batch, column-major", base, base.transpose(0, 1, 3, 2),
                                           (2, 1, 3, 4), (5, 4, 6)))
    return cases


@pytest.mark.parametrize("name, base, out, sa, sb", _outs(), ids=[c[0] for c in _outs()])
def test_out_of_each_memory_order_is_returned_itself_and_nothing_around_it_is_written(rng, name, base, out, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    want = np.matmul(a, b)
    assert out.shape == want.shape and np.shares_memory(out, base)
    got = pg.gemm(a, b, out=out, device="cpu")
    assert got is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    # the rest of the larger array keeps its sentinel: map each element of out to its place in the base
    covered = np.zeros(base.shape, bool)
    idx = np.indices(out.shape).reshape(out.ndim, -1).T
    starts = out.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    byte_to_index = {}
    for bi in np.ndindex(*base.shape):
        byte_to_index[sum(i * s for i, s in zip(bi, base.strides))] = bi
    for oi in idx:
        covered[byte_to_index[starts + sum(int(i) * s for i, s in zip(oi, out.strides))]] = True
    assert (base[~covered] == SENTINEL).all(), name
    assert covered.sum() == out.size


@pytest.mark.parametrize("make, a_shape, b_shape", [
    (lambda: np.full((6, 10), SENTINEL)[::2, ::2], (3, 4), (4, 5)),
    (lambda: np.full((3, 5), SENTINEL)[:, ::-1], (3, 4), (4, 5)),
    (lambda: np.full((3, 5), SENTINEL)[::-1], (3, 4), (4, 5)),
    (lambda: np.full((2, 3, 5), SENTINEL, order="F"), (2, 3, 4), (2, 4, 5)),
    (lambda: np.full((3, 5, 2), SENTINEL)[None, :, :, 0], (1, 3, 4), (1, 4, 5)),
    (lambda: np.full((6, 10), SENTINEL)[::2, ::2], (3, 0), (0, 5)),
], ids=["stepped both ways", "reversed columns", "reversed rows", "N-D Fortran", "interleaved", "stepped, K=0"])
def test_out_layouts_numpy_takes_and_polygemm_refuses_are_left_as_they_were(rng, make, a_shape, b_shape):
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    theirs = make()
    assert np.matmul(a, b, out=theirs) is theirs and np.allclose(theirs, a @ b)  # NumPy writes any layout
    out = make()
    with pytest.raises(ArgumentError, match="neither row- nor column-major"):
        pg.gemm(a, b, out=out, device="cpu")
    assert (out == SENTINEL).all()
    with pytest.raises(ArgumentError, match="neither row- nor column-major"):
        pg.matmul(a, b, out=out, device="cpu")
    assert (out == SENTINEL).all()


def test_out_overlapping_an_input_is_refused_where_numpy_buffers(rng):
    s = rng.standard_normal((4, 4))
    s0 = s.copy()
    want = s0 @ s0
    theirs = s.copy()
    np.matmul(theirs, s0, out=theirs)
    assert np.allclose(theirs, want)
    with pytest.raises(ArgumentError, match="out overlaps a"):
        pg.gemm(s, s0, out=s, device="cpu")
    assert np.array_equal(s, s0)
    big = np.zeros((4, 4))
    with pytest.raises(ArgumentError, match="partly overlaps c"):
        pg.gemm(s[:3], s0, big[:3], beta=1.0, out=big[1:], device="cpu")
    assert (big == 0).all()


# -- c, alpha, beta -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("c_shape", [(), (5,), (1, 5), (3, 1), (1, 1)], ids=str)
def test_c_in_each_form_numpy_broadcasts_is_refused_with_the_hint_that_then_matches_a_full_c(rng, c_shape):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    c = rng.standard_normal(c_shape)
    want = 0.5 * np.matmul(a, b) + 0.25 * c  # NumPy's broadcasting
    with pytest.raises(ShapeError, match=re.escape("pass it broadcast, e.g. np.broadcast_to(c, (3, 5))")):
        pg.gemm(a, b, c, alpha=0.5, beta=0.25, device="cpu")
    c0 = c.copy()
    view = np.broadcast_to(c, (3, 5))
    got = pg.gemm(a, b, view, alpha=0.5, beta=0.25, device="cpu")
    full = pg.gemm(a, b, np.ascontiguousarray(view), alpha=0.5, beta=0.25, device="cpu")
    assert np.array_equal(got, full) and np.allclose(got, want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(c, c0) and not np.shares_memory(got, c)


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


@pytest.mark.parametrize("scalar", [np.True_, np.complex64(2), np.array([2.0]), np.float32("nan"),
                                    np.float16("inf")], ids=repr)
def test_scalars_numpy_would_broadcast_or_propagate_are_refused(rng, scalar):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    err = ArgumentTypeError if isinstance(scalar, (np.bool_, np.complexfloating, np.ndarray)) else ArgumentError
    for kw in ({"alpha": scalar}, {"beta": scalar}):
        with pytest.raises(err):
            pg.gemm(a, b, np.zeros((3, 5)), device="cpu", **kw)


# -- batches --------------------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (3, 4, 6)), ((0, 3, 4), (2, 4, 6)), ((2, 1, 3, 4), (3, 1, 4, 6))],
                         ids=str)
def test_batches_numpy_cannot_broadcast_are_a_shape_error(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(ShapeError, match=r"do not broadcast \(numpy.matmul rules\)"):
        pg.gemm(a, b, device="cpu")
    with pytest.raises(ShapeError, match=r"do not broadcast"):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("sa, sb", [((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((1, 4), (4,)), ((0, 4), (4,)),
                                    ((2, 0, 4), (4,)), ((4,), (4, 0)), ((4,), (4,))], ids=str)
def test_vectors_through_matmul_as_numpy_matmul(rng, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    want = np.asarray(np.matmul(a, b))
    got = pg.matmul(a, b, device="cpu")
    # vector @ vector: NumPy gives a scalar, polygemm (as its README says) a 0-D array of the same value and dtype
    assert isinstance(got, np.ndarray) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    out = np.full(want.shape, SENTINEL)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_matrix_at_vector_refuses_an_out_keeping_the_unit_dimension_as_numpy_does(rng):
    a, v = rng.standard_normal((3, 4)), rng.standard_normal(4)
    with pytest.raises(ValueError):
        np.matmul(a, v, out=np.empty((3, 1)))
    out = np.full((3, 1), SENTINEL)
    with pytest.raises(ShapeError, match=re.escape("out must have the result's shape (3,); got (3, 1)")):
        pg.matmul(a, v, out=out, device="cpu")
    assert (out == SENTINEL).all()


# -- what comes back; inputs untouched ------------------------------------------------------------------------------


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


def test_k_zero_gives_a_new_beta_c_and_out_c_gives_c_itself(rng):
    c = rng.standard_normal((3, 5))
    c0 = c.copy()
    got = pg.gemm(np.empty((3, 0)), np.empty((0, 5)), c, beta=2.0, device="cpu")
    assert np.array_equal(got, 2.0 * c0) and not np.shares_memory(got, c) and np.array_equal(c, c0)
    none = pg.gemm(np.empty((3, 0)), np.empty((0, 5)), device="cpu")
    assert np.array_equal(none, np.matmul(np.empty((3, 0)), np.empty((0, 5)))) and none.dtype == np.float64
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    ct = np.asfortranarray(c0)  # column-major c updated in place, as out
    assert pg.gemm(a, b, ct, beta=1.0, out=ct, device="cpu") is ct
    np.testing.assert_allclose(ct, np.matmul(a, b) + c0, rtol=1e-12, atol=1e-12)
    # beta == 0 never reads c: NaNs there stay out of the result, whichever type zero is given as
    nan = np.full((3, 5), np.nan)
    for zero in (0, 0.0, -0.0, np.float32(0), np.float16(-0.0)):
        assert np.isfinite(pg.gemm(a, b, nan, beta=zero, device="cpu")).all()
