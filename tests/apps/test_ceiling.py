"""``polygemm ceiling``: its markdown report, its files, and its refusal on a machine without cuda."""

from __future__ import annotations

import json

import pytest

import polygemm as pg
from polygemm.apps import ceiling
from polygemm.apps.cli import main


def _result() -> dict:
    """A measurement as measure_ceiling returns it (the numbers of no particular device)."""
    return {
        "device": "Test GPU", "date": "2026-01-01T00:00:00+00:00", "repeats": 3,
        "probe": {"blocks": 528, "threads_per_block": ceiling.PROBE_BLOCK, "iters": 8192,
                  "chains_per_warp": ceiling.PROBE_CHAINS, "flop_per_launch": 1, "tflops_runs": [600.0, 610.0, 605.0]},
        "mma_sync_ceiling_tflops": 605.0,
        "cublas": [{"m": 4096, "n": 4096, "k": 4096, "cublas_tflops": 550.0, "ceiling_over_cublas": 1.1},
                   {"m": 8192, "n": 8192, "k": 8192, "cublas_tflops": 484.0, "ceiling_over_cublas": 1.25}],
    }


def test_markdown_names_the_device_the_command_and_a_row_per_shape():
    md = ceiling.to_markdown(_result(), "polygemm ceiling --repeats 3")
    assert "Test GPU" in md and "median of 3 repeats" in md
    assert "`polygemm ceiling --repeats 3`" in md
    assert "**605.0 TFLOP/s**" in md and "528 blocks x 256 threads" in md
    rows = [line for line in md.splitlines() if line.startswith("| 4096") or line.startswith("| 8192")]
    assert len(rows) == 2
    assert "| 4096×4096×4096 | 550.0 | 1.10× | 68% |" in rows[0]  # 0.75 * 550 / 605
    assert "| 8192×8192×8192 | 484.0 | 1.25× | 60% |" in rows[1]


def test_ceiling_writes_json_and_markdown_where_asked(tmp_path, capsys, monkeypatch):
    # the measurement needs a GPU: its result stands in, as bench's tests stand in for run_call_bench
    monkeypatch.setattr(ceiling, "measure_ceiling", lambda repeats: {**_result(), "repeats": repeats})
    js, md = tmp_path / "c.json", tmp_path / "c.md"
    assert main(["ceiling", "--repeats", "2", "--json", str(js), "--markdown", str(md)]) == 0
    printed = capsys.readouterr().out
    assert "median of 2 repeats" in printed
    record = json.loads(js.read_text())
    assert record["command"].startswith("polygemm ceiling --repeats 2")
    assert record["repeats"] == 2 and record["mma_sync_ceiling_tflops"] == 605.0
    assert md.read_text().strip() == printed.strip()


def test_ceiling_without_cuda_is_one_error_line_and_no_file(tmp_path, capsys, without_gpu):
    info = {i.name: i for i in pg.backends()}["cuda"]
    assert not info.available
    js = tmp_path / "c.json"
    assert main(["ceiling", "--json", str(js)]) == 2
    err = capsys.readouterr().err
    assert "cuda" in err and "unavailable" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not js.exists()
