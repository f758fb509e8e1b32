"""Cached device calls in a row (marked ``cuda``): each call's parameters are its own, whether they repeat the last
call's (kept packed) or change one pointer, scalar, stream or thread; plain, TMA and split-K plans alike."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import check_result

from tests.helpers import cuda_or_skip


@pytest.fixture(scope="module")
def cp():
    cuda_or_skip((8, 0), "float16 tensor-core kernels")
    return pytest.importorskip("cupy")


def _ok(got, a, b, c=None, alpha=1.0, beta=0.0, what=""):
    res = check_result(got, a, b, c, alpha, beta)
    assert res.ok, f"{what}: {res.message}"


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("size", [128, 256])
def test_calls_in_a_row_each_compute_their_own_product(cp, dtype, size):
    rng = np.random.default_rng(size)
    ha = [rng.standard_normal((size, size)).astype(dtype) for _ in range(2)]
    hb = rng.standard_normal((size, size)).astype(dtype)
    hc = rng.standard_normal((size, size)).astype(dtype)
    a = [cp.asarray(x) for x in ha]
    b = cp.asarray(hb)
    outs = [cp.full((size, size), 7.0, dtype) for _ in range(2)]
    steps = [(0, 0, 1.0, 0.0), (0, 0, 1.0, 0.0), (0, 1, 1.0, 0.0), (1, 1, 1.0, 0.0), (1, 1, 2.0, 0.0),
             (1, 1, -0.0, 0.0), (1, 1, 1.0, -0.0), (0, 0, 0.5, 0.0), (0, 0, 1.0, 0.0)]
    for i, (ai, oi, alpha, beta) in enumerate(steps):
        outs[oi].fill(7.0)
        assert pg.gemm(a[ai], b, alpha=alpha, beta=beta, out=outs[oi]) is outs[oi]
        _ok(cp.asnumpy(outs[oi]), ha[ai], hb, None, alpha, 0.0, what=f"step {i} {pg.last_plan().variant}")
    c = cp.asarray(hc)
    for i in range(3):  # in place, beta reading what the last call wrote
        before = cp.asnumpy(c)
        pg.gemm(a[0], b, c, alpha=0.5, beta=1.0, out=c)
        _ok(cp.asnumpy(c), ha[0], hb, before, 0.5, 1.0, what=f"in place {i}")


@pytest.mark.cuda
def test_calls_on_another_stream_and_thread_compute_their_own_product(cp):
    rng = np.random.default_rng(3)
    for dtype in (np.float16, np.float32):
        ha, hb = rng.standard_normal((128, 128)).astype(dtype), rng.standard_normal((128, 128)).astype(dtype)
        a, b, out = cp.asarray(ha), cp.asarray(hb), cp.empty((128, 128), dtype)
        pg.gemm(a, b, out=out)
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            for _ in range(3):
                out.fill(7.0)
                pg.gemm(a, b, out=out)
            stream.synchronize()
        _ok(cp.asnumpy(out), ha, hb, what=f"{dtype.__name__} on a stream of the caller's")
        errors: list[BaseException] = []
        results: list[np.ndarray] = []

        def other():
            try:
                with cp.cuda.Device(0):
                    mine = cp.empty((128, 128), dtype)
                    for _ in range(3):
                        pg.gemm(a, b, out=mine)
                    results.append(cp.asnumpy(mine))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert not errors, errors
        _ok(results[0], ha, hb, what=f"{dtype.__name__} in another thread")
        out.fill(7.0)
        pg.gemm(a, b, out=out)
        _ok(cp.asnumpy(out), ha, hb, what=f"{dtype.__name__} back in this thread")
