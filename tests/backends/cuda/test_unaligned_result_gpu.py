"""A result whose pointer or leading dimension is not 16-byte aligned, written in place by every wgmma rung (marked
``cuda``): the staged and direct epilogues store such rows element by element, so only a rung that stores C through a
tensor map needs an aligned copy of it. Each product is checked against the float64 reference, and the elements of
``out``'s buffer around the result must be left as they were."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for

from tests.helpers import cuda_or_skip

cp = pytest.importorskip("cupy")

WGMMA = [v.name for v in pg.get_backend("cuda").variants() if v.name.startswith(("hgemm_v2", "hgemm_v3"))]


@pytest.fixture(scope="module")
def cuda():
    rt = cuda_or_skip().runtime
    if rt.cc < (9, 0):
        pytest.skip("the wgmma rungs need sm_90")
    return rt


def _product(variant: str, m: int, n: int, k: int, ld: int, offset: int, out_dtype, beta: float, a_ld: int | None = None):
    """``alpha·a·b + beta·c`` into a view of ``ld`` columns starting ``offset`` elements into a buffer of NaNs."""
    rng = np.random.default_rng(seed := secrets.randbits(32))
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = rng.standard_normal((m, n)).astype(out_dtype) if beta else None
    da = cp.asarray(a) if a_ld is None else cp.asarray(np.pad(a, ((0, 0), (0, a_ld - k))))[:, :k]
    db = cp.asarray(np.pad(b, ((0, 0), (0, -n % 8))))[:, :n]  # B's rows 16-byte aligned: the rung reads it in place
    buf = cp.full(offset + m * ld + 8, cp.nan, dtype=out_dtype)
    out = buf[offset:offset + m * ld].reshape(m, ld)[:, :n]
    if c is not None:
        out[...] = cp.asarray(c)
    got = pg.gemm(da, db, out if c is not None else None, alpha=0.5, beta=beta, out=out, device="cuda", variant=variant)
    assert got is out
    host = cp.asnumpy(buf)
    res = reference_for(a, b, c, 0.5, beta, out_dtype=out_dtype).compare(host[offset:offset + m * ld].reshape(m, ld)[:, :n])
    where = f"{variant} {m}x{n}x{k} ld={ld} offset={offset} {np.dtype(out_dtype).name} beta={beta} seed={seed}"
    assert res.ok, f"{where}: {res.message}"
    around = np.ones(host.size, bool)
    around[offset:offset + m * ld].reshape(m, ld)[:, :n] = False
    assert np.isnan(host[around]).all(), f"{where}: wrote outside the result"
    return pg.last_plan()


@pytest.mark.cuda
@pytest.mark.parametrize("variant", WGMMA)
@pytest.mark.parametrize("ld,offset", [(203, 0), (202, 1), (204, 3)], ids=["odd ld", "2-byte pointer", "4-byte pointer"])
def test_every_wgmma_rung_writes_an_unaligned_result_in_place(cuda, variant, ld, offset):
    for out_dtype, beta in ((np.float16, 0.0), (np.float16, -1.5), (np.float32, 0.0), (np.float32, 2.0)):
        plan = _product(variant, 130, 197, 72, ld, offset, out_dtype, beta)
        if not plan.padding:
            assert "aligned copy" not in str(plan), str(plan)


@pytest.mark.cuda
def test_auto_copies_only_the_operands_a_tensor_map_reads(cuda):
    """700 halves a row: A and B are copied into aligned scratch (in one launch), the result is written in place."""
    plan = _product("auto", 700, 700, 700, 700, 0, np.float16, 0.0, a_ld=700)
    assert "a (" in (plan.padding or "") and "c (" not in (plan.padding or "") and "out (" not in (plan.padding or ""), str(plan)
    plan = _product("auto", 333, 517, 260, 519, 1, np.float16, 1.0)
    assert "c (" not in (plan.padding or ""), str(plan)
