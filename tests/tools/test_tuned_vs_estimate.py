"""tools/tuned_vs_estimate.py: two bench runs of the same shapes compared, shape by shape."""

from __future__ import annotations

import json

from polygemm.apps.bench_records import BenchRecord, record_json

from tests.helpers import REPO_ROOT, tool_module


def _tool():
    return tool_module("tuned_vs_estimate")


def _run(path, rows):
    recs = []
    for (m, n, k, layout), (variant, us) in rows.items():
        r = BenchRecord("cuda", variant, "float16", m, n, k, 1.0, 1.0, 1.0, us / 1e3, "torch", 1.0, 1.0, "GPU", "d", 5, 10,
                        mode="call", us_per_call=us)
        r.layout = layout
        recs.append(record_json(r))
    path.write_text(json.dumps({"command": "bench", "records": recs}))
    return str(path)


def test_speedups_geomean_and_moved_shapes(tmp_path, capsys):
    est = _run(tmp_path / "e.json", {(512, 1500, 2816, "nn"): ("slow", 120.0), (64, 64, 64, "nt"): ("same", 10.0),
                                     (8, 8, 8, "nn"): ("x", 5.0)})
    tun = _run(tmp_path / "t.json", {(512, 1500, 2816, "nn"): ("fast", 60.0), (64, 64, 64, "nt"): ("same", 10.0)})
    assert _tool().main([est, tun, "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "512x1500x2816" in out and "2.00x" in out and "slow -> fast" in out and "64x64x64:nt" in out
    doc = json.loads((tmp_path / "c.json").read_text())
    assert len(doc["rows"]) == 2 and doc["moved"] == 1 and abs(doc["geomean"] - 2 ** 0.5) < 1e-9 and doc["slower_5pct"] == 0
