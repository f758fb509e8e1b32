"""A user who keeps polygemm's results and plans across threads and processes, twenty-seventh round (CPU): a process
forked (``os.fork``, multiprocessing's fork start method, a pre-forking server) while another thread was probing a
backend or held one of polygemm's locks (the registry's, a backend entry's, the plan cache's), children of each start
method after a call, results, plans and their text kept beside what the next identical call does (the plan cache's
word "cached for the next" held against operands it never keys: memmaps, ``np.matrix`` and other ndarray
subclasses, lists, a cache turned off), results of one thread used in another, and plans and results pickled
between processes. The tests marked "defect" failed before the fix they name; the others check edges that were
right."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

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
        "registry": "import polygemm.registry as registry; target = lambda: registry._lock",
        "entry": "import polygemm.registry as registry; target = lambda: registry._all()['cpu']._lock",
        "plan cache": "from polygemm import api; target = lambda: api._cache._lock",
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
