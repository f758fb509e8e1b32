"""A NumPy, Dask and multiprocessing user, twenty-fourth round (CPU): dask arrays handed to ``polygemm.gemm``,
``polygemm.matmul`` and ``polygemm.explain`` (as ``numpy.matmul`` takes them), ``polygemm.backends`` and what it
returns sent through a process pool (``ProcessPoolExecutor.submit(polygemm.backends)``, dask's
``client.run(polygemm.backends)``), copies of a ``BackendInfo``, vectors and scalars handed to ``gemm`` beside what
``numpy.matmul`` does with them, ``alpha``/``beta`` given as one-element arrays; and edges that were right:
``device=`` spelt as a user types it ("CPU", " cpu", "cpu:0", None, "gpu", "cuda:0" without a GPU), plans pickled
and copied, ``gemm`` in a spawned process pool, Python lists and tuples beside ``numpy.matmul``'s results.
(torch is not installed on the CPU machine: its tensors are left to test_user_edges_r8_gpu.py.) The tests marked
"defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
import re
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, ArgumentTypeError, BackendUnavailableError, ShapeError

da = pytest.importorskip("dask.array", reason="dask[array] not installed (pip install 'polygemm[dask]'); the [test] extra has it")
import polygemm.dask as pgd  # noqa: E402


def _counted(x, calls):
    """``x`` (a dask array) with each block's computation counted in ``calls``."""
    def tick(block):
        calls.append(1)
        return block
    return x.map_blocks(tick, dtype=x.dtype)


# --- dask arrays in the in-memory API ------------------------------------------------------------------
@pytest.mark.parametrize("call", ["gemm", "matmul", "explain"])
def test_dask_operands_are_refused_without_computing_them(rng, call):
    # defect: polygemm.gemm(A, B) on dask arrays ran every task of both graphs (NumPy reads a dask array through
    # __array__), held them whole in memory and returned a NumPy array, where numpy.matmul returns a lazy dask array
    calls: list[int] = []
    A = _counted(da.from_array(rng.standard_normal((6, 8)).astype(np.float32), chunks=(3, 4)), calls)
    B = _counted(da.from_array(rng.standard_normal((8, 5)).astype(np.float32), chunks=4), calls)
    assert type(np.matmul(A, B)).__module__.startswith("dask")  # what numpy.matmul gives: lazy, no task run
    calls.clear()
    fn = getattr(pg, call)
    with pytest.raises(ArgumentTypeError) as info:
        fn(A, B, device="cpu")
    assert isinstance(info.value, TypeError)
    msg = str(info.value)
    assert msg.startswith("a is a dask.Array; polygemm multiplies arrays in memory"), msg
    assert "polygemm.dask.gemm(A, B)" in msg and "a.compute()" in msg
    assert calls == []  # nothing was computed
    # the way the message names works on the same arrays
    want = A.compute() @ B.compute()
    np.testing.assert_allclose(pgd.gemm(A, B, device="cpu").compute(), want, rtol=1e-5, atol=1e-5)


def test_dask_b_beside_numpy_a_and_dask_c_name_the_dask_operand(rng):
    # defect (same fix): a NumPy a with a dask b had been told to convert one "with numpy's asarray / from_dlpack"
    # (np.asarray computes the dask array whole); a dask c beside NumPy a and b likewise
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    calls: list[int] = []
    B = _counted(da.from_array(b, chunks=3), calls)
    C = _counted(da.zeros((4, 5), chunks=2, dtype=np.float32), calls)
    calls.clear()  # (map_blocks may call the function on an empty block to learn its meta)
    out = np.full((4, 5), 7.0, np.float32)
    with pytest.raises(ArgumentTypeError, match=r"^b is a dask\.Array; .*polygemm\.dask\.gemm\(A, B\).*b\.compute\(\)"):
        pg.gemm(a, B, device="cpu", out=out)
    with pytest.raises(ArgumentTypeError, match=r"^c is a dask\.Array; .*polygemm\.dask\.gemm\(A, B, c, beta=\.\.\.\).*c\.compute\(\)"):
        pg.gemm(a, b, C, beta=1.0, device="cpu", out=out)
    assert calls == [] and (out == 7.0).all()
    # the in-memory arrays the message points to give the product
    np.testing.assert_allclose(pg.gemm(a, B.compute(), C.compute(), beta=1.0, device="cpu"), a @ b, rtol=1e-5, atol=1e-5)


def test_dask_out_is_still_told_it_must_be_writable_in_place(rng):
    """A dask ``out`` cannot receive the result (no memory to write into): the refusal it had, not the operands'."""
    a = rng.standard_normal((4, 6)).astype(np.float32)
    with pytest.raises(ArgumentTypeError, match=r"^out must be a NumPy array \(or a device array\) that can receive the result; got Array$"):
        pg.gemm(a, a.T, device="cpu", out=da.zeros((4, 4), chunks=2, dtype=np.float32))


# --- polygemm.backends through a process pool -----------------------------------------------------------
def _report(infos):
    return [(i.name, i.available, i.reason, i.priority, i.source, i.detail) for i in infos]


def test_backends_pickles_as_itself():
    # defect: polygemm.backends (a callable module) could not be pickled ("cannot pickle '_CallablePackage' object"),
    # so ProcessPoolExecutor.submit(polygemm.backends) and dask's client.run(polygemm.backends) failed
    assert pickle.loads(pickle.dumps(pg.backends)) is pg.backends
    assert copy.copy(pg.backends) is pg.backends and copy.deepcopy(pg.backends) is pg.backends
    assert callable(pickle.loads(pickle.dumps(pg.backends)))


def test_backend_infos_pickle_without_the_live_backend():
    # defect: the list polygemm.backends() returns could not be pickled ("cannot pickle '_thread.lock' object":
    # the cuda backend's lock, available or not), so a worker could not report it; it now arrives with backend=None
    infos = pg.backends()
    assert any(i.name == "cuda" for i in infos)  # the backend whose instance held the lock
    back = pickle.loads(pickle.dumps(infos))
    assert _report(back) == _report(infos)
    assert all(i.backend is None for i in back)
    assert all(type(i) is pg.BackendInfo for i in back)
    # a copy in this process is the same info, its live backend kept (copy.copy had gone through the pickle path)
    for i in infos:
        assert copy.copy(i) is i and copy.deepcopy(i) is i
    assert copy.deepcopy(infos)[-1].backend is infos[-1].backend


def test_backends_submitted_to_a_spawned_process_pool():
    """The use the two defects above broke: each worker asked which backends it sees."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        theirs = pool.submit(pg.backends).result(timeout=120)
    mine = pg.backends()
    assert [(i.name, i.available, i.reason) for i in theirs] == [(i.name, i.available, i.reason) for i in mine]
    assert [i.backend for i in theirs] == [None] * len(mine)


def test_backends_through_dask_client_run():
    distributed = pytest.importorskip("distributed")  # in the [test] extra
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        (reply,) = client.run(pg.backends).values()
    assert [(i.name, i.available) for i in reply] == [(i.name, i.available) for i in pg.backends()]


def _product(seed):
    x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
    return pg.gemm(x, x.T, device="cpu"), pg.last_plan()


def test_gemm_in_a_spawned_process_pool_returns_results_and_plans():
    """Edge that was right: gemm and last_plan() in spawned workers, results and plans pickled back."""
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = list(pool.map(_product, range(4), timeout=120))
    for seed, (res, plan) in enumerate(got):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(res, x @ x.T, rtol=1e-5, atol=1e-5)
        assert plan.backend == "cpu" and (plan.problem.m, plan.problem.n, plan.problem.k) == (3, 3, 4)


def test_plans_pickle_and_copy_as_they_print(rng):
    """Edge that was right: explain's and last_plan()'s plans survive pickle, copy and deepcopy."""
    a = rng.standard_normal((5, 7)).astype(np.float32)
    plan = pg.explain(a, a.T, device="cpu")
    pg.gemm(a, a.T, device="cpu")
    last = pg.last_plan()
    for p in (plan, last):
        for made in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
            assert str(made) == str(p) and made == p


# --- vectors and scalars in gemm ------------------------------------------------------------------------
def test_gemm_vector_a_is_told_the_row_and_matmul(rng):
    # defect: "a must be a matrix ...; got 1-D with shape (3,). Reshape it, e.g. a.reshape(rows, cols)" named no
    # row, and not polygemm.matmul, which takes the vector as numpy.matmul does
    v = rng.standard_normal(3).astype(np.float32)
    m = rng.standard_normal((3, 2)).astype(np.float32)
    out = np.full((1, 2), 5.0, np.float32)
    with pytest.raises(ShapeError, match=re.escape(
            "a must be a matrix or a stack of matrices (at least 2-D); got 1-D with shape (3,), a vector. Pass it as a "
            "row, a[None, :] (1×3); polygemm.matmul takes vectors, as numpy.matmul does.")):
        pg.gemm(v, m, device="cpu", out=out)
    assert (out == 5.0).all()
    # both ways it names work
    np.testing.assert_allclose(pg.gemm(v[None, :], m, device="cpu"), (v @ m)[None, :], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pg.matmul(v, m, device="cpu"), v @ m, rtol=1e-5, atol=1e-6)


def test_gemm_vector_b_is_told_the_column_and_a_list_through_asarray(rng):
    # defect (same fix): a vector b is a column; a list has no [:, None], so the hint indexes np.asarray(b)
    m = rng.standard_normal((2, 3)).astype(np.float64)
    with pytest.raises(ShapeError, match=re.escape("got 1-D with shape (3,), a vector. Pass it as a column, b[:, None] (3×1)")):
        pg.gemm(m, np.ones(3), device="cpu")
    with pytest.raises(ShapeError, match=re.escape("Pass it as a column, np.asarray(b)[:, None] (3×1); polygemm.matmul")):
        pg.gemm(m, [1.0, 2.0, 3.0], device="cpu")
    with pytest.raises(ShapeError, match=re.escape("Pass it as a row, np.asarray(a)[None, :] (1×2)")):
        pg.gemm((1.0, 2.0), m, device="cpu")
    np.testing.assert_allclose(pg.gemm(m, np.asarray([1.0, 2.0, 3.0])[:, None], device="cpu")[:, 0], m @ [1.0, 2.0, 3.0])


@pytest.mark.parametrize("scalar", [2.0, np.float32(2.0), np.array(2.0, np.float32)])
def test_gemm_scalar_operand_is_told_alpha(scalar):
    # defect: a scalar a or b was told "got 0-D with shape (). Reshape it, e.g. b.reshape(rows, cols)": a scalar has
    # no rows and columns; what scales a product is alpha (numpy.matmul refuses scalars too, a ValueError)
    m = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=r"matmul"):
        np.matmul(m, scalar)
    with pytest.raises(ShapeError, match=re.escape("b must be a matrix or a stack of matrices (at least 2-D); got 0-D with "
                                                   "shape (), a scalar. Scale the product by it with alpha=")) as info:
        pg.gemm(m, scalar, device="cpu")
    assert "reshape" not in str(info.value) and isinstance(info.value, ValueError)
    np.testing.assert_array_equal(pg.gemm(m, m, alpha=scalar, device="cpu"), 2.0 * (m @ m))


def test_testing_keeps_the_row_hint_without_matmul():
    """polygemm.testing shares the check: the row and column hints, but matmul is gemm's to name."""
    from polygemm.testing import error_bound

    with pytest.raises(ShapeError, match=re.escape("a vector. Pass it as a row, a[None, :] (1×3).")) as info:
        error_bound(np.ones(3, np.float32), np.ones((3, 2), np.float32))
    assert "matmul" not in str(info.value)


def test_out_of_too_few_dimensions_keeps_the_reshape_hint(rng):
    """Edge that was right: a 1-D out of the result's size is told to reshape it (out.reshape(2, 3) is a view of it)."""
    a = rng.standard_normal((2, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    out = np.zeros(6, np.float32)
    with pytest.raises(ShapeError, match=re.escape("out must be a matrix or a stack of matrices (at least 2-D); got 1-D with "
                                                   "shape (6,). Reshape it, e.g. out.reshape(rows, cols).")):
        pg.gemm(a, b, device="cpu", out=out)
    assert (out == 0).all()
    pg.gemm(a, b, device="cpu", out=out.reshape(2, 3))
    np.testing.assert_allclose(out.reshape(2, 3), a @ b, rtol=1e-5, atol=1e-5)


# --- alpha and beta as arrays ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("value", [np.array([0.5]), np.array([[0.5]], np.float32), np.linalg.norm(np.ones((1, 4)), axis=1)])
def test_one_element_array_scalar_is_told_item(rng, name, value):
    # defect: alpha=np.array([0.5]) (a norm over an axis, x.sum(keepdims=True)) was refused naming no way on, and the
    # accepted kinds left out the 0-D array the README lists
    a = rng.standard_normal((3, 4)).astype(np.float32)
    c = np.full((3, 3), 1.0, np.float32)
    out = np.full((3, 3), 9.0, np.float32)
    with pytest.raises(ArgumentTypeError, match=re.escape(f"or a 0-D array of one); got {value!r} (ndarray); a one-element "
                                                          f"array of {value.ndim} dimension")) as info:
        pg.gemm(a, a.T, c, device="cpu", out=out, **{name: value})
    assert str(info.value).endswith(f"is no scalar: pass {name}.item()")
    assert (out == 9.0).all() and (c == 1.0).all()
    # what it names is taken, as is the 0-D array
    for ok in (value.item(), value.reshape(())):
        got = pg.gemm(a, a.T, c, device="cpu", **{"alpha": 1.0, "beta": 1.0, name: ok})
        np.testing.assert_allclose(got, (float(value.item()) if name == "alpha" else 1.0) * (a @ a.T)
                                   + (float(value.item()) if name == "beta" else 1.0) * c, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", [np.array([1j]), np.array([True]), np.array([1.0, 2.0])])
def test_arrays_whose_item_is_no_scalar_get_no_item_hint(value):
    """A one-element complex or bool array, or two elements: .item() would be refused too, so it is not offered."""
    m = np.ones((2, 2), np.float32)
    with pytest.raises(ArgumentTypeError, match=r"^alpha must be a real number") as info:
        pg.gemm(m, m, alpha=value, device="cpu")
    assert ".item()" not in str(info.value)


# --- device= as a user spells it ---------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["CPU", " cpu", "cpu ", "cpu:0", "Cpu:0", None, "auto", "AUTO", np.str_("cpu")])
def test_device_spellings_that_run_on_the_cpu(device, without_gpu, monkeypatch):
    """Edges that were right: device names in any case and with spaces, the CPU's one index, None and auto here."""
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(pg.gemm(a, a.T, device=device), a @ a.T)
    assert pg.last_plan().backend == "cpu"


@pytest.mark.parametrize("device, exc, words", [
    ("gpu", BackendUnavailableError, "unknown device 'gpu' (a GPU is 'cuda' (NVIDIA) or 'musa' (Moore Threads)"),
    ("cuda:0", BackendUnavailableError, "device 'cuda' is unavailable: no GPU (hidden by the test)"),
    ("cpu:1", BackendUnavailableError, "device 'cpu:1': backend 'cpu' has one device; use 'cpu'"),
    ("cuda:01", ArgumentError, "a device index is a whole number >= 0 written in ASCII digits"),
    (b"cpu", ArgumentTypeError, "device must be a backend name"),
    (0, ArgumentTypeError, "device must be a backend name"),
])
def test_device_spellings_refused_leave_out_untouched(device, exc, words, without_gpu):
    """Edges that were right: what a user types for a GPU, an index too many, bytes or an int."""
    a = np.ones((2, 3), np.float32)
    out = np.full((2, 2), 4.0, np.float32)
    with pytest.raises(exc) as info:
        pg.gemm(a, a.T, device=device, out=out)
    # an unknown or unavailable device is a BackendUnavailableError, a RuntimeError (as errors.py documents it and as
    # torch.device("gpu") raises one); a malformed one a ValueError or TypeError
    assert words in str(info.value) and isinstance(info.value, (ValueError, TypeError) if exc is not BackendUnavailableError
                                                   else RuntimeError)
    assert (out == 4.0).all()


# --- Python sequences beside numpy.matmul -------------------------------------------------------------------
@pytest.mark.parametrize("x, y", [
    ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.5], [0.0, 1.0]]),
    (((1.0, 2.0), (3.0, 4.0)), ((1.0, 0.5), (0.0, 1.0))),
    ([[np.float32(1), np.float32(2)]], [[np.float32(3)], [np.float32(4)]]),
    ([1.0, 2.0], [3.0, 4.0]),
    ([[1.0, 2.0]], [3.0, 4.0]),
    ([], []),
])
def test_sequences_through_matmul_match_numpy(x, y):
    """Edge that was right: lists and tuples of floats give numpy.matmul's value, dtype and shape."""
    want = np.matmul(x, y)
    got = pg.matmul(x, y, device="cpu")
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want)


def test_integer_lists_are_told_the_cast_as_numpy_would_read_them():
    """Edge that was right: numpy.matmul computes int64 lists in int64; polygemm names the dtype and the cast."""
    with pytest.raises(pg.DTypeError, match=re.escape("a has dtype int64;")) as info:
        pg.matmul([[1, 2], [3, 4]], [[1, 0], [0, 1]], device="cpu")
    assert "np.asarray(a, dtype=np.float32) (NumPy reads this list as int64)" in str(info.value)


# --- what the round noticed and left, fixed after it ----------------------------------------------------

def test_matmul_takes_numpys_one_tuple_out_and_gemm_says_how():
    # numpy.matmul is a ufunc: out=(o,) is its tuple form and returns o; polygemm.matmul refused it
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    o = np.zeros((2, 4), np.float32)
    assert np.matmul(a, b, out=(o,)) is o
    o[...] = 0
    assert pg.matmul(a, b, out=(o,)) is o and (o == 3).all()
    v = np.zeros(2, np.float32)  # matrix @ vector into a 1-D out given as a tuple
    assert pg.matmul(a, np.ones(3, np.float32), out=(v,)) is v and (v == 3).all()
    o[...] = 7
    with pytest.raises(TypeError, match=r"got tuple \(numpy.matmul's tuple form: pass the array itself, out=out\[0\]"):
        pg.gemm(a, b, out=(o,))
    assert (o == 7).all()


def test_bench_names_the_preset_a_typo_meant(capsys):
    from polygemm.apps.cli import main
    assert main(["bench", "--device", "cpu", "--shapes", "squar"]) == 2
    assert "got 'squar' (did you mean 'square'?); presets: square" in capsys.readouterr().err
    assert main(["bench", "--device", "cpu", "--shapes", "12x12"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # no preset is near a malformed shape
