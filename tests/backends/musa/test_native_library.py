"""The native MUSA library's lifetime rules and the musa package's edges (marked ``musa``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for

from tests.helpers import REPO_ROOT, WRONG_ABI, _reset, c_library, rand16


ROOT = REPO_ROOT


PRELUDE = '''
import threading, time
import numpy as np
from polygemm.backends.musa.library import load_library
nl = load_library()
ffi, lib = nl.ffi, nl.lib
NULL = ffi.NULL

def err():
    return ffi.string(lib.pgm_last_error()).decode()

def name(st):
    return ffi.string(lib.pgm_status_name(st)).decode()

def ok(st, what):
    assert st == 0, f"{what}: {name(st)}: {err()}"

def handle():
    out = ffi.new("pgm_handle **")
    ok(lib.pgm_handle_create(0, NULL, out), "pgm_handle_create")
    return out[0]

def dev(h, host):
    """A pgm_malloc block holding the float16 matrix `host` in column-major order."""
    arr = np.asfortranarray(host, dtype=np.float16)
    out = ffi.new("void **")
    ok(lib.pgm_malloc(h, max(arr.nbytes, 2), out), "pgm_malloc")
    ok(lib.pgm_memcpy_h2d(h, out[0], ffi.from_buffer(arr.T.copy()), arr.nbytes), "h2d")
    return out[0]

def get(h, p, shape):
    out = np.empty(shape[::-1], np.float16)
    ok(lib.pgm_memcpy_d2h(h, ffi.from_buffer(out), p, out.nbytes), "d2h")
    return out.T

def prepare(h, b):
    d = dev(h, b)
    out = ffi.new("pgm_prepared_b **")
    ok(lib.pgm_prepare_b(h, b.shape[0], b.shape[1], d, max(b.shape[0], 1), out), "pgm_prepare_b")
    ok(lib.pgm_free(h, d), "pgm_free")
    return out[0]

def check(got, a, b):
    want = a.astype(np.float64) @ b.astype(np.float64)
    err_ = np.max(np.abs(got.astype(np.float64) - want) / (1 + np.abs(want)))
    assert err_ < 0.05, f"max relative error {err_}"

rng = np.random.default_rng(SEED)
'''


def _isolated(musa_library: Path, body: str, timeout: float = 120) -> str:
    """Run PRELUDE + body in a new interpreter against the library; return its stdout."""
    code = PRELUDE.replace("SEED", str(secrets.randbits(32))) + textwrap.dedent(body)
    env = {**os.environ, "POLYGEMM_MUSA_LIBRARY": str(musa_library), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MALLOC_MMAP_THRESHOLD_": "131072"}  # large blocks are unmapped when freed
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode} (a negative one is a signal: -11 is a segfault)\n{r.stdout}\n{r.stderr[-6000:]}"
    return r.stdout


# A GEMM long enough (a few hundred ms on the host flavor) for another thread to act while
# it runs; with malloc's mmap threshold fixed (see _isolated) B's 512 KiB are their own
# mapping, so reading them after a free faults at once instead of reading stale data.
RACE = '''
M, K, N = 2048, 512, 512  # long enough on the host flavor (a fraction of a second) that release lands inside the call
h1, h2 = handle(), handle()
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
da, dc = dev(h1, a), dev(h1, np.zeros((M, N), np.float16))
pb = prepare(h1, b)
times = {}
status = {}

def gemm():
    times["gemm_start"] = time.monotonic()
    status["gemm"] = lib.pgm_gemm_f16_prepared(h1, M, N, K, 1.0, da, M, pb, 0.0, dc, M)
    times["gemm_end"] = time.monotonic()

t = threading.Thread(target=gemm)
t.start()
while "gemm_start" not in times:
    time.sleep(0.001)
time.sleep(0.05)  # well inside the call (cffi releases the GIL)
'''


FLAVOR = os.environ.get("POLYGEMM_MUSA_TEST_FLAVOR", "host")


def _discovery(env: dict[str, str], src_root: Path) -> dict:
    """The musa reason and LibraryNotFound.attempts from a new process (a library loaded
    here would be found again by the system loader), the build tree at src_root."""
    code = (
        "import json, pathlib, os\n"
        "import polygemm.backends.musa.library as L, polygemm as pg\n"
        f"L._SRC_ROOT = pathlib.Path({str(src_root)!r})\n"
        "i = {x.name: x for x in pg.backends()}['musa']\n"
        "try:\n"
        "    L.load_library(); attempts = []\n"
        "except L.LibraryNotFound as exc:\n"
        "    attempts = [[a.label, a.where, a.why] for a in exc.attempts]; details = exc.details()\n"
        "print(json.dumps({'reason': 'AVAILABLE' if i.available else i.reason, 'attempts': attempts}))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k != "POLYGEMM_MUSA_LIBRARY"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(src_root),
                       env={**clean, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), "POLYGEMM_MUSA_EMULATION": "1", **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.musa
def test_abi_version_and_stale_handle_status(musa_library):
    from polygemm.backends.musa import library

    assert library.ABI_VERSION == 2
    out = _isolated(musa_library, '''
        assert lib.pgm_abi_version() == lib.PGM_ABI_VERSION == 2
        assert "abi=2;" in ffi.string(lib.pgm_build_info()).decode()
        print(name(lib.PGM_ERR_STALE_HANDLE), name(lib.PGM_ERR_STALE_PREPARED_B))
    ''')
    assert out.split() == ["PGM_ERR_STALE_HANDLE", "PGM_ERR_STALE_PREPARED_B"]


@pytest.mark.musa
def test_destroyed_handle_is_stale_and_never_reaches_a_reused_address(musa_library):
    """A second destroy is refused as stale, never freeing whichever live handle malloc has put at the same address
    (and reporting OK); a use after destroy is refused, never reading freed memory."""
    _isolated(musa_library, '''
        h1 = handle()
        ok(lib.pgm_handle_destroy(h1), "first destroy")
        h2 = handle()  # address-keyed liveness would often give h2 the address of h1
        st = lib.pgm_handle_destroy(h1)
        assert st == lib.PGM_ERR_STALE_HANDLE, (name(st), err())
        assert "destroyed" in err() and "pgm_handle_destroy" in err(), err()
        out = ffi.new("void **")
        st = lib.pgm_malloc(h1, 64, out)
        assert st == lib.PGM_ERR_STALE_HANDLE and out[0] == NULL, name(st)
        st = lib.pgm_synchronize(h1)
        assert st == lib.PGM_ERR_STALE_HANDLE, name(st)
        # h2 is untouched by all of that
        a = rng.standard_normal((5, 3)).astype(np.float16)
        b = rng.standard_normal((3, 4)).astype(np.float16)
        da, db, dc = dev(h2, a), dev(h2, b), dev(h2, np.zeros((5, 4), np.float16))
        ok(lib.pgm_gemm_f16(h2, 5, 4, 3, 1.0, da, 5, db, 3, 0.0, dc, 5), "gemm on h2")
        check(get(h2, dc, (5, 4)), a, b)
        for p in (da, db, dc):
            ok(lib.pgm_free(h2, p), "pgm_free")
        ok(lib.pgm_handle_destroy(h2), "destroy h2")
        assert lib.pgm_handle_destroy(NULL) == 0
    ''')


@pytest.mark.musa
def test_released_prepared_b_is_stale_and_never_reaches_a_reused_address(musa_library):
    """Releasing a prepared B twice is refused as stale, never freeing a different, live object."""
    _isolated(musa_library, '''
        h = handle()
        b = rng.standard_normal((16, 8)).astype(np.float16)
        pb1 = prepare(h, b)
        ok(lib.pgm_prepared_b_release(pb1), "first release")
        pb2 = prepare(h, b)
        st = lib.pgm_prepared_b_release(pb1)
        assert st == lib.PGM_ERR_STALE_PREPARED_B, (name(st), err())
        assert "released" in err(), err()
        kn = ffi.new("int[2]")
        st = lib.pgm_prepared_b_shape(pb1, kn, kn + 1)
        assert st == lib.PGM_ERR_STALE_PREPARED_B, name(st)
        a = rng.standard_normal((7, 16)).astype(np.float16)
        da, dc = dev(h, a), dev(h, np.zeros((7, 8), np.float16))
        st = lib.pgm_gemm_f16_prepared(h, 7, 8, 16, 1.0, da, 7, pb1, 0.0, dc, 7)
        assert st == lib.PGM_ERR_STALE_PREPARED_B, name(st)
        # pb2 is still whole
        ok(lib.pgm_prepared_b_shape(pb2, kn, kn + 1), "shape of pb2")
        assert (kn[0], kn[1]) == (16, 8)
        ok(lib.pgm_gemm_f16_prepared(h, 7, 8, 16, 1.0, da, 7, pb2, 0.0, dc, 7), "gemm with pb2")
        check(get(h, dc, (7, 8)), a, b)
        ok(lib.pgm_prepared_b_release(pb2), "release pb2")
        assert lib.pgm_prepared_b_release(NULL) == 0
    ''')


@pytest.mark.musa
def test_tokens_of_the_wrong_kind_or_made_up_are_refused_not_dereferenced(musa_library):
    _isolated(musa_library, '''
        h = handle()
        pb = prepare(h, np.ones((4, 4), np.float16))
        as_handle = ffi.cast("pgm_handle *", pb)
        st = lib.pgm_synchronize(as_handle)
        assert st == lib.PGM_ERR_STALE_HANDLE and "never returned by pgm_handle_create" in err(), (name(st), err())
        as_pb = ffi.cast("pgm_prepared_b *", h)
        st = lib.pgm_prepared_b_release(as_pb)
        assert st == lib.PGM_ERR_STALE_PREPARED_B, name(st)
        for junk in (0x10, 0x7fffdeadbee0, 0x4800ffffffffffff):
            st = lib.pgm_handle_destroy(ffi.cast("pgm_handle *", junk))
            assert st == lib.PGM_ERR_STALE_HANDLE, (hex(junk), name(st))
            st = lib.pgm_prepared_b_release(ffi.cast("pgm_prepared_b *", junk))
            assert st == lib.PGM_ERR_STALE_PREPARED_B, (hex(junk), name(st))
        ok(lib.pgm_prepared_b_release(pb), "release")
        ok(lib.pgm_handle_destroy(h), "destroy")
    ''')


@pytest.mark.musa
def test_release_waits_for_the_gemm_using_it_c_abi(musa_library):
    """In the library: a release from another thread while the GEMM reads B waits for it."""
    _isolated(musa_library, RACE + '''
st = lib.pgm_prepared_b_release(pb)
times["release_end"] = time.monotonic()
t.join()
ok(st, "release")
ok(status["gemm"], "gemm")
assert times["release_end"] >= times["gemm_end"] - 0.02, times  # the gemm thread notes its end a moment after its C call returns
check(get(h1, dc, (M, N)), a, b)
st = lib.pgm_gemm_f16_prepared(h1, M, N, K, 1.0, da, M, pb, 0.0, dc, M)
assert st == lib.PGM_ERR_STALE_PREPARED_B, name(st)
''')


@pytest.mark.musa
def test_free_and_destroy_wait_for_the_call_using_them(musa_library):
    """The same use after free: pgm_free of an operand, pgm_handle_destroy of the handle."""
    if FLAVOR != "host":
        pytest.skip("the device flavors' musaFree waits for kernels by itself")
    _isolated(musa_library, RACE + '''
st_free = lib.pgm_free(h2, da)
times["free_end"] = time.monotonic()
t.join()
ok(st_free, "pgm_free of A during the gemm")
ok(status["gemm"], "gemm")
assert times["free_end"] >= times["gemm_end"] - 0.02, times  # the gemm thread notes its end a moment after its C call returns
check(get(h1, dc, (M, N)), a, b)
da = dev(h1, a)
t = threading.Thread(target=gemm)
times.clear()
t.start()
while "gemm_start" not in times:
    time.sleep(0.001)
time.sleep(0.05)
st = lib.pgm_handle_destroy(h1)
times["destroy_end"] = time.monotonic()
t.join()
ok(st, "destroy during the gemm")
ok(status["gemm"], "gemm")
assert times["destroy_end"] >= times["gemm_end"] - 0.02, times  # the gemm thread notes its end a moment after its C call returns
check(get(h2, dc, (M, N)), a, b)
assert lib.pgm_synchronize(h1) == lib.PGM_ERR_STALE_HANDLE
''')


@pytest.mark.musa
def test_host_flavor_refuses_beta_with_a_never_written_c(musa_library):
    """In the library (host flavor): beta != 0 reads C, so C must have been written; fresh blocks hold NaN, as device
    memory holds garbage, not zeros."""
    if FLAVOR != "host":
        pytest.skip("only the host flavor can know whether C was written")
    _isolated(musa_library, '''
        h = handle()
        out = ffi.new("void **")
        ok(lib.pgm_malloc(h, 4 * 3 * 2, out), "pgm_malloc")
        fresh = out[0]
        assert np.isnan(get(h, fresh, (4, 3)).astype(np.float32)).all()
        a = rng.standard_normal((4, 5)).astype(np.float16)
        b = rng.standard_normal((5, 3)).astype(np.float16)
        da, pb = dev(h, a), prepare(h, b)
        st = lib.pgm_gemm_f16_prepared(h, 4, 3, 5, 1.0, da, 4, pb, 1.0, fresh, 4)
        assert st == lib.PGM_ERR_INVALID_ARGUMENT and "beta" in err() and "never written" in err(), (name(st), err())
        db = dev(h, b)
        st = lib.pgm_gemm_f16(h, 4, 3, 5, 1.0, da, 4, db, 5, 0.5, fresh, 4)
        assert st == lib.PGM_ERR_INVALID_ARGUMENT and "never written" in err(), (name(st), err())
        ok(lib.pgm_gemm_f16_prepared(h, 4, 3, 5, 1.0, da, 4, pb, 0.0, fresh, 4), "beta=0 writes C")
        ok(lib.pgm_gemm_f16_prepared(h, 4, 3, 5, 1.0, da, 4, pb, 1.0, fresh, 4), "now C holds values")
        check(get(h, fresh, (4, 3)), a, 2 * b.astype(np.float32))
    ''')


@pytest.mark.musa
def test_release_waits_for_gemm_prepared_in_flight(musa, rng, monkeypatch):
    """In Python: release() while another thread is inside gemm_prepared (here held in its upload) waits for it; a
    call that starts after release() began is refused."""
    from polygemm.backends.musa import MusaArray, PreparedB

    b = rand16(rng, (24, 16))
    a = rand16(rng, (9, 24))
    pb = PreparedB(b)
    entered, go = threading.Event(), threading.Event()
    original = MusaArray.set

    def held_set(self, array):
        if threading.current_thread().name == "gemm":
            entered.set()
            assert go.wait(30)
        original(self, array)

    monkeypatch.setattr(MusaArray, "set", held_set)
    result: dict = {}

    def gemm():
        try:
            result["out"] = musa.gemm_prepared(a, pb)
        except Exception as exc:
            result["error"] = exc

    def release():
        try:
            pb.release()
        except Exception as exc:
            result["release_error"] = exc

    worker = threading.Thread(target=gemm, name="gemm")
    worker.start()
    assert entered.wait(30)
    releaser = threading.Thread(target=release, name="release")
    releaser.start()
    time.sleep(0.2)
    try:
        assert releaser.is_alive(), "release() returned while gemm_prepared was still using the prepared B"
        with pytest.raises(pg.ArgumentError, match="released"):
            musa.gemm_prepared(a, pb)  # refused at once, not queued behind the release
    finally:
        go.set()
        worker.join(30)
        releaser.join(30)
    assert "error" not in result and "release_error" not in result, result
    assert reference_for(a, b).compare(result["out"]).ok
    assert pb.released
    with pytest.raises(pg.ArgumentError, match="released"):
        musa.gemm_prepared(a, pb)


@pytest.mark.musa
def test_gemm_prepared_beta_needs_c(musa, rng):
    """Like gemm, beta != 0 without c is an error naming both (there is no C to read)."""
    from polygemm.backends.musa import PreparedB

    with PreparedB(rand16(rng, (6, 5))) as pb:
        a = rand16(rng, (4, 6))
        with pytest.raises(pg.ArgumentError, match=r"beta=1\.0 needs c.*\(4, 5\)"):
            musa.gemm_prepared(a, pb, beta=1.0)
        c = rand16(rng, (4, 5))
        got = musa.gemm_prepared(a, pb, c, beta=1.0)
        assert not np.isnan(got.astype(np.float32)).any()
        assert musa.gemm_prepared(a, pb, beta=0.0).shape == (4, 5)


@pytest.mark.musa
def test_gemm_prepared_scalars_that_float32_cannot_hold_are_refused(musa, rng):
    """Items 5 and 9 on the prepared path: no NaN from float32(1e39), no bare OverflowError."""
    from polygemm.backends.musa import PreparedB

    pb_b = rand16(rng, (3, 3))
    with PreparedB(pb_b) as pb:
        a = rand16(rng, (2, 3))
        # 1e-45 and 1e-40: subnormals float32 rounds (1.4e-45 is 40% off) -- gemm refuses them too (fits_float32), and
        # the prepared path refuses them the same way
        for bad in (1e39, -1e39, 1e-50, 10**400, 1e-45, -1e-40):
            with pytest.raises(pg.ArgumentError, match="alpha"):
                musa.gemm_prepared(a, pb, alpha=bad)
        exact = 2.0**-140  # a subnormal float32 holds exactly: taken, and scaled by it
        assert reference_for(a, pb_b, None, exact, 0.0).compare(musa.gemm_prepared(a, pb, alpha=exact)).ok
        with pytest.raises(pg.ArgumentError, match="beta"):
            musa.gemm_prepared(a, pb, rand16(rng, (2, 3)), beta=1e39)
        for bad in (float("nan"), True, "2"):
            with pytest.raises(pg.ArgumentError, match="alpha"):
                musa.gemm_prepared(a, pb, alpha=bad)


@pytest.mark.musa
def test_gemm_prepared_k0_and_m_beyond_int32(musa, rng):
    """On the prepared path: M >= 2**31 with K = 0 is an empty product (the cpu backend returns it), not an
    OverflowError from a C int; K = 0 gives beta * c."""
    from polygemm.backends.musa import PreparedB

    big = 2**31
    with PreparedB(np.zeros((0, 0), np.float16)) as pb:
        got = musa.gemm_prepared(np.zeros((big, 0), np.float16), pb)
        assert got.shape == (big, 0) and got.dtype == np.float16
    with PreparedB(np.zeros((0, 5), np.float16)) as pb:
        c = rand16(rng, (3, 5))
        got = musa.gemm_prepared(np.zeros((3, 0), np.float16), pb, c, alpha=2.0, beta=-1.5)
        assert np.array_equal(got, (np.float32(-1.5) * c.astype(np.float32)).astype(np.float16))
        assert not musa.gemm_prepared(np.zeros((3, 0), np.float16), pb).any()


@pytest.mark.musa
def test_big_endian_float16_is_converted_and_masked_arrays_refused(musa, rng):
    """For the musa package: '>f2' is float16, converted, not refused as "float16; got float16"; masked arrays are
    refused."""
    from polygemm.backends.musa import MusaArray, PreparedB

    a = rand16(rng, (5, 4))
    b = rand16(rng, (4, 3))
    with MusaArray.from_numpy(a.astype(">f2")) as da:
        assert np.array_equal(da.get(), a)
        da.set(np.asfortranarray(a[::-1].astype(">f2")))
        assert np.array_equal(da.get(), a[::-1])
    with PreparedB(b.astype(">f2")) as pb:
        assert reference_for(a, b).compare(musa.gemm_prepared(a.astype(">f2"), pb)).ok
    masked = np.ma.masked_array(a, mask=np.zeros_like(a, bool))
    with pytest.raises(pg.ArgumentError, match="masked array.*filled"):
        MusaArray.from_numpy(masked)
    with pytest.raises(pg.ArgumentError, match="masked"):
        PreparedB(np.ma.masked_array(b))
    with pytest.raises(pg.DTypeError, match="float16.*got float32"):
        PreparedB(b.astype(np.float32))


@pytest.mark.musa
def test_prepared_b_stays_with_the_library_it_was_made_in(musa, rng):
    """A PreparedB keeps its own session: after the backend is reloaded it still works, passed to the library it was
    made in, not, as an address, to whichever library is loaded now."""
    from polygemm.backends.musa import PreparedB

    b = rand16(rng, (8, 6))
    pb = PreparedB(b)
    _reset()
    a = rand16(rng, (3, 8))
    assert reference_for(a, b).compare(musa.gemm_prepared(a, pb)).ok
    pb.release()


@pytest.mark.musa
def test_explicit_library_path_that_does_not_exist_is_final(musa_library, tmp_path):
    """With a usable library in the build tree, a wrong $POLYGEMM_MUSA_LIBRARY is final: no other library is loaded
    instead, silently."""
    missing = tmp_path / "not-here" / "libpolygemm_musa.so"
    got = _discovery({"POLYGEMM_MUSA_LIBRARY": str(missing)}, ROOT)
    reason = got["reason"]
    assert reason != "AVAILABLE", "fell back to another library"
    assert "POLYGEMM_MUSA_LIBRARY" in reason and "libpolygemm_musa.so" in reason and "no such file" in reason, reason
    assert "\n" not in reason and len(reason) <= 120, reason
    assert got["attempts"] == [["$POLYGEMM_MUSA_LIBRARY", str(missing), "no such file"]]


@pytest.mark.musa
def test_explicit_path_is_named_whole_when_it_fits(tmp_path):
    short = Path("/tmp") / f"pgm-{secrets.token_hex(3)}.so"
    got = _discovery({"POLYGEMM_MUSA_LIBRARY": str(short)}, tmp_path)
    assert f"POLYGEMM_MUSA_LIBRARY={short}: no such file" in got["reason"], got


@pytest.mark.musa
def test_not_found_reason_is_one_short_line_with_every_place_kept(tmp_path):
    """The reason is one line of at most 120 characters, no path dump, no doc pointer; the
    places tried are in LibraryNotFound.attempts (and details()) for a verbose listing."""
    got = _discovery({}, tmp_path)
    reason = got["reason"]
    assert "\n" not in reason and len(reason) <= 120, reason
    assert "not found" in reason and "docs/musa.md" not in reason and str(tmp_path) not in reason, reason
    labels = [a[0] for a in got["attempts"]]
    assert labels[0] == "package directory" and "build tree" in labels and labels[-1] == "system loader", got


@pytest.mark.musa
def test_unusable_library_in_build_tree_reason_is_short(tmp_path):
    build = tmp_path / ("build-" + "x" * 80)  # a long path must not make the reason long
    build.mkdir()
    c_library(build / "libpolygemm_musa.so", WRONG_ABI)
    got = _discovery({}, tmp_path)
    reason = got["reason"]
    assert "ABI version mismatch: library 99" in reason and "build tree" in reason, reason
    assert "\n" not in reason and len(reason) <= 120 and str(build) not in reason, reason
    assert any(a[1] == str(build / "libpolygemm_musa.so") for a in got["attempts"]), got


@pytest.mark.musa
@pytest.mark.parametrize("spelling", ["libpolygemm_musa.so", "./libpolygemm_musa.so", "sub/../libpolygemm_musa.so"])
def test_explicit_relative_path_opens_the_file_it_names(musa_library, tmp_path, spelling):
    """A relative $POLYGEMM_MUSA_LIBRARY is the file relative to the working directory, not a
    name for the system loader to look up elsewhere."""
    shutil.copy(musa_library, tmp_path / "libpolygemm_musa.so")
    (tmp_path / "sub").mkdir()
    got = _discovery({"POLYGEMM_MUSA_LIBRARY": spelling}, tmp_path)
    assert got["reason"] == "AVAILABLE", got


@pytest.mark.musa
def test_explicit_path_that_is_a_directory_or_another_library_says_so(tmp_path):
    got = _discovery({"POLYGEMM_MUSA_LIBRARY": str(tmp_path)}, tmp_path)
    assert "directory" in got["reason"] and "libpolygemm_musa.so" in got["reason"], got
    lib = c_library(tmp_path / "libother.so", "int other(void){return 1;}\n")
    reason = _discovery({"POLYGEMM_MUSA_LIBRARY": str(lib)}, tmp_path)["reason"]
    assert "not libpolygemm_musa.so" in reason and "pgm_abi_version" in reason and "AttributeError" not in reason, reason
    assert "\n" not in reason and len(reason) <= 120, reason
