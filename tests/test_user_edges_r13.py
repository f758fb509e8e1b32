"""A demanding user's edges, thirteenth round (CPU): the CLI with odd arguments (``plot`` of
records whose fields are of another type, ``compile --out`` naming a file or nothing),
``polygemm.testing`` used the way a plugin author would (selections that name nothing, a
backend with a real bug that the suite must catch), and the API's operands and results beside
``numpy.matmul`` (array-likes, subclasses, aliasing, scalars of every kind, threads)."""

from __future__ import annotations

import array
import copy
import fractions
import json
import threading

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts, store_result
from polygemm.apps.cli import main
from polygemm.errors import ArgumentError
from polygemm.testing import reference_for, run_conformance


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- polygemm plot: records whose fields are of another type --------------------------------------

def _bench_json(tmp_path):
    path = tmp_path / "b.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "16x16x16", "--repeats", "1", "--no-progress",
                 "--json", str(path)]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("field, value, says", [
    ("tflops", "fast", "a number"),
    ("m", "8", "a whole number"),
    ("m", 8.5, "a whole number"),
    ("m", True, "a whole number"),
    ("dtype", 5, "a string"),
    ("variant", ["a"], "a string"),
])
def test_plot_of_a_record_field_of_another_type_is_one_line_naming_it(tmp_path, capsys, field, value, says):
    # defect: a record field of another type than bench writes went through load_records as it was and failed
    # in plot's sums and sorts: a TypeError traceback (exit 1), or a label "Truex8x8" drawn silently
    data = _bench_json(tmp_path)
    capsys.readouterr()
    bad = copy.deepcopy(data)
    bad["records"][0][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    for extra in ([], ["-o", str(tmp_path / "p.png")], ["--heatmap", "-o", str(tmp_path / "h.png")]):
        assert main(["plot", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"record 1 has {field}={value!r}" in err and says in err and "Traceback" not in err, err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "h.png").exists()
    # the file as bench wrote it, and a figure left null (not measured), still read and plot
    data["records"][0]["vendor_tflops"] = None
    path.write_text(json.dumps(data))
    assert main(["plot", str(path), "-o", str(tmp_path / "ok.png")]) == 0
    assert (tmp_path / "ok.png").exists()


# -- polygemm compile --out -----------------------------------------------------------------------

def test_compile_out_naming_a_file_or_nothing_is_a_usage_error_before_any_build(tmp_path, capsys, monkeypatch):
    # defect: --out naming a file ended in a FileExistsError traceback, and an empty --out ("--out $DIR", DIR
    # unset) built the whole catalog into the kernel cache instead, saying so only in its first line
    from polygemm.backends.cuda import compiler as cc

    def no_build(*args, **kwargs):
        raise AssertionError("a build started")

    monkeypatch.setattr(cc, "build", no_build)
    monkeypatch.setattr(cc, "select", no_build)
    afile = tmp_path / "kernels.tar"
    afile.write_text("x")
    for out, says in ((str(afile), "that is a file; name a folder"), ("", "an empty path"), ("  ", "an empty path"),
                      (str(afile / "sub"), "cannot make that folder")):
        assert main(["compile", "--arch", "sm_80", "--only", "copy_scale", "--out", out]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and err.count("\n") == 1, err
    assert afile.read_text() == "x"


# -- polygemm.testing as a plugin author uses it --------------------------------------------------

@pytest.mark.parametrize("kw, says", [
    ({"dtypes": ["float8"]}, "dtypes names 'float8'"),
    ({"groups": ["shape"]}, "groups names 'shape'"),
    ({"variants": ["blass"]}, "did you mean 'blas'?"),
    ({"variants": ["auto"]}, "the suite runs each variant by name"),
    ({"dtypes": [np.float32]}, "dtypes must be names"),
])
def test_run_conformance_selection_naming_nothing_is_refused_not_an_empty_pass(kw, says):
    # defect: a misspelt dtype, variant or group selected no case and run_conformance returned [] (a CI
    # asserting "no fail" passed, having tested nothing)
    with pytest.raises(ArgumentError, match=says) as info:
        run_conformance("cpu", quick=True, **kw)
    assert isinstance(info.value, ValueError)


def test_run_conformance_takes_one_string_as_names_comma_separated():
    # defect: dtypes="float32" was read as the characters 'f', 'l', 'o', ...: no case, no row, silently
    rows = run_conformance("cpu", dtypes="float32", variants="blas", groups="errors, scaling", quick=True)
    assert rows and {(r.dtype, r.variant) for r in rows} == {("float32", "blas")}
    assert {r.group for r in rows} == {"errors", "scaling"} and all(r.status == "pass" for r in rows), rows
    # a variant of another backend selects nothing here (polygemm matrix passes one list to every backend)
    assert run_conformance("cpu", variants=["cublas"], quick=True) == []


class _Buggy(Backend):
    """A host plugin with one real bug (each subclass its own), run on the suite directly."""

    name = "buggy"
    priority = 300

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("v", ("float32", "float64"), "a plugin with a bug"),)

    def plan(self, problem, variant="auto"):
        return Plan(self.name, "v", "test", problem, layouts=host_layouts(problem))

    def product(self, p):
        with np.errstate(all="ignore"):  # the suite's NaN and Inf cases
            res = p.alpha * (p.a.array.astype(np.float64) @ p.b.array)
            if p.c is not None and p.beta != 0.0:
                res = res + p.beta * p.c.array.astype(np.float64)  # beta * a float32 array is float32 (NumPy 2)
        return res.astype(p.dtype)

    def run(self, plan):
        p = plan.problem
        return store_result(self.product(p), None if p.out is None else p.out.array)


class _AlphaDroppedWhenBetaIsZero(_Buggy):
    def product(self, p):  # a "beta == 0" fast path that forgot alpha
        if p.beta == 0.0:
            with np.errstate(all="ignore"):
                return (p.a.array @ p.b.array).astype(p.dtype)
        return super().product(p)


class _OutLeftUnwrittenBesideC(_Buggy):
    def run(self, plan):  # with c and a separate out: a new array comes back, out is never written
        p = plan.problem
        if p.c is not None and p.out is not None and p.out.array is not p.c.array:
            return self.product(p)
        return super().run(plan)


@pytest.mark.parametrize("bug, group", [(_AlphaDroppedWhenBetaIsZero, "scaling"), (_OutLeftUnwrittenBesideC, "layouts")])
def test_the_conformance_suite_fails_a_plugin_with_a_real_bug(bug, group):
    # defect: both plugins passed every case of the full suite: no case scaled without c (or with beta = 0),
    # and the layouts cases checked what the backend returned, not out, which is what polygemm.gemm gives
    # the caller. (polygemm.gemm(..., out=out) returned that unwritten out.)
    rows = run_conformance(bug(), dtypes=["float32"])
    fails = [r for r in rows if r.status == "fail"]
    assert fails and {r.group for r in fails} == {group}, [(r.group, r.case, r.detail) for r in fails]
    assert all(r.status == "pass" for r in run_conformance(_Buggy(), dtypes=["float32"]) if r.group != "device")


# -- arguments of the wrong kind are TypeErrors, as NumPy raises them -------------------------------

@pytest.mark.parametrize("kw", [
    {"alpha": "2"}, {"alpha": 1 + 0j}, {"beta": np.complex64(1)}, {"alpha": True}, {"alpha": None},
    {"out": [[0.0] * 4] * 2}, {"out": memoryview(np.empty((2, 4), np.float32))}, {"variant": None}, {"variant": 3},
], ids=["str", "complex", "np-complex", "bool", "None", "list-out", "memoryview-out", "variant-None", "variant-int"])
def test_an_argument_of_the_wrong_kind_is_a_type_error_naming_it(kw):
    # defect: these were ArgumentErrors, ValueErrors only; numpy.matmul(a, b, out=[...]) and NumPy's arithmetic
    # with a string or a complex raise TypeError, so a caller's "except TypeError" (written for NumPy) missed them
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    name = next(iter(kw))
    with pytest.raises(TypeError, match=rf"^{name} must be") as info:
        pg.gemm(a, b, device="cpu", **kw)
    assert isinstance(info.value, pg.ArgumentTypeError) and isinstance(info.value, ArgumentError)
    assert isinstance(info.value, ValueError)  # what it was before, still
    if name == "out":
        with pytest.raises(TypeError):
            np.matmul(a, b, out=kw["out"])  # NumPy's own kind of error for it


def test_values_that_are_wrong_stay_value_errors_only():
    a = np.ones((2, 2), np.float32)
    for kw in ({"alpha": float("nan")}, {"beta": float("inf")}, {"variant": ""}, {"alpha": 10 ** 400}):
        with pytest.raises(ValueError) as info:
            pg.gemm(a, a, a, device="cpu", **kw)
        assert not isinstance(info.value, TypeError), kw
    for x, y in ((None, a), (a, None)):
        with pytest.raises(TypeError, match="must be a vector, a matrix"):
            pg.matmul(x, y, device="cpu")
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        pg.matmul(np.ones(2, np.float32), np.ones(2, np.float32), out=np.float32(0), device="cpu")


# -- edges checked and found right ------------------------------------------------------------------

def test_array_likes_compute_as_numpy_reads_them(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    ref = np.matmul(a, b)
    for x in (memoryview(a), memoryview(np.asfortranarray(a)), [list(map(np.float32, r)) for r in a], list(a)):
        got = pg.gemm(x, b, device="cpu")
        assert type(got) is np.ndarray and got.dtype == np.float32 and got.shape == (3, 2)
        assert_within(got, a, b)
    # array.array and a tuple as vectors, as numpy.matmul takes them
    v = array.array("f", b[:, 0])
    got = pg.matmul(a, v, device="cpu")
    assert got.shape == (3,) and got.dtype == np.float32 and np.allclose(got, ref[:, 0], rtol=1e-5)
    got = pg.matmul(tuple(float(t) for t in a[0].astype(np.float64)), b.astype(np.float64), device="cpu")
    assert got.shape == (2,) and got.dtype == np.float64


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_subclasses_come_back_as_numpy_matmul_gives_them(tmp_path):
    class Mine(np.ndarray):
        pass

    e = np.eye(3, dtype=np.float32)
    mm = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(3, 3))
    mm[:] = e
    for x, y in ((np.matrix(e), e), (e, np.matrix(e)), (e.view(Mine), e), (mm, mm)):
        want = np.matmul(x, y)
        for got in (pg.gemm(x, y, device="cpu"), pg.matmul(x, y, device="cpu")):
            assert type(got) is type(want) and np.array_equal(np.asarray(got), np.asarray(want))


def test_fortran_and_negative_stride_views_and_out_aliasing(rng):
    a = rng.standard_normal((5, 6)).astype(np.float64)
    b = rng.standard_normal((6, 4)).astype(np.float64)
    for x, y in ((np.asfortranarray(a), b), (a[::-1], b[:, ::-1]), (a[::-1, ::-1], b[::-1]), (a[:, ::2], b[::2])):
        x0, y0 = x.copy(), y.copy()
        assert_within(pg.gemm(x, y, device="cpu"), x0, y0)
        assert np.array_equal(x, x0) and np.array_equal(y, y0)
    # out aliasing a or b (transposed too) is refused, naming it, and nothing is written
    s = rng.standard_normal((4, 4)).astype(np.float32)
    s0 = s.copy()
    for kw in ({"out": s}, {"out": s.T}):
        with pytest.raises(ArgumentError, match="out overlaps"):
            pg.gemm(s, s0.copy(), device="cpu", **kw)
        with pytest.raises(ArgumentError, match="out overlaps b"):
            pg.gemm(s0.copy(), s, device="cpu", **kw)
    assert np.array_equal(s, s0)
    # interleaved rows of one buffer: a and out share no element, so it computes
    buf = rng.standard_normal((8, 4)).astype(np.float32)
    x, out = buf[0::2], buf[1::2]
    x0 = x.copy()
    assert pg.gemm(x, s0, out=out, device="cpu") is out
    assert_within(out, x0, s0) and np.array_equal(x, x0)


@pytest.mark.parametrize("alpha", [np.float16(0.5), np.int8(3), np.uint64(2), fractions.Fraction(1, 3), np.array(-2.0),
                                   ml_dtypes.bfloat16(1.5), 7])
def test_alpha_of_every_real_kind_scales_as_its_value(rng, alpha):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((5, 2)).astype(np.float32)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    got = pg.gemm(a, b, c, alpha=alpha, beta=alpha, device="cpu")
    assert_within(got, a, b, c, float(alpha), float(alpha))
    assert pg.last_plan().problem.alpha == float(alpha)


def test_float16_overflow_over_a_long_k_is_inf_as_in_numpy_and_fits_in_float32():
    a, b = np.ones((2, 70000), np.float16), np.ones((70000, 2), np.float16)
    with np.errstate(over="ignore"):
        want = np.matmul(a, b)
    for variant in ("auto", "reference", "numpy"):
        got = pg.gemm(a, b, device="cpu", variant=variant)
        assert got.dtype == np.float16 and np.array_equal(got, want) and np.isposinf(got).all()
    got = pg.gemm(a, b, device="cpu", out_dtype=np.float32)
    assert got.dtype == np.float32 and (got == 70000).all()
    # partial sums past float16's range that cancel: exact, as float32 accumulation gives
    x, y = np.full((1, 4), 60000, np.float16), np.array([[1], [1], [-1], [-1]], np.float16)
    assert pg.gemm(x, y, device="cpu")[0, 0] == 0


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


def test_dask_c_given_as_a_list_of_another_dtype_is_told_a_cast_a_list_has():
    # defect: polygemm.dask.gemm took c as a list (as polygemm.gemm does) but told a float64 one to use
    # c.astype(numpy.float32), which a list lacks; polygemm.gemm says np.asarray(c, dtype=...)
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A = da.from_array(np.ones((6, 5), np.float32), chunks=(3, 2))
    B = da.from_array(np.ones((5, 4), np.float32), chunks=(2, 3))
    with pytest.raises(pg.DTypeError, match=r"Cast it, e\.g\. numpy\.asarray\(c, dtype=numpy\.float32\)"):
        pgd.gemm(A, B, [[1.0] * 4] * 6, beta=1.0, device="cpu")
    with pytest.raises(pg.DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float32\)"):
        pgd.gemm(A, B, np.ones((6, 4)), beta=1.0, device="cpu")
    c = [[np.float32(1)] * 4] * 6  # a list NumPy reads as float32 is taken
    assert np.array_equal(pgd.gemm(A, B, c, beta=2.0, device="cpu").compute(), np.full((6, 4), 7, np.float32))
