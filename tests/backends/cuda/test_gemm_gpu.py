"""Every cuda variant against the float64 reference (marked ``cuda``)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for, run_conformance

from tests.helpers import DLPackOnly, cuda_or_skip, run_concurrently


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip()


VARIANTS = [v.name for v in pg.get_backend("cuda").variants() if "float32" in v.dtypes]
#: the float64 rungs (kernels/dgemm) and cuBLAS's DGEMM, checked by the same harness in float64
F64_VARIANTS = [v.name for v in pg.get_backend("cuda").variants() if "float64" in v.dtypes]
#: (variant, dtype) for the per-variant correctness tests
CASES = [(v, np.float32) for v in VARIANTS] + [(v, np.float64) for v in F64_VARIANTS]
#: the precision= a float32 variant is named with: what it declares it meets (an emulation that meets only "medium" is
#: refused by the default "highest"); its error is held to that precision's bound
PRECISION = {v.name: v.precision for v in pg.get_backend("cuda").variants() if getattr(v, "precision", None)}


def _case_id(case):
    return f"{case[0]}-{np.dtype(case[1]).name}"


def _runnable(cuda, variant):
    """Skip a rung this device cannot run (the sm_90 float64 shape on an sm_80 card)."""
    from polygemm.backends.cuda.variants import kernel_specs

    spec = kernel_specs().get(variant)
    cc = cuda.runtime.cc
    if spec is not None and not spec.runs_on(cc[0] * 10 + cc[1]):
        pytest.skip(f"{variant} needs sm_{spec.min_sm}; this device is sm_{cc[0]}{cc[1]}")


SMALL = [(1, 1, 1), (7, 13, 5), (127, 129, 131), (33, 65, 1)]
#: shapes off every tile edge, checked on the float64 rungs besides SMALL and LARGE
F64_SHAPES = [(17, 33, 65), (127, 129, 255), (1000, 999, 1001)]


ORDERS = [(oa, ob, oc) for oa in "CF" for ob in "CF" for oc in "CF"]


_data_cache: dict[tuple, tuple] = {}


def _data(m: int, n: int, k: int, scaled: bool, dtype=np.float32):
    """One fresh data set per (shape, scaling, dtype) per test session, with its reference."""
    key = (m, n, k, scaled, np.dtype(dtype).name)
    if key not in _data_cache:
        seed = secrets.randbits(32)
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k), dtype=dtype)
        b = rng.standard_normal((k, n), dtype=dtype)
        c = rng.standard_normal((m, n), dtype=dtype) if scaled else None
        alpha, beta = (-0.75, 1.5) if scaled else (1.0, 0.0)
        _data_cache[key] = (a, b, c, alpha, beta, reference_for(a, b, c, alpha, beta), seed)
    return _data_cache[key]


def _check(variant, m, n, k, orders, scaled, dtype=np.float32):
    a, b, c, alpha, beta, ref, seed = _data(m, n, k, scaled, dtype)
    oa, ob, oc = orders
    A, B = np.asarray(a, order=oa), np.asarray(b, order=ob)
    out = np.full((m, n), np.nan, dtype, order=oc)
    C = np.asarray(c, order=oc) if c is not None else None
    precision = PRECISION.get(variant) if np.dtype(dtype) == np.float32 else None
    got = pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant, precision=precision)
    assert got is out
    if precision not in (None, "highest"):
        ref = reference_for(a, b, c, alpha, beta, precision=precision)
    res = ref.compare(out)
    assert res.ok, f"{variant} {m}x{n}x{k} orders={orders} alpha={alpha} beta={beta} seed={seed}: {res.message}"


LARGE = [(1000, 3000, 2000), (4096, 4096, 4096), (16, 4096, 4096)]


BATCH_CASES = [((1, 64, 48), (1, 48, 80)), ((7, 33, 17), (7, 17, 65)), ((1, 40, 24), (5, 24, 36)), ((5, 40, 24), (24, 36)),
               ((0, 16, 8), (8, 4))]


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "x".join(map(str, s)))
def test_small_shapes_all_layouts(cuda, case, shape):
    variant, dtype = case
    _runnable(cuda, variant)
    for i, orders in enumerate(ORDERS):
        _check(variant, *shape, orders, scaled=bool(i % 2), dtype=dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("shape", LARGE, ids=lambda s: "x".join(map(str, s)))
def test_large_shapes(cuda, case, shape):
    variant, dtype = case
    _runnable(cuda, variant)
    _check(variant, *shape, ("C", "C", "C"), scaled=False, dtype=dtype)
    _check(variant, *shape, ("F", "C", "F"), scaled=True, dtype=dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("variant", F64_VARIANTS)
@pytest.mark.parametrize("shape", F64_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_float64_shapes_off_the_tiles_all_layouts(cuda, variant, shape):
    _runnable(cuda, variant)
    for i, orders in enumerate(ORDERS):
        _check(variant, *shape, orders, scaled=bool(i % 2), dtype=np.float64)


@pytest.mark.cuda
def test_auto_picks_a_predicated_rung_and_is_correct(cuda):
    a, b, c, alpha, beta, ref, seed = _data(1000, 3000, 2000, True)
    plan = pg.explain(a, b, c, alpha=alpha, beta=beta)
    assert plan.backend == "cuda" and plan.padding is None, str(plan)
    assert ref.compare(pg.gemm(a, b, c, alpha=alpha, beta=beta)).ok


@pytest.mark.cuda
def test_unaligned_views_take_a_correct_path(cuda):
    rng = np.random.default_rng(secrets.randbits(32))
    buf_a = rng.standard_normal(1 + 129 * 67, dtype=np.float32)
    buf_b = rng.standard_normal(1 + 67 * 131, dtype=np.float32)
    a = buf_a[1:].reshape(129, 67)  # 4-byte offset; ld 67 not a multiple of 4
    b = buf_b[1:].reshape(67, 131)
    for variant in VARIANTS:
        precision = PRECISION.get(variant)
        got = pg.gemm(a, b, device="cuda", variant=variant, precision=precision)
        assert reference_for(a, b, precision=precision).compare(got).ok, variant
    # float64: 8 bytes off a 16-byte boundary and odd leading dimensions (the rungs' PG_VEC=0 build)
    a64 = rng.standard_normal(1 + 129 * 67)[1:].reshape(129, 67)
    b64 = rng.standard_normal(1 + 67 * 131)[1:].reshape(67, 131)
    for variant in F64_VARIANTS:
        _runnable(cuda, variant)
        got = pg.gemm(a64, b64, device="cuda", variant=variant)
        assert got.dtype == np.float64 and reference_for(a64, b64).compare(got).ok, variant


@pytest.mark.cuda
def test_pycuda_device_arrays(cuda):
    import pycuda.gpuarray as gpuarray

    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((300, 200), dtype=np.float32)
    b = rng.standard_normal((200, 100), dtype=np.float32)
    c = rng.standard_normal((300, 100), dtype=np.float32)
    with cuda.runtime.active():
        da, db, dc = gpuarray.to_gpu(a), gpuarray.to_gpu(b), gpuarray.to_gpu(c)
    got = pg.gemm(da, db, dc, alpha=2.0, beta=-1.0)
    assert isinstance(got, gpuarray.GPUArray)
    with cuda.runtime.active():
        host = got.get()
    assert reference_for(a, b, c, 2.0, -1.0).compare(host).ok
    # in place on the device
    pg.gemm(da, db, dc, alpha=2.0, beta=-1.0, out=dc)
    with cuda.runtime.active():
        assert reference_for(a, b, c, 2.0, -1.0).compare(dc.get()).ok
        del da, db, dc  # PyCUDA frees its own allocations only where their context is current


@pytest.mark.cuda
def test_cupy_device_arrays(cuda):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((257, 129), dtype=np.float32)
    b = rng.standard_normal((129, 65), dtype=np.float32)
    da, db = cp.asarray(a), cp.asfortranarray(cp.asarray(b))
    got = pg.gemm(da, db)  # a Fortran-ordered device operand is read without a copy
    with cuda.runtime.active():
        host = got.get()
    assert reference_for(a, b).compare(host).ok
    out = cp.full((257, 65), cp.nan, dtype=cp.float32)
    assert pg.gemm(da, db, out=out) is out
    assert reference_for(a, b).compare(cp.asnumpy(out)).ok


@pytest.mark.cuda
def test_torch_cuda_tensors(cuda):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    a = torch.randn(130, 70, device="cuda")
    b = torch.randn(70, 90, device="cuda")
    out = torch.full((130, 90), float("nan"), device="cuda")
    pg.gemm(a, b, out=out)
    assert reference_for(a.cpu().numpy(), b.cpu().numpy()).compare(out.cpu().numpy()).ok


@pytest.mark.cuda
def test_eight_threads_at_once(cuda):
    def work(i: int) -> None:
        rng = np.random.default_rng(secrets.randbits(32))
        for j in range(5):
            m, n, k = 64 + 37 * i, 50 + 11 * j, 129
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            variant = VARIANTS[(i + j) % len(VARIANTS)]
            res = reference_for(a, b).compare(pg.gemm(a, b, device="cuda", variant=variant))
            assert res.ok, f"{variant}: {res.message}"

    errors = run_concurrently(work, 8)
    assert not errors, errors


@pytest.mark.cuda
def test_empty_and_k_zero_on_device(cuda):
    import pycuda.gpuarray as gpuarray

    c = np.random.default_rng().standard_normal((5, 4), dtype=np.float32)
    with cuda.runtime.active():
        da, db, dc = gpuarray.to_gpu(np.zeros((5, 0), np.float32)), gpuarray.to_gpu(np.zeros((0, 4), np.float32)), gpuarray.to_gpu(c)
    got = pg.gemm(da, db, dc, beta=2.0)
    with cuda.runtime.active():
        np.testing.assert_array_equal(got.get(), 2.0 * c)
        del da, db, dc  # PyCUDA frees its own allocations only where their context is current


@pytest.mark.cuda
def test_conformance_suite(cuda):
    results = run_conformance("cuda", dtypes=["float32"], quick=True)
    fails = [r for r in results if r.status == "fail"]
    assert not fails, fails[:5]


@pytest.mark.cuda
def test_cached_calls_rebind_new_device_arrays(cuda):
    """Repeated calls with new arrays of the same description reuse the plan and compute the
    new operands (pointers are bound per call, including tensor maps of the TMA rung)."""
    cp = pytest.importorskip("cupy")
    from polygemm import api

    rng = np.random.default_rng(secrets.randbits(32))
    for dtype in (np.float32, np.float16):
        before = api.plan_cache_info()["hits"]
        for _ in range(3):
            a = rng.standard_normal((257, 192)).astype(dtype)
            b = rng.standard_normal((192, 320)).astype(dtype)
            out = cp.full((257, 320), cp.nan, dtype=dtype)
            pg.gemm(cp.asarray(a), cp.asarray(b), out=out, device="cuda")
            res = reference_for(a, b).compare(cp.asnumpy(out))
            assert res.ok, f"{dtype.__name__} {pg.last_plan().variant}: {res.message}"
        assert api.plan_cache_info()["hits"] >= before + 2  # the second and third calls hit
        assert pg.explain(cp.asarray(a), cp.asarray(b), out=out, device="cuda").cached
        assert pg.last_plan().problem.a.array is None  # provenance, not data


@pytest.mark.cuda
def test_work_is_ordered_on_the_callers_stream_without_synchronizing(cuda):
    """Producer, polygemm and consumer on one non-blocking CuPy stream: correct results with
    no synchronization between them (polygemm queues on the stream the arrays name)."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((512, 384)).astype(np.float32)
    b = rng.standard_normal((384, 640)).astype(np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        da = cp.asarray(a) * 2.0  # queued on `stream`
        db = cp.asarray(b)
        out = cp.empty((512, 640), cp.float32)
        for _ in range(3):
            pg.gemm(da, db, out=out, device="cuda")
            total = (out * 1.0).copy()  # the consumer, on the same stream
        host = cp.asnumpy(total, stream=stream)
        stream.synchronize()
    assert reference_for(2.0 * a, b).compare(host).ok


@pytest.mark.cuda
def test_operands_on_different_streams_get_a_result_written_before_the_call_returns(cuda):
    """Device arrays whose ``__cuda_array_interface__`` names different streams (as numba's
    arrays do, each with its own): no one stream orders the work for all of them, so polygemm
    waits for their streams, runs, and returns with the result written; a consumer on either
    stream may read it at once."""
    cp = pytest.importorskip("cupy")

    class OnStream:  # a device array that names its own stream, as numba's device arrays do
        def __init__(self, arr, stream):
            self.arr, self.stream = arr, stream

        @property
        def __cuda_array_interface__(self):
            return {**self.arr.__cuda_array_interface__, "stream": self.stream.ptr}

    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((4096, 4096)).astype(np.float16)
    b = rng.standard_normal((4096, 4096)).astype(np.float16)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with s1:
        da, out = cp.asarray(a), cp.empty((4096, 4096), cp.float16)
    with s2:
        db = cp.asarray(b)
    for _ in range(3):
        pg.gemm(OnStream(da, s1), OnStream(db, s2), out=OnStream(out, s1), device="cuda")
        assert cp.cuda.Stream.null.done, "the call returned with its work still queued"
        with s1:
            got = (out * 1).copy()  # a consumer on s1, which nothing orders after the legacy stream
    host = cp.asnumpy(got, stream=s1)
    s1.synchronize()
    rows = np.r_[0, 1, 4095, rng.integers(0, 4096, 20)]
    assert reference_for(a[rows], b).compare(host[rows]).ok


@pytest.mark.cuda
def test_failed_preparation_leaves_out_as_it_was(cuda, monkeypatch):
    cp = pytest.importorskip("cupy")
    from polygemm.backends.cuda.launch import PreparedLaunch

    rng = np.random.default_rng(secrets.randbits(32))
    a, b, c = (cp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((64, 32), (32, 48), (64, 48)))
    out = cp.asarray(rng.standard_normal((64, 48)).astype(np.float32))
    before = cp.asnumpy(out)

    def fail(self, *args, **kwargs):
        raise pg.DeviceError("injected: compiling the kernel failed")

    monkeypatch.setattr(PreparedLaunch, "prepare", fail)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(a, b, c, beta=1.0, out=out, device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(out), before)


@pytest.mark.cuda
def test_alpha_beyond_float32_is_refused_on_cuda_and_auto_takes_the_reference(cuda):
    rng = np.random.default_rng(secrets.randbits(32))
    a = (rng.standard_normal((20, 10)) * 1e-5).astype(np.float32)
    b = rng.standard_normal((10, 30)).astype(np.float32)
    with pytest.raises(pg.UnsupportedProblemError, match="float32 scalars"):
        pg.gemm(a, b, alpha=1e39, device="cuda")
    res = pg.gemm(a, b, alpha=1e39)
    assert pg.last_plan().backend == "cpu" and np.all(np.isfinite(res))
    assert reference_for(a, b, None, 1e39).compare(res).ok


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [">f4", ">f2"])
def test_big_endian_numpy_inputs_on_cuda(cuda, dtype):
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((65, 33)).astype(dtype)
    b = rng.standard_normal((33, 17)).astype(dtype)
    native = np.dtype(dtype).newbyteorder("=")
    for _ in range(2):  # planned, then cached: both convert
        res = pg.gemm(a, b, device="cuda")
        assert res.dtype == native
        assert reference_for(a.astype(native), b.astype(native)).compare(res).ok


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BATCH_CASES, ids=lambda s: f"{s[0]}@{s[1]}")
def test_batched_products_on_cuda(cuda, dtype, shapes):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    for kind in ("numpy", "cupy"):
        x, y = (a, b) if kind == "numpy" else (cp.asarray(a), cp.asarray(b))
        for _ in range(2):  # planned, then cached
            got = pg.gemm(x, y, device="cuda")
            host = got if kind == "numpy" else cp.asnumpy(got)
            assert host.shape == want.shape and host.dtype == dtype
            for i in np.ndindex(*want.shape[:-2]):
                res = reference_for(np.broadcast_to(a, want.shape[:-2] + a.shape[-2:])[i],
                                    np.broadcast_to(b, want.shape[:-2] + b.shape[-2:])[i]).compare(host[i])
                assert res.ok, f"{kind} matrix {i} ({pg.last_plan().variant}): {res.message}"
    if int(np.prod(want.shape[:-2])) > 1:
        assert "PG_BATCH" in str(pg.explain(cp.asarray(a), cp.asarray(b), device="cuda")) or \
            "batch" in pg.explain(cp.asarray(a), cp.asarray(b), device="cuda").launch


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda d: np.dtype(d).name)
def test_reversed_batches_on_device(cuda, dtype):
    """Device batches that run backwards in memory (x[::-1], a negative batch stride) for a, b,
    c and out: matrix i of the result is a[i] @ b[i] (the TMA rungs, whose tensor maps step
    forwards only, hand such a batch to a rung that takes signed strides)."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((4, 64, 48), (4, 48, 80), (4, 64, 80)))
    da, db, dc = cp.asarray(a)[::-1], cp.asarray(b)[::-1], cp.asarray(c)[::-1]
    ra, rb, rc = a[::-1], b[::-1], c[::-1]
    named = {np.float16: "hgemm_v2_wgmma_tma", np.float32: "cm_v13_cp_async_narrow_tile", np.float64: "dgemm_v1_dmma"}
    for variant in ("auto", named[dtype]):
        if variant.startswith("hgemm_v2") and cuda.runtime.cc < (9, 0):
            continue
        got = cp.asnumpy(pg.gemm(da, db, device="cuda", variant=variant))
        out = cp.full((4, 64, 80), cp.nan, dtype=dtype)[::-1]
        pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, out=out, device="cuda", variant=variant)
        into = cp.asnumpy(out)
        for i in range(4):
            assert reference_for(ra[i], rb[i]).compare(got[i]).ok, f"{variant} matrix {i} ({pg.last_plan().variant})"
            assert reference_for(ra[i], rb[i], rc[i], 0.5, -1.0).compare(into[i]).ok, f"{variant} matrix {i}, c and out reversed"


@pytest.mark.cuda
def test_batched_alpha_beta_with_c_on_device(cuda):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((4, 70, 30), (4, 30, 50), (4, 70, 50)))
    out = cp.full((4, 70, 50), cp.nan, dtype=cp.float32)
    pg.gemm(cp.asarray(a), cp.asarray(b), cp.asarray(c), alpha=0.5, beta=-2.0, out=out, device="cuda")
    host = cp.asnumpy(out)
    for i in range(4):
        assert reference_for(a[i], b[i], c[i], 0.5, -2.0).compare(host[i]).ok


@pytest.mark.cuda
def test_results_are_of_the_inputs_kind(cuda):
    import pycuda.gpuarray as gpuarray

    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((33, 20)).astype(np.float32)
    b = rng.standard_normal((20, 17)).astype(np.float32)
    got = pg.gemm(cp.asarray(a), cp.asarray(b))
    assert isinstance(got, cp.ndarray) and reference_for(a, b).compare(cp.asnumpy(got)).ok
    with cuda.runtime.active():
        ga = pg.gemm(gpuarray.to_gpu(a), gpuarray.to_gpu(b))
        assert isinstance(ga, gpuarray.GPUArray) and reference_for(a, b).compare(ga.get()).ok
    torch = pytest.importorskip("torch")
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tt = pg.gemm(ta, tb)
    assert isinstance(tt, torch.Tensor) and tt.device == ta.device and reference_for(a, b).compare(tt.cpu().numpy()).ok
    half = pg.gemm(ta.half(), tb.half(), out_dtype=torch.float32)
    assert half.dtype == torch.float32
    with pytest.raises(pg.ArgumentError, match="a is a cupy.ndarray and b a torch.Tensor"):
        pg.gemm(cp.asarray(a), tb)


@pytest.mark.cuda
def test_dlpack_only_cuda_arrays(cuda):
    cp = pytest.importorskip("cupy")


    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 56)).astype(np.float16)
    got = pg.gemm(DLPackOnly(cp.asarray(a)), DLPackOnly(cp.asarray(b)), device="cuda")
    with cuda.runtime.active():
        host = got.get() if hasattr(got, "get") else np.asarray(got)
    assert reference_for(a, b).compare(host).ok


@pytest.mark.cuda
def test_torch_stream_ordered_chain_without_synchronize(cuda):
    """Producer, polygemm and consumer on a torch side stream: polygemm queues on torch's
    current stream, so the chain is correct with no synchronize between its steps."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    side = torch.cuda.Stream()
    rng = np.random.default_rng(secrets.randbits(32))
    a = torch.from_numpy(rng.standard_normal((1024, 768)).astype(np.float32)).cuda()
    b = torch.from_numpy(rng.standard_normal((768, 512)).astype(np.float32)).cuda()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        x = a * 3.0  # queued on `side`
        for _ in range(3):
            y = pg.gemm(x, b)
            x2 = y[:, :1].clone()  # the consumer, on `side`
        result = y.cpu()  # waits for `side` only
    assert reference_for(3.0 * a.cpu().numpy(), b.cpu().numpy()).compare(result.numpy()).ok
    assert x2.shape == (1024, 1)


@pytest.mark.cuda
def test_pycuda_results_are_freed_from_any_thread(cuda):
    """pycuda results and ``to_device`` arrays dropped in a thread other than the one that
    opened the device (the registry's probe thread) give their memory back, with no PyCUDA
    "out-of-thread context" warning (such an allocation would be leaked)."""
    import gc
    import threading
    import warnings

    rt = cuda.runtime
    rng = np.random.default_rng(secrets.randbits(32))
    host = rng.standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB per result

    def free_bytes() -> int:
        gc.collect()
        with rt.active():
            return int(rt.drv.mem_get_info()[0])

    def churn(caught: list) -> None:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            a = cuda.to_device(host)
            for _ in range(64):  # 256 MiB in all if nothing came back
                r = pg.gemm(a, a, device="cuda")
                del r
            assert reference_for(host, host).compare(cuda.to_host(pg.gemm(a, a, device="cuda"))).ok
            del a
            gc.collect()
        caught.extend(str(w.message) for w in seen)

    churn([])  # the pool's first blocks, kernels loaded
    before = free_bytes()
    caught: list[str] = []
    worker = threading.Thread(target=churn, args=(caught,))
    worker.start()
    worker.join()
    churn(caught)  # and in this thread
    lost = before - free_bytes()
    assert not [m for m in caught if "out-of-thread" in m or "could not be cleaned up" in m], caught
    assert lost < 64 * 2**20, f"{lost / 2**20:.0f} MiB of device memory not given back after dropping the results"
    fortran = np.asfortranarray(host[:100, :37])
    dev = cuda.to_device(fortran)
    assert dev.flags.f_contiguous and np.array_equal(cuda.to_host(dev), fortran)


@pytest.mark.cuda
def test_matmul_vectors_on_device_arrays(cuda):
    """matrix @ vector and vector @ matrix on CuPy, torch and pycuda arrays: the result is of the
    operands' kind with numpy.matmul's shape (the GEMV-class products run the skinny rungs)."""
    import pycuda.gpuarray as gpuarray

    rng = np.random.default_rng(secrets.randbits(32))
    mat = rng.standard_normal((300, 257)).astype(np.float32)
    x, y = rng.standard_normal(257).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    want_mx, want_ym = mat.astype(np.float64) @ x, y.astype(np.float64) @ mat

    def check(got, want, to_host):
        host = to_host(got)
        assert host.shape == want.shape
        np.testing.assert_allclose(host, want, rtol=1e-4, atol=1e-3)

    cp = pytest.importorskip("cupy")
    check(pg.matmul(cp.asarray(mat), cp.asarray(x)), want_mx, cp.asnumpy)
    check(pg.matmul(cp.asarray(y), cp.asarray(mat)), want_ym, cp.asnumpy)
    with cuda.runtime.active():
        gm, gx = gpuarray.to_gpu(mat), gpuarray.to_gpu(x)
        got = pg.matmul(gm, gx)
        assert isinstance(got, gpuarray.GPUArray)
        check(got, want_mx, lambda g: g.get())
        del gm, gx, got
    torch = pytest.importorskip("torch")
    tm, ty = torch.from_numpy(mat).cuda(), torch.from_numpy(y).cuda()
    out = torch.empty(257, device="cuda")
    assert pg.matmul(ty, tm, out=out) is out
    check(out, want_ym, lambda t: t.cpu().numpy())


@pytest.mark.cuda
def test_execute_refuses_operands_that_are_not_those_of_the_plan(cuda):
    """The low-level Backend.execute(plan, Call(...)) on operands of another shape than the
    plan's is an ArgumentError naming the operand (host and device operands), not a launch
    over memory the plan's sizes do not describe."""
    from polygemm.errors import ArgumentError
    from polygemm.problem import Call, normalize

    rng = np.random.default_rng(secrets.randbits(32))
    a, b = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((48, 32)).astype(np.float32)
    plan = cuda.plan(normalize(a, b))
    got = cuda.execute(plan, Call(a, b, None, None, 0, 0, 0, 0, 1.0, 0.0, None))
    assert reference_for(a, b).compare(got).ok
    with pytest.raises(ArgumentError, match=r"a .*\(64, 40\).*plan"):
        cuda.execute(plan, Call(a[:, :40], b[:40], None, None, 0, 0, 0, 0, 1.0, 0.0, None))
    cp = pytest.importorskip("cupy")
    da, db = cp.asarray(a), cp.asarray(b)
    dplan = cuda.plan(normalize(da, db))
    with pytest.raises(ArgumentError, match=r"b .*\(48, 16\).*plan"):
        cuda.execute(dplan, Call(da, db[:, :16], None, None, int(da.data.ptr), int(db.data.ptr), 0, 0, 1.0, 0.0, None))
