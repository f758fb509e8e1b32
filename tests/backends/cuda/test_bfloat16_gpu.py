"""The bfloat16 tensor-core path (marked ``cuda``)."""

from __future__ import annotations

import itertools
import secrets
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.testing import reference_for, run_conformance

from tests.helpers import cuda_or_skip


ml_dtypes = pytest.importorskip("ml_dtypes")


BF16 = np.dtype(ml_dtypes.bfloat16)


RUNGS = [s.name for s in kernel_specs().values() if "bfloat16" in s.dtypes]


DIMS = (1, 17, 65, 1000)


SHAPES = list(itertools.product(DIMS, DIMS, DIMS))  # (m, n, k)


ORDERS = [(oa, ob, oc) for oa in "CF" for ob in "CF" for oc in "CF"]


@pytest.fixture(scope="module")
def cuda():
    be = cuda_or_skip((8, 0), "mma.sync m16n8k16 .bf16")
    rt = be.runtime
    # every bfloat16 build this device can run, built and loaded in parallel (each must load)
    jobs = [(s.source, s.entry, m) for s in kernel_specs().values() if "bfloat16" in s.dtypes and s.runs_on(rt.sm)
            for m in s.builds() if m.get("PG_BF16")]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda j: rt.function(*j), jobs))
    return be


def runnable(cuda, variant):
    spec = kernel_specs().get(variant)
    if spec is not None and not spec.runs_on(cuda.runtime.sm):
        pytest.skip(f"{variant} is built for {spec.arch}; device is {cuda.runtime.arch}")


_cache: dict = {}


def data(m, n, k, out_dtype, scaled, batch=()):
    """Random bfloat16 operands (float values exactly representable), c of the result dtype,
    and the float64 reference with its bound, computed once per key."""
    key = (m, n, k, np.dtype(out_dtype).name, scaled, batch)
    if key not in _cache:
        seed = secrets.randbits(32)
        rng = np.random.default_rng(seed)
        a = rng.standard_normal(batch + (m, k)).astype(BF16)
        b = rng.standard_normal(batch + (k, n)).astype(BF16)
        c = rng.standard_normal(batch + (m, n)).astype(out_dtype) if scaled else None
        alpha, beta = (0.5, -1.25) if scaled else (1.0, 0.0)
        refs = [reference_for(a[i], b[i], None if c is None else c[i], alpha, beta, out_dtype=out_dtype) for i in np.ndindex(*batch)] \
            if batch else [reference_for(a, b, c, alpha, beta, out_dtype=out_dtype)]
        _cache[key] = (a, b, c, alpha, beta, refs, seed)
    return _cache[key]


def check_numpy(variant, m, n, k, orders, out_dtype, scaled, use_out=True):
    a, b, c, alpha, beta, refs, seed = data(m, n, k, out_dtype, scaled)
    A, B = np.asarray(a, order=orders[0]), np.asarray(b, order=orders[1])
    C = np.asarray(c, order=orders[2]) if c is not None else None
    if use_out:
        out = np.full((m, n), np.nan, out_dtype, order=orders[2])
        got = pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
        assert got is out
    else:
        got = pg.gemm(A, B, C, alpha=alpha, beta=beta, device="cuda", variant=variant, out_dtype=out_dtype)
        assert isinstance(got, np.ndarray) and got.dtype == np.dtype(out_dtype)
    res = refs[0].compare(got)
    assert res.ok, f"{variant} {m}x{n}x{k} orders={orders} out={np.dtype(out_dtype).name} seed={seed}: {res.message}"


def to_torch(torch, x: np.ndarray, order: str = "C"):
    t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16).cuda()
    return t.transpose(-1, -2).contiguous().transpose(-1, -2) if order == "F" else t


def to_numpy(torch, t) -> np.ndarray:
    t = t.cpu()
    return t.view(torch.int16).numpy().view(BF16) if t.dtype == torch.bfloat16 else t.numpy()


def _strided(torch, x: np.ndarray, offset: int, pad: int):
    """``x`` (row-major) on the device ``offset`` elements into a NaN buffer, rows ``pad`` longer."""
    rows, cols = x.shape
    ld = cols + pad
    buf = np.full(offset + ld * rows, np.nan, np.float32).astype(BF16)
    np.lib.stride_tricks.as_strided(buf[offset:], shape=x.shape, strides=(2 * ld, 2))[...] = x
    return torch.as_strided(to_torch(torch, buf), x.shape, (ld, 1), offset)


@pytest.mark.cuda
@pytest.mark.parametrize("variant", RUNGS + ["auto", "cublas"])
def test_numpy_awkward_shapes(cuda, variant):
    """All 64 shapes of {1, 17, 65, 1000}^3; layouts, output dtype, alpha/beta and out= rotate."""
    runnable(cuda, variant)
    for i, (m, n, k) in enumerate(SHAPES):
        check_numpy(variant, m, n, k, ORDERS[i % 8], (BF16, np.float32)[(i // 8) % 2], bool(i % 3 == 1), use_out=bool(i % 2))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", RUNGS + ["auto", "cublas"])
@pytest.mark.parametrize("shape", [(17, 65, 1000), (1000, 17, 65), (65, 1000, 17), (1000, 1000, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_numpy_every_layout(cuda, variant, shape):
    runnable(cuda, variant)
    for i, orders in enumerate(ORDERS):
        for out_dtype in (BF16, np.float32):
            check_numpy(variant, *shape, orders, out_dtype, bool(i % 2))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", [r for r in RUNGS if kernel_specs()[r].abi == "tma"])
def test_tma_rungs_run_bfloat16_themselves(cuda, variant):
    """Aligned problems run on the wgmma rung itself (tensor maps of BFLOAT16), not on v1."""
    runnable(cuda, variant)
    for m, n, k in [(64, 64, 64), (136, 200, 264), (1024, 1024, 1024)]:
        a, b, _, _, _, refs, seed = data(m, n, k, BF16, False)
        plan = pg.explain(a, b, device="cuda", variant=variant)
        assert plan.variant == variant and plan.problem.dtype == BF16, str(plan)
        res = refs[0].compare(pg.gemm(a, b, device="cuda", variant=variant))
        assert res.ok, f"{variant} {m}x{n}x{k} seed={seed}: {res.message}"


@pytest.mark.cuda
def test_auto_plan_names_bfloat16_and_the_fp16_measurements(cuda):
    a = np.ones((1024, 1024), BF16)
    plan = pg.explain(a, a)
    assert plan.backend == "cuda" and plan.variant.split(":")[0] in RUNGS, str(plan)
    assert "bfloat16 -> bfloat16" in str(plan) and "float16's measurements choose" in plan.reason


@pytest.mark.cuda
@pytest.mark.parametrize("variant", RUNGS + ["auto", "cublas"])
def test_torch_bfloat16_in_torch_out(cuda, variant):
    torch = pytest.importorskip("torch")
    runnable(cuda, variant)
    for i, ((m, n, k), orders) in enumerate(zip([(17, 65, 1000), (1000, 1, 17), (65, 1000, 65), (1, 17, 1), (1000, 1000, 17)] * 2,
                                                ORDERS + ORDERS[:2])):
        scaled = bool(i % 2)
        out_dtype = np.float32 if i % 3 == 2 else BF16
        a, b, c, alpha, beta, refs, seed = data(m, n, k, out_dtype, scaled)
        ta, tb = to_torch(torch, a, orders[0]), to_torch(torch, b, orders[1])
        tc = None
        if c is not None:
            tc = to_torch(torch, c, orders[2]) if out_dtype == BF16 else torch.from_numpy(np.asarray(c, order="C")).cuda()
        kw = {"out_dtype": torch.float32} if out_dtype == np.float32 else {}
        got = pg.gemm(ta, tb, tc, alpha=alpha, beta=beta, device="cuda", variant=variant, **kw)  # a new torch result
        assert isinstance(got, torch.Tensor) and got.is_cuda and got.dtype == (torch.float32 if kw else torch.bfloat16)
        res = refs[0].compare(to_numpy(torch, got))
        assert res.ok, f"{variant} {m}x{n}x{k} orders={orders} seed={seed}: {res.message}"
        out = torch.full((m, n), float("nan"), dtype=got.dtype, device="cuda")
        if orders[2] == "F":
            out = out.t().contiguous().t()
        assert pg.gemm(ta, tb, tc, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant) is out
        res = refs[0].compare(to_numpy(torch, out))
        assert res.ok, f"{variant} out= {m}x{n}x{k} orders={orders} seed={seed}: {res.message}"


@pytest.mark.cuda
def test_torch_in_place_and_k_zero(cuda):
    torch = pytest.importorskip("torch")
    a, b, c, alpha, beta, refs, seed = data(65, 17, 1000, BF16, True)
    tc = to_torch(torch, c)
    assert pg.gemm(to_torch(torch, a), to_torch(torch, b), tc, alpha=alpha, beta=beta, out=tc) is tc  # in place
    assert refs[0].compare(to_numpy(torch, tc)).ok
    c2 = np.random.default_rng(seed).standard_normal((17, 65)).astype(BF16)
    got = pg.gemm(torch.empty((17, 0), dtype=torch.bfloat16, device="cuda"), torch.empty((0, 65), dtype=torch.bfloat16, device="cuda"),
                  to_torch(torch, c2, "F"), beta=0.5)  # K = 0: beta * c by the bf16 copy kernel
    assert got.dtype == torch.bfloat16
    np.testing.assert_array_equal(to_numpy(torch, got).astype(np.float32), (0.5 * c2.astype(np.float32)).astype(BF16).astype(np.float32))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", [r for r in RUNGS if kernel_specs()[r].batch] + ["auto"])
def test_batched_3d(cuda, variant):
    torch = pytest.importorskip("torch")
    runnable(cuda, variant)
    for (bm, m, n, k), out_dtype in [((3, 17, 65, 1000), BF16), ((2, 1000, 17, 65), np.float32), ((4, 64, 128, 256), BF16)]:
        a, b, c, alpha, beta, refs, seed = data(m, n, k, out_dtype, True, (bm,))
        got = pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cuda", variant=variant, out_dtype=out_dtype)  # NumPy 3-D
        assert got.shape == (bm, m, n) and got.dtype == np.dtype(out_dtype)
        for i in range(bm):
            res = refs[i].compare(got[i])
            assert res.ok, f"{variant} batch {i} of {bm}x{m}x{n}x{k} seed={seed}: {res.message}"
        if out_dtype == BF16:  # torch 3-D, b broadcast over the batch
            tb = to_torch(torch, b[0])
            got_t = pg.gemm(to_torch(torch, a), tb, device="cuda", variant=variant)
            assert isinstance(got_t, torch.Tensor) and tuple(got_t.shape) == (bm, m, n) and got_t.dtype == torch.bfloat16
            host = to_numpy(torch, got_t)
            for i in range(bm):
                assert reference_for(a[i], b[0]).compare(host[i]).ok, f"{variant} torch batch {i} seed={seed}"


@pytest.mark.cuda
@pytest.mark.parametrize("case", [(4095, 260, 1001, 0), (1000, 65, 17, 1), (300, 129, 130, 3)], ids=lambda c: "x".join(map(str, c[:3])))
def test_unaligned_views_realign_and_row_split(cuda, case):
    """Rows at odd 2-byte phases: v1's PG_VEC=0 build (and its row split when M is large), and the TMA rungs on
    aligned copies of the operands (or, where the copies do not serve, handing the problem to v1); NaN around the
    views."""
    torch = pytest.importorskip("torch")
    m, n, k, pad = case
    a, b, _, _, _, refs, seed = data(m, n, k, BF16, False)
    for variant in RUNGS:
        if not kernel_specs()[variant].runs_on(cuda.runtime.sm):
            continue
        va, vb = _strided(torch, a, 1, pad), _strided(torch, b, 3, 5)
        plan = pg.explain(va, vb, device="cuda", variant=variant)
        if plan.variant.partition(":")[0] == variant and kernel_specs()[variant].abi == "tma":  # on aligned copies
            assert "aligned copy" in (plan.padding or ""), str(plan)
        else:  # v1's unaligned build, named or handed the problem
            assert str(plan.launch["float4"]).startswith("no"), str(plan)
        if m == 4095 and variant == "hgemm_v1_mma_ldmatrix":
            assert "row split" in plan.launch, str(plan)
        got = pg.gemm(va, vb, device="cuda", variant=variant)
        res = refs[0].compare(to_numpy(torch, got))
        assert res.ok, f"{variant} {case} seed={seed}: {res.message}"


@pytest.mark.cuda
def test_bfloat16_conformance(cuda):
    results = run_conformance("cuda", dtypes=["bfloat16"], quick=True)
    fails = [r for r in results if r.status == "fail"]
    assert results and not fails, fails[:5]
    assert {r.variant for r in results if r.status == "pass"} >= {"cublas", "hgemm_v1_mma_ldmatrix"}


@pytest.mark.cuda
def test_torch_bfloat16_on_a_side_stream_without_synchronize(cuda):
    """bfloat16 tensors (read through DLPack, then from the plan cache) run on torch's current
    stream: producer, polygemm and consumer on a side stream need no synchronize."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((1024, 768)).astype(BF16)
    b = rng.standard_normal((768, 512)).astype(BF16)
    ta, tb = to_torch(torch, a), to_torch(torch, b)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(3):  # the first call plans (DLPack), the others hit the plan cache
            x = ta * 2  # queued on `side`; exact in bfloat16
            y = pg.gemm(x, tb)
            host = to_numpy(torch, y)  # waits for `side` only
            assert reference_for((2 * a.astype(np.float32)).astype(BF16), b).compare(host).ok
