"""A user who keeps polygemm in a long-running service or a notebook, and a user of array-API / DLPack and
ml_dtypes arrays, eighteenth round (CPU): the plan cache over many shapes (evicted least recently *used* at its
bound, its counts consistent, no array kept alive by it or by ``last_plan()``), ``$POLYGEMM_PLAN_CACHE_SIZE``
spelt oddly and what the README says of it, ``last_plan()`` after a failed call, ``explain`` with ``c`` and
``out`` then ``gemm`` with the same, a plugin installed while the process runs and ``$POLYGEMM_DEVICE`` naming it,
an array-API array (DLPack and ``__array_namespace__``, no NumPy) in and out, bfloat16 and float64 NumPy arrays
through every API, bfloat16 beside float16, ``out_dtype`` of a dtype polygemm never computes, ``polygemm.testing``
as a plugin author calls it (``error_bound`` on its own, NaN and Inf inputs, odd K, the dtype message), and the
error classes the README lists. The tests marked "defect" failed before the fix they name; the others check
edges that were right. (JAX is not installed on the CPU machine: its arrays are left to test_jax.py.)"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import types
import weakref
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
import polygemm.api as api
from polygemm import errors, registry
from polygemm.errors import (ArgumentError, ArgumentTypeError, BackendUnavailableError, DeviceError, DTypeError,
                             PolygemmError, ShapeError, UnsupportedProblemError)
from polygemm.testing import check_result, error_bound, reference_for, unit_roundoff
from plugin_sources import THIRD_PARTY_BASE, install_fake_distribution

from conftest import DLPackOnly

ROOT = Path(__file__).resolve().parent.parent
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def _no_device_env(monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


# -- the plan cache over a long run ---------------------------------------------------------------------------------------


def test_a_long_run_of_shapes_evicts_the_least_recently_used_plan_and_counts_every_call():
    """Right: past the bound the plan least recently *used* goes (a hit renews a plan), the size stays at the bound,
    hits + misses is the number of calls, and clear_plan_cache() then the same call plans again, then hits."""
    pg.clear_plan_cache()
    bound = pg.plan_cache_info()["maxsize"]
    assert bound == api.plan_cache.PLAN_CACHE_SIZE and bound > 2
    b = _ones(2, 3)
    calls = 0
    for m in range(1, bound + 1):  # fills the cache exactly
        pg.gemm(_ones(m, 2), b, device="cpu")
        calls += 1
    pg.gemm(_ones(1, 2), b, device="cpu")  # the oldest, used again: now the most recent
    calls += 1
    assert pg.last_plan().cached
    for m in range(bound + 1, bound + 41):  # 40 new shapes push out 40 plans
        pg.gemm(_ones(m, 2), b, device="cpu")
        calls += 1
    info = pg.plan_cache_info()
    assert info["size"] == bound and info["hits"] + info["misses"] == calls and info["hits"] == 1
    pg.gemm(_ones(1, 2), b, device="cpu")  # renewed before the 40: kept
    assert pg.last_plan().cached
    pg.gemm(_ones(2, 2), b, device="cpu")  # the least recently used then: gone
    assert not pg.last_plan().cached
    assert pg.plan_cache_info()["size"] == bound
    pg.clear_plan_cache()
    assert pg.plan_cache_info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": bound}
    got = pg.gemm(_ones(7, 2), b, device="cpu")
    assert not pg.last_plan().cached and (got == 2.0).all()
    pg.gemm(_ones(7, 2), b, device="cpu")
    assert pg.last_plan().cached and pg.plan_cache_info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": bound}


_CACHE_PROBE = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    import numpy as np, polygemm as pg
for m in (1, 2, 3, 1, 2, 3, 4):
    pg.gemm(np.ones((m, 2), np.float32), np.ones((2, 3), np.float32), device="cpu")
info = pg.plan_cache_info()
print(info["maxsize"], info["size"], info["hits"], info["misses"], pg.last_plan().cached)
print("|".join(str(x.message) for x in w))
"""


@pytest.mark.parametrize("value, maxsize, size, hits, warned", [
    ("0", 0, 0, 0, ""),  # off: every call plans, nothing kept, no warning
    (" 2 ", 2, 2, 0, ""),  # spaces around a number; a bound of 2 loses 1, 2, 3 in turn
    ("4", 4, 4, 3, ""),
    ("100000000000000000000", 10 ** 20, 4, 3, ""),  # huge: a bound never reached, not an overflow
    ("2.5", 256, 4, 3, "POLYGEMM_PLAN_CACHE_SIZE='2.5' is not a whole number; keeping 256 plans"),
    ("-1", 256, 4, 3, "POLYGEMM_PLAN_CACHE_SIZE='-1' is negative (0 turns the cache off); keeping 256 plans"),
])
def test_plan_cache_size_spelt_oddly_gives_the_bound_it_says(value, maxsize, size, hits, warned):
    """Right: the variable read at import as a whole number, or the default with a warning naming the value."""
    r = subprocess.run([sys.executable, "-c", _CACHE_PROBE], capture_output=True, text=True, cwd=str(ROOT),
                       env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": value})
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    got_max, got_size, got_hits, got_misses, cached = first.split()
    assert (int(got_max), int(got_size), int(got_hits), int(got_misses)) == (maxsize, size, hits, 7 - hits)
    assert cached == "False"  # 4 is new in every case
    assert second == warned


def test_the_readme_says_how_large_the_cache_grows_and_when_the_variables_are_read(monkeypatch):
    # defect: POLYGEMM_PLAN_CACHE_SIZE, the one way a long-running service bounds the plan cache, was named nowhere in
    # the README or docs/ (only in api.py), nor that it is read once at import, nor that $POLYGEMM_DEVICE is read on
    # every call; a notebook user setting it after "import polygemm" saw nothing change and no word why
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
    """Right: a service calling gemm on many large arrays gets each back when it drops it: the cached plans and
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
    gc.collect()
    assert [r() is None for r in refs] == [True] * 4


def test_last_plan_after_a_failed_call_is_the_last_completed_call():
    """Right (docstring: "the plan of the last gemm call completed in this thread"): a refused call, an explain and
    a call on an unknown device leave it as it was; the next completed call replaces it."""
    pg.gemm(_ones(2, 3), _ones(3, 4), device="cpu")
    before = pg.last_plan()
    for fails in (lambda: pg.gemm(_ones(2, 3), _ones(2, 3), device="cpu"),
                  lambda: pg.gemm(_ones(2, 3), _ones(3, 4), device="nosuch"),
                  lambda: pg.gemm(_ones(2, 3), _ones(3, 4), out=np.empty((2, 4)), device="cpu")):
        with pytest.raises(PolygemmError):
            fails()
        assert pg.last_plan().problem.shape_str() == before.problem.shape_str() == "2x4x3"
    pg.explain(_ones(5, 6), _ones(6, 7), device="cpu")  # plans, runs nothing
    assert pg.last_plan().problem.shape_str() == "2x4x3"
    pg.gemm(_ones(5, 6), _ones(6, 7), device="cpu")
    assert pg.last_plan().problem.shape_str() == "5x7x6"


def test_explain_with_c_and_out_plans_the_call_gemm_then_reuses():
    """Right: explain(a, b, c, beta, out=...) is cached for the gemm that follows, in place or not; the plan says
    so, and both calls count in plan_cache_info()."""
    pg.clear_plan_cache()
    a, b = _ones(2, 3), _ones(3, 4)
    c, out = np.full((2, 4), 5.0, np.float32), np.zeros((2, 4), np.float32)
    p = pg.explain(a, b, c, beta=2.0, out=out, device="cpu")
    assert not p.cached and not p.problem.in_place and p.problem.beta == 2.0 and (out == 0).all()
    assert pg.gemm(a, b, c, beta=2.0, out=out, device="cpu") is out and (out == 13.0).all()
    assert pg.last_plan().cached and not pg.last_plan().problem.in_place
    p = pg.explain(a, b, c, beta=3.0, out=c, device="cpu")  # in place: another plan
    assert not p.cached and p.problem.in_place and (c == 5.0).all()
    assert pg.gemm(a, b, c, beta=3.0, out=c, device="cpu") is c and (c == 18.0).all()
    lp = pg.last_plan()
    assert lp.cached and lp.problem.in_place and lp.problem.beta == 3.0
    assert pg.plan_cache_info() == {"hits": 2, "misses": 2, "size": 2, "maxsize": api.plan_cache.PLAN_CACHE_SIZE}


# -- a plugin installed while the process runs; $POLYGEMM_DEVICE between calls ----------------------------------------------


def test_a_plugin_installed_mid_session_is_used_after_refresh_and_named_by_polygemm_device(tmp_path, monkeypatch,
                                                                                            fresh_registry, without_gpu):
    """Right: a plugin pip-installed into a running notebook is not seen (nor a cached plan dropped) until
    registry.refresh(); then auto takes it (priority 300 over cpu's 0) with a new plan, and $POLYGEMM_DEVICE names
    it in any case, with an index, or names cpu again, each at the very next call."""
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), _ones(3, 4)
    want = a @ b
    pg.gemm(a, b)
    assert pg.last_plan().backend == "cpu"
    install_fake_distribution(tmp_path, "polygemm-late", "late_plugin", THIRD_PARTY_BASE, {"late": "late_plugin:Good"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert np.array_equal(pg.gemm(a, b), want) and (pg.last_plan().backend, pg.last_plan().cached) == ("cpu", True)
    registry.refresh()
    assert np.array_equal(pg.gemm(a, b), want) and (pg.last_plan().backend, pg.last_plan().cached) == ("late", False)
    assert ("cpu" not in [n for n, _ in pg.last_plan().candidates])  # taken before cpu, not after it
    for value in ("LATE", " late ", "late:0"):
        monkeypatch.setenv("POLYGEMM_DEVICE", value)
        assert np.array_equal(pg.gemm(a, b), want) and pg.last_plan().backend == "late"
    monkeypatch.setenv("POLYGEMM_DEVICE", "late:1")
    with pytest.raises(BackendUnavailableError, match=r"has one device.*\$POLYGEMM_DEVICE='late:1'"):
        pg.gemm(a, b)
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu:0")
    assert np.array_equal(pg.gemm(a, b), want) and pg.last_plan().backend == "cpu"
    monkeypatch.setenv("POLYGEMM_DEVICE", "nosuch")
    assert np.array_equal(pg.gemm(a, b, device="late"), want)  # an explicit device is not the variable's
    with pytest.raises(BackendUnavailableError, match=r"unknown device 'nosuch'; known devices: cpu, cuda, late, musa"):
        pg.gemm(a, b)


# -- an array-API array: DLPack and __array_namespace__, no NumPy --------------------------------------------------------


class ApiArray(DLPackOnly):
    """An array of a small array-API library: shape, ndim, dtype, DLPack and its namespace; no reshape method (the
    standard has xp.reshape, no method) and no __array__."""

    shape = property(lambda self: self._x.shape)
    ndim = property(lambda self: self._x.ndim)
    dtype = property(lambda self: self._x.dtype)

    def __array_namespace__(self, api_version=None):
        return API


API = types.SimpleNamespace(__name__="apilib", from_dlpack=lambda x: ApiArray(np.from_dlpack(x)),
                            asarray=lambda x: ApiArray(np.asarray(x)),
                            expand_dims=lambda x, /, *, axis=0: ApiArray(np.expand_dims(x._x, axis)),  # a view, as NumPy's
                            reshape=lambda x, /, shape: ApiArray(np.reshape(x._x, shape)))


@pytest.mark.parametrize("dtype, out_dtype", [(np.float32, None), (np.float64, None), (np.float16, np.float32)])
def test_an_array_api_array_gives_its_own_kind_and_out_is_written(dtype, out_dtype):
    """Right (README: "JAX and other DLPack arrays through their library's from_dlpack"): the result is the operands'
    kind, of the dtype asked; an ``out`` of that kind is written and is what comes back; a read-only input is read;
    a read-only out is refused and left as it was."""
    import array_api_compat

    a = np.arange(6, dtype=dtype).reshape(2, 3)
    b = np.ones((3, 4), dtype)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(out_dtype or dtype)
    res = pg.gemm(ApiArray(a), ApiArray(b), out_dtype=out_dtype, device="cpu")
    assert type(res) is ApiArray and array_api_compat.array_namespace(res) is API
    assert res.dtype == (out_dtype or dtype) and np.array_equal(np.from_dlpack(res), want)
    out = ApiArray(np.zeros((2, 4), out_dtype or dtype))
    assert pg.gemm(ApiArray(a), ApiArray(b), out=out, device="cpu") is out and np.array_equal(out._x, want)
    ro = a.copy()
    ro.flags.writeable = False
    assert np.array_equal(np.from_dlpack(pg.gemm(ApiArray(ro), ApiArray(b), out_dtype=out_dtype, device="cpu")), want)
    locked = np.full((2, 4), 7, out_dtype or dtype)
    locked.flags.writeable = False
    with pytest.raises(ArgumentError, match="a writeable CPU DLPack array"):
        pg.gemm(ApiArray(a), ApiArray(b), out=ApiArray(locked), device="cpu")
    assert (locked == 7).all()
    plan = pg.explain(ApiArray(a), ApiArray(b), out_dtype=out_dtype, device="cpu")
    assert plan.problem.dtype == dtype and plan.problem.out_dtype == (out_dtype or dtype)


# -- bfloat16 and float64 NumPy arrays through every API --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float64)], ids=["bfloat16", "float64"])
def test_bfloat16_and_float64_numpy_arrays_through_every_api(rng, dtype):
    """Right: gemm (every cpu variant, c and beta, out), matmul with vectors, explain and polygemm.testing take
    ml_dtypes.bfloat16 and float64 arrays as they take float32 ones; bfloat16 also stores a float32 result."""
    a = rng.standard_normal((5, 7)).astype(dtype)
    b = rng.standard_normal((7, 3)).astype(dtype)
    c = rng.standard_normal((5, 3)).astype(dtype)
    for variant in ("auto", "blas", "reference", "numpy"):
        got = pg.gemm(a, b, c, alpha=0.5, beta=-2.0, device="cpu", variant=variant)
        assert got.dtype == dtype and check_result(got, a, b, c, 0.5, -2.0).ok, variant
    out = np.empty((5, 3), dtype)
    assert pg.gemm(a, b, out=out, device="cpu") is out and check_result(out, a, b).ok
    v = pg.matmul(a[0], b, device="cpu")
    assert v.shape == (3,) and v.dtype == dtype and check_result(v[None], a[:1], b).ok
    s = pg.matmul(a[0], b[:, 0], device="cpu")
    assert s.shape == () and s.dtype == dtype
    plan = pg.explain(a, b, device="cpu")
    assert plan.problem.dtype == dtype and plan.problem.out_dtype == dtype and plan.backend == "cpu"
    tol = error_bound(a, b)
    u = unit_roundoff(dtype)
    assert tol.shape == (5, 3) and u == (2.0 ** -8 if dtype == BF16 else 2.0 ** -53)
    if dtype == BF16:
        wide = pg.gemm(a, b, out_dtype=np.float32, device="cpu")
        assert wide.dtype == np.float32 and check_result(wide, a, b, out_dtype=np.float32).ok
        assert "expected bfloat16" in check_result(wide, a, b).message


@pytest.mark.parametrize("first, second", [(np.float16, BF16), (BF16, np.float16)], ids=["f16-bf16", "bf16-f16"])
def test_bfloat16_beside_float16_is_told_the_cast_that_loses_nothing(first, second):
    # defect: NumPy promotes bfloat16 with float16 to no dtype, and the hint named the cast of b to a's dtype alone:
    # "Cast one, e.g. b.astype(np.float16)" turned bfloat16 values past 65504 into inf (and float16 into bfloat16's 8
    # bits); torch and JAX promote the two to float32, which holds both exactly
    a = np.full((2, 3), 70000.0 if first == BF16 else 1.0).astype(first)
    b = np.full((3, 2), 70000.0 if second == BF16 else 1.0).astype(second)
    for call in (lambda: pg.gemm(a, b, device="cpu"), lambda: pg.gemm(a, b, out_dtype=np.float32, device="cpu")):
        with pytest.raises(DTypeError) as info:
            call()
        msg = str(info.value)
        assert "a.astype(np.float32)" in msg and "b.astype(np.float32)" in msg
    got = pg.gemm(a.astype(np.float32), b.astype(np.float32), device="cpu")  # the way it names first
    held = float(np.array(70000.0).astype(BF16))  # 70144: bfloat16's nearest, kept exactly by float32
    assert got.dtype == np.float32 and (got == 3 * held).all()
    if first == np.float16:  # the old hint's cast, b to float16: the bfloat16 operand overflows
        with np.errstate(over="ignore"):
            assert np.isinf(pg.gemm(a, b.astype(np.float16), device="cpu")).all()


@pytest.mark.parametrize("out_dtype, name", [(int, "int64"), (np.complex64, "complex64"), ("int8", "int8"),
                                             (bool, "bool"), (ml_dtypes.float8_e4m3fn, "float8_e4m3fn")])
def test_an_out_dtype_polygemm_never_computes_is_not_told_to_cast_a_and_b_to_it(out_dtype, name):
    # defect: out_dtype=int said "omit out_dtype, or cast a and b to int64 to compute in it", and polygemm refuses int64
    # operands; such a dtype is now said to be none polygemm computes, with the cast of the result
    a = _ones(2, 3)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, a.T, out_dtype=out_dtype, device="cpu")
    msg = str(info.value)
    assert f"got out_dtype {name}" in msg and "cast a and b" not in msg
    assert f"{name} is no dtype polygemm computes: float16, bfloat16, float32, float64" in msg
    assert f"result.astype({name!r})" in msg and isinstance(info.value, TypeError)
    assert pg.gemm(a, a.T, device="cpu").astype(name).dtype == np.dtype(name)  # the cast it names works
    with pytest.raises(DTypeError, match="or cast a and b to float16 to compute in it"):  # a dtype it computes: as before
        pg.gemm(a, a.T, out_dtype=np.float16, device="cpu")


# -- polygemm.testing as a plugin author calls it --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("k", [1, 7, 33])
def test_error_bound_alone_is_the_documented_bound(rng, dtype, k):
    # defect: error_bound(a, b) without ref= left out the bound's u_out * |C_ref| term (the result's rounding to its
    # dtype) that the README's and the module's formula give: a float16 product rounded correctly was up to 26 times
    # error_bound(a, b) off the reference, a bfloat16 one up to 1800 times, so a plugin author's own
    # |C - C_ref| <= error_bound(a, b) failed correct kernels; check_result (which passes ref=) did not see it
    a = rng.standard_normal((6, k)).astype(dtype)
    b = rng.standard_normal((k, 5)).astype(dtype)
    c = rng.standard_normal((6, 5)).astype(dtype)
    got = pg.gemm(a, b, c, alpha=1.5, beta=-0.5, device="cpu")
    ref64 = 1.5 * (a.astype(np.float64) @ b.astype(np.float64)) - 0.5 * c.astype(np.float64)
    tol = error_bound(a, b, c, 1.5, -0.5)
    assert np.all(np.abs(got.astype(np.float64) - ref64) <= tol)
    np.testing.assert_allclose(tol, reference_for(a, b, c, 1.5, -0.5).tol, rtol=1e-12)
    assert np.all(tol >= unit_roundoff(dtype) * np.abs(ref64))


def test_check_result_with_nan_and_inf_inputs_and_k_zero():
    """Right: NaN and Inf in a and b: gemm's result passes, a finite value where the reference is NaN fails naming
    both, an infinity of the wrong sign fails; K = 0 gives beta * c, and a NaN c with beta = 0 is not read."""
    a = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 1.0], [1.0, 1.0, 1.0]], np.float32)
    b = np.ones((3, 2), np.float32)
    b[0, 1] = 0.0  # inf * 0: NaN
    got = pg.gemm(a, b, device="cpu")
    assert check_result(got, a, b).ok
    bad = got.copy()
    bad[0, 0] = 0.0
    res = check_result(bad, a, b)
    assert not res.ok and res.violations == 1 and "first at (0, 0): got 0.0, reference nan" in res.message
    flipped = got.copy()
    flipped[1, 0] = -np.inf
    assert "first at (1, 0): got -inf, reference inf" in check_result(flipped, a, b).message
    a0, b0 = np.ones((2, 0), np.float16), np.ones((0, 3), np.float16)
    c = np.full((2, 3), 3.0, np.float16)
    assert check_result(pg.gemm(a0, b0, c, beta=2.0, device="cpu"), a0, b0, c, 1.0, 2.0).ok
    assert not check_result(np.zeros((2, 3), np.float16), a0, b0, c, 1.0, 2.0).ok
    nan_c = np.full((2, 3), np.nan, np.float16)
    assert check_result(np.zeros((2, 3), np.float16), a0, b0, nan_c).ok


@pytest.mark.parametrize("result_dtype, out_dtype, hinted", [
    (np.float16, np.float32, False),  # narrower than the out_dtype given: passing out_dtype= is no advice
    (np.float16, np.float64, False),
    (np.float32, None, True),  # a float32 result of float16 inputs: the one case out_dtype= fixes
])
def test_the_result_dtype_message_says_pass_out_dtype_only_where_it_applies(result_dtype, out_dtype, hinted):
    # defect: "result has dtype float16, expected float32 (pass out_dtype= for a result stored wider)" was said to a
    # plugin author who had passed out_dtype=np.float32 for a float16 result
    a = _ones(2, 2, dtype=np.float16)
    res = check_result(np.full((2, 2), 2, result_dtype), a, a, out_dtype=out_dtype)
    expected = np.dtype(out_dtype or np.float16).name
    assert not res.ok and res.message.startswith(f"result has dtype {np.dtype(result_dtype).name}, expected {expected}")
    assert ("pass out_dtype=" in res.message) is hinted
    assert ("(pass out_dtype=np.float32 for a result stored wider)" in res.message) is hinted


# -- errors: what the README lists ------------------------------------------------------------------------------------------


def test_every_error_the_docs_list_is_exported_with_the_builtin_base_they_name():
    """Right: the README's "errors in polygemm.errors" are importable from polygemm (the same classes) and are
    PolygemmErrors; each has the built-in base docs/plugins.md's table gives; ArgumentTypeError is also a TypeError."""
    readme = " ".join((ROOT / "docs" / "api.md").read_text().split())  # the API page (README links it)
    listed = re.search(r"errors in `polygemm\.errors`: (.*?), all `PolygemmError`s", readme).group(1)
    names = re.findall(r"`(\w+)`", listed)
    # UnknownDeviceError (session 36): an unknown device name, a BackendUnavailableError that is also a ValueError
    assert set(names) == {"ShapeError", "DTypeError", "ArgumentError", "BackendUnavailableError", "UnknownDeviceError",
                          "UnsupportedProblemError", "DeviceError"}
    table = dict(re.findall(r"^\| `(\w+Error)` \| `(\w+Error)` \|", (ROOT / "docs" / "plugins.md").read_text(), re.M))
    assert set(table) == set(names)
    for name in names + ["PolygemmError", "ArgumentTypeError"]:
        cls = getattr(pg, name)
        assert cls is getattr(errors, name) and issubclass(cls, PolygemmError) and name in pg.__all__
    for name, base in table.items():
        assert issubclass(getattr(pg, name), getattr(__builtins__, base) if hasattr(__builtins__, base)
                          else __builtins__[base])
    assert issubclass(ArgumentTypeError, (ArgumentError)) and issubclass(ArgumentTypeError, TypeError)


def test_get_backend_of_a_non_string_is_a_type_error_as_device_of_one_is():
    # defect: get_backend(3) raised a plain ArgumentError (a ValueError), where device=3, variant=None and alpha=None
    # raise ArgumentTypeError (also a TypeError, as Python raises for an argument of the wrong kind)
    a = _ones(2, 2)
    for call in (lambda: pg.get_backend(3), lambda: pg.get_backend(None), lambda: pg.gemm(a, a, device=3)):
        with pytest.raises(ArgumentTypeError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, ArgumentError)
        assert "'cpu', 'cuda', 'cuda:1'" in str(info.value)
    with pytest.raises(ArgumentError, match="'auto' is not a backend") as info:  # a string, of the wrong value
        pg.get_backend("auto")
    assert not isinstance(info.value, TypeError)


@pytest.mark.parametrize("call, cls, said", [
    (lambda a: pg.gemm(a, a.T, alpha=None, device="cpu"), ArgumentTypeError, "alpha must be a real number"),
    (lambda a: pg.gemm(a, a.T, beta=float("nan"), device="cpu"), ArgumentError, "beta must be finite"),
    (lambda a: pg.gemm(a, a.T, variant="", device="cpu"), ArgumentError, "variant must be a variant name or 'auto'"),
    (lambda a: pg.gemm(a, a.T, variant="nosuch", device="cpu"), UnsupportedProblemError,
     "variant='nosuch' is not a variant of backend 'cpu'; known: blas, reference, numpy (or 'auto')"),
    (lambda a: pg.gemm(a, a.T, out_dtype="f32", device="cpu"), DTypeError,
     "out_dtype='f32' is not a dtype polygemm writes; pass float32 (or float16, bfloat16, float64)"),
    (lambda a: pg.gemm(a, a.T, out=[[0.0] * 2] * 2, device="cpu"), ArgumentTypeError,
     "out must be a NumPy array (or a device array)"),
    (lambda a: pg.gemm(a.astype(np.float16), a.T.astype(np.float16), out=np.empty((2, 2), np.float16),
                       out_dtype=np.float32, device="cpu"), DTypeError, "out is float16 but out_dtype=float32"),
    (lambda a: pg.gemm(a, a, device="cpu"), ShapeError, "a.shape[-1] (K=3) must equal b.shape[-2] (2)"),
    (lambda a: pg.gemm(a.astype(ml_dtypes.float8_e4m3fn), a.T, device="cpu"), DTypeError,
     "a has dtype float8_e4m3fn; polygemm supports float16, float32 or float64, and bfloat16"),
])
def test_a_refusal_names_the_argument_and_what_is_accepted(call, cls, said):
    """Right: each refusal is the documented class (so also ValueError or TypeError) and its message names the
    argument and what it takes."""
    with pytest.raises(cls) as info:
        call(_ones(2, 3))
    assert said in str(info.value)
    assert isinstance(info.value, ValueError if cls in (ArgumentError, ShapeError, UnsupportedProblemError) else TypeError)
    assert not isinstance(info.value, (BackendUnavailableError, DeviceError))


def test_matmul_takes_a_vector_of_an_array_api_library_without_a_reshape_method():
    # defect: polygemm.matmul(v, M) with v a 1-D array of an array-API library (shape, ndim, DLPack and
    # __array_namespace__; the standard's reshape is xp.reshape, no method) raised "a is a vector (1-D) ApiArray that
    # polygemm cannot reshape (it offers only DLPack)": untrue (it offers ndim, shape and its namespace), and the same
    # vector without `ndim` (conftest.DLPackOnly) is read through DLPack and works. _dlpack_vector returns any object
    # with an int ndim as it is, and _unit_axis then finds no .reshape.
    import array_api_compat

    v = np.arange(3, dtype=np.float32)
    m = np.ones((3, 4), np.float32)
    res = pg.matmul(ApiArray(v), ApiArray(m), device="cpu")
    assert res.shape == (4,) and np.array_equal(np.from_dlpack(res), v @ m)
    assert array_api_compat.array_namespace(res) is API  # the operands' kind, as gemm gives it
    res = pg.matmul(ApiArray(m.T.copy()), ApiArray(v), device="cpu")
    assert res.shape == (4,) and np.array_equal(np.from_dlpack(res), m.T @ v)
    out = ApiArray(np.zeros(4, np.float32))
    assert pg.matmul(ApiArray(v), ApiArray(m), out=out, device="cpu") is out and np.array_equal(out._x, v @ m)
