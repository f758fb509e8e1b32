"""Split-K, the cost model's choices and operands past 2**31 elements (marked ``cuda``)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.testing import reference_for

from tests.helpers import cuda_or_skip


SPLITTABLE = [s.name for s in kernel_specs().values() if s.batch and s.predicated and s.split_k and not s.max_m]


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip()


def _runs_here(cuda, variant: str) -> None:
    spec = kernel_specs()[variant]
    sm = cuda.runtime.cc[0] * 10 + cuda.runtime.cc[1]
    if not spec.runs_on(sm):
        pytest.skip(f"{variant} needs {spec.arch or spec.min_sm}; device is sm_{sm}")


def _operands(m, n, k, dtype, out_dtype, scaled, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(out_dtype) if scaled else None
    alpha, beta = (0.75, -1.5) if scaled else (1.0, 0.0)
    return a, b, c, alpha, beta


# (m, n, k, splits): skinny and square outputs, K a multiple of the slices; edges of every tile
CASES = [(1, 64, 4096, 4), (2, 17, 2048, 8), (15, 1000, 8192, 16), (17, 257, 1024, 2), (512, 512, 16384, 8), (130, 65, 3072, 3),
         (64, 64, 4096, 64), (257, 300, 640, 5)]


STREAMK = [s.name for s in kernel_specs().values() if s.streamk]


@pytest.mark.cuda
@pytest.mark.parametrize("variant", SPLITTABLE)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-s{c[3]}")
def test_split_k_matches_the_reference_on_every_layout(cuda, variant, case):
    _runs_here(cuda, variant)
    m, n, k, splits = case
    dtype = kernel_specs()[variant].dtype
    seed = secrets.randbits(32)
    for i, orders in enumerate(["CCC", "FCC", "CFF", "FFC"]):
        # float16 products stored both ways (float16 and the float32 they accumulate in); others in their own dtype
        out_dtype = np.dtype(np.float32) if dtype == "float16" and i % 2 else np.dtype(dtype)
        a, b, c, alpha, beta = _operands(m, n, k, dtype, out_dtype, i >= 2, seed + i)
        ref = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype)
        A, B = np.asarray(a, order=orders[0]), np.asarray(b, order=orders[1])
        C = np.asarray(c, order=orders[2]) if c is not None else None
        out = np.full((m, n), np.nan, out_dtype, order=orders[2])
        name = f"{variant}:split_k={splits}"
        plan = pg.explain(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=name)
        if plan.variant != name:  # a TMA rung hands operands it cannot describe to another rung
            assert "cannot" in str(plan), str(plan)
            continue
        assert "split-K" in plan.launch, str(plan)
        pg.gemm(A, B, C, alpha=alpha, beta=beta, out=out, device="cuda", variant=name)
        res = ref.compare(out)
        assert res.ok, f"{name} {m}x{n}x{k} orders={orders} seed={seed + i}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", SPLITTABLE)
def test_split_k_is_bitwise_reproducible_on_device_arrays(cuda, variant):
    _runs_here(cuda, variant)
    cp = pytest.importorskip("cupy")
    dtype = kernel_specs()[variant].dtype
    a, b, c, _, _ = _operands(256, 384, 8192, dtype, dtype, True, secrets.randbits(32))
    da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    name = f"{variant}:split_k=8"
    first = pg.gemm(da, db, dc, alpha=0.5, beta=2.0, device="cuda", variant=name)
    again = [pg.gemm(da, db, dc, alpha=0.5, beta=2.0, device="cuda", variant=name) for _ in range(3)]
    assert type(first) is cp.ndarray
    for x in again:
        assert cp.array_equal(x.view(cp.uint16 if dtype == "float16" else cp.uint32),
                              first.view(cp.uint16 if dtype == "float16" else cp.uint32)), "split-K results differ run to run"
    ref = reference_for(a, b, c, 0.5, 2.0)
    assert ref.compare(cp.asnumpy(first)).ok


@pytest.mark.cuda
@pytest.mark.parametrize("variant,shape", [("cm_v13_cp_async_narrow_tile", (4096, 4096, 1024)), ("hgemm_v1_mma_ldmatrix", (4096, 4096, 512))],
                         ids=["cm_v13", "hgemm_v1"])
def test_split_k_on_a_grid_too_large_to_be_resident(cuda, variant, shape):
    """More threadblocks than the device holds at once: the last threadblock of each tile
    reduces it (not the whole grid together); right on sampled rows, with c and alpha/beta,
    the same bits twice."""
    cp = pytest.importorskip("cupy")
    _runs_here(cuda, variant)
    m, n, k = shape
    dtype = kernel_specs()[variant].dtype
    rng = np.random.default_rng(secrets.randbits(32))
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
    da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    name = f"{variant}:split_k=2"
    first = pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, device="cuda", variant=name)
    launch = pg.last_plan().private.launch
    assert launch._split is not None and launch._split.resident == 0, "expected the last-finisher reduction"
    again = pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, device="cuda", variant=name)
    bits = cp.uint16 if dtype == "float16" else cp.uint32
    assert cp.array_equal(first.view(bits), again.view(bits)), "split-K results differ run to run"
    rows = np.r_[0, 127, 128, m - 1, rng.integers(0, m, 60)]
    ref = reference_for(a[rows], b, c[rows], 0.5, -1.0)
    res = ref.compare(cp.asnumpy(first[rows]))
    assert res.ok, f"{name} {m}x{n}x{k}: {res.message}"


@pytest.mark.cuda
def test_split_k_in_place_and_on_a_torch_stream(cuda):
    """beta reads the destination the caller gave (c is out) and the work follows torch's
    current stream: a producer/consumer chain on a side stream stays right without a sync."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((64, 8192)).astype(np.float16)
    b = rng.standard_normal((8192, 96)).astype(np.float16)
    c = rng.standard_normal((64, 96)).astype(np.float16)
    ref = reference_for(a, b, c, 1.0, 1.0)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        tc = torch.from_numpy(c).cuda()
        out = pg.gemm(ta, tb, tc, beta=1.0, out=tc, device="cuda", variant="auto")
        after = (out * 1).cpu()  # queued on the same stream
    assert out is tc and ref.compare(after.numpy()).ok


@pytest.mark.cuda
def test_auto_splits_where_the_model_says_so_and_stays_correct(cuda):
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((512, 16384)).astype(np.float16)
    b = rng.standard_normal((16384, 512)).astype(np.float16)
    da, db = cp.asarray(a), cp.asarray(b)
    plan = pg.explain(da, db, device="cuda")
    assert "cost model" in plan.reason and plan.candidates, str(plan)
    assert ":split_k=" in plan.variant, str(plan)
    assert reference_for(a, b).compare(cp.asnumpy(pg.gemm(da, db, device="cuda"))).ok


@pytest.mark.cuda
def test_an_operand_past_2_31_elements_runs(cuda):
    """A = 70000 x 32768 fp16 (2.29e9 elements, 4.6 GB) through the TMA rung's tensor maps;
    checked on sampled rows against the float64 reference."""
    cp = pytest.importorskip("cupy")
    sm = cuda.runtime.cc[0] * 10 + cuda.runtime.cc[1]
    if sm != 90:
        pytest.skip("the TMA rung (sm_90a) takes A past 2**31 elements through tensor maps")
    free, _ = cp.cuda.runtime.memGetInfo()
    if free < 6 * 2**30:
        pytest.skip(f"needs ~6 GB of free device memory; {free / 2**30:.1f} GB free")
    m, n, k = 70000, 128, 32768
    # filled in row blocks: one fp32 draw of the whole A (9.2 GB) would need twice the memory the check asked for
    a = cp.empty((m, k), dtype=cp.float16)
    for r0 in range(0, m, 8192):
        a[r0:r0 + 8192] = cp.random.standard_normal((min(8192, m - r0), k), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
    out = pg.gemm(a, b, device="cuda")
    rows = np.r_[0, 1, 4095, 32767, 32768, 65535, 65536, 69998, 69999, secrets.randbelow(m)]
    ha, hb = cp.asnumpy(a[rows]), cp.asnumpy(b)
    ref = reference_for(ha, hb)
    res = ref.compare(cp.asnumpy(out[rows]))
    assert res.ok, res.message
    del a, b, out
    cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.cuda
def test_split_k_plan_shared_by_threads_on_their_own_streams(cuda):
    """One cached split-K plan, eight threads, each on its own CuPy stream with its own data:
    each call on a stream of its own takes its own workspace and tile counters."""
    import threading

    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(secrets.randbits(32))
    data = [(rng.standard_normal((48, 4096)).astype(np.float16), rng.standard_normal((4096, 80)).astype(np.float16)) for _ in range(8)]
    refs = [reference_for(a, b) for a, b in data]
    results: list = [None] * 8
    errors: list = []

    def work(i: int) -> None:
        try:
            with cp.cuda.Stream(non_blocking=True) as s:
                da, db = cp.asarray(data[i][0]), cp.asarray(data[i][1])
                out = None
                for _ in range(20):
                    out = pg.gemm(da, db, device="cuda", variant="hgemm_v1_mma_ldmatrix:split_k=4")
                results[i] = cp.asnumpy(out)
                s.synchronize()
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(8):
        assert refs[i].compare(results[i]).ok, f"thread {i}"


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(4095, 4097, 4093), (1001, 517, 2047), (257, 1023, 129)], ids=lambda s: "x".join(map(str, s)))
def test_unaligned_operands_on_aligned_copies(cuda, shape):
    """Leading dimensions that are not multiples of 8 halves: auto may copy them into aligned
    scratch for a TMA rung (the plan says so); the result, in place in an unaligned C with
    alpha/beta, matches the reference; the caller's buffers around the views stay untouched."""
    cp = pytest.importorskip("cupy")
    if cuda.runtime.cc != (9, 0):
        pytest.skip("the TMA rungs are sm_90a")
    m, n, k = shape
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(np.float16)
    ref = reference_for(a, b, c, 0.5, -1.0)
    # views one element into NaN-filled buffers: unaligned pointers and odd leading dimensions
    bufs = [cp.full(x.size + x.shape[0] + 1, cp.nan, cp.float16) for x in (a, b, c)]
    views = []
    for buf, x in zip(bufs, (a, b, c)):
        v = cp.lib.stride_tricks.as_strided(buf[1:], shape=x.shape, strides=((x.shape[1] + 1) * 2, 2))
        v[...] = cp.asarray(x)
        views.append(v)
    va, vb, vc = views
    plan = pg.explain(va, vb, vc, alpha=0.5, beta=-1.0, out=vc, device="cuda")
    pg.gemm(va, vb, vc, alpha=0.5, beta=-1.0, out=vc, device="cuda")
    res = ref.compare(cp.asnumpy(vc))
    assert res.ok, f"{shape} {plan.variant}: {res.message}\n{plan}"
    assert bool(cp.isnan(bufs[2][0])), "the element before C was written"
    if shape == (4095, 4097, 4093):
        assert "aligned copy" in (plan.padding or ""), str(plan)


@pytest.mark.cuda
def test_rows_off_128_byte_boundaries_on_pitch_aligned_copies(cuda):
    """8192 x 1000 x 8192 fp16 on device arrays, B's rows 2000 bytes (off 32-byte sectors): auto
    either copies B into scratch whose rows start on 128-byte boundaries for a one-CTA TMA rung,
    or runs a cluster row on B as it is (a cluster loses little to the pitch; since the
    persistent cluster rows, that is the choice here) and says what the pitch costs; the
    result, with alpha/beta into C, matches the reference on sampled rows, and B is untouched."""
    cp = pytest.importorskip("cupy")
    if cuda.runtime.cc != (9, 0):
        pytest.skip("the TMA rungs are sm_90a")
    m, n, k = 8192, 1000, 8192
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = rng.standard_normal((m, n), dtype=np.float32).astype(np.float16)
    da, db, dc = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    plan = pg.explain(da, db, dc, alpha=0.5, beta=-1.0, out=dc, device="cuda")
    assert "wgmma" in plan.variant, str(plan)
    if kernel_specs()[plan.variant.partition(":")[0]].cluster > 1:
        assert not plan.padding and "start off 32-byte boundaries" in str(plan), str(plan)
    else:
        assert (plan.padding or "").startswith("b "), str(plan)
    pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, out=dc, device="cuda")
    rows = rng.choice(m, 64, replace=False)
    ref = reference_for(a[rows], b, c[rows], 0.5, -1.0)
    res = ref.compare(cp.asnumpy(dc)[rows])
    assert res.ok, f"{plan.variant}: {res.message}\n{plan}"
    assert bool((db == cp.asarray(b)).all()), "B was written"


@pytest.mark.cuda
@pytest.mark.parametrize("variant", STREAMK)
@pytest.mark.parametrize("shape", [(1000, 3000, 2000), (2048, 2560, 1000), (256, 512, 8192), (17, 4104, 200), (4096, 4096, 520),
                                   (300, 16, 131072)], ids=lambda s: "x".join(map(str, s)))
def test_streamk_matches_the_reference_and_repeats_its_bits(cuda, variant, shape):
    """Stream-K rows on products whose last waves are shared out by k-tiles: fewer tiles than
    SMs (one run per SM, tiles split over two or three), between one and two waves, runs much
    shorter than a tile (many blocks add into one tile), odd K, a long K over a thin result (each tile's
    k-tiles shared by dozens of blocks). alpha/beta into C; the same
    inputs give the same bits twice (the fixup adds the runs in block order)."""
    cp = pytest.importorskip("cupy")
    if cuda.runtime.cc != (9, 0):
        pytest.skip("the TMA rungs are sm_90a")
    m, n, k = shape
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = rng.standard_normal((m, n), dtype=np.float32).astype(np.float16)
    da, db = cp.asarray(a), cp.asarray(b)
    outs = []
    for _ in range(2):
        dc = cp.asarray(c)
        pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, out=dc, device="cuda", variant=variant)
        outs.append(cp.asnumpy(dc))
    assert pg.last_plan().variant == variant, str(pg.last_plan())
    res = reference_for(a, b, c, 0.5, -1.0).compare(outs[0])
    assert res.ok, f"{variant} {shape}: {res.message}"
    assert np.array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16)), "two runs gave different bits"


@pytest.mark.cuda
def test_a_plan_outlives_the_stream_it_ran_on(cuda):
    """A split-K call on a caller's stream that is destroyed afterwards: dropping the plan
    (cache cleared, collected in another thread) must not touch that stream (a stream-ordered
    free on a destroyed stream crashes the process)."""
    import gc
    import threading

    cp = pytest.importorskip("cupy")
    a = cp.asarray(np.random.default_rng(1).standard_normal((32, 4096)).astype(np.float16))
    b = cp.asarray(np.random.default_rng(2).standard_normal((4096, 48)).astype(np.float16))
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        pg.gemm(a, b, device="cuda", variant="hgemm_v1_mma_ldmatrix:split_k=4")
    s.synchronize()
    del s
    gc.collect()
    worker = threading.Thread(target=lambda: (pg.clear_plan_cache(), gc.collect()))
    worker.start()
    worker.join()
    got = pg.gemm(a, b, device="cuda", variant="hgemm_v1_mma_ldmatrix:split_k=4")
    assert reference_for(cp.asnumpy(a), cp.asnumpy(b)).compare(cp.asnumpy(got)).ok


@pytest.mark.cuda
def test_a_cluster_rows_split_plan_shows_the_grid_that_runs(cuda):
    """A 2x2 cluster row in K-slices: the plan is made with the kernel loaded, so the grid it
    shows is the one launched, lowered (with a note) to the clusters the device holds at once;
    the result is right and the same bits twice."""
    cp = pytest.importorskip("cupy")
    name = "hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4"
    _runs_here(cuda, name.partition(":")[0])
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((1000, 16384)).astype(np.float16)
    b = rng.standard_normal((16384, 1000)).astype(np.float16)
    da, db = cp.asarray(a), cp.asarray(b)
    plan = pg.explain(da, db, device="cuda", variant=name)
    grid = plan.launch["grid"]
    grid = tuple(grid) if not isinstance(grid, str) else grid
    first = pg.gemm(da, db, device="cuda", variant=name)
    lp = pg.last_plan().private.launch.lp
    assert lp.grid[0] % 4 == 0 and lp.grid[0] <= 132
    assert str(lp.grid[0]) in str(plan.launch["grid"]), (plan.launch, lp.grid)
    if lp.grid[0] < 4 * (132 // 4):  # fewer clusters than one per four SMs: the plan says why
        assert any("clusters of 4 CTAs" in n for n in plan.notes), plan.notes
    again = pg.gemm(da, db, device="cuda", variant=name)
    assert cp.array_equal(first.view(cp.uint16), again.view(cp.uint16))
    rows = np.r_[0, 999, rng.integers(0, 1000, 20)]
    assert reference_for(a[rows], b).compare(cp.asnumpy(first[rows])).ok


@pytest.mark.cuda
@pytest.mark.parametrize("variant,shape", [
    ("hgemm_v2_wgmma_tma:split_k=4", (512, 512, 8192)),
    ("hgemm_v2_wgmma_tma_streamk", (1000, 3000, 2000)),
    ("hgemm_v2_wgmma_tma_cluster2:split_k=4", (1000, 1000, 16384)),
    ("cm_v13_cp_async_narrow_tile:split_k=4", (256, 256, 8192)),
], ids=["tma-split", "streamk", "cluster-split", "cm_v13-resident"])
def test_threadblocks_that_wait_on_each_other_launch_cooperatively(cuda, variant, shape):
    """A grid whose threadblocks wait on one another (the in-launch split reduction of a
    resident grid, stream-K's shared tiles) is launched cooperatively: every threadblock
    resident at once, or a DeviceError with the driver's words, never a launch that waits
    forever for blocks that cannot get an SM. The result is right and the same bits twice;
    the same kernel on a grid the device cannot hold at once is refused, not hung."""
    cp = pytest.importorskip("cupy")
    _runs_here(cuda, variant.partition(":")[0])
    m, n, k = shape
    dtype = kernel_specs()[variant.partition(":")[0]].dtype
    rng = np.random.default_rng(secrets.randbits(32))
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    da, db = cp.asarray(a), cp.asarray(b)
    first = pg.gemm(da, db, device="cuda", variant=variant)
    launch = pg.last_plan().private.launch
    assert launch._split is not None and launch._split.resident == 1
    assert launch._go.cooperative, "a resident grid's blocks wait on each other: it must launch cooperatively"
    again = pg.gemm(da, db, device="cuda", variant=variant)
    bits = cp.uint16 if dtype == "float16" else cp.uint32
    assert cp.array_equal(first.view(bits), again.view(bits))
    rows = np.r_[0, m - 1, rng.integers(0, m, 20)]
    assert reference_for(a[rows], b).compare(cp.asnumpy(first[rows])).ok
    # the same kernel on 64 threadblocks per SM: the driver refuses it, with its own words
    lp = launch.lp
    too_many = (launch.rt.sms * 64 * lp.cluster[0] * lp.cluster[1], 1, 1)
    go = launch.kernel().launcher(too_many, lp.block, lp.smem_bytes, cooperative=True)
    out_before = cp.asnumpy(first)
    prepared = launch.prepare(int(da.data.ptr), int(db.data.ptr), int(first.data.ptr), 1.0, 0.0)
    with pytest.raises(pg.DeviceError, match="CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"):
        go(prepared.main, 0)
    cp.cuda.Device().synchronize()
    assert np.array_equal(cp.asnumpy(first), out_before)
