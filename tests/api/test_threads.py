"""Calls from many threads at once: each gets its own result and plan."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close, check_result, reference_for

from tests.helpers import run_concurrently


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta).compare(got)
    assert res.ok, res.message


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


ml_dtypes = pytest.importorskip("ml_dtypes")


def test_last_plan_is_each_threads_own(rng):
    pg.clear_plan_cache()
    mats = {i: (_rand(rng, np.float32, i + 1, 3), _rand(rng, np.float32, 3, 2 * i + 1)) for i in range(8)}
    box: dict = {}

    def work(i: int) -> None:
        if pg.last_plan() is not None:  # a fresh thread has made no call
            raise AssertionError("a new thread saw another thread's last_plan")
        a, b = mats[i]
        for _ in range(30):
            got = pg.gemm(a, b, alpha=float(i + 1))
            lp = pg.last_plan()
            assert (lp.problem.m, lp.problem.n, lp.problem.alpha) == (i + 1, 2 * i + 1, float(i + 1)), (i, lp.problem)
            assert check_result(got, a, b, alpha=float(i + 1)).ok
        box[i] = True

    assert run_concurrently(work) == []
    assert sorted(box) == list(range(8))


def test_threads_on_the_cpu_backend_get_their_own_results_and_plans():
    errors: list = []

    def work(seed):
        r = np.random.default_rng(seed)
        for i in range(60):
            dt = (np.float16, np.float32, np.float64)[i % 3]
            m, n, k = (int(v) for v in r.integers(1, 7, 3))
            a, b, c = (r.standard_normal(s).astype(dt) for s in ((m, k), (k, n), (m, n)))
            alpha, beta = float(r.integers(1, 4)), float(r.integers(0, 2))
            variant = ("auto", "reference", "numpy")[i % 3]
            out = np.empty((m, n), dt) if i % 4 == 0 else None
            got = pg.gemm(a, b, c, alpha=alpha, beta=beta, out=out, device="cpu", variant=variant)
            res = reference_for(a, b, c, alpha, beta).compare(got)
            plan = pg.last_plan()
            if not res.ok or (out is not None and got is not out):
                errors.append((seed, i, res.message))
            if (plan.problem.m, plan.problem.n, plan.problem.k, plan.problem.alpha, plan.problem.beta) != (m, n, k, alpha, beta) \
                    or plan.variant != ("blas" if variant == "auto" else variant):
                errors.append((seed, i, str(plan)))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_clearing_the_plan_cache_while_threads_call_loses_no_result():
    """clear_plan_cache() from one thread while seven others call gemm with the same shapes: every result is
    that thread's own product, every last_plan() that thread's call, and the cache ends within its bound."""
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        a = np.full((3, 4), float(i), np.float32)
        b = np.ones((4, 2 + i % 2), np.float32)
        for j in range(60):
            if i == 0 and j % 3 == 0:
                pg.clear_plan_cache()
            got = pg.gemm(a, b, device="cpu")
            assert got.shape == (3, 2 + i % 2) and (got == 4.0 * i).all()
            plan = pg.last_plan()
            assert plan is not None and (plan.problem.m, plan.problem.n) == (3, 2 + i % 2)

    assert run_concurrently(work, threads=8) == []
    info = pg.plan_cache_info()
    assert 0 <= info["size"] <= min(2, info["maxsize"]) and info["hits"] >= 0 and info["misses"] >= 0


@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
@pytest.mark.parametrize("blocks", ["rows", "columns", "columns of a Fortran out"])
def test_threads_writing_disjoint_blocks_of_one_out_each_get_their_block(rng, variant, blocks):
    """eight threads write their own block of one shared out (views of one array, one cached plan with their
    own pointers), thirty times each, with alpha, and with c = out (an in-place blocked update)."""
    m, n, k = 64, 48, 32
    a, b = f32(rng, m, k), f32(rng, k, n)
    c0 = f32(rng, m, n)
    order = "F" if "Fortran" in blocks else "C"
    out = np.zeros((m, n), np.float32, order=order)
    go = threading.Barrier(8)

    def block(i):
        return (slice(8 * i, 8 * i + 8), slice(None)) if blocks == "rows" else (slice(None), slice(6 * i, 6 * i + 6))

    def work(i):
        r, cl = block(i)
        go.wait()
        for rep in range(30):
            if rep % 2:
                out[r, cl] = c0[r, cl]
                got = pg.gemm(a[r], b[:, cl], out[r, cl], alpha=0.5, beta=2.0, out=out[r, cl], device="cpu", variant=variant)
            else:
                got = pg.gemm(a[r], b[:, cl], alpha=0.5, out=out[r, cl], device="cpu", variant=variant)
            assert np.shares_memory(got, out)

    assert run_concurrently(work, 8) == []
    # the last repeat (29) was the in-place update of every block
    assert_within(out, a, b, c0, 0.5, 2.0)


def test_results_of_one_thread_are_used_by_another_and_each_thread_keeps_its_own_last_plan(rng):
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 12)).astype(np.float32)
    pg.clear_plan_cache()

    def work(i):
        r = pg.gemm(a[: i + 1], b, alpha=float(i + 1), device="cpu")
        return r, pg.last_plan()

    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(work, range(16)))
    for i, (r, plan) in enumerate(done):  # used here, in another thread than the one that made it
        assert r.flags.owndata and r.flags.writeable and r.shape == (i + 1, 12)
        np.testing.assert_allclose(r, (i + 1) * (a[: i + 1] @ b), rtol=1e-5, atol=1e-5)
        assert plan.problem.m == i + 1 and plan.problem.alpha == i + 1  # that thread's call, not another's
    # every thread's result is its own memory: writing one changes no other
    done[3][0][...] = 0
    assert all(np.count_nonzero(r) for j, (r, _) in enumerate(done) if j != 3)


def test_calls_from_many_threads_each_get_their_own_result_and_plan():
    def work(i: int) -> None:
        rng = np.random.default_rng(1000 + i)
        for j in range(40):
            m, n, k = (int(x) for x in rng.integers(0, 9, 3))
            dt = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)[(i + j) % 4]
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            if j % 3 == 0:
                a = np.asfortranarray(a)
            c = rng.standard_normal((m, n)).astype(dt)
            out = np.empty((m, n), dt) if j % 2 else None
            r = pg.gemm(a, b, c, alpha=1.5, beta=-0.5, out=out, variant=("auto", "reference")[j % 5 == 0])
            assert out is None or r is out
            assert_close(r, a, b, c, 1.5, -0.5)
            p = pg.last_plan()
            assert p is not None and (p.problem.m, p.problem.n, p.problem.k) == (m, n, k), (i, j)

    assert run_concurrently(work, threads=8) == []
