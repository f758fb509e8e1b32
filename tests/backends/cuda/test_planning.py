"""CUDA planning on the CPU: operand swap, transposes, padding, alignment, geometry, pitch copies."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.catalog import choose_auto_variant
from polygemm.backends.cuda.planning import INT32_MAX, Mat, pitch_copy, plan_launch
from polygemm.backends.cuda.variants import kernel_specs, variant_table


SPECS = kernel_specs()


PREDICATED = [s for s in SPECS.values() if s.predicated]


STANDARD = [s for s in PREDICATED if s.abi == "standard"]


def row(name, r, c, ptr=0):
    return Mat(name, r, c, "row", c, ptr)


def col(name, r, c, ptr=0):
    return Mat(name, r, c, "col", r, ptr)


PADDED = [s for s in SPECS.values() if not s.predicated]


PREDICATED_F32 = [s for s in PREDICATED if s.dtype == "float32" and not s.max_m]  # tiled rungs (skinny ones have max_m)


TMA = [s for s in PREDICATED if s.abi == "tma"]


def _h(name, r, c, ld, ptr=0):
    return Mat(name, r, c, "row", ld, ptr, 2)


COL32 = SPECS["hgemm_v2_wgmma_tma_64x32_col"]


def _half(name, r, c, layout="row"):
    return Mat(name, r, c, layout, c if layout == "row" else r, 0, 2)


def test_table_has_both_ladders_and_cublas():
    names = [v.name for v in variant_table()]
    seeds = [s.seed for s in SPECS.values()]
    assert sorted(s for s in seeds if s.startswith("000/001")) == sorted(f"000/001 Version {i}" for i in range(1, 12))
    assert len([s for s in seeds if s.startswith("002")]) == 8
    assert len([n for n in names if n.startswith("rm_")]) == 8
    assert names[-1] == "cublas"
    cublas = variant_table()[-1]
    assert cublas.vendor and not cublas.auto
    for s in SPECS.values():
        assert s.source.exists(), s.source
        assert s.entry in s.source.read_text(), s.entry
        head = s.source.read_text().lstrip().splitlines()[0]
        assert head.startswith("//"), f"{s.source.name} must open with a comment saying what it adds"


@pytest.mark.parametrize("spec", STANDARD, ids=lambda s: s.name)
def test_row_major_numpy_problem_uses_the_operand_swap(spec):
    m, n, k = 100, 70, 30
    lp = plan_launch(spec, row("a", m, k), row("b", k, n), row("c", m, n))
    if spec.layout == "col":
        assert lp.swap and (lp.m, lp.n) == (n, m)
        assert lp.a.name.startswith("b") and lp.b.name.startswith("a")
    else:
        assert not lp.swap and (lp.m, lp.n) == (m, n)
    assert not lp.trans_a and not lp.trans_b and not lp.packs


@pytest.mark.parametrize("spec", STANDARD, ids=lambda s: s.name)
def test_mixed_layouts_become_transposes_not_copies(spec):
    lp = plan_launch(spec, col("a", 10, 20), row("b", 20, 30), row("c", 10, 30))
    assert not lp.packs
    assert lp.trans_a != lp.trans_b  # one operand is read transposed


@pytest.mark.parametrize("spec", [s for s in STANDARD if s.align > 1], ids=lambda s: s.name)
def test_misaligned_routes_to_scalar_build(spec):
    lp = plan_launch(spec, row("a", 64, 64), row("b", 64, 64), row("c", 64, 64))
    assert lp.vec
    lp = plan_launch(spec, row("a", 64, 64, ptr=4), row("b", 64, 64), row("c", 64, 64))
    assert not lp.vec and lp.macros()["PG_VEC"] == 0
    lp = plan_launch(spec, Mat("a", 63, 63, "row", 63), row("b", 63, 64), row("c", 63, 64))
    assert not lp.vec  # ld 63 is not a multiple of 4 floats


@pytest.mark.parametrize("spec", PADDED, ids=lambda s: s.name)
def test_teaching_rungs_pad_awkward_shapes(spec):
    m, n, k = 127, 129, 131
    lp = plan_launch(spec, row("a", m, k), row("b", k, n), row("c", m, n))
    bm, bn, bk = spec.multiple
    assert lp.m % bm == 0 and lp.n % bn == 0 and lp.k % bk == 0
    assert len(lp.packs) == 3 and lp.unpack is not None
    assert lp.unpack.dst.rows == (n if lp.swap else m)
    assert "padded" in lp.notes[0] or "scratch" in lp.notes[0]


@pytest.mark.parametrize("spec", PADDED, ids=lambda s: s.name)
def test_teaching_rungs_run_in_place_when_everything_fits(spec):
    bm, bn, bk = spec.multiple
    lay = spec.layout

    def mat(name, r, c):
        return Mat(name, r, c, lay, c if lay == "row" else r)

    m, n, k = bm * 4, bn * 4, bk * 4
    lp = plan_launch(spec, mat("a", m, k), mat("b", k, n), mat("c", m, n))
    assert not lp.packs and lp.unpack is None and not lp.swap


@pytest.mark.parametrize("spec", list(SPECS.values()), ids=lambda s: s.name)
def test_grid_covers_the_problem(spec):
    m, n, k = 1000, 3000, 8
    lp = plan_launch(spec, row("a", m, k), row("b", k, n), row("c", m, n))
    bm, bn, _ = spec.tile
    gx, gy, _ = lp.grid
    tiles = -(-lp.m // bm) * -(-lp.n // bn)
    if spec.streamk:  # every SM takes a share of the last waves' k-tiles, however few the tiles
        assert lp.grid == (132, 1, 1)
    elif spec.persistent:  # one threadblock per SM walks the tiles
        assert lp.grid == (min(tiles, 132), 1, 1)
    elif spec.walks_strips:  # at most a threadblock per SM, each walking x tiles
        strips, rows = -(-lp.n // bn), -(-lp.m // bm)
        assert gy == rows and gx == (min(strips, 132 // rows) if 132 // rows >= 2 else strips)
    elif spec.cluster > 1:  # whole clusters along x, each a unit of cm x cn adjacent tiles
        cm, cn = spec.cluster_mn
        assert lp.cluster == (cm, cn)  # carried to the launch: the tensor maps' boxes are each CTA's share
        units_m, units_n = -(-(-(-lp.m // bm)) // cm), -(-(-(-lp.n // bn)) // cn)
        assert lp.grid == (units_m * units_n * cm * cn, 1, 1) and gx % spec.cluster == 0
        assert units_m * cm * bm >= lp.m and units_n * cn * bn >= lp.n
    else:
        cover = {"m": gx if spec.grid[0] == "m" else gy, "n": gx if spec.grid[0] == "n" else gy}
        assert cover["m"] * bm >= lp.m and cover["n"] * bn >= lp.n
    assert lp.block[0] * lp.block[1] <= 1024


def test_32bit_offsets_refused_at_plan_time():
    spec = next(s for s in PREDICATED if s.abi == "standard")
    big = Mat("a", 70000, 40000, "row", 40000)
    with pytest.raises(pg.UnsupportedProblemError, match="32-bit"):
        plan_launch(spec, big, row("b", 40000, 8), row("c", 70000, 8))
    assert big.max_offset > INT32_MAX


def test_tma_rung_takes_operands_past_32_bits_but_not_c():
    """A and B reach a TMA rung through tensor maps (64-bit strides): only C's offsets are 32-bit."""
    spec = next(s for s in PREDICATED if s.abi == "tma")
    big = Mat("a", 70000, 32768, "row", 32768, 0, 2)
    lp = plan_launch(spec, big, Mat("b", 32768, 128, "row", 128, 0, 2), Mat("c", 70000, 128, "row", 128, 0, 2))
    assert big.max_offset > INT32_MAX and (lp.m, lp.n, lp.k) == (70000, 128, 32768)
    with pytest.raises(pg.UnsupportedProblemError, match="32-bit"):
        plan_launch(spec, Mat("a", 70000, 64, "row", 64, 0, 2), Mat("b", 64, 40000, "row", 40000, 0, 2),
                    Mat("c", 70000, 40000, "row", 40000, 0, 2))


def test_cublas_plan_keeps_column_major_with_swap():
    lp = plan_launch(None, row("a", 5, 6), row("b", 6, 7), row("c", 5, 7))
    assert lp.swap and (lp.m, lp.n, lp.k) == (7, 5, 6) and not lp.trans_a and not lp.trans_b


def test_auto_choice_comes_from_measured_table():
    first, last = PREDICATED_F32[0].name, PREDICATED_F32[-1].name
    records = [
        {"variant": first, "m": 64, "n": 64, "k": 64, "tflops": 5.0},
        {"variant": last, "m": 64, "n": 64, "k": 64, "tflops": 1.0},
        {"variant": last, "m": 4096, "n": 4096, "k": 4096, "tflops": 40.0},
        {"variant": first, "m": 4096, "n": 4096, "k": 4096, "tflops": 2.0},
    ]
    assert choose_auto_variant(50, 70, 60, records=records)[0] == first
    name, why = choose_auto_variant(5000, 4000, 3000, records=records)
    assert name == last and "4096x4096x4096" in why


def test_auto_respects_the_device_generation():
    needs80 = [s.name for s in PREDICATED_F32 if s.min_sm >= 80]
    if not needs80:
        pytest.skip("no rung needs sm_80")
    records = [{"variant": needs80[0], "m": 64, "n": 64, "k": 64, "tflops": 99.0}]
    assert choose_auto_variant(64, 64, 64, records=records, sm=75)[0] not in needs80


def test_auto_ignores_padded_rungs():
    padded = PADDED[0].name
    records = [{"variant": padded, "m": 64, "n": 64, "k": 64, "tflops": 99.0}]
    assert choose_auto_variant(64, 64, 64, records=records)[0] != padded


@pytest.mark.parametrize("spec", TMA, ids=lambda s: s.name)
def test_tma_rungs_need_16_byte_strides(spec):
    from polygemm.backends.cuda.planning import TmaUnsuitable

    def h(name, r, c, ld=None, ptr=0, layout="row"):
        return Mat(name, r, c, layout, ld or (c if layout == "row" else r), ptr, 2)

    lp = plan_launch(spec, h("a", 128, 64), h("b", 64, 256, layout="col"), h("c", 128, 256))
    assert lp.tma and "PG_VEC" not in lp.macros() and lp.trans_b
    with pytest.raises(TmaUnsuitable, match="16-byte"):
        plan_launch(spec, h("a", 127, 63), h("b", 63, 256), h("c", 127, 256))
    with pytest.raises(TmaUnsuitable, match="16-byte"):
        plan_launch(spec, h("a", 128, 64, ptr=2), h("b", 64, 256), h("c", 128, 256))


def test_arch_specific_rungs_run_only_on_their_architecture():
    for spec in TMA:
        assert spec.runs_on(90) and not spec.runs_on(100) and not spec.runs_on(80)


def test_unaligned_fp16_build_asks_for_its_own_shared_memory():
    spec = kernel_specs()["hgemm_v1_mma_ldmatrix"]
    assert spec.smem_bytes_unaligned > spec.smem_bytes > 48 * 1024

    def mat(name, r, c, ld):
        return Mat(name, r, c, "row", ld, 0, 2)

    aligned = plan_launch(spec, mat("a", 64, 64, 64), mat("b", 64, 64, 64), mat("c", 64, 64, 64))
    odd = plan_launch(spec, mat("a", 63, 65, 65), mat("b", 65, 67, 67), mat("c", 63, 67, 67))
    assert aligned.vec and aligned.smem_bytes == spec.smem_bytes
    assert not odd.vec and odd.smem_bytes == spec.smem_bytes_unaligned


def test_plan_refuses_a_build_beyond_the_devices_shared_memory():
    """An sm_86-class device (99 KB per block) cannot run the mma rung's 147 KB build: the
    plan says so and names the way out, instead of failing at launch."""
    import types

    import numpy as np

    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.errors import UnsupportedProblemError
    from polygemm.problem import normalize

    be = CudaBackend()
    be._rt = types.SimpleNamespace(cc=(8, 6), name="fake sm_86", arch="sm_86", max_smem_per_block=101376)
    a = np.ones((64, 64), np.float16)
    with pytest.raises(UnsupportedProblemError, match=r"needs 147456 bytes of shared memory .* allows 101376: use variant='cublas'"):
        be.plan(normalize(a, a), "hgemm_v1_mma_ldmatrix")
    assert be.plan(normalize(a, a), "cublas").variant == "cublas"


def test_check_smem_is_the_one_gate_for_plans_and_launches():
    from polygemm.backends.cuda.catalog import check_smem
    from polygemm.errors import UnsupportedProblemError

    spec = kernel_specs()["hgemm_v1_mma_ldmatrix"]
    odd = plan_launch(spec, Mat("a", 63, 65, "row", 65, 0, 2), Mat("b", 65, 67, "row", 67, 0, 2), Mat("c", 63, 67, "row", 67, 0, 2))
    check_smem(odd, 232448)  # sm_90: 227 KB fits
    with pytest.raises(UnsupportedProblemError, match=r"unaligned operands\); this device allows 166912: use variant='cublas' or 16-byte aligned operands"):
        check_smem(odd, 166912)  # sm_80


@pytest.mark.parametrize(
    "m, k, lda, ptr, sets",
    [
        (4095, 4093, 4093, 0, 8),  # odd lda: 8 phases
        (1023, 130, 130, 0, 4),  # lda = 2 mod 4: 4 phases
        (511, 300, 300, 0, 2),  # lda = 4 mod 8: 2 phases
        (300, 96, 96, 6, 1),  # aligned lda, unaligned pointer: one phase
        (1000, 2001, 2001, 0, 0),  # 8 sets of 125 rows: twice the threadblock tiles along M
        (17, 9, 9, 0, 0),
    ],
)
def test_row_split_groups_rows_of_one_phase(m, k, lda, ptr, sets):
    spec = SPECS["hgemm_v1_mma_ldmatrix"]
    n = 260
    lp = plan_launch(spec, _h("a", m, k, lda, ptr), _h("b", k, n, n), _h("c", m, n, n))
    assert not lp.vec and lp.row_split == sets
    assert ("PG_ROW_SPLIT" in lp.macros()) == bool(sets)
    bm, bn, _ = spec.tile
    rows = -(-m // sets) if sets else m
    assert lp.grid == (-(-n // bn), -(-rows // bm), max(sets, 1))
    if sets:
        assert (sets * lda) % 8 == 0  # one phase per set ...
        assert sets == 1 or (sets // 2 * lda) % 8 != 0  # ... and no fewer sets would do
        assert lp.describe()["row split"].startswith(f"{sets} sets")
        assert lp.macros() in spec.builds()


def test_row_split_only_for_row_major_operands_of_an_unaligned_problem():
    spec = SPECS["hgemm_v1_mma_ldmatrix"]
    m, n, k = 4095, 300, 77
    aligned = plan_launch(spec, _h("a", m, 80, 80), _h("b", 80, n, 304), _h("c", m, n, 304))
    assert aligned.vec and not aligned.row_split
    a_col = Mat("a", m, k, "col", m, 0, 2)  # A transposed in the kernel's terms
    assert plan_launch(spec, a_col, _h("b", k, n, n), _h("c", m, n, n)).row_split == 0
    b_col = Mat("b", k, n, "col", k, 0, 2)
    assert plan_launch(spec, _h("a", m, k, k), b_col, _h("c", m, n, n)).row_split == 0
    for other in SPECS.values():  # no other rung has the build
        if other.name != spec.name:
            assert not other.row_split
            assert all("PG_ROW_SPLIT" not in b for b in other.builds())


def test_builds_are_the_macro_product_plus_row_split():
    spec = SPECS["hgemm_v1_mma_ldmatrix"]
    builds = spec.builds()
    # + the PG_BATCH builds, + the split-K builds (fp32 partial sums: half the macro product);
    # all of it again with PG_BF16=1 for bfloat16
    n = 2 ** len(spec.macro_names())
    assert len(builds) == (n + 2 + n + n // 2) * len(spec.dtypes)
    assert all(not b.get("PG_ROW_SPLIT") for b in builds if b.get("PG_BATCH"))
    assert all(b["PG_BATCH"] == 1 and b["PG_OUT_F32"] == 1 for b in builds if b.get("PG_SPLIT"))
    split = [b for b in builds if b.get("PG_ROW_SPLIT")]
    assert {b["PG_OUT_F32"] for b in split} == {0, 1}
    assert all(b["PG_VEC"] == 0 and b["PG_TRANS_A"] == 0 and b["PG_TRANS_B"] == 0 for b in split)


def test_batches_go_on_the_grid_of_rungs_with_a_batched_build():
    spec = SPECS["hgemm_v1_mma_ldmatrix"]
    m, n, k, count = 4095, 300, 77, 7
    a, b, c = _h("a", m, k, k), _h("b", k, n, n), _h("c", m, n, n)  # unaligned: would split rows alone
    lp = plan_launch(spec, a, b, c, batch=(count, m * k, 0, m * n))
    assert lp.batch_count == count and lp.grid[2] == count and lp.row_split == 0
    assert lp.macros()["PG_BATCH"] == 1 and lp.macros() in spec.builds()
    assert lp.batch_strides == (m * k, 0, m * n)
    swapped = plan_launch(SPECS["cm_v13_cp_async_narrow_tile"], Mat("a", 64, 32, "row", 32, 0, 4), Mat("b", 32, 48, "row", 48, 0, 4),
                          Mat("c", 64, 48, "row", 48, 0, 4), batch=(3, 2048, 1536, 3072))
    assert swapped.swap and swapped.batch_strides == (1536, 2048, 3072)  # the kernel's A is the user's b
    assert "batch" in swapped.describe()


def test_tma_rung_takes_batches_whose_strides_tma_can_step():
    from polygemm.backends.cuda.planning import TmaUnsuitable

    spec = SPECS["hgemm_v2_wgmma_tma"]
    a, b, c = _h("a", 512, 512, 512), _h("b", 512, 512, 512), _h("c", 512, 512, 512)
    lp = plan_launch(spec, a, b, c, batch=(64, 512 * 512, 0, 512 * 512), sms=132)  # b shared by the batch
    assert lp.batch_count == 64 and lp.macros()["PG_BATCH"] == 1 and lp.macros() in spec.builds()
    assert lp.grid == (132, 1, 1)  # persistent: the kernel walks every matrix's tiles
    assert plan_launch(spec, a, b, c, batch=(2, 512 * 512, 0, 512 * 512), sms=132).grid == (16, 1, 1)  # fewer tiles than SMs
    with pytest.raises(TmaUnsuitable, match="batch stride"):  # 17 x 24 halves: not 16-byte steps
        plan_launch(spec, _h("a", 17, 24, 24), _h("b", 24, 32, 32), _h("c", 17, 32, 32), batch=(3, 17 * 24 + 4, 0, 17 * 32))
    # a reversed batch (x[::-1]: a negative batch stride) of A or B: tensor maps step forwards only
    with pytest.raises(TmaUnsuitable, match="backwards"):
        plan_launch(spec, a, b, c, batch=(3, -512 * 512, 0, 512 * 512), sms=132)
    with pytest.raises(TmaUnsuitable, match="backwards"):
        plan_launch(spec, a, b, c, batch=(3, 512 * 512, -512 * 512, 512 * 512), sms=132)
    back_c = plan_launch(spec, a, b, c, batch=(3, 512 * 512, 0, -512 * 512), sms=132)  # C's is a plain signed offset
    assert back_c.batch_strides == (512 * 512, 0, -512 * 512)


def test_rungs_without_a_batched_build_launch_once_per_matrix():
    spec = SPECS["cm_v11_smem_double_buffer"] if "cm_v11_smem_double_buffer" in SPECS else SPECS["cm_v01_naive"]
    lp = plan_launch(spec, Mat("a", 64, 64, "col", 64, 0, 4), Mat("b", 64, 64, "col", 64, 0, 4), Mat("c", 64, 64, "col", 64, 0, 4),
                     batch=(5, 4096, 4096, 4096))
    assert lp.batch_count == 0 and lp.grid[2] == 1


def test_auto_takes_batches_to_rungs_that_run_them_in_one_launch():
    records = [{"variant": "cm_v11_smem_double_buffer", "dtype": "float32", "m": 512, "n": 512, "k": 512, "tflops": 45.0},
               {"variant": "cm_v13_cp_async_narrow_tile", "dtype": "float32", "m": 512, "n": 512, "k": 512, "tflops": 40.0}]
    assert choose_auto_variant(512, 512, 512, "float32", records)[0] == "cm_v11_smem_double_buffer"
    chosen = choose_auto_variant(512, 512, 512, "float32", records, batched=True)[0]
    assert SPECS[chosen].batch and chosen == "cm_v13_cp_async_narrow_tile"


def test_auto_chooses_batches_from_measurements_of_batches():
    records = [{"variant": "hgemm_v2_wgmma_tma", "dtype": "float16", "m": 512, "n": 512, "k": 512, "tflops": 300.0},
               {"variant": "hgemm_v3_wgmma_pingpong", "dtype": "float16", "m": 512, "n": 512, "k": 512, "tflops": 250.0},
               {"variant": "hgemm_v3_wgmma_pingpong", "dtype": "float16", "m": 512, "n": 512, "k": 512, "tflops": 400.0, "batch": 64},
               {"variant": "hgemm_v2_wgmma_tma", "dtype": "float16", "m": 512, "n": 512, "k": 512, "tflops": 320.0, "batch": 64}]
    assert choose_auto_variant(512, 512, 512, "float16", records, sm=90)[0] == "hgemm_v2_wgmma_tma"
    chosen, why = choose_auto_variant(512, 512, 512, "float16", records, sm=90, count=64)
    assert chosen == "hgemm_v3_wgmma_pingpong" and "64 x 512x512x512" in why


@pytest.mark.parametrize("name,cfg", [
    ("hgemm_v2_wgmma_tma", {}), ("hgemm_v2_wgmma_tma_128x192", {"bn": 192}), ("hgemm_v2_wgmma_tma_128x128", {"bn": 128, "stages": 6}),
    ("hgemm_v3_wgmma_pingpong", {"bn": 128, "stages": 6, "pingpong": True}),
    ("hgemm_v3_wgmma_pingpong_persistent_tma_store", {"bn": 128, "stages": 6, "pingpong": True, "tma_store": True}),
    ("hgemm_v2_wgmma_tma_64x32_col", {"bn": 32, "consumers": 1, "stages": 18, "staged_epilogue": False})])
def test_tma_layout_counts_the_shared_memory_the_rows_declare(name, cfg):
    """tma.hgemm_v2_layout (direct launches) and variants.json (the backend) agree on each
    wgmma row's dynamic shared memory: ring, alignment slack, barriers and the staged epilogue."""
    from polygemm.backends.cuda.tma import HgemmV2Config, hgemm_v2_layout

    assert hgemm_v2_layout(False, False, HgemmV2Config(**cfg)).smem_bytes == SPECS[name].smem_bytes


@pytest.mark.parametrize("cc, smem, takes_v3", [((9, 0), 232448, True), ((12, 0), 101376, False)])
def test_auto_passes_over_a_rung_the_devices_shared_memory_cannot_hold(cc, smem, takes_v3):
    """skinny_v3 needs 204 KB of shared memory a block: an sm_90 device (227 KB) runs it for a
    17-row fp32 product, an sm_120-class one (99 KB) gets the next candidate, and the plan
    says why the faster estimate was passed over (auto never plans a launch that cannot run)."""
    import types

    import numpy as np

    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    be = CudaBackend()
    be._rt = types.SimpleNamespace(cc=cc, name=f"fake sm_{cc[0]}{cc[1]}", arch=f"sm_{cc[0]}{cc[1]}", max_smem_per_block=smem)
    a, b = np.ones((17, 4096), np.float32), np.ones((4096, 4096), np.float32)
    plan = be.plan(normalize(a, b), "auto")
    assert plan.private.launch is not None
    if takes_v3:
        assert plan.variant.startswith("skinny_v3_fp32"), str(plan)
    else:
        assert not plan.variant.startswith("skinny_v3"), str(plan)
        assert plan.private.launch.lp.smem_bytes <= smem
        assert any(name.startswith("skinny_v3") and "shared memory" in why for name, why in plan.candidates), plan.candidates


def test_tma_store_row_keeps_c_maps_per_c_pointer_and_a_b_maps_per_pair(monkeypatch):
    """The launcher of a TMA-store row encodes A's and B's tensor maps once per (A, B) pointers
    and C's once per C pointer (a call with a new result encodes only C's); with beta != 0 (or
    a 32-bit C) the kernel stores C itself and gets 128 zero bytes, nothing encoded for C."""
    from polygemm.backends.cuda import launch, tma

    encoded: list[str] = []

    def fake_ab(a, b, *args, **kw):
        encoded.append(f"ab{a},{b}")
        return (np.frombuffer(bytes([1]) * 128, "V128")[0], np.frombuffer(bytes([2]) * 128, "V128")[0])

    def fake_c(c, *args, **kw):
        encoded.append(f"c{c}")
        return np.frombuffer(bytes([3]) * 128, "V128")[0]

    monkeypatch.setattr(tma, "hgemm_v2_tensor_maps", fake_ab)
    monkeypatch.setattr(tma, "hgemm_v2_c_map", fake_c)
    spec = SPECS["hgemm_v3_wgmma_pingpong_persistent_tma_store"]
    assert spec.tma_store and not SPECS["hgemm_v3_wgmma_pingpong_persistent"].tma_store
    lp = plan_launch(spec, Mat("a", 256, 128, "row", 128, ptr=0, itemsize=2), Mat("b", 128, 256, "row", 256, ptr=0, itemsize=2),
                     Mat("c", 256, 256, "row", 256, ptr=0, itemsize=2))
    pl = launch.PreparedLaunch(None, spec, lp)  # type: ignore[arg-type]
    first = pl._tensor_maps(16, 32, 4096, 0.0)
    assert len(first) == 3 and first[2] == bytes([3]) * 128 and encoded == ["ab16,32", "c4096"]
    pl._tensor_maps(16, 32, 8192, 0.0)  # a new result: only C's map
    assert encoded == ["ab16,32", "c4096", "c8192"]
    pl._tensor_maps(16, 32, 4096, 0.0)  # both kept
    assert encoded == ["ab16,32", "c4096", "c8192"]
    assert pl._tensor_maps(16, 32, 12288, 0.5)[2] == bytes(128)  # beta != 0: the lanes store C
    assert encoded == ["ab16,32", "c4096", "c8192"]


def test_the_32_wide_row_swaps_a_thin_m_onto_wgmma_n():
    """17x4096x4096 row-major: the col row computes Cᵀ = Bᵀ·Aᵀ, so the long side (N = 4096) runs
    on the instruction's M in 64-row tiles and M = 17 on its n32; Bᵀ is N-contiguous (an
    M-major A to the kernel) and Aᵀ K-contiguous (the K-major B its 32-wide tile needs)."""
    lp = plan_launch(COL32, _half("a", 17, 4096), _half("b", 4096, 4096), _half("c", 17, 4096))
    assert lp.swap and (lp.m, lp.n, lp.k) == (4096, 17, 4096)
    assert lp.trans_a and lp.trans_b
    assert lp.grid[:2] == (1, 64)  # (n, m) grid: one 32-wide column of 64 tiles
    assert dict(lp.defines)["HG2_COL_C"] == 1 and lp.c.layout == "col"


def test_the_32_wide_row_refuses_an_n_contiguous_b_and_builds_none():
    """A column-major result leaves B as the kernel's B: N-contiguous B would need a 32-wide
    N-major box (the 64-byte swizzle), which the row has no build for, so the planner passes it
    over (TmaUnsuitable: auto tries the next candidate, a named variant falls back) and
    ``builds()`` never compiles PG_TRANS_B=0."""
    from polygemm.backends.cuda.planning import TmaUnsuitable

    with pytest.raises(TmaUnsuitable, match="K-major only"):
        plan_launch(COL32, _half("a", 64, 256), _half("b", 256, 512), _half("c", 64, 512, "col"))
    lp = plan_launch(COL32, _half("a", 64, 256), _half("b", 256, 512, "col"), _half("c", 64, 512, "col"))
    assert not lp.swap and lp.trans_b
    assert COL32.k_major_b and all(b["PG_TRANS_B"] == 1 for b in COL32.builds())
    assert not any(s.k_major_b for s in TMA if s.tile[1] >= 64)


def test_the_32_wide_rows_split_workspace_is_column_major():
    """K-slices of the col row land in a column-major fp32 workspace (the kernel's HG2_COL_C
    stores; the in-kernel reduction reads it with strides (1, ld))."""
    lp = plan_launch(COL32, _half("a", 17, 4096), _half("b", 4096, 4096), _half("c", 17, 4096), splits=2)
    assert lp.splits == 2 and lp.c.layout == "col" and lp.c.ld % 4 == 0 and lp.c.ld >= 4096


def test_auto_offers_the_32_wide_row_only_once_measured():
    """A 32-wide tile's pace is set by its ring of loads, not by the tensor-core rate a wider
    row's model was fitted to: without measurements of its own, ``rank`` leaves it out."""
    from polygemm.backends.cuda import cost

    recs = [{"variant": "hgemm_v2_wgmma_tma_64x64", "m": 17, "n": 4096, "k": 4096, "tflops": 30.0}]
    names = {c.variant for c in cost.rank([SPECS["hgemm_v2_wgmma_tma_64x64"], COL32], recs, 17, 4096, 4096)}
    assert names == {"hgemm_v2_wgmma_tma_64x64"}
    recs.append({"variant": COL32.name, "m": 17, "n": 4096, "k": 4096, "tflops": 33.0})
    best = cost.rank([SPECS["hgemm_v2_wgmma_tma_64x64"], COL32], recs, 17, 4096, 4096)[0]
    assert best.variant == COL32.name


@pytest.mark.parametrize("m,grid", [(1, (128, 1, 1)), (32, (66, 2, 1)), (1000, (2, 63, 1)), (1100, (128, 69, 1)),
                                    (2200, (128, 138, 1))])
def test_strip_walking_grid_keeps_the_sms_busy(m, grid):
    """A row whose threadblocks walk their strips runs at most a block per SM, at least two a
    row of tiles; past 66 rows of 16 (a forced variant's large M) a cap of one a row would idle
    SMs (M = 1100: 69 blocks) or walk every strip in one block (M = 2200: 138 blocks in two
    waves), so those keep a block a strip (N = 4096: 128 strips)."""
    spec = SPECS["skinny_v2_fp16_row"]
    assert spec.walks_strips
    lp = plan_launch(spec, row("a", m, 512), row("b", 512, 4096), row("c", m, 4096), sms=132)
    assert lp.grid == grid


@pytest.mark.parametrize("itemsize", [2, 4])
def test_pitch_copies_pad_to_128_bytes_and_serve_unaligned_operands(itemsize):
    per16, per128 = 16 // itemsize, 128 // itemsize
    on_sector = 32 // itemsize * 5  # 160 bytes: on a sector, off a 128-byte line
    assert pitch_copy(Mat("a", 64, on_sector, "row", on_sector, 0, itemsize)) is None
    copy = pitch_copy(Mat("a", 64, on_sector, "row", on_sector, 2 * itemsize, itemsize))  # a pointer off 16 bytes
    assert copy is not None and copy.ld % per128 == 0 and copy.aligned(per16)
    odd = on_sector + 1
    copy = pitch_copy(Mat("a", odd, 64, "col", odd, 0, itemsize))
    assert copy is not None and copy.ld % per128 == 0 and copy.ld >= odd


def test_bf16_rows_off_a_sector_are_copied_and_rows_on_one_are_read_as_they_are():
    import ml_dtypes

    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    bf = ml_dtypes.bfloat16
    off = CudaBackend().plan(normalize(np.zeros((8192, 16384), bf), np.zeros((16384, 408), bf)))
    assert off.padding and off.padding.startswith("b ") and "ld=448" in off.padding, str(off)
    assert "32-byte boundaries" in str(off)
    on = CudaBackend().plan(normalize(np.zeros((8192, 16384), bf), np.zeros((16384, 400), bf)))
    assert not on.padding and "byte boundaries" not in str(on), str(on)


def test_a_skinny_split_passes_the_whole_k_and_moves_by_slices():
    """A skinny rung's split build takes the whole K and cuts it itself: the launch passes K,
    the batch strides move A and B by a slice of whole steps, the grid walks its strips over
    the SMs left per slice, and the workspace holds one fp32 tile per slice."""
    spec = SPECS["skinny_v2_fp16_col"]
    k = 500000
    a = Mat("a", 512, k, "row", k, 0, 2)  # K-contiguous rows
    b = Mat("b", k, 2, "col", k, 0, 2)
    c = _half("c", 512, 2)  # row-major: the col rung takes the product swapped, its M the user's N
    lp = plan_launch(spec, a, b, c, splits=8)
    ks = spec.split_slice(k, 8)
    assert ks % 64 == 0 and 7 * ks < k <= 8 * ks
    assert lp.k == k and lp.slice_k == ks and lp.splits == 8
    assert lp.grid == (16, 1, 8)  # 16 strips, 132 // 8 SMs per slice
    assert lp.batch_strides[0] == ks and lp.batch_strides[1] == ks  # both K-contiguous here
    assert lp.macros()["PG_SPLIT"] == 1 and lp.macros()["PG_OUT_F32"] == 1
    big = plan_launch(spec, Mat("a", 4096, k, "row", k, 0, 2), b, _half("c", 4096, 2), splits=4)
    assert big.grid == (33, 1, 4)  # 128 strips walked by 132 // 4 blocks per slice


def test_a_skinny_split_refuses_a_slice_with_no_k():
    spec = SPECS["skinny_v3_fp32_row"]
    from polygemm.backends.cuda.planning import split_refusal
    a, b = Mat("a", 4, 100, "row", 100), Mat("b", 100, 64, "row", 64)
    assert split_refusal(spec, a, b, 3) is not None  # 100 in 32-deep steps: 64 + 36, no third slice
    assert split_refusal(spec, a, b, 2) is None


def test_a_plan_on_aligned_copies_copies_a_and_b_but_never_c():
    """The K-split's reduction and the staged epilogue write C at any alignment: a rung on copies copies only the
    operands it reads; only a rung that stores C through a tensor map would need C's copy."""
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    h = np.float16
    plan = CudaBackend().plan(normalize(np.zeros((512, 2816), h), np.zeros((2816, 1500), h)))  # b's and c's rows: 3000 bytes
    assert plan.padding and plan.padding.startswith("b (2816x1500, ld=1500)"), str(plan)
    unsplit = CudaBackend().plan(normalize(np.zeros((700, 700), h), np.zeros((700, 700), h)))
    assert ":split_k=" not in unsplit.variant and "a (700x700, ld=700)" in str(unsplit.padding), str(unsplit)
    for p in (plan, unsplit):
        assert "c (" not in p.padding and "out (" not in p.padding, p.padding
    stored = CudaBackend().plan(normalize(np.zeros((700, 704), h), np.zeros((704, 700), h)), "hgemm_v3_wgmma_pingpong_persistent_tma_store")
    assert "c (700x700, ld=700)" in str(stored.padding) or "hgemm_v1" in stored.variant, str(stored)


def test_scratch_is_kept_per_default_stream_up_to_a_size_and_owned_elsewhere():
    import threading

    from polygemm.backends.cuda.scratch import stream_scratch

    class Rt:
        def __init__(self):
            self.made, self.released, self.given = [], [], []

        def release(self, ptr, stream):
            self.released.append((ptr, stream))

        def give_back(self, ptrs):
            self.given.append(dict(ptrs))

    class Owner:
        pass

    rt, owner, kept, lock = Rt(), Owner(), {}, threading.Lock()
    ptrs = iter(range(4096, 1 << 20, 4096))

    def make():
        rt.made.append(next(ptrs))
        return rt.made[-1]

    first = stream_scratch(owner, kept, lock, rt, 1, make, 4096)
    assert first == (4096, False) and stream_scratch(owner, kept, lock, rt, 1, make, 4096) == first and len(rt.made) == 1
    assert stream_scratch(owner, kept, lock, rt, 0, make, 4096) == (8192, False)  # the null stream keeps its own
    other = stream_scratch(owner, kept, lock, rt, 0x7F00, make, 4096)  # a stream the caller may destroy: the call's own
    assert other == (12288, True) and stream_scratch(owner, kept, lock, rt, 0x7F00, make, 4096)[1] and 0x7F00 not in kept
    assert kept == {1: 4096, 0: 8192} and not rt.released
    from polygemm.backends.cuda.scratch import KEPT_SCRATCH_BYTES

    big = {}  # a block above the limit is the call's own on a default stream too: cached plans hold no large blocks
    assert stream_scratch(owner, big, lock, rt, 1, make, KEPT_SCRATCH_BYTES + 1)[1] and not big
    del owner  # the kept blocks go back with their owner
    import gc

    gc.collect()
    assert rt.given == [{1: 4096, 0: 8192}]


def test_a_padded_launch_lends_its_kept_block_to_one_call_at_a_time():
    """Two calls queueing on one stream at once must not share the copies' block: the second gets its own."""
    from polygemm.backends.cuda.launch import PaddedLaunch

    class Rt:
        def __init__(self):
            self.blocks, self.released = iter(range(1 << 20, 1 << 30, 1 << 20)), []

        def scratch(self, nbytes, stream):
            return next(self.blocks)

        def release(self, ptr, stream):
            self.released.append(ptr)

        def give_back(self, ptrs):
            pass

        def repitch(self, *args):
            pass

    class Inner:
        rt = Rt()

        def prepare(self, a, b, c, alpha, beta, stream):
            return (a, b, c)

        def launch(self, prepared, stream):
            pass

        def discard(self, prepared):
            pass

    b = Mat("b", 64, 100, "row", 100, 2, 2)
    pad = Mat("b (padded)", 64, 100, "row", 128, 0, 2)
    c = Mat("c", 8, 100, "row", 104, 0, 2)
    a = Mat("a", 8, 64, "row", 64, 0, 2)
    launch = PaddedLaunch(Inner(), (a, b, c), (None, pad, None))  # type: ignore[arg-type]
    first = launch.prepare(0x1000, 0x2002, 0x3000, 1.0, 0.0, 1)
    second = launch.prepare(0x1000, 0x2002, 0x3000, 1.0, 0.0, 1)  # the first has not queued its launches yet
    assert first[2][1] != second[2][1] and not first[4].owned and second[4].owned, (first, second)  # the kept block, then one of its own
    launch.launch(second, 1)
    launch.launch(first, 1)
    assert launch.inner.rt.released == [second[2][1]]
    third = launch.prepare(0x1000, 0x2002, 0x3000, 1.0, 0.0, 1)
    assert third[2][1] == first[2][1] and not third[4].owned  # once queued, the kept block is lent again
    launch.discard(third)
    assert launch.prepare(0x1000, 0x2002, 0x3000, 1.0, 0.0, 1)[2][1] == first[2][1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.complex64])
@pytest.mark.parametrize("sa,sb", [((0, 8), (8, 5)), ((6, 8), (8, 0)), ((0, 4, 8), (8, 5)), ((3, 0), (0, 4)), ((0, 0), (0, 0))])
def test_empty_products_plan_without_a_launch(sa, sb, dtype):
    # M, N or the batch 0 (or K 0: beta·c or zeros) launch no GEMM: planning must not weigh estimates of no tiles
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    be = CudaBackend()
    be._rt = None
    plan = be.plan(normalize(np.zeros(sa, dtype), np.zeros(sb, dtype)))
    assert "empty product" in plan.reason and not plan.private.one_launch
