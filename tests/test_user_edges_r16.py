"""A new user's first contact, sixteenth round (CPU): a laptop without a GPU, the README and docs/
followed as written. Environment variables the docs name set to another spelling of "on", the
benchmark's ``--result new`` refused beside NumPy inputs, ``polygemm matrix --dtypes`` written with
commas as its other options take them, ``polygemm.testing``'s failure message, errors shipped
between processes (pickled, as multiprocessing and dask.distributed ship them), ``alpha=0`` beside
NaN operands and a 0-D ``out`` for vector @ vector beside numpy.matmul, ``explain`` with an ``out``,
the plan cache cleared while other threads call, a bias vector as ``c``, and the error of a device
array no kernel addresses, pickled. The tests marked "defect" failed before the
fix they name; the others check edges that were right."""

from __future__ import annotations

import copy
import pickle
import threading
import types

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import (ArgumentError, ArgumentTypeError, BackendUnavailableError, DTypeError, PolygemmError,
                             ShapeError)
from polygemm.testing import check_result, reference_for

from conftest import run_concurrently

BF16 = np.dtype(ml_dtypes.bfloat16)


# -- POLYGEMM_MUSA_EMULATION: the on/off spellings POLYGEMM_TEST_QUICK takes --------------------------------------------


def _fake_musa_session(monkeypatch, flavor: str = "host"):
    """The musa backend's probe over a loaded library of ``flavor`` that sees one device (no library needed)."""
    import polygemm.backends.musa.backend as mb

    class Ffi:
        @staticmethod
        def new(_decl):
            return [0]

    class Lib:
        @staticmethod
        def pgm_device_count(count):
            count[0] = 1
            return 0

    nl = types.SimpleNamespace(flavor=flavor, path="/tmp/libpolygemm_musa.so", check=lambda status, what: None)
    monkeypatch.setattr(mb.sessions, "session", lambda: types.SimpleNamespace(nl=nl, ffi=Ffi(), lib=Lib()))
    return mb.MusaBackend()


@pytest.mark.parametrize("value", ["true", "TRUE", "yes", " on ", "1"])
def test_musa_emulation_takes_each_spelling_of_on(monkeypatch, value):
    # defect: only the exact value 1 enabled the host and cuda flavors: POLYGEMM_MUSA_EMULATION=true left musa
    # unavailable with "set POLYGEMM_MUSA_EMULATION=1 to use it", as if the variable were unset (the pytest suite's
    # POLYGEMM_TEST_QUICK takes 1, true, yes, on through registry.env_flag)
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", value)
    av = _fake_musa_session(monkeypatch).probe()
    assert av.ok, av.reason


@pytest.mark.parametrize("value", ["0", "off", "", "no"])
def test_musa_emulation_off_still_says_how_to_turn_it_on(monkeypatch, value):
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", value)
    av = _fake_musa_session(monkeypatch).probe()
    assert not av.ok and "set POLYGEMM_MUSA_EMULATION=1 to use it" in av.reason and "'host' flavor" in av.reason


def test_musa_emulation_typo_is_named_not_taken_for_off(monkeypatch):
    # defect: "ture" read as off, and the reason did not say that the value given was the trouble
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "ture")
    av = _fake_musa_session(monkeypatch).probe()
    assert not av.ok and "\n" not in av.reason and len(av.reason) <= 120
    assert av.reason.startswith("POLYGEMM_MUSA_EMULATION='ture' is not on or off; set it to 1") and "'host' flavor" in av.reason
    assert "1, true, yes, on" in av.detail and "/tmp/libpolygemm_musa.so" in av.detail  # info -v's lines
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "ture")
    assert _fake_musa_session(monkeypatch, flavor="musa").probe().ok  # the product flavor never reads the variable


# -- polygemm bench --result new beside NumPy inputs ----------------------------------------------------------------------


@pytest.mark.parametrize("inputs", [[], ["--inputs", "numpy"]])
def test_bench_result_new_with_numpy_inputs_is_told_to_omit_it(capsys, tmp_path, inputs):
    # defect: "--result new ...; NumPy inputs always make a new result: use --inputs numpy", said to a user who had
    # passed --inputs numpy, and untrue: NumPy calls are timed writing into out= (numpy.matmul(a, b, out=out))
    argv = ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress", *inputs]
    assert main([*argv, "--result", "new", "--json", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "use --inputs numpy" not in err and "backend 'cpu' takes NumPy arrays" in err and "omit --result" in err
    assert not (tmp_path / "r.json").exists()
    assert main(argv) == 0  # the way it names
    assert "numpy.matmul(a, b, out=out)" in capsys.readouterr().out


# -- polygemm matrix --dtypes, comma separated ----------------------------------------------------------------------------


def test_matrix_dtypes_take_commas_as_its_other_options_do(capsys, tmp_path):
    # defect: "--dtypes float32,float64" was argparse's "invalid choice", where --backends and --variants (and
    # POLYGEMM_TEST_DTYPES, and run_conformance's dtypes="float32,float64", whose docstring says polygemm matrix takes
    # them so) take names comma separated
    import json

    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--variants", "blas", "--quick", "--no-progress", "--dtypes",
                 "float32,float64", "bfloat16", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert {r["dtype"] for r in rows} == {"float32", "float64", "bfloat16"}
    assert all(r["status"] != "fail" for r in rows)
    capsys.readouterr()
    for given, said in ((["f32"], "--dtypes 'f32' is not a dtype polygemm computes; name float16, bfloat16, float32, float64"),
                        ([","], "--dtypes ',' names no dtype")):
        assert main(["matrix", "--backends", "cpu", "--quick", "--no-progress", "--dtypes", *given]) == 2
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["matrix", "--help"])
    assert "comma or space separated" in " ".join(capsys.readouterr().out.split("--dtypes")[-1].split())


# -- polygemm.testing: what a failure says ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, BF16])
def test_a_failed_check_gives_the_values_as_numbers(dtype):
    # defect: "first at (0, 0): got np.float64(nan), reference np.float64(2.0)": NumPy 2's repr of the float64 copies,
    # naming a float64 for a float16 or float32 result
    a = np.ones((2, 2), dtype)
    res = check_result(np.full((2, 2), np.nan, dtype), a, a)
    assert not res.ok and "first at (0, 0): got nan, reference 2.0, bound " in res.message
    assert "np.float64" not in res.message
    bad = np.full((2, 2), 3.0, dtype)
    assert "got 3.0, reference 2.0" in reference_for(a, a).compare(bad).message


# -- errors shipped between processes ------------------------------------------------------------------------------------


def test_errors_of_a_refused_call_survive_pickling_with_their_classes_and_details():
    """Right: multiprocessing, concurrent.futures' process pools and dask.distributed pickle an exception raised in a
    worker; polygemm's arrive as the same classes (still ValueError / TypeError / RuntimeError), with their messages
    and, for BackendUnavailableError, the whole text in ``details``."""
    a = np.ones((2, 3), np.float32)
    calls = [
        (lambda: pg.gemm(a, a, device="cpu"), ShapeError, ValueError),
        (lambda: pg.gemm(a, a.T.astype(np.float64), device="cpu"), DTypeError, TypeError),
        (lambda: pg.gemm(a, a.T, alpha="2", device="cpu"), ArgumentTypeError, TypeError),
        (lambda: pg.gemm(a, a.T, beta=1.0, device="cpu"), ArgumentError, ValueError),
        # an unknown name arrives as BackendUnavailableError's subclass UnknownDeviceError (also a ValueError)
        (lambda: pg.gemm(a, a.T, device="nosuch"), pg.UnknownDeviceError, RuntimeError),
        (lambda: pg.gemm(a, a.T, device="nosuch"), pg.UnknownDeviceError, ValueError),
    ]
    for call, cls, builtin in calls:
        with pytest.raises(cls) as info:
            call()
        back = pickle.loads(pickle.dumps(info.value))
        assert type(back) is cls and isinstance(back, (PolygemmError, builtin)) and isinstance(back, builtin)
        assert str(back) == str(info.value) and back.details == info.value.details
    down = [i.name for i in pg.backends() if not i.available]  # cuda on a machine without a GPU, musa beside an NVIDIA one
    assert down, "every backend is available here: no unavailable one to ask for"
    with pytest.raises(BackendUnavailableError) as info:
        pg.gemm(a, a.T, device=down[0])  # the reason, and every backend's whole text in details
    if info.value.details:
        assert pickle.loads(pickle.dumps(info.value)).details == info.value.details


# -- alpha = 0 beside NaN, and a 0-D out, as numpy.matmul ---------------------------------------------------------------


@pytest.mark.parametrize("variant", ["auto", "blas", "reference", "numpy"])
def test_alpha_zero_still_propagates_nan_and_inf_as_numpy_does(variant):
    """Right: alpha = 0 does not skip the product (NaN and Inf in a or b give NaN, as 0 * (a @ b) in NumPy); beta = 0
    still does not read c (README: c is not read when beta == 0)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 4), np.float32)
    a[0, 1], b[2, 3] = np.nan, np.inf
    with np.errstate(invalid="ignore"):
        want = np.float32(0) * np.matmul(a, b)
    c = np.full((2, 4), np.nan, np.float32)
    got = pg.gemm(a, b, c, alpha=0.0, beta=0.0, device="cpu", variant=variant)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).any()
    assert (got[~np.isnan(want)] == 0).all()
    c = np.ones((2, 4), np.float32)
    got = pg.gemm(a, b, c, alpha=0, beta=2, device="cpu", variant=variant)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and (got[~np.isnan(want)] == 2.0).all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_vector_dot_vector_writes_a_zero_d_out_in_place(dtype):
    """Right: numpy.matmul(v, w, out=np.empty(())) writes the 0-D out; polygemm.matmul too, and returns it."""
    v, w = np.arange(1, 4, dtype=dtype), np.arange(4, 7, dtype=dtype)
    out = np.full((), -1, dtype)
    assert pg.matmul(v, w, out=out, device="cpu") is out and out.shape == () and out == np.matmul(v, w) == 32
    out = np.full((), -1, np.float32 if dtype == np.float16 else dtype)
    assert pg.matmul(v, w, out=out, device="cpu") is out and out == 32  # float16 vectors into a float32 0-D out
    for wrong in (np.full(1, -1, dtype), np.full((1, 1), -1, dtype)):  # numpy broadcasts into (1,); polygemm refuses
        with pytest.raises(ShapeError, match=r"out must have the result's shape \(\)"):
            pg.matmul(v, w, out=wrong, device="cpu")
        assert (wrong == -1).all()


# -- explain runs nothing --------------------------------------------------------------------------------------------------


def test_explain_with_out_writes_nothing_and_refuses_what_gemm_refuses():
    """Right: explain(..., out=o) plans the call gemm would make and leaves o as it was; an out gemm refuses is
    refused by explain with the same error."""
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)
    c = np.full((3, 2), 5.0, np.float32)
    out = np.full((3, 2), -7.0, np.float32)
    plan = pg.explain(a, b, c, beta=1.0, out=out, device="cpu")
    assert plan.backend == "cpu" and (out == -7.0).all() and (c == 5.0).all()
    plan = pg.explain(a, b, c, beta=1.0, out=c, device="cpu")  # in place: still nothing written
    assert (c == 5.0).all()
    ro = np.zeros((3, 2), np.float32)
    ro.flags.writeable = False
    for bad, err in ((np.empty((2, 3), np.float32), ShapeError), (np.empty((3, 2)), DTypeError), (ro, ArgumentError),
                     (a[:, :2], ArgumentError)):  # a view of a as out: it overlaps a
        with pytest.raises(err) as e1:
            pg.explain(a, b, out=bad, device="cpu")
        with pytest.raises(err) as e2:
            pg.gemm(a, b, out=bad, device="cpu")
        assert str(e1.value) == str(e2.value)
    assert pg.gemm(a, b, c, beta=1.0, out=out, device="cpu") is out and (out == 9.0).all()


# -- the plan cache cleared while other threads call ----------------------------------------------------------------------


def test_clearing_the_plan_cache_while_threads_call_loses_no_result():
    """Right: clear_plan_cache() from one thread while seven others call gemm with the same shapes: every result is
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


# -- a bias vector as c; the error of an array no kernel addresses, pickled ------------------------------------------------


@pytest.mark.parametrize("c", [np.arange(4, dtype=np.float32), np.float32(1.0), np.array(1.0, np.float32)])
def test_a_bias_vector_or_scalar_c_is_told_to_broadcast_not_to_reshape(c):
    # defect: a 1-D c (a bias, as torch.addmm(bias, x, w) takes it, and a @ b + bias broadcasts it) or a scalar c was
    # "c must be a matrix or a stack of matrices (at least 2-D); got 1-D with shape (4,). Reshape it, e.g.
    # c.reshape(rows, cols)": c.reshape(2, 4) of four elements raises. A 2-D c that broadcasts is told
    # "pass it broadcast, e.g. np.broadcast_to(c, (2, 4))" (problem.check_c_shape); the 1-D one never got there,
    # check_ndim in _host_operand refusing it first.
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ShapeError) as info:
        pg.gemm(a, b, c, beta=1.0, device="cpu")
    assert "np.broadcast_to(c, (2, 4))" in str(info.value) and "c.reshape(rows, cols)" not in str(info.value)
    got = pg.gemm(a, b, np.broadcast_to(c, (2, 4)), beta=1.0, device="cpu")  # the way it names
    assert np.array_equal(got, a @ b + c)


def test_the_error_for_a_device_array_no_kernel_addresses_survives_pickling():
    # defect: an array with __cuda_array_interface__ whose matrices are neither row- nor column-major (or whose batch
    # one stride cannot walk), other than CuPy's and torch's, raises problem.NotWhole (an ArgumentError). Its
    # __init__(message, name, shape) needs `name`, which BaseException's pickling does not pass (args is (message,)):
    # pickle.loads and copy.copy raise "TypeError: NotWhole.__init__() missing 1 required positional argument: 'name'",
    # so a dask.distributed worker or a process pool reports a pickling failure instead of the error.
    class Interface:
        def __init__(self, shape, strides):
            self.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", strides=strides, data=(1 << 20, False),
                                                 version=3)

    with pytest.raises(ArgumentError) as info:
        pg.gemm(Interface((4, 4), (32, 8)), Interface((4, 4), None), device="cpu")
    for back in (pickle.loads(pickle.dumps(info.value)), copy.copy(info.value)):
        assert type(back) is type(info.value) and str(back) == str(info.value)
        assert isinstance(back, ArgumentError) and getattr(back, "name", None) == "a"
