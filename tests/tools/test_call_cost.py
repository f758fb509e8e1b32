"""tools/call_cost.py on the CPU: the cached device call's parts timed through stand-ins for CuPy, torch and the
driver, every launch's parameters checked against the plan's own packing (in a process of its own: the stand-ins
replace modules)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import REPO_ROOT


def test_the_stand_in_run_times_every_part_and_launches_what_the_plans_pack(tmp_path):
    out = tmp_path / "call_cost.json"
    run = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "call_cost.py"), "--fake", "--calls", "10", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["fake"] and [(c["size"], c["dtype"]) for c in got["cases"]] == [
        (128, "float16"), (256, "float16"), (128, "float32"), (256, "float32")]
    parts = ("gemm_cupy_out", "gemm_torch_out", "bind_cupy", "bind_torch", "key_cupy", "cupy_views", "torch_views", "execute",
             "prepare", "launch_prepared")
    for case in got["cases"]:
        assert all(case[p] > 0 for p in parts), case
        assert case["variant"]
