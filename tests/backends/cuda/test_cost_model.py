"""The cuda backend's cost model, split-K planning and pacing (pure: no GPU)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda import backend as cuda_backend, cost
from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.catalog import anchored_aligned, auto_candidates, choose_auto_variant
from polygemm.backends.cuda.planning import FULL_SPEED_PITCH, Mat, pitch_off, plan_launch, split_refusal, strides
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.problem import normalize

from tests.helpers import REPO_ROOT


SPECS = kernel_specs()


V2, V3, V1 = SPECS["hgemm_v2_wgmma_tma"], SPECS["hgemm_v3_wgmma_pingpong"], SPECS["hgemm_v1_mma_ldmatrix"]


def h(name: str, rows: int, cols: int, layout: str = "row", ld: int | None = None, ptr: int = 0) -> Mat:
    return Mat(name, rows, cols, layout, ld if ld is not None else (cols if layout == "row" else rows), ptr, 2)


def f(name: str, rows: int, cols: int, layout: str = "col") -> Mat:
    return Mat(name, rows, cols, layout, rows if layout == "col" else cols, 0, 4)


CM13 = SPECS["cm_v13_cp_async_narrow_tile"]


def _plan(a, b, **kw):
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    return CudaBackend().plan(normalize(a, b, **kw))


V1_ROW = "skinny_v1_fp16_row"


def plan(m: int, n: int, k: int, b_layout: str = "row"):
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16) if b_layout == "row" else np.zeros((n, k), np.float16).T
    return CudaBackend().plan(normalize(a, b))


@pytest.mark.parametrize("spec", [V1, V2, V3], ids=lambda s: s.name)
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")])
def test_split_k_runs_k_slices_as_a_batch_into_an_fp32_workspace(spec, layouts):
    la, lb = layouts
    a, b, c = h("a", 512, 16384, la), h("b", 16384, 512, lb), h("c", 512, 512)
    lp = plan_launch(spec, a, b, c, splits=8)
    assert (lp.m, lp.n, lp.k) == (512, 512, 2048) and lp.splits == 8 and lp.batch_count == 8
    assert lp.c.itemsize == 4 and lp.c.ld == 512 and lp.out_f32 is True  # partial sums in fp32
    assert lp.dest is not None and lp.dest.itemsize == 2 and lp.dest.ld == 512
    # slice s of A starts s * 2048 columns on; of B, s * 2048 rows on; of the workspace, s whole matrices on
    assert lp.batch_strides == (strides(lp.a)[1] * 2048, strides(lp.b)[0] * 2048, 512 * 512)
    assert lp.macros()["PG_BATCH"] == 1 and lp.macros() in spec.builds()
    assert "split-K" in lp.describe()


def test_tma_rules_bind_the_result_only_where_a_tensor_map_stores_it():
    """TMA's 16-byte rule binds C only in a rung whose epilogue stores it through a tensor map; the
    others write any C in place, and a split plan writes its workspace (the reduction writes C)."""
    c = h("c", 512, 511, ld=515)
    a, b = h("a", 512, 16384), h("b", 16384, 511, ld=512)
    assert plan_launch(V3, a, b, c).c == c
    with pytest.raises(pg.UnsupportedProblemError, match="c: TMA needs 16-byte aligned"):
        plan_launch(SPECS["hgemm_v3_wgmma_pingpong_persistent_tma_store"], a, b, c)
    with pytest.raises(pg.UnsupportedProblemError, match="a: TMA needs 16-byte aligned"):
        plan_launch(V3, h("a", 512, 16383, ld=16383), h("b", 16383, 511, ld=512), c)
    lp = plan_launch(V3, a, b, c, splits=4)
    assert lp.dest == c and lp.c.ld == 512  # workspace rows padded to 16 bytes


def test_split_refusals_name_the_reason():
    assert "not a multiple" in split_refusal(V3, h("a", 64, 1000), h("b", 1000, 64), 3)
    assert "16-byte" in split_refusal(V3, h("a", 64, 1020), h("b", 1020, 64), 10)  # slices of 102 halves
    assert "batched build" in split_refusal(SPECS["cm_v11_smem_double_buffer"], f("a", 64, 4096), f("b", 4096, 64), 4)
    with pytest.raises(pg.UnsupportedProblemError, match="cannot split K"):
        plan_launch(V3, h("a", 64, 1000), h("b", 1000, 64), h("c", 64, 64), splits=3)


def test_fp32_split_k_keeps_the_rung_layout():
    lp = plan_launch(CM13, f("a", 512, 8192), f("b", 8192, 512), f("c", 512, 512), splits=4)
    assert lp.k == 2048 and lp.c.layout == "col" and lp.out_f32 is None and lp.batch_strides[2] == 512 * 512
    assert lp.macros()["PG_SPLIT"] == 1 and lp.macros() in CM13.builds()


def test_waves_count_whole_tiles_over_the_sms():
    model = cost.RungModel(flops_per_sm_us=4e6, tile_us=1.0)
    one = cost.estimate_us(V2, model, 128 * 11, 256 * 12, 4096, sms=132)  # 132 tiles: one wave
    more = cost.estimate_us(V2, model, 128 * 11, 256 * 12 + 1, 4096, sms=132)  # 143 tiles: two
    assert one.waves == pytest.approx(1.0) and more.waves > 1.0
    assert more.estimate_us > 1.8 * (one.estimate_us - cost.LAUNCH_US)


def test_fit_recovers_the_constants_it_was_made_with():
    truth = cost.RungModel(flops_per_sm_us=5e6, tile_us=2.0)
    shapes = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 512), (1000, 3000, 2000), (512, 512, 16384)]
    records = []
    for m, n, k in shapes:
        t = cost.estimate_us(V3, truth, m, n, k).estimate_us
        records.append({"variant": V3.name, "m": m, "n": n, "k": k, "tflops": 2.0 * m * n * k / (t * 1e6)})
    fitted = cost.fit_rung(V3, records)
    assert fitted is not None and fitted.measurements == len(shapes)
    assert fitted.flops_per_sm_us == pytest.approx(5e6, rel=0.05) and fitted.tile_us == pytest.approx(2.0, rel=0.1)


def test_a_measured_shape_is_estimated_at_its_measurement():
    records = [{"variant": V2.name, "m": 4096, "n": 4096, "k": 4096, "tflops": 500.0},
               {"variant": V2.name, "m": 1024, "n": 1024, "k": 1024, "tflops": 100.0}]
    best = next(c for c in cost.rank([V2], records, 4096, 4096, 4096) if not c.splits)
    assert best.estimate_us == pytest.approx(2 * 4096**3 / 500e6, rel=1e-6)


def test_between_measured_shapes_the_nearest_measurements_are_blended_by_nearness():
    """Away from a measured shape the estimate rests on the rung's nearest measurements together, the nearer weighing
    more: between a shape where the rung ran at the model's pace and one where it ran at half of it, the estimate lies
    between the two, nearer the nearer one's; at either shape it is that measurement alone."""
    model = cost.RungModel(flops_per_sm_us=5e6, tile_us=2.0)
    exact = lambda m, n, k: cost.estimate_us(V2, model, m, n, k).estimate_us  # noqa: E731
    fitted_shapes = [(1024, 1024, 1024), (2048, 2048, 2048), (8192, 8192, 8192), (1000, 3000, 2000), (512, 512, 16384)]
    records = [{"variant": V2.name, "m": m, "n": n, "k": k, "tflops": 2.0 * m * n * k / (exact(m, n, k) * 1e6)}
               for m, n, k in fitted_shapes]
    slow = {"variant": V2.name, "m": 4096, "n": 4096, "k": 4096, "tflops": 2.0 * 4096**3 / (2 * exact(4096, 4096, 4096) * 1e6)}
    records.insert(0, slow)

    def estimate(m, n, k):
        return next(c for c in cost.rank([V2], records, m, n, k) if not c.splits).estimate_us

    model_us = cost.estimate_us(V2, cost.fit_rung(V2, records), 3000, 3000, 3000).estimate_us
    near_slow = estimate(3000, 3000, 3000) / model_us  # nearer 4096^3 (half pace) than 2048^3 (full pace)
    near_fast = estimate(2400, 2400, 2400) / model_us  # nearer 2048^3
    assert near_fast < near_slow
    assert 1.1 < near_slow < 1.9  # the nearest alone, at half pace, would say 2 (and more for its distance)
    assert len(cost.anchors_for(V2, records, 3000, 3000, 3000, 1)) == cost.ANCHORS_BLENDED
    assert estimate(4096, 4096, 4096) == pytest.approx(2 * 4096**3 / (float(slow["tflops"]) * 1e6), rel=1e-6)
    assert [a is slow for a in cost.anchors_for(V2, records, 4096, 4096, 4096, 1)] == [True]


def test_a_split_candidate_weighs_unsplit_measurements_as_the_unsplit_one_does():
    """A candidate that splits K, of a rung measured unsplit only, is anchored on the same measurements as the unsplit
    candidate, with the same weights: the penalty every one of them bears for running unsplit weighs none up. Here the
    nearest ran at the model's pace and four farther ones at half of it."""
    model = cost.RungModel(flops_per_sm_us=5e6, tile_us=2.0)
    exact = lambda m, n, k: cost.estimate_us(V2, model, m, n, k).estimate_us  # noqa: E731
    near, far = (512, 512, 16384), [(128, 512, 16384), (512, 128, 16384), (2048, 512, 16384), (512, 2048, 16384)]
    records = [{"variant": V2.name, "m": m, "n": n, "k": k, "tflops": 2.0 * m * n * k / (exact(m, n, k) * 1e6)} for m, n, k in [near]]
    records += [{"variant": V2.name, "m": m, "n": n, "k": k, "tflops": 2.0 * m * n * k / (2 * exact(m, n, k) * 1e6)} for m, n, k in far]
    fitted = cost.fit_rung(V2, records)
    m, n, k = 600, 600, 16384
    ranked = {c.splits: c.estimate_us for c in cost.rank([V2], records, m, n, k)}
    split = next(s for s in ranked if s)
    scale_unsplit = ranked[0] / cost.estimate_us(V2, fitted, m, n, k).estimate_us
    scale_split = (ranked[split] - cost.SPLIT_HOST_US) / cost.estimate_us(V2, fitted, m, n, k, splits=split).estimate_us
    assert scale_split == pytest.approx(scale_unsplit, rel=0.03)  # (each anchor's own penalty adds 1.5% of trust lost)


def test_split_k_wins_where_tiles_are_few_and_k_is_long():
    ranked = auto_candidates(512, 512, 16384, "float16", sm=90)
    # K shared out over the SMs: split-K, or a stream-K row
    assert ranked[0].splits >= 2 or SPECS[ranked[0].variant].streamk, [c.label for c in ranked[:4]]
    assert not auto_candidates(8192, 8192, 8192, "float16", sm=90)[0].splits


def test_auto_reason_names_the_model_and_its_anchor():
    name, why = choose_auto_variant(4096, 4096, 4096, "float16", sm=90)
    assert name in SPECS and "cost model" in why and "anchored on the measurement of" in why


def test_split_choices_are_equal_slices_of_whole_k_tiles():
    assert cost.split_choices(V3, 16384)[:3] == [2, 4, 8]
    assert cost.split_choices(V3, 65537) == []  # prime K: no equal slices
    assert cost.split_choices(SPECS["cm_v11_smem_double_buffer"], 16384) == []  # no batched build
    assert all(16384 // s >= cost.MIN_SLICE_K for s in cost.split_choices(V3, 16384))


def test_variant_names_a_split_explicitly():
    from polygemm.backends.cuda.backend import CudaBackend

    be = CudaBackend()
    assert be.get_variant("hgemm_v3_wgmma_pingpong:split_k=4").name == "hgemm_v3_wgmma_pingpong"
    with pytest.raises(pg.UnsupportedProblemError, match="at least 2"):
        be.get_variant("hgemm_v3_wgmma_pingpong:split_k=one")
    with pytest.raises(pg.UnsupportedProblemError, match="cannot split K"):
        be.get_variant("cm_v11_smem_double_buffer:split_k=2")


def test_panels_keep_every_piece_within_32_bit_offsets():
    from polygemm.backends.cuda.planning import INT32_MAX, panel_mats, panels

    a, b, c = f("a", 70000, 32768, "row"), f("b", 32768, 128, "row"), f("c", 70000, 128, "row")
    got = panels(a, b, c)
    assert len(got) == 2 and sum(r[1] for r, _ in got) == 70000 and all(q == (0, 128) for _, q in got)
    for rows, cols in got:
        pa, pb, pc, (oa, _, oc) = panel_mats(a, b, c, rows, cols)
        assert max(pa.max_offset, pb.max_offset, pc.max_offset) <= INT32_MAX
        assert oa == rows[0] * 32768 * 4 and oc == rows[0] * 128 * 4
    wide = panels(f("a", 64, 1024, "row"), f("b", 1024, 40000 * 64, "col"), f("c", 64, 40000 * 64, "row"))
    assert len(wide) > 1 and sum(q[1] for _, q in wide) == 40000 * 64


def test_a_k_span_past_32_bits_is_refused_by_panels_with_the_way_out():
    from polygemm.backends.cuda.planning import IndexRangeError, panels

    with pytest.raises(IndexRangeError, match="K = 32768"):
        panels(f("a", 70000, 32768, "col"), f("b", 32768, 128, "col"), f("c", 70000, 128, "col"))


def test_backend_runs_big_operands_in_slices_or_panels():
    """Column-major A of 70000 x 32768: K-slices fit (each slice's columns are few); row-major A:
    panels of rows. Planning only (no device): the backend's _fit decides."""
    from polygemm.backends.cuda.backend import CudaBackend

    be = CudaBackend()
    lp, parts = be._fit(CM13, f("a", 70000, 32768, "col"), f("b", 32768, 128, "col"), f("c", 70000, 128, "col"),
                        batch=(0, 0, 0, 0), rt=None)
    assert parts is None and lp.splits >= 2 and (70000 - 1) + (lp.k - 1) * 70000 < 2**31  # one K-slice of A
    lp, parts = be._fit(CM13, f("a", 70000, 32768, "row"), f("b", 32768, 128, "row"), f("c", 70000, 128, "row"),
                        batch=(0, 0, 0, 0), rt=None)
    assert parts is not None and len(parts) == 2


def test_unaligned_fp16_runs_the_tma_rung_on_aligned_copies_when_that_is_faster():
    """4095 x 4097 x 4093: no leading dimension is a multiple of 8 halves. The TMA rungs
    refuse the operands as they are; with copies into aligned scratch they still beat the
    mma rung's unaligned build by the estimates, and the plan says what it copies."""
    import numpy as np

    a = np.zeros((4095, 4093), np.float16)
    b = np.zeros((4093, 4097), np.float16)
    plan = _plan(a, b)
    assert plan.variant.startswith("hgemm_v") and "wgmma" in plan.variant, str(plan)
    assert plan.padding and "aligned copy" in plan.padding and "aligned scratch" in str(plan), str(plan)
    assert any("TMA needs 16-byte aligned" in why for _, why in plan.candidates), str(plan)


@pytest.mark.parametrize("variant", ["hgemm_v2_wgmma_tma_64x64", "hgemm_v3_wgmma_pingpong", "hgemm_v2_wgmma_tma_64x128:split_k=2"])
def test_a_named_tma_rung_runs_itself_on_aligned_copies_of_unaligned_operands(variant):
    """700 x 700 x 704 fp16 with 700-half rows of B: the named rung runs on an aligned copy of B, as auto runs it (on
    an H100 at 700^3 21 µs a call, where the mma rung's unaligned build, which used to run instead, took 36), and the
    plan says what it copies and why."""
    b_rows = np.zeros((704, 700), np.float16)
    plan = CudaBackend().plan(normalize(np.zeros((700, 704), np.float16), b_rows), variant)
    assert plan.variant == variant, str(plan)
    assert plan.padding == "b (704x700, ld=700) -> an aligned copy (ld=704)", str(plan)
    assert any("16-byte aligned" in note and "copied into aligned scratch" in note for note in plan.notes), str(plan)


def test_a_named_split_of_a_tma_rung_runs_on_aligned_copies_where_its_slices_would_start_off_16_bytes():
    """77 x 136 x 72 fp16 with a column-major A of 77-half columns: a K-slice of 36 starts 72 bytes on, off 16-byte
    boundaries, as the operands lie; on the copies (ld 128) every slice starts on one. A K-contiguous A whose slices the
    copies leave off 16 bytes (K = 706: 353-half slices) is refused, naming the split."""
    h16 = np.float16
    named = "hgemm_v2_wgmma_tma_64x128:split_k=2"
    plan = CudaBackend().plan(normalize(np.zeros((72, 77), h16).T, np.zeros((72, 136), h16)), named)
    assert plan.variant == named and plan.padding.startswith("a (77x72, ld=77) -> an aligned copy (ld=128)"), str(plan)
    assert any("cannot split K" in note and "copied into aligned scratch" in note for note in plan.notes), str(plan)
    with pytest.raises(pg.UnsupportedProblemError, match="cannot split K: a K-slice of 353"):
        CudaBackend().plan(normalize(np.zeros((700, 706), h16), np.zeros((700, 706), h16).T), named)


def test_a_named_tma_rung_hands_what_copies_do_not_serve_to_the_mma_rung():
    """A batch (the copies are made for one product) and a column-major A for the 32-wide B tile, which reads its B (the
    kernel's, Aᵀ here) K-major only: the mma rung runs, and the plan says which rung could not and why."""
    h16 = np.float16
    batch = CudaBackend().plan(normalize(np.zeros((3, 70, 70), h16), np.zeros((3, 70, 70), h16)), "hgemm_v2_wgmma_tma_64x64")
    col_a = CudaBackend().plan(normalize(np.zeros((64, 64), h16).T, np.zeros((64, 64), h16)), "hgemm_v2_wgmma_tma_64x32_col")
    for plan, named, why in ((batch, "hgemm_v2_wgmma_tma_64x64", "16-byte aligned"), (col_a, "hgemm_v2_wgmma_tma_64x32_col", "K-major")):
        assert plan.variant == "hgemm_v1_mma_ldmatrix" and plan.padding is None, str(plan)
        assert any(note.startswith(f"{named} cannot take this problem") and why in note and "runs instead" in note
                   for note in plan.notes), str(plan)
    # copies serve neither: an aligned batch is told what the rung refuses of it, not of copies none would make
    assert not any("aligned copies" in note for note in col_a.notes), str(col_a)


def test_rows_off_sector_boundaries_are_copied_where_that_pays():
    """8192 x 408 x 16384 fp16: B's rows are 816 bytes, so half of B's TMA box rows start off a
    32-byte sector and span a sector more than they move, and a one-CTA rung reads B 64 times
    from L2 (on the H100 2000-byte rows cost the 128x256 row 286 against 200 µs at
    4096x1000x16384). A pitch-aligned copy of B costs less than that; the result is too thin
    for a cluster row, so the plan copies B only and says why."""
    import numpy as np

    plan = _plan(np.zeros((8192, 16384), np.float16), np.zeros((16384, 408), np.float16))
    assert "wgmma" in plan.variant and plan.padding and plan.padding.startswith("b ") and "ld=448" in plan.padding, str(plan)
    assert "a (" not in plan.padding and "32-byte boundaries" in str(plan), str(plan)


@pytest.mark.parametrize("m,n,k", [(8192, 400, 16384), (2000, 2000, 8192), (4096, 4000, 4096)])
def test_rows_on_sector_boundaries_are_read_as_they_are(m, n, k):
    """Rows of 800, 4000 and 8000 bytes start on 32-byte sectors though not on 128-byte lines:
    TMA reads them at full speed (H100, through the call: 2000x2000x8192 1.03x of cuBLAS as
    they were, 0.73x with B copied to 128-byte rows first; h100_call_pitch_copies2_fp16.md), so
    the plan copies nothing and notes no pitch cost."""
    import numpy as np

    plan = _plan(np.zeros((m, k), np.float16), np.zeros((k, n), np.float16))
    assert not plan.padding and "byte boundaries" not in str(plan), str(plan)


def test_a_cluster_row_reads_rows_off_128_byte_boundaries_as_they_are():
    """4096 x 1000 x 16384 fp16, B's rows 2000 bytes: the 2-CTA cluster row loses little to them
    (measured on the H100: 199.8 µs compact against 211.2 padded, where its copy of B is
    another ~25 µs), so the plan reads B as it is and says what that costs."""
    import numpy as np

    plan = _plan(np.zeros((4096, 16384), np.float16), np.zeros((16384, 1000), np.float16))
    assert SPECS[plan.variant.partition(":")[0]].cluster > 1 and not plan.padding, str(plan)
    assert "start off 32-byte boundaries" in str(plan), str(plan)
    copied = [why for name, why in plan.candidates if f"{plan.variant} on aligned copies" == name]
    assert copied, str(plan)  # the copy was weighed, and passed over


def test_rows_off_128_byte_boundaries_stay_where_a_copy_costs_more():
    """1000 x 1000 x 4096: B is read 8 times from L2, not 32; its copy would cost more than
    its pitch does, so B is read as it is, and the plan says what that costs."""
    import numpy as np

    plan = _plan(np.zeros((1000, 4096), np.float16), np.zeros((4096, 1000), np.float16))
    assert not plan.padding, str(plan)
    if "wgmma" in plan.variant:
        assert "start off 32-byte boundaries" in str(plan), str(plan)


def test_pitch_penalty_counts_the_operand_the_kernel_reads_across_tiles():
    """The penalty is the misaligned operand's reads from L2: the kernel's B once per tile row,
    its A once per tile column; with the operand swap the user's A is the kernel's B."""
    from polygemm.backends.cuda import cost
    from polygemm.backends.cuda.variants import kernel_specs

    spec = kernel_specs()["hgemm_v2_wgmma_tma"]  # row layout, 128 x 256 tiles
    bm, bn, _ = spec.tile
    m, n, k = 4096, 1000, 16384
    b_only = cost.pitch_penalty_us(spec, m, n, k, False, True)
    assert b_only == pytest.approx(-(-m // bm) * n * k * 2 / cost.MISALIGNED_BYTES_PER_US)
    a_only = cost.pitch_penalty_us(spec, m, n, k, True, False)
    assert a_only == pytest.approx(-(-n // bn) * m * k * 2 / cost.MISALIGNED_BYTES_PER_US)
    # a column-major result swaps the operands: the user's B is then the kernel's A
    assert cost.pitch_penalty_us(spec, m, n, k, False, True, result_layout="col") == pytest.approx(
        -(-m // bn) * n * k * 2 / cost.MISALIGNED_BYTES_PER_US)
    assert cost.pitch_penalty_us(kernel_specs()["cm_v13_cp_async_narrow_tile"], m, n, k, True, True) == 0.0


def test_a_cluster_row_keeps_a_small_share_of_the_pitch_penalty():
    """A cluster row's CTAs load a shared tile in parts, multicast: compact 2000-byte rows cost
    it a small share of what they cost the one-CTA row of the same tile (measured on the H100:
    2.3 against 20.1 µs at 4096x1000x4096), so auto weighs that share, and reading B as it is
    beats copying it first."""
    from polygemm.backends.cuda import cost
    from polygemm.backends.cuda.variants import kernel_specs

    one, pair = kernel_specs()["hgemm_v2_wgmma_tma"], kernel_specs()["hgemm_v2_wgmma_tma_cluster2"]
    assert one.tile == pair.tile and pair.cluster == 2
    m, n, k = 4096, 1000, 16384
    alone = cost.pitch_penalty_us(one, m, n, k, False, True)
    shared = cost.pitch_penalty_us(pair, m, n, k, False, True)
    assert shared == pytest.approx(cost.CLUSTER_PITCH_SHARE * alone) and shared < 0.25 * alone
    copy = cost.copy_us([2 * k * n * 2])  # B read and written
    assert shared < copy < alone  # the cluster row reads B as it is; the one-CTA row would rather copy it


def test_aligned_fp16_needs_no_copies():
    import numpy as np

    plan = _plan(np.zeros((4096, 4096), np.float16), np.zeros((4096, 4096), np.float16))
    assert not plan.padding and "wgmma" in plan.variant, str(plan)


def test_small_m_goes_to_a_skinny_rung_or_a_split():
    import numpy as np

    plan = _plan(np.zeros((16, 4096), np.float16), np.zeros((4096, 4096), np.float16))
    assert "skinny" in plan.variant or ":split_k=" in plan.variant or "streamk" in plan.variant, str(plan)
    assert "cost model" in plan.reason and plan.candidates


def test_a_new_m_by_1_result_is_planned_column_major_but_a_batch_stays_c_ordered():
    import numpy as np

    one = _plan(np.zeros((4096, 4096), np.float16), np.zeros((4096, 1), np.float16))
    # column-major: the rung for a small M serves the small N (a skinny rung, or a split of a wgmma tile)
    assert one.private.result_layout == "col" and any(w in one.variant for w in ("skinny", ":split_k=", "streamk")), str(one)
    batch = _plan(np.zeros((3, 64, 32), np.float16), np.zeros((3, 32, 1), np.float16))
    assert batch.private.result_layout == "row"


def test_composed_launches_report_their_first_piece():
    from polygemm.backends.cuda.launch import PaddedLaunch, PanelLaunch, PreparedLaunch

    lp = plan_launch(V3, h("a", 64, 64), h("b", 64, 64), h("c", 64, 64))
    piece = PreparedLaunch(None, V3, lp)  # type: ignore[arg-type]  # no device: planning only
    for composed in (PanelLaunch([(piece, (0, 0, 0))]), PaddedLaunch(piece, (lp.a, lp.b, lp.c), (None, None, None))):
        assert composed.lp is lp and composed.spec is V3 and composed.variant == V3.name and composed.pieces() == [piece]


def test_usable_sms_follow_the_mps_share(monkeypatch):
    """Persistent grids and split-K's resident grids are sized to the SMs the process may use."""
    from polygemm.backends.cuda.device import usable_sms

    monkeypatch.delenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", raising=False)
    assert usable_sms(132) == 132
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")
    assert usable_sms(132) == 33
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "0.1")
    assert usable_sms(132) == 1
    monkeypatch.setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "lots")
    assert usable_sms(132) == 132


def test_cluster_rows_are_weighed_for_mid_size_results_only():
    """The 2-CTA cluster rows (B shared by two vertically adjacent tiles) are auto candidates
    where both result sides reach CLUSTER_MIN_SIDE, and never for a thin result, whose
    cluster's second CTA has few or no rows; a named cluster row still plans anywhere, on a
    grid of whole clusters."""
    import numpy as np

    clusters = {n for n, s in SPECS.items() if s.cluster > 1}
    assert clusters, "the catalog has cluster rows"
    wide = [c.variant for c in auto_candidates(1000, 3000, 2000, "float16", sm=90)]
    thin = [c.variant for c in auto_candidates(16, 4096, 4096, "float16", sm=90)]
    assert clusters & set(wide), wide[:8]
    assert not clusters & set(thin), [v for v in thin if v in clusters]
    a, b = np.zeros((16, 4096), np.float16), np.zeros((4096, 4096), np.float16)
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    plan = CudaBackend().plan(normalize(a, b), "hgemm_v2_wgmma_tma_128x64_cluster2")
    assert plan.variant == "hgemm_v2_wgmma_tma_128x64_cluster2"
    assert plan.launch["grid"] == (128, 1, 1), plan.launch  # 64 units of two 128-row tiles, two CTAs each
    assert plan.launch["cluster"].startswith("2x1 CTAs") and "B shared by 2" in plan.launch["cluster"], plan.launch
    assert "cluster" not in CudaBackend().plan(normalize(a, b), "hgemm_v2_wgmma_tma_128x64").launch


def test_a_cluster_row_counts_whole_clusters_and_splits_the_shared_boxes():
    """A 2x2 cluster row launches its tile rows and columns rounded up to the cluster (the
    cost model counts those threadblocks), and each CTA's tensor-map box is its share of the
    tile it multicasts: half of A's rows (row-major A) and half of B's columns (column-major B)."""
    from polygemm.backends.cuda.tma import HgemmV2Config, hgemm_v2_layout

    spec = SPECS["hgemm_v2_wgmma_tma_128x128_cluster2x2"]
    assert spec.cluster_mn == (2, 2) and spec.cluster == 4 and spec.batch
    assert cost.tiles(spec, 1000, 1000, "row") == 64  # 8 x 8 tiles of 128 x 128
    assert cost.tiles(spec, 1100, 1000, "row") == 10 * 8  # 9 tile rows round up to 10
    one = SPECS["hgemm_v2_wgmma_tma_128x128"]
    assert cost.tiles(one, 1100, 1000, "row") == 9 * 8
    cfg = HgemmV2Config(bn=128, stages=6, cluster_m=2, cluster_n=2)
    assert hgemm_v2_layout(False, True, cfg).box_a == (64, 64)  # 128 rows of A, two CTAs loading 64 each
    assert hgemm_v2_layout(False, True, cfg).box_b == (64, 64)  # 128 columns of K-major B, two CTAs
    assert hgemm_v2_layout(True, False, cfg).box_a == (64, 64)  # M-major A: 64 x 64 boxes, shared out by box
    assert hgemm_v2_layout(False, False, cfg).smem_bytes == spec.smem_bytes


def test_a_cluster_row_splits_k_on_whole_clusters_and_only_where_measured():
    """K-slices (and batches) on a cluster row run on a grid of whole clusters, at most one
    per ``cluster`` SMs, each walking units of cm x cn tiles; the split counts for the tile
    grid's counters. ``auto`` weighs a cluster row's split only at slice counts measured for
    it, and never offers a cluster row for a batch (none was measured)."""
    from polygemm.backends.cuda.planning import Mat, plan_launch

    spec = SPECS["hgemm_v2_wgmma_tma_128x128_cluster2x2"]
    a = Mat("a", 1000, 16384, "row", 16384, 0, 2)
    b = Mat("b", 16384, 1000, "row", 1000, 0, 2)
    c = Mat("c", 1000, 1000, "row", 1000, 0, 2)
    lp = plan_launch(spec, a, b, c, sms=132, splits=2)
    assert lp.splits == 2 and lp.batch_count == 2 and lp.cluster == (2, 2)
    assert lp.grid == (128, 1, 1)  # 4 x 4 units of 2 x 2 tiles, two slices: 32 clusters of four
    lp = plan_launch(spec, a, b, c, sms=132, splits=4)
    assert lp.grid == (132, 1, 1)  # 64 units, at most 33 clusters (the launch lowers it to what the GPCs hold)
    lp = plan_launch(SPECS["hgemm_v2_wgmma_tma_128x64_cluster2"], a, b, c, sms=132, splits=2)
    assert lp.grid == (132, 1, 1) and lp.grid[0] % 2 == 0  # 4 x 16 units of two tiles, two slices: 66 clusters

    recs = [{"variant": "hgemm_v2_wgmma_tma_128x128_cluster2x2", "m": 1000, "n": 1000, "k": 4096, "dtype": "float16",
             "tflops": 500.0, "mode": "kernel"},
            {"variant": "hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=2", "m": 1000, "n": 1000, "k": 16384,
             "dtype": "float16", "tflops": 600.0, "mode": "kernel"}]
    only = [spec]
    got = {(c.variant, c.splits) for c in cost.rank(only, recs, 1000, 1000, 16384)}
    assert got == {(spec.name, 0), (spec.name, 2)}, got  # 4, 8, ... slices were not measured
    assert {(c.variant, c.splits) for c in cost.rank(only, recs[:1], 1000, 1000, 16384)} == {(spec.name, 0)}
    assert cost.rank(only, recs, 1000, 1000, 16384, count=3) == []
    # a cluster row with no measurements of its own is not weighed at all (its pace is its own:
    # bound by L2, its grid by the GPCs), however well a same-size cluster row measured; once
    # measured whole, it is weighed whole only, not at the other row's measured slice counts
    donor = SPECS["hgemm_v2_wgmma_tma_128x128_cluster2"]
    borrower = SPECS["hgemm_v2_wgmma_tma_cluster2"]
    recs2 = [{**r, "variant": r["variant"].replace("128x128_cluster2x2", "128x128_cluster2")} for r in recs]
    got = {(c.variant, c.splits) for c in cost.rank([donor, borrower], recs2, 1000, 1000, 16384)}
    assert (donor.name, 2) in got and not any(v == borrower.name for v, _ in got), got
    whole = recs2 + [{**recs[0], "variant": borrower.name, "k": 8192}]
    got = {(c.variant, c.splits) for c in cost.rank([donor, borrower], whole, 1000, 1000, 16384)}
    assert (borrower.name, 0) in got and not any(v == borrower.name and s for v, s in got), got


def test_the_indexed_table_anchors_where_a_scan_of_every_record_would():
    """The ranking's per-table index (worked out once per loaded table) picks, for any shape
    and slice count, the measurement a scan of all records by the documented distance picks
    (first of equals in table order), and the loaded table's index is made once."""
    import math
    import random

    from polygemm.backends.cuda.catalog import _tuned_rows

    records = _tuned_rows("float16")
    assert cost._table(records) is cost._table(records)  # kept for the loaded table
    rng = random.Random(13)

    def scan(spec, m, n, k, count, splits):
        best, best_key = None, math.inf
        for r in records:
            rung, rs = cost.split_of(str(r.get("variant")))
            if rung != spec.name or not float(r.get("tflops") or 0) > 0:
                continue
            d = sum(abs(math.log(max(x, 1)) - math.log(max(int(r[c]), 1))) for x, c in ((m, "m"), (n, "n"), (k, "k")))
            d += abs(math.log(max(count, 1)) - math.log(max(int(r.get("batch") or 1), 1)))
            key = d + abs(math.log(max(splits, 1)) - math.log(max(rs, 1))) + (0.5 if (rs > 0) != (splits > 0) else 0.0)
            if key < best_key:
                best, best_key = r, key
        return best

    specs = [s for s in SPECS.values() if s.predicated and "float16" in s.dtypes]
    for _ in range(300):
        spec = rng.choice(specs)
        m, n, k = (rng.choice([1, 7, 64, 500, 1000, 4096, 9000, 70000]) for _ in range(3))
        count, splits = rng.choice([1, 1, 4]), rng.choice([0, 0, 2, 4, 8])
        assert (cost.anchors_for(spec, records, m, n, k, count, splits) or [None])[0] is scan(spec, m, n, k, count, splits), (spec.name, m, n, k, count, splits)


def test_the_committed_auto_choices_are_what_the_tables_choose():
    """docs/auto-choices.md (what auto chooses and why) is what tools/auto_choices.py prints
    from the committed tables: a change to the tables
    or the model that moves a choice must regenerate it."""
    import subprocess
    import sys
    from pathlib import Path

    root = REPO_ROOT
    script = root / "tools" / "auto_choices.py"
    printed = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=root).stdout
    committed = (root / "docs" / "auto-choices.md").read_text()
    assert printed == committed, "regenerate: python tools/auto_choices.py > docs/auto-choices.md"


def test_the_tma_store_row_pays_cs_map_only_where_the_host_sets_the_pace():
    """A TMA-store row and the same kernel storing C itself, measured alike: where the call's
    device time is short enough for the host path to set its pace, the TMA-store row is
    charged the encoding of C's map (STORE_MAP_HOST_US); where it is long, nothing."""
    specs = kernel_specs()
    ts, pp = specs["hgemm_v3_wgmma_pingpong_persistent_tma_store"], specs["hgemm_v3_wgmma_pingpong_persistent"]
    for (m, n, k), tflops in (((1000, 8192, 512), 480.0), ((8192, 8192, 512), 560.0)):
        recs = [{"variant": v.name, "dtype": "float16", "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": 500.0}
                for v in (ts, pp)]
        est = {c.variant: c.estimate_us for c in cost.rank([ts, pp], recs, m, n, k) if not c.splits}
        device_us = 2.0 * m * n * k / (tflops * 1e6)
        extra = cost.STORE_MAP_HOST_US if device_us < cost.HOST_BOUND_US else 0.0
        assert est[ts.name] == pytest.approx(est[pp.name] + extra, abs=1e-6), (m, n, k, est)


def test_the_element_load_build_is_declared_slow():
    specs = kernel_specs()
    assert specs[V1_ROW].unaligned_pace < 0.5 and specs["skinny_v1_fp16_col"].unaligned_pace < 0.5
    assert specs["hgemm_v2_wgmma_tma"].unaligned_pace == 1.0  # nothing known: no scaling


def test_an_odd_vocabulary_is_not_planned_on_the_element_load_build():
    # the committed table anchors skinny_v1 at the aligned 1x50256x4096, where it leads the skinny rows
    p = plan(1, 50257, 4096)
    assert p.variant != V1_ROW
    passed = dict(p.candidates)
    if V1_ROW in passed:  # weighed, then passed over at its unaligned build's pace
        assert "unaligned build" in passed[V1_ROW] and "35%" in passed[V1_ROW]


def test_the_aligned_neighbour_keeps_its_measured_choice():
    # aligned rows: the aligned build runs, nothing is scaled
    p = plan(1, 50256, 4096)
    assert not any("unaligned build" in why for _, why in p.candidates)


def test_a_measurement_on_unaligned_rows_is_not_scaled_again():
    # 4096x17x4096 (N = 17: unaligned rows) has skinny_v1_fp16_col measured at that very shape
    cand = next(c for c in auto_candidates(4096, 17, 4096, "float16", sm=90) if c.variant == "skinny_v1_fp16_col")
    assert not anchored_aligned(cand, "float16")
    p = plan(4096, 17, 4096)
    assert not any(name.startswith("skinny_v1") and "unaligned build" in why for name, why in p.candidates)


def test_scaling_moves_a_candidate_behind_the_next(monkeypatch):
    # a rung declared slow unaligned is weighed again at its scaled estimate: with a pace of 1e-3 the
    # planner must take another candidate, and says why it passed the first over
    specs = dict(kernel_specs())
    first = plan(1, 50257, 4096).variant
    specs[first] = replace(specs[first], unaligned_pace=1e-3)
    monkeypatch.setattr(cuda_backend, "kernel_specs", lambda: specs)
    p = plan(1, 50257, 4096)
    assert p.variant != first
    assert "unaligned build" in dict(p.candidates)[first]


def test_a_rung_still_fastest_at_its_unaligned_pace_is_not_said_to_follow_refusals(monkeypatch):
    # at 2x4095x4096 skinny_v1 leads the estimates; at a pace that keeps it first, nothing faster is refused, so the
    # reason does not say "(faster estimates could not take these operands)" of its own aligned estimate
    specs = dict(kernel_specs())
    specs[V1_ROW] = replace(specs[V1_ROW], unaligned_pace=0.98)
    monkeypatch.setattr(cuda_backend, "kernel_specs", lambda: specs)
    p = plan(2, 4095, 4096)
    assert p.variant == V1_ROW
    assert "could not take these operands" not in p.reason
    assert "unaligned build" in p.reason and "98%" in p.reason


@pytest.mark.parametrize("itemsize,ld,off", [(2, 400, False), (2, 408, True), (2, 1000, True), (2, 2000, False),
                                             (4, 1000, False), (4, 1002, True), (4, 8, False), (4, 12, True)])
def test_pitch_off_is_a_multiple_of_32_bytes_for_every_item_size(itemsize, ld, off):
    assert FULL_SPEED_PITCH == 32 == cost.TMA_PITCH
    assert pitch_off(Mat("b", 16, ld, "row", ld, 0, itemsize)) is off
    assert pitch_off(Mat("b", ld, 16, "col", ld, 0, itemsize)) is off
    assert not pitch_off(Mat("b", 1, ld, "row", ld, 0, itemsize))  # one row: no pitch


SKINNY_F16, SKINNY_F32 = SPECS["skinny_v2_fp16_col"], SPECS["skinny_v3_fp32_col"]


def test_a_skinny_rung_cuts_k_into_slices_of_whole_steps():
    """The skinny rungs cut K themselves: any K of enough steps splits (prime K too), the
    slices whole 64-deep steps but the last, none empty, each at least SKINNY_MIN_SLICE_STEPS."""
    choices = cost.split_choices(SKINNY_F16, 500000)
    assert 8 in choices and 16 in choices
    assert cost.split_choices(SKINNY_F16, 65537)  # prime K
    assert cost.split_choices(SKINNY_F16, 1024) == []  # too short to fill the warps' rings twice
    for k in (500000, 65537, 30000):
        for s in cost.split_choices(SKINNY_F16, k):
            ks = SKINNY_F16.split_slice(k, s)
            assert ks % 64 == 0 and (s - 1) * ks < k and ks >= cost.SKINNY_MIN_SLICE_STEPS * 64
    assert cost.split_choices(SPECS["skinny_v1_fp16_col"], 500000) == []  # no batched build


def test_a_skinny_grid_of_few_strips_draws_a_share_of_the_gpu():
    """512 x 2 x 500000: 16 strips of the col rung draw 16 of 132 SMs; 8 K-slices, 128."""
    assert cost.skinny_share(SKINNY_F16, 512, 2, sms=132) == pytest.approx(16 / 132)
    assert cost.skinny_share(SKINNY_F16, 512, 2, splits=8, sms=132) == pytest.approx(128 / 132)
    assert cost.skinny_share(SKINNY_F16, 4096 * 32, 1, sms=132) == pytest.approx(1.0, abs=0.05)  # many walked strips


@pytest.mark.parametrize("m,n,k,dtype", [(512, 2, 500000, "float16"), (2, 512, 500000, "float16"),
                                         (512, 16, 500000, "float32"), (256, 8, 131072, "float32")])
def test_auto_splits_a_long_k_over_a_small_output(m, n, k, dtype):
    """A long K over a few strips: auto weighs the skinny rungs' splits and takes one, at least
    twice as fast by the model as the same rung unsplit."""
    ranked = auto_candidates(m, n, k, dtype, sm=90)
    best = ranked[0]
    assert best.variant.startswith("skinny") and best.splits >= 4, [c.label for c in ranked[:4]]
    unsplit = next(c for c in ranked if c.variant == best.variant and not c.splits)
    assert unsplit.estimate_us > 2 * best.estimate_us


def test_the_skinny_model_predicts_its_own_measurements():
    """The skinny rungs' bandwidth model, with the share of the GPU each grid draws, predicts
    the rungs' measured times: mean |log(estimate / measured)| under 0.45 for every rung (a
    model blind to the grid's size, as if every grid filled the GPU, misses by 0.54-0.95)."""
    import math

    from polygemm.backends.cuda.catalog import _tuned_rows  # noqa: PLC2701 - the committed tables, as auto reads them

    for spec in (s for s in SPECS.values() if s.max_m):
        rows = [r for r in _tuned_rows(spec.dtype) if r.get("variant") == spec.name and float(r.get("tflops") or 0) > 0]
        model = cost.fit_rung(spec, rows)
        assert model is not None, spec.name
        errs = []
        for r in rows:
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            if cost.kernel_mn(spec, m, n, "row")[0] > spec.max_m:
                continue
            measured = 2.0 * m * n * k / (float(r["tflops"]) * 1e6)
            errs.append(abs(math.log(cost.estimate_us(spec, model, m, n, k).estimate_us / measured)))
        assert errs and sum(errs) / len(errs) < 0.45, (spec.name, sum(errs) / len(errs))



def test_a_split_of_a_standard_rung_pays_its_cooperative_launch_only_where_the_host_sets_the_pace(monkeypatch):
    """A split of a CUDA-core rung is one cooperative launch: where the call is short, its estimate carries the
    launch's cost beyond SPLIT_HOST_US (COOPERATIVE_US), so that a split saving less than that leaves a tiny product
    unsplit (float32 128x128x128); a long call hides it, and a TMA rung's split is not charged it."""
    assert auto_candidates(128, 128, 128, "float32")[0].splits == 0
    cm, tma = SPECS["cm_v13_cp_async_narrow_tile"], SPECS["hgemm_v2_wgmma_tma_64x64"]

    def splits(spec, dtype, m, n, k, tflops):
        recs = [{"variant": spec.name, "dtype": dtype, "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": 1.0}]
        return {c.splits: c.estimate_us for c in cost.rank([spec], recs, m, n, k) if c.splits}

    for spec, dtype, shape, tflops, charged in ((cm, "float32", (128, 128, 256), 0.6, True),
                                                (cm, "float32", (2048, 2048, 8192), 40.0, False),
                                                (tma, "float16", (64, 64, 8192), 0.5, False)):
        charged_us = splits(spec, dtype, *shape, tflops)
        monkeypatch.setattr(cost, "COOPERATIVE_US", 0.0)
        plain_us = splits(spec, dtype, *shape, tflops)
        monkeypatch.undo()
        assert charged_us and charged_us.keys() == plain_us.keys(), (spec.name, shape)
        for s_, us in charged_us.items():
            assert us - plain_us[s_] == pytest.approx(cost.COOPERATIVE_US if charged else 0.0), (spec.name, shape, s_)
