"""tools/trace_items.py's arithmetic on HG2_TRACE marks (no GPU)."""

from __future__ import annotations


import numpy as np
import pytest

from tests.helpers import REPO_ROOT, tool_module


ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def tool():
    return tool_module("trace_items")


def _marks(tool, blocks: dict[int, dict[int, float]], sms: dict[int, int]) -> np.ndarray:
    """Marks in µs -> the kernel's words: SM clocks at 2 GHz, the global timer in ns from 10 s."""
    marks = np.zeros((4, tool.MARKS), np.int64)
    half = tool.MARKS // 2
    for b, at in blocks.items():
        for slot, us in at.items():
            marks[b, slot] = int(us * 2000) + 1_000_000
            marks[b, half + slot] = int(us * 1000) + 10_000_000_000
        marks[b, half - 1] = sms[b]
    return marks


def test_blocks_and_summary(tool):
    KT = 64
    items = np.zeros((4, tool.ITEMS), np.int64)
    items[0, 0] = (0 << 32) | (0 << 16) | KT  # block 0: units 0 and 2, whole
    items[0, 1] = (2 << 32) | (0 << 16) | KT
    items[1, 0] = (1 << 32) | (40 << 16) | KT  # block 1: the last 24 k-tiles of unit 1 (a partial) ...
    items[1, 1] = (3 << 32) | (0 << 16) | 30  # ... then the first 30 of unit 3 (it adds the later runs)
    blocks = {
        0: {0: 0.0, 1: 0.5, 2: 1.5, 3: 65.5, 4: 65.5, 5: 67.5, 6: 68.0, 7: 132.0, 8: 132.0, tool.DONE: 134.0},
        1: {0: 0.2, 1: 0.7, 2: 1.7, 3: 25.7, tool.STORED: 28.7, tool.FENCED: 30.7, tool.MET: 30.8, 4: 32.8,
            5: 33.0, 6: 33.5, 7: 63.5, 8: 69.5, tool.DONE: 71.5},
    }
    got = tool.blocks_of(_marks(tool, blocks, {0: 7, 1: 130}), items)
    assert [b["block"] for b in got] == [0, 1] and [b["sm"] for b in got] == [7, 130]
    assert got[1]["items"] == [{"unit": 1, "kb": 40, "ke": KT}, {"unit": 3, "kb": 0, "ke": 30}]
    assert got[0]["us"][tool.DONE] == pytest.approx(134.0) and got[1]["us"][0] == pytest.approx(0.2)
    assert got[0]["sm_ghz"] == pytest.approx(2.0, rel=1e-3)
    s = tool.summary(got, KT)
    assert s["blocks"] == 2 and s["end_min"] == pytest.approx(71.5) and s["end_max"] == pytest.approx(134.0)
    # per k-tile: 64/64, 64/64 (block 0); 24/24, 30/30 (block 1)
    assert s["main_us_per_ktile"] == pytest.approx(1.0) and s["main_us_per_ktile_max"] == pytest.approx(1.0)
    assert s["partial_stores"] == pytest.approx(3.0) and s["partial_fence"] == pytest.approx(2.0)
    assert s["partial_barrier"] == pytest.approx(0.1) and s["partial_signal"] == pytest.approx(2.0)
    assert s["fixup"] == pytest.approx(6.0)  # unit 3's first run: its last wgmma at 63.5, the later runs added by 69.5
    # epilogues: block 0 after each tile (2.0, 2.0), block 1 after unit 3 (2.0)
    assert s["epilogue"] == pytest.approx(2.0) and s["epilogue_max"] == pytest.approx(2.0)
    assert s["first_stage_wait"] == pytest.approx(0.75)  # the median of 1.0, 0.5, 1.0, 0.5


def test_register_refuses_rows_without_the_trace_build(tool):
    with pytest.raises(SystemExit, match="not a row of hgemm/v2_wgmma_tma.cu"):
        tool.register(["cm_v12_cp_async"])


def test_register_adds_the_trace_build_in_this_process_only(tool):
    from polygemm.backends.cuda import variants

    specs = variants.kernel_specs()
    try:
        assert tool.register(["hgemm_v2_wgmma_tma_streamk"]) == ["hgemm_v2_wgmma_tma_streamk_trace"]
        traced = specs["hgemm_v2_wgmma_tma_streamk_trace"]
        assert dict(traced.defines) == {**dict(specs["hgemm_v2_wgmma_tma_streamk"].defines), "HG2_TRACE": 1}
        assert "hgemm_v2_wgmma_tma_streamk_trace" in {v.name for v in variants.variant_table()}
    finally:  # the other tests see the shipped table
        specs.pop("hgemm_v2_wgmma_tma_streamk_trace", None)
        variants.variant_table.cache_clear()
    assert "hgemm_v2_wgmma_tma_streamk_trace" not in {v.name for v in variants.variant_table()}
