"""The plan cache: a repeated call re-plans nothing and reads no file; any change that could
change the plan misses; the cache is bounded and safe under threads; plans keep no data."""

from __future__ import annotations

import builtins
import gc
import json
import pathlib
import types
import weakref

import numpy as np
import pytest

import polygemm as pg
from polygemm import api
from polygemm.testing import assert_close

from conftest import run_concurrently


@pytest.fixture(autouse=True)
def empty_cache():
    api.clear_plan_cache()
    yield
    api.clear_plan_cache()


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


class _NoFiles:
    """Patches every way the hot path could read a table: open, Path.read_text/bytes, json.loads."""

    def __init__(self, monkeypatch):
        self.touched: list[str] = []

        def deny(name):
            def f(*a, **k):
                self.touched.append(f"{name}{a[:1]}")
                raise AssertionError(f"{name} called on the hot path")
            return f

        monkeypatch.setattr(builtins, "open", deny("open"))
        monkeypatch.setattr(pathlib.Path, "read_text", deny("Path.read_text"))
        monkeypatch.setattr(pathlib.Path, "read_bytes", deny("Path.read_bytes"))
        monkeypatch.setattr(json, "loads", deny("json.loads"))


def test_second_identical_call_opens_no_file_and_parses_no_table(rng, monkeypatch):
    a, b, c = rand(rng, (33, 17)), rand(rng, (17, 9)), rand(rng, (33, 9))
    out = np.empty((33, 9), np.float32)
    pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, device="cpu")
    before = api.plan_cache_info()
    guard = _NoFiles(monkeypatch)
    a2, b2, c2 = rand(rng, (33, 17)), rand(rng, (17, 9)), rand(rng, (33, 9))
    pg.gemm(a2, b2, c2, alpha=0.5, beta=2.0, out=out, device="cpu")
    monkeypatch.undo()
    assert guard.touched == []
    after = api.plan_cache_info()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]
    assert_close(out, a2, b2, c2, 0.5, 2.0)  # the cached plan computed the new operands


def test_cuda_planning_reads_its_tables_once(monkeypatch):
    """The cuda backend's variant and tuning tables are read once per process, not per plan."""
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    be = CudaBackend()
    be._rt = types.SimpleNamespace(cc=(9, 0), name="fake sm_90", arch="sm_90", max_smem_per_block=232448)
    a = np.ones((200, 300), np.float16)
    b = np.ones((300, 100), np.float16)
    be.plan(normalize(a, b), "auto")  # the first plan may read the tables
    _NoFiles(monkeypatch)
    plan = be.plan(normalize(np.ones((64, 300), np.float16), b), "auto")
    assert plan.private.launch is not None and plan.private.launch.lp.m > 0


def test_repeat_hits_and_explain_says_so(rng):
    a, b = rand(rng, (8, 5)), rand(rng, (5, 3))
    first = pg.explain(a, b, device="cpu")
    assert not first.cached and "planned for this call" in str(first)
    again = pg.explain(rand(rng, (8, 5)), rand(rng, (5, 3)), device="cpu")
    assert again.cached and "reused from the plan cache" in str(again)
    assert api.plan_cache_info()["hits"] == 1


@pytest.mark.parametrize(
    "change",
    [
        "stride",  # a Fortran-ordered a
        "strided view",  # a view whose strides force a copy
        "dtype",
        "shape",
        "variant",
        "device",
        "alpha",
        "beta",
        "c given",
        "out given",
        "byte order",
    ],
)
def test_any_change_that_could_change_the_plan_misses(rng, change):
    a, b = rand(rng, (6, 4)), rand(rng, (4, 5))
    kw: dict = {"device": "cpu"}
    pg.gemm(a, b, **kw)
    base = api.plan_cache_info()
    c = rand(rng, (6, 5))
    if change == "stride":
        a = np.asfortranarray(a)
    elif change == "strided view":
        a = rand(rng, (6, 8))[:, ::2]
    elif change == "dtype":
        a, b = a.astype(np.float64), b.astype(np.float64)
    elif change == "shape":
        a = rand(rng, (7, 4))
        c = rand(rng, (7, 5))
    elif change == "variant":
        kw["variant"] = "numpy"
    elif change == "device":
        kw["device"] = "auto"
    elif change == "alpha":
        kw["alpha"] = 2.0
    elif change == "beta":
        kw.update(beta=1.5)
    elif change == "c given":
        kw["c"] = c
    elif change == "out given":
        kw["out"] = np.empty((6, 5), np.float32)
    elif change == "byte order":
        a = a.astype(">f4")
    if change == "beta":
        pg.gemm(a, b, c, **kw)
        assert_close(pg.gemm(a, b, c, **kw), a.astype(np.float32), b, c, 1.0, 1.5)
    else:
        res = pg.gemm(a, b, **kw)
        cc = kw.get("c")
        assert_close(res, a.astype(res.dtype), b.astype(res.dtype), None if cc is None else cc, kw.get("alpha", 1.0), 0.0 if cc is None else 1.0)
    info = api.plan_cache_info()
    assert info["misses"] == base["misses"] + 1, f"{change} should not reuse the plan"


class FakeCudaArray:
    """A device array as __cuda_array_interface__ describes it (never dereferenced here)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides,
                                         "version": 3, **({"stream": stream} if stream is not None else {})}


def test_device_keys_follow_the_alignment_class_not_the_pointer():
    key = lambda *ops: api.plan_cache._key(*ops, 1.0, 0.0, "cuda", "auto")[0]  # noqa: E731
    b = FakeCudaArray(0x20000, (64, 32))
    base = key(FakeCudaArray(0x10000, (16, 64)), b, None, None)
    assert key(FakeCudaArray(0x30000, (16, 64)), b, None, None) == base  # another aligned pointer: same plan
    assert key(FakeCudaArray(0x10004, (16, 64)), b, None, None) != base  # 4-byte aligned only: another build
    assert key(FakeCudaArray(0x10000, (16, 64), strides=(4, 64)), b, None, None) != base  # column-major
    assert key(FakeCudaArray(0x10000, (16, 64), typestr="<f2"), b, None, None) != base


def test_device_overlap_is_checked_on_every_call():
    """A cached plan is never used when out overlaps an input: the full check refuses it."""
    a = FakeCudaArray(0x10000, (16, 64))
    b = FakeCudaArray(0x20000, (64, 32))
    out = FakeCudaArray(0x40000, (16, 32))
    found = api.plan_cache._key(a, b, None, out, 1.0, 0.0, "cuda", "auto")
    entry = api.plan_cache.CacheEntry(pg.get_backend("cpu"), pg.explain(np.ones((16, 64), np.float32), np.ones((64, 32), np.float32), device="cpu"),
                       (False, False, False), (16 * 64 * 4, 64 * 32 * 4, 0, 16 * 32 * 4))
    entry.plan.problem = types.SimpleNamespace(residency="cuda")
    assert api.plan_cache._overlap_free(entry, a, b, None, out, found[1])
    clash = FakeCudaArray(0x10000 + 64, (16, 32))  # inside a
    found = api.plan_cache._key(a, b, None, clash, 1.0, 0.0, "cuda", "auto")
    assert not api.plan_cache._overlap_free(entry, a, b, None, clash, found[1])


def test_host_out_overlapping_an_input_is_refused_even_after_a_hit(rng):
    a = rand(rng, (8, 8))
    b = rand(rng, (8, 8))
    out = np.empty((8, 8), np.float32)
    pg.gemm(a, b, out=out, device="cpu")
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=a, device="cpu")


def test_in_place_update_through_the_cache(rng):
    a, b = rand(rng, (9, 7)), rand(rng, (7, 5))
    for _ in range(3):
        c = rand(rng, (9, 5))
        expect = c.copy()
        assert pg.gemm(a, b, c, beta=0.5, out=c, device="cpu") is c
        assert_close(c, a, b, expect, 1.0, 0.5)


def test_cache_is_bounded(rng, monkeypatch):
    monkeypatch.setattr(api.plan_cache, "_cache", api.plan_cache.PlanCache(4))
    for n in range(1, 10):
        pg.gemm(rand(rng, (3, n)), rand(rng, (n, 2)), device="cpu")
    info = api.plan_cache_info()
    assert info["size"] == 4 and info["maxsize"] == 4
    pg.gemm(rand(rng, (3, 9)), rand(rng, (9, 2)), device="cpu")  # the most recent is kept
    assert api.plan_cache_info()["hits"] == 1


def test_registry_refresh_forgets_cached_plans(rng, fresh_registry):
    a, b = rand(rng, (4, 4)), rand(rng, (4, 4))
    pg.gemm(a, b, device="cpu")
    fresh_registry.refresh()
    assert not pg.explain(a, b, device="cpu").cached


def test_threads_share_the_cache_safely(rng):
    shapes = [(5 + i % 4, 3 + i % 3, 2 + i % 5) for i in range(16)]
    data = [(rand(rng, (m, k)), rand(rng, (k, n))) for m, n, k in shapes]

    def work(i: int) -> None:
        for j in range(40):
            a, b = data[(i + j) % len(data)]
            assert_close(pg.gemm(a, b, device="cpu"), a, b)

    assert run_concurrently(work, threads=8) == []
    info = api.plan_cache_info()
    assert info["size"] <= len(set(shapes)) and info["hits"] + info["misses"] == 8 * 40


def test_last_plan_keeps_provenance_not_data(rng):
    a = rand(rng, (300, 200))
    b = rand(rng, (200, 100))
    ref = weakref.ref(a)
    pg.gemm(a, b, device="cpu")
    plan = pg.last_plan()
    assert plan is not None and plan.problem.a.array is None and plan.problem.a.shape == (300, 200)
    del a
    gc.collect()
    assert ref() is None, "last_plan() kept the input alive"
