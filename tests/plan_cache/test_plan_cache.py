"""The plan cache: repeated calls re-plan nothing; what could change the plan misses; bounded and thread-safe."""

from __future__ import annotations

import builtins
import gc
import json
import os
import pathlib
import random
import re
import subprocess
import sys
import textwrap
import types
import warnings
import weakref

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm import api
from polygemm.backend import fits_float32
from polygemm.errors import ShapeError
from polygemm.testing import assert_close, check_result, reference_for

from tests.helpers import DLPackOnly, FORK_PRELUDE, REPO_ROOT, run_concurrently


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


class FakeCudaArray:
    """A device array as __cuda_array_interface__ describes it (never dereferenced here)."""

    def __init__(self, ptr, shape, typestr="<f4", strides=None, stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": strides,
                                         "version": 3, **({"stream": stream} if stream is not None else {})}


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _probe(first: dict, second: dict, rng, check) -> pg.Plan:
    """gemm with ``first``'s arguments, then ``second``'s: the second must not reuse the first's plan."""
    pg.clear_plan_cache()
    pg.gemm(**first)
    got = pg.gemm(**second)
    lp = pg.last_plan()
    assert not lp.cached, "a plan made for another kind of call was reused"
    assert pg.plan_cache_info()["misses"] == 2
    check(got, lp)
    return lp


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


ROOT = REPO_ROOT


#: the plan cache's bound and counts after calls of shapes 1, 2, 3, 1, 2, 3, 4, and the warnings the import gave,
#: for each $POLYGEMM_PLAN_CACHE_SIZE in argv[1]: polygemm is imported afresh for each (its modules dropped from
#: sys.modules), so each import reads the variable as a new process's would, in one interpreter
_CACHE_PROBE = """
import json, os, sys, warnings
import numpy as np
out = {}
for value in json.loads(sys.argv[1]):
    for name in [m for m in sys.modules if m == "polygemm" or m.startswith("polygemm.")]:
        del sys.modules[name]
    os.environ["POLYGEMM_PLAN_CACHE_SIZE"] = value
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import polygemm as pg
    for m in (1, 2, 3, 1, 2, 3, 4):
        pg.gemm(np.ones((m, 2), np.float32), np.ones((2, 3), np.float32), device="cpu")
    info = pg.plan_cache_info()
    out[value] = [info["maxsize"], info["size"], info["hits"], info["misses"], pg.last_plan().cached,
                  "|".join(str(x.message) for x in w)]
print(json.dumps(out))
"""


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32


BF16 = np.dtype(ml_dtypes.bfloat16)


HALVES = [np.dtype(np.float16), BF16]


@pytest.fixture
def rng():
    return np.random.default_rng(20)


def _layout(x, how):
    if how == "F":
        return np.asfortranarray(x)
    if how == "T":
        return np.ascontiguousarray(x.T).T
    if how == "step":
        big = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
        big[:, ::2] = x
        return big[:, ::2]
    if how == "neg":
        return np.ascontiguousarray(x[::-1])[::-1]
    if how == "ro":
        y = x.copy()
        y.flags.writeable = False
        return y
    return np.ascontiguousarray(x)


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")


def _script(body: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``body`` run by a fresh interpreter (a fork of the test process would inherit pytest's threads and state)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"})


def _memmap(tmp_path, a):
    m = np.memmap(tmp_path / "a.bin", dtype=a.dtype, mode="w+", shape=a.shape)
    m[...] = a
    return m


class _Tagged(np.ndarray):
    pass


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


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
    if ref() is not None:  # only a reference cycle waits for the collector
        gc.collect()
    assert ref() is None, "last_plan() kept the input alive"


def test_plan_cache_info_counts_as_documented(rng):
    pg.clear_plan_cache()
    assert pg.plan_cache_info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": pg.api.plan_cache.PLAN_CACHE_SIZE}
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.gemm(a, b)
    assert pg.plan_cache_info()["misses"] == 1 and pg.plan_cache_info()["size"] == 1 and not pg.last_plan().cached
    for _ in range(3):
        pg.gemm(a.copy(), b.copy())  # new arrays, same description
        assert pg.last_plan().cached
    pg.explain(a, b)
    assert pg.plan_cache_info() == {"hits": 4, "misses": 1, "size": 1, "maxsize": pg.api.plan_cache.PLAN_CACHE_SIZE}
    pg.gemm(b.T.copy(), a.T.copy())
    assert pg.plan_cache_info()["misses"] == 2 and pg.plan_cache_info()["size"] == 2
    pg.clear_plan_cache()
    assert pg.plan_cache_info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": pg.api.plan_cache.PLAN_CACHE_SIZE}
    pg.gemm(a, b)
    assert not pg.last_plan().cached


def test_cache_keeps_calls_apart_by_what_their_plan_depends_on(rng):
    a, b, c = _rand(rng, np.float32, 6, 4), _rand(rng, np.float32, 4, 5), _rand(rng, np.float32, 6, 5)
    ok = lambda got, lp, **kw: (lambda r: (_ for _ in ()).throw(AssertionError(r.message)) if not r.ok else None)(  # noqa: E731
        check_result(got, a, b, **kw))
    base = dict(a=a, b=b)
    # dtype
    _probe(base, dict(a=a.astype(np.float64), b=b.astype(np.float64)), rng,
           lambda g, lp: (g.dtype == np.float64 and lp.problem.dtype == np.float64) or pytest.fail(str(lp)))
    # layout and strides
    _probe(base, dict(a=np.asfortranarray(a), b=b), rng, lambda g, lp: (ok(g, lp), lp.layouts["a"].startswith("col")))
    wide = np.zeros((6, 9), np.float32)
    wide[:, :4] = a
    _probe(base, dict(a=wide[:, :4], b=b), rng, lambda g, lp: (ok(g, lp), "ld=9" in lp.layouts["a"]) or None)
    stepped = np.zeros((12, 8), np.float32)
    stepped[::2, ::2] = a
    _probe(base, dict(a=stepped[::2, ::2], b=b), rng, lambda g, lp: ok(g, lp) or any("a copied" in x for x in lp.copies) or pytest.fail())
    _probe(base, dict(a=a.astype(">f4"), b=b), rng, lambda g, lp: ok(g, lp) or any("a copied" in x for x in lp.copies) or pytest.fail())
    # out vs none, both ways
    o = np.full((6, 5), np.nan, np.float32)
    _probe(base, dict(base, out=o), rng, lambda g, lp: (g is o and lp.problem.out is not None and ok(o, lp)) or None)
    _probe(dict(base, out=np.empty((6, 5), np.float32)), base, rng, lambda g, lp: (lp.problem.out is None and ok(g, lp)) or None)
    # c vs none, alpha == 1 / beta == 0 classes
    _probe(base, dict(base, c=c, beta=1.0), rng, lambda g, lp: check_result(g, a, b, c, 1.0, 1.0).ok or pytest.fail())
    _probe(base, dict(base, alpha=2.0), rng, lambda g, lp: (lp.problem.alpha == 2.0 and ok(g, lp, alpha=2.0)) or None)
    _probe(dict(base, c=c, beta=0.0), dict(base, c=c, beta=3.0), rng,
           lambda g, lp: (lp.problem.beta == 3.0 and check_result(g, a, b, c, 1.0, 3.0).ok) or pytest.fail())
    # out_dtype
    h = dict(a=a.astype(np.float16), b=b.astype(np.float16))
    _probe(h, dict(h, out_dtype=np.float32), rng,
           lambda g, lp: (g.dtype == np.float32 and check_result(g, h["a"], h["b"], out_dtype=np.float32).ok) or pytest.fail())
    _probe(dict(h, out_dtype=np.float32), h, rng, lambda g, lp: g.dtype == np.float16 or pytest.fail())
    # variant
    _probe(base, dict(base, variant="reference"), rng, lambda g, lp: (lp.variant == "reference" and ok(g, lp)) or None)


def test_cache_follows_polygemm_device_between_calls(rng, monkeypatch):
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.clear_plan_cache()
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu")
    assert check_result(pg.gemm(a, b), a, b).ok and pg.last_plan().backend == "cpu"
    monkeypatch.setenv("POLYGEMM_DEVICE", "nosuch")
    with pytest.raises(pg.BackendUnavailableError, match=r"POLYGEMM_DEVICE='nosuch'"):
        pg.gemm(a, b)  # not the cpu plan cached under the other value
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu")
    pg.gemm(a, b)
    assert pg.last_plan().cached
    info = {i.name: i for i in pg.backends()}
    if not info["musa"].available:
        monkeypatch.setenv("POLYGEMM_DEVICE", "musa")
        with pytest.raises(pg.BackendUnavailableError):
            pg.gemm(a, b)
    monkeypatch.delenv("POLYGEMM_DEVICE")
    pg.gemm(a, b)
    assert not pg.last_plan().cached  # unset is auto: its own plan


def test_interleaved_c_and_out_are_not_in_place_for_the_plan_cache(rng):
    """c = buf[::2] and out = buf[1::2] (or two column blocks of one matrix) interleave without sharing an element:
    not in place, though np.may_share_memory (bounds only) says they may share, so a later out=c does not reuse
    their plan, and last_plan() says which it is."""
    a, b = rand(rng, (3, 5, 4)), rand(rng, (3, 4, 6))
    a2, b2 = rand(rng, (4, 3)), rand(rng, (3, 6))
    for first in ("separate", "in place"):
        for a_, b_, make in ((a, b, lambda: rand(rng, (6, 5, 6))), (a2, b2, lambda: rand(rng, (4, 12)))):
            pg.clear_plan_cache()
            for kind in ((first, "in place") if first == "separate" else (first, "separate")):
                buf = make()
                keep = buf.copy()
                c = buf[::2] if buf.ndim == 3 else buf[:, :6]
                out = c if kind == "in place" else (buf[1::2] if buf.ndim == 3 else buf[:, 6:])
                c0 = c.copy()
                assert pg.gemm(a_, b_, c, beta=1.0, out=out, device="cpu") is out
                assert_within(out, a_, b_, c0, 1.0, 1.0)
                plan = pg.last_plan()
                assert plan.problem.in_place is (kind == "in place"), (first, kind)
                assert ("in place: out is c" in str(plan)) is (kind == "in place")
                if kind == "separate":
                    assert np.array_equal(c, c0) and not np.array_equal(buf, keep)


_CACHE_SIZES = [
    ("0", 0, 0, 0, ""),  # off: every call plans, nothing kept, no warning
    (" 2 ", 2, 2, 0, ""),  # spaces around a number; a bound of 2 loses 1, 2, 3 in turn
    ("4", 4, 4, 3, ""),
    ("100000000000000000000", 10 ** 20, 4, 3, ""),  # huge: a bound never reached, not an overflow
    ("", 256, 4, 3, ""),  # empty, as unset: the default
    ("2.5", 256, 4, 3, "POLYGEMM_PLAN_CACHE_SIZE='2.5' is not a whole number; keeping 256 plans"),
    ("lots", 256, 4, 3, "POLYGEMM_PLAN_CACHE_SIZE='lots' is not a whole number; keeping 256 plans"),
    ("-1", 256, 4, 3, "POLYGEMM_PLAN_CACHE_SIZE='-1' is negative (0 turns the cache off); keeping 256 plans"),
]


@pytest.fixture(scope="module")
def cache_size_runs() -> dict[str, list]:
    """_CACHE_PROBE's answers for every value of _CACHE_SIZES, from one child process."""
    values = json.dumps([value for value, *_ in _CACHE_SIZES])
    r = subprocess.run([sys.executable, "-c", _CACHE_PROBE, values], capture_output=True, text=True, cwd=str(ROOT),
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("value, maxsize, size, hits, warned", _CACHE_SIZES)
def test_plan_cache_size_spelt_oddly_gives_the_bound_it_says(cache_size_runs, value, maxsize, size, hits, warned):
    """The variable is read at import as a whole number, or the default with a warning naming the value."""
    got_max, got_size, got_hits, got_misses, cached, said = cache_size_runs[value]
    assert (got_max, got_size, got_hits, got_misses) == (maxsize, size, hits, 7 - hits)
    assert cached is False  # 4 is new in every case
    assert said == warned


def test_the_readme_says_how_large_the_cache_grows_and_when_the_variables_are_read(monkeypatch):
    # POLYGEMM_PLAN_CACHE_SIZE, the one way a long-running service bounds the plan cache, is named in the README or
    # docs/, with when it is read (once at import) and that $POLYGEMM_DEVICE is read on every call: a notebook user
    # setting it after "import polygemm" sees nothing change and is told why there
    readme = " ".join((ROOT / "docs" / "api.md").read_text().split())  # the API page (README links it)
    assert "$POLYGEMM_PLAN_CACHE_SIZE" in readme and "read when polygemm is imported" in readme
    assert "256 when unset; 0 turns the cache off" in readme and "none of the arrays" in readme
    assert "`$POLYGEMM_DEVICE` is read on every call" in readme
    # what it says: a change after import changes no bound
    before = pg.plan_cache_info()["maxsize"]
    monkeypatch.setenv("POLYGEMM_PLAN_CACHE_SIZE", "3")
    pg.gemm(_ones(2, 2), _ones(2, 2), device="cpu")
    assert pg.plan_cache_info()["maxsize"] == before == 256


@pytest.mark.parametrize("call", ["gemm", "gemm c out", "explain", "matmul", "dlpack out", "strided", "reference",
                                  "refused", "refused out"])
def test_neither_the_cache_nor_last_plan_keeps_an_array_alive(call):
    """a service calling gemm on many large arrays gets each back when it drops it: the cached plans and
    last_plan() hold descriptions (shapes, layouts), never the operands, also after a refused call."""
    a, b, c, o = _ones(64, 32), _ones(32, 16), _ones(64, 16), np.empty((64, 16), np.float32)
    refs = [weakref.ref(x) for x in (a, b, c, o)]
    run = {
        "gemm": lambda: pg.gemm(a, b, device="cpu"),
        "gemm c out": lambda: pg.gemm(a, b, c, beta=1.0, out=o, device="cpu"),
        "explain": lambda: pg.explain(a, b, c, beta=1.0, out=o, device="cpu"),
        "matmul": lambda: pg.matmul(a[0], b, device="cpu"),
        "dlpack out": lambda: pg.gemm(DLPackOnly(a), DLPackOnly(b), out=DLPackOnly(o), device="cpu"),
        "strided": lambda: pg.gemm(a[:, ::2], b[::2], device="cpu"),  # copied once by polygemm: the copy goes too
        "reference": lambda: pg.gemm(a, b, c, beta=2.0, device="cpu", variant="reference"),
        "refused": lambda: pg.gemm(a, a, device="cpu"),
        "refused out": lambda: pg.gemm(a, b, out=c[:, :3], device="cpu"),
    }[call]
    try:
        run()
    except ShapeError:
        assert call.startswith("refused")
    else:
        assert not call.startswith("refused")
    del a, b, c, o, run
    if any(r() is not None for r in refs):  # only a reference cycle (a refusal's traceback) waits for the collector
        gc.collect()
    assert [r() is None for r in refs] == [True] * 4


def test_a_negative_plan_cache_size_warns_and_keeps_the_default():
    """POLYGEMM_PLAN_CACHE_SIZE=-3 warns, as an unreadable size does, and keeps the default: a cache of bound -3 would
    keep nothing, with no word."""
    import os
    import subprocess
    import sys

    code = "import warnings; warnings.simplefilter('always')\nimport polygemm\nprint(polygemm.plan_cache_info()['maxsize'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": "-3"})
    assert r.stdout.strip() == "256", r.stdout + r.stderr
    assert "POLYGEMM_PLAN_CACHE_SIZE='-3' is negative (0 turns the cache off); keeping 256 plans" in r.stderr


def test_an_exactly_representable_subnormal_keeps_the_float32_path_and_others_leave_it():
    """The float32 kernels take only normal numbers and the subnormals float32 holds exactly as scalars, not every
    value above half the smallest subnormal. The cache key reads the same test, so a plan for one kind of value is
    never reused for the other."""
    assert fits_float32(2.0 ** -140) and fits_float32(-(2.0 ** -149)) and fits_float32(FLOAT32_TINY)
    assert fits_float32(0.0) and fits_float32(-0.0) and fits_float32(float(np.finfo(np.float32).max))
    for value in (1e-45, 3e-42, -1e-40, 1e-38, 2.0 ** -150, 1e39):
        assert not fits_float32(value), value
    a = np.full((2, 3), 1e19, np.float32)
    b = np.full((3, 2), 1e19, np.float32)
    pg.clear_plan_cache()
    exact = pg.gemm(a, b, alpha=2.0 ** -140, device="cpu")  # planned (a float32-exact scalar) ...
    inexact = pg.gemm(a, b, alpha=1e-40, device="cpu")  # ... and this one planned again, not bound to it
    assert pg.plan_cache_info()["misses"] == 2
    assert_within(exact, a, b, None, 2.0 ** -140)
    assert_within(inexact, a, b, None, 1e-40)


def test_explain_from_the_cache_says_what_a_fresh_plan_says_and_results_stay_right(rng):
    """over dtypes, operand layouts (C, Fortran, transposed, stepped, reversed, read-only), beta = 0 beside a
    NaN c, beta != 0, out separate, in place as c and as a view of c, out_dtype and alpha, called in shuffled order so
    that each finds the cache holding the others: explain and last_plan describe each call as a fresh plan does
    (but for the cache line), and each result is within the bound."""
    m, n, k = 5, 7, 6
    configs = []
    for dt in (np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)):
        for la, lb in (("C", "C"), ("F", "T"), ("step", "neg"), ("ro", "F")):
            for cmode in ("none", "beta0-nan", "beta", "out", "in-place", "in-place-view"):
                for wide in ((False, True) if dt in HALVES else (False,)):
                    configs.append((dt, la, lb, cmode, wide, 2.5 if cmode == "beta" else 1.0))

    def make(cfg):
        dt, la, lb, cmode, wide, alpha = cfg
        a = _layout(rng.standard_normal((m, k)).astype(dt), la)
        b = _layout(rng.standard_normal((k, n)).astype(dt), lb)
        rdt = np.dtype(np.float32) if wide else dt
        kw = {"alpha": alpha, "device": "cpu", "out_dtype": np.float32 if wide else None}
        c = None if cmode in ("none", "out") else rng.standard_normal((m, n)).astype(rdt)
        if cmode == "beta0-nan":
            c[...] = np.nan
        kw["beta"] = 0.0 if cmode in ("none", "out", "beta0-nan") else -0.5
        kw["out"] = {"out": np.full((m, n), np.nan, rdt), "in-place": c,
                     "in-place-view": None if c is None else c[...]}.get(cmode)
        return a, b, c, kw

    def text(plan):
        return "\n".join(line for line in str(plan).splitlines() if not line.startswith("  cache"))

    fresh = {}
    for i, cfg in enumerate(configs):
        pg.clear_plan_cache()
        a, b, c, kw = make(cfg)
        fresh[i] = text(pg.explain(a, b, c, **kw))
    pg.clear_plan_cache()
    order = list(range(len(configs))) * 2
    random.Random(20).shuffle(order)
    for i in order:
        a, b, c, kw = make(configs[i])
        c0 = None if c is None else c.copy()
        assert text(pg.explain(a, b, c, **kw)) == fresh[i], configs[i]
        got = pg.gemm(a, b, c, **kw)
        assert text(pg.last_plan()) == fresh[i], configs[i]
        assert_within(got, a, b, c0, kw["alpha"], kw["beta"], out_dtype=kw["out_dtype"])
    assert pg.plan_cache_info()["hits"] > len(configs)


@needs_fork
def test_a_child_keeps_the_probes_and_plans_its_parent_finished():
    # what the parent finished before the fork (a backend's checks, a cached plan) is the child's too, not done again
    r = _script(FORK_PRELUDE + """
from polygemm.backends.cpu_ref.backend import CpuReferenceBackend
a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
pg.gemm(a, b, device="cpu")
def never(self):
    raise AssertionError("the child probed again")
CpuReferenceBackend.probe = never

def work():
    before = pg.plan_cache_info()
    assert float(pg.gemm(a, b, device="cpu").sum()) == 24.0
    after = pg.plan_cache_info()
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"], (before, after)
    assert {i.name: i for i in pg.backends()}["cpu"].available
sys.exit(in_child(work))
""")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
@pytest.mark.parametrize("kind, words", [
    ("memmap", r"a is a numpy\.memmap, which the cache does not key.*np\.asarray\(a\) is the same memory"),
    ("matrix", r"a is a numpy\.matrix, which the cache does not key.*np\.asarray\(a\)"),
    ("subclass", r"a is a [\w.]*_Tagged\b.*cache does not key"),
    ("list", r"a is a list, which the cache does not key.*convert it once, np\.asarray\(a\)"),
])
def test_a_plan_for_operands_the_cache_does_not_key_says_it_is_not_cached(rng, tmp_path, kind, words):
    a = rng.standard_normal((6, 5))  # float64: a list reads as float64
    b = rng.standard_normal((5, 4))
    want = pg.gemm(a, b, device="cpu")
    x = {"memmap": lambda: _memmap(tmp_path, a), "matrix": lambda: np.asmatrix(a), "subclass": lambda: a.view(_Tagged),
         "list": lambda: a.tolist()}[kind]()
    pg.clear_plan_cache()
    for _ in range(2):
        r = pg.gemm(x, b, device="cpu")
        plan = pg.last_plan()
        # the next identical call plans again: never a hit, and nothing kept
        assert plan is not None and not plan.cached and pg.plan_cache_info()["size"] == 0
        # "planned for this call (cached for the next)"
        assert "cached for the next" not in str(plan)
        assert plan.uncached and np.array_equal(np.asarray(r), want)
        assert re.search(words, plan.uncached), plan.uncached
        assert "not cached: " + plan.uncached in str(plan)
    described = pg.explain(x, b, device="cpu")
    assert described.uncached == plan.uncached and not described.cached


def test_an_out_the_cache_does_not_key_is_named_and_following_the_hint_caches_the_call(rng, tmp_path):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    out = _memmap(tmp_path, np.zeros((6, 4), np.float32))
    pg.clear_plan_cache()
    assert pg.gemm(a, b, out=out, device="cpu") is out
    assert "out is a numpy.memmap" in pg.last_plan().uncached and "written in place" in pg.last_plan().uncached
    # what the hint says works: the same memory as a plain ndarray is cached, and written in place
    plain = np.asarray(out)
    assert type(plain) is np.ndarray and np.shares_memory(plain, out)
    pg.gemm(a, b, out=plain, device="cpu")
    first = pg.last_plan()
    assert not first.cached and first.uncached == "" and "(cached for the next)" in str(first)
    out[...] = 0
    pg.gemm(a, b, out=plain, device="cpu")
    assert pg.last_plan().cached and np.array_equal(np.asarray(out), pg.gemm(a, b, device="cpu"))


def test_a_plan_made_with_the_cache_turned_off_says_so(rng, monkeypatch):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    monkeypatch.setattr(api.plan_cache._cache, "maxsize", 0)  # what $POLYGEMM_PLAN_CACHE_SIZE=0 sets at import
    pg.clear_plan_cache()
    for _ in range(2):
        pg.gemm(a, a.T, device="cpu")
        plan = pg.last_plan()
        assert not plan.cached and "POLYGEMM_PLAN_CACHE_SIZE=0" in plan.uncached  # "cached for the next"
        assert "cached for the next" not in str(plan)


def test_a_cached_call_and_its_first_say_what_they_did(rng):
    # plain ndarrays are planned once, then reused, and the text says each
    a = rng.standard_normal((7, 3)).astype(np.float32)
    pg.clear_plan_cache()
    pg.gemm(a, a.T, device="cpu")
    first = pg.last_plan()
    assert not first.cached and first.uncached == "" and "(cached for the next)" in str(first)
    pg.gemm(a, a.T, device="cpu")
    again = pg.last_plan()
    assert again.cached and again.uncached == "" and "reused from the plan cache" in str(again)
    assert pg.explain(a, a.T, device="cpu").cached


def test_the_kernel_cache_expands_a_tilde_and_names_the_file_in_the_way(tmp_path, monkeypatch):
    from polygemm.backends.cuda.compiler import cache_dir
    from polygemm.errors import BackendUnavailableError

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", "~/kc")  # as a .env file or a Dockerfile's ENV writes it
    assert cache_dir() == tmp_path / "kc" / "cubin" and not (tmp_path / "~").exists()
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(tmp_path / "afile" / "sub"))
    with pytest.raises(BackendUnavailableError, match=rf"{tmp_path / 'afile'} is a file"):
        cache_dir()


def test_last_plan_says_when_the_call_reused_a_cached_plan(rng):
    # last_plan() after a cache hit says the plan was reused (cached is True), not "planned for this call"
    a, b = _operands(rng)
    pg.clear_plan_cache()
    pg.gemm(a, b)
    assert pg.last_plan().cached is False
    pg.gemm(a, b)
    plan = pg.last_plan()
    assert plan.cached is True and "reused from the plan cache" in str(plan)


@pytest.mark.parametrize("raw, size", [(None, 256), ("", 256), ("  ", 256), ("0", 0), ("12", 12), (" 64 ", 64)])
def test_plan_cache_size_setting_read_as_a_count(raw, size):
    from polygemm.plan_cache import _cache_size

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a size it takes is no warning
        assert _cache_size(raw) == size


@pytest.mark.parametrize("raw, says", [("-3", "negative"), ("lots", "not a whole number"), ("1.5", "not a whole number")])
def test_plan_cache_size_setting_it_cannot_take_warns_and_keeps_the_default(raw, says):
    from polygemm.plan_cache import _cache_size

    with pytest.warns(RuntimeWarning) as caught:
        assert _cache_size(raw, default=100) == 100
    text = str(caught[0].message)
    assert "POLYGEMM_PLAN_CACHE_SIZE" in text and repr(raw) in text and says in text and "keeping 100" in text


def test_a_call_asking_an_out_dtype_never_takes_the_last_hit_of_one_that_asked_none():
    """NumPy finds np.dtype("float64") == None true: the last hit's key, compared by ==, must still tell the calls apart
    (a float32 product asked for float64 is refused, as an uncached call refuses it)."""
    import numpy as np

    import polygemm as pg

    a = np.ones((3, 3), np.float32)
    for dtype in (np.dtype("float64"), np.float64, "float64"):
        pg.gemm(a, a, device="cpu")
        pg.gemm(a, a, device="cpu")  # now the last hit
        with pytest.raises(pg.DTypeError, match="the result dtype must be float32"):
            pg.gemm(a, a, device="cpu", out_dtype=dtype)


def test_names_given_as_numpy_strings_are_cached_as_their_str():
    import numpy as np

    import polygemm as pg

    a = np.ones((3, 3), np.float32)
    pg.clear_plan_cache()
    for _ in range(3):
        pg.gemm(a, a, device=np.str_("cpu"), variant=np.str_("auto"))
    assert pg.plan_cache_info()["hits"] == 2 and pg.last_plan().cached and not pg.last_plan().uncached
