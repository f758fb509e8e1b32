"""tools/update_tuning.py: a table is one GPU's; records another GPU measured (the device tool
may lend an H100 for an H200) keep their ratio to the vendor beside them and are counted at the
table GPU's vendor pace at that shape; where that GPU never timed the vendor, at the two vendors'
ratio at the nearest shape both timed (left out where they timed none alike)."""

from __future__ import annotations

import pytest


H200 = "NVIDIA H200 (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"
H100 = "NVIDIA H100 80GB HBM3 (cuda:0, sm_90; kernels built by nvcc 13.0 (/usr/local/cuda/bin/nvcc))"


def rec(variant, m, n, k, tflops, vendor, device):
    return {"variant": variant, "dtype": "float32", "m": m, "n": n, "k": k, "tflops": tflops, "vendor_tflops": vendor,
            "device": device, "date": "2026-11-25T00:00:00+00:00"}


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


def test_the_table_gpu_is_the_one_most_records_ran_on(update_tuning):
    records = [rec("a", 1, 1, 1, 1.0, 1.0, H100), rec("a", 2, 2, 2, 1.0, 1.0, H100), rec("b", 1, 1, 1, 3.0, 2.0, H200)]
    out = update_tuning.paced(records)
    assert out[:2] == records[:2]
    assert out[2]["tflops"] == pytest.approx(1.5) and out[2]["measured_on"] == "NVIDIA H200"


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
