"""Review of bf987e8 (update_tuning's pacing at shapes the table's GPU never timed, paced_at;
KernelSpec.max_n) and 00b2b2e (rows on 32-byte sectors read at full speed), on the CPU."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from polygemm.backends.cuda import cost
from polygemm.backends.cuda.catalog import auto_candidates
from polygemm.backends.cuda.planning import FULL_SPEED_PITCH, Mat, pitch_copy, pitch_off
from polygemm.backends.cuda.variants import kernel_specs

ROOT = Path(__file__).resolve().parents[1]
SPECS = kernel_specs()
COL32 = "hgemm_v2_wgmma_tma_64x32_col"


def _dev(gpu: str) -> str:
    return f"{gpu} (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"


H200, H100, A100 = _dev("NVIDIA H200"), _dev("NVIDIA H100 80GB HBM3"), _dev("NVIDIA A100-SXM4-80GB")


def rec(variant, m, n, k, tflops, vendor, device, run=None, batch=None):
    r = {"variant": variant, "dtype": "float16", "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": vendor,
         "device": device, "date": "2026-11-26T00:00:00+00:00"}
    if batch:
        r["batch"] = batch
    if run:
        r["_run"] = run
    return r


# -- paced(): the nearest shape both GPUs timed ------------------------------------------------
def test_each_other_gpu_is_paced_by_its_own_vendor_ratio(update_tuning):
    """Two GPUs beside the table's: an A100 record at a shape the H200 never timed takes the
    H200/A100 vendor ratio at the nearest shape both timed, not a ratio to the H100 and A100
    vendor figures pooled (the docstring's "the two GPUs' vendor ratio")."""
    home = [rec(v, 16, 4096, 4096, 10.0, 13.0, H200) for v in "abcde"]
    h100 = [rec("x", 16, 4096, 4096, 3.0, 4.0, H100, "h100.json"), rec("x", 17, 4096, 4096, 5.0, 5.0, H100, "h100.json")]
    a100 = [rec("x", 16, 4096, 4096, 1.0, 2.0, A100, "a100.json"), rec("x", 17, 4096, 4096, 3.0, 3.0, A100, "a100.json")]
    out = update_tuning.paced(home + h100 + a100)
    at = {(r["measured_on"], r["m"]): r for r in out if "measured_on" in r}
    assert at[("NVIDIA H100 80GB HBM3", 17)]["vendor_tflops"] == pytest.approx(5.0 * 13.0 / 4.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["vendor_tflops"] == pytest.approx(3.0 * 13.0 / 2.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["tflops"] == pytest.approx(3.0 * 13.0 / 2.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["paced_at"] == "16x4096x4096"


def test_an_other_gpu_with_no_shape_alike_is_left_out_though_another_has_one(update_tuning):
    """The A100 timed no shape the H200 did: its record is left out, not paced by the H100's ratio."""
    home = [rec(v, 16, 4096, 4096, 10.0, 13.0, H200) for v in "abcde"]
    h100 = [rec("x", 16, 4096, 4096, 3.0, 4.0, H100, "h100.json")]
    a100 = [rec("x", 17, 4096, 4096, 3.0, 3.0, A100, "a100.json")]
    out = update_tuning.paced(home + h100 + a100)
    assert [r.get("measured_on") for r in out if "measured_on" in r] == ["NVIDIA H100 80GB HBM3"]


def test_paced_at_names_a_batched_shapes_batch(update_tuning):
    """A batched record paced at a batched shape: paced_at names the batch count (as explain
    names a batched anchor, "256 x 64x64x64"), not a plain 64x64x64 the GPUs also timed; the
    batched neighbour's ratio (2.0), not the plain one's (1.0), paces it."""
    home = [rec(v, 64, 64, 64, 10.0, 10.0, H200, batch=256) for v in "abc"] + [rec(v, 64, 64, 64, 1.0, 1.0, H200) for v in "abc"]
    h100 = [rec("x", 64, 64, 64, 5.0, 5.0, H100, "h100.json", batch=256), rec("x", 64, 64, 64, 1.0, 1.0, H100, "h100.json"),
            rec("x", 64, 64, 128, 6.0, 6.0, H100, "h100.json", batch=256)]
    out = update_tuning.paced(home + h100)
    moved = [r for r in out if r.get("paced_at")]
    assert len(moved) == 1 and moved[0]["batch"] == 256
    assert moved[0]["vendor_tflops"] == pytest.approx(6.0 * 10.0 / 5.0)
    assert moved[0]["paced_at"] == "256 x 64x64x64"


def _tie_records(order):
    """The H200 timed 1000x4000x4096 and 4000x1000x4096 (vendor 10 and 12), the H100 (5 and 5)
    too, and 2000x2000x4096, equally far from both (log distance), alone."""
    home = [rec(v, 1000, 4000, 4096, 10.0, 10.0, H200) for v in "abc"] + [rec(v, 4000, 1000, 4096, 12.0, 12.0, H200) for v in "abc"]
    other = [rec("x", 1000, 4000, 4096, 5.0, 5.0, H100, "h100.json"), rec("x", 4000, 1000, 4096, 5.0, 5.0, H100, "h100.json")]
    return home + other[::order] + [rec("x", 2000, 2000, 4096, 5.0, 5.0, H100, "h100.json")]


def test_equally_near_shapes_pace_alike_whatever_their_order(update_tuning):
    """Where two shapes both GPUs timed are equally near (here exactly, by symmetry), the pace
    must not depend on which the input lists first (a file prepended to the retune recipe
    would move records it has nothing to do with): the two ratios' median counts (2.0 and 2.4)."""
    got = []
    for order in (1, -1):
        out = update_tuning.paced(_tie_records(order))
        (near,) = [r for r in out if r.get("paced_at")]
        got.append((near["vendor_tflops"], near["paced_at"]))
    assert got[0] == got[1]
    assert got[0][0] == pytest.approx(5.0 * 2.2)
    assert got[0][1] == "1000x4000x4096 and 4000x1000x4096"


def test_a_tie_is_not_decided_by_the_last_bit_of_a_logarithm(update_tuning):
    """8x8192x8192 lies as far from 4x8192x8192 as from 16x8192x8192 (a factor of 2 in M), but
    log(8) - log(4) rounds below log(16) - log(8): the first won every time. Both count."""
    assert math.log(8) - math.log(4) != math.log(16) - math.log(8)  # (why this needs saying)
    home = [rec(v, 4, 8192, 8192, 1.0, 2.0, H200) for v in "abc"] + [rec(v, 16, 8192, 8192, 1.0, 3.0, H200) for v in "abc"]
    other = [rec("x", 4, 8192, 8192, 1.0, 1.0, H100, "r"), rec("x", 16, 8192, 8192, 1.0, 1.0, H100, "r"),
             rec("x", 8, 8192, 8192, 1.0, 1.0, H100, "r")]
    (near,) = [r for r in update_tuning.paced(home + other) if r.get("paced_at")]
    assert near["vendor_tflops"] == pytest.approx(2.5)
    assert near["paced_at"] == "4x8192x8192 and 16x8192x8192"


def test_the_committed_tables_are_what_the_measurements_make(update_tuning, monkeypatch, tmp_path):
    """tools/update_tuning.py, run on the committed measurements (tuning/measurements/), writes the
    committed tables byte for byte, twice alike (written to a scratch folder: the checkout is left alone)."""
    tables = ROOT / "polygemm" / "backends" / "cuda" / "tuning"
    for attempt in ("first", "second"):
        out = tmp_path / attempt
        monkeypatch.setattr(update_tuning, "tuning_file", lambda dtype: out / f"auto_{'fp16' if dtype == 'float16' else 'fp32'}.json")
        assert update_tuning.main([]) == 0
        for name in ("auto_fp16.json", "auto_fp32.json"):
            assert (out / name).read_text() == (tables / name).read_text(), (attempt, name)


# -- max_n: auto only ---------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2])
def test_auto_offers_the_col_row_only_for_a_thin_kernel_n(count):
    """The col row swaps a row-major result: its own N is the result's M. 8192x8x8192 puts the
    long side on its 32-wide tile (0.41x of cuBLAS): never offered, split or batched; 8x8192x8192
    and 32x8192x8192 are, 33x8192x8192 is not."""
    for m, n, ok in [(8192, 8, False), (8, 8192, True), (32, 8192, True), (33, 8192, False)]:
        offered = [c.label for c in auto_candidates(m, n, 8192, "float16", count=count) if c.variant == COL32]
        assert bool(offered) == ok, (m, n, count, offered)
    # a column-major result: no swap, its own N is the result's N
    assert not [c for c in auto_candidates(8, 8192, 8192, "float16", result_layout="col") if c.variant == COL32]


def test_the_plan_weighs_no_col_row_for_a_thin_n_but_runs_it_when_named():
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    p = normalize(np.zeros((8192, 8192), np.float16), np.zeros((8192, 8), np.float16))
    plan = CudaBackend().plan(p)
    assert plan.variant.partition(":")[0] != COL32 and not any(COL32 in name for name, _ in plan.candidates), str(plan)
    named = CudaBackend().plan(p, variant=COL32)
    assert named.variant == COL32 and named.launch["kernel problem"] == "8x8192x8192", str(named)
    named = CudaBackend().plan(p, variant=COL32 + ":split_k=2")
    assert named.variant == COL32 + ":split_k=2", str(named)


# -- the 32-byte pitch rule ----------------------------------------------------------------------
@pytest.mark.parametrize("itemsize,ld,off", [(2, 400, False), (2, 408, True), (2, 1000, True), (2, 2000, False),
                                             (4, 1000, False), (4, 1002, True), (4, 8, False), (4, 12, True)])
def test_pitch_off_is_a_multiple_of_32_bytes_for_every_item_size(itemsize, ld, off):
    assert FULL_SPEED_PITCH == 32 == cost.TMA_PITCH
    assert pitch_off(Mat("b", 16, ld, "row", ld, 0, itemsize)) is off
    assert pitch_off(Mat("b", ld, 16, "col", ld, 0, itemsize)) is off
    assert not pitch_off(Mat("b", 1, ld, "row", ld, 0, itemsize))  # one row: no pitch


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


@pytest.mark.parametrize("n,off", [(2000, False), (1000, True)])
def test_a_measurement_anchors_at_its_own_time_less_only_the_pitch_cost_the_plan_adds(n, off):
    """A TMA rung measured at 4096 x n x 4096 (compact rows: 4000 bytes on a sector, 2000 off
    one): rank's estimate there takes out exactly what pitch_penalty_us charges the same rows
    (none for 4000-byte rows), so the plan's estimate with the penalty added is the measurement."""
    spec = SPECS["hgemm_v2_wgmma_tma_128x128"]
    records = [{"variant": spec.name, "dtype": "float16", "m": 4096, "n": n, "k": 4096, "tflops": 300.0, "vendor_tflops": 400.0},
               {"variant": spec.name, "dtype": "float16", "m": 8192, "n": 8192, "k": 8192, "tflops": 500.0, "vendor_tflops": 600.0}]
    (cand,) = [c for c in cost.rank([spec], records, 4096, n, 4096, split_ok=False)]
    measured = 2.0 * 4096 * n * 4096 / 300e6
    a, b = Mat("a", 4096, 4096, "row", 4096, 0, 2), Mat("b", 4096, n, "row", n, 0, 2)
    assert pitch_off(b) is off and not pitch_off(a)
    penalty = cost.pitch_penalty_us(spec, 4096, n, 4096, pitch_off(a), pitch_off(b))
    assert (penalty > 0) is off
    assert cand.estimate_us + penalty == pytest.approx(measured)
