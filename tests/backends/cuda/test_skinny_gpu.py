"""The small-M / GEMV ladder (marked ``cuda``)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.testing import reference_for

from tests.helpers import cuda_or_skip


SKINNY = {name: s for name, s in kernel_specs().items() if s.ladder == "skinny"}


ORDERS = [(oa, ob, oc) for oa in "CF" for ob in "CF" for oc in "CF"]


#: (small side, long side, K): the small side is M, and mirrored N (test ids say which)
SKINNY_SHAPES = [(1, 1, 1), (1, 67, 8), (2, 33, 1), (15, 100, 77), (17, 45, 130), (16, 64, 128), (3, 257, 200),
                 (2, 1000, 64), (8, 96, 1000)]


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip((8, 0), "the skinny rungs")


def _np_dtype(variant: str) -> type:
    return {"float16": np.float16, "float64": np.float64}.get(SKINNY[variant].dtype, np.float32)


def _out_dtypes(variant: str) -> list[type]:
    return [np.float16, np.float32] if SKINNY[variant].dtype == "float16" else [_np_dtype(variant)]


_cache: dict = {}


def _data(m: int, n: int, k: int, dtype: type, out_dtype: type, scaled: bool):
    """Fresh data per (shape, dtypes, scaling) per session, with its float64 reference."""
    key = (m, n, k, dtype, out_dtype, scaled)
    if key not in _cache:
        seed = secrets.randbits(32)
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        c = rng.standard_normal((m, n)).astype(out_dtype) if scaled else None
        alpha, beta = (-0.75, 1.5) if scaled else (1.0, 0.0)
        _cache[key] = (a, b, c, alpha, beta, reference_for(a, b, c, alpha, beta, out_dtype=out_dtype), seed)
    return _cache[key]


def _check_numpy(variant: str, m: int, n: int, k: int, orders: tuple[str, str, str], out_dtype: type, scaled: bool) -> None:
    a, b, c, alpha, beta, ref, seed = _data(m, n, k, _np_dtype(variant), out_dtype, scaled)
    oa, ob, oc = orders
    A, B = np.asarray(a, order=oa), np.asarray(b, order=ob)
    C = np.asarray(c, order=oc) if c is not None else None
    out = np.full((m, n), np.nan, out_dtype, order=oc)
    plan = pg.explain(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
    assert plan.variant == variant, str(plan)
    pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
    res = ref.compare(out)
    assert res.ok, f"{variant} {m}x{n}x{k} orders={orders} out={np.dtype(out_dtype).name} scaled={scaled} seed={seed}: {res.message}"


def _mirror_ids(s: tuple[int, int, int]) -> str:
    return "x".join(map(str, s))


LONG_K = [(1, 40, 65537), (2, 33, 65537), (17, 70, 65537), (15, 9, 65537)]


def _strided_on_device(cp, x: np.ndarray, order: str, offset: int, pad: int, multiple: int = 1):
    """``x`` on the device as a view ``offset`` elements into a NaN-filled buffer, with leading
    dimension ``pad`` elements past its minimum, rounded up to ``multiple`` (any stray read
    shows up as NaN)."""
    rows, cols = x.shape
    inner, outer = (cols, rows) if order == "C" else (rows, cols)
    ld = -(-(inner + pad) // multiple) * multiple
    buf = np.full(offset + ld * outer, np.nan, x.dtype)
    strides = (ld * x.itemsize, x.itemsize) if order == "C" else (x.itemsize, ld * x.itemsize)
    np.lib.stride_tricks.as_strided(buf[offset:], shape=x.shape, strides=strides)[...] = x
    return cp.lib.stride_tricks.as_strided(cp.asarray(buf)[offset:], shape=x.shape, strides=strides)


@pytest.mark.cuda
@pytest.mark.parametrize("variant", list(SKINNY))
@pytest.mark.parametrize("shape", SKINNY_SHAPES, ids=_mirror_ids)
@pytest.mark.parametrize("mirror", [False, True], ids=["smallM", "smallN"])
def test_skinny_shapes_all_layouts(cuda, variant, shape, mirror):
    small, long_side, k = shape
    m, n = (long_side, small) if mirror else (small, long_side)
    for i, orders in enumerate(ORDERS):
        for out_dtype in _out_dtypes(variant):
            _check_numpy(variant, m, n, k, orders, out_dtype, scaled=bool(i % 2))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", list(SKINNY))
@pytest.mark.parametrize("shape", LONG_K, ids=_mirror_ids)
def test_skinny_long_k(cuda, variant, shape):
    """K = 65537: 1025 K steps of the float16 rung (2049 of the float32 one) over 16 warps,
    the last one partial; the small side on the rung's kernel M ("row" rung: M; "col": N)."""
    small, long_side, k = shape
    col = SKINNY[variant].layout == "col"
    m, n = (long_side, small) if col else (small, long_side)
    outs = _out_dtypes(variant)
    for i, orders in enumerate([("C", "C", "C"), ("C", "F", "C"), ("F", "C", "C"), ("F", "F", "C")]):
        _check_numpy(variant, m, n, k, orders, outs[i % len(outs)], scaled=bool(i % 2))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", list(SKINNY))
@pytest.mark.parametrize("shape", [(1, 300, 1001), (17, 130, 257), (2, 65, 8), (15, 64, 200), (8, 64, 256)], ids=_mirror_ids)
def test_skinny_strided_device_views(cuda, variant, shape):
    """Views into larger NaN-filled device buffers: odd offsets and leading dimensions take
    the unaligned build (PG_VEC=0; an operand aligned on its own still moves by vectors there);
    16-byte-aligned offsets and padded leading dimensions the vector build. Every layout of A
    and B, C strided too, alpha/beta, both outputs."""
    cp = pytest.importorskip("cupy")
    spec = SKINNY[variant]
    small, long_side, k = shape
    m, n = (long_side, small) if spec.layout == "col" else (small, long_side)
    dtype = _np_dtype(variant)
    lane = 16 // np.dtype(dtype).itemsize  # elements per 16 bytes
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    # (offsets, pads, leading-dimension multiples of A and B, the planner's float4 answer):
    # both unaligned; one of them unaligned (the other still takes vector loads); both aligned
    cases = [(1, 3, 5, 1, 1, 1, "no"), (3, 1, 7, 2, 1, 1, "no"), (1, 0, 3, lane, 1, lane, "no"), (0, 5, lane, 3, lane, 1, "no"),
             (0, 0, lane, 2 * lane, lane, lane, "yes"), (lane, 2 * lane, 3 * lane, lane, lane, lane, "yes")]
    for i, (off_a, off_b, pad_a, pad_b, mult_a, mult_b, vec) in enumerate(cases):
        for oa, ob in [("C", "C"), ("F", "C"), ("C", "F"), ("F", "F")]:
            out_dtype = _out_dtypes(variant)[i % len(_out_dtypes(variant))]
            c = rng.standard_normal((m, n)).astype(out_dtype)
            alpha, beta = (0.5, -1.25) if i % 2 else (1.0, 0.0)
            va = _strided_on_device(cp, a, oa, off_a, pad_a, mult_a)
            vb = _strided_on_device(cp, b, ob, off_b, pad_b, mult_b)
            vc = _strided_on_device(cp, c, "C", off_a, pad_a, mult_a) if beta else None
            out = vc if vc is not None else cp.full((m, n), cp.nan, dtype=out_dtype)
            plan = pg.explain(va, vb, vc, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
            assert plan.variant == variant, str(plan)
            # the planner takes a single row's or column's leading dimension as its length, and
            # a fresh out is compact: the vector build needs every dimension a multiple of 16 bytes
            if vec == "no" or all(x > 1 and x % lane == 0 for x in (m, n, k)):
                assert str(plan.launch["float4"]).startswith(vec), str(plan)
            got = pg.gemm(va, vb, vc, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
            assert got is out
            ref = reference_for(a, b, c if beta else None, alpha, beta, out_dtype=out_dtype)
            res = ref.compare(cp.asnumpy(out))
            assert res.ok, f"{variant} {m}x{n}x{k} {oa}{ob} offsets={off_a},{off_b} pads={pad_a},{pad_b}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", list(SKINNY))
def test_skinny_same_bits_every_run(cuda, variant):
    """The 16 warps' partial sums are added in a fixed order: two runs (with other work
    between them) give identical bits, in both B layouts."""
    cp = pytest.importorskip("cupy")
    dtype = _np_dtype(variant)
    rng = np.random.default_rng(secrets.randbits(32))
    col = SKINNY[variant].layout == "col"
    m, n, k = (4096, 7, 5000) if col else (7, 4096, 5000)
    a = cp.asarray(rng.standard_normal((m, k)).astype(dtype))
    for b in (cp.asarray(rng.standard_normal((k, n)).astype(dtype)), cp.asfortranarray(cp.asarray(rng.standard_normal((k, n)).astype(dtype)))):
        first = pg.gemm(a, b, device="cuda", variant=variant)
        pg.gemm(b.T, a.T, device="cuda", variant=variant)  # other work in between
        second = pg.gemm(a, b, device="cuda", variant=variant)
        assert cp.asnumpy(first).tobytes() == cp.asnumpy(second).tobytes()
        assert reference_for(cp.asnumpy(a), cp.asnumpy(b)).compare(cp.asnumpy(first)).ok


@pytest.mark.cuda
@pytest.mark.parametrize("variant", list(SKINNY))
def test_skinny_pycuda_arrays_in_place(cuda, variant):
    import pycuda.gpuarray as gpuarray

    dtype = _np_dtype(variant)
    rng = np.random.default_rng(secrets.randbits(32))
    col = SKINNY[variant].layout == "col"
    m, n, k = (333, 2, 4100) if col else (2, 333, 4100)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(dtype)
    with cuda.runtime.active():
        da, db, dc = gpuarray.to_gpu(a), gpuarray.to_gpu(b), gpuarray.to_gpu(c)
    got = pg.gemm(da, db, dc, alpha=2.0, beta=-1.0, out=dc, device="cuda", variant=variant)
    assert got is dc and pg.last_plan().variant == variant
    with cuda.runtime.active():
        host = dc.get()
        for buf in (da, db, dc):  # freed while the context is current (PyCUDA cannot free them outside it)
            buf.gpudata.free()
    res = reference_for(a, b, c, 2.0, -1.0).compare(host)
    assert res.ok, res.message


@pytest.mark.cuda
def test_skinny_gemv_1x8192x8192(cuda):
    """The 1x8192x8192 GEMV shape on device arrays, both B layouts, every skinny rung of each dtype."""
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    for variant, spec in SKINNY.items():
        dtype = _np_dtype(variant)
        x = rng.standard_normal((1, 8192)).astype(dtype)
        w = rng.standard_normal((8192, 8192)).astype(dtype)
        ref = reference_for(x, w)
        for dw in (cp.asarray(w), cp.asfortranarray(cp.asarray(w))):
            if spec.layout == "col":  # y^T = W^T x^T: the small side is N
                got = pg.gemm(dw.T, cp.asarray(x).T, device="cuda", variant=variant)
                res = ref.compare(cp.asnumpy(got).T)
            else:
                got = pg.gemm(cp.asarray(x), dw, device="cuda", variant=variant)
                res = ref.compare(cp.asnumpy(got))
            assert res.ok, f"{variant} {'F' if dw.flags.f_contiguous else 'C'}-ordered W: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", [v for v in SKINNY if v.startswith("skinny_v2_fp16")])
def test_skinny_fp16_window_staging(cuda, variant):
    """An N-contiguous B whose rows are off 16-byte boundaries (an odd N, a vocabulary such as
    50257, or an odd offset) is staged by skinny_v2_fp16's window copies: the aligned 16-byte
    chunks around each row, read back shifted by the row's offset. Every leading dimension
    residue mod 8, offsets 0..7 into NaN-filled buffers (a byte read outside the operand's own
    elements shows up as NaN), strips that end past N, K of 1, 63, 65 and 1000, the small side
    1 .. 32; both outputs; then the same bits on a second run."""
    cp = pytest.importorskip("cupy")
    spec = SKINNY[variant]
    col = spec.layout == "col"
    rng = np.random.default_rng(secrets.randbits(32))
    cases = [(1, 67, 1, 1, 0), (2, 45, 63, 2, 1), (9, 101, 65, 3, 2), (16, 33, 1000, 4, 3), (17, 129, 200, 5, 5),
             (32, 250, 130, 6, 6), (1, 5003, 1111, 7, 7), (3, 50257, 64, 0, 1)]
    for i, (small, long_side, k, pad, off) in enumerate(cases):
        m, n = (long_side, small) if col else (small, long_side)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        out_dtype = (np.float16, np.float32)[i % 2]
        # the long operand N-contiguous for the rung: B row-major for "row", A column-major for "col"
        va = _strided_on_device(cp, a, "F" if col else "C", off if col else 0, pad if col else 1)
        vb = _strided_on_device(cp, b, "C", 0 if col else off, 1 if col else pad)
        long_ld = (va.strides[1] if col else vb.strides[0]) // 2
        assert long_ld % 8 or off % 8, "the long operand must be off 16-byte rows for this test"
        out = cp.full((m, n), cp.nan, dtype=out_dtype)
        plan = pg.explain(va, vb, out=out, device="cuda", variant=variant)
        assert plan.variant == variant and str(plan.launch["float4"]).startswith("no"), str(plan)
        got = pg.gemm(va, vb, out=out, device="cuda", variant=variant)
        first = cp.asnumpy(got)
        res = reference_for(a, b, out_dtype=out_dtype).compare(first)
        assert res.ok, f"{variant} {m}x{n}x{k} ld pad {pad} offset {off}: {res.message}"
        again = cp.asnumpy(pg.gemm(va, vb, out=cp.empty_like(out), device="cuda", variant=variant))
        assert again.tobytes() == first.tobytes(), f"{variant} {m}x{n}x{k}: another run gave other bits"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", [v for v in SKINNY if SKINNY[v].walks_strips])
def test_skinny_walked_strips(cuda, variant):
    """A rung whose threadblocks walk the 32-column strips: more strips than the grid has
    threadblocks (some blocks with one strip more than others, the last strip partial), one or
    two threadblock rows, K shorter than the warps (warps with no K step of their own), exactly
    one step each, and more steps a warp than its ring has stages (the language-model heads'
    regime, 33 and 65 of them); aligned and window-staged B (the C-ordered operands have an
    odd long side), both outputs, alpha/beta, outputs poisoned with NaN; the same bits on a
    second run."""
    cp = pytest.importorskip("cupy")
    col = SKINNY[variant].layout == "col"
    rng = np.random.default_rng(secrets.randbits(32))
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for i, (small, long_side, k) in enumerate([(1, 2 * 32 * sms + 45, 1), (9, 3 * 32 * sms + 7, 100),
                                               (17, 32 * sms + 33, 512), (4, 9000, 1000), (16, 8192, 8),
                                               (1, 32 * sms + 33, 4100), (9, 2 * 32 * sms + 1, 2100)]):
        m, n = (long_side, small) if col else (small, long_side)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        out_dtype = (np.float16, np.float32)[i % 2]
        c = rng.standard_normal((m, n)).astype(out_dtype)
        alpha, beta = (1.0, 0.0) if i % 2 else (-0.5, 2.0)
        for da, db in ((cp.asarray(a), cp.asarray(b)), (cp.asfortranarray(cp.asarray(a)), cp.asfortranarray(cp.asarray(b)))):
            dc = cp.asarray(c) if beta else None
            out = cp.full((m, n), cp.nan, dtype=out_dtype)
            plan = pg.explain(da, db, dc, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant)
            assert plan.variant == variant, str(plan)
            got = cp.asnumpy(pg.gemm(da, db, dc, alpha=alpha, beta=beta, out=out, device="cuda", variant=variant))
            res = reference_for(a, b, c if beta else None, alpha, beta, out_dtype=out_dtype).compare(got)
            assert res.ok, f"{variant} {m}x{n}x{k} {'F' if da.flags.f_contiguous else 'C'}: {res.message}"
            again = pg.gemm(da, db, dc, alpha=alpha, beta=beta, out=cp.empty_like(out), device="cuda", variant=variant)
            assert cp.asnumpy(again).tobytes() == got.tobytes(), f"{variant} {m}x{n}x{k}: another run gave other bits"


SPLITTING = [v for v in SKINNY if SKINNY[v].split_step]


@pytest.mark.cuda
@pytest.mark.parametrize("variant", SPLITTING)
@pytest.mark.parametrize("shape,splits", [((2, 512, 20000), 8), ((1, 33, 9001), 3), ((16, 70, 65537), 16), ((5, 1000, 4096), 2),
                                          ((32, 40, 30000), 12)], ids=lambda x: _mirror_ids(x) if isinstance(x, tuple) else f"s{x}")
def test_skinny_split_k(cuda, variant, shape, splits):
    """K cut by the kernel into slices of whole steps (K not a multiple of the slices, the last
    slice shorter, odd K through the unaligned build), every layout, both outputs, alpha/beta
    (applied once, by the reduction), outputs poisoned with NaN; the same bits on a second run."""
    small, long_side, k = shape
    m, n = (long_side, small) if SKINNY[variant].layout == "col" else (small, long_side)
    name = f"{variant}:split_k={splits}"
    for i, orders in enumerate(ORDERS):
        out_dtype = _out_dtypes(variant)[i % len(_out_dtypes(variant))]
        a, b, c, alpha, beta, ref, seed = _data(m, n, k, _np_dtype(variant), out_dtype, bool(i % 3 == 1))
        oa, ob, oc = orders
        A, B = np.asarray(a, order=oa), np.asarray(b, order=ob)
        C = np.asarray(c, order=oc) if c is not None else None
        out = np.full((m, n), np.nan, out_dtype, order=oc)
        plan = pg.explain(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=name)
        assert plan.variant == name and "split-K" in plan.launch, str(plan)
        pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=name)
        res = ref.compare(out)
        assert res.ok, f"{name} {m}x{n}x{k} orders={orders} seed={seed}: {res.message}"
        again = np.full((m, n), np.nan, out_dtype, order=oc)
        pg.gemm(A, B, C, alpha=alpha, beta=beta, out=again, device="cuda", variant=name)
        assert again.tobytes() == out.tobytes(), f"{name} {m}x{n}x{k}: another run gave other bits"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", SPLITTING)
def test_skinny_batch_on_the_grid(cuda, variant):
    """A strided batch of skinny products in one launch (PG_BATCH: blockIdx.z the matrix),
    a shared B broadcast over the batch, alpha/beta."""
    rng = np.random.default_rng(secrets.randbits(32))
    col = SKINNY[variant].layout == "col"
    dtype = _np_dtype(variant)
    for small, long_side, k in [(3, 100, 257), (16, 64, 1000)]:
        m, n = (long_side, small) if col else (small, long_side)
        a = rng.standard_normal((5, m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        out_dtype = _out_dtypes(variant)[-1]  # float32 (float16 and float32 inputs), float64 (float64 inputs)
        c = rng.standard_normal((5, m, n)).astype(out_dtype)
        out = np.full((5, m, n), np.nan, out_dtype)
        plan = pg.explain(a, b, c, alpha=0.5, beta=-1.0, out=out, device="cuda", variant=variant)
        assert plan.variant == variant and "batch" in plan.launch, str(plan)
        pg.gemm(a, b, c, alpha=0.5, beta=-1.0, out=out, device="cuda", variant=variant)
        for i in range(5):
            res = reference_for(a[i], b, c[i], 0.5, -1.0, out_dtype=out_dtype).compare(out[i])
            assert res.ok, f"{variant} batch member {i} of 5x{m}x{n}x{k}: {res.message}"


@pytest.mark.cuda
def test_auto_splits_a_long_k_over_a_small_output(cuda):
    """256 x 2 x 131072 in fp16 (A K-contiguous, as a transposed weight): 8 strips unsplit, so
    auto takes a skinny rung's split build, and the result is right."""
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((131072, 256)).astype(np.float16).T
    b = rng.standard_normal((131072, 2)).astype(np.float16)
    plan = pg.explain(a, b, device="cuda")
    assert "split_k=" in plan.variant and plan.variant.startswith("skinny"), str(plan)
    res = reference_for(a, b, None, 1.0, 0.0).compare(pg.gemm(a, b, device="cuda"))
    assert res.ok, res.message
