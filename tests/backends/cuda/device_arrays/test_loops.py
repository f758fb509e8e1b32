"""A thousand calls without growing memory, split-K on a side stream, and the plan cache's eviction."""

from __future__ import annotations

import gc
import time

import pytest

import polygemm

from .support import (
    chk,
    F16,
    F32,
    G,
    H,
    Lib,
    NAN,
    need,
    one_line,
    report,
    rnd,
    Skip,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def test_loop_1000_memory(L: Lib) -> None:
    a, b = rnd((64, 64)), rnd((64, 64))
    A, B = L.to(a), L.to(b)
    for _ in range(20):
        r = G(A, B)
    chk(r, a, b, what="warm-up")
    del r
    L.sync()
    gc.collect()
    m0, f0 = L.mem_used(), L.mem_free()
    t = time.perf_counter()
    for _ in range(1000):
        r = G(A, B)
    L.sync()
    t_pg = (time.perf_counter() - t) / 1000
    chk(r, a, b, what="after 1000 calls")
    del r
    gc.collect()
    L.sync()
    m1, f1 = L.mem_used(), L.mem_free()
    t = time.perf_counter()
    for _ in range(1000):
        r = L.matmul(A, B)
    L.sync()
    t_lib = (time.perf_counter() - t) / 1000
    del r
    O = L.full((64, 64), NAN, F32)
    t = time.perf_counter()
    for i in range(1000):
        G(A, B, out=O)
    L.sync()
    t_out = (time.perf_counter() - t) / 1000
    chk(O, a, b, what="out= loop")
    need(m1 - m0 <= 0, f"allocated memory grew by {m1 - m0} B over 1000 calls")
    need(f0 - f1 < 64 << 20, f"device free memory fell by {(f0 - f1) / 2**20:.1f} MiB over 1000 calls")
    report((f"{t_pg * 1e6:.1f} us/call new result, {t_out * 1e6:.1f} us/call out=, {L.name}.matmul {t_lib * 1e6:.1f} us; "
            f"allocated {m1 - m0:+d} B, free {(f1 - f0) / 2**20:+.1f} MiB"))


def test_torch_loop_splitk_side_stream(torch_lib) -> None:
    notes = []
    s = torch.cuda.Stream()
    for dt, (m, n, k), variant in ((F32, (64, 64, 16384), "auto"), (F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8")):
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        A, B = TL.to(a), TL.to(b)
        try:
            with torch.cuda.stream(s):
                for _ in range(5):
                    r = G(A, B, variant=variant)
        except polygemm.UnsupportedProblemError as e:
            notes.append(f"{variant} n/a ({one_line(e, 40)})")
            continue
        torch.cuda.synchronize()
        gc.collect()
        f0, m0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
        with torch.cuda.stream(s):
            for _ in range(200):
                r = G(A, B, variant=variant)
            h = H(r)
        v = polygemm.last_plan().variant
        del r
        torch.cuda.synchronize()
        gc.collect()
        f1, m1 = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
        chk(h, a, b, what=f"{dt.name} {v}")
        need(f0 - f1 < 64 << 20, f"{v}: device free memory fell by {(f0 - f1) / 2**20:.1f} MiB over 200 calls on a side stream")
        need(m1 - m0 <= 0, f"{v}: torch allocated grew {m1 - m0} B")
        notes.append(f"{v}: free {(f1 - f0) / 2**20:+.1f} MiB")
    report("; ".join(notes))


def test_torch_cache_eviction(torch_lib) -> None:
    info0 = polygemm.plan_cache_info()
    maxsize = int(info0["maxsize"])
    if maxsize <= 0 or maxsize > 600:
        raise Skip(f"plan cache maxsize {maxsize}")
    count = maxsize + 24
    kk = 2048
    a_all, b = rnd((count + 8, kk)), rnd((kk, 64))
    A_all, B = TL.to(a_all), TL.to(b)

    def plan_every_shape() -> None:
        for i in range(count):
            mm = 8 + i
            r = G(A_all[:mm], B)
            if i % 60 == 0 or i == count - 1:
                chk(r, a_all[:mm], b, what=f"shape {mm}x64x{kk}")

    # a first pass loads every kernel module these shapes choose (code and local memory that
    # stay loaded with the context, by design); the second pass is the one that must not grow
    plan_every_shape()
    polygemm.clear_plan_cache()
    gc.collect()
    torch.cuda.synchronize()
    f0 = torch.cuda.mem_get_info()[0]
    plan_every_shape()
    info1 = polygemm.plan_cache_info()
    need(info1["size"] <= maxsize, f"plan cache holds {info1['size']} > maxsize {maxsize}")
    polygemm.clear_plan_cache()
    gc.collect()
    torch.cuda.synchronize()
    f1 = torch.cuda.mem_get_info()[0]
    chk(G(A_all[:8], B), a_all[:8], b, what="after clear")
    need(f0 - f1 < 256 << 20, f"device free memory fell by {(f0 - f1) / 2**20:.0f} MiB after {count} plans and a clear")
    report(f"{count} shapes: cache size {info1['size']}/{maxsize}, misses {info1['misses']}; free {(f1 - f0) / 2**20:+.1f} MiB")
