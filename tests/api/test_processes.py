"""Results and plans across processes: fork, multiprocessing, pickling."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

import polygemm as pg

from tests.helpers import FORK_PRELUDE, _reset


def _report(infos):
    return [(i.name, i.available, i.reason, i.priority, i.source, i.detail) for i in infos]


def _product(seed):
    x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
    return pg.gemm(x, x.T, device="cpu"), pg.last_plan()


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")


def _script(body: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``body`` run by a fresh interpreter (a fork of the test process would inherit pytest's threads and state)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"})


def _in_forked_child(fn):
    """fn() run in a child of os.fork; what it returned, through a pipe."""
    import os
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's atexit handlers
        try:
            data = pickle.dumps(fn())
        except BaseException as exc:  # noqa: BLE001
            data = pickle.dumps(exc)
        os.write(w, data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_backend_infos_pickle_without_the_live_backend():
    # the list polygemm.backends() returns holds live backends, which cannot be pickled (the cuda backend's lock,
    # available or not): a worker's list arrives with backend=None
    infos = pg.backends()
    assert any(i.name == "cuda" for i in infos)  # the backend whose instance held the lock
    back = pickle.loads(pickle.dumps(infos))
    assert _report(back) == _report(infos)
    assert all(i.backend is None for i in back)
    assert all(type(i) is pg.BackendInfo for i in back)
    # a copy in this process is the same info, its live backend kept (copy.copy does not go through the pickle path)
    for i in infos:
        assert copy.copy(i) is i and copy.deepcopy(i) is i
    assert copy.deepcopy(infos)[-1].backend is infos[-1].backend


def test_backends_submitted_to_a_spawned_process_pool():
    """What a worker pool asks of the pickled backends: each worker, which backends it sees. This process looks again
    just before and just after the worker does (another test may build libpolygemm_musa meanwhile, which changes
    musa's availability): the worker sees what this process sees at one of the two."""
    def seen() -> list[tuple[str, bool, str]]:
        _reset()
        return [(i.name, i.available, i.reason) for i in pg.backends()]

    before = seen()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        theirs = pool.submit(pg.backends).result(timeout=120)
    assert [(i.name, i.available, i.reason) for i in theirs] in (before, seen())
    assert [i.backend for i in theirs] == [None] * len(before)


def test_gemm_in_a_spawned_process_pool_returns_results_and_plans():
    """gemm and last_plan() in spawned workers, results and plans pickled back."""
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = list(pool.map(_product, range(4), timeout=120))
    for seed, (res, plan) in enumerate(got):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(res, x @ x.T, rtol=1e-5, atol=1e-5)
        assert plan.backend == "cpu" and (plan.problem.m, plan.problem.n, plan.problem.k) == (3, 3, 4)


def test_plans_pickle_and_copy_as_they_print(rng):
    """explain's and last_plan()'s plans survive pickle, copy and deepcopy."""
    a = rng.standard_normal((5, 7)).astype(np.float32)
    plan = pg.explain(a, a.T, device="cpu")
    pg.gemm(a, a.T, device="cpu")
    last = pg.last_plan()
    for p in (plan, last):
        for made in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
            assert str(made) == str(p) and made == p


@needs_fork
def test_a_child_forked_while_a_probe_ran_probes_again_instead_of_waiting_out_the_timeout():
    # a child waiting on its parent's probe would wait out the deadline (8 s here) and then raise
    # BackendUnavailableError "probe did not return within 8 s"
    r = _script(FORK_PRELUDE.replace("import polygemm as pg", "os.environ['POLYGEMM_PROBE_TIMEOUT'] = '8'\nimport polygemm as pg") + """
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
    # the child's first call waited forever on the lock the parent's other thread held at the fork (killed
    # here by its alarm: "child exit -14")
    held = {
        "registry": "import polygemm.registry as registry; target = lambda: registry.discover._lock",
        "entry": "import polygemm.registry as registry; target = lambda: registry.discover.all_entries()['cpu']._lock",
        "plan cache": "from polygemm import api; target = lambda: api.plan_cache._cache._lock",
    }[lock]
    r = _script(FORK_PRELUDE + held + """
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


def test_a_plan_pickled_to_another_process_keeps_why_it_was_not_cached(rng):
    pg.gemm(rng.standard_normal((2, 3)).tolist(), np.ones((3, 2)), device="cpu")
    plan = pg.last_plan()
    back = pickle.loads(pickle.dumps(plan))
    assert back.uncached == plan.uncached != "" and str(back) == str(plan)


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


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork is POSIX")
def test_cuda_errors_in_a_child_forked_after_cuda_say_to_spawn(monkeypatch):
    """CUDA does not survive a fork: a child forked after its parent opened a device gets errors saying to start workers
    with 'spawn' (torch's advice), and only such a child (one forked before any device was opened gets none)."""
    from polygemm.backends.cuda import device

    monkeypatch.setattr(device, "_runtimes", {})  # as before any call on a GPU (whatever this process ran before)
    assert _in_forked_child(device.fork_hint) == ""
    monkeypatch.setitem(device._runtimes, 0, object())  # as after a first call on cuda:0
    hint = _in_forked_child(device.fork_hint)
    assert "spawn" in hint and "fork" in hint
    assert device.fork_hint() == ""  # the parent itself is unaffected


def test_plans_print_pickle_and_copy(rng):
    a, b = _operands(rng)
    plan = pg.explain(a, b, device="cpu")
    for other in (pickle.loads(pickle.dumps(plan)), copy.deepcopy(plan)):
        assert str(other) == str(plan) and other.problem.shape_str() == "4x3x5"
