"""Several GPUs (marked ``cuda``): ``cuda:N``, operands on another GPU, dask over GPUs."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for


@pytest.fixture(scope="module")
def two_gpus():
    info = {i.name: i for i in pg.backends()}["cuda"]
    if not info.available:
        pytest.skip(f"cuda backend unavailable: {info.reason}")
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    return cp


def _data(shape_a, shape_b, dtype=np.float32):
    rng = np.random.default_rng(secrets.randbits(32))
    return rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)


@pytest.mark.cuda
def test_each_device_by_index(two_gpus):
    cp = two_gpus
    a, b = _data((300, 200), (200, 170))
    for index in (0, 1):
        plan = pg.explain(a, b, device=f"cuda:{index}")
        assert plan.backend == f"cuda:{index}" and f"cuda:{index}" in plan.device
        assert reference_for(a, b).compare(pg.gemm(a, b, device=f"cuda:{index}")).ok
        with cp.cuda.Device(index):
            da, db = cp.asarray(a), cp.asarray(b)
            got = pg.gemm(da, db, device=f"cuda:{index}")
            assert got.device.id == index
            assert reference_for(a, b).compare(cp.asnumpy(got)).ok


@pytest.mark.cuda
def test_cuda_runs_where_the_data_is(two_gpus):
    cp = two_gpus
    a, b = _data((257, 129), (129, 65), np.float16)
    for index in (1, 0, 1):  # alternating: the plan cache keeps one plan per device
        with cp.cuda.Device(index):
            da, db = cp.asarray(a), cp.asarray(b)
            out = cp.full((257, 65), cp.nan, dtype=cp.float16)
        got = pg.gemm(da, db, out=out, device="cuda")
        assert f"cuda:{index}" in pg.last_plan().device
        with cp.cuda.Device(index):
            assert reference_for(a, b).compare(cp.asnumpy(got)).ok


@pytest.mark.cuda
def test_mismatched_devices_are_refused(two_gpus):
    cp = two_gpus
    a, b = _data((64, 32), (32, 48))
    with cp.cuda.Device(1):
        a1, b1 = cp.asarray(a), cp.asarray(b)
    with cp.cuda.Device(0):
        b0 = cp.asarray(b)
    with pytest.raises(pg.ArgumentError, match=r"device='cuda:0' but the operands live on cuda:1"):
        pg.gemm(a1, b1, device="cuda:0")
    with pytest.raises(pg.ArgumentError, match=r"operands live on different GPUs \(a on cuda:1, b on cuda:0\)"):
        pg.gemm(a1, b0, device="cuda")
    count = cp.cuda.runtime.getDeviceCount()
    with pytest.raises(pg.BackendUnavailableError, match=f"cuda:{count} does not exist"):
        pg.gemm(a, b, device=f"cuda:{count}")


@pytest.mark.cuda
def test_dask_blocks_on_cupy_chunks(two_gpus):
    cp = two_gpus
    da_mod = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    a, b = _data((1000, 700), (700, 900))
    A = da_mod.from_array(cp.asarray(a), chunks=(300, 250))
    B = da_mod.from_array(cp.asarray(b), chunks=(250, 400))
    got = pgd.gemm(A, B, device="cuda").compute(scheduler="threads")
    assert isinstance(got, cp.ndarray)
    assert reference_for(a, b).compare(cp.asnumpy(got)).ok
