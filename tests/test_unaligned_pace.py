"""auto and a rung whose unaligned build (PG_VEC=0) runs far below its aligned pace (pure: no GPU).

skinny_v1 stages B by 2-byte loads when B's rows are off 16-byte boundaries (an odd N): at
1x50257x4096 it ran 449 µs a call on the H100 where its aligned build at 1x50256x4096 runs in
158. The tables measure each rung at aligned rows and auto anchors an odd N on the aligned
neighbour, so the rung's ``unaligned_pace`` scales the estimate when these operands force that
build, and only then: a measurement taken on unaligned rows already carries that pace."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from polygemm.backends.cuda import backend as cuda_backend
from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.catalog import anchored_aligned, auto_candidates
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.problem import normalize

V1_ROW = "skinny_v1_fp16_row"


def plan(m: int, n: int, k: int, b_layout: str = "row"):
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16) if b_layout == "row" else np.zeros((n, k), np.float16).T
    return CudaBackend().plan(normalize(a, b))


def test_the_element_load_build_is_declared_slow():
    specs = kernel_specs()
    assert specs[V1_ROW].unaligned_pace < 0.5 and specs["skinny_v1_fp16_col"].unaligned_pace < 0.5
    assert specs["hgemm_v2_wgmma_tma"].unaligned_pace == 1.0  # nothing known: no scaling


def test_an_odd_vocabulary_is_not_planned_on_the_element_load_build():
    # the committed table anchors skinny_v1 at the aligned 1x50256x4096, where it leads the skinny rows
    p = plan(1, 50257, 4096)
    assert p.variant != V1_ROW
    passed = dict(p.candidates)
    if V1_ROW in passed:  # weighed, then passed over at its unaligned build's pace
        assert "unaligned build" in passed[V1_ROW] and "35%" in passed[V1_ROW]


def test_the_aligned_neighbour_keeps_its_measured_choice():
    # aligned rows: the aligned build runs, nothing is scaled
    p = plan(1, 50256, 4096)
    assert not any("unaligned build" in why for _, why in p.candidates)


def test_a_measurement_on_unaligned_rows_is_not_scaled_again():
    # 4096x17x4096 (N = 17: unaligned rows) has skinny_v1_fp16_col measured at that very shape
    cand = next(c for c in auto_candidates(4096, 17, 4096, "float16", sm=90) if c.variant == "skinny_v1_fp16_col")
    assert not anchored_aligned(cand, "float16")
    p = plan(4096, 17, 4096)
    assert not any(name.startswith("skinny_v1") and "unaligned build" in why for name, why in p.candidates)


def test_scaling_moves_a_candidate_behind_the_next(monkeypatch):
    # a rung declared slow unaligned is weighed again at its scaled estimate: with a pace of 1e-3 the
    # planner must take another candidate, and says why it passed the first over
    specs = dict(kernel_specs())
    first = plan(1, 50257, 4096).variant
    specs[first] = replace(specs[first], unaligned_pace=1e-3)
    monkeypatch.setattr(cuda_backend, "kernel_specs", lambda: specs)
    p = plan(1, 50257, 4096)
    assert p.variant != first
    assert "unaligned build" in dict(p.candidates)[first]


def test_a_rung_still_fastest_at_its_unaligned_pace_is_not_said_to_follow_refusals(monkeypatch):
    # at 2x1023x4096 skinny_v1 leads the estimates; at a pace that keeps it first, nothing faster was refused:
    # the reason had said "(faster estimates could not take these operands)" of its own aligned estimate
    specs = dict(kernel_specs())
    specs[V1_ROW] = replace(specs[V1_ROW], unaligned_pace=0.98)
    monkeypatch.setattr(cuda_backend, "kernel_specs", lambda: specs)
    p = plan(2, 1023, 4096)
    assert p.variant == V1_ROW
    assert "could not take these operands" not in p.reason
    assert "unaligned build" in p.reason and "98%" in p.reason
