"""tools/precision_results.py: the rows it writes (timings and errors faked: they need a GPU)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tests.helpers import REPO_ROOT, tool_module

FIELDS = ("dtype", "precision", "m", "n", "k", "us_per_call", "vendor_us_per_call", "vendor", "max_rel_err", "bound")


def _tool():
    return tool_module("precision_results")


def test_rows_carry_the_issue_fields_and_the_exit_status_says_whether_all_are_within_the_bound(tmp_path, monkeypatch):
    tool = _tool()
    timed = []

    def bench(device, dtype, shapes, **kw):
        timed.append((device, dtype, list(shapes)))
        return [SimpleNamespace(m=m, n=n, k=k, us_per_call=10.0 * m, vendor_us_per_call=11.0 * m, vendor="torch", device="H100")
                for m, n, k in shapes]

    monkeypatch.setattr(tool, "run_call_bench", bench)
    monkeypatch.setattr(tool, "error_row", lambda m, n, k, dtype, seed: {"variant": "dgemm_v2_dmma_m16n8k8", "max_rel_err": 1e-16,
                                                                         "bound": 1e-12, "within_bound": m != 3, "worst_ratio": 0.1})
    out = tmp_path / "p.json"
    assert tool.main(["--dtype", "float64", "--shapes", "8x16x32,2x2x2", "--out", str(out)]) == 0
    assert timed == [("cuda", "float64", [(8, 16, 32), (2, 2, 2)])]
    rows = json.loads(out.read_text())["records"]
    assert [(r["m"], r["n"], r["k"]) for r in rows] == [(8, 16, 32), (2, 2, 2)]
    for r in rows:
        assert set(FIELDS) <= set(r) and r["dtype"] == "float64" and r["precision"] == "highest" and r["vendor"] == "torch"
    assert tool.main(["--shapes", "3x3x3", "--out", str(out)]) == 1  # a row outside the bound fails the run
