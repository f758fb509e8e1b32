"""float32 on the bfloat16 tensor cores on the GPU: the split and the one bfloat16 product against the float64
reference within the float32 bound (six segments) or one pass's (three), on awkward shapes, every layout,
unaligned views, alpha, beta and c, out=c, non-finite values, wide exponents and long K; auto's choice on a large
product (marked ``cuda``; the arithmetic and the plans are tested without a GPU in test_emulated_planning.py)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing.bounds import assert_close
from tests.helpers import cuda_or_skip


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip(min_cc=(8, 0), what="the bfloat16 tensor cores")


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _rng():
    return np.random.default_rng(secrets.randbits(32))


def _layout(x, order):
    return np.ascontiguousarray(x) if order == "C" else np.asfortranarray(x)


SHAPES = [(1, 1, 1), (7, 9, 13), (33, 65, 17), (129, 257, 1000), (1000, 999, 1001), (257, 33, 4093)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_six_segments_are_within_the_float32_bound(cuda, cp, m, n, k, orders):
    rng = _rng()
    a = _layout(rng.standard_normal((m, k)).astype(np.float32), orders[0])
    b = _layout(rng.standard_normal((k, n)).astype(np.float32), orders[1])
    got = pg.gemm(cp.asarray(a, order=orders[0]), cp.asarray(b, order=orders[1]), device="cuda", variant="emulated_bf16x6")
    assert_close(cp.asnumpy(got), a, b)


def test_unaligned_views_alpha_beta_c_and_out_is_c(cuda, cp):
    rng = _rng()
    m, n, k = 301, 203, 517
    big_a = cp.asarray(rng.standard_normal((m, k + 3)).astype(np.float32))
    big_b = cp.asarray(rng.standard_normal((k + 1, n + 5)).astype(np.float32))
    a, b = big_a[:, 1:k + 1], big_b[1:, 3:n + 3]  # rows that start anywhere, pitches of no 16-byte multiple
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = cp.asarray(c0)
    got = pg.gemm(a, b, c, alpha=0.75, beta=-1.5, device="cuda", variant="emulated_bf16x6")
    assert_close(cp.asnumpy(got), cp.asnumpy(a), cp.asnumpy(b), c0, 0.75, -1.5)
    assert cp.array_equal(c, cp.asarray(c0))  # c is read, not written, when out is not c
    pg.gemm(a, b, c, alpha=0.75, beta=-1.5, out=c, device="cuda", variant="emulated_bf16x6")
    assert_close(cp.asnumpy(c), cp.asnumpy(a), cp.asnumpy(b), c0, 0.75, -1.5)


def test_host_arrays_and_a_strided_result(cuda):
    rng = _rng()
    a = rng.standard_normal((100, 300)).astype(np.float32)
    b = rng.standard_normal((300, 77)).astype(np.float32)
    out = np.zeros((77, 100), np.float32).T  # a Fortran-ordered result
    pg.gemm(a, b, out=out, device="cuda", variant="emulated_bf16x6")
    assert_close(out, a, b)


def test_wide_exponents_cancellation_and_long_k(cuda, cp):
    rng = _rng()
    for m, n, k in [(64, 48, 1024), (16, 16, 262_144)]:
        a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-40, 40, (m, k))).astype(np.float32)
        b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-40, 40, (k, n))).astype(np.float32)
        got = pg.gemm(cp.asarray(a), cp.asarray(b), device="cuda", variant="emulated_bf16x6")
        assert_close(cp.asnumpy(got), a, b)
    half = rng.standard_normal((50, 700)).astype(np.float32)
    y = rng.standard_normal((700, 40)).astype(np.float32)
    a, b = np.concatenate([half, -half], axis=1), np.concatenate([y, y])  # every result cancels to zero
    got = cp.asnumpy(pg.gemm(cp.asarray(a), cp.asarray(b), device="cuda", variant="emulated_bf16x6"))
    assert_close(got, a, b)


def test_infinities_and_nans_give_ieee_results(cuda, cp):
    rng = _rng()
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 24)).astype(np.float32)
    a[3, 5], a[7, 9], b[11, 2] = np.inf, np.nan, -np.inf
    a[20, 0], b[0, :] = 3.4e38, b[0, :] * 1e-3  # past bfloat16's largest value (hi rounded toward zero), a finite product
    got = cp.asnumpy(pg.gemm(cp.asarray(a), cp.asarray(b), device="cuda", variant="emulated_bf16x6"))
    assert_close(got, a, b)  # nan where the reference is nan, each infinity matched exactly, the rest within the bound
    assert np.isfinite(got[0, 0]) and np.isinf(got[3, 0]) and np.isnan(got[7, 0])
    assert np.isfinite(np.delete(got[20], 2)).all()  # column 2 meets b's -inf in every row


def test_three_segments_meet_one_pass_bound_when_medium_is_asked(cuda, cp):
    rng = _rng()
    m, n, k = 257, 129, 2000
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = cp.asnumpy(pg.gemm(cp.asarray(a), cp.asarray(b), device="cuda", variant="emulated_bf16x3", precision="medium"))
    ref = a.astype(np.float64) @ b
    mag = np.abs(a).astype(np.float64) @ np.abs(b)
    assert np.all(np.abs(got - ref) <= (2 * 2.0 ** -11 + 2 * k * 2.0 ** -24) * mag + 2.0 ** -24 * np.abs(ref))


def test_auto_runs_a_large_product_on_the_emulation_within_the_float32_bound(cuda, cp):
    rng = _rng()
    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    b = rng.standard_normal((2048, 2048)).astype(np.float32)
    da, db = cp.asarray(a), cp.asarray(b)
    plan = pg.explain(da, db, device="cuda")
    assert plan.variant == "emulated_bf16x6" and plan.precision.startswith("highest")
    assert_close(cp.asnumpy(pg.gemm(da, db, device="cuda")), a, b)
    complex_a = (rng.standard_normal((1024, 1024)) + 1j * rng.standard_normal((1024, 1024))).astype(np.complex64)
    got = cp.asnumpy(pg.gemm(cp.asarray(complex_a), cp.asarray(complex_a), device="cuda", variant="emulated_bf16x6"))
    ref = complex_a.astype(np.complex128) @ complex_a
    mag = np.abs(complex_a).astype(np.float64) @ np.abs(complex_a)
    assert np.all(np.abs(got - ref) <= 4 * 1026 * 2.0 ** -24 * mag + 4 * 2.0 ** -24 * np.abs(ref))
