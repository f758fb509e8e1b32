"""The musa backend through libpolygemm_musa (marked ``musa``; the host flavor runs on the CPU)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import UnsupportedProblemError
from polygemm.testing import assert_close, reference_for, run_conformance

from tests.helpers import WRONG_ABI, _reset, _reset as _musa_reset, c_library, cli, FLAVOR, rand16, ROOT, run_concurrently


@pytest.fixture
def rng():
    return np.random.default_rng(secrets.randbits(32))


SHAPES = [(1, 1, 1), (2, 3, 5), (7, 13, 5), (31, 37, 41), (127, 129, 131), (257, 65, 33), (61, 7, 97)]


def _musa_reason_in_fresh_process(env: dict[str, str], src_root: Path) -> str:
    """The musa backend's reason, from a new process (a library loaded here would be found
    again by the system loader, as dlopen does), with the build tree pointed at src_root."""
    code = (
        "import polygemm.backends.musa.library as L, pathlib, polygemm as pg;"
        f"L._SRC_ROOT = pathlib.Path({str(src_root)!r});"
        "i = {x.name: x for x in pg.backends()}['musa'];"
        "print('AVAILABLE' if i.available else i.reason)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env}, cwd=str(src_root))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


class _View:
    """A column-major (or row-major) view with a larger leading dimension of a MusaArray."""

    def __init__(self, base, rows, cols, order):
        self.base, self.shape = base, (rows, cols)
        r, c = base.shape
        self.strides = (2, 2 * r) if order == "F" else (2 * c, 2)

    @property
    def __polygemm_array_interface__(self):
        return {"shape": self.shape, "typestr": "<f2", "strides": self.strides, "data": (self.base.ptr, False), "device": "musa", "version": 1}


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


@pytest.fixture
def musa_host(musa_library, monkeypatch):  # noqa: F811 - the fixture imported above
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
    _musa_reset()
    yield musa_library
    monkeypatch.delenv("POLYGEMM_MUSA_EMULATION")
    _musa_reset()


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within polygemm.testing's bound of the float64 reference."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


@pytest.mark.musa
@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("orders", ["CC", "FF", "CF", "FC"])
def test_shapes_and_layouts(musa, rng, m, n, k, orders):
    a, b = rand16(rng, (m, k), orders[0]), rand16(rng, (k, n), orders[1])
    c = rand16(rng, (m, n))
    out = np.full((m, n), np.nan, np.float16)
    got = pg.gemm(a, b, c, alpha=0.5, beta=-1.5, out=out, device="musa")
    assert got is out
    res = reference_for(a, b, c, 0.5, -1.5).compare(out)
    assert res.ok, res.message
    plan = pg.explain(a, b, device="musa")
    assert "EMULATION" in str(plan) or plan.backend == "musa"


@pytest.mark.musa
@pytest.mark.parametrize("orders", ["CC", "FF", "CF", "FC"])
def test_numpy_stacks_of_matrices(musa, rng, orders):
    """NumPy stacks as numpy.matmul takes them, a product a launch: a batch of each operand layout, b shared by the batch,
    batches broadcast against each other (4-D), a reversed batch, c and out, an empty batch."""
    def stack(count, rows, cols, order):
        mats = [rand16(rng, (rows, cols), order) for _ in range(count)]
        return np.stack(mats) if order == "C" else np.stack([m.T for m in mats]).transpose(0, 2, 1)

    a, b, c = stack(3, 33, 20, orders[0]), stack(3, 20, 17, orders[1]), stack(3, 33, 17, "C")
    got = pg.gemm(a, b, device="musa")
    assert got.shape == (3, 33, 17) and got.dtype == np.float16
    assert "3 products" in pg.last_plan().launch["batch"]
    for i in range(3):
        assert_within(got[i], a[i], b[i])
    out = np.full((3, 33, 17), np.nan, np.float16)
    assert pg.gemm(a[::-1], b[0], c, alpha=0.5, beta=-1.0, out=out, device="musa") is out
    for i in range(3):
        assert_within(out[i], a[::-1][i], b[0], c[i], 0.5, -1.0)
    x, y = rand16(rng, (2, 1, 5, 4)), stack(3, 4, 6, orders[1])
    got = pg.matmul(x, y, device="musa")
    assert got.shape == (2, 3, 5, 6)
    for i, j in np.ndindex(2, 3):
        assert_within(got[i, j], x[i, 0], y[j])
    assert pg.gemm(np.empty((0, 5, 4), np.float16), y[0], device="musa").shape == (0, 5, 6)


@pytest.mark.musa
def test_a_failed_product_of_a_stack_leaves_out_as_it_was(musa, rng, monkeypatch):
    from polygemm.backends.musa.sessions import Session

    a, b = rand16(rng, (4, 9, 6)), rand16(rng, (6, 5))
    before = rand16(rng, (4, 9, 5))
    out = before.copy()
    real, calls = Session.gemm, []

    def fail_third(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise pg.DeviceError("pgm_gemm_f16 failed: injected launch failure")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Session, "gemm", fail_third)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(a, b, out=out, device="musa")
    assert np.array_equal(out, before), "out was partly written by a failed stack"


@pytest.mark.musa
def test_a_stack_in_musa_device_memory_is_refused_naming_the_numpy_route(musa):
    """Device memory holding a stack (another library's musa array, 3-D) is refused at plan time, naming what runs."""
    from polygemm.backends.musa import MusaArray

    base = MusaArray.from_numpy(np.ones((8, 4), np.float16))

    class Stack:  # two 4x4 matrices in one buffer, as a musa array library hands them over
        __polygemm_array_interface__ = {"shape": (2, 4, 4), "typestr": "<f2", "strides": (32, 8, 2),
                                        "data": (base.ptr, False), "device": "musa", "version": 1}

    with pytest.raises(UnsupportedProblemError, match=r"batch shape \(2,\)\) as NumPy arrays only") as err:
        pg.gemm(Stack(), Stack(), device="musa")
    assert "2-D operands in a call of its own" in str(err.value)
    base.free()


@pytest.mark.musa
def test_explain_says_emulation(musa, rng):
    a, b = rand16(rng, (4, 4)), rand16(rng, (4, 4))
    plan = pg.explain(a, b, device="musa")
    if musa.flavor() != "musa":
        assert any("EMULATION" in n for n in plan.notes), str(plan)


@pytest.mark.musa
def test_new_b_every_call_same_shape_never_stale(musa, rng):
    a = rand16(rng, (33, 17))
    b = rand16(rng, (17, 29))
    for _ in range(4):
        b[...] = rand16(rng, (17, 29))  # same buffer, new contents
        assert reference_for(a, b).compare(pg.gemm(a, b, device="musa")).ok
        b2 = rand16(rng, (17, 29))  # new buffer, same shape
        assert reference_for(a, b2).compare(pg.gemm(a, b2, device="musa")).ok


@pytest.mark.musa
def test_musa_array_set_between_calls(musa, rng):
    from polygemm.backends.musa import MusaArray

    a, b = rand16(rng, (40, 24)), rand16(rng, (24, 36))
    with MusaArray.from_numpy(a) as da, MusaArray.from_numpy(b) as db:
        r1 = pg.gemm(da, db)
        assert isinstance(r1, MusaArray)
        assert reference_for(a, b).compare(r1.get()).ok
        b_new = rand16(rng, (24, 36))
        db.set(b_new)
        r2 = pg.gemm(da, db)
        assert reference_for(a, b_new).compare(r2.get()).ok
        out = MusaArray.from_numpy(np.full((40, 36), np.nan, np.float16))
        assert pg.gemm(da, db, out=out) is out
        assert reference_for(a, b_new).compare(out.get()).ok
        for x in (r1, r2, out):
            x.free()


@pytest.mark.musa
def test_numpy_is_told_to_get_a_musa_array_not_handed_an_object_array(musa, rng):
    from polygemm.backends.musa import MusaArray

    with MusaArray.from_numpy(rand16(rng, (3, 4))) as da:
        with pytest.raises(TypeError, match=r"device memory.*\.get\(\)"):
            np.asarray(da)
        assert da.get().shape == (3, 4)


@pytest.mark.musa
def test_a_copy_of_a_musa_array_is_new_device_memory_and_a_prepared_b_is_not_copied(musa, rng):
    # a copy sharing the pointer would free it under the original (collected first) and then free another's memory
    import copy
    import gc
    import pickle

    from polygemm.backends.musa import MusaArray, PreparedB

    x = rand16(rng, (6, 5))
    a = MusaArray.from_numpy(np.asfortranarray(x))
    copies = [copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))]
    assert all(c.ptr != a.ptr and c.order == "F" and np.array_equal(c.get(), x) for c in copies)
    del copies
    gc.collect()
    assert np.array_equal(a.get(), x)  # the original's memory is its own still
    pb = PreparedB(x)
    for make in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=r"prepare B again, PreparedB\(b\)"):
            make(pb)
    assert not pb.released


def test_a_freed_empty_musa_array_refuses_and_a_shape_past_any_memory_is_a_shape_error(musa):
    from polygemm.backends.musa import MusaArray

    z = MusaArray.from_numpy(np.ones((0, 4), np.float16))
    z.free()
    for use in (z.get, lambda: z.set(np.ones((0, 4), np.float16))):
        with pytest.raises(pg.ArgumentError, match="has been freed"):
            use()
    with pytest.raises(pg.ShapeError, match="more bytes than any device memory"):
        MusaArray.empty((10**10, 10**10))


def test_a_c_not_read_has_no_say_in_the_device_results_order(musa, rng):
    # beta = 0: c is never read, so its order neither sets the result's nor is refused
    from polygemm.backends.musa import MusaArray

    a, b = rand16(rng, (7, 5)), rand16(rng, (5, 6))
    da, db = MusaArray.from_numpy(a), MusaArray.from_numpy(b)
    c_f = MusaArray.from_numpy(np.asfortranarray(np.full((7, 6), np.nan, np.float16)))
    got = pg.gemm(da, db, c_f, beta=0.0, device="musa")
    assert got.order == "C" and reference_for(a, b).compare(got.get()).ok
    out = MusaArray.empty((7, 6))
    pg.gemm(da, db, c_f, beta=0.0, out=out, device="musa")
    assert reference_for(a, b).compare(out.get()).ok
    with pytest.raises(UnsupportedProblemError, match="share the result's memory order"):  # read: its order counts
        pg.gemm(da, db, c_f, beta=1.0, device="musa")


def test_free_from_another_thread_waits_for_the_call_using_the_array(musa, rng):
    # a free() mid-call would hand the memory to the next allocation while the call still writes it
    import threading
    import time

    from polygemm.backends.musa import MusaArray

    a = MusaArray.from_numpy(rand16(rng, (16, 16)))
    with a.in_use():
        freeing = threading.Thread(target=a.free)
        freeing.start()
        time.sleep(0.1)
        assert freeing.is_alive() and np.isfinite(a.get()).all()  # waiting, the memory still a's
    freeing.join(timeout=10)
    assert not freeing.is_alive()
    with pytest.raises(pg.ArgumentError, match="has been freed"):
        pg.gemm(a, a, device="musa")
    src = MusaArray.from_numpy(rand16(rng, (32, 32)))
    for _ in range(50):  # a call racing a free of its out: never a write into memory handed on
        out = MusaArray.empty((32, 32))

        def call(out=out):
            try:
                pg.gemm(src, src, out=out, device="musa")
            except pg.ArgumentError:
                pass  # freed before the call held it: refused

        racing = threading.Thread(target=call)
        racing.start()
        out.free()
        fresh = MusaArray.from_numpy(np.zeros((32, 32), np.float16))
        racing.join()
        assert not fresh.get().any()


def test_prepared_b_reused_updated_released(musa, rng):
    from polygemm.backends.musa import PreparedB

    b = rand16(rng, (48, 20))
    pb = PreparedB(b)
    for _ in range(3):
        a = rand16(rng, (37, 48))
        assert reference_for(a, b).compare(musa.gemm_prepared(a, pb)).ok
    b2 = rand16(rng, (48, 20))
    pb.update(b2)
    a = rand16(rng, (5, 48))
    c = rand16(rng, (5, 20))
    assert reference_for(a, b2, c, 2.0, 0.5).compare(musa.gemm_prepared(a, pb, c, alpha=2.0, beta=0.5)).ok
    with pytest.raises(pg.ShapeError, match="prepared B"):
        musa.gemm_prepared(rand16(rng, (5, 47)), pb)
    pb.release()
    pb.release()  # idempotent from Python
    with pytest.raises(pg.ArgumentError, match="released"):
        musa.gemm_prepared(a, pb)


@pytest.mark.musa
def test_eight_threads_at_once(musa):
    def work(i: int) -> None:
        rng = np.random.default_rng(secrets.randbits(32))
        for j in range(4):
            a, b = rand16(rng, (20 + i, 30 + j)), rand16(rng, (30 + j, 17 + 2 * i))
            res = reference_for(a, b).compare(pg.gemm(a, b, device="musa"))
            assert res.ok, res.message

    errors = run_concurrently(work, 8)
    assert not errors, errors


@pytest.mark.musa
def test_auto_passes_musa_over_for_a_wider_result(musa, rng):
    """float16 inputs with a float32 result (out_dtype or out): musa writes float16 only, so
    device="auto" takes the next backend and says why it passed musa over; an explicit
    device="musa" says what to pass instead."""
    h = rand16(rng, (9, 7))
    got = pg.gemm(h, h.T, out_dtype=np.float32)
    assert got.dtype == np.float32 and reference_for(h, h.T, out_dtype=np.float32).compare(got).ok
    plan = pg.last_plan()
    assert plan is not None and plan.backend != "musa"
    order = [i.name for i in pg.backends()]
    if order.index(plan.backend.partition(":")[0]) > order.index("musa"):  # musa was asked first
        assert any(name == "musa" and "float16 results only" in why for name, why in plan.candidates)
    else:  # a backend ahead of musa (cuda, on a machine with an NVIDIA GPU) took it: musa was never asked
        assert all(name != "musa" for name, _ in plan.candidates)
    out = np.zeros((9, 9), np.float32)
    assert pg.gemm(h, h.T, out=out) is out and reference_for(h, h.T, out_dtype=np.float32).compare(out).ok
    with pytest.raises(pg.DTypeError, match="writes float16 results only, not float32; pass out \\(or out_dtype\\) as float16"):
        pg.gemm(h, h.T, out_dtype=np.float32, device="musa")


@pytest.mark.musa
def test_vectors_and_one_order_on_the_device(musa, rng):
    """musa device operands: a single row or column (or an empty matrix) reads in either memory
    order, so matrix-vector products of C-ordered arrays run, and all-Fortran operands run
    with or without out (the result in Fortran order)."""
    from polygemm.backends.musa import MusaArray

    mat, col = rand16(rng, (64, 32)), rand16(rng, (32, 1))
    got = pg.gemm(MusaArray.from_numpy(mat), MusaArray.from_numpy(col)).get()
    assert reference_for(mat, col).compare(got).ok
    row, fmat = np.asfortranarray(rand16(rng, (1, 32))), np.asfortranarray(rand16(rng, (32, 16)))
    out = MusaArray.from_numpy(np.asfortranarray(np.zeros((1, 16), np.float16)))
    assert pg.gemm(MusaArray.from_numpy(row), MusaArray.from_numpy(fmat), out=out) is out
    assert reference_for(row, fmat).compare(out.get()).ok
    fa, fb = np.asfortranarray(rand16(rng, (8, 32))), np.asfortranarray(rand16(rng, (32, 5)))
    got = pg.gemm(MusaArray.from_numpy(fa), MusaArray.from_numpy(fb)).get()
    assert reference_for(fa, fb).compare(got).ok
    assert pg.gemm(MusaArray.from_numpy(rand16(rng, (0, 32))), MusaArray.from_numpy(fb.copy(order="F")[:, :4])).shape == (0, 4)


@pytest.mark.musa
def test_bad_inputs(musa, rng):
    from polygemm.backends.musa import MusaArray

    f32 = np.ones((3, 3), np.float32)
    with pytest.raises(pg.DTypeError, match="float16"):
        pg.gemm(f32, f32, device="musa")
    h = rand16(rng, (3, 3))
    with pytest.raises(pg.DTypeError, match="writes float16 results only"):
        pg.gemm(h, h, out=np.zeros((3, 3), np.float32), device="musa")
    with pytest.raises(pg.DTypeError, match="float16"):
        MusaArray.from_numpy(f32)
    a = MusaArray.from_numpy(rand16(rng, (4, 4)))
    bf = MusaArray.from_numpy(np.asfortranarray(rand16(rng, (4, 4))))
    with pytest.raises(pg.UnsupportedProblemError, match="memory order"):
        pg.gemm(a, bf)
    with pytest.raises(pg.ShapeError, match="set\\(\\) needs shape"):
        a.set(rand16(rng, (3, 4)))
    a.free()
    with pytest.raises(pg.ArgumentError, match="freed"):
        pg.gemm(a, a)
    bf.free()
    with pytest.raises(pg.ArgumentError, match="operands live in different places"):
        pg.gemm(MusaArray.from_numpy(rand16(rng, (2, 2))), rand16(rng, (2, 2)))


@pytest.mark.musa
def test_native_errors_carry_the_library_message(musa):
    from polygemm.backends.musa.sessions import session

    s = session()
    with pytest.raises(pg.DeviceError, match="pgm_free failed: PGM_ERR_(INVALID_ARGUMENT|DEVICE): .*pgm_free"):
        s.free(12345678)  # never allocated
    with pytest.raises(pg.DeviceError, match="PGM_ERR"):
        s.gemm("wmma_s4000", 4, 4, 4, 1.0, 0, 4, 0, 4, 0.0, 0, 4)


@pytest.mark.musa
def test_mublas_variant_reports_not_supported_off_musa(musa, rng):
    if musa.flavor() == "musa":
        pytest.skip("real MUSA flavor")
    a = rand16(rng, (4, 4))
    with pytest.raises(pg.UnsupportedProblemError, match=r"needs the musa flavor.*runs variant=.wmma_s4000. \(or .auto.\)"):
        pg.explain(a, a, device="musa", variant="mublas")
    from polygemm.backends.musa.sessions import session

    s = session()  # the library itself refuses too, with its own message
    with pytest.raises(pg.DeviceError, match="NOT_SUPPORTED"):
        s.gemm("mublas", 1, 1, 1, 1.0, 0, 1, 0, 1, 0.0, 0, 1)
    assert pg.explain(a, a, device="auto").variant != "mublas"


@pytest.mark.musa
def test_conformance(musa):
    results = run_conformance("musa", quick=True, variants=["wmma_s4000"])
    fails = [r for r in results if r.status == "fail"]
    assert results and not fails, fails[:5]


@pytest.mark.musa
@pytest.mark.skipif(FLAVOR != "cuda", reason="large shapes run on the GPU machine with the cuda flavor")
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (4095, 4097, 4093), (1000, 3000, 2000)])
def test_large_shapes_cuda_flavor(musa, rng, m, n, k):
    a, b = rand16(rng, (m, k)), rand16(rng, (k, n))
    assert reference_for(a, b).compare(pg.gemm(a, b, device="musa")).ok


@pytest.mark.musa
def test_flavor_gate_without_emulation(musa_library, monkeypatch):
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.delenv("POLYGEMM_MUSA_EMULATION", raising=False)
    _reset()
    try:
        info = {i.name: i for i in pg.backends()}["musa"]
        if FLAVOR != "musa":
            assert not info.available and "POLYGEMM_MUSA_EMULATION=1" in info.reason
            with pytest.raises(pg.BackendUnavailableError, match="emulation"):
                pg.gemm(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), device="musa")
    finally:
        _reset()


@pytest.mark.musa
def test_missing_explicit_library_is_final(tmp_path):
    # an explicit path is the only place tried, and the reason names it (one
    # line); the search order's places are kept in LibraryNotFound.attempts (test_native_library.py)
    reason = _musa_reason_in_fresh_process({"POLYGEMM_MUSA_LIBRARY": str(tmp_path / "nope.so"), "POLYGEMM_MUSA_EMULATION": "1"}, tmp_path)
    assert "POLYGEMM_MUSA_LIBRARY" in reason and "nope.so" in reason and "no such file" in reason, reason
    for label in ("package directory", "build tree", "system loader"):
        assert label not in reason, reason


@pytest.mark.musa
def test_wrong_library_is_rejected(tmp_path):
    lib = c_library(tmp_path / "libwrong.so", WRONG_ABI)
    junk = tmp_path / "junk.so"
    junk.write_text("not a library")
    for path, fragment in ((lib, "ABI version mismatch: library 99"), (junk, f"{junk}: ")):
        reason = _musa_reason_in_fresh_process({"POLYGEMM_MUSA_LIBRARY": str(path), "POLYGEMM_MUSA_EMULATION": "1"}, tmp_path)
        assert reason != "AVAILABLE" and fragment in reason, reason


@pytest.mark.musa
def test_import_does_not_load_cffi():
    code = "import sys, polygemm; polygemm.get_backend('musa'); assert 'cffi' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.musa
def test_execute_refuses_operands_that_are_not_those_of_the_plan(musa, rng):
    """The low-level Backend.execute(plan, Call(...)) on operands of another shape than the
    plan's is an ArgumentError naming the operand, not a product of the wrong size."""
    from polygemm.errors import ArgumentError
    from polygemm.problem import Call, normalize

    a, b = rand16(rng, (8, 5)), rand16(rng, (5, 3))
    plan = musa.plan(normalize(a, b))
    ok = musa.execute(plan, Call(a, b, None, None, 0, 0, 0, 0, 1.0, 0.0, None))
    assert reference_for(a, b).compare(ok).ok
    with pytest.raises(ArgumentError, match=r"a .*\(8, 4\).*plan"):
        musa.execute(plan, Call(a[:, :4], b[:4], None, None, 0, 0, 0, 0, 1.0, 0.0, None))


@pytest.mark.musa
def test_a_cached_plan_is_not_reused_for_scalars_its_kernels_cannot_take(musa, rng):
    """A plan made with alpha=2 is not reused from the cache for alpha=1e39 (past float32), which the kernels' float32
    scalars would turn into inf: the second call is refused as the first call with that alpha is."""
    from polygemm.errors import UnsupportedProblemError

    a, b = rand16(rng, (16, 8)), rand16(rng, (8, 4))
    assert reference_for(a, b, None, 2.0, 0.0).compare(pg.gemm(a, b, alpha=2.0, device="musa")).ok
    for alpha in (1e39, 1e-47):
        with pytest.raises(UnsupportedProblemError, match="float32"):
            pg.gemm(a, b, alpha=alpha, device="musa")
    assert reference_for(a, b, None, 3.0, 0.0).compare(pg.gemm(a, b, alpha=3.0, device="musa")).ok


@pytest.mark.musa
@pytest.mark.parametrize("orders", ["CC", "FF", "CF", "FC"])
def test_a_new_host_result_is_c_ordered_whatever_the_operands_order(musa, rng, orders):
    """numpy.matmul returns C-ordered results from Fortran-ordered operands; so does the musa backend, not its
    column-major device buffer (strides (2, 12)), of which memoryview(r).cast and torch's .view(-1) fail."""
    a, b = rand16(rng, (6, 4), orders[0]), rand16(rng, (4, 5), orders[1])
    got = pg.gemm(a, b, device="musa")
    assert got.flags.c_contiguous and got.flags.owndata
    assert reference_for(a, b, None, 1.0, 0.0).compare(got).ok
    memoryview(got).cast("B")


def test_alpha_beyond_float32_runs_on_the_reference_and_is_refused_by_float32_kernels(rng, musa):  # noqa: F811
    a, b = rand16(rng, (6, 5)), rand16(rng, (5, 4))
    with pytest.raises(pg.UnsupportedProblemError, match=r"alpha=1e\+39 does not fit the float32 scalars .*device='cpu'"):
        pg.gemm(a, b, alpha=1e39, device="musa")
    tiny = rand16(rng, (6, 5)) * np.float16(1e-4)
    res = pg.gemm(tiny, b, alpha=1e39, out=np.empty((6, 4), np.float32), device="auto")  # auto passes over musa
    assert pg.last_plan().backend == "cpu"
    assert np.all(np.isfinite(res))
    assert_close(res, tiny, b, None, 1e39, 0.0, out_dtype=np.float32, acc_dtype=np.float32)


@pytest.mark.musa
@pytest.mark.parametrize("order", ["F", "C"])
def test_musa_device_c_with_a_larger_leading_dimension(rng, musa, order):  # noqa: F811
    from polygemm.backends.musa import MusaArray

    m, n, k = 13, 11, 7
    a, b = rand16(rng, (m, k), order), rand16(rng, (k, n), order)
    big = rand16(rng, (m + 5, n + 3), order)  # c lives in its top-left corner
    c_host = big[:m, :n].copy()
    da, db = MusaArray.from_numpy(a), MusaArray.from_numpy(b)
    dbig = MusaArray.from_numpy(big)
    out = MusaArray.from_numpy(np.zeros((m, n), np.float16, order=order))
    pg.gemm(da, db, _View(dbig, m, n, order), beta=0.75, out=out, device="musa")
    res = reference_for(a, b, c_host, 1.0, 0.75, acc_dtype=np.float32).compare(out.get())
    assert res.ok, res.message
    for x in (da, db, dbig, out):
        x.free()


@pytest.mark.musa
def test_musa_failed_launch_leaves_out_as_it_was(rng, musa, monkeypatch):  # noqa: F811
    from polygemm.backends.musa import MusaArray
    from polygemm.backends.musa.sessions import Session

    a, b, c = rand16(rng, (9, 6)), rand16(rng, (6, 5)), rand16(rng, (9, 5))
    da, db, dc = MusaArray.from_numpy(a), MusaArray.from_numpy(b), MusaArray.from_numpy(c)
    before = rand16(rng, (9, 5))
    out = MusaArray.from_numpy(before)

    def fail(*args, **kwargs):
        raise pg.DeviceError("pgm_gemm_f16 failed: injected launch failure")

    monkeypatch.setattr(Session, "gemm", fail)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(da, db, dc, beta=1.0, out=out, device="musa")
    assert np.array_equal(out.get(), before), "out was overwritten by a failed call"
    for x in (da, db, dc, out):
        x.free()


@pytest.mark.musa
def test_musa_huge_m_with_k_zero_gives_the_empty_result(musa):  # noqa: F811
    a = np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), shape=(2**31, 0), strides=(0, 2))
    b = np.zeros((0, 0), np.float16)
    res = pg.gemm(a, b, device="musa")
    assert res.shape == (2**31, 0)


@pytest.mark.musa
def test_musa_errors_name_the_users_operands_through_the_swap(rng, musa, monkeypatch):  # noqa: F811
    """Row-major operands run as Cᵀ = Bᵀ·Aᵀ: a library error about its A concerns the user's b."""
    from polygemm.backends.musa.sessions import Session

    def fail(self, variant, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        raise pg.DeviceError("pgm_gemm_f16 failed: PGM_ERR_INVALID_ARGUMENT: A is not usable (injected)")

    monkeypatch.setattr(Session, "gemm", fail)
    with pytest.raises(pg.DeviceError, match=r"the library's A .* is your b, its B .* your a"):
        pg.gemm(rand16(rng, (9, 6)), rand16(rng, (6, 5)), device="musa")


def test_musa_host_flavor_beside_numpy_matmul(rng):
    """the host flavor (POLYGEMM_MUSA_EMULATION=1) gives numpy.matmul's shapes and float16 for
    transposed and strided views, vectors, K = 0 with c, in place; and refuses what it cannot do naming it."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    lib = next((ROOT / "build").glob("musa-host/**/libpolygemm_musa.so"), None)
    if lib is None:
        pytest.skip("libpolygemm_musa's host flavor is not built here (tests/test_musa.py builds it)")
    code = """
import numpy as np, polygemm as pg
from polygemm.testing import reference_for
rng = np.random.default_rng(5)
a = rng.standard_normal((5, 7)).astype(np.float16); b = rng.standard_normal((7, 3)).astype(np.float16)
def ok(got, a, b, c=None, beta=0.0):
    res = reference_for(a, b, c, 1.0, beta).compare(got); assert res.ok, res.message
r = pg.gemm(b.T, a.T, device="musa"); assert r.shape == (3, 5) and r.dtype == np.float16; ok(r, b.T, a.T)
r = pg.gemm(a[:, ::2], b[::2], device="musa"); ok(r, a[:, ::2], b[::2])
v = pg.matmul(a, b[:, 0], device="musa"); assert v.shape == (5,) == np.matmul(a, b[:, 0]).shape
c = np.ones((5, 3), np.float16); r = pg.gemm(a[:, :0], b[:0], c, beta=2.0, device="musa"); assert (r == 2.0).all()
c = rng.standard_normal((5, 3)).astype(np.float16); c0 = c.copy()
assert pg.gemm(a, b, c, beta=1.0, out=c, device="musa") is c; ok(c, a, b, c0, 1.0)
out = np.full((5, 3), 7, np.float16)
for kw, err in [(dict(out_dtype=np.float32), "writes float16 results only"), (dict(alpha=1e39), "does not fit the float32")]:
    try:
        pg.gemm(a, b, device="musa", out=None if "out_dtype" in kw else out, **kw)
    except pg.PolygemmError as exc:
        assert err in str(exc), exc
    else:
        raise AssertionError(kw)
assert (out == 7).all()
print("ok")
"""
    env = dict(os.environ, POLYGEMM_MUSA_EMULATION="1", POLYGEMM_MUSA_LIBRARY=str(lib))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


@pytest.mark.parametrize("value", ["true", "TRUE", "yes", " on ", "1"])
def test_musa_emulation_takes_each_spelling_of_on(monkeypatch, value):
    # every spelling of on enables the host and cuda flavors, as registry.env_flag reads the pytest suite's
    # POLYGEMM_TEST_QUICK (1, true, yes, on): POLYGEMM_MUSA_EMULATION=true does not leave musa unavailable as if the
    # variable were unset
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", value)
    av = _fake_musa_session(monkeypatch).probe()
    assert av.ok, av.reason


@pytest.mark.parametrize("value", ["0", "off", "", "no"])
def test_musa_emulation_off_still_says_how_to_turn_it_on(monkeypatch, value):
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", value)
    av = _fake_musa_session(monkeypatch).probe()
    assert not av.ok and "set POLYGEMM_MUSA_EMULATION=1 to use it" in av.reason and "'host' flavor" in av.reason


def test_musa_emulation_typo_is_named_not_taken_for_off(monkeypatch):
    # "ture" is not read as off: the reason says that the value given is the trouble
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "ture")
    av = _fake_musa_session(monkeypatch).probe()
    assert not av.ok and "\n" not in av.reason and len(av.reason) <= 120
    assert av.reason.startswith("POLYGEMM_MUSA_EMULATION='ture' is not on or off; set it to 1") and "'host' flavor" in av.reason
    assert "1, true, yes, on" in av.detail and "/tmp/libpolygemm_musa.so" in av.detail  # info -v's lines
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "ture")
    assert _fake_musa_session(monkeypatch, flavor="musa").probe().ok  # the product flavor never reads the variable


@pytest.mark.skipif(FLAVOR != "host", reason="the host flavor's wording; the GPU run builds the cuda flavor")
def test_musa_doc_commands_on_the_host_flavor(musa_host, capsys):
    """``POLYGEMM_MUSA_EMULATION=1 POLYGEMM_MUSA_LIBRARY=... polygemm info`` lists musa available as the host
    flavor, and ``polygemm gemm --dtype float16 --device musa --check`` passes, saying EMULATION."""
    assert main(["info"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("musa"))
    assert "available" in line and "unavailable" not in line and "host flavor" in line
    assert main(["gemm", "--shape", "96x80x72", "--dtype", "float16", "--device", "musa", "--check", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "variant : wmma_s4000" in out and "EMULATION" in out and "check: PASS" in out


@pytest.mark.parametrize("inputs", ["device", "numpy"])
def test_musa_bench_call_mode_times_polygemm_where_mublas_is_absent(musa_host, capsys, tmp_path, inputs):
    # "polygemm bench --device musa" (call mode, the default) on the host or cuda flavor, which have no muBLAS, times
    # polygemm and says the vendor is not timed, as kernel mode does (README: a figure not measured is null), not
    # "error: variant 'mublas' needs the musa flavor" with exit 2 before timing anything
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["bench", "--device", "musa", "--dtype", "float16", "--shapes", "64x64x64", "--repeats", "1", "--no-progress",
            "--inputs", inputs, "--json", str(js), "--markdown", str(md)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vendor polygemm.gemm(a, b, out=out, variant='mublas') not timed: variant 'mublas' needs the musa flavor" in out
    assert "gemm(auto) -> wmma_s4000" in out
    rec = json.loads(js.read_text())["records"][0]
    assert rec["tflops"] > 0 and rec["vendor_tflops"] is None and rec["vendor_us_per_call"] is None and rec["ratio"] is None
    row = next(ln for ln in md.read_text().splitlines() if ln.startswith("| 64×64×64"))
    assert "nan" not in row and row.count("–") >= 3


def test_the_float32_kernels_refuse_a_subnormal_they_would_round_and_auto_goes_to_cpu(musa):  # noqa: F811
    """Musa's kernels take float32 scalars and would scale alpha=1e-40 by its float32 rounding: musa refuses it saying
    why, device='auto' passes over it to the cpu, and a subnormal float32 holds exactly still runs on musa."""
    a = np.ones((4, 3), np.float16)
    b = np.ones((3, 5), np.float16)
    with pytest.raises(UnsupportedProblemError, match=r"alpha=1e-40 does not fit the float32 scalars of backend 'musa'.*"
                                                      r"below float32's normal range.*device='cpu'") as refused:
        pg.gemm(a, b, alpha=1e-40, device="musa")
    assert "''" not in str(refused.value), refused.value  # the backend's quoted name is not run into a possessive
    with pytest.raises(UnsupportedProblemError, match=r"beta=1e-40 does not fit"):
        pg.gemm(a, b, np.ones((4, 5), np.float16), beta=1e-40, device="musa")
    got = pg.gemm(a, b, alpha=1e-40, out_dtype=np.float32)
    plan = pg.last_plan()
    assert plan is not None and plan.backend == "cpu"
    assert any(n == "musa" and "alpha=1e-40 does not fit the float32 scalars" in w for n, w in plan.candidates)
    assert_within(got, a, b, None, 1e-40, out_dtype=np.float32)
    got = pg.gemm(a, b, alpha=2.0 ** -140, device="musa")  # exact in float32: the kernel's own scalar
    assert pg.last_plan().backend == "musa" and got.dtype == np.float16 and not got.any()  # 3 * 2**-140 is 0 in float16


@pytest.mark.parametrize("backend", ["cpu", "musa"])
def test_the_builtin_host_backends_pass_the_wide_scalar_case(backend, monkeypatch, fresh_registry):
    """the cpu backend (float64 scaling where needed) and musa's host flavor (float32 scalars, declared)."""
    if backend == "musa":
        monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
        fresh_registry.refresh()
        if not {i.name: i for i in pg.backends()}["musa"].available:
            pytest.skip("libpolygemm_musa (host flavor) is not built here")
    rows = [r for r in run_conformance(backend, groups="scaling") if r.case == "wide_scalars" and r.status != "skip"]
    assert rows and all(r.status == "pass" for r in rows), [r for r in rows if r.status != "pass"]  # (mublas: not built)


def test_info_json_on_stdout_stays_json_beside_a_warning_on_stderr(capsys, monkeypatch, fresh_registry):
    monkeypatch.setenv("POLYGEMM_PROBE_TIMEOUT", "soon")
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "maybe")
    rc, out, err = cli(capsys, ["info", "--json"])
    assert rc == 0
    # the command's own one line on stderr, not Python's file, line and source
    assert "polygemm: warning: POLYGEMM_PROBE_TIMEOUT='soon' is not a number; keeping 30 s" in err
    assert "RuntimeWarning" not in err
    data = json.loads(out)  # nothing but the JSON on stdout
    musa = {b["name"]: b for b in data["backends"]}["musa"]
    assert not musa["available"] and musa["reason"]  # not run (no library found), or refused for the value: never on
    assert {b["name"]: b for b in data["backends"]}["cpu"]["available"]


def test_store_result_hands_back_a_c_ordered_result_or_writes_out():
    """Every host backend's tail (cpu, musa, cuda's host path, plugins): a column-major result becomes C-ordered."""
    from polygemm.backend import store_result

    f = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    got = store_result(f, None)
    assert got.flags.c_contiguous and np.array_equal(got, f)
    out = np.empty((3, 4), np.float32)
    assert store_result(f, out) is out and np.array_equal(out, f)


@pytest.mark.musa
def test_bench_keeps_what_it_timed_and_fails_when_it_timed_nothing(musa, tmp_path, capsys):
    """A shape the backend refuses is "not timed" and the others are kept (numpy inputs in a layout musa's device
    arrays do not take: the copies' share is left out, the record kept); a run that timed nothing exits 1 and writes
    no empty file."""
    kept = tmp_path / "kept.json"
    assert main(["bench", "--device", "musa", "--dtype", "float16", "--inputs", "numpy", "--shapes", "64x64x64",
                 "64x64x64:nt", "--json", str(kept), "--no-progress"]) == 0
    assert [r["layout"] for r in json.loads(kept.read_text())["records"]] == ["nn", "nt"]
    none = tmp_path / "none.json"
    assert main(["bench", "--device", "musa", "--dtype", "float16", "--shapes", "64x64x64:nt", "64x64x64:tn",
                 "--json", str(none), "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "not timed" in captured.out and "nothing was timed" in captured.err and not none.exists()


def test_a_product_past_the_kernels_32_bit_sizes_is_refused_by_musa_and_auto_goes_to_cpu(musa):  # noqa: F811
    """The S4000 kernel indexes with 32-bit integers: musa refuses a larger product in its supports() (device='auto'
    lists musa as passed over and computes on the next backend), and device='musa' raises saying to split it."""
    a = np.broadcast_to(np.float16(1), (70000, 40000))  # 2.8e9 elements: past 2**31
    b = np.ones((40000, 2), np.float16)
    plan = pg.explain(a, b)
    assert plan.backend != "musa"  # the next backend: the cpu, or a plugin a machine has installed
    assert any(n == "musa" and "2**31 elements" in w for n, w in plan.candidates), plan.candidates
    with pytest.raises(UnsupportedProblemError, match=r"32-bit"):
        pg.explain(a, b, device="musa")
    wide = np.broadcast_to(np.float16(0), (50000, 1))
    plan = pg.explain(wide, np.broadcast_to(np.float16(0), (1, 50000)))  # a 2.5e9-element result
    assert plan.backend != "musa" and any(n == "musa" and "32-bit sizes" in w for n, w in plan.candidates), plan.candidates


def test_an_integer_product_refused_by_musa_is_told_no_float32_result_musa_does_not_write(musa):  # noqa: F811
    """musa computes float16 into float16 results only: its refusal of int8 names the float16 cast and when it is
    exact, not out_dtype=np.float32, which musa would refuse next."""
    x = np.ones((4, 4), np.int8)
    with pytest.raises(pg.DTypeError, match=r"a\.astype\(np\.float16\).*below 2\*\*11") as info:
        pg.gemm(x, x, device="musa")
    assert "out_dtype=np.float32" not in str(info.value)


@pytest.mark.musa
def test_musa_explains_an_empty_result_as_made_on_the_host(musa):  # noqa: F811
    # M or N of 0: the result is made on the host, nothing uploaded or launched, and explain says no copies
    b = np.ones((4, 3), np.float16)
    for a in (np.ones((0, 4), np.float16), np.ones((5, 4), np.float16)[:, :4]):
        plan = pg.explain(a, b[:, :0] if a.shape[0] else b, device="musa")
        assert not plan.copies, plan.copies
        assert pg.gemm(a, b[:, :0] if a.shape[0] else b, device="musa").size == 0


@pytest.mark.musa
@pytest.mark.parametrize("order", ["C", "F"])
def test_musa_verify_writes_a_checked_result_into_a_device_out(rng, musa, order):  # noqa: F811
    from polygemm.backends.musa import MusaArray
    from polygemm.testing import inject_fault

    m, n, k = 13, 11, 7
    a, b, c = rand16(rng, (m, k), order), rand16(rng, (k, n), order), rand16(rng, (m, n), order)
    da, db, dc = MusaArray.from_numpy(a), MusaArray.from_numpy(b), MusaArray.from_numpy(c)
    out = MusaArray.empty((m, n), order)
    assert pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, out=out, device="musa", verify="raise") is out
    assert_within(out.get(), a, b, c, 0.5, -1.0)
    big = MusaArray.from_numpy(np.zeros((m + 4, n + 3), np.float16, order=order))  # out in its top-left corner
    view = _View(big, m, n, order)
    assert pg.gemm(da, db, out=view, device="musa", verify="raise") is view
    got = big.get()
    assert_within(got[:m, :n], a, b)
    assert not got[m:].any() and not got[:, n:].any(), "wrote past out's corner"
    before = out.get()
    with inject_fault(3, 5, value=1e3), pytest.raises(pg.VerificationError):
        pg.gemm(da, db, out=out, device="musa", verify="raise")
    assert np.array_equal(out.get(), before), "a failed check reached out"
    other = MusaArray.empty((m, n), "F" if order == "C" else "C")  # the other memory order: copied an element at a time
    assert musa.copy_result(dc, other) and np.array_equal(other.get(), c)
    assert not musa.copy_result(c, other)  # NumPy data: not the backend's to copy
    for x in (da, db, dc, out, big, other):
        x.free()


@pytest.mark.musa
def test_musa_arrays_and_prepared_b_keep_the_flavor_gate(musa_library, monkeypatch):
    """Without POLYGEMM_MUSA_EMULATION an emulation's library serves no MusaArray or PreparedB either:
    backend.gemm_prepared ran on the CPU while device='musa' said to turn the emulation on."""
    from polygemm.backends.musa import MusaArray, PreparedB

    if FLAVOR == "musa":
        pytest.skip("the musa flavor needs no emulation switch")
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.delenv("POLYGEMM_MUSA_EMULATION", raising=False)
    _reset()
    try:
        b = np.ones((3, 2), np.float16)
        for make in (lambda: MusaArray.from_numpy(b), lambda: MusaArray.empty((3, 2)), lambda: PreparedB(b)):
            with pytest.raises(pg.BackendUnavailableError, match="POLYGEMM_MUSA_EMULATION=1"):
                make()
        monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
        with PreparedB(b) as pb:
            assert np.array_equal(pg.get_backend("musa").gemm_prepared(np.ones((4, 3), np.float16), pb), np.full((4, 2), 3, np.float16))
    finally:
        _reset()
