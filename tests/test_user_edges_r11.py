"""A demanding user's edges, eleventh round (CPU): ``polygemm.testing`` as a plugin author uses it
(every dtype it claims, alpha/beta/c, K = 0 and 1, inf and NaN, arguments passed by mistake, the
fields of what it returns, the pytest suite run with ``--pyargs`` against cpu, the example plugin
and a backend that does not exist), ``explain()`` and ``last_plan()`` beside what ``gemm`` ran
(after errors, per thread, ``out=``, ``c``/beta, matmul), and the plan cache: its counts, and a
cached plan never reused for a call that differs in what the plan depends on. The tests marked
"defect" failed before the fix they name."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from conftest import run_concurrently
from polygemm.errors import ArgumentError, DTypeError, ShapeError
from polygemm.testing import Reference, assert_close, check_result, error_bound, reference_for, unit_roundoff

ml_dtypes = pytest.importorskip("ml_dtypes")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "polygemm-numpy-blas"
DTYPES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]
DT_IDS = [d.name for d in DTYPES]


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(autouse=True)
def _no_device_env(monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)


# -- polygemm.testing: every dtype it claims ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
@pytest.mark.parametrize("k", [0, 1, 17])
def test_check_result_accepts_gemm_and_rejects_a_wrong_c_term(rng, dtype, k):
    a, b, c = _rand(rng, dtype, 5, k), _rand(rng, dtype, k, 3), _rand(rng, dtype, 5, 3)
    got = pg.gemm(a, b, c, alpha=1.5, beta=-2.0)
    res = check_result(got, a, b, c, 1.5, -2.0)
    assert res.ok and res.violations == 0 and 0.0 <= res.worst_ratio <= 1.0 and bool(res) is True, res.message
    assert res.message.startswith(f"all {got.size} elements within the bound")
    # the same result read as if beta were 0: the c term is missing, which the bound must see
    wrong = check_result(got, a, b, c, 1.5, 0.0)
    assert not wrong.ok and wrong.violations > 0 and bool(wrong) is False and "outside the bound" in wrong.message
    with pytest.raises(AssertionError, match="outside the bound"):
        assert_close(got, a, b, c, 1.5, 0.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DT_IDS)
def test_error_bound_is_the_documented_formula(rng, dtype):
    a, b, c = _rand(rng, dtype, 4, 6), _rand(rng, dtype, 6, 2), _rand(rng, dtype, 4, 2)
    tol = error_bound(a, b, c, 2.0, 3.0)
    a64, b64, c64 = (np.abs(x.astype(np.float64)) for x in (a, b, c))
    u_acc = unit_roundoff(np.float32 if dtype.itemsize == 2 else dtype)
    ref64 = 2.0 * (a.astype(np.float64) @ b.astype(np.float64)) + 3.0 * c.astype(np.float64)
    # the whole formula, u_out * |C_ref| too (round 18: error_bound without ref= had left that term out)
    want = (2.0 * 6 * u_acc * 2.0 * (a64 @ b64) + 2.0 * u_acc * 3.0 * c64 + unit_roundoff(dtype) * np.abs(ref64)
            + float(pg.problem.finfo(dtype).tiny))
    assert tol.shape == (4, 2) and tol.dtype == np.float64
    np.testing.assert_allclose(tol, want, rtol=1e-12)
    ref = reference_for(a, b, c, 2.0, 3.0)
    assert isinstance(ref, Reference) and ref.out_dtype == dtype and ref.ref64.dtype == np.float64
    np.testing.assert_allclose(ref.ref64, ref64)
    np.testing.assert_allclose(ref.tol, tol, rtol=1e-12)  # one bound, with or without the reference at hand


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)], ids=["float16", "bfloat16"])
def test_check_result_of_a_float32_result_for_half_inputs(rng, dtype):
    a, b = _rand(rng, dtype, 6, 40), _rand(rng, dtype, 40, 5)
    wide = pg.gemm(a, b, out_dtype=np.float32)
    assert check_result(wide, a, b, out_dtype=np.float32).ok
    assert check_result(pg.gemm(a, b), a, b).ok


def test_check_result_inf_and_nan_in_inputs():
    a = np.array([[np.inf, 1.0], [np.nan, 1.0], [1.0, 2.0]], np.float32)
    b = np.array([[1.0], [0.0]], np.float32)
    got = pg.gemm(a, b)
    assert np.isposinf(got[0, 0]) and np.isnan(got[1, 0]) and got[2, 0] == 1.0
    assert check_result(got, a, b).ok
    for bad in (np.array([[np.inf], [0.0], [1.0]], np.float32),  # NaN expected
                np.array([[-np.inf], [np.nan], [1.0]], np.float32),  # +inf expected
                np.array([[1e30], [np.nan], [1.0]], np.float32)):  # an infinite reference is matched exactly
        res = check_result(bad, a, b)
        assert not res.ok and res.violations == 1, res.message
    c = np.array([[np.nan], [np.nan], [np.nan]], np.float32)  # c unread with beta = 0 (BLAS)
    assert check_result(pg.gemm(a, b, c, beta=0.0), a, b, c).ok


@pytest.mark.parametrize("args, kw, err, match", [
    (lambda a, b, c: (a, b.T), {}, ShapeError, r"a \(5, 4\) and b \(3, 4\) do not multiply"),
    (lambda a, b, c: (a[0], b), {}, ShapeError, r"^a must be a matrix.*1-D"),
    (lambda a, b, c: (a, b[:, 0]), {}, ShapeError, r"^b must be a matrix.*1-D"),
    (lambda a, b, c: (a, b, c.T, 1.0, 1.0), {}, ShapeError, r"^c must have the result's shape \(5, 3\).*got \(3, 5\)"),
    (lambda a, b, c: (a, b, c[:2], 1.0, 0.0), {}, ShapeError, r"^c must have the result's shape"),
    (lambda a, b, c: (np.stack([a, a]), np.stack([b, b, b])), {}, ShapeError, r"batch dimensions of a \(2, 5, 4\) and b \(3, 4, 3\)"),
    (lambda a, b, c: (a, b.astype(np.float64)), {}, DTypeError, r"a \(float32\) and b \(float64\) must have one dtype"),
    (lambda a, b, c: (a.astype(np.int32), b.astype(np.int32)), {}, DTypeError, r"^a has dtype int32;.*float16, bfloat16"),
    (lambda a, b, c: (a.astype(np.complex64), b.astype(np.complex64)), {}, DTypeError, r"^a has dtype complex64"),
    (lambda a, b, c: (a, b, c.astype(np.int8), 1.0, 1.0), {}, DTypeError, r"^c has dtype int8"),
    (lambda a, b, c: (a, b, None, "2"), {}, ArgumentError, r"^alpha must be a real number"),
    (lambda a, b, c: (a, b, c, 1.0, float("nan")), {}, ArgumentError, r"^beta must be finite"),
    (lambda a, b, c: (a, b), {"out_dtype": "int8"}, DTypeError, r"^out_dtype='int8' is int8; pass one of float16"),
    (lambda a, b, c: (a, b), {"out_dtype": "floaty"}, DTypeError, r"^out_dtype='floaty' is not a dtype"),
    (lambda a, b, c: (a, b), {"acc_dtype": np.int64}, DTypeError, r"^acc_dtype=.* is int64"),
], ids=["K-mismatch", "1-D a", "1-D b", "c transposed", "c short, beta 0", "batches", "a/b dtypes", "int", "complex",
        "int c", "alpha str", "beta nan", "out_dtype int", "out_dtype typo", "acc_dtype int"])
def test_testing_arguments_passed_by_mistake_are_named(rng, args, kw, err, match):
    # defect 1: these had met NumPy's own errors (a gufunc signature, "operands could not be broadcast", "not
    # inexact", UFuncTypeError), an IndexError (1-D a), or passed (a float64 b, complex inputs with the imaginary
    # parts dropped, a c of the wrong shape with beta = 0, alpha = NaN as all-NaN "violations")
    a, b, c = _rand(rng, np.float32, 5, 4), _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 5, 3)
    result = a @ b
    for fn in (lambda *x, **k: check_result(result, *x, **k), error_bound, reference_for):
        with pytest.raises(err, match=match):
            fn(*args(a, b, c), **kw)
    assert issubclass(err, (ValueError, TypeError)) and issubclass(err, pg.PolygemmError)


def test_a_result_of_the_wrong_shape_or_dtype_fails_saying_so(rng):
    # defect 1: a float16 result of float32 inputs had failed as "15 of 15 elements outside the bound" (what was
    # wrong unsaid) and a float64 one had passed (gemm promises the inputs' dtype)
    a, b = _rand(rng, np.float32, 5, 4), _rand(rng, np.float32, 4, 3)
    good = pg.gemm(a, b)
    for bad, said in ((good.astype(np.float16), "dtype float16, expected float32"),
                      (good.astype(np.float64), "dtype float64, expected float32"),
                      (good.T, "shape (3, 5), expected (5, 3)")):
        res = check_result(bad, a, b)
        assert not res.ok and res.violations == -1 and res.worst_ratio == float("inf") and said in res.message
    assert check_result(good.astype(">f4"), a, b).ok  # byte order is no dtype difference
    assert check_result(good, a.astype(">f4"), b.astype(">f4")).ok  # nor of the inputs
    assert check_result(good.tolist(), a, b).ok  # a list has no dtype of its own: its values are compared
    h = pg.gemm(a.astype(np.float16), b.astype(np.float16), out_dtype=np.float32)
    assert "expected float16" in check_result(h, a.astype(np.float16), b.astype(np.float16)).message
    assert check_result(h, a.astype(np.float16), b.astype(np.float16), out_dtype="float32").ok


def test_check_result_of_a_batch(rng):
    a, b = _rand(rng, np.float32, 3, 5, 7), _rand(rng, np.float32, 7, 2)
    c = _rand(rng, np.float32, 3, 5, 2)
    got = pg.gemm(a, b, c, beta=1.0)
    assert check_result(got, a, b, c, 1.0, 1.0).ok
    assert not check_result(got, a, b, c, 1.0, 0.0).ok
    assert error_bound(a, b).shape == (3, 5, 2)


# -- the conformance suite under pytest --pyargs ------------------------------------------------------------------------


def _suite(tmp_path: Path, extra_path: list[str] | tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("POLYGEMM_")}
    path = os.pathsep.join([*extra_path, str(ROOT), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
    full = {**base, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "--pyargs", "polygemm.testing"],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=300)


def test_pyargs_suite_runs_the_cpu_backend(tmp_path):
    r = _suite(tmp_path, POLYGEMM_TEST_BACKEND="cpu", POLYGEMM_TEST_QUICK="1")
    assert r.returncode == 0 and " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    default = _suite(tmp_path, POLYGEMM_TEST_QUICK="1", POLYGEMM_TEST_DTYPES="float32")  # unset: cpu
    assert default.returncode == 0 and " passed" in default.stdout, default.stdout[-2000:]


@pytest.mark.parametrize("name", ["nosuch", "numpy-blas", "auto"])
def test_pyargs_suite_fails_for_a_backend_that_does_not_exist(tmp_path, name):
    r = _suite(tmp_path, POLYGEMM_TEST_BACKEND=name)
    assert r.returncode == 1, r.stdout[-2000:]
    assert f"{name}-not-loadable" in r.stdout and f"POLYGEMM_TEST_BACKEND={name!r}" in r.stdout, r.stdout[-2000:]
    assert "1 failed" in r.stdout and "passed" not in r.stdout and "skipped" not in r.stdout


def test_pyargs_suite_runs_the_example_plugin(tmp_path):
    # the example registered as pip would register it (a .dist-info with its entry point), its source on the path
    site = tmp_path / "site"
    info = site / "polygemm_numpy_blas-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polygemm-numpy-blas\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[polygemm.backends]\nnumpy_blas = polygemm_numpy_blas:NumpyBlasBackend\n")
    r = _suite(tmp_path, [str(site), str(EXAMPLE)], POLYGEMM_TEST_BACKEND="numpy_blas", POLYGEMM_TEST_QUICK="1")
    assert r.returncode == 0 and " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    assert int(r.stdout.split(" passed")[0].split()[-1]) >= 20, r.stdout[-2000:]  # its cases ran, not one placeholder
    # without the plugin on the path the same name is not loadable: a failure, not a pass
    gone = _suite(tmp_path, POLYGEMM_TEST_BACKEND="numpy_blas", POLYGEMM_TEST_QUICK="1")
    assert gone.returncode == 1 and "numpy_blas-not-loadable" in gone.stdout, gone.stdout[-2000:]


# -- explain() and last_plan() beside what gemm ran ---------------------------------------------------------------------


def _same(e: pg.Plan, got: pg.Plan) -> None:
    assert (e.backend, e.variant, e.device, e.copies, e.layouts, e.padding) == \
        (got.backend, got.variant, got.device, got.copies, got.layouts, got.padding)
    assert (e.problem.alpha, e.problem.beta, e.problem.in_place, e.problem.out_dtype) == \
        (got.problem.alpha, got.problem.beta, got.problem.in_place, got.problem.out_dtype)


@pytest.mark.parametrize("case", ["plain", "strided", "fortran", "c-beta", "out", "in-place", "variant", "out_dtype"])
def test_explain_matches_what_gemm_ran(rng, case):
    pg.clear_plan_cache()
    a, b, c = _rand(rng, np.float32, 6, 4), _rand(rng, np.float32, 4, 5), _rand(rng, np.float32, 6, 5)
    kw: dict = {}
    if case == "strided":
        a = _rand(rng, np.float32, 12, 8)[::2, ::2]
    elif case == "fortran":
        a = np.asfortranarray(a)
    elif case == "c-beta":
        kw = dict(c=c, alpha=0.5, beta=-1.5)
    elif case == "out":
        kw = dict(out=np.full((6, 5), np.nan, np.float32))
    elif case == "in-place":
        cc = c.copy()
        kw = dict(c=cc, beta=2.0, out=cc)
    elif case == "variant":
        kw = dict(variant="reference")
    elif case == "out_dtype":
        a, b = a.astype(np.float16), b.astype(np.float16)
        kw = dict(out_dtype=np.float32)
    e = pg.explain(a, b, **kw)
    assert e.cached is False
    got = pg.gemm(a, b, **kw)
    lp = pg.last_plan()
    assert lp.cached is True  # explain cached it
    _same(e, lp)
    if case == "strided":
        assert any("a copied once" in x for x in lp.copies)
    if case == "in-place":
        assert lp.problem.in_place and "in place: out is c" in str(lp)
        assert check_result(got, a, b, c, 1.0, 2.0).ok
    elif case == "c-beta":
        assert check_result(got, a, b, c, 0.5, -1.5).ok
    else:
        assert check_result(got, a, b, out_dtype=kw.get("out_dtype")).ok
    if "out" in kw:
        assert got is kw["out"]


def test_last_plan_and_explain_say_this_calls_alpha_and_beta(rng):
    # defect 2: a call that reused a cached plan was described with the alpha and beta of the call that made the
    # plan: gemm(alpha=3) after gemm(alpha=2) showed "alpha=2" in last_plan() and explain()
    pg.clear_plan_cache()
    a, b, c = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5), _rand(rng, np.float32, 4, 5)
    pg.gemm(a, b, c, alpha=2.0, beta=0.5)
    got = pg.gemm(a, b, c, alpha=3.0, beta=-0.25)
    lp = pg.last_plan()
    assert lp.cached and (lp.problem.alpha, lp.problem.beta) == (3.0, -0.25)
    assert "alpha=3, beta=-0.25" in str(lp).splitlines()[0]
    assert check_result(got, a, b, c, 3.0, -0.25).ok
    e = pg.explain(a, b, c, alpha=0.125, beta=4.0)
    assert e.cached and (e.problem.alpha, e.problem.beta) == (0.125, 4.0)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (3.0, -0.25)  # explain ran nothing
    pg.gemm(a, b, c, alpha=2.0, beta=0.5)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (2.0, 0.5)  # the cache's own plan kept its own


def test_last_plan_is_not_a_failed_call(rng):
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.gemm(a, b)
    before = pg.last_plan()
    out = np.full((4, 5), np.nan, np.float32)
    for bad in (lambda: pg.gemm(a, a), lambda: pg.gemm(a, b, out=a), lambda: pg.gemm(a, b, beta=1.0),
                lambda: pg.gemm(a, b, device="nosuch"), lambda: pg.gemm(a, b, variant="nosuch"),
                lambda: pg.gemm(a.astype(np.int32), b), lambda: pg.explain(a.astype(np.float64), b.astype(np.float64))):
        try:
            bad()
        except (ValueError, TypeError, RuntimeError):
            pass
        lp = pg.last_plan()
        assert (lp.problem.m, lp.problem.n, lp.problem.k, lp.problem.dtype, lp.problem.out) == (4, 5, 3, np.float32, None)
        assert (lp.backend, lp.variant) == (before.backend, before.variant)
    assert np.isnan(out).all()


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


def test_last_plan_of_matmul_describes_the_product_it_ran(rng):
    a, x = _rand(rng, np.float32, 5, 3), _rand(rng, np.float32, 3)
    got = pg.matmul(a, x)
    lp = pg.last_plan()
    assert got.shape == (5,) and (lp.problem.m, lp.problem.n, lp.problem.k) == (5, 1, 3)  # the column x became
    assert check_result(got[:, None], a, x[:, None]).ok
    out = np.full(5, np.nan, np.float32)
    assert pg.matmul(a, x, out=out) is out and pg.last_plan().problem.out is not None
    assert check_result(out[:, None], a, x[:, None]).ok


def test_plans_hold_no_data_and_are_the_callers_own(rng):
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.gemm(a, b)
    lp = pg.last_plan()
    assert {f.name for f in fields(lp)} >= {"backend", "variant", "reason", "problem", "device", "layouts", "copies",
                                            "padding", "launch", "candidates", "notes", "cached"}
    assert all(op.array is None for op in lp.problem.operands())
    lp.copies.append("mine"), lp.layouts.clear()
    again = pg.last_plan()
    assert "mine" not in again.copies and again.layouts
    with pytest.raises(ArgumentError, match="holds no operands"):
        pg.get_backend("cpu").execute(lp, pg.problem.Call.from_problem(lp.problem))


# -- the plan cache --------------------------------------------------------------------------------------------------


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


def test_a_view_of_c_as_out_is_in_place_and_its_plan_is_not_reused_for_a_separate_out(rng):
    # defect 3: the cache key called a call in place only when out *is* c; out=c.view() (in place, as the plan
    # says) stored its plan under "not in place", and a later call with an out separate from c reused it:
    # last_plan() said "in place: out is c" of a call whose out was not c (and the reverse order likewise)
    a, b, c = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5), _rand(rng, np.float32, 4, 5)
    for order in ("view first", "separate first"):
        pg.clear_plan_cache()
        runs = [("view", None), ("separate", None)] if order == "view first" else [("separate", None), ("view", None)]
        for kind, _ in runs:
            cc = c.copy()
            out = cc.view() if kind == "view" else np.full_like(c, np.nan)
            got = pg.gemm(a, b, cc, beta=1.0, out=out)
            lp = pg.last_plan()
            assert got is out and check_result(out, a, b, c, 1.0, 1.0).ok
            assert lp.problem.in_place is (kind == "view"), (order, kind)
            assert ("in place: out is c" in str(lp)) is (kind == "view")
            if kind == "separate":
                assert np.array_equal(cc, c)  # c untouched
    # repeated view calls still compute in place correctly (and refuse a partial overlap)
    cc = c.copy()
    pg.gemm(a, b, cc, beta=1.0, out=cc[...])
    assert check_result(cc, a, b, c, 1.0, 1.0).ok
    big = np.zeros((5, 5), np.float32)
    with pytest.raises(ArgumentError, match="partly overlaps c"):
        pg.gemm(a, b, big[:4], beta=1.0, out=big[1:])
