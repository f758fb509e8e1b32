"""The float16 tensor-core path (marked ``cuda``)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import KERNEL_DIR, kernel_specs
from polygemm.testing import reference_for, run_conformance

from tests.helpers import cuda_or_skip


PROBE = KERNEL_DIR / "hgemm" / "ldmatrix_probe.cu"


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip((8, 0), "mma.sync m16n8k16")


def expected_ldmatrix(smem: np.ndarray, offsets: np.ndarray, num: int, trans: bool) -> np.ndarray:
    """Each lane's registers per the PTX ISA: matrix i's row r starts at offsets[8*i + r];
    non-transposed, lane t holds row t//4, columns 2*(t%4) and +1 (low half first);
    transposed, rows 2*(t%4) and +1 of column t//4."""
    out = np.zeros((32, 4), np.uint32)
    for i in range(num):
        mat = np.stack([smem[offsets[8 * i + r]: offsets[8 * i + r] + 8] for r in range(8)]).astype(np.uint32)
        for t in range(32):
            if trans:
                lo, hi = mat[2 * (t % 4), t // 4], mat[2 * (t % 4) + 1, t // 4]
            else:
                lo, hi = mat[t // 4, 2 * (t % 4)], mat[t // 4, 2 * (t % 4) + 1]
            out[t, i] = lo | (hi << 16)
    return out


FP16_VARIANTS = [s.name for s in kernel_specs().values() if s.dtype == "float16"]


SHAPES = [(1, 1, 1), (8, 8, 8), (17, 33, 9), (127, 129, 131)]


_cache: dict = {}


def _data(m, n, k, out_dtype, scaled):
    key = (m, n, k, out_dtype, scaled)
    if key not in _cache:
        seed = secrets.randbits(32)
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = rng.standard_normal((m, n)).astype(out_dtype) if scaled else None
        alpha, beta = (0.5, -1.25) if scaled else (1.0, 0.0)
        _cache[key] = (a, b, c, alpha, beta, reference_for(a, b, c, alpha, beta, out_dtype=out_dtype), seed)
    return _cache[key]


def _check(variant, m, n, k, orders, out_dtype, scaled):
    a, b, c, alpha, beta, ref, seed = _data(m, n, k, out_dtype, scaled)
    A, B = np.asarray(a, order=orders[0]), np.asarray(b, order=orders[1])
    out = np.full((m, n), np.nan, out_dtype, order=orders[2])
    C = np.asarray(c, order=orders[2]) if c is not None else None
    pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
    res = ref.compare(out)
    assert res.ok, f"{variant} {m}x{n}x{k} orders={orders} out={np.dtype(out_dtype).name} seed={seed}: {res.message}"


ORDERS = [(oa, ob, oc) for oa in "CF" for ob in "CF" for oc in "CF"]


LARGE = [(1000, 3000, 2000), (4095, 4097, 4093), (4096, 4096, 4096)]


TMA_VARIANTS = [s.name for s in kernel_specs().values() if s.dtype == "float16" and s.abi == "tma"]


def _strided_on_device(cp, x: np.ndarray, order: str, offset: int, pad: int):
    """``x`` on the device as a view ``offset`` elements into a buffer, with leading dimension
    (row length for C order, column length for F order) ``pad`` elements past its minimum;
    the rest of the buffer is NaN, so any stray read shows up in the result."""
    rows, cols = x.shape
    inner, outer = (cols, rows) if order == "C" else (rows, cols)
    ld = inner + pad
    buf = np.full(offset + ld * outer, np.nan, x.dtype)
    strides = (ld * x.itemsize, x.itemsize) if order == "C" else (x.itemsize, ld * x.itemsize)
    np.lib.stride_tricks.as_strided(buf[offset:], shape=x.shape, strides=strides)[...] = x
    return cp.lib.stride_tricks.as_strided(cp.asarray(buf)[offset:], shape=x.shape, strides=strides)


# (m, n, k, lda padding, row sets expected): p * lda is the first multiple of 8 halves, and
# M is large enough for the planner to split (row_split_sets). k crosses many K-tiles; edge
# tiles (the last row set's partial threadblock tile, n past a multiple of 128) move back
# inside the matrix and store only their own rows and columns; n = 3 is narrower than a tile.
ROW_SPLIT_CASES = [(4095, 260, 1001, 0, 8), (4095, 3, 700, 1, 8), (4095, 130, 77, 2, 8), (1023, 129, 130, 0, 4),
                   (511, 200, 300, 0, 2), (300, 136, 96, 0, 1)]


STORE_VARIANTS = [s.name for s in kernel_specs().values() if s.tma_store]


@pytest.mark.cuda
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "pitch32", "shuffled"])
def test_ldmatrix_fragment_mapping(cuda, num, trans, layout):
    import pycuda.gpuarray as gpuarray

    rng = np.random.default_rng(secrets.randbits(32))
    smem = rng.permutation(1024).astype(np.uint16)  # unique values: any misplacement shows
    if layout == "contiguous":
        offsets = np.arange(32) * 8
    elif layout == "pitch32":  # rows of a 32-wide tile: the seed's conflicted layout
        offsets = (np.arange(32) % 8) * 32 + (np.arange(32) // 8) * 8
    else:
        offsets = rng.choice(128, size=32, replace=False) * 8
    offsets = offsets.astype(np.int32)
    rt = cuda.runtime
    with rt.active():
        fn = rt.function(PROBE, "ldmatrix_probe")
        bufs = [gpuarray.to_gpu(smem), gpuarray.to_gpu(offsets), gpuarray.zeros(32 * 4, np.uint32)]
        fn(*bufs, np.int32(int(trans)), np.int32(num), block=(32, 1, 1), grid=(1, 1))
        out = bufs[2].get()
        for buf in bufs:  # freed while the context is current (PyCUDA cannot free them outside it)
            buf.gpudata.free()
    got = out.reshape(32, 4)[:, :num]
    want = expected_ldmatrix(smem, offsets, num, trans)[:, :num]
    bad = np.argwhere(got != want)
    assert not len(bad), f"lane/register mismatches {bad[:4].tolist()}: got {got[tuple(bad[0])]:#x}, expected {want[tuple(bad[0])]:#x}"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", FP16_VARIANTS + ["cublas"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("out_dtype", [np.float16, np.float32], ids=["f16out", "f32out"])
def test_fp16_small_all_layouts(cuda, variant, shape, out_dtype):
    for i, orders in enumerate(ORDERS):
        _check(variant, *shape, orders, out_dtype, bool(i % 2))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", FP16_VARIANTS)
@pytest.mark.parametrize("shape", LARGE, ids=lambda s: "x".join(map(str, s)))
def test_fp16_large(cuda, variant, shape):
    _check(variant, *shape, ("C", "C", "C"), np.float16, False)
    _check(variant, *shape, ("F", "C", "C"), np.float16, True)
    _check(variant, *shape, ("C", "F", "F"), np.float32, True)


@pytest.mark.cuda
def test_auto_selects_mma_for_fp16(cuda):
    a = np.ones((256, 256), np.float16)
    plan = pg.explain(a, a)
    assert plan.backend == "cuda" and plan.variant.partition(":split_k=")[0] in FP16_VARIANTS, str(plan)


@pytest.mark.cuda
def test_fp16_device_arrays(cuda):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((300, 257)).astype(np.float16)
    b = rng.standard_normal((257, 129)).astype(np.float16)
    da, db = cp.asarray(a), cp.asfortranarray(cp.asarray(b))
    out = cp.full((300, 129), cp.nan, dtype=cp.float16)
    assert pg.gemm(da, db, out=out) is out
    assert reference_for(a, b).compare(cp.asnumpy(out)).ok
    out32 = cp.full((300, 129), cp.nan, dtype=cp.float32)
    pg.gemm(da, db, out=out32)
    assert reference_for(a, b, out_dtype=np.float32).compare(cp.asnumpy(out32)).ok


@pytest.mark.cuda
def test_fp16_unaligned_views(cuda):
    rng = np.random.default_rng(secrets.randbits(32))
    buf = rng.standard_normal(1 + 77 * 93).astype(np.float16)
    a = buf[1:].reshape(77, 93)  # 2-byte offset, odd leading dimension
    b = rng.standard_normal((93, 45)).astype(np.float16)
    for variant in FP16_VARIANTS:
        assert reference_for(a, b).compare(pg.gemm(a, b, device="cuda", variant=variant)).ok


@pytest.mark.cuda
def test_fp16_conformance(cuda):
    results = run_conformance("cuda", dtypes=["float16"], quick=True)
    fails = [r for r in results if r.status == "fail"]
    assert results and not fails, fails[:5]


@pytest.mark.cuda
@pytest.mark.parametrize("variant", TMA_VARIANTS)
@pytest.mark.parametrize("shape", [(8, 8, 8), (64, 64, 64), (136, 200, 264), (77, 136, 72), (1000, 3000, 2000), (4096, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
def test_tma_rung_runs_itself_on_aligned_problems(cuda, variant, shape):
    spec = kernel_specs()[variant]
    sm = cuda.runtime.cc[0] * 10 + cuda.runtime.cc[1]
    if not spec.runs_on(sm):
        pytest.skip(f"{variant} is built for {spec.arch}; device is sm_{sm}")
    m, n, k = shape
    for i, orders in enumerate(ORDERS):
        out_dtype = np.float32 if i % 3 == 2 else np.float16
        a, b, c, alpha, beta, ref, seed = _data(m, n, k, out_dtype, bool(i % 2))
        A, B = np.asarray(a, order=orders[0]), np.asarray(b, order=orders[1])
        out = np.full((m, n), np.nan, out_dtype, order=orders[2])
        C = np.asarray(c, order=orders[2]) if c is not None else None
        plan = pg.explain(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
        # a 32-wide B tile reads its B K-major only: after the operand swap (C stored the other
        # way than the row computes) its B is Aᵀ, K-major for a row-major A; else B itself
        swap = ("row" if orders[2] == "C" else "col") != spec.layout
        k_major = (orders[0] == "C" if swap else orders[1] == "F") if spec.k_major_b else True
        if not any(x % 8 for x in (m, n, k)) and not k_major:
            assert plan.variant != variant and "K-major only" in str(plan), str(plan)
        elif not any(x % 8 for x in (m, n, k)):  # every stride a multiple of 16 bytes
            assert plan.variant == variant, str(plan)
        elif orders[0] == "F" and k_major:  # A column-major with ld = 77: the rung reads an aligned copy of it
            assert plan.variant == variant and "a (" in plan.padding and "aligned copy" in plan.padding, str(plan)
        elif orders[0] == "F":  # ... unless the copy's layout is one its B tile cannot read
            assert plan.variant != variant and "runs instead" in str(plan), str(plan)
        pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
        res = ref.compare(out)
        assert res.ok, f"{variant} {shape} orders={orders} seed={seed}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("shape", [(300, 200, 150), (33, 260, 100), (257, 129, 64)], ids=lambda s: "x".join(map(str, s)))
def test_fp16_every_row_shift(cuda, orders, shape):
    """Device operands whose rows start at every 2-byte phase of a 16-byte line (the
    realigning PG_VEC=0 path), across threadblock-tile and K-tile edges, NaN around them."""
    cp = pytest.importorskip("cupy")
    m, n, k = shape
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ref = reference_for(a, b)
    for offset, pad_a, pad_b in [(1, 1, 3), (3, 5, 7), (6, 2, 1), (7, 7, 6), (0, 3, 0)]:
        va = _strided_on_device(cp, a, orders[0], offset, pad_a)
        vb = _strided_on_device(cp, b, orders[1], (8 - offset) % 8, pad_b)
        plan = pg.explain(va, vb, device="cuda", variant="hgemm_v1_mma_ldmatrix")
        assert str(plan.launch["float4"]).startswith("no"), str(plan)
        out = cp.full((m, n), cp.nan, dtype=cp.float16)
        pg.gemm(va, vb, out=out, device="cuda", variant="hgemm_v1_mma_ldmatrix")
        res = ref.compare(cp.asnumpy(out))
        assert res.ok, f"{shape} orders={orders} offset={offset} pads={pad_a},{pad_b}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("pad", [0, 3], ids=["aligned", "odd-pitch"])
def test_mma_rung_batches_in_every_layout(cuda, orders, pad):
    """hgemm_v1's batched builds (blockIdx.z the matrix; A and B moved to it where they are read): a batch of
    3 in each operand layout, rows 8-aligned (PG_VEC=1) or at an odd pitch (PG_VEC=0), B one per matrix or
    one shared by the batch (batch stride 0), NaN around every matrix."""
    cp = pytest.importorskip("cupy")
    bm, m, n, k = 3, 296, 136, 200  # multiples of 8 (16-byte rows in every layout unpadded), past the tiles' edges
    rng = np.random.default_rng(secrets.randbits(32))

    def batch_of(rows, cols, order, count):  # matrices of rows x cols laid out in `order`, each row `pad` longer
        vals = rng.standard_normal((count, rows, cols)).astype(np.float16)
        if order == "C":
            held = cp.full((count, rows, cols + pad), cp.nan, dtype=cp.float16)
            held[:, :, :cols] = cp.asarray(vals)
            return vals, held[:, :, :cols]
        held = cp.full((count, cols, rows + pad), cp.nan, dtype=cp.float16)
        held[:, :, :rows] = cp.asarray(vals.transpose(0, 2, 1))
        return vals, held[:, :, :rows].transpose(0, 2, 1)

    a, va = batch_of(m, k, orders[0], bm)
    for count in (bm, 1):
        b, vb = batch_of(k, n, orders[1], count)
        plan = pg.explain(va, vb, device="cuda", variant="hgemm_v1_mma_ldmatrix")
        assert "PG_BATCH" in str(plan) or "batch" in plan.launch, str(plan)  # one launch for the batch
        assert plan.launch["float4"] == ("yes" if pad == 0 else "no (unaligned pointer or leading dimension)"), str(plan)
        out = cp.full((bm, m, n), cp.nan, dtype=cp.float16)
        pg.gemm(va, vb, out=out, device="cuda", variant="hgemm_v1_mma_ldmatrix")
        got = cp.asnumpy(out)
        for i in range(bm):
            res = reference_for(a[i], b[i % count]).compare(got[i])
            assert res.ok, f"orders={orders} pad={pad} batch of B {count}, matrix {i}: {res.message}"


@pytest.mark.cuda
def test_mma_peak_probe_counts_every_mma(cuda):
    from polygemm.apps.ceiling import PROBE_CHAINS, run_probe

    rt = cuda.runtime
    with rt.active():
        out, launch = run_probe(rt, blocks=3, iters=37, x=0.5)
        launch()
        got = out.get()
    assert np.all(got == PROBE_CHAINS * 4 * 37 * 16 * 0.25), got[:4]


@pytest.mark.cuda
@pytest.mark.parametrize("case", ROW_SPLIT_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}-p{c[4]}")
def test_fp16_row_split(cuda, case):
    """PG_ROW_SPLIT=1: A's rows in sets of one 16-byte phase, K extended by that phase. Every
    pointer phase of A and B, NaN around the views (the columns before a row's first element
    are read and must be zeroed), alpha/beta with a strided C, float16 and float32 out."""
    cp = pytest.importorskip("cupy")
    m, n, k, pad_a, sets = case
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float16)
    for i, (off_a, off_b, pad_b) in enumerate([(1, 0, 3), (3, 5, 0), (6, 2, 1), (7, 7, 6), (0 if sets > 1 else 5, 3, 0)]):
        out_dtype = np.float32 if i == 2 else np.float16
        alpha, beta = (0.5, -1.25) if i % 2 else (1.0, 0.0)
        va = _strided_on_device(cp, a, "C", off_a, pad_a)
        vb = _strided_on_device(cp, b, "C", off_b, pad_b)
        vc = _strided_on_device(cp, c.astype(out_dtype), "C", 3, 5) if beta else None
        plan = pg.explain(va, vb, vc, alpha=alpha, beta=beta, device="cuda", variant="hgemm_v1_mma_ldmatrix",
                          out=cp.empty((m, n), out_dtype))
        assert plan.launch.get("row split", "").startswith(f"{sets} sets"), str(plan)
        out = cp.full((m, n), cp.nan, dtype=out_dtype)
        pg.gemm(va, vb, vc, alpha=alpha, beta=beta, out=out, device="cuda", variant="hgemm_v1_mma_ldmatrix")
        ref = reference_for(a, b, c.astype(out_dtype) if beta else None, alpha, beta, out_dtype=out_dtype)
        res = ref.compare(cp.asnumpy(out))
        assert res.ok, f"{case} offsets={off_a},{off_b} pad_b={pad_b} out={np.dtype(out_dtype).name}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", STORE_VARIANTS)
@pytest.mark.parametrize("shape", [(200, 136, 72), (1000, 1000, 512), (16, 64, 64), (130, 8, 40)], ids=lambda s: "x".join(map(str, s)))
def test_tma_store_writes_the_view_and_nothing_past_its_edges(cuda, variant, shape):
    """A TMA-store row (C through a tensor map, HG2_EPILOGUE=3) writes an ``out`` that is a
    view into a larger device buffer (row pitch past N, rows past M, an offset start): every
    element of the view, none of the buffer around it; fp16 and bf16, beta 0 (the TMA store)
    and beta != 0 (the staged stores)."""
    cp = pytest.importorskip("cupy")
    sm = cuda.runtime.cc[0] * 10 + cuda.runtime.cc[1]
    if not kernel_specs()[variant].runs_on(sm):
        pytest.skip(f"{variant} needs sm_90a")
    m, n, k = shape
    rng = np.random.default_rng(secrets.randbits(32))
    for dtype in ("float16", "bfloat16"):
        ml = pytest.importorskip("ml_dtypes") if dtype == "bfloat16" else None
        npdt = np.dtype(ml.bfloat16) if ml else np.dtype(np.float16)
        a = rng.standard_normal((m, k)).astype(npdt)
        b = rng.standard_normal((k, n)).astype(npdt)
        for beta in (0.0, 0.75):
            c = rng.standard_normal((m, n)).astype(npdt)
            buf = cp.full((m + 3, n + 24 + 8), 7.0, dtype=cp.float32).astype(cp.int16)  # a sentinel bit pattern
            sentinel = int(buf[0, 0])
            out_u16 = buf[1:m + 1, 8:n + 8]  # 16-byte aligned start (8 columns in), pitch n + 32
            out_u16[...] = cp.asarray(c.view(np.int16))
            out = out_u16.view(cp.float16) if dtype == "float16" else None
            if out is None:  # bf16 device arrays through torch (CuPy has no bfloat16)
                torch = pytest.importorskip("torch")
                tbuf = torch.as_tensor(buf, device="cuda").view(torch.bfloat16)
                out = tbuf[1:m + 1, 8:n + 8]
                da = torch.as_tensor(cp.asarray(a.view(np.int16)), device="cuda").view(torch.bfloat16)
                db = torch.as_tensor(cp.asarray(b.view(np.int16)), device="cuda").view(torch.bfloat16)
            else:
                da, db = cp.asarray(a), cp.asarray(b)
            plan = pg.explain(da, db, out, alpha=1.5, beta=beta, out=out, device="cuda", variant=variant)
            assert plan.variant == variant, str(plan)
            pg.gemm(da, db, out, alpha=1.5, beta=beta, out=out, device="cuda", variant=variant)
            cp.cuda.Device().synchronize()
            got = cp.asnumpy(buf)
            res = reference_for(a, b, c, 1.5, beta).compare(got[1:m + 1, 8:n + 8].view(npdt))
            assert res.ok, f"{variant} {shape} {dtype} beta={beta}: {res.message}"
            around = got.copy()
            around[1:m + 1, 8:n + 8] = sentinel
            assert (around == sentinel).all(), f"{variant} {shape} {dtype} beta={beta}: wrote outside the view"
