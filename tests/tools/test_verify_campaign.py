"""tools/verify_campaign.py on the cpu backend, with small counts: the records it writes, no false alarm,
every fault above the threshold caught."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, tool_module


def _tool():
    return tool_module("verify_campaign")


def test_overhead_records_and_a_campaign_on_the_cpu(tmp_path):
    out = tmp_path / "cpu-verify.json"
    rc = _tool().main(["--device", "cpu", "--out", str(out), "--shapes", "32x24x16", "--dtypes", "float32,float16",
                       "--repeats", "2", "--faults", "60", "--clean", "60", "--max-dim", "48", "--max-k", "300",
                       "--long-k-share", "0.02", "--seed", "7"])
    data = json.loads(out.read_text())
    assert data["benchmark"] == "verify" and data["view"] == "verify" and data["gpu"] and data["date"]
    assert data["commands"] == [data["command"]] and "--device cpu" in data["command"]
    records = data["records"]
    assert {r["run"] for r in records} == {0}
    timed = [r for r in records if "us_per_call" in r]
    assert {(r["m"], r["n"], r["k"], r["dtype"]) for r in timed} == {(32, 24, 16, "float32"), (32, 24, 16, "float16")}
    assert all(r["us_per_call"] > 0 and r["us_per_call_verified"] > 0 for r in timed)
    (camp,) = [r for r in records if r.get("campaign")]
    assert camp["clean"] == 60 and camp["false_alarms"] == 0
    assert camp["injected"] == 60 and camp["detected"] == 60
    assert rc == 0


def test_append_adds_the_campaign_to_the_timed_records(tmp_path):
    out = tmp_path / "v.json"
    tool = _tool()
    assert tool.main(["--device", "cpu", "--out", str(out), "--shapes", "8x8x8", "--dtypes", "float32", "--repeats", "1",
                      "--no-campaign"]) == 0
    assert tool.main(["--device", "cpu", "--out", str(out), "--no-overhead", "--append", "--faults", "5", "--clean", "5",
                      "--max-dim", "16", "--max-k", "32", "--long-k-share", "0"]) == 0
    data = json.loads(out.read_text())
    records = data["records"]
    assert len(records) == 2 and "us_per_call" in records[0] and records[1]["campaign"] is True
    assert len(data["commands"]) == 2 and [r["run"] for r in records] == [0, 1]


def test_timed_products_take_the_layout_each_shape_names(tmp_path):
    out = tmp_path / "v.json"
    assert _tool().main(["--device", "cpu", "--out", str(out), "--shapes", "12x8x16:nt,8x8x8", "--dtypes", "float32",
                         "--repeats", "1", "--no-campaign"]) == 0
    records = json.loads(out.read_text())["records"]
    assert [(r["m"], r["n"], r["k"], r["layout"]) for r in records] == [(12, 8, 16, "nt"), (8, 8, 8, "nn")]
    with pytest.raises(SystemExit, match="nn, nt, tn or tt"):
        _tool().main(["--device", "cpu", "--out", str(out), "--shapes", "8x8x8:xy", "--no-campaign"])


def test_a_preset_time_limit_of_zero_still_times_one_product(tmp_path):
    out = tmp_path / "v.json"
    assert _tool().main(["--device", "cpu", "--out", str(out), "--shapes", "", "--preset", "real", "--preset-time-limit", "0",
                         "--repeats", "1", "--no-campaign"]) == 0
    records = json.loads(out.read_text())["records"]
    timed = [r for r in records if "us_per_call" in r]
    (summary,) = [r for r in records if "geomean_overhead" in r]
    assert len(timed) == 1 and timed[0]["preset"] == "real" and summary["shapes"] == 1 and summary["of"] > 1
