"""Integer and bool products as numpy.matmul computes them: exact, in the inputs' dtype, wrapping modulo 2**bits on
overflow, bool as the logical product; and the refusals of devices that do not compute them, naming a cast that keeps
the values (only where one exists) or device='cpu'."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda import CudaBackend
from polygemm.core.hints import dtype_way_on
from polygemm.core.normalize import normalize
from polygemm.errors import ArgumentError, DTypeError

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _draw(rng, shape, dtype):
    """Values spanning the dtype's whole range: their products overflow, and wrap as numpy.matmul's do."""
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("sa, sb", [((1, 1), (1, 1)), ((7, 13), (13, 5)), ((3, 1, 17), (17, 9)), ((2, 3, 4), (1, 4, 6)),
                                    ((33, 65), (65, 1)), ((0, 4), (4, 3)), ((3, 0), (0, 2))], ids=str)
def test_integer_products_are_numpy_matmuls_exactly(rng, dtype, sa, sb):
    a, b = _draw(rng, sa, dtype), _draw(rng, sb, dtype)
    want = np.matmul(a, b)
    for variant in ("auto", "reference", "numpy"):
        got = pg.gemm(a, b, variant=variant, device="cpu")
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), variant


@pytest.mark.parametrize("dtype", INTS)
def test_integer_layouts_and_vectors(rng, dtype):
    a, b = _draw(rng, (9, 11), dtype), _draw(rng, (5, 11), dtype)
    assert np.array_equal(pg.gemm(a, b.T), np.matmul(a, b.T))  # a transposed view, read as it is
    assert np.array_equal(pg.gemm(np.asfortranarray(a), b.T[:, ::2]), np.matmul(a, b.T[:, ::2]))  # a strided view, copied
    v = _draw(rng, (11,), dtype)
    assert np.array_equal(pg.matmul(a, v), np.matmul(a, v)) and np.array_equal(pg.matmul(v, v), np.matmul(v, v))


@pytest.mark.parametrize("dtype", INTS)
def test_out_and_c_with_whole_alpha_and_beta_wrap_as_integer_arithmetic(rng, dtype):
    a, b, c = _draw(rng, (2, 6, 7), dtype), _draw(rng, (7, 3), dtype), _draw(rng, (2, 6, 3), dtype)
    out = np.full((2, 6, 3), 7, dtype)
    assert pg.gemm(a, b, out=out) is out and np.array_equal(out, np.matmul(a, b))
    # alpha * a @ b + beta * c in the dtype's wrapping arithmetic, as NumPy's own array arithmetic gives it
    beta = 2 if np.dtype(dtype).kind == "u" else -2
    with np.errstate(over="ignore"):
        want = np.matmul(a, b) * np.array(3).astype(dtype) + np.array(beta).astype(dtype) * c
    for variant in ("auto", "reference"):
        got = pg.gemm(a, b, c, alpha=3, beta=beta, variant=variant)
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, want), variant
    inplace = c.copy()
    assert pg.gemm(a, b, inplace, alpha=3.0, beta=float(beta), out=inplace) is inplace and np.array_equal(inplace, want)


@pytest.mark.parametrize("dtype,alpha,beta", [("int8", 300, 0), ("uint8", -1, 0), ("uint32", 1, -2), ("int16", 1, 2**15)])
def test_a_scalar_its_dtype_cannot_hold_is_refused_as_numpy_refuses_it(rng, dtype, alpha, beta):
    a, b, c = _draw(rng, (3, 4), dtype), _draw(rng, (4, 2), dtype), _draw(rng, (3, 2), dtype)
    out = np.full((3, 2), 7, dtype)
    with pytest.raises(ArgumentError) as info:
        pg.gemm(a, b, c, alpha=alpha, beta=beta, out=out)
    name, value = ("alpha", alpha) if alpha != 1 else ("beta", beta)
    assert f"{name}={value}" in str(info.value) and "out of bounds" in str(info.value) and dtype in str(info.value)
    assert (out == 7).all()


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_a_whole_alpha_beyond_float64s_integers_scales_exactly(dtype):
    one = np.ones((1, 1), dtype)
    big = 2**53 + 1
    assert pg.gemm(one, one, alpha=big)[0, 0] == big
    assert pg.gemm(one, one, one, beta=big)[0, 0] == big + 1
    if dtype == "uint64":
        assert pg.gemm(np.ones((2, 2), dtype), np.ones((2, 2), dtype), alpha=np.uint64(2**64 - 1))[0, 0] == 2**64 - 2


def test_a_fractional_alpha_or_beta_is_refused_for_integers_and_out_is_untouched(rng):
    a, b = _draw(rng, (3, 4), "int32"), _draw(rng, (4, 2), "int32")
    out = np.full((3, 2), 7, np.int32)
    with pytest.raises(ArgumentError) as info:
        pg.gemm(a, b, alpha=0.5, out=out)
    assert "alpha=0.5" in str(info.value) and "whole" in str(info.value)
    with pytest.raises(ArgumentError, match="beta=1.5"):
        pg.gemm(a, b, out, beta=1.5, out=out)
    assert (out == 7).all()
    pg.gemm(a, b, alpha=2, out=out)  # a plan for alpha other than 1, cached, then a call reusing it with alpha 0.5
    out[...] = 7
    with pytest.raises(ArgumentError, match="alpha=0.5"):
        pg.gemm(a, b, alpha=0.5, out=out)
    assert (out == 7).all()


def test_a_fraction_scales_an_integer_product_exactly_when_whole_and_is_refused_when_not(rng):
    from fractions import Fraction

    one = np.ones((2, 2), np.int64)
    assert pg.gemm(one, one, alpha=Fraction(2**53 + 1, 1))[0, 0] == 2 * (2**53 + 1)  # whole: as the int it is
    # no whole number, though its float64 is one (1.0, 0.0): refused, whether or not a plan for 1 or 0 is cached
    pg.gemm(one, one, one, beta=1)
    for kw in ({"alpha": Fraction(10**30 + 1, 10**30)}, {"beta": Fraction(10**30 + 1, 10**30)}, {"beta": Fraction(1, 10**400)}):
        with pytest.raises(ArgumentError, match="Fraction.*no whole number"):
            pg.gemm(one, one, one, **kw)
    # a floating product scales by the float64 it rounds to; beta rounding to 0 reads no c (NaN there stays out)
    c = np.full((2, 2), np.nan)
    assert (pg.gemm(np.ones((2, 2)), np.ones((2, 2)), c, beta=Fraction(1, 10**400)) == 2.0).all()
    assert (pg.gemm(np.ones((2, 2)), np.ones((2, 2)), alpha=Fraction(10**30 + 1, 10**30)) == 2.0).all()


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="longdouble is no finer than float64 here")
def test_a_longdouble_scales_an_integer_product_exactly_when_whole_and_is_refused_when_not():
    one = np.ones((1, 1), np.int64)
    whole = np.longdouble(2**62) + 1  # exact in an 80-bit longdouble; 2.0**62 as a float64
    for given in (whole, np.array(whole)):  # the scalar and its 0-D array
        assert pg.gemm(one, one, alpha=given)[0, 0] == 2**62 + 1
        assert pg.gemm(one, one, one, beta=given)[0, 0] == 1 + 2**62 + 1
    assert pg.gemm(np.ones((1, 1), np.uint64), np.ones((1, 1), np.uint64), alpha=np.longdouble(2**64 - 1))[0, 0] == 2**64 - 1
    # no whole number, though its float64 (2.0**62) is one: refused as the value it is, whether or not a plan for an
    # alpha other than 1 (or a beta other than 0) is cached, and nothing written
    half = np.longdouble(2**62) + 0.5
    out = np.full((1, 1), 7, np.int64)
    pg.gemm(one, one, one, alpha=3, beta=3, out=out)
    out[...] = 7
    for kw, shown in (({"alpha": half}, f"alpha={half!s}"), ({"beta": half}, f"beta={half!s}"),
                      ({"alpha": np.array(half)}, f"alpha={half!s}"), ({"alpha": np.longdouble(1) / 3}, "alpha=0.3333333333333333")):
        with pytest.raises(ArgumentError) as info:
            pg.gemm(one, one, one, out=out, **kw)
        assert f"{shown} is no whole number" in str(info.value)
    assert (out == 7).all()
    # a floating product scales by the longdouble's float64, as before
    assert pg.gemm(np.ones((1, 1)), np.ones((1, 1)), alpha=whole)[0, 0] == 2.0**62
    assert pg.gemm(np.ones((1, 1)), np.ones((1, 1)), alpha=half)[0, 0] == 2.0**62
    assert pg.gemm(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), alpha=whole)[0, 0] == np.float32(2.0**62)


@pytest.mark.parametrize("sa, sb", [((5, 8), (8, 3)), ((2, 4, 8), (8, 6)), ((8,), (8,))], ids=str)
def test_bool_products_are_logical(rng, sa, sb):
    a, b = rng.random(sa) < 0.2, rng.random(sb) < 0.2
    want = np.matmul(a, b)
    got = pg.matmul(a, b)
    assert np.asarray(got).dtype == np.bool_ and np.array_equal(got, want)
    assert np.array_equal(pg.matmul(a, b, device="cpu"), want)
    with pytest.raises(ArgumentError, match="logical"):
        pg.gemm(np.ones((2, 2), bool), np.ones((2, 2), bool), alpha=2)


def test_the_result_dtype_is_the_inputs_as_numpy_matmuls(rng):
    a = _draw(rng, (3, 4), "int8")
    with pytest.raises(DTypeError, match="result dtype must be int8"):
        pg.gemm(a, a.T, out=np.empty((3, 3), np.int64))
    with pytest.raises(DTypeError, match="result dtype must be int8"):
        pg.gemm(a, a.T, out_dtype=np.int32)


def test_auto_computes_integers_on_the_cpu_and_says_so(rng):
    a = _draw(rng, (3, 4), "int64")
    plan = pg.explain(a, a.T)
    assert plan.backend == "cpu"
    assert any("int64" in n and "device='auto'" in n for n in plan.notes)
    assert "exact" in plan.precision and "2^64" in plan.precision


@pytest.mark.parametrize("dtype, cast", [("int8", "float32"), ("uint16", "float32"), ("int32", None), ("int64", None),
                                         ("bool", "float32")])
def test_cuda_refuses_integers_naming_a_cast_that_keeps_the_values_or_the_cpu(dtype, cast):
    # the cuda backend's rules need no GPU: its static table
    a = np.ones((3, 4), dtype)
    refused = CudaBackend().refusal(normalize(a, a.T))
    assert isinstance(refused, DTypeError)
    msg = str(refused)
    assert f"dtype {dtype}" in msg and "device='cpu'" in msg
    if cast is None:
        assert "astype(np.float32)" not in msg  # int32 and int64 are not exact in float32: no such hint
    else:
        assert f"a.astype(np.{cast})" in msg


def test_a_float64_cast_of_int64_is_named_with_its_condition():
    # where a backend computes float64, int32 goes to it (exact), int64 only below 2**53, and says so
    way = dtype_way_on("int32", ("float32", "float64"))
    assert "a.astype(np.float64)" in way and "device='cpu'" in way
    way = dtype_way_on("int64", ("float32", "float64"), residency="cuda")
    assert "2**53" in way and "host copies" in way


def test_a_mixed_integer_and_float_pair_is_told_the_dtype_numpy_computes_it_in(rng):
    a, b = _draw(rng, (3, 4), "int64"), rng.standard_normal((4, 2)).astype(np.float32)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, b)
    msg = str(info.value)
    assert "a.astype(np.float64)" in msg and "2**53" in msg and "b.astype(np.float64)" in msg


def test_a_huge_whole_alpha_is_refused_in_a_message_of_one_line():
    """An alpha of 300 digits is named by its first digits and its length, not printed whole."""
    a = np.ones((2, 2), np.int32)
    for alpha in (1e308, -10**300):
        with pytest.raises(pg.ArgumentError, match=r"alpha=-?10\.\.\.\(3\d\d digits\) is out of bounds for int32") as info:
            pg.gemm(a, a, alpha=alpha, device="cpu")
        assert len(str(info.value)) < 300


def test_a_list_cast_to_an_integer_dtype_is_told_a_cast_numpy_makes():
    """np.asarray([-1], dtype=np.uint8) raises OverflowError in NumPy 2: a list meant for an integer dtype is told
    np.asarray(c).astype(...), which wraps as the hint says, and following it computes."""
    a = np.ones((2, 2), np.uint8)
    c = [[-1, 2], [3, 4]]
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(c\)\.astype\(np\.uint8\) \(which wraps") as info:
        pg.gemm(a, a, c, device="cpu")
    assert "np.asarray(c, dtype=np.uint8)" not in str(info.value)
    got = pg.gemm(a, a, np.asarray(c).astype(np.uint8), device="cpu")
    assert np.array_equal(got, (a @ a + np.asarray(c).astype(np.uint8)).astype(np.uint8))


def test_a_list_beside_unsigned_integers_is_not_told_a_cast_that_wraps_its_values():
    a = np.full((1, 1), 3, np.uint64)
    with pytest.raises(pg.DTypeError) as info:
        pg.matmul(a, [[-1]], device="cpu")
    assert "uint64)" not in str(info.value).split("e.g.")[1].split("(float64")[0] and "float64" in str(info.value)


def test_two_lists_compute_in_the_dtype_numpy_matmul_gives_them():
    """No dtype of two lists was chosen: they take the one numpy.matmul computes them in (uint64 and int64: float64)."""
    for a, b in (([[2**63]], [[-1]]), ([[1, 2]], [[1.5], [2.0]]), ([[True, False]], [[3], [4]]), ([1, 2], [0.5, 2])):
        got, want = pg.matmul(a, b, device="cpu"), np.matmul(a, b)
        assert np.asarray(got).dtype == want.dtype and np.array_equal(got, want)
    assert pg.gemm([[1, 2]], ([1.5], [2.0]), device="cpu").dtype == np.float64


def test_a_list_of_values_unsigned_integers_hold_is_told_their_dtype():
    with pytest.raises(pg.DTypeError, match=r"np\.asarray\(b\)\.astype\(np\.uint64\)"):
        pg.matmul(np.full((1, 1), 3, np.uint64), [[2]], device="cpu")


def test_explain_refuses_what_gemm_refuses_of_an_integer_products_scalars_with_its_plan_cached():
    # a cached plan keys whether alpha is 1, not its value: explain asks of the value as gemm does
    a8 = np.ones((2, 2), np.int8)
    pg.gemm(a8, a8, a8, alpha=2, beta=3)
    for kw, says in (({"alpha": 300}, "out of bounds for int8"), ({"alpha": 2.5}, "no whole number"),
                     ({"beta": 0.5}, "no whole number")):
        for call in (pg.explain, pg.gemm):
            with pytest.raises(ArgumentError, match=says):
                call(a8, a8, a8, **{"alpha": 2, "beta": 3, **kw})
    assert pg.explain(a8, a8, a8, alpha=5, beta=3).cached
