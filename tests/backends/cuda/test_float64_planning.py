"""The float64 rungs (kernels/dgemm) on the CPU: catalog rows, builds, launch plans, auto's choice."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.compile import covering, jobs
from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.catalog import auto_candidates, choose_auto_variant
from polygemm.backends.cuda.cost import rank
from polygemm.backends.cuda.planning import Mat, plan_launch
from polygemm.backends.cuda.variants import kernel_specs, variant_table
from polygemm.errors import UnsupportedProblemError
from polygemm.problem import normalize

SPECS = kernel_specs()
DGEMM = [s for s in SPECS.values() if s.ladder == "dgemm"]  # the DMMA rungs (the float64 skinny rungs: test_skinny_*)
V1, V2, V2N = SPECS["dgemm_v1_dmma"], SPECS["dgemm_v2_dmma_m16n8k8"], SPECS["dgemm_v2_dmma_m16n8k8_128x64"]
V3, V3K8 = SPECS["dgemm_v3_dmma_direct"], SPECS["dgemm_v3_dmma_direct_k8"]
#: cp.async stages of each rung's ring (v3's 6 stages of 16-deep K-tiles: 192 KB of sm_90's 227)
STAGES = {"dgemm_v3_dmma_direct": 6, "dgemm_v3_dmma_direct_k8": 6}
#: threads a threadblock where not 256 (8 warps): the v3 rows of two threadblocks an SM run 4 warps
THREADS = {"dgemm_v3_dmma_direct_128x64": 128, "dgemm_v3_dmma_direct_k8_128x64": 128}


def _d(name, r, c, ld=None, ptr=0, layout="row"):
    return Mat(name, r, c, layout, ld if ld is not None else (c if layout == "row" else r), ptr, 8)


def test_catalog_lists_the_float64_rungs_with_their_facts():
    assert [s.name for s in DGEMM] == ["dgemm_v1_dmma", "dgemm_v1_dmma_128x64", "dgemm_v2_dmma_m16n8k8", "dgemm_v2_dmma_m16n8k8_128x64",
                                       "dgemm_v2_dmma_m16n8k8_64x128", "dgemm_v2_dmma_m16n8k8_32x128",
                                       "dgemm_v3_dmma_direct", "dgemm_v3_dmma_direct_k8", "dgemm_v3_dmma_direct_128x64",
                                       "dgemm_v3_dmma_direct_k8_128x64"]
    for s in DGEMM:
        assert s.dtypes == ("float64",) and s.itemsize == 8 and s.predicated and s.batch and s.split_k
        assert s.split_step == 16 and s.partial_bytes == 8  # K cut by the kernel in K-tiles, float64 partial sums
        assert s.layout == "row" and s.block == (THREADS.get(s.name, 256), 1) and s.align == 2 and s.prior_tflops > 0
        bm, bn, bk = s.tile
        assert s.smem_bytes == STAGES.get(s.name, 4) * (bm * bk + bk * bn) * 8  # the ring's stages of A's and B's tiles
        assert s.smem_bytes <= 227 * 1024
        assert 32 * bm * bn // (s.warp_tile[0] * s.warp_tile[1]) == s.block[0]  # a warp a warp tile
    V1N = SPECS["dgemm_v1_dmma_128x64"]
    assert V1.tile == V2.tile == (128, 128, 16) and V1N.tile == V2N.tile == (128, 64, 16)
    assert dict(V1N.defines) == dict(V2N.defines) == {"PG_BN": 64, "PG_WM": 32} and V1N.source == V1.source and V1N.min_sm == 80
    assert V1.instruction == (8, 8, 4) and V1.min_sm == 80 and V1.runs_on(80) and V1.runs_on(90)
    assert V2.instruction == (16, 8, 8) and V2.min_sm == 90 and not V2.runs_on(80) and V2.runs_on(100)
    assert V2N.source == V2.source and V2N.entry == V2.entry
    assert V3.instruction == (16, 8, 16) and V3.min_sm == 90 and not V3.runs_on(80) and V3.tile == (128, 128, 16)
    assert V3.warp_tile == (64, 32) and V3.source.name == "v3_dmma_direct.cu" and not V3.defines
    assert V3K8.source == V3.source and V3K8.instruction == (16, 8, 8) and dict(V3K8.defines) == {"DG_INST": 1688}
    two = SPECS["dgemm_v3_dmma_direct_128x64"]  # two threadblocks an SM: 96 KB and at most 256 registers a thread each
    assert two.tile == (128, 64, 16) and two.source == V3.source and dict(two.defines)["DG_MIN_BLOCKS"] == 2
    assert 2 * two.smem_bytes <= 227 * 1024 and two.mixed_pace == V3.mixed_pace
    rows = {v.name: v for v in variant_table()}
    assert rows["dgemm_v1_dmma"].dtypes == ("float64",) and rows["dgemm_v1_dmma"].auto
    assert "16-byte" in rows["dgemm_v1_dmma"].requirements and "sm_80" in rows["dgemm_v1_dmma"].requirements
    assert "float64" in rows["cublas"].dtypes  # cuBLAS DGEMM: the vendor column
    assert "float64" in pg.get_backend("cuda").dtypes()


def test_builds_cover_both_layouts_and_alignments_batches_and_splits():
    for s in DGEMM:
        builds = s.builds()
        assert len(builds) == 24 and not any("PG_OUT_F32" in b or "PG_BF16" in b for b in builds)
        assert {(b["PG_TRANS_A"], b["PG_TRANS_B"], b["PG_VEC"], b.get("PG_BATCH", 0), b.get("PG_SPLIT", 0)) for b in builds} == \
            {(ta, tb, v, bt, sp) for ta in (0, 1) for tb in (0, 1) for v in (0, 1) for bt in (0, 1) for sp in (0, bt)}


def test_check_kernels_covers_every_float64_build():
    names = [s.name for s in DGEMM]
    todo = jobs([80, 90], names)
    assert {(j.name, j.target) for j in todo} == {("dgemm_v1_dmma", "sm_80"), ("dgemm_v1_dmma", "sm_90"), ("dgemm_v1_dmma_128x64", "sm_80"),
                                                    ("dgemm_v1_dmma_128x64", "sm_90"), ("dgemm_v2_dmma_m16n8k8", "sm_90"),
                                                    ("dgemm_v2_dmma_m16n8k8_128x64", "sm_90"), ("dgemm_v2_dmma_m16n8k8_64x128", "sm_90"),
                                                    ("dgemm_v2_dmma_m16n8k8_32x128", "sm_90"), ("dgemm_v3_dmma_direct", "sm_90"),
                                                    ("dgemm_v3_dmma_direct_k8", "sm_90"), ("dgemm_v3_dmma_direct_128x64", "sm_90"),
                                                    ("dgemm_v3_dmma_direct_k8_128x64", "sm_90")}
    assert len(todo) == 288  # 24 builds a rung and target
    everything = jobs([80, 90])
    cover = covering(everything)
    assert set(names) <= {j.name for j in cover}  # every rung reaches ptxas in CI's covering check
    for source, target in {(j.source, j.target) for j in todo}:  # and every macro value of each source and target
        mine = [j for j in cover if (j.source, j.target) == (source, target)]
        assert {m for j in mine for m in j.macros} >= {("PG_TRANS_A", 1), ("PG_TRANS_B", 1), ("PG_VEC", 0), ("PG_BATCH", 1)}


@pytest.mark.parametrize("spec", DGEMM, ids=lambda s: s.name)
def test_row_major_problem_plans_the_aligned_build_on_an_n_by_m_grid(spec):
    m, n, k = 1000, 999, 1001
    lp = plan_launch(spec, _d("a", m, k, 1002), _d("b", k, n, 1000), _d("c", m, n, 1000))
    assert not lp.swap and (lp.m, lp.n, lp.k) == (m, n, k) and lp.dtype == "float64"
    bm, bn, _ = spec.tile
    assert lp.grid == (-(-n // bn), -(-m // bm), 1) and lp.block == (THREADS.get(spec.name, 256), 1, 1)
    assert lp.vec and lp.smem_bytes == spec.smem_bytes
    assert lp.macros() == {**dict(spec.defines), "PG_TRANS_A": 0, "PG_TRANS_B": 0, "PG_VEC": 1} and lp.macros() in spec.builds()


@pytest.mark.parametrize("spec", DGEMM, ids=lambda s: s.name)
def test_column_major_result_swaps_and_mixed_layouts_become_transposes(spec):
    lp = plan_launch(spec, _d("a", 64, 32, layout="col"), _d("b", 32, 48, layout="col"), _d("c", 64, 48, layout="col"))
    assert lp.swap and (lp.m, lp.n) == (48, 64) and not lp.trans_a and not lp.trans_b
    mixed = plan_launch(spec, _d("a", 64, 32, layout="col"), _d("b", 32, 48), _d("c", 64, 48))
    assert not mixed.swap and mixed.trans_a and not mixed.trans_b and mixed.macros() in spec.builds()


@pytest.mark.parametrize("where", ["odd leading dimension", "pointer 8 bytes off"])
def test_unaligned_operands_take_the_8_byte_build(where):
    if where == "odd leading dimension":
        a, b, c = _d("a", 17, 65, 65), _d("b", 65, 33, 34), _d("c", 17, 33, 34)
    else:
        a, b, c = _d("a", 16, 64, 64, ptr=8), _d("b", 64, 32), _d("c", 16, 32)
    lp = plan_launch(V1, a, b, c)
    assert not lp.vec and lp.macros()["PG_VEC"] == 0 and lp.macros() in V1.builds()
    assert lp.row_split == 0 and any("PG_VEC=0" in note for note in lp.notes)
    assert plan_launch(V1, _d("a", 16, 64, ptr=16), _d("b", 64, 32), _d("c", 16, 32)).vec  # 16-byte steps are aligned


def test_batches_go_on_the_grid_with_element_strides():
    m, n, k, count = 127, 129, 255, 5
    lp = plan_launch(V1, _d("a", m, k), _d("b", k, n), _d("c", m, n), batch=(count, m * k, 0, m * n))
    assert lp.batch_count == count and lp.grid == (2, 1, count) and lp.batch_strides == (m * k, 0, m * n)
    assert lp.macros()["PG_BATCH"] == 1 and lp.macros() in V1.builds() and "PG_SPLIT" not in lp.macros()
    swapped = plan_launch(V1, _d("a", m, k, layout="col"), _d("b", k, n, layout="col"), _d("c", m, n, layout="col"),
                          batch=(count, m * k, k * n, m * n))
    assert swapped.swap and swapped.batch_strides == (k * n, m * k, m * n)  # the kernel's A is the user's b


def test_auto_takes_the_rung_measured_fastest_and_says_where_the_rate_is_assumed():
    chosen, why = choose_auto_variant(4096, 4096, 4096, "float64", sm=90)
    assert chosen == V3.name and "anchored on the measurement" in why and "auto_fp64.json" in why
    assert choose_auto_variant(8192, 8192, 8192, "float64", sm=90)[0] == V3.name
    chosen, why = choose_auto_variant(4096, 4096, 4096, "float64", sm=80)  # the sm_90 rungs cannot run there
    assert chosen == "dgemm_v1_dmma" and "no measurements yet" in why and "auto_fp64.json" in why
    mid80 = auto_candidates(1000, 999, 1001, "float64", sm=80)[0]  # 128x64 tiles, or K-slices, on sm_80's rung
    assert mid80.variant.startswith("dgemm_v1_dmma") and (mid80.variant.endswith("128x64") or mid80.splits >= 2)
    # a mid-size result: 64 tiles of 128x128 leave half the SMs idle; auto takes the 128x64 tile
    # (measured fastest near there on an H100) or two K-slices
    mid = auto_candidates(1000, 999, 1001, "float64", sm=90)[0]
    assert mid.variant == "dgemm_v2_dmma_m16n8k8_128x64" or mid.splits >= 2
    assert SPECS[choose_auto_variant(17, 33, 65, "float64", sm=90, batched=True)[0]].batch
    long_k = auto_candidates(64, 64, 1 << 16, "float64", sm=90)
    # a long K over one tile is cut into K-slices on every float64 rung (float64 partial sums: split_k.cuh's PG_SPLIT_F64)
    assert {c.variant.split("_")[0] for c in long_k if c.splits} == {"dgemm", "skinny"}
    assert all(c.splits for c in long_k[:3])
    why = choose_auto_variant(64, 64, 1 << 16, "float64", sm=90)[1]
    assert ":split_k=" in why


def test_small_m_and_long_k_float64_products_take_the_float64_skinny_rung():
    for (m, n, k) in [(16, 8, 4096), (512, 2, 500000)]:  # (a DMMA tile's N of 64 or 128 would be mostly empty)
        chosen = choose_auto_variant(m, n, k, "float64", sm=90)[0]
        assert chosen.startswith("skinny_v4_fp64"), (m, n, k, chosen)
    spec = SPECS["skinny_v4_fp64_row"]
    assert spec.dtype == "float64" and spec.split_step == 16 and spec.batch and spec.itemsize == 8
    lp = plan_launch(spec, _d("a", 64, 65536), _d("b", 65536, 64), _d("c", 64, 64), splits=16)
    assert lp.c.itemsize == 8 and lp.c.ld % 2 == 0  # the workspace holds float64 partial sums, rows of 16-byte multiples


def test_the_v3_rung_runs_on_sm_90_only_and_ranks_by_measurement():
    names = [c.variant for c in auto_candidates(4096, 4096, 4096, "float64", sm=90)]
    assert V3.name in names and V3.name not in [c.variant for c in auto_candidates(4096, 4096, 4096, "float64", sm=80)]
    records = [{"variant": V2.name, "dtype": "float64", "m": 4096, "n": 4096, "k": 4096, "tflops": 60.0},
               {"variant": V3.name, "dtype": "float64", "m": 4096, "n": 4096, "k": 4096, "tflops": 41.0}]
    assert choose_auto_variant(4096, 4096, 4096, "float64", records, sm=90)[0] == V2.name  # the measurement decides


def test_measurements_replace_the_assumed_rate():
    records = [{"variant": "dgemm_v1_dmma", "dtype": "float64", "m": 4096, "n": 4096, "k": 4096, "tflops": 55.0},
               {"variant": "dgemm_v2_dmma_m16n8k8", "dtype": "float64", "m": 4096, "n": 4096, "k": 4096, "tflops": 40.0}]
    ranked = rank([V1, V2], records, 4096, 4096, 4096)
    assert ranked[0].variant == "dgemm_v1_dmma"
    assert ranked[0].estimate_us == pytest.approx(2 * 4096**3 / 55e6, rel=0.05)
    assert "anchored on the measurement" in choose_auto_variant(4096, 4096, 4096, "float64", records, sm=90)[1]


def test_the_backend_plans_float64_and_explains_the_rung():
    a, b = np.zeros((1000, 998)), np.zeros((998, 1002))
    plan = CudaBackend().plan(normalize(a, b))
    assert plan.variant.startswith("dgemm_") and "dgemm_" in plan.reason
    name, _, split = plan.variant.partition(":split_k=")
    bm, bn, _ = SPECS[name].tile
    assert plan.launch["grid"] == (-(-1002 // bn), -(-1000 // bm), int(split or 1)) and plan.launch["float4"] == "yes"
    named = CudaBackend().plan(normalize(a, b), "dgemm_v1_dmma")
    assert named.variant == "dgemm_v1_dmma"
    unaligned = CudaBackend().plan(normalize(np.zeros((17, 65))[:, :63], np.zeros((63, 33))), "dgemm_v1_dmma")
    assert "no (unaligned" in unaligned.launch["float4"]


def test_float64_rungs_split_k_in_float64_and_take_scalars_past_float32():
    a, b = np.zeros((64, 700)), np.zeros((700, 64))
    plan = CudaBackend().plan(normalize(a, b), "dgemm_v3_dmma_direct:split_k=3")  # any K: slices of whole 16-deep K-tiles
    assert plan.variant == "dgemm_v3_dmma_direct:split_k=3" and plan.launch["grid"][2] == 3
    lp = plan_launch(V3, _d("a", 64, 700), _d("b", 700, 64), _d("c", 64, 64), splits=3)
    assert lp.c.itemsize == 8 and lp.k == 700 and lp.slice_k == 240  # the kernel is passed the whole K and cuts it
    with pytest.raises(UnsupportedProblemError, match="leaves no K"):
        CudaBackend().plan(normalize(a, b), "dgemm_v1_dmma:split_k=64")
    assert CudaBackend().supports(normalize(a, b, alpha=1e300)) is None  # double alpha on the float64 rungs
    assert "float32" in CudaBackend().supports(normalize(a.astype(np.float32), b.astype(np.float32), alpha=1e300))
    with pytest.raises(pg.DTypeError):
        CudaBackend().plan(normalize(a.astype(np.float32), b.astype(np.float32)), "dgemm_v1_dmma")


def test_a_float64_products_check_allows_for_no_float32_rounding_of_its_scalars():
    # the float64 rungs take alpha and beta as doubles: verify='s threshold must not widen by float32's rounding of them
    be = CudaBackend()
    assert be.scalar_dtype(np.dtype(np.float64)) is None and be.scalar_dtype(np.dtype(np.complex128)) is None
    assert be.scalar_dtype(np.dtype(np.float32)) == np.float32 and be.scalar_dtype(np.dtype(np.float16)) == np.float32


@pytest.mark.parametrize("shape,moved", [((1031, 2311, 769), "A"), ((2311, 1031, 769), "B")])
@pytest.mark.parametrize("out_order", ["C", "F"])
def test_mixed_layouts_run_on_a_transposed_copy_of_the_smaller_operand(shape, moved, out_order):
    """A row-major and B column-major (x @ W.T): dgemm_v3 reads A by 8-byte loads with bank conflicts, so auto weighs
    it on a copy of the smaller operand in the other layout; the launch reads matched layouts, the plan names the copy
    and what it costs. The other mixed order (A column-major, B row-major) keeps the rung's pace and is read as it is."""
    m, n, k = shape
    a, b = np.zeros((m, k)), np.zeros((k, n), order="F")
    plan = CudaBackend().plan(normalize(a, b, out=np.zeros((m, n), order=out_order)))
    assert plan.variant.startswith("dgemm_v3") and f" on a transposed copy of {moved}" in plan.reason, plan.reason
    rows, cols, major, other = (m, k, "row-major", "column-major") if moved == "A" else (k, n, "column-major", "row-major")
    assert plan.padding.startswith(f"{moved.lower()} ({rows}x{cols}, {major}") and f"a {other} copy" in plan.padding, plan.padding
    tn = CudaBackend().plan(normalize(np.zeros((m, k), order="F"), np.zeros((k, n))))
    assert "transposed copy" not in tn.reason and not tn.padding
    assert any("copied into the other layout" in note for note in plan.notes), plan.notes
    launch = plan.private.launch  # planned without a device: the launch plan is in plan.launch
    assert launch is None and plan.launch["grid"][0] >= 1
    # the same operands of matched layouts, a batch, or a vector: read as they are
    for x, y in ((np.zeros((m, k)), np.zeros((k, n))), (np.zeros((m, k), order="F"), np.zeros((k, n), order="F")),
                 (np.zeros((4, m, k)), np.zeros((4, n, k)).transpose(0, 2, 1)), (np.zeros((1, k)), np.zeros((n, k)).T)):
        again = CudaBackend().plan(normalize(x, y))
        assert "transposed copy" not in again.reason and not (again.padding or ""), (x.shape, again.padding)


def test_a_transposed_copy_is_weighed_only_where_the_rung_loses_pace_and_memory_allows():
    from polygemm.backends.cuda.decisions import TRANSPOSE_SHARE, layout_ranked, transposed_operand

    a, b = _d("a", 4096, 4096), _d("b", 4096, 8192, layout="col")
    which, pad = transposed_operand(a, b)
    assert which == "a" and pad.layout == "col" and pad.ld % 16 == 0 and (pad.rows, pad.cols) == (4096, 4096)
    assert transposed_operand(a, _d("b", 4096, 8192)) is None  # matched
    tn = layout_ranked(auto_candidates(4096, 8192, 4096, "float64", sm=90), _d("a", 4096, 4096, layout="col"),
                       _d("b", 4096, 8192), 1)
    assert not any(c.transposed for c in tn)  # A column-major, B row-major: the rung's own pace
    ranked = auto_candidates(4096, 8192, 4096, "float64", sm=90)
    mixed = layout_ranked(ranked, a, b, 1)
    copies = [c for c in mixed if c.transposed]
    assert copies and all(SPECS[c.variant].mixed_pace[0] < 1 and c.padded for c in copies)
    assert {c.variant for c in copies} <= {s.name for s in DGEMM if s.source == V3.source}  # the rungs slower on mixed layouts
    for c in copies:  # the matched pace plus the copy
        base = next(o for o in ranked if o.name == c.name)
        assert base.estimate_us * SPECS[c.variant].mixed_pace[0] < c.estimate_us < base.estimate_us
        assert c.label.endswith(" on a transposed copy of A") and c.name == base.name
    assert [c.estimate_us for c in mixed] == sorted(c.estimate_us for c in mixed)
    assert layout_ranked(ranked, a, b, 2) == ranked  # a batch: no copy of one matrix serves it
    nbytes = 4096 * 4096 * 8
    assert layout_ranked(ranked, a, b, 1, memory=int(nbytes / TRANSPOSE_SHARE) - 1) == ranked  # past its share of memory
    assert layout_ranked(ranked, a, b, 1, memory=int(nbytes / TRANSPOSE_SHARE) + 1) == mixed


def test_a_padded_launch_transposes_an_operand_planned_in_the_other_layout():
    from polygemm.backends.cuda.launch import PaddedLaunch
    from polygemm.backends.cuda.planning import transposed_copy

    calls = []

    class Rt:
        def scratch(self, nbytes, stream):
            return 1 << 20

        def release(self, ptr, stream):
            pass

        def give_back(self, ptrs):
            pass

        def repitch(self, *args):
            calls.append(("repitch", args))

        def transpose(self, *args):
            calls.append(("transpose", args))

    class Inner:
        rt = Rt()

        def prepare(self, a, b, c, alpha, beta, stream):
            calls.append(("prepare", (a, b, c)))
            return (a, b, c)

        def launch(self, prepared, stream):
            calls.append(("launch", prepared))

        def discard(self, prepared):
            pass

    a, b, c = _d("a", 300, 500), _d("b", 500, 700, layout="col"), _d("c", 300, 700)
    pad = transposed_copy(a)
    launch = PaddedLaunch(Inner(), (a, b, c), (pad, None, None))  # type: ignore[arg-type]
    assert launch.copies_label == " on a transposed copy of A"
    launch.launch(launch.prepare(0x1000, 0x2000, 0x3000, 1.0, 0.5, 7), 7)
    (_, prep), (kind, args), (_, ran) = calls
    assert kind == "transpose" and args == (1 << 20, pad.ld, 0x1000, 500, 500, 300, 8, 7)  # 300 lines of 500 into 500 of 300
    assert ran == prep == (1 << 20, 0x2000, 0x3000)  # the rung reads the copy, B and C in place
