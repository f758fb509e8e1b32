"""verify= on the cuda backend (marked ``cuda``): the matrix-vector kernel against NumPy, the check on the
device (no false alarm on random shapes, layouts, dtypes and scalings, float16 with K = 262144 among them;
an injected fault caught and named), retry with another rung."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.verify_geometry import Strided, VERIFY_SOURCE, strided
from polygemm.testing import inject_fault
from polygemm.verification.host import row_thresholds

from tests.helpers import cuda_or_skip

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float16), BF16, np.dtype(np.float32)]


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip()


@pytest.fixture(autouse=True)
def _no_default():
    pg.set_verify(None)
    yield
    pg.set_verify(None)


def _kernel_matvec(cuda, x: np.ndarray, layout: str, v: np.ndarray, w: np.ndarray | None, pad: int = 0, splits: int = 0):
    """Run pg_verify_matvec on a (batch of) matrix x in ``layout``, stored with ``pad`` more elements a line than
    it has (a leading dimension beyond its width); ``splits``: slices of the columns (0: the backend's choice)."""
    import pycuda.gpuarray as gpuarray

    from polygemm.backends.cuda.verify_geometry import matvec_geometry

    rt = cuda.runtime
    batch, rows, cols = x.shape
    lines = x if layout == "row" else np.swapaxes(x, -1, -2)
    store = np.zeros(lines.shape[:-1] + (lines.shape[-1] + pad,), x.dtype)
    store[..., :lines.shape[-1]] = lines
    ld = store.shape[-1]
    kind = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}[x.dtype.name]
    with rt.active():
        dx = gpuarray.to_gpu(store.view(np.uint16) if x.dtype == BF16 else store)
        dv = gpuarray.to_gpu(v.astype(np.float32))
        dw = gpuarray.to_gpu(w.astype(np.float32)) if w is not None else None
        dy, dz = gpuarray.zeros(batch * rows, np.float32), gpuarray.zeros(batch * rows, np.float64)
        dn = gpuarray.zeros(batch * rows, np.float32) - 1
        s = strided(int(dx.gpudata), rows, cols, layout, ld, store[0].size, batch, x.dtype.name)
        mode, grid = matvec_geometry(s, rt.sms)
        fn = rt.function(VERIFY_SOURCE, f"pg_verify_matvec_{kind}_m{mode}")  # the entry of its walk
        if splits:
            grid = (grid[0], splits, grid[2])
        fn(np.int64(rows), np.int64(cols), np.int64(s.batch), np.uintp(s.ptr), np.int64(s.rs), np.int64(s.cs), np.int64(s.bs),
           np.uintp(int(dv.gpudata)), np.int64(0), np.uintp(int(dw.gpudata) if dw is not None else 0), np.int64(0),
           np.uintp(int(dy.gpudata)), np.uintp(int(dz.gpudata)), np.uintp(int(dn.gpudata)), block=(32, 8, 1),
           grid=grid)
        y, z, norm = dy.get().reshape(batch, rows), dz.get().reshape(batch, rows), dn.get().reshape(batch, rows)
        for buf in (dx, dv, dw, dy, dz, dn):
            if buf is not None:
                buf.gpudata.free()
    # the rows' norms: stored by a pass whose rows are each in one block, left alone by a sliced one
    np.testing.assert_allclose(norm, np.sqrt(z) if grid[1] == 1 else -1.0, rtol=1e-6)
    return y, z


@pytest.mark.cuda
def test_prepare_zeroes_the_sums_and_draws_signs_of_plus_or_minus_one_balanced(cuda):
    import pycuda.gpuarray as gpuarray

    rt = cuda.runtime
    with rt.active():
        out = gpuarray.zeros(100_000, np.float32)
        sums = gpuarray.zeros(5000, np.uint32) + 7
        rt.function(VERIFY_SOURCE, "pg_verify_prepare")(np.int64(4999), np.uintp(int(sums.gpudata)), np.int64(100_000),
                                                        np.uint64(0x1234_5678_9ABC), np.uintp(int(out.gpudata)),
                                                        block=(256, 1, 1), grid=(64, 1, 1))
        r, zeroed = out.get(), sums.get()
        out.gpudata.free(), sums.gpudata.free()
    assert set(np.unique(r).tolist()) == {-1.0, 1.0}
    assert abs(float(r.mean())) < 0.02
    assert not zeroed[:4999].any() and zeroed[4999] == 7


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 37, 301), (1, 300, 5), (3, 64, 64), (2, 300, 1000), (1, 3, 9000), (1, 1000, 17), (2, 333, 2)])
@pytest.mark.parametrize("pad,splits", [(0, 0), (8, 0), (3, 0), (8, 3)], ids=["compact", "aligned-ld", "odd-ld", "sliced"])
def test_matvec_kernel_matches_numpy(cuda, rng, dtype, layout, shape, pad, splits):
    """Every path of the kernel (16-byte loads where lines start on 16-byte boundaries, scalar ones where not,
    vector tails, slices of the columns added by atomics) against NumPy."""
    x = rng.standard_normal(shape).astype(dtype)
    v = rng.standard_normal(shape[-1])
    w = rng.random(shape[-1])
    y, z = _kernel_matvec(cuda, x, layout, v, w, pad, splits)
    x64 = x.astype(np.float64)
    v32 = v.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(y, x64 @ v32, rtol=1e-5, atol=1e-5 * float((np.abs(x64) @ np.abs(v32)).max()))
    np.testing.assert_allclose(z, np.abs(x64) @ w.astype(np.float32).astype(np.float64), rtol=1e-6)
    _, z = _kernel_matvec(cuda, x, layout, v, None, pad, splits)  # without w: the rows' sums of squares (float64)
    np.testing.assert_allclose(z, np.square(x64).sum(-1), rtol=1e-6)


@pytest.mark.cuda
def test_sums_of_squares_of_tiny_and_huge_float32_neither_underflow_nor_overflow(cuda, rng):
    x = (rng.standard_normal((1, 40, 300)) * np.logspace(-30, 30, 40)[None, :, None]).astype(np.float32)
    _, z = _kernel_matvec(cuda, x, "row", np.ones(300), None)
    want = np.square(x.astype(np.float64)).sum(-1)
    assert np.all(z > 0) and np.all(np.isfinite(z))
    np.testing.assert_allclose(z, want, rtol=1e-6)


def _device(cuda, x):
    return cuda.to_device(np.ascontiguousarray(x)) if x.flags.c_contiguous or x.flags.f_contiguous else cuda.to_device(x.copy())


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_no_false_alarm_on_random_device_products(cuda, rng, dtype):
    for _ in range(25):
        m, n, k = (int(x) for x in rng.integers(1, 300, 3))
        a = (rng.standard_normal((m, k)) * 10.0 ** rng.uniform(-2, 2)).astype(dtype)
        b = (rng.standard_normal((k, n)) * 10.0 ** rng.uniform(-2, 2)).astype(dtype)
        if rng.random() < 0.5:
            a = np.asfortranarray(a)
        da, db = _device(cuda, a), _device(cuda, b)
        if rng.random() < 0.5:
            c = rng.standard_normal((m, n)).astype(dtype)
            got = pg.gemm(da, db, _device(cuda, c), alpha=1.5, beta=-0.5, verify="raise")
        else:
            got = pg.gemm(da, db, verify="raise")
        assert tuple(got.shape) == (m, n)
        assert "device" in pg.explain(da, db, verify="raise").notes[-1]


@pytest.mark.cuda
def test_no_false_alarm_float16_k_262144_badly_scaled(cuda, rng):
    k = 262_144
    a = (rng.standard_normal((64, k)) * np.logspace(-4, 0.5, 64)[:, None]).astype(np.float16)
    b = (rng.standard_normal((k, 48)) * np.logspace(-3, 0.5, 48)[None, :]).astype(np.float16)
    pg.gemm(cuda.to_device(a), cuda.to_device(b), verify="raise", out_dtype=np.float32)
    pos = np.abs(a[:16]).astype(np.float16)  # all positive: the sums grow with K, no cancellation
    pg.gemm(cuda.to_device(pos), cuda.to_device(np.abs(b[:, :16]).astype(np.float16)), verify="raise", out_dtype=np.float32)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_a_fault_above_twice_the_threshold_is_caught_on_the_device(cuda, rng, dtype):
    for _ in range(10):
        m, n, k = (int(x) for x in rng.integers(2, 200, 3))
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        da, db = cuda.to_device(a), cuda.to_device(b)
        res = cuda.to_host(pg.gemm(da, db))
        kw = dict(dtype=np.dtype(dtype), out_dtype=np.dtype(dtype), check_dtype=np.dtype(np.float32),
                  scalar_dtype=np.dtype(np.float32), compensated=True)
        thr = row_thresholds(a, b, None, res, 1.0, 0.0, **kw)
        cthr = row_thresholds(b.T, a.T, None, res.T, 1.0, 0.0, **kw)  # the columns' (the transposed check's rows)
        i, j = int(rng.integers(m)), int(rng.integers(n))
        # above both its row's and its column's threshold: a column of many rows (m >> n) is held to a
        # threshold that grows with them, and a fault between the two is caught but its column not named
        value = float(res[i, j]) + 2.5 * max(float(thr[i]), float(cthr[j]))
        with inject_fault(i, j, value=value):
            with pytest.raises(pg.VerificationError) as exc:
                pg.gemm(da, db, verify="raise")
        report = exc.value.report
        assert report.rows[0].index == i and "device" in report.where
        assert any(f.index == j for f in report.columns)


@pytest.mark.cuda
def test_warn_and_retry_on_the_device(cuda, rng):
    a = rng.standard_normal((256, 128)).astype(np.float16)
    b = rng.standard_normal((128, 192)).astype(np.float16)
    da, db = cuda.to_device(a), cuda.to_device(b)
    with inject_fault(3, 4, value=1e4):
        with pytest.warns(pg.VerificationWarning, match="device"):
            pg.gemm(da, db, verify="warn")
    with inject_fault(3, 4, value=1e4, times=1) as fault:
        got = pg.gemm(da, db, verify="retry")
    assert fault.hits == 1
    pg.testing.assert_close(cuda.to_host(got), a, b)
    with inject_fault(3, 4, value=1e4):
        with pytest.raises(pg.VerificationError, match="retried"):
            pg.gemm(da, db, verify="retry")


@pytest.mark.cuda
def test_numpy_operands_on_cuda_are_checked_on_the_host(cuda, rng):
    a = rng.standard_normal((64, 32)).astype(np.float32)
    with inject_fault(1, 1, value=1e5):
        with pytest.raises(pg.VerificationError, match="host"):
            pg.gemm(a, a.T.copy(), device="cuda", verify="raise")


def test_strided_is_importable_without_a_gpu():
    assert Strided(0, 1, 1, 1, 1, 0, "f32").t.rows == 1


@pytest.mark.cuda
@pytest.mark.parametrize("order", ["C", "F", "view"])
def test_a_checked_result_reaches_a_cupy_out_whole(cuda, rng, order):
    """A verified call with ``out`` copies the checked result into it (one device copy where both are dense and of one
    layout, CuPy's own copy where not): every element as the unverified call writes it, nothing beside it."""
    cp = pytest.importorskip("cupy")
    m, n, k = 67, 45, 33
    a, b = cp.asarray(rng.standard_normal((m, k)).astype(np.float32)), cp.asarray(rng.standard_normal((k, n)).astype(np.float32))
    want = cp.asnumpy(pg.gemm(a, b))
    if order == "view":
        buf = cp.full((m, n + 3), cp.nan, dtype=cp.float32)
        out = buf[:, 1:n + 1]
    else:
        buf = out = cp.full((m, n), cp.nan, dtype=cp.float32, order=order)
    assert pg.gemm(a, b, out=out, verify="raise") is out
    np.testing.assert_array_equal(cp.asnumpy(out), want)
    if order == "view":
        host = cp.asnumpy(buf)
        assert np.isnan(host[:, 0]).all() and np.isnan(host[:, n + 1:]).all()


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_a_checked_call_with_out_in_scratch_leaves_out_and_c_until_it_passed(cuda, rng, kind):
    """The verified call with a dense out computes into scratch and copies into out once checked: out holds the
    unverified call's product, c in place is read before it is replaced, and a fault leaves out (and c) as they were."""
    if kind == "cupy":
        xp = pytest.importorskip("cupy")
        to = xp.asarray
    else:
        xp = pytest.importorskip("torch")
        if not xp.cuda.is_available():
            pytest.skip("torch without CUDA")
        to = lambda x: xp.as_tensor(x, device="cuda")  # noqa: E731
    m, n, k = 70, 52, 45
    host = [rng.standard_normal(s).astype(np.float16) for s in ((m, k), (k, n), (m, n))]
    a, b, c = (to(x) for x in host)
    want = (0.5 * (host[0].astype(np.float64) @ host[1]) + 2.0 * host[2]).astype(np.float16)

    def values(x):
        return np.asarray(x.get() if kind == "cupy" else x.cpu().numpy())

    out = to(np.full((m, n), 7.0, np.float16))
    assert pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, verify="raise") is out
    np.testing.assert_allclose(values(out).astype(np.float64), want, rtol=2e-2, atol=2e-2)
    assert pg.last_plan().problem.out is not None  # the call with out, bound once
    with inject_fault(3, 4, value=1e4), pytest.raises(pg.VerificationError, match="out and c are untouched"):
        pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=c, verify="raise")
    np.testing.assert_array_equal(values(c), host[2])
    assert pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=c, verify="raise") is c  # in place: c read, then replaced
    np.testing.assert_allclose(values(c).astype(np.float64), want, rtol=2e-2, atol=2e-2)
