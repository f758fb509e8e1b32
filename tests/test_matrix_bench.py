"""polygemm matrix, bench (with --plot) and the pytest integration, on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from polygemm.cli import main
from test_registry import BROKEN, install_fake_distribution

ROOT = Path(__file__).resolve().parents[1]


def test_matrix_cpu_json(tmp_path, capsys):
    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--quick", "--json", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "cpu" in out and "float64" in out and " 0 failed" in out
    rows = json.loads(path.read_text())["rows"]
    assert rows and {r["status"] for r in rows} <= {"pass", "skip"}
    assert {"backend", "dtype", "variant", "case", "status", "detail"} <= set(rows[0])


def test_matrix_shows_broken_plugin_and_fails_on_failure(tmp_path, monkeypatch, fresh_registry, capsys):
    install_fake_distribution(tmp_path, "pg_broken", "pg_broken_plugin", BROKEN, {"broken": "pg_broken_plugin:Nothing"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    assert main(["matrix", "--quick", "--no-progress", "--backends", "cpu", "broken"]) == 0
    out = capsys.readouterr().out
    assert "broken" in out and "libfoo.so.3" in out

    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference
    monkeypatch.setattr(cpu, "reference", lambda *a, **k: real(*a, **k) * 2)
    assert main(["matrix", "--quick", "--no-progress", "--backends", "cpu", "--dtypes", "float32"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_bench_cpu_json_markdown_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    js, md, png = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "b.png"
    assert main(["bench", "--device", "cpu", "--shapes", "64x48x32", "100x20x30", "--repeats", "2",
                 "--json", str(js), "--markdown", str(md), "--plot", str(png)]) == 0
    recs = json.loads(js.read_text())["records"]
    assert len(recs) == 2
    for r in recs:
        for key in ("backend", "variant", "dtype", "m", "n", "k", "tflops", "vendor_tflops", "device", "date"):
            assert key in r
        assert r["tflops"] > 0 and r["vendor_tflops"] > 0 and r["variant"] == "reference"
    assert "polygemm bench --device cpu" in md.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_bench_rejects_unknown_variant(capsys):
    assert main(["bench", "--device", "cpu", "--variants", "nosuch", "--shapes", "8x8x8"]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_pytest_pyargs_integration():
    env = {**os.environ, "POLYGEMM_TEST_BACKEND": "cpu", "POLYGEMM_TEST_QUICK": "1", "POLYGEMM_TEST_DTYPES": "float32",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "polygemm.testing"],
                       capture_output=True, text=True, env=env, cwd=str(ROOT))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout


def test_bench_skips_a_variant_that_hands_the_problem_on(monkeypatch):
    """A variant whose launch would run another rung is reported, not timed under its name."""
    from polygemm import bench

    class Launch:
        variant = "other"

        def __call__(self):
            pass

        def close(self):
            pass

    be = __import__("polygemm").get_backend("cpu")
    monkeypatch.setattr(type(be), "launcher", lambda self, *a, **k: Launch(), raising=False)
    notes = []
    recs = bench.run_bench("cpu", "float32", ["reference"], [(8, 8, 8)], repeats=1, progress=notes.append)
    assert recs == [] and any("does not run this problem itself" in n for n in notes)


def test_bench_settled_mode_times_each_kernel_after_running_it_alone(monkeypatch):
    from polygemm import bench

    calls = []
    real_once = bench._Timed.once

    def once(self):
        calls.append(self.runners[0].call)
        return real_once(self)

    monkeypatch.setattr(bench._Timed, "once", once)
    recs = bench.run_bench("cpu", "float32", ["reference"], [(16, 16, 16)], repeats=3, settle=0.05)
    assert len(recs) == 1 and recs[0].method == "settled 0.05 s" and recs[0].ratio > 0
    # settling runs batches before the timed repeats, and the repeats of one kernel are back to
    # back (vendor first), not interleaved
    vendor_call, variant_call = calls[0], calls[-1]
    assert vendor_call is not variant_call
    first_variant = calls.index(variant_call)
    assert all(c is vendor_call for c in calls[:first_variant]) and all(c is variant_call for c in calls[first_variant:])
    assert len(calls) > 2 * 3
    md = bench.to_markdown(recs, "polygemm bench --settle 0.05")
    assert "each kernel settled 0.05 s alone before its repeats" in md


def test_bench_rejects_negative_settle(capsys):
    with pytest.raises(SystemExit, match="--settle must be >= 0"):
        main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--settle", "-1"])
