"""complex64 and complex128 on the GPU: four real products (4M) on the float32 and float64 rungs, against NumPy's
complex128 matmul within the complex bound, on awkward shapes, every layout, c and beta, out=c, batches, torch's
conjugate views, CuPy and torch arrays and host arrays (marked ``cuda``; the plan and the 4M sequence are tested
without a GPU in test_complex_planning.py)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import kernel_specs
from tests.helpers import cuda_or_skip

COMPLEX = ["complex64", "complex128"]
REAL = {"complex64": "float32", "complex128": "float64"}


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip()


def _rng():
    return np.random.default_rng(secrets.randbits(32))


def _draw(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _within(got, a, b, c=None, alpha=1.0, beta=0.0, conj=(False, False, False)):
    """|got - ref| <= 4 (K + 2) u (|a| @ |b|) + 4 u |ref| elementwise, the reference NumPy's complex128 matmul (u: the
    real parts' unit roundoff; each part of a 4M product is two real products of K terms and their sum)."""
    got = np.asarray(got)
    u = float(np.finfo(np.float32 if got.dtype == np.complex64 else np.float64).eps) / 2
    a, b = (np.conj(x) if f else x for x, f in zip((a, b), conj))
    k = a.shape[-1]
    ref = alpha * np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    scale = abs(alpha) * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    if c is not None and beta != 0.0:
        c = np.conj(c) if conj[2] else c
        ref = ref + beta * c.astype(np.complex128)
        scale = scale + abs(beta) * np.abs(c)
    err = np.abs(got.astype(np.complex128) - ref)
    assert got.shape == ref.shape
    assert np.all(err <= 4 * (k + 2) * u * scale + 4 * u * np.abs(ref)), float(err.max())


class Lib:
    def __init__(self, name):
        self.name = name
        if name == "cupy":
            self.cp = pytest.importorskip("cupy")
        else:
            self.torch = pytest.importorskip("torch")
            if not self.torch.cuda.is_available():
                pytest.skip("torch sees no CUDA device")

    def to(self, x):
        if self.name == "cupy":
            return self.cp.asarray(x)
        return self.torch.from_numpy(np.ascontiguousarray(x)).cuda()

    def back(self, x):
        if self.name == "cupy":
            return self.cp.asnumpy(x)
        return x.resolve_conj().cpu().numpy()

    def layout(self, x, order):
        """Device ``x`` in ``order``: C, F (column-major), T (a transposed view of a C-ordered copy of x.T)."""
        if order == "C":
            return self.to(x)
        if order == "F":
            return self.cp.asfortranarray(self.to(x)) if self.name == "cupy" else self.to(np.swapaxes(x, -1, -2)).transpose(-1, -2)
        return self.to(np.ascontiguousarray(np.swapaxes(x, -1, -2))).swapaxes(-1, -2) if self.name == "cupy" \
            else self.to(np.swapaxes(x, -1, -2)).transpose(-1, -2)


@pytest.fixture(params=["cupy", "torch"])
def lib(request, cuda):
    return Lib(request.param)


SHAPES = [(1, 1, 1), (1, 257, 33), (257, 1, 33), (31, 17, 1), (127, 129, 255), (64, 48, 20000), (513, 257, 129)]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("mnk", SHAPES, ids=str)
@pytest.mark.parametrize("orders", ["CC", "FC", "CT", "TF"])
def test_complex_device_products_match_numpy(lib, dtype, mnk, orders):
    rng = _rng()
    m, n, k = mnk
    a, b = _draw(rng, (m, k), dtype), _draw(rng, (k, n), dtype)
    got = pg.gemm(lib.layout(a, orders[0]), lib.layout(b, orders[1]), device="cuda")
    plan = pg.last_plan()
    assert plan.backend == "cuda" and "4M" in plan.reason and REAL[dtype] in kernel_specs_dtype(plan.variant)
    host = lib.back(got)
    assert host.dtype == np.dtype(dtype)
    _within(host, a, b)


def kernel_specs_dtype(variant):
    spec = kernel_specs().get(variant.partition(":")[0])
    return spec.dtype if spec is not None else "float32 float64"  # the cuBLAS comparator


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_c_beta_and_out_is_c(lib, dtype):
    rng = _rng()
    a, b, c = _draw(rng, (77, 45), dtype), _draw(rng, (45, 63), dtype), _draw(rng, (77, 63), dtype)
    got = pg.gemm(lib.to(a), lib.to(b), lib.to(c), alpha=-1.25, beta=0.5, device="cuda")
    _within(lib.back(got), a, b, c, -1.25, 0.5)
    dc = lib.layout(c, "F")
    assert pg.gemm(lib.to(a), lib.to(b), dc, alpha=2.0, beta=1.0, out=dc, device="cuda") is dc
    _within(lib.back(dc), a, b, c, 2.0, 1.0)
    out = lib.to(np.full((77, 63), np.nan + 1j * np.nan, dtype))  # beta 0: c's NaNs, out's NaNs never read
    got = pg.gemm(lib.to(a), lib.to(b), lib.to(np.full((77, 63), np.nan, dtype)), beta=0.0, out=out, device="cuda")
    _within(lib.back(got), a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_batches_and_broadcasting(lib, dtype):
    rng = _rng()
    a, b = _draw(rng, (4, 33, 17), dtype), _draw(rng, (17, 9), dtype)
    _within(lib.back(pg.gemm(lib.to(a), lib.to(b), device="cuda")), a, b)
    a4, b4 = _draw(rng, (2, 1, 5, 7), dtype), _draw(rng, (3, 7, 6), dtype)
    _within(lib.back(pg.matmul(lib.to(a4), lib.to(b4), device="cuda")), a4, b4)
    c = _draw(rng, (4, 33, 9), dtype)
    _within(lib.back(pg.gemm(lib.to(a), lib.to(b), lib.to(c), beta=-1.0, device="cuda")), a, b, c, 1.0, -1.0)
    at = lib.layout(a, "T")  # a batch of column-major matrices
    _within(lib.back(pg.gemm(at, lib.to(b), device="cuda")), a, b)


@pytest.mark.cuda
def test_torch_conjugate_views_are_read_as_torch_reads_them(cuda):
    lib = Lib("torch")
    torch = lib.torch
    rng = _rng()
    a, b, c = _draw(rng, (40, 30), "complex64"), _draw(rng, (30, 20), "complex64"), _draw(rng, (40, 20), "complex64")
    da, db, dc = lib.to(a), lib.to(b), lib.to(c)
    for ca, cb, cc in ((True, False, False), (False, True, False), (True, True, True)):
        x, y, z = (t.conj() if f else t for t, f in ((da, ca), (db, cb), (dc, cc)))
        for _ in range(2):  # the second call is the plan cache's: the conjugate bit is read there too
            got = pg.gemm(x, y, z, beta=0.5, device="cuda")
            assert isinstance(got, torch.Tensor) and got.dtype == torch.complex64
            _within(got.cpu().numpy(), a, b, c, 1.0, 0.5, conj=(ca, cb, cc))
    # a plain call first, then the conjugate view of the same memory: not the plain call's cached reading
    _within(pg.gemm(da, db, device="cuda").cpu().numpy(), a, b)
    _within(pg.gemm(da.conj(), db, device="cuda").cpu().numpy(), a, b, conj=(True, False, False))
    out = torch.zeros(40, 20, dtype=torch.complex64, device="cuda").conj()
    with pytest.raises(pg.ArgumentError, match="conjugate bit"):
        pg.gemm(da, db, out=out, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_host_arrays_on_the_cuda_backend(cuda, dtype):
    rng = _rng()
    a, b, c = _draw(rng, (3, 65, 33), dtype), _draw(rng, (33, 17), dtype), _draw(rng, (3, 65, 17), dtype)  # c: the result's shape
    _within(pg.gemm(a, b, device="cuda"), a, b)
    out = np.zeros((3, 17, 65), dtype).swapaxes(-1, -2)  # column-major matrices (an N-D Fortran order interleaves them)
    assert pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, device="cuda") is out
    _within(out, a, b, c, 0.5, 2.0)
    _within(pg.gemm(a[0], b, device="cuda"), a[0], b)
    assert pg.gemm(np.zeros((4, 0), dtype), np.zeros((0, 3), dtype), device="cuda").shape == (4, 3)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_k_zero_and_empty_device_products(lib, dtype):
    rng = _rng()
    c = _draw(rng, (5, 3), dtype)
    got = pg.gemm(lib.to(np.zeros((5, 0), dtype)), lib.to(np.zeros((0, 3), dtype)), lib.to(c), beta=-2.0, device="cuda")
    assert np.array_equal(lib.back(got), -2.0 * c)
    got = pg.gemm(lib.to(np.zeros((5, 0), dtype)), lib.to(np.zeros((0, 3), dtype)), device="cuda")
    assert np.array_equal(lib.back(got), np.zeros((5, 3), dtype))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_the_rungs_auto_weighs_and_cublas(cuda, dtype):
    """The chosen rung, the runners-up auto weighed (split-K ones among them) and the cuBLAS comparator, each named."""
    cp = pytest.importorskip("cupy")
    rng = _rng()
    a, b, c = _draw(rng, (200, 130), dtype), _draw(rng, (130, 150), dtype), _draw(rng, (200, 150), dtype)
    plan = pg.explain(cp.asarray(a), cp.asarray(b), cp.asarray(c), alpha=0.5, beta=1.5, device="cuda")
    names = [plan.variant] + [name for name, _ in plan.candidates[:3]] + ["cublas"]
    for name in names:
        got = pg.gemm(cp.asarray(a), cp.asarray(b), cp.asarray(c), alpha=0.5, beta=1.5, device="cuda", variant=name)
        assert pg.last_plan().variant.partition(":")[0] == name.partition(":")[0]
        _within(cp.asnumpy(got), a, b, c, 0.5, 1.5)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", COMPLEX)
def test_verify_checks_complex_products(lib, dtype):
    rng = _rng()
    a, b = _draw(rng, (90, 70), dtype), _draw(rng, (70, 50), dtype)
    got = pg.gemm(lib.to(a), lib.to(b), device="cuda", verify="raise")
    _within(lib.back(got), a, b)


@pytest.mark.cuda
def test_complex64_at_4096_against_cupy(cuda):
    """The target shape once, for its result (the timing is tools/complex_bench.py's)."""
    cp = pytest.importorskip("cupy")
    rng = _rng()
    a, b = _draw(rng, (4096, 4096), "complex64"), _draw(rng, (4096, 4096), "complex64")
    da, db = cp.asarray(a), cp.asarray(b)
    got = cp.asnumpy(pg.gemm(da, db, device="cuda"))
    want = cp.asnumpy(cp.matmul(da, db))
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel < 1e-4, rel
    _within(got[:64], a[:64], b)
