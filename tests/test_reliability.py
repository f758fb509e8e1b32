"""Defects found in review (issue 17, items 3-9, 13, 16): each test failed before its fix.

CPU paths here; the musa items on the host flavor of libpolygemm_musa (CI builds it); the cuda
paths of the same items in tests/test_cuda.py (GPU machine).
"""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close, reference_for

from test_musa import musa, musa_library, rand16  # noqa: F401  (fixtures)


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# -- item 6: non-native byte order -------------------------------------------------------
@pytest.mark.parametrize("dtype", [">f4", ">f2", ">f8"])
def test_big_endian_inputs_are_read_as_values(rng, dtype):
    a = rand(rng, (9, 7)).astype(dtype)
    b = rand(rng, (7, 5)).astype(dtype)
    res = pg.gemm(a, b, device="cpu")
    native = np.dtype(dtype).newbyteorder("=")
    assert res.dtype == native
    assert_close(res, a.astype(native), b.astype(native))
    plan = pg.explain(a, b, device="cpu")
    assert any("a copied once" in c for c in plan.copies) and any("b copied once" in c for c in plan.copies)


def test_big_endian_out_is_refused_with_what_to_pass(rng):
    a, b = rand(rng, (4, 3)), rand(rng, (3, 2))
    out = np.empty((4, 2), ">f4")
    with pytest.raises(pg.DTypeError, match=r"out has non-native byte order .*float32"):
        pg.gemm(a, b, out=out, device="cpu")


def test_mixed_byte_order_message_does_not_contradict_itself(rng):
    a = rand(rng, (4, 3)).astype(">f4")
    b = rand(rng, (3, 2)).astype(np.float64)
    with pytest.raises(pg.DTypeError) as err:
        pg.gemm(a, b, device="cpu")
    assert "a float32 and b float64" in str(err.value)


# -- item 7: masked arrays -----------------------------------------------------------------
def test_masked_arrays_are_refused_not_unmasked(rng):
    a = np.ma.masked_array(rand(rng, (4, 3)), mask=np.eye(4, 3, dtype=bool))
    with pytest.raises(pg.ArgumentError, match=r"a is a masked array.*filled"):
        pg.gemm(a, rand(rng, (3, 2)), device="cpu")


# -- item 8: numpy's TooHardError ------------------------------------------------------------
def test_overlap_check_too_hard_is_a_polygemm_error(rng, monkeypatch):
    from polygemm import problem

    def too_hard(*args, **kwargs):
        raise np.exceptions.TooHardError("exceeded max_work")

    monkeypatch.setattr(np, "shares_memory", too_hard)
    a, b = rand(rng, (4, 3)), rand(rng, (3, 2))
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=np.empty((4, 2), np.float32), device="cpu")


# -- items 5 and 9: scalars ---------------------------------------------------------------------
def test_huge_integer_alpha_is_an_argument_error(rng):
    a, b = rand(rng, (2, 2)), rand(rng, (2, 2))
    with pytest.raises(pg.ArgumentError, match="alpha is too large"):
        pg.gemm(a, b, alpha=10**400, device="cpu")


def test_alpha_beyond_float32_runs_on_the_reference_and_is_refused_by_float32_kernels(rng, musa):  # noqa: F811
    a, b = rand16(rng, (6, 5)), rand16(rng, (5, 4))
    with pytest.raises(pg.UnsupportedProblemError, match=r"alpha=1e\+39 does not fit the float32 scalars .*device='cpu'"):
        pg.gemm(a, b, alpha=1e39, device="musa")
    tiny = rand16(rng, (6, 5)) * np.float16(1e-4)
    res = pg.gemm(tiny, b, alpha=1e39, out=np.empty((6, 4), np.float32), device="auto")  # auto passes over musa
    assert pg.last_plan().backend == "cpu"
    assert np.all(np.isfinite(res))
    assert_close(res, tiny, b, None, 1e39, 0.0, out_dtype=np.float32, acc_dtype=np.float32)


# -- musa items 3 and 4 ------------------------------------------------------------------------
class _View:
    """A column-major (or row-major) view with a larger leading dimension of a MusaArray."""

    def __init__(self, base, rows, cols, order):
        self.base, self.shape = base, (rows, cols)
        r, c = base.shape
        self.strides = (2, 2 * r) if order == "F" else (2 * c, 2)

    @property
    def __polygemm_array_interface__(self):
        return {"shape": self.shape, "typestr": "<f2", "strides": self.strides, "data": (self.base.ptr, False), "device": "musa", "version": 1}


@pytest.mark.musa
@pytest.mark.parametrize("order", ["F", "C"])
def test_musa_device_c_with_a_larger_leading_dimension(rng, musa, order):  # noqa: F811
    from polygemm.backends.musa import MusaArray

    m, n, k = 13, 11, 7
    a, b = rand16(rng, (m, k), order), rand16(rng, (k, n), order)
    big = rand16(rng, (m + 5, n + 3), order)  # c lives in its top-left corner
    c_host = big[:m, :n].copy()
    da, db = MusaArray.from_numpy(a), MusaArray.from_numpy(b)
    dbig = MusaArray.from_numpy(big)
    out = MusaArray.from_numpy(np.zeros((m, n), np.float16, order=order))
    pg.gemm(da, db, _View(dbig, m, n, order), beta=0.75, out=out, device="musa")
    res = reference_for(a, b, c_host, 1.0, 0.75, acc_dtype=np.float32).compare(out.get())
    assert res.ok, res.message
    for x in (da, db, dbig, out):
        x.free()


@pytest.mark.musa
def test_musa_failed_launch_leaves_out_as_it_was(rng, musa, monkeypatch):  # noqa: F811
    from polygemm.backends.musa import MusaArray
    from polygemm.backends.musa.sessions import Session

    a, b, c = rand16(rng, (9, 6)), rand16(rng, (6, 5)), rand16(rng, (9, 5))
    da, db, dc = MusaArray.from_numpy(a), MusaArray.from_numpy(b), MusaArray.from_numpy(c)
    before = rand16(rng, (9, 5))
    out = MusaArray.from_numpy(before)

    def fail(*args, **kwargs):
        raise pg.DeviceError("pgm_gemm_f16 failed: injected launch failure")

    monkeypatch.setattr(Session, "gemm", fail)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(da, db, dc, beta=1.0, out=out, device="musa")
    assert np.array_equal(out.get(), before), "out was overwritten by a failed call"
    for x in (da, db, dc, out):
        x.free()


@pytest.mark.musa
def test_musa_huge_m_with_k_zero_gives_the_empty_result(musa):  # noqa: F811
    a = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), shape=(2**31, 0), strides=(0, 2))
    b = np.zeros((0, 0), np.float16)
    res = pg.gemm(a, b, device="musa")
    assert res.shape == (2**31, 0)


@pytest.mark.musa
def test_musa_errors_name_the_users_operands_through_the_swap(rng, musa, monkeypatch):  # noqa: F811
    """Row-major operands run as Cᵀ = Bᵀ·Aᵀ: a library error about its A concerns the user's b."""
    from polygemm.backends.musa.sessions import Session

    def fail(self, variant, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        raise pg.DeviceError("pgm_gemm_f16 failed: PGM_ERR_INVALID_ARGUMENT: A is not usable (injected)")

    monkeypatch.setattr(Session, "gemm", fail)
    with pytest.raises(pg.DeviceError, match=r"the library's A .* is your b, its B .* your a"):
        pg.gemm(rand16(rng, (9, 6)), rand16(rng, (6, 5)), device="musa")
