"""tools/update_tuning.py: pacing records of other GPUs, the committed tables."""

from __future__ import annotations

import math

import pytest

from tests.helpers import REPO_ROOT


H200 = "NVIDIA H200 (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"


H100 = "NVIDIA H100 80GB HBM3 (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"


def rec(variant, m, n, k, tflops, vendor, device):
    return {"variant": variant, "dtype": "float32", "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": vendor,
            "device": device, "date": "2026-11-25T00:00:00+00:00"}


def _dev(gpu: str) -> str:
    return f"{gpu} (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"


H200_2, H100_2, A100 = _dev("NVIDIA H200"), _dev("NVIDIA H100 80GB HBM3"), _dev("NVIDIA A100-SXM4-80GB")


def rec_2(variant, m, n, k, tflops, vendor, device, run=None, batch=None):
    r = {"variant": variant, "dtype": "float16", "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": vendor,
         "device": device, "date": "2026-11-26T00:00:00+00:00"}
    if batch:
        r["batch"] = batch
    if run:
        r["_run"] = run
    return r


H200_2, H100_2, A100_2 = _dev("NVIDIA H200"), _dev("NVIDIA H100 80GB HBM3"), _dev("NVIDIA A100-SXM4-80GB")


def _tie_records(order):
    """The H200 timed 1000x4000x4096 and 4000x1000x4096 (vendor 10 and 12), the H100 (5 and 5)
    too, and 2000x2000x4096, equally far from both (log distance), alone."""
    home = [rec_2(v, 1000, 4000, 4096, 10.0, 10.0, H200_2) for v in "abc"] + [rec_2(v, 4000, 1000, 4096, 12.0, 12.0, H200_2) for v in "abc"]
    other = [rec_2("x", 1000, 4000, 4096, 5.0, 5.0, H100_2, "h100.json"), rec_2("x", 4000, 1000, 4096, 5.0, 5.0, H100_2, "h100.json")]
    return home + other[::order] + [rec_2("x", 2000, 2000, 4096, 5.0, 5.0, H100_2, "h100.json")]


ROOT = REPO_ROOT


def test_gpu_of_reads_the_name_before_the_details(update_tuning):
    assert update_tuning.gpu_of({"device": H200}) == "NVIDIA H200"
    assert update_tuning.gpu_of({"device": H100}) == "NVIDIA H100 80GB HBM3"


def test_other_gpu_records_keep_their_vendor_ratio_at_the_table_gpus_pace(update_tuning):
    records = [
        rec("a", 16, 4096, 4096, 10.0, 12.0, H200),
        rec("b", 16, 4096, 4096, 11.0, 14.0, H200),  # the vendor's H200 median there: 13.0
        rec("c", 1, 8192, 8192, 2.0, 2.5, H200),
        rec("v2", 16, 4096, 4096, 6.0, 4.0, H100),  # 1.5x the vendor beside it
        rec("v2", 17, 4096, 4096, 5.0, 5.0, H100),  # no H200 vendor figure at this shape
    ]
    out = update_tuning.paced(records)
    assert out[:3] == records[:3]  # the table GPU's own records are untouched
    assert len(out) == 5
    moved = out[3]
    assert moved["tflops"] == pytest.approx(1.5 * 13.0)
    assert moved["vendor_tflops"] == pytest.approx(13.0)
    assert moved["measured_on"] == "NVIDIA H100 80GB HBM3" and moved["measured_tflops"] == 6.0
    assert moved["device"] == H100  # where it ran is kept
    assert "paced_at" not in moved
    # no H200 vendor figure at 17x4096x4096: the vendors' ratio at the nearest shape both timed
    # (16x4096x4096: 13.0 on the H200 against 4.0 on the H100) carries the H100's vendor pace
    # beside it there (5.0) over; the record keeps its ratio to that vendor (1.0)
    near = out[4]
    assert near["vendor_tflops"] == pytest.approx(5.0 * 13.0 / 4.0) and near["tflops"] == pytest.approx(5.0 * 13.0 / 4.0)
    assert near["paced_at"] == "16x4096x4096"


def test_a_record_is_left_out_where_the_two_gpus_timed_the_vendor_at_no_shape_alike(update_tuning):
    records = [rec("a", 16, 4096, 4096, 10.0, 12.0, H200), rec("b", 8, 8, 8, 1.0, 1.0, H200),
               rec("v2", 17, 4096, 4096, 5.0, 5.0, H100)]
    out = update_tuning.paced(records)
    assert out == records[:2]


def test_without_its_named_gpu_the_table_gpu_is_the_one_most_records_ran_on(update_tuning):
    records = [rec("a", 1, 1, 1, 1.0, 1.0, H100), rec("a", 2, 2, 2, 1.0, 1.0, H100), rec("b", 1, 1, 1, 3.0, 2.0, H200)]
    out = update_tuning.paced(records)  # (no dtype: no named table GPU)
    assert out[:2] == records[:2]
    assert out[2]["tflops"] == pytest.approx(1.5) and out[2]["measured_on"] == "NVIDIA H200"


def test_a_dtypes_named_table_gpu_stays_the_table_gpu_however_many_records_another_adds(update_tuning):
    """float16's table is the H200's: two H100 records to its one leave the H200's record as it is and pace the H100's."""
    records = [rec("a", 1, 1, 1, 1.0, 1.0, H100), rec("a", 2, 2, 2, 1.0, 1.0, H100), rec("b", 1, 1, 1, 3.0, 2.0, H200)]
    out = update_tuning.paced(records, "float16")
    assert update_tuning.TABLE_GPU["float16"] == "NVIDIA H200"
    h200 = [r for r in out if "measured_on" not in r]
    assert [r["variant"] for r in h200] == ["b"] and h200[0]["tflops"] == 3.0
    assert [r["measured_on"] for r in out if "measured_on" in r] == ["NVIDIA H100 80GB HBM3"] * 2


def test_the_ratio_is_to_the_runs_median_vendor_figure_at_the_shape(update_tuning):
    """One vendor figure beside a short kernel can be far off (cuBLAS at 1000x1000x4096 read 120
    TFLOP/s beside one rung and 330-360 beside the others of the same run): an other GPU's
    record is paced by the median of its run's vendor figures at that shape, not by its own."""
    run = [dict(rec(v, 1000, 1000, 4096, t, vend, H100), _run="h100_tune_x.json")
           for v, t, vend in [("s2", 214.0, 120.0), ("s4", 283.0, 340.0), ("u", 300.0, 330.0), ("w", 250.0, 360.0)]]
    other = dict(rec("s2", 1000, 1000, 4096, 100.0, 50.0, H100), _run="h100_other.json")  # a run of its own
    home = [rec(v, 1000, 1000, 4096, 300.0, 400.0, H200) for v in "abc"] + [rec(v, 64, 64, 64, 1.0, 1.0, H200) for v in "abc"]
    out = update_tuning.paced(home + run + [other])
    assert all("_run" not in r for r in out)
    got = {(r["variant"], r["measured_tflops"]): r["tflops"] for r in out if "measured_on" in r}
    assert got[("s2", 214.0)] == pytest.approx(214.0 / 335.0 * 400.0)  # the run's median, 335, not the 120 beside it
    assert got[("u", 300.0)] == pytest.approx(300.0 / 335.0 * 400.0)
    assert got[("s2", 100.0)] == pytest.approx(100.0 / 50.0 * 400.0)  # alone in its run: its own vendor figure


def test_each_other_gpu_is_paced_by_its_own_vendor_ratio(update_tuning):
    """Two GPUs beside the table's: an A100 record at a shape the H200 never timed takes the
    H200/A100 vendor ratio at the nearest shape both timed, not a ratio to the H100 and A100
    vendor figures pooled (the docstring's "the two GPUs' vendor ratio")."""
    home = [rec_2(v, 16, 4096, 4096, 10.0, 13.0, H200_2) for v in "abcde"]
    h100 = [rec_2("x", 16, 4096, 4096, 3.0, 4.0, H100_2, "h100.json"), rec_2("x", 17, 4096, 4096, 5.0, 5.0, H100_2, "h100.json")]
    a100 = [rec_2("x", 16, 4096, 4096, 1.0, 2.0, A100, "a100.json"), rec_2("x", 17, 4096, 4096, 3.0, 3.0, A100, "a100.json")]
    out = update_tuning.paced(home + h100 + a100)
    at = {(r["measured_on"], r["m"]): r for r in out if "measured_on" in r}
    assert at[("NVIDIA H100 80GB HBM3", 17)]["vendor_tflops"] == pytest.approx(5.0 * 13.0 / 4.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["vendor_tflops"] == pytest.approx(3.0 * 13.0 / 2.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["tflops"] == pytest.approx(3.0 * 13.0 / 2.0)
    assert at[("NVIDIA A100-SXM4-80GB", 17)]["paced_at"] == "16x4096x4096"


def test_an_other_gpu_with_no_shape_alike_is_left_out_though_another_has_one(update_tuning):
    """The A100 timed no shape the H200 did: its record is left out, not paced by the H100's ratio."""
    home = [rec_2(v, 16, 4096, 4096, 10.0, 13.0, H200_2) for v in "abcde"]
    h100 = [rec_2("x", 16, 4096, 4096, 3.0, 4.0, H100_2, "h100.json")]
    a100 = [rec_2("x", 17, 4096, 4096, 3.0, 3.0, A100_2, "a100.json")]
    out = update_tuning.paced(home + h100 + a100)
    assert [r.get("measured_on") for r in out if "measured_on" in r] == ["NVIDIA H100 80GB HBM3"]


def test_paced_at_names_a_batched_shapes_batch(update_tuning):
    """A batched record paced at a batched shape: paced_at names the batch count (as explain
    names a batched anchor, "256 x 64x64x64"), not a plain 64x64x64 the GPUs also timed; the
    batched neighbour's ratio (2.0), not the plain one's (1.0), paces it."""
    home = [rec_2(v, 64, 64, 64, 10.0, 10.0, H200_2, batch=256) for v in "abc"] + [rec_2(v, 64, 64, 64, 1.0, 1.0, H200_2) for v in "abc"]
    h100 = [rec_2("x", 64, 64, 64, 5.0, 5.0, H100_2, "h100.json", batch=256), rec_2("x", 64, 64, 64, 1.0, 1.0, H100_2, "h100.json"),
            rec_2("x", 64, 64, 128, 6.0, 6.0, H100_2, "h100.json", batch=256)]
    out = update_tuning.paced(home + h100)
    moved = [r for r in out if r.get("paced_at")]
    assert len(moved) == 1 and moved[0]["batch"] == 256
    assert moved[0]["vendor_tflops"] == pytest.approx(6.0 * 10.0 / 5.0)
    assert moved[0]["paced_at"] == "256 x 64x64x64"


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
    home = [rec_2(v, 4, 8192, 8192, 1.0, 2.0, H200_2) for v in "abc"] + [rec_2(v, 16, 8192, 8192, 1.0, 3.0, H200_2) for v in "abc"]
    other = [rec_2("x", 4, 8192, 8192, 1.0, 1.0, H100_2, "r"), rec_2("x", 16, 8192, 8192, 1.0, 1.0, H100_2, "r"),
             rec_2("x", 8, 8192, 8192, 1.0, 1.0, H100_2, "r")]
    (near,) = [r for r in update_tuning.paced(home + other) if r.get("paced_at")]
    assert near["vendor_tflops"] == pytest.approx(2.5)
    assert near["paced_at"] == "4x8192x8192 and 16x8192x8192"


def test_the_committed_tables_are_what_the_measurements_make(update_tuning, monkeypatch, tmp_path):
    """tools/update_tuning.py, run on the committed measurements (tuning/measurements/), writes the
    committed tables byte for byte, twice alike (written to a scratch folder: the checkout is left alone)."""
    tables = ROOT / "polygemm" / "backends" / "cuda" / "tuning"
    for attempt in ("first", "second"):
        out = tmp_path / attempt
        monkeypatch.setattr(update_tuning, "tuning_file", lambda dtype: out / f"auto_fp{ {'float16': 16, 'float32': 32, 'float64': 64}[dtype]}.json")
        assert update_tuning.main([]) == 0
        for name in ("auto_fp16.json", "auto_fp32.json", "auto_fp64.json"):
            assert (out / name).read_text() == (tables / name).read_text(), (attempt, name)
