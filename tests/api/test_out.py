"""``out=``: written in place and returned, of every memory order; refused (and left untouched) when it cannot hold the result."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import types

import ml_dtypes
import numpy as np
import pytest

import polygemm
import polygemm as pg
import polygemm.api as api
from polygemm.apps.cli import main
from polygemm.errors import ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, ShapeError
from polygemm.problem import normalize
from polygemm.testing import assert_close, check_result, inject_fault, reference_for

from tests.helpers import (
    assert_array_within,
    assert_matmul_within,
    bench_record,
    cli,
    CPUArrayAPI,
    Dlpack1,
    DLPackOnly,
    DLPackProducer,
    OnlyArray,
    poisoned,
    StreamOnly,
)


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise assert_array_within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


BF16 = np.dtype(ml_dtypes.bfloat16)


def _sentinel(shape, dtype=np.float32, order="C"):
    return np.full(shape, -7.0, dtype, order=order)


VARIANTS = ["auto", "reference", "numpy"]


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


class ApiArray(DLPackOnly):
    """An array of a small array-API library: shape, ndim, dtype, DLPack and its namespace; no reshape method (the
    standard has xp.reshape, no method) and no __array__."""

    shape = property(lambda self: self._x.shape)
    ndim = property(lambda self: self._x.ndim)
    dtype = property(lambda self: self._x.dtype)

    def __array_namespace__(self, api_version=None):
        return API


API = types.SimpleNamespace(__name__="apilib", from_dlpack=lambda x: ApiArray(np.from_dlpack(x)),
                            asarray=lambda x: ApiArray(np.asarray(x)),
                            expand_dims=lambda x, /, *, axis=0: ApiArray(np.expand_dims(x._x, axis)),  # a view, as NumPy's
                            reshape=lambda x, /, shape: ApiArray(np.reshape(x._x, shape)))


SENTINEL = -12345.0


@pytest.fixture
def rng():
    return np.random.default_rng(19)


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


#: an impossible allocation on any machine: b is 10**14 float32 (400 TB, past a 47-bit address space), a one element
TOO_LARGE = "1x100000000000000x1"


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


class NoArgs(DLPackProducer):
    def __dlpack__(self):
        self.log.append({})
        return self.x.__dlpack__()


DTYPES = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]


_KEYWORDS = [
    ("dtype", r"out_dtype=, e\.g\. out_dtype=np\.float32"),
    ("preferred_element_type", r"out_dtype="),
    ("trans_a", r"a\.T"),
    ("transa", r"a\.T"),
    ("transpose_b", r"b\.T"),
    ("adjoint_b", r"b\.T"),
    ("input", r"by position"),
    ("other", r"by position"),
    ("x1", r"by position"),
    ("overwrite_c", r"out=c"),
    ("casting", r"numpy\.matmul ufunc keyword"),
    ("axes", r"numpy\.matmul ufunc keyword"),
    ("stream", r"stream the operands name"),
    ("Out", r"did you mean 'out'\?"),
    ("out_type", r"did you mean 'out_dtype'\?"),
]


class _DeviceScalar(CPUArrayAPI):
    """A 0-D array in device memory (a CuPy reduction, a CUDA tensor): exporting it would touch the device."""

    exported = 0

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, **kwargs):
        type(self).exported += 1
        raise AssertionError("a device scalar was exported")


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


class _FakeDeviceArray:
    """Device memory as a CUDA array interface (nothing reads it: overlap checks use addresses)."""

    def __init__(self, ptr, shape, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides, "typestr": "<f4", "data": (ptr, False), "version": 3}


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


ml_dtypes = pytest.importorskip("ml_dtypes")


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _refusals(a, b, c, out):
    yield "alpha", dict(alpha=float("nan")), pg.ArgumentError
    yield "beta", dict(beta=1j), pg.ArgumentError
    yield "variant", dict(variant="BLAS"), pg.UnsupportedProblemError
    yield "device", dict(device="cuda"), pg.BackendUnavailableError
    yield "device index", dict(device="cpu:1"), pg.BackendUnavailableError
    yield "device type", dict(device=0), pg.ArgumentError
    yield "out_dtype", dict(out_dtype=np.float64), pg.DTypeError
    yield "out_dtype unreadable", dict(out_dtype="bogus"), pg.DTypeError
    yield "mixed dtypes", dict(b=b.astype(np.float64)), pg.DTypeError
    yield "int a", dict(a=a.astype(np.int32)), pg.DTypeError
    yield "inner dimension", dict(b=b[:-1]), pg.ShapeError
    yield "c shape", dict(c=c[:, :-1]), pg.ShapeError
    yield "c dtype", dict(c=c.astype(np.float64)), pg.DTypeError
    yield "out overlaps a", dict(a=out[:, :a.shape[1]]), pg.ArgumentError


def test_big_endian_out_is_written_as_numpy_writes_it(rng):
    """An out of the other byte order (as read from a file) is written through a native stand-in, keeping its
    byte order; of the wrong dtype it is refused as a native out would be, untouched."""
    a, b, c = rand(rng, (4, 3)), rand(rng, (3, 2)), rand(rng, (4, 2))
    for out in (np.zeros((4, 2), ">f4"), np.zeros((4, 4), ">f4")[:, ::2]):
        assert pg.gemm(a, b, out=out, device="cpu") is out and out.dtype.str == ">f4"
        assert_within(out, a, b)
        out[...] = c
        assert pg.gemm(a, b, out, beta=1.0, out=out, device="cpu") is out
        assert_within(out, a, b, c, 1.0, 1.0)
    wrong = np.full((4, 2), 3, ">i4")
    with pytest.raises(pg.DTypeError, match="the result dtype must be float32; got out int32"):
        pg.gemm(a, b, out=wrong, device="cpu")
    assert (wrong == 3).all()


def test_a_view_of_c_as_out_is_in_place_and_its_plan_is_not_reused_for_a_separate_out(rng):
    # the cache key counts a call as in place when out is a view of c too, not only when out *is* c: out=c.view() is
    # in place, as the plan says, and a later call with an out separate from c does not reuse its plan (nor the
    # reverse)
    a, b, c = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5), _rand(rng, np.float32, 4, 5)
    for order in ("view first", "separate first"):
        pg.clear_plan_cache()
        runs = [("view", None), ("separate", None)] if order == "view first" else [("separate", None), ("view", None)]
        for kind, _ in runs:
            cc = c.copy()
            out = cc.view() if kind == "view" else np.full_like(c, np.nan)
            got = pg.gemm(a, b, cc, beta=1.0, out=out)
            lp = pg.last_plan()
            assert got is out and check_result(out, a, b, c, 1.0, 1.0).ok
            assert lp.problem.in_place is (kind == "view"), (order, kind)
            assert ("in place: out is c" in str(lp)) is (kind == "view")
            if kind == "separate":
                assert np.array_equal(cc, c)  # c untouched
    # repeated view calls still compute in place correctly (and refuse a partial overlap)
    cc = c.copy()
    pg.gemm(a, b, cc, beta=1.0, out=cc[...])
    assert check_result(cc, a, b, c, 1.0, 1.0).ok
    big = np.zeros((5, 5), np.float32)
    with pytest.raises(ArgumentError, match="partly overlaps c"):
        pg.gemm(a, b, big[:4], beta=1.0, out=big[1:])


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


def test_out_of_the_wrong_batch_shape_dtype_or_strides_is_refused_and_untouched(rng):
    a, b = rand(rng, (2, 3, 5, 4)), rand(rng, (2, 3, 4, 6))
    c = rand(rng, (2, 3, 5, 6))
    cases = [
        (_sentinel((3, 2, 5, 6)), ShapeError, r"out must have the result's shape \(2, 3, 5, 6\); got \(3, 2, 5, 6\)"),
        (_sentinel((5, 6)), ShapeError, r"out must have the result's shape \(2, 3, 5, 6\); got \(5, 6\)"),
        (_sentinel((2, 3, 1, 5, 6)), ShapeError, r"out must have the result's shape"),
        (_sentinel((2, 3, 5, 6), np.float64), DTypeError, r"the result dtype must be float32; got out float64"),
        (_sentinel((2, 3, 5, 6), BF16), DTypeError, r"the result dtype must be float32; got out bfloat16"),
        # strides no kernel writes do not hide a wrong shape or dtype: refused as a C-ordered out would be
        (_sentinel((2, 3, 5, 12), np.float64)[..., ::2], DTypeError, r"the result dtype must be float32; got out float64"),
        (_sentinel((3, 2, 5, 6), order="F"), ShapeError, r"out must have the result's shape \(2, 3, 5, 6\)"),
    ]
    for out, err, says in cases:
        before = out.copy()
        for kw in ({}, {"c": c, "beta": 1.0}):
            with pytest.raises(err, match=says):
                pg.gemm(a, b, out=out, device="cpu", **kw)
        assert np.array_equal(out, before)


def test_out_whose_batch_no_stride_walks_is_written_and_one_matrix_for_all_refused(rng):
    """out with swapped batch axes is written as numpy.matmul writes it (through a C-ordered stand-in); one matrix
    for the whole batch (zero strides) is refused, naming its shape and strides and what to pass, not "pass a
    contiguous array (e.g. ascontiguousarray)": a copy of out, which would get the result while out did not.
    Nothing is written."""
    a, b = rand(rng, (2, 3, 5, 4)), rand(rng, (2, 3, 4, 6))
    swapped = _sentinel((3, 2, 5, 6)).swapaxes(0, 1)
    assert pg.gemm(a, b, out=swapped, device="cpu") is swapped
    assert_within(swapped, a, b)
    repeated = np.lib.stride_tricks.as_strided(_sentinel((5, 6)), (2, 3, 5, 6), (0, 0, 24, 4), writeable=True)
    for out in (repeated,):
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
    with pytest.raises(DTypeError, match=r"or ask for a float32 result with out_dtype=np.float32 \(where the device writes one: cpu, cuda\)"):
        pg.gemm(a, b, c32, beta=1.0, device="cpu")
    assert (out32 == -7.0).all() and (out16 == -7.0).all()
    # what is accepted: out alone, out_dtype alone, both the same, c of the result's dtype
    for kw in ({"out": out32}, {"out_dtype": "float32"}, {"out": out32, "out_dtype": np.float32}):
        got = pg.gemm(a, b, c32, alpha=0.5, beta=2.0, device="cpu", **kw)
        assert got.dtype == np.float32 and ("out" not in kw or got is out32)
        assert_within(got, a, b, c32, 0.5, 2.0, out_dtype=np.float32)
    plan = pg.explain(a, b, c32, beta=2.0, out=out32, device="cpu")
    assert "float16 -> float32" in str(plan) and plan.problem.out_dtype == np.float32


def test_a_random_mix_of_batched_calls_matches_the_reference(rng):
    """Random batch shapes (broadcast or not), dtypes, out_dtype, c and out views (stepped,
    reversed, transposed), in place or not, and variants: every result assert_array_within the bound, out
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


@pytest.mark.parametrize("kw", [
    {"alpha": "2"}, {"alpha": 1 + 0j}, {"beta": np.complex64(1)}, {"alpha": True}, {"alpha": None},
    {"out": [[0.0] * 4] * 2}, {"out": memoryview(np.empty((2, 4), np.float32))}, {"variant": None}, {"variant": 3},
], ids=["str", "complex", "np-complex", "bool", "None", "list-out", "memoryview-out", "variant-None", "variant-int"])
def test_an_argument_of_the_wrong_kind_is_a_type_error_naming_it(kw):
    # numpy.matmul(a, b, out=[...]) and NumPy's arithmetic with a string or a complex raise TypeError, so these are
    # TypeErrors too: a caller's "except TypeError" (written for NumPy) catches them
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    name = next(iter(kw))
    with pytest.raises(TypeError, match=rf"^{name} must be") as info:
        pg.gemm(a, b, device="cpu", **kw)
    assert isinstance(info.value, pg.ArgumentTypeError) and isinstance(info.value, ArgumentError)
    assert isinstance(info.value, ValueError)  # still a ValueError too
    if name == "out":
        with pytest.raises(TypeError):
            np.matmul(a, b, out=kw["out"])  # NumPy's own kind of error for it


def test_values_that_are_wrong_stay_value_errors_only():
    a = np.ones((2, 2), np.float32)
    for kw in ({"alpha": float("nan")}, {"beta": float("inf")}, {"variant": ""}, {"alpha": 10 ** 400}):
        with pytest.raises(ValueError) as info:
            pg.gemm(a, a, a, device="cpu", **kw)
        assert not isinstance(info.value, TypeError), kw
    for x, y in ((None, a), (a, None)):
        with pytest.raises(TypeError, match="must be a vector, a matrix"):
            pg.matmul(x, y, device="cpu")
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        pg.matmul(np.ones(2, np.float32), np.ones(2, np.float32), out=np.float32(0), device="cpu")


def test_fortran_and_negative_stride_views_and_out_aliasing(rng):
    a = rng.standard_normal((5, 6)).astype(np.float64)
    b = rng.standard_normal((6, 4)).astype(np.float64)
    for x, y in ((np.asfortranarray(a), b), (a[::-1], b[:, ::-1]), (a[::-1, ::-1], b[::-1]), (a[:, ::2], b[::2])):
        x0, y0 = x.copy(), y.copy()
        assert_within(pg.gemm(x, y, device="cpu"), x0, y0)
        assert np.array_equal(x, x0) and np.array_equal(y, y0)
    # out aliasing a or b (transposed too) is refused, naming it, and nothing is written
    s = rng.standard_normal((4, 4)).astype(np.float32)
    s0 = s.copy()
    for kw in ({"out": s}, {"out": s.T}):
        with pytest.raises(ArgumentError, match="out overlaps"):
            pg.gemm(s, s0.copy(), device="cpu", **kw)
        with pytest.raises(ArgumentError, match="out overlaps b"):
            pg.gemm(s0.copy(), s, device="cpu", **kw)
    assert np.array_equal(s, s0)
    # interleaved rows of one buffer: a and out share no element, so it computes
    buf = rng.standard_normal((8, 4)).astype(np.float32)
    x, out = buf[0::2], buf[1::2]
    x0 = x.copy()
    assert pg.gemm(x, s0, out=out, device="cpu") is out
    assert_within(out, x0, s0) and np.array_equal(x, x0)


@pytest.mark.parametrize("text", ["1 2; 3 4", b"\x00\x00", bytearray(b"ab")])
def test_text_as_an_operand_is_a_type_error_naming_it_not_advice_to_reshape(text):
    # numpy.matmul raises a TypeError for text: gemm("1 2; 3 4", b) and matmul do too, naming the operand, with no
    # advice to reshape a 0-D array or to scale with a * b (polygemm/problem.py _host_operand, polygemm/api.py matmul)
    m = np.ones((2, 2))
    out = np.full((2, 2), 7.0)
    for call, name in [(lambda: pg.gemm(text, m, out=out), "a"), (lambda: pg.gemm(m, text, out=out), "b"),
                       (lambda: pg.gemm(m, m, text, beta=1.0, out=out), "c"), (lambda: pg.matmul(text, m), "a"),
                       (lambda: pg.matmul(m, text, out=out), "b")]:
        with pytest.raises(TypeError) as info:
            call()
        assert isinstance(info.value, ArgumentTypeError)
        assert str(info.value).startswith(f"{name} must be a ") and type(text).__name__ in str(info.value)
        assert "reshape" not in str(info.value) and "scalar" not in str(info.value)
    assert (out == 7.0).all()
    with pytest.raises(TypeError):  # as numpy.matmul does
        np.matmul(np.asarray("1 2; 3 4"), m)


def test_an_out_of_a_castable_dtype_is_told_what_to_pass_and_how_to_cast_into_it():
    # numpy.matmul casts into a float64 out for float32 inputs; polygemm writes out in the result's dtype only, so the
    # refusal says what to pass and how to cast into it
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.full((2, 2), -1.0)
    with pytest.raises(DTypeError, match=r"the result dtype must be float32; got out float64: pass an out of float32, "
                                         r"or omit out and cast the result into yours \(out\[\.\.\.\] = result\)"):
        pg.gemm(a, a.T, out=out, device="cpu")
    assert (out == -1.0).all()  # untouched
    out[...] = pg.gemm(a, a.T, device="cpu")  # the way it names
    assert np.array_equal(out, np.matmul(a, a.T, out=np.empty((2, 2))))
    with pytest.raises(DTypeError, match=r"pass an out of float16 \(or float32, where the device writes it: cpu, cuda\)"):
        pg.matmul(a.astype(np.float16), np.ones(3, np.float16), out=np.empty(2), device="cpu")


def test_an_out_dtype_the_inputs_do_not_give_is_told_to_cast_the_inputs():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(DTypeError, match=r"got out_dtype float64: omit out_dtype, or cast a and b to float64"):
        pg.gemm(a, a.T, out_dtype=np.float64, device="cpu")
    got = pg.gemm(a.astype(np.float64), a.T.astype(np.float64), device="cpu")  # the way it names
    assert got.dtype == np.float64 and (got == 3.0).all()


def test_half_inputs_with_a_float32_out_or_out_dtype_give_numpys_float32_product(rng):
    a, b = rng.standard_normal((4, 5)).astype(np.float16), rng.standard_normal((5, 3)).astype(np.float16)
    want = np.matmul(a, b, dtype=np.float32)
    out = np.empty((4, 3), np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    got = pg.matmul(a, b, out_dtype=np.float32, device="cpu")
    assert got.dtype == np.float32 and np.allclose(got, want, rtol=1e-3) and np.allclose(out, want, rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_vector_dot_vector_writes_a_zero_d_out_in_place(dtype):
    """numpy.matmul(v, w, out=np.empty(())) writes the 0-D out; polygemm.matmul too, and returns it."""
    v, w = np.arange(1, 4, dtype=dtype), np.arange(4, 7, dtype=dtype)
    out = np.full((), -1, dtype)
    assert pg.matmul(v, w, out=out, device="cpu") is out and out.shape == () and out == np.matmul(v, w) == 32
    out = np.full((), -1, np.float32 if dtype == np.float16 else dtype)
    assert pg.matmul(v, w, out=out, device="cpu") is out and out == 32  # float16 vectors into a float32 0-D out
    for wrong in (np.full(1, -1, dtype), np.full((1, 1), -1, dtype)):  # numpy broadcasts into (1,); polygemm refuses
        with pytest.raises(ShapeError, match=r"out must have the result's shape \(\)"):
            pg.matmul(v, w, out=wrong, device="cpu")
        assert (wrong == -1).all()


def test_explain_with_out_writes_nothing_and_refuses_what_gemm_refuses():
    """explain(..., out=o) plans the call gemm would make and leaves o as it was; an out gemm refuses is refused by
    explain with the same error."""
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    c = np.full((3, 2), 5.0, np.float32)
    out = np.full((3, 2), -7.0, np.float32)
    plan = pg.explain(a, b, c, beta=1.0, out=out, device="cpu")
    assert plan.backend == "cpu" and (out == -7.0).all() and (c == 5.0).all()
    plan = pg.explain(a, b, c, beta=1.0, out=c, device="cpu")  # in place: still nothing written
    assert (c == 5.0).all()
    ro = np.zeros((3, 2), np.float32)
    ro.flags.writeable = False
    for bad, err in ((np.empty((2, 3), np.float32), ShapeError), (np.empty((3, 2)), DTypeError), (ro, ArgumentError),
                     (a[:, :2], ArgumentError)):  # a view of a as out: it overlaps a
        with pytest.raises(err) as e1:
            pg.explain(a, b, out=bad, device="cpu")
        with pytest.raises(err) as e2:
            pg.gemm(a, b, out=bad, device="cpu")
        assert str(e1.value) == str(e2.value)
    assert pg.gemm(a, b, c, beta=1.0, out=out, device="cpu") is out and (out == 9.0).all()


@pytest.mark.parametrize("sa, sb", [
    ((3,), (3, 4)), ((2, 3), (3,)), ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
    ((1, 2, 3), (7, 3, 4)), ((0, 3), (3, 4)), ((2, 0), (0, 4)), ((0,), (0, 4)), ((2, 0), (0,)),
    ((0, 2, 3), (3, 4)), ((2, 3), (0, 3, 4)), ((5, 0, 3), (3,)), ((3,), (0, 3, 4)), ((3,), (2, 3, 0)), ((0,), (2, 0, 3)),
])
def test_matmul_edge_shapes_match_numpy_with_and_without_out(sa, sb):
    """shapes, dtype and values of numpy.matmul on vectors, broadcasting batches and empty dimensions; with
    out= of that shape (C-order, or a strided view for a vector result) the result is written into it and out is returned."""
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    want = np.matmul(a, b)
    got = pg.matmul(a, b, device="cpu")
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    out = np.full(want.shape, np.nan, np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out and np.allclose(out, want, rtol=1e-5, atol=1e-5)
    if want.ndim == 1:  # a vector result (a matrix out must be row- or column-major: README, "out is never a copy")
        big = np.full(want.shape[:-1] + (2 * want.shape[-1],), np.nan, np.float32)
        view = big[..., ::2]  # a strided out, as numpy.matmul writes it
        assert pg.matmul(a, b, out=view, device="cpu") is view and np.allclose(view, want, rtol=1e-5, atol=1e-5)
        assert np.isnan(big[..., 1::2]).all()  # nothing written between its elements


def test_explain_with_c_and_out_plans_the_call_gemm_then_reuses():
    """explain(a, b, c, beta, out=...) is cached for the gemm that follows, in place or not; the plan says
    so, and both calls count in plan_cache_info()."""
    pg.clear_plan_cache()
    a, b = _ones(2, 3), _ones(3, 4)
    c, out = np.full((2, 4), 5.0, np.float32), np.zeros((2, 4), np.float32)
    p = pg.explain(a, b, c, beta=2.0, out=out, device="cpu")
    assert not p.cached and not p.problem.in_place and p.problem.beta == 2.0 and (out == 0).all()
    assert pg.gemm(a, b, c, beta=2.0, out=out, device="cpu") is out and (out == 13.0).all()
    assert pg.last_plan().cached and not pg.last_plan().problem.in_place
    p = pg.explain(a, b, c, beta=3.0, out=c, device="cpu")  # in place: another plan
    assert not p.cached and p.problem.in_place and (c == 5.0).all()
    assert pg.gemm(a, b, c, beta=3.0, out=c, device="cpu") is c and (c == 18.0).all()
    lp = pg.last_plan()
    assert lp.cached and lp.problem.in_place and lp.problem.beta == 3.0
    assert pg.plan_cache_info() == {"hits": 2, "misses": 2, "size": 2, "maxsize": api.plan_cache.PLAN_CACHE_SIZE}


@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, None), (np.float64, None), (np.float16, np.float32)])
def test_an_array_api_array_gives_its_own_kind_and_out_is_written(dtype, out_dtype):
    """README: "JAX and other DLPack arrays through their library's from_dlpack": the result is the operands' kind, of
    the dtype asked; an ``out`` of that kind is written and is what comes back; a read-only input is read; a
    read-only out is refused and left as it was."""
    import array_api_compat

    a = np.arange(6, dtype=dtype).reshape(2, 3)
    b = np.ones((3, 4), dtype)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(out_dtype or dtype)
    res = pg.gemm(ApiArray(a), ApiArray(b), out_dtype=out_dtype, device="cpu")
    assert type(res) is ApiArray and array_api_compat.array_namespace(res) is API
    assert res.dtype == (out_dtype or dtype) and np.array_equal(np.from_dlpack(res), want)
    out = ApiArray(np.zeros((2, 4), out_dtype or dtype))
    assert pg.gemm(ApiArray(a), ApiArray(b), out=out, device="cpu") is out and np.array_equal(out._x, want)
    ro = a.copy()
    ro.flags.writeable = False
    assert np.array_equal(np.from_dlpack(pg.gemm(ApiArray(ro), ApiArray(b), out_dtype=out_dtype, device="cpu")), want)
    locked = np.full((2, 4), 7, out_dtype or dtype)
    locked.flags.writeable = False
    with pytest.raises(ArgumentError, match="a writeable CPU DLPack array"):
        pg.gemm(ApiArray(a), ApiArray(b), out=ApiArray(locked), device="cpu")
    assert (locked == 7).all()
    plan = pg.explain(ApiArray(a), ApiArray(b), out_dtype=out_dtype, device="cpu")
    assert plan.problem.dtype == dtype and plan.problem.out_dtype == (out_dtype or dtype)


@pytest.mark.parametrize("out_dtype, name", [(int, "int64"), (np.complex64, "complex64"), ("int8", "int8"),
                                             (bool, "bool"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn")])
def test_an_out_dtype_polygemm_never_computes_is_not_told_to_cast_a_and_b_to_it(out_dtype, name):
    # out_dtype=int: a cast of float32 a and b to int64 would change their values (float8: no dtype polygemm computes):
    # the error names the cast of the result; complex64 holds every float32: there a and b may be cast to it
    a = _ones(2, 3)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, a.T, out_dtype=out_dtype, device="cpu")
    msg = str(info.value)
    assert f"got out_dtype {name}" in msg and isinstance(info.value, TypeError)
    if name == "complex64":
        assert "cast a and b to complex64" in msg
    else:
        assert "cast a and b" not in msg and f"result.astype({name!r})" in msg
        assert ("no dtype polygemm computes" if name == "float8_e4m3fn" else "would change their values") in msg
    assert pg.gemm(a, a.T, device="cpu").astype(name).dtype == np.dtype(name)  # the cast it names works
    with pytest.raises(DTypeError) as info:  # a narrower dtype it computes: the result's cast, not a rounding of a and b
        pg.gemm(a, a.T, out_dtype=np.float16, device="cpu")
    assert "result.astype('float16')" in str(info.value) and "cast a and b to float16" not in str(info.value)
    with pytest.raises(DTypeError, match="cast a and b to float64 to compute in it"):  # a wider one: a and b cast up
        pg.gemm(a, a.T, out_dtype=np.float64, device="cpu")


@pytest.mark.parametrize("result_dtype, out_dtype, hinted", [
    (np.float16, np.float32, False),  # narrower than the out_dtype given: passing out_dtype= is no advice
    (np.float16, np.float64, False),
    (np.float32, None, True),  # a float32 result of float16 inputs: the one case out_dtype= fixes
])
def test_the_result_dtype_message_says_pass_out_dtype_only_where_it_applies(result_dtype, out_dtype, hinted):
    # "pass out_dtype=" is advice only to a caller who did not pass it: a plugin author who passed
    # out_dtype=np.float32 for a float16 result is told the result's dtype alone
    a = _ones(2, 2, dtype=np.float16)
    res = check_result(np.full((2, 2), 2, result_dtype), a, a, out_dtype=out_dtype)
    expected = np.dtype(out_dtype or np.float16).name
    assert not res.ok and res.message.startswith(f"result has dtype {np.dtype(result_dtype).name}, expected {expected}")
    assert ("pass out_dtype=" in res.message) is hinted
    assert ("(pass out_dtype=np.float32 for a result stored wider)" in res.message) is hinted


def test_matmul_takes_a_vector_of_an_array_api_library_without_a_reshape_method():
    # polygemm.matmul(v, M) takes v, a 1-D array of an array-API library (shape, ndim, DLPack and __array_namespace__;
    # the standard's reshape is xp.reshape, no method), as it takes the same vector without `ndim`
    # (conftest.DLPackOnly), read through DLPack: _dlpack_vector returns any object with an int ndim as it is, and
    # _unit_axis finds no .reshape on it
    import array_api_compat

    v = np.arange(3, dtype=np.float32)
    m = np.ones((3, 4), np.float32)
    res = pg.matmul(ApiArray(v), ApiArray(m), device="cpu")
    assert res.shape == (4,) and np.array_equal(np.from_dlpack(res), v @ m)
    assert array_api_compat.array_namespace(res) is API  # the operands' kind, as gemm gives it
    res = pg.matmul(ApiArray(m.T.copy()), ApiArray(v), device="cpu")
    assert res.shape == (4,) and np.array_equal(np.from_dlpack(res), m.T @ v)
    out = ApiArray(np.zeros(4, np.float32))
    assert pg.matmul(ApiArray(v), ApiArray(m), out=out, device="cpu") is out and np.array_equal(out._x, v @ m)


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
def test_out_layouts_no_kernel_writes_are_written_as_numpy_writes_them(rng, make, a_shape, b_shape):
    """NumPy writes an out of any strides; so does polygemm, through a C-ordered array of out's shape and dtype
    copied into out, and last_plan() says so (a C- or Fortran-ordered out saves the copy)."""
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    theirs = make()
    assert np.matmul(a, b, out=theirs) is theirs and np.allclose(theirs, a @ b)
    for f in (pg.gemm, pg.matmul):
        out = make()
        assert f(a, b, out=out, device="cpu") is out
        np.testing.assert_allclose(out, theirs, rtol=1e-12, atol=1e-12)
        assert any("C-ordered array of out's shape" in note for note in pg.last_plan().notes)


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


def test_matrix_at_vector_refuses_an_out_keeping_the_unit_dimension_as_numpy_does(rng):
    a, v = rng.standard_normal((3, 4)), rng.standard_normal(4)
    with pytest.raises(ValueError):
        np.matmul(a, v, out=np.empty((3, 1)))
    out = np.full((3, 1), SENTINEL)
    with pytest.raises(ShapeError, match=re.escape("out must have the result's shape (3,); got (3, 1)")):
        pg.matmul(a, v, out=out, device="cpu")
    assert (out == SENTINEL).all()


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


def test_a_fortran_ordered_stack_as_out_is_written_and_a_pointed_one_is_refused_with_what_would_do(rng):
    """np.empty((3, 4, 2), order="F") interleaves its matrices: written through a C-ordered stand-in. An array of
    another library polygemm makes no stand-in for (here a DLPack 1.0 producer) is refused, naming the matrices and
    a layout that is taken (not "pass a C- or Fortran-ordered array", which the user has just done)."""
    a, b = np.ones((3, 4, 5), np.float32), np.ones((5, 2), np.float32)
    out = np.full((3, 4, 2), 7.0, np.float32, order="F")
    assert pg.gemm(a, b, out=out, device="cpu") is out and (out == 5.0).all()
    out[...] = 7.0
    with pytest.raises(pg.ArgumentError, match=r"its matrices \(the last two axes\) are neither row- nor column-major") as exc:
        pg.gemm(a, b, out=Dlpack1(out, []), device="cpu")
    assert "pass a C- or Fortran-ordered array" not in str(exc.value)
    assert (out == 7.0).all()
    taken = np.empty((3, 2, 4), np.float32).swapaxes(-1, -2)  # the message's example
    assert pg.gemm(a, b, out=taken, device="cpu") is taken and (taken == 5.0).all()


@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
def test_beta_zero_with_k_zero_is_zeros_even_beside_a_nan_c(variant):
    """K = 0 gives beta * c; beta == 0 gives zeros without reading a NaN c (numpy.matmul gives the zeros)."""
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    c = np.full((3, 4), np.nan, np.float32)
    for out in (None, c):
        got = pg.gemm(a, b, c, alpha=5.0, beta=0.0, out=out, device="cpu", variant=variant)
        assert np.array_equal(got, np.matmul(a, b)) and not np.signbit(got).any()


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_bench_leaves_out_a_shape_too_large_for_memory_and_keeps_the_others(tmp_path, capsys, mode):
    """A shape whose operands cannot be allocated is left out of ``polygemm bench`` with the one line ``polygemm gemm
    --shape`` says of its size; the others are timed and written, and the run ends in an error naming it (exit 2),
    not a NumPy _ArrayMemoryError traceback that loses the shapes timed before it."""
    path = tmp_path / "r.json"
    argv = ["bench", "--device", "cpu", "--mode", mode, "--shapes", "8x8x8", TOO_LARGE, "9x7x5", "--repeats", "1",
            "--json", str(path), "--no-progress"] + (["--variants", "reference"] if mode == "kernel" else [])
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "MemoryError" not in err
    assert f"{TOO_LARGE} not timed: operands and a result of that size need about" in out
    assert err.strip().splitlines()[-1].startswith(f"polygemm: error: 1 shape not timed, too large for this machine: {TOO_LARGE}")
    assert "pick smaller --shapes (or --max-dim N)" in err
    records = json.loads(path.read_text())["records"]
    assert [(r["m"], r["n"], r["k"]) for r in records] == [(8, 8, 8), (9, 7, 5)]
    assert f"wrote {path}" in out


def test_matmul_refusals_beside_numpy_leave_out_alone(rng):
    """an ``out`` of the shape NumPy would also broadcast into (an extra leading 1) or of a batch missing is a
    ShapeError naming the result's shape (the README: out has the result's shape), written nowhere."""
    a, b = f32(rng, 2, 1, 3, 4), f32(rng, 1, 5, 4, 2)
    for shape in [(1, 2, 5, 3, 2), (5, 3, 2), (2, 5, 2, 3)]:
        out = np.full(shape, 7, np.float32)
        with pytest.raises(pg.ShapeError, match=r"out must have the result's shape \(2, 5, 3, 2\)"):
            pg.matmul(a, b, out=out, device="cpu")
        assert (out == 7).all()


def test_memmap_in_and_out(rng, tmp_path):
    """memmap operands (read-write or read-only) give a plain ndarray as numpy.matmul does; a memmap ``out`` is
    written in place and returned; a read-only memmap ``out`` is refused, as NumPy refuses it."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 5)
    mm = np.memmap(tmp_path / "a.bin", np.float32, "w+", shape=(3, 4))
    mm[:] = a
    mm.flush()
    ro = np.memmap(tmp_path / "a.bin", np.float32, "r", shape=(3, 4))
    for x in (mm, ro):
        got = pg.matmul(x, b, device="cpu")
        assert type(got) is type(np.matmul(x, b)) is np.ndarray
        assert_array_within(got, a, b)
    out = np.memmap(tmp_path / "o.bin", np.float32, "w+", shape=(3, 5))
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert_array_within(out, a, b)
    with pytest.raises(pg.ArgumentError, match="out is read-only"):
        pg.gemm(a, b[:, :4], out=ro, device="cpu")
    np.testing.assert_array_equal(np.asarray(ro), a)


def test_out_offering_only_array_is_refused(rng):
    """an ``out`` that NumPy could only copy (``__array__`` alone) is a TypeError, as numpy.matmul's, and the
    memory behind it is not written."""
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    held = np.zeros((3, 2), np.float32)
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        pg.gemm(a, b, out=OnlyArray(held), device="cpu")
    assert not held.any()


def test_object_array_is_told_its_dtype_and_the_cast(rng):
    # an ndarray of dtype object (floats in it, as pandas' .values gives them) is told its dtype, the dtypes polygemm
    # supports and the casts that keep its elements: "a has dtype object; polygemm supports float16, float32 or float64 ...
    # Convert it to the dtype of its elements, e.g. a.astype(np.float64) for real numbers"
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    obj = a.astype(object)
    assert np.matmul(obj, b).dtype == object  # NumPy computes it; polygemm refuses it with a TypeError
    for call, name in [(lambda: pg.gemm(obj, b, device="cpu"), "a"), (lambda: pg.matmul(a, b.astype(object), device="cpu"), "b"),
                       (lambda: pg.matmul(obj[0], b, device="cpu"), "a")]:
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert isinstance(info.value, pg.DTypeError)
        assert msg.startswith(f"{name} has dtype object; polygemm supports float16, float32 or float64")
        assert f"{name}.astype(np.float64) for real numbers" in msg and f"{name}.astype(np.complex128)" in msg
    got = pg.gemm(obj.astype(np.float64), b, device="cpu")  # the advice, followed literally
    assert_array_within(got, a, b)
    c = np.zeros((3, 2))
    with pytest.raises(pg.DTypeError, match="^c has dtype object"):
        pg.gemm(a, b, c.astype(object), beta=1.0, device="cpu")
    # a list NumPy reads as objects (a None in it) is named as the list it is, with the dtypes polygemm takes
    with pytest.raises(pg.DTypeError, match=r"a is a list that NumPy reads as an object array; pass a numeric matrix of "
                                            r"float16, float32 or float64"):
        pg.gemm([[1.0, None]], np.ones((2, 2)), device="cpu")
    out = np.full((3, 2), 5.0)
    with pytest.raises(pg.DTypeError, match="^out has dtype object"):
        pg.gemm(a, b, out=np.zeros((3, 2), object), device="cpu")
    with pytest.raises(pg.DTypeError):
        pg.gemm(obj, b, c=out, beta=1.0, out=out, device="cpu")
    assert (out == 5.0).all()


def test_structured_field_and_unaligned_memory(rng):
    """a structured array's field (12-byte steps between 4-byte floats) is read through one copy, and written as
    ``out`` through one, its other field untouched; unaligned float32 memory (an offset of one byte) is read and
    written as it is, in place (``c=out``) too."""
    a, b, c = f32(rng, 3, 4), f32(rng, 4, 5), f32(rng, 3, 5)
    rec = np.zeros((3, 4), dtype=[("x", np.float32), ("y", np.float64)])
    rec["x"] = a
    assert_array_within(pg.gemm(rec["x"], b, device="cpu"), a, b)
    orec = np.zeros((3, 5), dtype=[("x", np.float32), ("y", np.float64)])
    orec["y"] = 9.0
    field = orec["x"]
    assert pg.gemm(a, b, out=field, device="cpu") is field
    assert_array_within(orec["x"], a, b)
    assert (orec["y"] == 9.0).all()

    def unaligned(shape):
        buf = np.zeros(int(np.prod(shape)) * 4 + 1, np.uint8)
        x = buf[1:].view(np.float32).reshape(shape)
        assert not x.flags.aligned
        return x

    ua = unaligned((3, 4))
    ua[:] = a
    assert_array_within(pg.gemm(ua, b, device="cpu"), a, b)
    uo = unaligned((3, 5))
    assert pg.gemm(a, b, out=uo, device="cpu") is uo
    assert_array_within(uo, a, b)
    uo[:] = c
    assert pg.gemm(a, b, uo, beta=1.0, out=uo, device="cpu") is uo
    assert_array_within(uo, a, b, c, 1.0, 1.0)


def test_vector_results_out_whose_batch_no_stride_walks(rng):
    # vector @ stack into a Fortran-ordered out of numpy.matmul's shape (2, 5, 2) is told of the out given, not of the
    # matrix view matmul makes of it ((2, 5, 1, 2), a shape matmul would then refuse)
    v, b = f32(rng, 4), f32(rng, 2, 5, 4, 2)
    out = np.full((2, 5, 2), 3.0, np.float32, order="F")
    np.matmul(v, b, out=out)  # NumPy writes it; so does polygemm, through a C-ordered stand-in
    out[...] = 3.0
    assert pg.matmul(v, b, out=out, device="cpu") is out
    assert_matmul_within(out, v, b)
    out[...] = 3.0  # a DLPack out too (matmul writes it through NumPy's view of it)
    pg.matmul(v, b, out=Dlpack1(out, []), device="cpu")
    assert_matmul_within(out, v, b)
    fixed = np.empty((2, 5, 2), np.float32)  # the advice, followed literally
    assert pg.matmul(v, b, out=fixed, device="cpu") is fixed
    assert_matmul_within(fixed, v, b)
    # the other side (stack @ vector) into a Fortran-ordered out: one stride walks it, written as it is
    a = f32(rng, 2, 5, 4)
    fo = np.empty((2, 5), np.float32, order="F")
    assert pg.matmul(a, v, out=fo, device="cpu") is fo
    assert_matmul_within(fo, a, v)
    # an out a matrix product's batch cannot be walked in: named as given
    a3 = f32(rng, 2, 3, 4)
    o3 = np.asfortranarray(np.full((2, 3, 5), 1.0, np.float32))
    with pytest.raises(pg.ArgumentError, match=r"^out has strides \(4, 8, 24\)"):
        pg.matmul(a3, f32(rng, 4, 5), out=Dlpack1(o3, []), device="cpu")
    assert (o3 == 1.0).all()


def test_dlpack_1_0_out_is_written_in_place(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    target = np.full((3, 5), np.nan, np.float32)
    pg.gemm(a, b, out=Dlpack1(target, []), device="cpu")
    assert_array_within(target, a, b)


@pytest.mark.parametrize("kind", [StreamOnly, NoArgs])
def test_pre_1_0_dlpack_out_is_refused_saying_why(rng, kind):
    # a writeable array whose producer speaks only DLPack before 1.0 (older torch and JAX) is refused as out saying
    # why: it is writeable, but the old protocol's export has no read-only flag, so NumPy reads it read-only
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    target = np.full((3, 5), 7.0, np.float32)
    with pytest.raises(ArgumentError, match=r"out \(\w+\) offers only DLPack's pre-1\.0 export \(its __dlpack__ takes no "
                                            r"max_version\).*pass a NumPy array"):
        pg.gemm(a, b, out=kind(target, []), device="cpu")
    assert np.all(target == 7.0)


def test_read_only_dlpack_1_0_out_keeps_its_message(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    ro = np.full((3, 5), 7.0, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="a writeable CPU DLPack array"):
        pg.gemm(a, b, out=Dlpack1(ro, []), device="cpu")
    assert np.all(ro == 7.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=lambda d: d.name)
def test_out_dtype_for_every_pair_with_c_and_out(rng, dtype, out_dtype):
    """README: half precision may be stored as float32 (out_dtype, then c is float32 too); every other result dtype is
    the operands'. A refused pair leaves out and c as they were."""
    a = rng.standard_normal((5, 6)).astype(dtype)
    b = rng.standard_normal((6, 4)).astype(dtype)
    c = rng.standard_normal((5, 4)).astype(out_dtype)
    out = np.full((5, 4), 3.0, out_dtype)
    c0 = c.copy()
    ok = out_dtype == dtype or (dtype.name in ("float16", "bfloat16") and out_dtype == np.float32)
    if ok:
        got = pg.gemm(a, b, c, alpha=0.5, beta=-1.5, out=out, out_dtype=out_dtype, device="cpu")
        assert got is out and got.dtype == out_dtype
        assert_array_within(got, a, b, c0, 0.5, -1.5, out_dtype=out_dtype)
        assert np.array_equal(c, c0)
        new = pg.gemm(a, b, out_dtype=out_dtype, device="cpu")
        assert new.dtype == out_dtype
        assert_array_within(new, a, b, out_dtype=out_dtype)
    else:
        with pytest.raises(DTypeError, match=f"the result dtype must be {dtype.name}.*got out(_dtype)? {out_dtype.name}: "):
            pg.gemm(a, b, c, alpha=0.5, beta=-1.5, out=out, out_dtype=out_dtype, device="cpu")
        with pytest.raises(DTypeError):
            pg.gemm(a, b, c, beta=1.0, out=c, out_dtype=out_dtype, device="cpu")  # in place: refused, c kept
        assert np.all(out == 3.0) and np.array_equal(c, c0)


def test_compile_out_a_folder_where_no_file_can_be_made_is_refused_before_building(capsys, monkeypatch, no_file_folder):
    # `polygemm compile --out /proc`: the folder exists but takes no file, so it is tried before any build, not found
    # out at the first cubin written after building the whole catalog
    from polygemm.apps import compile as compile_cmd

    monkeypatch.setattr(compile_cmd, "_one", lambda *a, **k: pytest.fail("built into an unwritable --out"))
    rc, out, err = cli(capsys, ["compile", "--out", no_file_folder, "--only", "copy_scale"])
    assert rc == 2 and "Traceback" not in err, (rc, out, err)
    assert f"--out {no_file_folder}: no file can be made in that folder" in err


@pytest.mark.parametrize("field, value, said", [
    ("m", -5, "m=-5"), ("k", -1, "k=-1"), ("repeats", -3, "repeats=-3"),
    ("n", 10**400, "n=100000000000... (401 digits)"), ("m", 2**63, "m=9223372036854775808"),
])
def test_plot_refuses_counts_out_of_range(capsys, tmp_path, field, value, said):
    # a negative dimension is refused, not drawn as an empty product (or, two of them, plotted as a positive one), and
    # a dimension of 10**400 is refused, not an OverflowError traceback
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [bench_record(**{field: value})]}))
    rc, out, err = cli(capsys, ["plot", str(src)])
    assert rc == 2 and "Traceback" not in err, (rc, out, err)
    assert f"record 1 has {said}; polygemm bench --json writes a whole number from 0 to 2**63 - 1 there" in err


def test_out_of_too_few_dimensions_keeps_the_reshape_hint(rng):
    """A 1-D out of the result's size is told to reshape it (out.reshape(2, 3) is a view of it)."""
    a = rng.standard_normal((2, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    out = np.zeros(6, np.float32)
    with pytest.raises(ShapeError, match=re.escape("out must be a matrix or a stack of matrices (at least 2-D); got 1-D with "
                                                   "shape (6,). Reshape it, e.g. out.reshape(rows, cols).")):
        pg.gemm(a, b, device="cpu", out=out)
    assert (out == 0).all()
    pg.gemm(a, b, device="cpu", out=out.reshape(2, 3))
    np.testing.assert_allclose(out.reshape(2, 3), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device, exc, words", [
    ("gpu", BackendUnavailableError, "unknown device 'gpu' (a GPU is 'cuda' (NVIDIA) or 'musa' (Moore Threads)"),
    ("cuda:0", BackendUnavailableError, "device 'cuda' is unavailable: no GPU (hidden by the test)"),
    ("cpu:1", BackendUnavailableError, "device 'cpu:1': backend 'cpu' has one device; use 'cpu'"),
    ("cuda:01", ArgumentError, "a device index is a whole number >= 0 written in ASCII digits"),
    (b"cpu", ArgumentTypeError, "device must be a backend name"),
    (0, ArgumentTypeError, "device must be a backend name"),
])
def test_device_spellings_refused_leave_out_untouched(device, exc, words, without_gpu):
    """What a user types for a GPU, an index too many, bytes or an int: refused, out untouched."""
    a = np.ones((2, 3), np.float32)
    out = np.full((2, 2), 4.0, np.float32)
    with pytest.raises(exc) as info:
        pg.gemm(a, a.T, device=device, out=out)
    # an unknown or unavailable device is a BackendUnavailableError, a RuntimeError (as errors.py documents it and as
    # torch.device("gpu") raises one); a malformed one a ValueError or TypeError
    assert words in str(info.value) and isinstance(info.value, (ValueError, TypeError) if exc is not BackendUnavailableError
                                                   else RuntimeError)
    assert (out == 4.0).all()


def test_matmul_takes_numpys_one_tuple_out_and_gemm_says_how():
    # numpy.matmul is a ufunc: out=(o,) is its tuple form and returns o; polygemm.matmul takes it too
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    o = np.zeros((2, 4), np.float32)
    assert np.matmul(a, b, out=(o,)) is o
    o[...] = 0
    assert pg.matmul(a, b, out=(o,)) is o and (o == 3).all()
    v = np.zeros(2, np.float32)  # matrix @ vector into a 1-D out given as a tuple
    assert pg.matmul(a, np.ones(3, np.float32), out=(v,)) is v and (v == 3).all()
    o[...] = 7
    with pytest.raises(TypeError, match=r"got tuple \(numpy.matmul's tuple form: pass the array itself, out=out\[0\]"):
        pg.gemm(a, b, out=(o,))
    assert (o == 7).all()
    # explain takes what matmul takes: the tuple's array is the out it describes, untouched
    assert pg.explain(a, np.ones(3, np.float32), out=(v,)).problem.m == 2 and (v == 3).all()
    assert pg.explain(a, b, out=(o,)).problem.out is not None and (o == 7).all()


@pytest.mark.parametrize("func", [pg.gemm, pg.matmul, pg.explain], ids=["gemm", "matmul", "explain"])
@pytest.mark.parametrize("word, hint", _KEYWORDS, ids=[w for w, _ in _KEYWORDS])
def test_another_librarys_keyword_is_told_polygemms_way(ops, func, word, hint):
    # beyond Python's TypeError "<func>() got an unexpected keyword argument '<word>'", each is told polygemm's way
    a, b = ops
    out = poisoned()
    with pytest.raises(TypeError) as info:
        func(a, b, out=out, **{word: 1})
    err = info.value
    assert isinstance(err, ArgumentTypeError) and isinstance(err, ValueError)
    msg = str(err)
    name = func.__name__
    assert msg.startswith(f"{name}() got an unexpected keyword argument '{word}'"), msg  # Python's words, kept
    assert re.search(hint, msg), msg
    assert "out_dtype=" in msg and "device=" in msg  # and what it takes
    assert (out == 7.0).all()


def test_an_unknown_keyword_with_no_likely_meaning_lists_what_is_taken(ops):
    # Python's message stops at the word; this one lists what gemm and matmul take
    a, b = ops
    with pytest.raises(ArgumentTypeError, match=r"^gemm\(\) got an unexpected keyword argument 'zzz'; it takes a, b and c by "
                                                r"position and the keywords alpha=, beta=, device=, variant=, out=, out_dtype=, precision=, verify=$"):
        pg.gemm(a, b, zzz=1)
    with pytest.raises(ArgumentTypeError, match=r"^matmul\(\) got an unexpected keyword argument 'zzz'; it takes a and b by "
                                                r"position and the keywords out=, out_dtype=, precision=, device=, verify=$"):
        pg.matmul(a, b, zzz=1)


def test_numpy_matmuls_positional_out_is_told_the_keyword(ops):
    # numpy.matmul(a, b, out) is legal; polygemm.matmul(a, b, out) is told that out is a keyword, not only how many
    # positional arguments it takes
    a, b = ops
    out = poisoned()
    with pytest.raises(ArgumentTypeError, match=r"^matmul\(\) takes 2 positional arguments but 3 were given: out is a keyword: "
                                                r"matmul\(a, b, out=out\)"):
        pg.matmul(a, b, out)
    assert (out == 7.0).all()
    assert pg.matmul(a, b, out=out) is out


def test_a_type_checker_still_refuses_the_misspelt_keywords(tmp_path):
    """mypy refuses gemm(a, b, dtype=...) and matmul(a, b, out) statically (the catch-alls are typed NoReturn), and
    accepts a correct call."""
    pytest.importorskip("mypy")
    src = tmp_path / "user.py"
    src.write_text(textwrap.dedent("""\
        import numpy as np
        import polygemm as pg
        a = np.ones((2, 2), np.float32)
        pg.gemm(a, a, dtype=np.float32)
        pg.matmul(a, a, a)
        pg.gemm(a, a, None, alpha=2.0, out=np.empty((2, 2), np.float32))
        """))
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
                          str(src)], capture_output=True, text=True, timeout=300)
    lines = [ln for ln in run.stdout.splitlines() if ": error:" in ln]
    assert [ln.split(":")[1] for ln in lines] == ["4", "5"], run.stdout + run.stderr


def test_beta_with_out_and_no_c_says_out_may_be_c(ops):
    # cupy.cublas.gemm(..., out=C, beta=1) adds into out; polygemm.gemm(a, b, out=o, beta=1.0) needs c, and is told
    # that c may be that very array
    a, b = ops
    out = poisoned()
    with pytest.raises(ArgumentError, match=r"^beta=1\.0 needs c: pass c \(shape \(3, 5\)\) or set beta=0; to add into out's "
                                            r"values as cuBLAS's C does, pass out as c too: gemm\(a, b, out, beta=1\.0, out=out\)$"):
        pg.gemm(a, b, beta=1.0, out=out)
    assert (out == 7.0).all()
    assert pg.gemm(a, b, out, beta=1.0, out=out) is out  # the advice, followed
    np.testing.assert_allclose(out, a @ b + 7.0, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match=r"beta=1\.0 needs c.*pass c.*\(3, 5\).*beta=0"):
        pg.gemm(a, b, beta=1.0)  # without out: no word of it


def test_a_device_0d_array_is_told_float_and_never_exported(ops):
    # a 0-D device array (cupy.linalg.norm(x), a CUDA tensor) is told float(alpha), and polygemm exports nothing of it
    # (reading it would wait on the device behind the caller's back)
    a, b = ops
    out = poisoned()
    _DeviceScalar.exported = 0
    with pytest.raises(ArgumentTypeError, match=r"alpha is a 0-D \w+\._DeviceScalar whose value polygemm does not read .*"
                                                r"pass float\(alpha\)"):
        pg.gemm(a, b, alpha=_DeviceScalar(np.array(2.0)), out=out)
    assert _DeviceScalar.exported == 0 and (out == 7.0).all()


@pytest.mark.parametrize("kw, start, err", [
    ({"alpha": [1.0] * 10000}, "alpha must be a real number", ArgumentTypeError),
    ({"beta": [1.0] * 10000}, "beta must be a real number", ArgumentTypeError),
    ({"variant": ["blas"] * 10000}, "variant must be a variant name or 'auto'; got ['blas', ", ArgumentTypeError),
    ({"out_dtype": [np.float32] * 10000}, "out_dtype=[", DTypeError),
    ({"device": ["cpu"] * 10000}, "device must be a backend name", ArgumentTypeError),
], ids=["alpha", "beta", "variant", "out_dtype", "device"])
def test_an_error_quotes_a_large_value_cut_short(ops, kw, start, err):
    # each message held the value's whole repr (tens of thousands of characters)
    a, b = ops
    out = poisoned()
    for func in (pg.gemm, pg.explain):
        with pytest.raises(err) as info:
            func(a, b, out=out, **kw)
        msg = str(info.value)
        assert msg.startswith(start) and len(msg) < 400, (len(msg), msg[:200])
        assert "..." in msg
    assert (out == 7.0).all()


@pytest.mark.parametrize("od", [[], np.dtype([("x", "f4")]), "U3", object])
def test_a_non_numeric_out_dtype_is_refused_as_such(od):
    from polygemm.errors import DTypeError

    a = np.ones((2, 2), np.float32)
    with pytest.raises(DTypeError, match=r"out_dtype=.* is no numeric dtype.*pass float32") as ei:
        polygemm.gemm(a, a, out_dtype=od)
    assert "astype" not in str(ei.value)


def test_the_catalog_for_an_older_gpu_leaves_out_the_helpers_it_cannot_build():
    """`polygemm compile --arch sm_75` (a T4) builds every variant and leaves out mma_peak_probe, which needs sm_80:
    the helpers say the oldest architecture they build for."""
    from polygemm.apps.compile import jobs

    stems = {sm: {j.source.stem for j in jobs([sm])} for sm in (70, 75, 80, 90)}
    assert "ldmatrix_probe" not in stems[70] and "mma_peak_probe" not in stems[70]
    assert "ldmatrix_probe" in stems[75] and "mma_peak_probe" not in stems[75]
    assert {"ldmatrix_probe", "mma_peak_probe"} <= stems[80] and {"ldmatrix_probe", "mma_peak_probe"} <= stems[90]
    assert "copy_scale" in stems[70]  # the utility kernels build everywhere


def test_an_out_whose_matrices_overlap_is_refused_and_left_untouched():
    """An as_strided out whose batch matrices share rows is refused and left as it was: written, each matrix would
    race the others (608 of 960 elements wrong on the GPU, inconsistent on the CPU); two matrices interleaved
    without sharing are fine."""
    from numpy.lib.stride_tricks import as_strided

    from polygemm.errors import ArgumentError

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 20, 12)).astype(np.float32), rng.standard_normal((12, 16)).astype(np.float32)
    buf = np.full(20 * 16 + 2 * 16, 7.0, np.float32)
    out = as_strided(buf, (3, 20, 16), (16 * 4, 16 * 4, 4))
    with pytest.raises(ArgumentError, match="out's elements overlap in memory"):
        polygemm.gemm(a, b, out=out, device="cpu")
    assert (buf == 7.0).all()
    side_by_side = np.zeros((20, 32), np.float32)
    two = as_strided(side_by_side, (2, 20, 16), (16 * 4, 32 * 4, 4))  # matrix 1 in columns 16..31: no element shared
    assert polygemm.gemm(a[:2], b, out=two, device="cpu") is two
    np.testing.assert_allclose(side_by_side[:, 16:], a[1] @ b, rtol=1e-5, atol=1e-5)


def test_matmul_writes_a_vector_result_into_a_dlpack_only_out(rng):
    a, b = _operands(rng)
    target = np.full(4, np.nan, np.float32)
    out = DLPackOnly(target)
    assert pg.matmul(a, b[:, 0], out=out) is out
    np.testing.assert_allclose(target, a @ b[:, 0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError, match=r"out must have the result's shape \(4,\); got \(3,\)"):
        pg.matmul(a, b[:, 0], out=DLPackOnly(np.zeros(3, np.float32)))


def test_out_overlapping_a_reversed_device_batch_is_refused():
    # a device a with a negative batch stride (x[::-1]) addresses memory below its pointer: the overlap check measures
    # its span from there and refuses an out over its matrices before any backend (here none takes cuda data: past the
    # check the error would be BackendUnavailableError)
    from polygemm import api

    base = 1 << 20
    a = _FakeDeviceArray(base + 128, (3, 4, 4), (-64, 16, 4))  # matrices at base + 128, + 64, + 0
    b = _FakeDeviceArray(base + 4096, (4, 4))
    clash = _FakeDeviceArray(base - 64, (3, 4, 4))  # [base - 64, base + 128): a's last two matrices
    with pytest.raises(ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=clash, device="cuda")
    clear = _FakeDeviceArray(base + 8192, (3, 4, 4))
    problem = normalize(a, b, out=clear)
    entry = api.plan_cache._entry_for(pg.get_backend("cpu"), pg.Plan("cuda", "x", "test", problem.without_data()), problem, a)
    for out, free in ((clear, True), (clash, False)):
        key, views = api.plan_cache._key(a, b, None, out, 1.0, 0.0, "cuda", "auto")
        assert api.plan_cache._overlap_free(entry, a, b, None, out, views) is free


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_overflow_into_out_is_as_quiet_as_without_out(dtype):
    # without out the product overflows to inf silently (IEEE, as the reference); with out= too, though numpy.matmul
    # writing straight into out warns "overflow encountered in matmul", or raises FloatingPointError under
    # np.errstate(over="raise") after writing
    big = np.full((3, 3), np.finfo(dtype).max, dtype)
    want = pg.gemm(big, big)
    assert np.isinf(want).all()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = np.zeros((3, 3), dtype)
        assert pg.gemm(big, big, out=out) is out
        np.testing.assert_array_equal(out, want)
        with np.errstate(all="raise"):
            out = np.zeros((3, 3), dtype)
            pg.gemm(big, big, out=out)
            np.testing.assert_array_equal(out, want)
            np.testing.assert_array_equal(pg.matmul(big, big[:, 0], out=np.zeros(3, dtype)), want[:, 0])


@pytest.mark.parametrize("a, b", [
    (np.ones(2), [[1.0, 2.0], [3.0, 4.0]]),
    ([[1.0, 2.0], [3.0, 4.0]], np.ones(2)),
    ([1.0, 1.0], ((1.0, 2.0), (3.0, 4.0))),
    (np.ones(2), [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]),
])
def test_matmul_vector_beside_a_list_writes_into_out(a, b):
    # with out= a vector beside a list matrix is written into out, as numpy.matmul does: out's expected shape is read
    # off the array made of the list, not off the list
    want = np.matmul(np.asarray(a), np.asarray(b))
    out = np.full(want.shape, np.nan)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want)
    with pytest.raises(pg.ShapeError, match=re.escape(f"out must have the result's shape {want.shape}")):
        pg.matmul(a, b, out=np.zeros(want.shape + (1,)), device="cpu")


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.complex64, ml_dtypes.float8_e4m3fn], ids=lambda d: np.dtype(d).name)
def test_out_of_another_dtype_is_not_told_to_convert_itself(dtype):
    # "Convert it, e.g. out.astype(np.float32)", followed, would put the result into that copy and leave the user's
    # array as it was, silently: the error says to pass an out of the result's dtype
    a = np.ones((2, 3), np.float32)
    out = np.zeros((2, 2), dtype)
    said = r"out has dtype .*Pass an out of that dtype, e\.g\. np\.empty\(out\.shape, a\.dtype\)|pass an out of float32"
    with pytest.raises(pg.DTypeError, match=said) as info:
        pg.gemm(a, a.T, out=out, device="cpu")
    assert "out.astype" not in str(info.value) and not out.astype(np.float32).any()
    with pytest.raises(pg.DTypeError, match=said) as info:
        pg.matmul(a, np.ones(3, np.float32), out=np.zeros(2, dtype), device="cpu")
    assert "out.astype" not in str(info.value)


def test_a_masked_out_is_told_to_pass_its_data_not_a_filled_copy():
    # not "Fill it first, e.g. out.filled(0)": a copy, which would receive the result instead of out
    a = np.ones((2, 3), np.float32)
    out = np.ma.zeros((2, 2), np.float32)
    with pytest.raises(pg.ArgumentError, match=r"out is a masked array.*out\.data") as info:
        pg.gemm(a, a.T, out=out, device="cpu")
    assert "filled" not in str(info.value)
    data = out.data
    assert pg.gemm(a, a.T, out=data, device="cpu") is data
    assert (out == 3.0).all()


@pytest.mark.parametrize("make", [_Frame, memoryview], ids=["array-like", "memoryview"])
def test_matmul_vector_out_that_is_not_an_array_is_refused_not_left_unwritten(make):
    # matmul(matrix, vector, out=x) with an object whose __array__ is a copy would write the result into that copy and
    # hand x back unwritten, silently: x is refused, as gemm refuses it for a matrix result and numpy.matmul refuses
    # non-arrays ("return arrays must be of ArrayType")
    a, v = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    target = np.zeros(2, np.float32)
    out = make(target)
    with pytest.raises(TypeError):
        np.matmul(a, v, out=out)
    with pytest.raises(pg.ArgumentError, match=rf"out must be a NumPy array .*got {type(out).__name__}"):
        pg.matmul(a, v, out=out, device="cpu")
    assert not target.any()
    assert pg.matmul(a, v, out=target, device="cpu") is target and (target == 3.0).all()


def test_a_column_strided_stack_as_out_is_told_its_last_axis_stride():
    # out = np.empty((3, 2, 10))[..., ::2] is told of its last axis's stride, not of "an N-D Fortran-ordered array"
    a, b = np.ones((3, 2, 4)), np.ones((4, 5))
    out = np.full((3, 2, 10), 7.0)[..., ::2]
    with pytest.raises(pg.ArgumentError) as info:
        pg.gemm(a, b, out=Dlpack1(out, []), device="cpu")
    text = str(info.value)
    assert "Fortran" not in text
    assert "the last axis steps by 2 elements, the second-to-last by 10 elements" in text
    assert "np.empty((3, 2, 5), np.float64)" in text and "omit out" in text
    assert (out == 7.0).all()
    taken = np.empty((3, 2, 5))  # what the message says to pass
    assert pg.gemm(a, b, out=taken, device="cpu") is taken and (taken == 4.0).all()


@pytest.mark.parametrize("out, says", [
    (np.zeros((2, 10))[:, ::2], "the last axis steps by 2 elements, the second-to-last by 10 elements"),
    (np.zeros((2, 5))[:, ::-1], "the last axis steps by -1 element (reversed), the second-to-last by 5 elements"),
    (np.zeros((3, 2, 5))[:, ::-1], "the last axis steps by 1 element, the second-to-last by -5 elements (reversed)"),
    (np.zeros((3, 2, 5), order="F"), "the second-to-last by 3 elements (an N-D Fortran-ordered array interleaves its matrices)"),
])
def test_an_unwritable_out_is_told_what_its_strides_do(out, says):
    # the refusal names the stride at fault, beyond "pass a C- or Fortran-ordered array"
    a, b = np.ones(out.shape[:-1] + (4,)), np.ones((4, 5))
    with pytest.raises(pg.ArgumentError, match=r"its matrices \(the last two axes\) are neither row- nor column-major") as info:
        pg.gemm(a, b, out=Dlpack1(out, []), device="cpu")  # (a NumPy out of these strides is written through a copy)
    assert says in str(info.value)


@pytest.mark.parametrize("a, b, out", [
    (np.ones(6), np.ones((6, 5)), np.empty(5)[::-1]),
    (np.ones((4, 6)), np.ones(6), np.empty(4)[::-1]),
    (np.ones((3, 4, 6)), np.ones(6), np.empty((3, 4))[:, ::-1]),
])
def test_matmul_reversed_vector_out_is_written_as_numpy_writes_it(a, b, out):
    # a vector result into a reversed out: written through a C-ordered stand-in (numpy.matmul writes it too)
    want = np.matmul(a, b)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    # of the wrong dtype: the same error as a C-ordered out of that dtype gets
    with pytest.raises(pg.DTypeError, match="the result dtype must be float64; got out int32"):
        pg.matmul(a, b, out=np.zeros(out.shape[:-1] + (2 * out.shape[-1],), np.int32)[..., ::-2], device="cpu")


@pytest.mark.parametrize("scalar", [np.float32(0), np.float64(7), ml_dtypes.bfloat16(1)], ids=["f32", "f64", "bf16"])
def test_matmul_refuses_a_numpy_scalar_as_out(rng, scalar):
    # vector @ vector with out=np.float32(0) is refused, as numpy.matmul refuses it ("return arrays must be of
    # ArrayType"): the result would go into a reshaped copy of the scalar, which comes back unchanged
    dt = np.dtype(type(scalar))
    v, w = _f32(rng, 5).astype(dt), _f32(rng, 5).astype(dt)
    with pytest.raises(pg.ArgumentError, match=r"out must be a NumPy array .*got \w+ \(a NumPy scalar cannot be written; "
                                               r"pass np\.empty\(\(\), (np|ml_dtypes)\.\w+\)\)"):
        pg.matmul(v, w, out=scalar)
    with pytest.raises(TypeError):
        np.matmul(v, w, out=scalar)  # NumPy refuses it too
    out = np.empty((), dt)  # what the message says to pass: written, and returned
    assert pg.matmul(v, w, out=out) is out
    assert_close(out.reshape(1, 1), v[None, :], w[:, None])


@pytest.mark.parametrize("case", [name for name, _, _ in _refusals(*(np.ones((2, 2)),) * 4)])
@pytest.mark.parametrize("in_place", [False, True], ids=["out", "out-is-c"])
def test_a_refused_call_leaves_out_and_c_untouched(rng, monkeypatch, case, in_place, without_gpu):  # device="cuda" is a refusal there
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a, b = _f32(rng, 4, 3), _f32(rng, 3, 6)
    c = _f32(rng, 4, 6)
    out = c if in_place else _f32(rng, 4, 6)
    kept_c, kept_out = c.copy(), out.copy()
    kw, err = {name: (k, e) for name, k, e in _refusals(a, b, c, out)}[case]
    for _ in range(2):  # again after a good call of the same operands (its plan cached)
        call = dict(a=a, b=b, c=c, out=out, beta=0.5) | kw
        with pytest.raises(err):
            pg.gemm(call.pop("a"), call.pop("b"), **call)
        assert np.array_equal(c, kept_c) and np.array_equal(out, kept_out), case
        good = pg.gemm(a, b, kept_c.copy(), beta=0.5, out=np.empty_like(out))
        assert_close(good, a, b, kept_c, 1.0, 0.5)


@pytest.mark.parametrize("out", ["scalar", "wrong shape", "read-only", "list"])
def test_a_refused_vector_out_is_left_untouched(rng, out):
    m, v = _f32(rng, 3, 4), _f32(rng, 4)
    given = {"scalar": np.float32(5), "wrong shape": np.full(4, 5, np.float32),
             "read-only": np.full(3, 5, np.float32), "list": [5.0, 5.0, 5.0]}[out]
    if out == "read-only":
        given.setflags(write=False)
    with pytest.raises(ValueError):
        pg.matmul(m, v, out=given)
    assert np.all(np.asarray(given) == 5)


def test_an_out_whose_elements_share_memory_is_refused_and_untouched(rng):
    """as_strided steps smaller than a row (or zero) make elements share memory: one result would overwrite
    another, so no stand-in is made; the refusal says so and what to pass."""
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((5, 3))
    for out in (np.lib.stride_tricks.as_strided(np.zeros(10), (3, 3), (8, 8), writeable=True),
                np.lib.stride_tricks.as_strided(np.zeros(6), (4, 3), (0, 8), writeable=True)[:3]):
        before = out.copy()
        with pytest.raises(ArgumentError, match=r"its elements may share memory.*np\.empty\(\(3, 3\), np\.float64\)"):
            pg.gemm(a, b, out=out, device="cpu")
        assert np.array_equal(out, before)


def test_explain_describes_an_out_written_through_a_stand_in(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 6))
    out = np.zeros((4, 12))[:, ::2]
    plan = pg.explain(a, b, out=out, device="cpu")
    assert any("C-ordered array of out's shape" in note for note in plan.notes)
    assert not out.any()  # explain runs nothing


def test_a_verify_warning_for_an_out_written_through_a_stand_in_names_the_callers_line(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 6))
    with pytest.warns(pg.VerificationWarning) as caught:
        with inject_fault(0, 0, value=1e3):
            pg.gemm(a, b, out=np.zeros((4, 12))[:, ::2], verify="warn")
    assert caught[0].filename == __file__


def test_an_array_whose_class_takes_matmul_over_is_refused_naming_the_way():
    """An ndarray subclass with its own __array_ufunc__ (units, as astropy's Quantity keeps) gets numpy.matmul handed
    to it; one with __array_ufunc__ = None is refused by numpy.matmul. polygemm would compute on the bare values and
    drop what the class keeps: both are refused as a, b, c or out, whether or not a plan is cached."""

    class Units(np.ndarray):
        def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
            return "handled by Units"

    class NoUfuncs(np.ndarray):
        __array_ufunc__ = None

    a, b, o = np.ones((2, 3)), np.ones((3, 2)), np.zeros((2, 2))
    pg.gemm(a, b, out=np.zeros((2, 2)), device="cpu")  # a plan cached for plain arrays of these shapes
    assert np.matmul(a.view(Units), b) == "handled by Units"
    for cls, says in ((Units, r"takes numpy\.matmul over.*np\.asarray\(\w+\)"), (NoUfuncs, r"opts out of NumPy's ufuncs")):
        for kw in ({"a": a.view(cls)}, {"b": b.view(cls)}, {"c": o.view(cls)}, {"out": o.view(cls)}):
            args = {"a": a, "b": b, "c": None, "out": None} | kw
            with pytest.raises(ArgumentTypeError, match=says):
                pg.gemm(args["a"], args["b"], args["c"], out=args["out"], device="cpu")
    assert not o.any()


def test_an_array_like_that_opts_out_of_ufuncs_is_refused_as_numpy_matmul_refuses_it():
    """Not an ndarray at all, but a class with __array__ and __array_ufunc__ = None: numpy.matmul raises TypeError,
    and so does polygemm, as a, b or c, rather than multiply what __array__ gives."""
    values = np.ones((2, 2))

    class OptsOut:
        __array_ufunc__ = None

        def __array__(self, dtype=None, copy=None):
            return values

    with pytest.raises(TypeError):
        np.matmul(OptsOut(), values)
    for args in ((OptsOut(), values), (values, OptsOut()), (values, values, OptsOut())):
        with pytest.raises(ArgumentTypeError, match=r"OptsOut, which opts out of NumPy's ufuncs.*np\.asarray"):
            pg.gemm(*args, device="cpu")


def test_matmul_names_the_out_given_when_its_elements_may_share_memory():
    """A vector result into an out of a zero step is refused of that out (shape (2, 5)), not of the matrix view
    matmul makes of it ((2, 5, 1)), with an array of its own shape to pass."""
    a, v = np.ones((2, 5, 3), np.float32), np.ones(3, np.float32)
    out = np.lib.stride_tricks.as_strided(np.zeros(5, np.float32), (2, 5), (0, 4), writeable=True)
    with pytest.raises(ArgumentError, match=r"^out has shape \(2, 5\) and strides \(0, 4\).*np\.empty\(\(2, 5\), np\.float32\)"):
        pg.matmul(a, v, out=out, device="cpu")
    assert not out.any()
