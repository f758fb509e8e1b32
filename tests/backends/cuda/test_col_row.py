"""The column-major TMA row (hgemm_v2_wgmma_tma_64x32_col), planned on the CPU."""

from __future__ import annotations

import pytest

import polygemm as pg
from polygemm.backends.cuda.planning import Mat, plan_launch
from polygemm.backends.cuda.variants import kernel_specs


SPECS = kernel_specs()


COL32 = SPECS["hgemm_v2_wgmma_tma_64x32_col"]


def _half(name, r, c, layout="row"):
    return Mat(name, r, c, layout, c if layout == "row" else r, 0, 2)


def test_the_col_row_takes_a_long_side_past_the_grids_y_limit():
    """The col row puts a row-major result's long side N on the kernel's M, and its (n, m) grid
    tiles M along y (at most 65535 blocks): 1 x 5,000,000 needs 78125 rows of 64. The TMA
    kernel walks its tiles on any grid, so such a launch runs on the persistent grid (as its
    batches and K-slices do) instead of being refused; a row whose kernel reads blockIdx.y
    still is."""
    n = 5_000_000
    lp = plan_launch(COL32, _half("a", 1, 128), _half("b", 128, n), _half("c", 1, n), sms=132)
    assert lp.swap and (lp.m, lp.n) == (n, 1)
    assert lp.grid == (132, 1, 1) and lp.batch_count == 0
    assert "PG_BATCH" not in lp.macros() and lp.macros() in COL32.builds()
    # a row row takes the same product with N along x
    row64 = SPECS["hgemm_v2_wgmma_tma_64x64"]
    assert plan_launch(row64, _half("a", 1, 128), _half("b", 128, n), _half("c", 1, n)).grid[:2] == (-(-n // 64), 1)
    standard = next(s for s in SPECS.values() if s.predicated and s.abi == "standard" and s.grid[1] == "m" and s.layout == "row")
    with pytest.raises(pg.UnsupportedProblemError, match="65535"):
        plan_launch(standard, Mat("a", 70_000_000, 8, "row", 8, 0, 2), Mat("b", 8, 8, "row", 8, 0, 2),
                    Mat("c", 70_000_000, 8, "row", 8, 0, 2))


def test_the_col_rows_requirements_name_its_k_major_b():
    """``polygemm variants -v`` shows each row's requirements: the TMA rows read any layout
    (transposes compiled in), but the col row's 32-wide B tile is read K-major only, which its
    requirements must say rather than "any layout"."""
    text = COL32.requirements_text()
    assert "any layout (" not in text and "K-major" in text, text
    assert "row-major A" in text and "column-major B" in text, text
    assert "any layout (transposes compiled in)" in SPECS["hgemm_v2_wgmma_tma_64x64"].requirements_text()
