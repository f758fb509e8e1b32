"""float64 on the GPU (kernels/dgemm): device arrays, auto's device choice, batches, alpha/beta, out=
(marked ``cuda``; the per-variant shapes and layouts are in test_gemm_gpu.py)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for

from polygemm.backends.cuda.variants import kernel_specs
from tests.helpers import cuda_or_skip

#: the float64 rungs (kernels/dgemm)
DGEMM = [s.name for s in kernel_specs().values() if s.ladder == "dgemm"]


def _runnable(cuda, variant):
    spec = kernel_specs().get(variant)
    cc = cuda.runtime.cc
    if spec is not None and not spec.runs_on(cc[0] * 10 + cc[1]):
        pytest.skip(f"{variant} needs sm_{spec.min_sm}; this device is sm_{cc[0]}{cc[1]}")


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip((8, 0), "the FP64 tensor-core rungs (mma.sync m8n8k4)")


def _rng():
    return np.random.default_rng(secrets.randbits(32))


@pytest.mark.cuda
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_auto_runs_float64_device_arrays_on_a_dgemm_rung(cuda, lib):
    rng = _rng()
    a, b = rng.standard_normal((1000, 999)), rng.standard_normal((999, 1001))
    if lib == "cupy":
        cp = pytest.importorskip("cupy")
        da, db = cp.asarray(a), cp.asarray(b)
        back = cp.asnumpy
    else:
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch sees no CUDA device")
        da, db = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        back = lambda t: t.cpu().numpy()  # noqa: E731
    plan = pg.explain(da, db)
    assert plan.backend == "cuda" and plan.variant.startswith("dgemm_"), str(plan)
    got = pg.gemm(da, db)
    assert pg.last_plan().variant.startswith("dgemm_")
    host = back(got)
    assert host.dtype == np.float64 and reference_for(a, b).compare(host).ok


@pytest.mark.cuda
def test_numpy_float64_goes_where_numpy_float32_goes(cuda):
    rng = _rng()
    a, b = rng.standard_normal((65, 33)), rng.standard_normal((33, 17))
    assert pg.explain(a, b).backend == pg.explain(a.astype(np.float32), b.astype(np.float32)).backend
    got = pg.gemm(a, b)
    assert got.dtype == np.float64 and reference_for(a, b).compare(got).ok


@pytest.mark.cuda
@pytest.mark.parametrize("variant", DGEMM + ["auto"])
def test_alpha_beta_out_and_an_unaligned_leading_dimension(cuda, variant):
    _runnable(cuda, variant)
    cp = pytest.importorskip("cupy")
    rng = _rng()
    m, n, k = 127, 129, 255
    base_a = rng.standard_normal((m, k + 1))  # ld k + 1 (odd): the 8-byte build
    a, b, c = base_a[:, :k], rng.standard_normal((k, n)), rng.standard_normal((m, n))
    da, db, dc = cp.asarray(base_a)[:, :k], cp.asarray(b), cp.asarray(c)
    out = cp.full((m, n), cp.nan)
    got = pg.gemm(da, db, dc, alpha=-0.75, beta=1.5, out=out, device="cuda", variant=variant)
    assert got is out
    assert reference_for(a, b, c, -0.75, 1.5).compare(cp.asnumpy(out)).ok
    big = pg.gemm(da, db, alpha=1e300, device="cuda", variant=variant)  # double scalars: past float32's range
    assert reference_for(a, b, None, 1e300).compare(cp.asnumpy(big)).ok


@pytest.mark.cuda
def test_k_zero_scales_c_in_float64(cuda):
    cp = pytest.importorskip("cupy")
    c = _rng().standard_normal((5, 7)) * (1 + 2.0**-40)  # digits float32 would drop
    got = pg.gemm(cp.zeros((5, 0)), cp.zeros((0, 7)), cp.asarray(c), beta=1.0 / 3.0, device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(got), c * (1.0 / 3.0))
    host = pg.gemm(np.zeros((5, 0)), np.zeros((0, 7)), c, beta=1.0 / 3.0, device="cuda")
    np.testing.assert_array_equal(host, c * (1.0 / 3.0))


@pytest.mark.cuda
@pytest.mark.parametrize("variant", DGEMM)
def test_strided_batches_in_one_launch(cuda, variant):
    _runnable(cuda, variant)
    cp = pytest.importorskip("cupy")
    rng = _rng()
    a, b = rng.standard_normal((6, 17, 33)), rng.standard_normal((33, 65))  # b shared: stride 0
    plan = pg.explain(cp.asarray(a), cp.asarray(b), device="cuda", variant=variant)
    assert "batch" in plan.launch and "one launch" in str(plan.launch["batch"])
    got = cp.asnumpy(pg.gemm(cp.asarray(a), cp.asarray(b), device="cuda", variant=variant))
    for i in range(6):
        assert reference_for(a[i], b).compare(got[i]).ok, f"matrix {i}"


#: shapes through the four kernel layouts: a 1 x 1 x 1 product, K of one ragged K-tile, K over
#: many 16-deep K-tiles with a ragged last one, M and N cutting the 128 x 128 tile and the
#: 64 x 32 warp tiles (dgemm_v3 computes the row-major product as C^T = B^T A^T: its M and N
#: trade places inside the kernel)
LAYOUT_SHAPES = [(1, 1, 1), (65, 130, 17), (129, 63, 117), (200, 260, 2049)]


def _device_view(cp, host, order, offset):
    """``host`` on the device in C or F order; offset 1: a view one double past a 16-byte
    boundary with an odd leading dimension (the rungs' PG_VEC=0 build)."""
    rows, cols = host.shape if order == "C" else host.shape[::-1]
    ld = cols + offset
    buf = cp.zeros(offset + rows * ld)
    view = buf[offset:].reshape(rows, ld)[:, :cols]
    view[...] = cp.asarray(host if order == "C" else host.T)
    return view if order == "C" else view.T


@pytest.mark.cuda
@pytest.mark.parametrize("variant", DGEMM)
@pytest.mark.parametrize("shape", LAYOUT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_operand_order_with_c_unaligned_views_alpha_and_beta(cuda, variant, shape):
    _runnable(cuda, variant)
    cp = pytest.importorskip("cupy")
    rng = _rng()
    m, n, k = shape
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    for oa in "CF":
        for ob in "CF":
            for oc in "CF":
                for offset in (0, 1):
                    da, db = _device_view(cp, a, oa, offset), _device_view(cp, b, ob, offset)
                    dc = _device_view(cp, c, oc, offset)
                    where = f"{variant} {m}x{n}x{k} a {oa} b {ob} c {oc} offset {offset}"
                    out = cp.full((m, n), cp.nan, order=oc)
                    pg.gemm(da, db, dc, alpha=-0.75, beta=1.5, out=out, device="cuda", variant=variant)
                    assert reference_for(a, b, c, -0.75, 1.5).compare(cp.asnumpy(out)).ok, where
                    # beta 0 never reads C: a C of NaNs leaves no trace
                    nan_c = cp.full((m, n), cp.nan, order=oc)
                    got = pg.gemm(da, db, nan_c, alpha=2.0, beta=0.0, device="cuda", variant=variant)
                    assert reference_for(a, b, None, 2.0).compare(cp.asnumpy(got)).ok, where + " beta 0"


#: K-slices of the DMMA rungs (split_k.cuh with float64 partial sums): a K that no count
#: divides, slices ending inside a K-tile, a grid all resident at once (every block reduces
#: bands) and one past the SMs' room (each tile's last slice reduces it)
SPLIT_CASES = [((65, 130, 700), 2), ((129, 63, 4099), 3), ((200, 260, 2049), 8), ((1000, 999, 4000), 2), ((1000, 999, 4000), 8)]


@pytest.mark.cuda
@pytest.mark.parametrize("variant", DGEMM)
@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: "x".join(map(str, c[0])) + f"-split{c[1]}")
def test_k_slices_in_every_operand_order_sum_in_float64_the_same_bits_every_run(cuda, variant, case):
    _runnable(cuda, variant)
    cp = pytest.importorskip("cupy")
    rng = _rng()
    (m, n, k), splits = case
    named = f"{variant}:split_k={splits}"
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    for oa, ob, oc, offset in [("C", "C", "C", 0), ("F", "C", "F", 1), ("C", "F", "C", 1), ("F", "F", "F", 0)]:
        da, db, dc = _device_view(cp, a, oa, offset), _device_view(cp, b, ob, offset), _device_view(cp, c, oc, offset)
        where = f"{named} {m}x{n}x{k} a {oa} b {ob} c {oc} offset {offset}"
        plan = pg.explain(da, db, dc, alpha=-0.75, beta=1.5, device="cuda", variant=named)
        assert plan.launch["grid"][2] == splits, where
        first = pg.gemm(da, db, dc, alpha=-0.75, beta=1.5, device="cuda", variant=named)
        assert reference_for(a, b, c, -0.75, 1.5).compare(cp.asnumpy(first)).ok, where
        again = pg.gemm(da, db, dc, alpha=-0.75, beta=1.5, device="cuda", variant=named)  # counters back at zero
        assert cp.array_equal(first, again), where + " (the slices are added in slice order)"
    # the partial sums stay float64: a product whose float32 partials would lose the small terms
    big = np.full((m, k), 1.0)
    big[:, ::2] = 2.0**40
    big[:, 1::2] = -(2.0**40)
    tiny = rng.standard_normal((k, n)) * 2.0**-20
    got = cp.asnumpy(pg.gemm(cp.asarray(big), cp.asarray(tiny), device="cuda", variant=named))
    assert reference_for(big, tiny).compare(got).ok, named + " float64 partial sums"


#: A row-major and B column-major (A the smaller, B the smaller), ragged against every tile
TRANSPOSED_SHAPES = [(1031, 2311, 769), (2311, 1031, 769)]


@pytest.mark.cuda
@pytest.mark.parametrize("shape", TRANSPOSED_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mixed_layouts_run_on_a_transposed_copy_with_c_alpha_beta_and_views(cuda, shape, monkeypatch):
    """x @ W.T in float64 on a copy of the smaller operand in the other layout (auto's candidates narrowed to those
    copies, whatever the estimates): the plan says which operand, and the product matches the float64 reference with
    C, alpha, beta and out in either order, operands that are views off 16-byte boundaries, and the operands left as
    they were."""
    _runnable(cuda, "dgemm_v3_dmma_direct")
    cp = pytest.importorskip("cupy")
    from polygemm.backends.cuda import backend as cuda_backend

    weigh = cuda_backend.layout_ranked
    monkeypatch.setattr(cuda_backend, "layout_ranked", lambda *args: [c for c in weigh(*args) if c.transposed] or weigh(*args))
    pg.clear_plan_cache()
    rng = _rng()
    m, n, k = shape
    moved = "a" if m * k <= k * n else "b"
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    try:
        for oc in "CF":
            for offset in (0, 1):
                da, db = _device_view(cp, a, "C", offset), _device_view(cp, b, "F", offset)
                dc = _device_view(cp, c, oc, 0)
                where = f"{m}x{n}x{k} c {oc} offset {offset}"
                out = cp.full((m, n), cp.nan, order=oc)
                plan = pg.explain(da, db, dc, alpha=-0.75, beta=1.5, out=out, device="cuda")
                assert f"on a transposed copy of {moved.upper()}" in plan.reason and (plan.padding or "").startswith(moved), \
                    where + "\n" + str(plan)
                pg.gemm(da, db, dc, alpha=-0.75, beta=1.5, out=out, device="cuda")
                assert pg.last_plan().padding == plan.padding, where
                assert reference_for(a, b, c, -0.75, 1.5).compare(cp.asnumpy(out)).ok, where
                np.testing.assert_array_equal(cp.asnumpy(da), a)
                np.testing.assert_array_equal(cp.asnumpy(db), b)
                got = pg.gemm(da, db, device="cuda")  # a result of its own, twice: the scratch is kept between calls
                again = pg.gemm(da, db, device="cuda")
                assert reference_for(a, b).compare(cp.asnumpy(got)).ok, where + " no c"
                np.testing.assert_array_equal(cp.asnumpy(got), cp.asnumpy(again))
    finally:
        pg.clear_plan_cache()  # no plan of the narrowed candidates outlives the test
