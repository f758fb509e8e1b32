"""Batched operands (numpy.matmul's broadcasting), out_dtype and the CPU default beside the reference."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


BATCHES = [
    ((1, 5, 4), (1, 4, 6)),  # a batch of one
    ((7, 33, 17), (7, 17, 65)),  # a plain batch
    ((1, 9, 3), (5, 3, 2)),  # 1 vs 5: a broadcast over the batch
    ((5, 9, 3), (3, 2)),  # a shared b
    ((4, 3), (2, 3, 3, 5)),  # a shared a, 2-D batch
    ((2, 1, 5, 4), (3, 4, 6)),  # broadcast in two directions (not walkable with one stride)
    ((0, 5, 4), (4, 6)),  # an empty batch
]


def ref_matmul(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


@pytest.mark.parametrize("sa, sb", BATCHES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", ["auto", "reference"])
def test_batched_products_follow_numpy_matmul(rng, sa, sb, variant):
    a, b = rand(rng, sa), rand(rng, sb)
    for _ in range(2):  # planned, then from the cache
        got = pg.gemm(a, b, device="cpu", variant=variant)
        want = np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        if got.size:
            assert_close(got, a, b)


def test_batched_alpha_beta_c_and_in_place(rng):
    a, b = rand(rng, (3, 6, 4)), rand(rng, (3, 4, 5))
    c = rand(rng, (3, 6, 5))
    expect = c.copy()
    assert pg.gemm(a, b, c, alpha=-0.5, beta=2.0, out=c, device="cpu") is c
    assert_close(c, a, b, expect, -0.5, 2.0)


def test_batch_shapes_that_do_not_broadcast_are_refused(rng):
    with pytest.raises(pg.ShapeError, match="do not broadcast"):
        pg.gemm(rand(rng, (2, 3, 4)), rand(rng, (3, 4, 5)), device="cpu")
    with pytest.raises(pg.ShapeError, match=r"c must have the result's shape \(2, 3, 5\)"):
        pg.gemm(rand(rng, (2, 3, 4)), rand(rng, (2, 4, 5)), rand(rng, (3, 5)), beta=1.0, device="cpu")


def test_batches_that_broadcast_to_a_result_too_large_for_an_array_are_refused_as_too_large():
    # (2**32, 1) and (1, 2**32) broadcast, to 2**64 matrices: more than any array holds (NumPy's "array is too big"),
    # not batches that do not broadcast
    one = np.ones((2, 2), np.float32)
    a, b = np.broadcast_to(one, (2**32, 1, 2, 2)), np.broadcast_to(one, (1, 2**32, 2, 2))
    for product in (pg.matmul, pg.gemm, pg.explain):
        with pytest.raises(pg.ShapeError) as info:
            product(a, b)
        text = str(info.value)
        assert isinstance(info.value, ValueError) and "do not broadcast" not in text
        assert "too large" in text and f"shape {(2**32, 2**32, 2, 2)}" in text and "elements of 4 bytes" in text
    # the result's dtype counts: float16 operands whose float16 result an array could hold, but not its float32
    half = np.ones((2, 2), np.float16)
    a, b = np.broadcast_to(half, (2**30, 1, 2, 2)), np.broadcast_to(half, (1, 2**29, 2, 2))
    with pytest.raises(pg.ShapeError, match=r"too large: its shape \(1073741824, 536870912, 2, 2\) .* elements of 4 bytes"):
        pg.explain(a, b, out_dtype=np.float32)


def test_a_result_past_memory_addressing_is_refused_before_any_operand_is_copied(monkeypatch):
    # a (2**40, 2) @ b (2, 2**40): each operand a broadcast view a kernel cannot read as it is (a copy of 16 TiB each),
    # the result 2**80 elements; refused up front, naming the result's shape, by gemm, matmul and explain alike
    import polygemm.core.operand as operand_mod
    import polygemm.core.read as read_mod

    def no_copy(*args, **kwargs):
        raise AssertionError("an operand was copied")

    monkeypatch.setattr(read_mod, "host_convert", no_copy)
    monkeypatch.setattr(operand_mod, "host_convert", no_copy)
    a = np.broadcast_to(np.ones((1, 2)), (2**40, 2))
    b = np.broadcast_to(np.ones((2, 1)), (2, 2**40))
    for product in (pg.matmul, pg.gemm, pg.explain):
        with pytest.raises(pg.ShapeError) as info:
            product(a, b)
        assert "too large" in str(info.value) and f"shape {(2**40, 2**40)}" in str(info.value)
    # a result an array can hold is planned as before (the operands' copies described, not made)
    monkeypatch.undo()
    assert pg.explain(np.broadcast_to(np.ones((1, 2)), (2**20, 2)), np.broadcast_to(np.ones((2, 1)), (2, 2**20))).problem.m == 2**20


def test_matmul_has_numpy_semantics(rng):
    a, b = rand(rng, (4, 1, 6, 3)), rand(rng, (5, 3, 2))
    got = pg.matmul(a, b, device="cpu")
    assert got.shape == (4, 5, 6, 2)
    np.testing.assert_allclose(got, ref_matmul(a, b), rtol=1e-5, atol=1e-5)
    out = np.empty((4, 5, 6, 2), np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    with pytest.raises(pg.ShapeError, match="at least 2-D"):  # scalars, as NumPy refuses them
        pg.matmul(a[0, 0, 0, 0], b, device="cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_takes_vectors_as_numpy_does(rng, dtype):
    """A 1-D a is a row and a 1-D b a column, that dimension dropped from the result (matrix @
    vector is a vector, vector @ vector 0-D), stacks broadcast; out of the result's shape is
    written in place; a length mismatch names the vector."""
    m, k, n = 7, 33, 5
    mat, vec_k, vec_m = rand(rng, (m, k), dtype), rand(rng, (k,), dtype), rand(rng, (m,), dtype)
    stack = rand(rng, (3, m, k), dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == np.float16 else dict(rtol=1e-5, atol=1e-5)
    for x, y in ((mat, vec_k), (vec_m, mat), (vec_k, vec_k), (stack, vec_k), (vec_m, stack), (vec_k.tolist(), vec_k.tolist())):
        want = np.matmul(np.asarray(x, np.float64), np.asarray(y, np.float64))
        got = pg.matmul(x, y, device="cpu")
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got, np.float64), want, **tol)
    out = np.full((3, k), np.nan, dtype)
    assert pg.matmul(vec_m, stack, out=out, device="cpu") is out
    np.testing.assert_allclose(out.astype(np.float64), np.matmul(vec_m.astype(np.float64), stack.astype(np.float64)), **tol)
    dot = np.full((), np.nan, dtype)
    assert pg.matmul(vec_k, vec_k, out=dot, device="cpu") is dot and np.isfinite(dot)
    with pytest.raises(pg.ShapeError, match=r"b, a vector of 7, taken as a column 7×1"):
        pg.matmul(mat, vec_m, device="cpu")
    with pytest.raises(pg.ShapeError, match=r"out must have the result's shape"):
        pg.matmul(mat, vec_k, out=np.empty(k, dtype), device="cpu")


def test_out_dtype_widens_float16(rng):
    a, b = rand(rng, (2, 17, 300), np.float16), rand(rng, (2, 300, 9), np.float16)
    got = pg.gemm(a, b, out_dtype=np.float32, device="cpu")
    assert got.dtype == np.float32
    assert_close(got, a, b, out_dtype=np.float32)
    c = rand(rng, (2, 17, 9))  # c in the output dtype
    got = pg.gemm(a, b, c, beta=0.5, out_dtype="float32", device="cpu")
    assert_close(got, a, b, c, 1.0, 0.5, out_dtype=np.float32)
    with pytest.raises(pg.DTypeError, match="out is float16 but out_dtype=float32"):
        pg.gemm(a, b, out=np.empty((2, 17, 9), np.float16), out_dtype=np.float32, device="cpu")
    with pytest.raises(pg.DTypeError, match="the result dtype must be float32"):
        pg.gemm(rand(rng, (3, 3)), rand(rng, (3, 3)), out_dtype=np.float16, device="cpu")


def test_cpu_auto_is_the_blas_and_reference_is_exact(rng):
    a, b = rand(rng, (64, 48)), rand(rng, (48, 32))
    assert pg.explain(a, b, device="cpu").variant == "blas"
    np.testing.assert_array_equal(pg.gemm(a, b, device="cpu", variant="reference"), ref_matmul(a, b).astype(np.float32))


def test_a_plugin_without_batches_is_passed_over_or_says_so(rng, monkeypatch):
    """A backend that does not declare batches never gets one: explicit devices refuse."""
    be = pg.get_backend("cpu")
    monkeypatch.setattr(type(be), "batched", False)
    with pytest.raises(pg.UnsupportedProblemError, match="one matrix product per call"):
        pg.gemm(rand(rng, (2, 3, 3)), rand(rng, (3, 3)), device="cpu")


def test_matmul_vector_edges(rng):
    """A list out is refused and left as it was; a wrong out shape is named as given; a ragged
    list is a ShapeError (a ValueError, as NumPy's); array.array vectors work; an array whose reshape would not keep its
    strides (pycuda's, Fortran-ordered) is refused rather than written through a copy."""
    import array

    from polygemm import api

    mat, vec = rand(rng, (5, 4)), rand(rng, (4,))
    listed = [0.0] * 5
    with pytest.raises(pg.ArgumentError, match="out must be a NumPy array .* got list"):
        pg.matmul(mat, vec, out=listed, device="cpu")
    assert listed == [0.0] * 5
    with pytest.raises(pg.ShapeError, match=r"out must have the result's shape \(3,\); got \(1, 3\)"):
        pg.matmul(rand(rng, (5,)), rand(rng, (5, 3)), out=np.empty((1, 3), np.float32), device="cpu")
    with pytest.raises(pg.ShapeError, match="could not be converted"):  # a ValueError, as numpy.matmul's
        pg.matmul([[1.0, 2.0], [3.0]], [1.0, 2.0], device="cpu")
    got = pg.matmul(mat, array.array("f", vec.tolist()), device="cpu")
    np.testing.assert_allclose(got, mat.astype(np.float64) @ vec, rtol=1e-5, atol=1e-5)

    class Reinterpreting:  # stands for a pycuda GPUArray in Fortran order: reshape assumes C strides
        def __init__(self, shape, strides):
            self.shape, self.strides = shape, strides

        def reshape(self, shape):
            return Reinterpreting(shape, tuple(int(np.prod(shape[i + 1:])) * 4 for i in range(len(shape))))

    with pytest.raises(pg.ArgumentError, match="cannot take the vector's unit dimension as a view"):
        pg.core.vectors.unit_axis(Reinterpreting((3, 7), (4, 12)), "out", -2)
    kept = pg.core.vectors.unit_axis(Reinterpreting((3, 7), (28, 4)), "out", -2)  # C order: the reshape is a view
    assert kept.shape == (3, 1, 7)


@pytest.mark.parametrize("sa, sb", [((3, 0, 5), (5, 6)), ((3, 4, 5), (5, 0)), ((2, 3, 0, 5), (5, 6)), ((0, 4, 5), (5, 6))])
def test_empty_batched_results_take_out_and_c(rng, sa, sb):
    """A batch whose result is empty takes an out (and c in place) as NumPy does: NumPy gives
    empty arrays zero strides, which address nothing and must not be refused."""
    a, b = rand(rng, sa), rand(rng, sb)
    want = np.matmul(a, b)
    out = np.empty(want.shape, np.float32)
    assert pg.gemm(a, b, out=out, device="cpu") is out and out.shape == want.shape
    c = np.empty(want.shape, np.float32)
    assert pg.gemm(a, b, c, beta=2.0, out=c, device="cpu") is c
    assert pg.matmul(a, b, out=np.empty(want.shape, np.float32), device="cpu").shape == want.shape


def test_a_broadcast_batch_is_copied_only_for_a_backend_that_needs_it(rng):
    """Batch dimensions one stride cannot walk: the cpu backend's numpy.matmul takes them as
    given (no copy: the plan lists none); a backend that walks batches with one stride gets the
    broadcast made real, once, in a copy (the plan says so)."""
    import types

    from polygemm.problem import normalize

    a, b = rand(rng, (2, 1, 5, 4)), rand(rng, (3, 4, 6))
    got = pg.gemm(a, b, device="cpu")
    assert_close(got, a, b)
    plan = pg.last_plan()
    assert plan is not None and not [c for c in plan.copies if "broadcast" in c]
    p = normalize(a, b, broadcast_copies=False)
    assert p.a.pending and p.a.array is a  # marked, not copied
    kept = p.broadcasts_for(types.SimpleNamespace(broadcasts_host_batches=True))
    assert kept.a.array is a and not kept.a.pending and not kept.a.broadcast
    made = p.broadcasts_for(types.SimpleNamespace())  # a backend that needs one stride per batch
    assert made.a.broadcast and made.a.array.shape == (2, 3, 5, 4) and made.a.array.flags.c_contiguous
    assert made.a.batch_stride == 20 and np.array_equal(made.a.array[1, 2], a[1, 0])
    eager = normalize(a, b)  # the default: made real at once
    assert eager.a.broadcast and not eager.a.pending and eager.a.batch_stride == made.a.batch_stride


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")  # NumPy's own note on np.matrix
def test_numpy_subclasses_come_back_as_numpy_matmul_returns_them(rng):
    """An ndarray subclass in (``np.matrix``) gives that subclass out, the one numpy.matmul
    follows (the operand of higher ``__array_priority__``), vectors included; a plain ndarray
    call after it still gives a plain ndarray (nothing of the subclass kept with the plan)."""
    a = np.matrix(rand(rng, (3, 4)))
    b = np.matrix(rand(rng, (4, 2)))
    plain_a, plain_b = np.asarray(a), np.asarray(b)
    for x, y in [(a, b), (plain_a, b), (a, plain_b)]:
        got, want = pg.gemm(x, y, device="cpu"), np.matmul(x, y)
        assert type(got) is np.matrix and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    for x, y in [(a, rand(rng, (4,))), (rand(rng, (3,)), a)]:
        got, want = pg.matmul(x, y, device="cpu"), np.matmul(x, y)
        assert type(got) is np.matrix and got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    c = np.matrix(rand(rng, (3, 2)))
    assert type(pg.gemm(a, b, c, beta=0.5, device="cpu")) is np.matrix
    assert type(pg.gemm(plain_a, plain_b, device="cpu")) is np.ndarray


def test_a_subclass_of_negative_priority_gives_way_to_a_plain_ndarray_as_in_numpy(rng):
    """NumPy ranks a plain ndarray at __array_priority__ 0: beside one, a subclass below that gives a plain
    ndarray (and a vector product a scalar), in either order."""
    class Low(np.ndarray):
        __array_priority__ = -10

    x = rand(rng, (2, 2))
    for a, b in [(x, x.view(Low)), (x.view(Low), x)]:
        assert type(pg.matmul(a, b, device="cpu")) is type(np.matmul(a, b)) is np.ndarray
    v = rand(rng, (2,))
    got, want = pg.matmul(v.view(Low), v, device="cpu"), np.matmul(v.view(Low), v)
    assert type(got) is type(want) and np.isclose(got, want)
    assert type(pg.matmul(x.view(Low), x.view(Low), device="cpu")) is Low  # no plain operand: the subclass's
