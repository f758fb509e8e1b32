"""complex64 and complex128 as numpy.matmul computes them (on the cpu backend), within the complex bound; the
refusal of devices that do not compute them, naming device='cpu' and never a cast that drops the imaginary part."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda import CudaBackend
from polygemm.core.normalize import normalize
from polygemm.errors import ArgumentTypeError, DTypeError

COMPLEX = ["complex64", "complex128"]


def _draw(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _within(got, a, b, c=None, alpha=1.0, beta=0.0):
    """|got - ref| <= 4 K u (|a| @ |b|) + 4 u |ref| elementwise, the reference in complex128 (u: the dtype's unit
    roundoff; the complex product's constant covers its four real products and their sums)."""
    u = float(np.finfo(got.dtype).eps) / 2
    k = a.shape[-1]
    ref = alpha * np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    scale = abs(alpha) * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    if c is not None and beta != 0.0:
        ref = ref + beta * c.astype(np.complex128)
        scale = scale + abs(beta) * np.abs(c)
    err = np.abs(got.astype(np.complex128) - ref)
    assert np.all(err <= 4 * (k + 2) * u * scale + 4 * u * np.abs(ref)), float(err.max())


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("sa, sb", [((1, 1), (1, 1)), ((7, 13), (13, 5)), ((3, 1, 129), (129, 9)), ((2, 3, 4), (1, 4, 6)),
                                    ((33, 65), (65, 1)), ((0, 4), (4, 3))], ids=str)
def test_complex_products_match_numpy_matmul_within_the_bound(rng, dtype, sa, sb):
    a, b = _draw(rng, sa, dtype), _draw(rng, sb, dtype)
    want = np.matmul(a, b)
    for variant in ("auto", "reference", "numpy"):
        got = pg.gemm(a, b, variant=variant, device="cpu")
        assert got.dtype == want.dtype and got.shape == want.shape, variant
        _within(got, a, b)
    assert np.array_equal(pg.gemm(a, b, device="cpu"), want)  # the cpu backend's auto is numpy.matmul's own complex BLAS


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_views_vectors_out_and_c(rng, dtype):
    a, b, c = _draw(rng, (2, 6, 17), dtype), _draw(rng, (5, 17), dtype), _draw(rng, (2, 6, 5), dtype)
    _within(pg.gemm(a, b.T), a, b.T)  # a transposed view
    _within(pg.gemm(a, b.conj().T), a, b.conj().T)  # a conjugated copy, transposed
    v = _draw(rng, (17,), dtype)
    _within(pg.matmul(a, v)[..., None], a, v[:, None])
    out = np.full((2, 6, 5), 7 + 7j, dtype)
    assert pg.gemm(a, b.T, out=out) is out
    _within(out, a, b.T)
    got = pg.gemm(a, b.T, c, alpha=-1.5, beta=0.25)
    assert got.dtype == np.dtype(dtype)
    _within(got, a, b.T, c, -1.5, 0.25)
    inplace = c.copy()
    assert pg.gemm(a, b.T, inplace, alpha=2.0, beta=1.0, out=inplace) is inplace
    _within(inplace, a, b.T, c, 2.0, 1.0)
    _within(pg.gemm(a, b.T, c, alpha=2.0, beta=1.0, variant="reference"), a, b.T, c, 2.0, 1.0)


def test_a_complex_alpha_is_refused_as_a_type_error(rng):
    a = _draw(rng, (3, 4), "complex64")
    with pytest.raises(ArgumentTypeError, match=r"alpha must be a real number.*gemm\(alpha \* a, b\)"):
        pg.gemm(a, a.T, alpha=1j)
    with pytest.raises(ArgumentTypeError, match=r"beta must be a real number.*gemm\(a, b, beta \* c\)"):
        pg.gemm(a, a.T, a @ a.T, beta=np.complex64(2j))


def test_complex_with_real_operands_is_told_the_complex_cast(rng):
    a, b = _draw(rng, (3, 4), "complex64"), rng.standard_normal((4, 2)).astype(np.float32)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, b)
    msg = str(info.value)
    assert "b.astype(np.complex64)" in msg and "a.astype(np.float32)" not in msg
    # a complex c beside real a and b: told to compute in complex, never to cast c to a real dtype
    x = rng.standard_normal((3, 4)).astype(np.float32)
    with pytest.raises(DTypeError) as info:
        pg.gemm(x, b, np.ones((3, 2), np.complex64), beta=1.0)
    msg = str(info.value)
    assert "a.astype(np.complex64) and b.astype(np.complex64)" in msg and "c.astype(np.float32)" not in msg


def test_the_cpu_computes_complex_and_says_so(rng):
    a = _draw(rng, (3, 4), "complex64")
    plan = pg.explain(a, a.T, precision="medium", device="cpu")
    assert plan.backend == "cpu"
    assert any("complex64" in n and "complex BLAS" in n and "refuse" not in n for n in plan.notes)
    assert plan.precision.startswith("highest")  # complex64's real products are float32's: the precision governs it


@pytest.mark.parametrize("dtype", COMPLEX)
def test_cuda_takes_complex(dtype):
    """cuda computes complex64 and complex128 (four real products, tests/backends/cuda/test_complex_planning.py)."""
    a = np.ones((3, 4), dtype)
    assert CudaBackend().refusal(normalize(a, a.T)) is None
    assert dtype in CudaBackend().dtypes()


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "complex64", "complex128", "float16"])
def test_no_refusal_hint_suggests_a_cast_that_loses_values(dtype):
    """Every cast a dtype refusal names keeps every value of the dtype refused, or says when it is exact."""
    from polygemm.core.dtypes import keeps_values
    from polygemm.core.hints import dtype_way_on

    for dtypes in (("float16",), ("bfloat16",), ("float32",), ("float16", "bfloat16", "float32"), ("float64",)):
        way = dtype_way_on(dtype, dtypes)
        for target in re.findall(r"astype\(np\.(\w+)\)", way):
            assert keeps_values(dtype, target) or "2**53" in way, (dtype, dtypes, way)


def test_torch_conjugate_views_are_read_as_torch_reads_them(rng):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(_draw(rng, (3, 4), "complex64"))
    b = torch.from_numpy(_draw(rng, (4, 2), "complex64"))
    got = pg.gemm(a, b.conj())
    assert isinstance(got, torch.Tensor) and got.dtype == torch.complex64
    _within(got.numpy(), a.numpy(), b.numpy().conj())
    _within(pg.gemm(a.conj(), b).numpy(), a.numpy().conj(), b.numpy())
    out = torch.zeros(3, 2, dtype=torch.complex64).conj()
    with pytest.raises(pg.ArgumentError, match="conjugate bit"):
        pg.gemm(a, b, out=out)


@pytest.mark.parametrize("alpha, beta", [(1e-40, 0.0), (1.0, 1e-40), (1e39, 0.0), (-3e-39, 2e39)])
def test_complex64_scalars_past_float32_range_keep_the_imaginary_part(alpha, beta):
    # alpha/beta a float32 cannot hold: the scaling runs in complex128, not float64
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(np.complex64)
    b = (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3))).astype(np.complex64)
    c = (rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))).astype(np.complex64)
    got = pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu")
    want = alpha * (a.astype(np.complex128) @ b.astype(np.complex128)) + beta * c.astype(np.complex128)
    assert got.dtype == np.complex64
    with np.errstate(over="ignore", under="ignore"):
        want64 = want.astype(np.complex64)
    np.testing.assert_allclose(got.imag, want64.imag, rtol=1e-5, atol=1e-45)
    np.testing.assert_allclose(got.real, want64.real, rtol=1e-5, atol=1e-45)
