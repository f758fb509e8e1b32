"""polygemm.dask.gemm(..., verify=): every block's products checked on the worker."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg

da = pytest.importorskip("dask.array")
pgd = pytest.importorskip("polygemm.dask")


def test_each_block_is_checked_and_a_fault_surfaces_from_compute(rng):
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    A, B = da.from_array(a, chunks=(20, 15)), da.from_array(b, chunks=(15, 10))
    got = pgd.gemm(A, B, verify="raise").compute(scheduler="synchronous")
    pg.testing.assert_close(got, a, b)
    with pg.testing.inject_fault(3, 4, value=1e4) as fault:
        with pytest.raises(pg.VerificationError):
            pgd.gemm(A, B, verify="raise").compute(scheduler="synchronous")
    assert fault.hits >= 1


def test_a_bad_value_fails_when_the_graph_is_built(rng):
    A = da.from_array(np.ones((4, 4), np.float32), chunks=2)
    with pytest.raises(pg.ArgumentError, match="verify"):
        pgd.gemm(A, A, verify="loud")
