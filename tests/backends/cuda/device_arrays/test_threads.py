"""Eight threads on their own streams, and eight NumPy threads, at once."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import polygemm
from polygemm.testing import check_result

from .support import (
    BF16,
    chk,
    F16,
    F32,
    G,
    Lib,
    need,
    one_line,
    report,
    rnd,
)

pytestmark = pytest.mark.cuda


def _thread_jobs(L):
    jobs = [("small_f32", 64, 64, 64, F32, "auto"), ("splitk_f32", 48, 40, 8192, F32, "auto"),
            ("mid_f16", 256, 256, 256, F16, "auto"), ("skinny_f16", 1, 512, 1024, F16, "auto"),
            ("splitk8_f16", 128, 128, 4096, F16, "hgemm_v3_wgmma_pingpong:split_k=8"),
            ("streamk_f16", 256, 256, 1024, F16, "hgemm_v2_wgmma_tma_streamk")]
    if L is not None and L.torch and BF16 is not None:
        jobs.append(("bf16", 96, 112, 80, BF16, "auto"))
    return jobs

def _threads(L, n_threads=8, iters=3):
    host = L is None
    jobs, na = [], []
    for job in _thread_jobs(L):
        name, m, n, k, dt, variant = job
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        try:
            r = G(a, b, variant=variant) if host else G(L.to(a), L.to(b), variant=variant)
            chk(r, a, b, what=f"warm-up {name}")
            jobs.append(job)
        except polygemm.UnsupportedProblemError:
            na.append(name)
    if not host:
        L.sync()
    errors: list[str] = []
    barrier = threading.Barrier(n_threads)

    def worker(i):
        try:
            rng = np.random.default_rng(1000 + i)
            s = None if host else (L.default_stream() if i < 2 else L.new_stream())
            barrier.wait(timeout=30)
            for it in range(iters):
                for name, m, n, k, dt, variant in jobs:
                    a, b = rnd((m, k), dt, rng=rng), rnd((k, n), dt, rng=rng)
                    if host:
                        h = G(a, b, variant=variant)
                    else:
                        with L.ctx(s):
                            r = G(L.to(a), L.to(b), variant=variant)
                            h = L.read_on(r, s)
                    res = check_result(h, a, b)
                    if not res.ok:
                        errors.append(f"thread {i} {name} iter {it}: {res.message[:100]}")
            if polygemm.last_plan() is None:
                errors.append(f"thread {i}: last_plan() None after its calls")
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {one_line(e, 120)}")

    ths = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
    for t in ths:
        t.start()
    deadline = time.time() + 60
    for t in ths:
        t.join(max(deadline - time.time(), 0.1))
    hung = sum(t.is_alive() for t in ths)
    need(not hung, f"{hung} of {n_threads} threads still running after 60 s (hang?)")
    need(not errors, f"{len(errors)} errors; first: {errors[0] if errors else ''}")
    calls = n_threads * iters * len(jobs)
    return f"{n_threads} threads x {iters} x {len(jobs)} jobs = {calls} calls right" + (f"; n/a: {', '.join(na)}" if na else "")


def test_threads_8_streams(L: Lib) -> None:
    report(_threads(L))


def test_numpy_threads_8_host() -> None:
    report(_threads(None))
