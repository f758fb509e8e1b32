"""The musa backend through libpolygemm_musa (marked ``musa``).

CI builds the ``host`` flavor with CMake and runs these end to end on the CPU. On the GPU
machine ``POLYGEMM_MUSA_TEST_FLAVOR=cuda`` builds the ``cuda`` flavor (the S4000 kernel's
source through the compat header) and adds the large shapes.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
import polygemm.registry as registry
from polygemm.testing import reference_for, run_conformance
from conftest import run_concurrently

pytestmark = pytest.mark.musa
ROOT = Path(__file__).resolve().parents[1]
FLAVOR = os.environ.get("POLYGEMM_MUSA_TEST_FLAVOR", "host")


def _cmake() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        pytest.skip("cmake not found (pip install '.[test]' provides it)")
    return exe


@pytest.fixture(scope="session")
def musa_library() -> Path:
    """Build libpolygemm_musa in the requested flavor once per session (or use the given one)."""
    given = os.environ.get("POLYGEMM_MUSA_LIBRARY")
    if given:
        return Path(given)
    build = ROOT / "build" / f"musa-{FLAVOR}"
    cmake = _cmake()
    build.parent.mkdir(exist_ok=True)
    # one build at a time: pytest -n N runs this fixture in every worker, and two CMake runs in
    # one build directory break each other's compiler checks
    with open(build.parent / f"musa-{FLAVOR}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cfg = subprocess.run([cmake, "-S", str(ROOT), "-B", str(build), f"-DPOLYGEMM_MUSA_FLAVOR={FLAVOR}", "-DCMAKE_BUILD_TYPE=Release"], capture_output=True, text=True)
        assert cfg.returncode == 0, cfg.stdout + cfg.stderr
        bld = subprocess.run([cmake, "--build", str(build), "-j", "2"], capture_output=True, text=True)
        assert bld.returncode == 0, bld.stdout + bld.stderr
    lib = next(build.rglob("libpolygemm_musa.so"))
    return lib


def _reset() -> None:
    import polygemm.backends.musa.backend as mb

    mb.sessions._session = None
    registry.refresh()


@pytest.fixture
def musa(musa_library, monkeypatch):
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(musa_library))
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
    _reset()
    info = {i.name: i for i in pg.backends()}["musa"]
    if not info.available and FLAVOR != "host":  # the cuda and musa flavors need their GPU; the host flavor runs anywhere
        pytest.skip(f"the {FLAVOR} flavor of libpolygemm_musa cannot run here: {info.reason}")
    assert info.available, info.reason
    yield info.backend
    _reset()


def rand16(rng, shape, order="C"):
    return np.asarray(rng.standard_normal(shape).astype(np.float16), order=order)


@pytest.fixture
def rng():
    return np.random.default_rng(secrets.randbits(32))


SHAPES = [(1, 1, 1), (2, 3, 5), (7, 13, 5), (31, 37, 41), (127, 129, 131), (257, 65, 33), (61, 7, 97)]


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


def test_explain_says_emulation(musa, rng):
    a, b = rand16(rng, (4, 4)), rand16(rng, (4, 4))
    plan = pg.explain(a, b, device="musa")
    if musa.flavor() != "musa":
        assert any("EMULATION" in n for n in plan.notes), str(plan)


def test_new_b_every_call_same_shape_never_stale(musa, rng):
    a = rand16(rng, (33, 17))
    b = rand16(rng, (17, 29))
    for _ in range(4):
        b[...] = rand16(rng, (17, 29))  # same buffer, new contents
        assert reference_for(a, b).compare(pg.gemm(a, b, device="musa")).ok
        b2 = rand16(rng, (17, 29))  # new buffer, same shape
        assert reference_for(a, b2).compare(pg.gemm(a, b2, device="musa")).ok


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


def test_eight_threads_at_once(musa):
    def work(i: int) -> None:
        rng = np.random.default_rng(secrets.randbits(32))
        for j in range(4):
            a, b = rand16(rng, (20 + i, 30 + j)), rand16(rng, (30 + j, 17 + 2 * i))
            res = reference_for(a, b).compare(pg.gemm(a, b, device="musa"))
            assert res.ok, res.message

    errors = run_concurrently(work, 8)
    assert not errors, errors


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


def test_native_errors_carry_the_library_message(musa):
    from polygemm.backends.musa.sessions import session

    s = session()
    with pytest.raises(pg.DeviceError, match="pgm_free failed: PGM_ERR_(INVALID_ARGUMENT|DEVICE): .*pgm_free"):
        s.free(12345678)  # never allocated
    with pytest.raises(pg.DeviceError, match="PGM_ERR"):
        s.gemm("wmma_s4000", 4, 4, 4, 1.0, 0, 4, 0, 4, 0.0, 0, 4)


def test_mublas_variant_reports_not_supported_off_musa(musa, rng):
    if musa.flavor() == "musa":
        pytest.skip("real MUSA flavor")
    a = rand16(rng, (4, 4))
    with pytest.raises(pg.UnsupportedProblemError, match="needs the musa flavor"):
        pg.explain(a, a, device="musa", variant="mublas")
    from polygemm.backends.musa.sessions import session

    s = session()  # the library itself refuses too, with its own message
    with pytest.raises(pg.DeviceError, match="NOT_SUPPORTED"):
        s.gemm("mublas", 1, 1, 1, 1.0, 0, 1, 0, 1, 0.0, 0, 1)
    assert pg.explain(a, a, device="auto").variant != "mublas"


def test_conformance(musa):
    results = run_conformance("musa", quick=True, variants=["wmma_s4000"])
    fails = [r for r in results if r.status == "fail"]
    assert results and not fails, fails[:5]


@pytest.mark.skipif(FLAVOR != "cuda", reason="large shapes run on the GPU machine with the cuda flavor")
@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (4095, 4097, 4093), (1000, 3000, 2000)])
def test_large_shapes_cuda_flavor(musa, rng, m, n, k):
    a, b = rand16(rng, (m, k)), rand16(rng, (k, n))
    assert reference_for(a, b).compare(pg.gemm(a, b, device="musa")).ok


# -- library discovery ------------------------------------------------------------------

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


def test_missing_explicit_library_is_final(tmp_path):
    # issue 17 item 12: an explicit path is the only place tried, and the reason names it (one
    # line); the search order's places are kept in LibraryNotFound.attempts (test_musa_native.py)
    reason = _musa_reason_in_fresh_process({"POLYGEMM_MUSA_LIBRARY": str(tmp_path / "nope.so"), "POLYGEMM_MUSA_EMULATION": "1"}, tmp_path)
    assert "POLYGEMM_MUSA_LIBRARY" in reason and "nope.so" in reason and "no such file" in reason, reason
    for label in ("package directory", "build tree", "system loader"):
        assert label not in reason, reason


def test_wrong_library_is_rejected(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a wrong library")
    src = tmp_path / "wrong.c"
    src.write_text("int pgm_abi_version(void){return 99;}\nconst char* pgm_build_info(void){return \"flavor=host\";}\n")
    lib = tmp_path / "libwrong.so"
    subprocess.run([cc, "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    junk = tmp_path / "junk.so"
    junk.write_text("not a library")
    for path, fragment in ((lib, "ABI version mismatch: library 99"), (junk, f"{junk}: ")):
        reason = _musa_reason_in_fresh_process({"POLYGEMM_MUSA_LIBRARY": str(path), "POLYGEMM_MUSA_EMULATION": "1"}, tmp_path)
        assert reason != "AVAILABLE" and fragment in reason, reason


def test_import_does_not_load_cffi():
    code = "import sys, polygemm; polygemm.get_backend('musa'); assert 'cffi' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


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


def test_a_cached_plan_is_not_reused_for_scalars_its_kernels_cannot_take(musa, rng):
    """A plan made with alpha=2 was reused from the cache for alpha=1e39 (past float32), which
    the kernels' float32 scalars turn into inf: the second call must be refused as the first
    call with that alpha is."""
    from polygemm.errors import UnsupportedProblemError

    a, b = rand16(rng, (16, 8)), rand16(rng, (8, 4))
    assert reference_for(a, b, None, 2.0, 0.0).compare(pg.gemm(a, b, alpha=2.0, device="musa")).ok
    for alpha in (1e39, 1e-47):
        with pytest.raises(UnsupportedProblemError, match="float32"):
            pg.gemm(a, b, alpha=alpha, device="musa")
    assert reference_for(a, b, None, 3.0, 0.0).compare(pg.gemm(a, b, alpha=3.0, device="musa")).ok


@pytest.mark.parametrize("orders", ["CC", "FF", "CF", "FC"])
def test_a_new_host_result_is_c_ordered_whatever_the_operands_order(musa, rng, orders):
    """numpy.matmul returns C-ordered results from Fortran-ordered operands; the musa backend had handed back its
    column-major device buffer (strides (2, 12)): memoryview(r).cast and torch's .view(-1) of it failed."""
    a, b = rand16(rng, (6, 4), orders[0]), rand16(rng, (4, 5), orders[1])
    got = pg.gemm(a, b, device="musa")
    assert got.flags.c_contiguous and got.flags.owndata
    assert reference_for(a, b, None, 1.0, 0.0).compare(got).ok
    memoryview(got).cast("B")
