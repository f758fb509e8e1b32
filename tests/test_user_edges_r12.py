"""A demanding user's edges, twelfth round (CPU): batched products, ``out_dtype`` and bfloat16 on
the cpu backend, side by side with ``numpy.matmul`` and what README/api.py promise: batch
dimensions that broadcast or do not (errors naming both shapes), batch views of every stride
(stepped, reversed, swapped, Fortran-ordered, read-only), ``c`` batched or broadcast, ``out`` of
the wrong batch shape, dtype or strides (refused, left untouched) or aliasing an input,
``out_dtype``'s spellings and refusals, and bfloat16 batches (scalars, ``c``, NaN/Inf, K = 0,
long K) checked element-wise against the float64 reference under polygemm.testing's bound."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, DTypeError, ShapeError
from polygemm.testing import check_result, reference_for

BF16 = np.dtype(ml_dtypes.bfloat16)
VARIANTS = ["auto", "reference", "numpy"]


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- batch dimensions as numpy.matmul broadcasts them -------------------------------------------

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


@pytest.mark.parametrize("sa, sb", [((2, 5, 4), (3, 4, 6)), ((0, 5, 4), (3, 4, 6)), ((2, 3, 5, 4), (4, 3, 4, 6))])
def test_batches_that_do_not_broadcast_are_refused_naming_both_shapes(rng, sa, sb):
    """numpy.matmul refuses them (a ValueError); so does polygemm, naming a's and b's whole shapes
    (it had named only their batch dimensions), through gemm and matmul alike."""
    a, b = rand(rng, sa), rand(rng, sb)
    with pytest.raises(ValueError):
        np.matmul(a, b)
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(ShapeError, match=re.escape(f"do not broadcast (numpy.matmul rules): a is {sa}, b is {sb}")):
            call(a, b, device="cpu")


# -- c over the batch ----------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_c_batched_or_broadcast_over_the_batch(rng, variant):
    """c of the result's shape, or a view broadcast to it (np.broadcast_to: stride 0 over the
    batch), with beta != 0; c is never written unless it is out."""
    a, b = rand(rng, (2, 1, 5, 4)), rand(rng, (3, 4, 6))
    for c in (rand(rng, (2, 3, 5, 6)), np.broadcast_to(rand(rng, (5, 6)), (2, 3, 5, 6)),
              np.broadcast_to(rand(rng, (1, 3, 5, 6)), (2, 3, 5, 6)), rand(rng, (2, 3, 6, 5)).swapaxes(-1, -2)):
        c0 = c.copy()
        got = pg.gemm(a, b, c, alpha=-0.5, beta=1.5, device="cpu", variant=variant)
        assert_within(got, a, b, c0, -0.5, 1.5)
        assert np.array_equal(c, c0)


def test_a_c_that_only_broadcasts_is_refused_saying_how_to_pass_it(rng):
    """README: c has the result's shape. A c that broadcasts to it ((M, N) for a batch, as
    a @ b + c would take it) is refused, told to pass it broadcast; one that does not is not told so."""
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    for c in (rand(rng, (5, 6)), rand(rng, (1, 5, 6))):
        with pytest.raises(ShapeError, match=re.escape(r"pass it broadcast, e.g. np.broadcast_to(c, (3, 5, 6))")):
            pg.gemm(a, b, c, beta=1.0, device="cpu")
        np.testing.assert_array_equal(pg.gemm(a, b, np.broadcast_to(c, (3, 5, 6)), beta=1.0, device="cpu"),
                                      pg.gemm(a, b, np.broadcast_to(c, (3, 5, 6)).copy(), beta=1.0, device="cpu"))
    with pytest.raises(ShapeError, match=r"got \(2, 5, 6\)$"):
        pg.gemm(a, b, rand(rng, (2, 5, 6)), beta=1.0, device="cpu")


def test_c_in_place_over_a_reversed_or_stepped_batch(rng):
    """out=c where c is a reversed or every-other-matrix view: updated in place, the matrices
    between them untouched."""
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    for make in (lambda buf: buf[::-2], lambda buf: buf[1::2]):
        buf = rand(rng, (6, 5, 6))
        keep = buf.copy()
        c = make(buf)
        c0 = c.copy()
        assert pg.gemm(a, b, c, alpha=2.0, beta=-1.0, out=c, device="cpu") is c
        assert_within(c, a, b, c0, 2.0, -1.0)
        untouched = np.ones(6, bool)
        untouched[np.arange(6)[make(np.arange(6))]] = False
        assert np.array_equal(buf[untouched], keep[untouched])


# -- out over the batch --------------------------------------------------------------------------

def _sentinel(shape, dtype=np.float32, order="C"):
    return np.full(shape, -7.0, dtype, order=order)


def test_out_of_the_wrong_batch_shape_dtype_or_strides_is_refused_and_untouched(rng):
    a, b = rand(rng, (2, 3, 5, 4)), rand(rng, (2, 3, 4, 6))
    c = rand(rng, (2, 3, 5, 6))
    cases = [
        (_sentinel((3, 2, 5, 6)), ShapeError, r"out must have the result's shape \(2, 3, 5, 6\); got \(3, 2, 5, 6\)"),
        (_sentinel((5, 6)), ShapeError, r"out must have the result's shape \(2, 3, 5, 6\); got \(5, 6\)"),
        (_sentinel((2, 3, 1, 5, 6)), ShapeError, r"out must have the result's shape"),
        (_sentinel((2, 3, 5, 6), np.float64), DTypeError, r"the result dtype must be float32; got out float64"),
        (_sentinel((2, 3, 5, 6), BF16), DTypeError, r"the result dtype must be float32; got out bfloat16"),
        (_sentinel((2, 3, 5, 6), order="F"), ArgumentError, r"an N-D Fortran-ordered array interleaves its matrices"),
        (_sentinel((2, 3, 5, 12))[..., ::2], ArgumentError, r"neither row- nor column-major"),
    ]
    for out, err, says in cases:
        before = out.copy()
        for kw in ({}, {"c": c, "beta": 1.0}):
            with pytest.raises(err, match=says):
                pg.gemm(a, b, out=out, device="cpu", **kw)
        assert np.array_equal(out, before)


def test_out_whose_batch_no_stride_walks_is_told_its_strides_and_a_real_fix(rng):
    """out with swapped batch axes (or one matrix for the whole batch): refused, naming its shape and
    strides and what to pass. It had said "pass a contiguous array (e.g. ascontiguousarray)": a
    copy of out, which would get the result while out did not. Nothing is written."""
    a, b = rand(rng, (2, 3, 5, 4)), rand(rng, (2, 3, 4, 6))
    swapped = _sentinel((3, 2, 5, 6)).swapaxes(0, 1)
    repeated = np.lib.stride_tricks.as_strided(_sentinel((5, 6)), (2, 3, 5, 6), (0, 0, 24, 4), writeable=True)
    for out in (swapped, repeated):
        before = out.copy()
        with pytest.raises(ArgumentError) as info:
            pg.gemm(a, b, out=out, device="cpu")
        msg = str(info.value)
        assert f"out has shape (2, 3, 5, 6) and strides {out.strides}" in msg
        assert "np.empty((2, 3, 5, 6), np.float32)" in msg and "ascontiguousarray" not in msg
        assert np.array_equal(out, before)
    c = swapped.copy()  # c itself may be such a batch (it is only read)
    assert_within(pg.gemm(a, b, np.ascontiguousarray(c.swapaxes(0, 1)).swapaxes(0, 1), beta=1.0, device="cpu"), a, b, c, 1.0, 1.0)


def test_out_stepped_reversed_or_transposed_batch_is_written_in_place(rng):
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    for make in (lambda: _sentinel((6, 5, 6))[::2], lambda: _sentinel((3, 5, 6))[::-1],
                 lambda: _sentinel((3, 6, 5)).swapaxes(1, 2), lambda: _sentinel((5, 3, 6)).transpose(1, 0, 2)):
        out = make()
        base = out.base if out.base is not None else out
        for variant in VARIANTS:
            out[...] = -7.0
            assert pg.gemm(a, b, out=out, device="cpu", variant=variant) is out
            assert_within(out, a, b)
            assert np.count_nonzero(base == -7.0) == base.size - out.size  # nothing else written


def test_out_aliasing_an_input_within_the_batch_is_refused(rng):
    """out over a's or b's batch (the same matrices, or shifted by one) is refused, nothing
    written; out in another part of a's buffer is fine (numpy.matmul takes both)."""
    buf = rand(rng, (4, 5, 5))
    keep = buf.copy()
    for a, b, out, name in ((buf[:3], rand(rng, (3, 5, 5)), buf[1:], "a"), (buf, rand(rng, (4, 5, 5)), buf, "a"),
                            (rand(rng, (4, 5, 5)), buf[0], buf, "b")):
        with pytest.raises(ArgumentError, match=f"out overlaps {name}; pass a separate array for out"):
            pg.gemm(a, b, out=out, device="cpu")
        assert np.array_equal(buf, keep)
    b = rand(rng, (2, 5, 5))
    assert pg.gemm(buf[:2], b, out=buf[2:], device="cpu") is not None
    assert_within(buf[2:], keep[:2], b)
    assert np.array_equal(buf[:2], keep[:2])


def test_interleaved_c_and_out_are_not_in_place_for_the_plan_cache(rng):
    """c = buf[::2] and out = buf[1::2] (or two column blocks of one matrix) interleave without
    sharing an element: not in place. The cache key had called them in place (np.may_share_memory
    compares bounds only), so a later out=c reused their plan and last_plan() said it was not in
    place."""
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    a2, b2 = rand(rng, (4, 3)), rand(rng, (3, 6))
    for first in ("separate", "in place"):
        for a_, b_, make in ((a, b, lambda: rand(rng, (6, 5, 6))), (a2, b2, lambda: rand(rng, (4, 12)))):
            pg.clear_plan_cache()
            for kind in ((first, "in place") if first == "separate" else (first, "separate")):
                buf = make()
                keep = buf.copy()
                c = buf[::2] if buf.ndim == 3 else buf[:, :6]
                out = c if kind == "in place" else (buf[1::2] if buf.ndim == 3 else buf[:, 6:])
                c0 = c.copy()
                assert pg.gemm(a_, b_, c, beta=1.0, out=out, device="cpu") is out
                assert_within(out, a_, b_, c0, 1.0, 1.0)
                plan = pg.last_plan()
                assert plan.problem.in_place is (kind == "in place"), (first, kind)
                assert ("in place: out is c" in str(plan)) is (kind == "in place")
                if kind == "separate":
                    assert np.array_equal(c, c0) and not np.array_equal(buf, keep)


# -- out_dtype -----------------------------------------------------------------------------------

WIDE = [np.float32, "float32", np.dtype("float32"), "f4", "<f4" if np.little_endian else ">f4", "single", np.single]


@pytest.mark.parametrize("spelling", WIDE, ids=repr)
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_every_spelling_of_float32_widens_half_batches(rng, dtype, spelling):
    a, b = rand(rng, (2, 7, 33), dtype), rand(rng, (33, 5), dtype)
    for variant in VARIANTS:
        got = pg.gemm(a, b, out_dtype=spelling, device="cpu", variant=variant)
        assert got.dtype == np.float32 and got.shape == (2, 7, 5)
        assert_within(got, a, b, out_dtype=np.float32)
    assert pg.matmul(a, b[:, 0], out_dtype=spelling, device="cpu").dtype == np.float32
    assert f"{np.dtype(dtype).name} -> float32" in str(pg.explain(a, b, out_dtype=spelling, device="cpu"))


@pytest.mark.parametrize("spelling", ["bfloat16", ml_dtypes.bfloat16, BF16], ids=repr)
def test_bfloat16_spellings_of_out_dtype_keep_bfloat16(rng, spelling):
    a, b = rand(rng, (2, 7, 33), BF16), rand(rng, (2, 33, 5), BF16)
    got = pg.gemm(a, b, out_dtype=spelling, device="cpu")
    assert got.dtype == BF16
    assert_within(got, a, b)


@pytest.mark.parametrize("dtype, refused", [
    (np.float16, [int, "int32", complex, np.complex64, float, np.float64, "f8", BF16, np.longdouble, bool]),
    (BF16, [int, complex, np.float64, np.float16, "float16"]),
    (np.float32, [np.float16, BF16, np.float64, int, complex, "c8"]),
    (np.float64, [np.float32, np.float16, complex]),
], ids=["f16", "bf16", "f32", "f64"])
def test_out_dtypes_the_inputs_cannot_give_are_refused_naming_out_dtype_and_what_is_accepted(rng, dtype, refused):
    a, b = rand(rng, (2, 3, 4), dtype), rand(rng, (2, 4, 3), dtype)
    name = np.dtype(dtype).name
    accepted = f"must be {name} (or float32" if name in ("float16", "bfloat16") else f"must be {name}; "
    for spelling in refused:
        with pytest.raises(DTypeError, match=re.escape(f"the result dtype {accepted}")) as info:
            pg.gemm(a, b, out_dtype=spelling, device="cpu")
        assert "out_dtype" in str(info.value)
        assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("spelling", ["float31", "", "FLOAT32", "float32 ", 3, 3.5, [np.float32], "i4,garbage", ">f4" if np.little_endian else "<f4"], ids=repr)
def test_out_dtypes_that_are_no_dtype_say_what_to_pass(rng, spelling):
    a = rand(rng, (2, 3, 4), np.float16)
    with pytest.raises(DTypeError, match=r"out_dtype=.*(is not a dtype polygemm writes; pass float32|non-native byte order)"):
        pg.gemm(a, a.swapaxes(1, 2), out_dtype=spelling, device="cpu")


def test_out_dtype_with_out_and_with_c_in_a_batch(rng):
    """out_dtype and out must agree (either alone says the result's dtype); c has the result's
    dtype (float32 with out_dtype=float32, the inputs' without), told how to cast; nothing written."""
    a, b = rand(rng, (2, 5, 8), np.float16), rand(rng, (2, 8, 3), np.float16)
    out32, out16 = _sentinel((2, 5, 3)), _sentinel((2, 5, 3), np.float16)
    c16, c32 = rand(rng, (2, 5, 3), np.float16), rand(rng, (2, 5, 3))
    with pytest.raises(DTypeError, match="out is float16 but out_dtype=float32; pass one of them, or both the same"):
        pg.gemm(a, b, out=out16, out_dtype=np.float32, device="cpu")
    with pytest.raises(DTypeError, match="out is float32 but out_dtype=float16"):
        pg.gemm(a, b, out=out32, out_dtype="f2", device="cpu")
    with pytest.raises(DTypeError, match=re.escape("c must have the dtype of the result (float32); got float16. Cast it, e.g. c.astype(np.float32)")):
        pg.gemm(a, b, c16, beta=1.0, out_dtype=np.float32, out=out32, device="cpu")
    with pytest.raises(DTypeError, match="or ask for a float32 result with out_dtype=np.float32"):
        pg.gemm(a, b, c32, beta=1.0, device="cpu")
    assert (out32 == -7.0).all() and (out16 == -7.0).all()
    # what is accepted: out alone, out_dtype alone, both the same, c of the result's dtype
    for kw in ({"out": out32}, {"out_dtype": "float32"}, {"out": out32, "out_dtype": np.float32}):
        got = pg.gemm(a, b, c32, alpha=0.5, beta=2.0, device="cpu", **kw)
        assert got.dtype == np.float32 and ("out" not in kw or got is out32)
        assert_within(got, a, b, c32, 0.5, 2.0, out_dtype=np.float32)
    plan = pg.explain(a, b, c32, beta=2.0, out=out32, device="cpu")
    assert "float16 -> float32" in str(plan) and plan.problem.out_dtype == np.float32


# -- bfloat16 batches ----------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_bfloat16_batches_with_bfloat16_scalars_and_c_of_either_dtype(rng, variant):
    a, b = rand(rng, (3, 8, 40), BF16), rand(rng, (1, 40, 6), BF16)
    alpha, beta = ml_dtypes.bfloat16(-1.5), ml_dtypes.bfloat16(0.25)
    c = rand(rng, (3, 8, 6), BF16)
    got = pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu", variant=variant)
    assert got.dtype == BF16
    assert_within(got, a, b, c, -1.5, 0.25)
    c32 = rand(rng, (3, 8, 6))
    got = pg.gemm(a, b, c32, alpha=alpha, beta=beta, out_dtype=np.float32, device="cpu", variant=variant)
    assert got.dtype == np.float32
    assert_within(got, a, b, c32, -1.5, 0.25, out_dtype=np.float32)
    c0 = c32.copy()  # in place into a float32 c
    assert pg.gemm(a, b, c32, alpha=alpha, beta=beta, out=c32, device="cpu", variant=variant) is c32
    assert_within(c32, a, b, c0, -1.5, 0.25, out_dtype=np.float32)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("out_dtype", [None, np.float32], ids=["bf16", "f32"])
def test_bfloat16_nan_and_inf_propagate_per_matrix(rng, variant, out_dtype):
    """NaN and Inf reach exactly the elements numpy.matmul's float64 product has them in, in the
    matrix of the batch they belong to; a bfloat16 overflow is inf as IEEE rounds it."""
    a, b = rand(rng, (3, 4, 6), BF16), rand(rng, (3, 6, 5), BF16)
    a[0, 1, 2] = np.nan
    b[1, 3, 4] = np.inf
    a[2, 2, :] = 3e38  # finite in bfloat16; its row's sums are not (b's matrix positive: no cancellation, every
    b[2] = np.abs(b[2].astype(np.float32)) + 0.5  # partial sum of float32 accumulation overflows the same way)
    got = pg.gemm(a, b, device="cpu", variant=variant, out_dtype=out_dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    g = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    assert np.isinf(g[1, :, 4]).all() and np.isinf(g[2, 2]).all()
    assert_within(got, a, b, out_dtype=out_dtype)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bfloat16_k_zero_is_beta_c_or_zeros(rng, variant):
    a, b = rand(rng, (3, 4, 0), BF16), rand(rng, (3, 0, 2), BF16)
    zero = pg.gemm(a, b, device="cpu", variant=variant)
    assert zero.dtype == BF16 and zero.shape == (3, 4, 2) and not zero.astype(np.float32).any()
    c = rand(rng, (3, 4, 2), BF16)
    got = pg.gemm(a, b, c, beta=ml_dtypes.bfloat16(0.5), device="cpu", variant=variant)
    np.testing.assert_array_equal(got.astype(np.float32), c.astype(np.float32) * 0.5)  # exact: a power of two
    c32 = rand(rng, (3, 4, 2))
    got = pg.gemm(a, b, c32, beta=3.0, out_dtype=np.float32, device="cpu", variant=variant)
    np.testing.assert_array_equal(got, c32 * np.float32(3.0))
    nan_c = np.full((3, 4, 2), np.nan, BF16)  # beta = 0: c is not read
    assert not pg.gemm(a, b, nan_c, beta=0.0, device="cpu", variant=variant).astype(np.float32).any()
    assert pg.matmul(a, b, device="cpu").shape == (3, 4, 2)


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


def test_a_random_mix_of_batched_calls_matches_the_reference(rng):
    """Random batch shapes (broadcast or not), dtypes, out_dtype, c and out views (stepped,
    reversed, transposed), in place or not, and variants: every result within the bound, out
    returned, c untouched unless it is out."""
    def view(x):
        k = int(rng.integers(0, 4))
        if k == 1 and x.ndim == 3:  # (4-D: the first axis reversed or stepped is no batch one stride walks)
            return np.ascontiguousarray(x[::-1])[::-1]
        if k == 2 and x.ndim == 3:
            big = np.empty((2 * x.shape[0],) + x.shape[1:], x.dtype)
            big[::2] = x
            return big[::2]
        if k == 3:
            return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
        return x

    for _ in range(150):
        dtype = [np.float16, BF16, np.float32, np.float64][int(rng.integers(0, 4))]
        nb = int(rng.integers(0, 3))
        batch = tuple(int(x) for x in rng.integers(1, 4, nb))
        sa = tuple(1 if rng.random() < 0.3 else n for n in batch)[int(rng.integers(0, nb + 1)):]
        sb = tuple(1 if rng.random() < 0.3 else n for n in batch)[int(rng.integers(0, nb + 1)):]
        m, n, k = (int(x) for x in rng.integers(0, 7, 3))
        a, b = rand(rng, sa + (m, k), dtype), rand(rng, sb + (k, n), dtype)
        full = tuple(np.broadcast_shapes(sa, sb)) + (m, n)
        half = np.dtype(dtype).name in ("float16", "bfloat16")
        out_dtype = np.float32 if half and rng.random() < 0.5 else None
        rd = np.dtype(out_dtype or dtype)
        alpha, beta = [1.0, -0.5, 2.0][int(rng.integers(0, 3))], [0.0, 1.0, -1.5][int(rng.integers(0, 3))]
        c = view(rand(rng, full, rd)) if beta or rng.random() < 0.3 else None
        c0 = None if c is None else c.copy()
        out = None
        if rng.random() < 0.5:
            out = c if c is not None and rng.random() < 0.5 else view(np.full(full, np.nan, rd))
        variant = VARIANTS[int(rng.integers(0, 3))]
        got = pg.gemm(view(a), view(b), c, alpha=alpha, beta=beta, out=out, out_dtype=out_dtype, device="cpu", variant=variant)
        assert out is None or got is out
        assert got.shape == full and got.dtype == rd
        assert_within(got, a, b, c0, alpha, beta, out_dtype=rd)
        if c is not None and out is not c:
            assert np.array_equal(c, c0, equal_nan=True)
