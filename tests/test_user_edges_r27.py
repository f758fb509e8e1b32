"""A user who keeps polygemm's results and plans across threads and processes, twenty-seventh round (CPU): a process
forked (``os.fork``, multiprocessing's fork start method, a pre-forking server) while another thread was probing a
backend or held one of polygemm's locks (the registry's, a backend entry's, the plan cache's), children of each start
method after a call, results, plans and their text kept beside what the next identical call does (the plan cache's
word "cached for the next" held against operands it never keys: memmaps, ``np.matrix`` and other ndarray
subclasses, lists, a cache turned off), results of one thread used in another, and plans and results pickled
between processes. The tests marked "defect" failed before the fix they name; the others check edges that were
right."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import polygemm as pg
from polygemm import api

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")


def _script(body: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``body`` run by a fresh interpreter (a fork of the test process would inherit pytest's threads and state)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"})


# The child of every fork below runs its work under an alarm: a child that hangs (a lock held by a thread the fork
# did not copy) is killed by SIGALRM, which the parent reports, rather than hanging the test run.
_FORK = """
import os, signal, sys, threading, time
import numpy as np
import polygemm as pg

def in_child(work, limit=20):
    pid = os.fork()
    if pid == 0:
        signal.alarm(limit)
        code = 1
        try:
            work()
            code = 0
        except BaseException as exc:
            print(f"child: {type(exc).__name__}: {exc}", flush=True)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print("child exit", code, flush=True)
    return code
"""


# -- defect 1: a process forked while another thread probed a backend, or held one of polygemm's locks ----------------
# A backend's checks run once, in a daemon thread. A fork made while they ran (a pre-forking server whose warm-up
# thread asked for the backends; multiprocessing's fork pool started meanwhile) copied their unfinished state but not
# the thread: the child waited out the whole probe timeout (30 s by default) and then called the backend unavailable
# ("probe did not return within 30 s"), so device='auto' silently took another backend and an explicit device was
# refused. A lock held at the fork by another thread (the registry's during discovery, an entry's during an import,
# the plan cache's during a put) stayed held in the child forever: its first call hung. Fix: os.register_at_fork
# gives the child its own locks and reruns the checks that were in flight (finished ones are kept).

@needs_fork
def test_a_child_forked_while_a_probe_ran_probes_again_instead_of_waiting_out_the_timeout():
    # defect: the child waited until the parent's probe deadline (8 s here) and then raised BackendUnavailableError
    # "device 'cpu' is unavailable: probe did not return within 8 s"
    r = _script(_FORK.replace("import polygemm as pg", "os.environ['POLYGEMM_PROBE_TIMEOUT'] = '8'\nimport polygemm as pg") + """
from polygemm.backends.cpu_ref.backend import CpuReferenceBackend
started, real = threading.Event(), CpuReferenceBackend.probe
def slow(self):
    started.set()
    time.sleep(1.0)
    return real(self)
CpuReferenceBackend.probe = slow
a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
threading.Thread(target=lambda: pg.gemm(a, b, device="cpu"), daemon=True).start()  # the cpu probe runs in another thread
assert started.wait(20)

def work():
    t = time.monotonic()
    r = pg.gemm(a, b, device="cpu")
    info = {i.name: i for i in pg.backends()}["cpu"]
    print("child took", round(time.monotonic() - t, 1), "s; sum", float(r.sum()), "; cpu", info.available, info.reason, flush=True)
    assert float(r.sum()) == 24.0 and info.available
    assert time.monotonic() - t < 6
sys.exit(in_child(work))
""")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "child took" in r.stdout and "cpu True" in r.stdout, r.stdout


@needs_fork
@pytest.mark.parametrize("lock", ["registry", "entry", "plan cache"])
def test_a_child_forked_while_another_thread_held_a_lock_does_not_hang(lock):
    # defect: the child's first call waited forever on the lock the parent's other thread held at the fork (killed
    # here by its alarm: "child exit -14")
    held = {
        "registry": "import polygemm.registry as registry; target = lambda: registry.discover._lock",
        "entry": "import polygemm.registry as registry; target = lambda: registry.discover.all_entries()['cpu']._lock",
        "plan cache": "from polygemm import api; target = lambda: api.plan_cache._cache._lock",
    }[lock]
    r = _script(_FORK + held + """
taken, release = threading.Event(), threading.Event()
def hold():
    with target():
        taken.set()
        release.wait()
threading.Thread(target=hold, daemon=True).start()
assert taken.wait(20)

def work():
    # the registry's lock (discovery), the cpu entry's (its backend), the plan cache's (a new plan's put)
    r = pg.gemm(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), device="cpu")
    assert float(r.sum()) == 24.0 and pg.plan_cache_info()["size"] >= 1
    assert "cpu" in [i.name for i in pg.backends() if i.available]
code = in_child(work)
release.set()
sys.exit(code)
""")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "child exit 0" in r.stdout, r.stdout


@needs_fork
def test_a_child_keeps_the_probes_and_plans_its_parent_finished():
    # right: what the parent had finished (a backend's checks, a cached plan) is the child's too, not done again
    r = _script(_FORK + """
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


# -- defect 2: "cached for the next" said of calls the plan cache never keeps --------------------------------------------
# The cache keys calls by NumPy ndarrays and device arrays. A call with a memmap, an np.matrix or another ndarray
# subclass, a list, or with the cache turned off ($POLYGEMM_PLAN_CACHE_SIZE=0) is planned anew every time (about six
# times the host time of a cached call on a small product) and plan_cache_info() counts none of them, yet last_plan(),
# explain() and `polygemm gemm` said "planned for this call (cached for the next)". Fix: the plan's new field
# ``uncached`` says why it is not kept, and its text says so in place of "cached for the next".

def _memmap(tmp_path, a):
    m = np.memmap(tmp_path / "a.bin", dtype=a.dtype, mode="w+", shape=a.shape)
    m[...] = a
    return m


class _Tagged(np.ndarray):
    pass


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
@pytest.mark.parametrize("kind, words", [
    ("memmap", r"a is a numpy\.memmap, which the cache does not key.*np\.asarray\(a\) is the same memory"),
    ("matrix", r"a is a numpy\.matrix, which the cache does not key.*np\.asarray\(a\)"),
    ("subclass", r"a is a test_user_edges_r27\._Tagged, which the cache does not key"),
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
        # defect: "planned for this call (cached for the next)"
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
    assert "out is a numpy.memmap" in pg.last_plan().uncached and "written in place" in pg.last_plan().uncached  # defect
    # right: what the hint says works: the same memory as a plain ndarray is cached, and written in place
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
        assert not plan.cached and "POLYGEMM_PLAN_CACHE_SIZE=0" in plan.uncached  # defect: "cached for the next"
        assert "cached for the next" not in str(plan)


def test_a_cached_call_and_its_first_say_what_they_did(rng):
    # right: plain ndarrays are planned once, then reused, and the text says each (``uncached`` is new with the fix)
    a = rng.standard_normal((7, 3)).astype(np.float32)
    pg.clear_plan_cache()
    pg.gemm(a, a.T, device="cpu")
    first = pg.last_plan()
    assert not first.cached and first.uncached == "" and "(cached for the next)" in str(first)
    pg.gemm(a, a.T, device="cpu")
    again = pg.last_plan()
    assert again.cached and again.uncached == "" and "reused from the plan cache" in str(again)
    assert pg.explain(a, a.T, device="cpu").cached


def test_a_plan_pickled_to_another_process_keeps_why_it_was_not_cached(rng):
    pg.gemm(rng.standard_normal((2, 3)).tolist(), np.ones((3, 2)), device="cpu")
    plan = pg.last_plan()
    back = pickle.loads(pickle.dumps(plan))
    assert back.uncached == plan.uncached != "" and str(back) == str(plan)


# -- right: results and plans across threads and processes ---------------------------------------------------------------

def test_results_of_one_thread_are_used_by_another_and_each_thread_keeps_its_own_last_plan(rng):
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 12)).astype(np.float32)
    pg.clear_plan_cache()

    def work(i):
        r = pg.gemm(a[: i + 1], b, alpha=float(i + 1), device="cpu")
        return r, pg.last_plan()

    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(work, range(16)))
    for i, (r, plan) in enumerate(done):  # used here, in another thread than the one that made it
        assert r.flags.owndata and r.flags.writeable and r.shape == (i + 1, 12)
        np.testing.assert_allclose(r, (i + 1) * (a[: i + 1] @ b), rtol=1e-5, atol=1e-5)
        assert plan.problem.m == i + 1 and plan.problem.alpha == i + 1  # that thread's call, not another's
    # every thread's result is its own memory: writing one changes no other
    done[3][0][...] = 0
    assert all(np.count_nonzero(r) for j, (r, _) in enumerate(done) if j != 3)


@needs_fork
def test_a_fork_pool_after_the_parent_planned_reuses_its_plan_and_returns_results_and_plans():
    # in a fresh interpreter: a fork of the test process would carry whatever earlier tests set up (a CUDA context)
    r = _script("""
import multiprocessing, pickle, sys
from concurrent.futures import ProcessPoolExecutor
import numpy as np
import polygemm as pg

def product(args):
    a, b = args
    return pg.gemm(a, b, device="cpu"), pg.last_plan(), pg.plan_cache_info()

if __name__ == "__main__":
    rng = np.random.default_rng(27)
    a, b = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((6, 7)).astype(np.float32)
    pg.gemm(a, b, device="cpu")  # planned (and cached) in the parent before the pool forks
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(product, [(a, b), (a * 2, b)]))
    for scale, (r, plan, info) in zip((1, 2), results):
        assert type(r) is np.ndarray and r.dtype == np.float32
        np.testing.assert_allclose(r, scale * (a @ b), rtol=1e-5, atol=1e-5)
        assert plan.cached and plan.uncached == "" and plan.backend == "cpu" and info["hits"] >= 1, (plan, info)
    print("ok")
""")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
