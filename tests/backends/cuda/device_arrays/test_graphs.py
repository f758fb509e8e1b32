"""Capture in a torch CUDA graph or a CuPy stream capture after a warm-up call, and a final sanity call."""

from __future__ import annotations

import time

import numpy as np
import pytest

from polygemm.testing import check_result

from .support import (
    BF16,
    chk,
    cp,
    F16,
    F32,
    Fail,
    G,
    H,
    Info,
    LIBS,
    NAN,
    one_line,
    report,
    rnd,
    T0,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def test_torch_cuda_graph(torch_lib) -> None:
    parts, wrong = [], []
    cases = [("f32", F32, (96, 112, 80), "auto"), ("splitk_f32", F32, (64, 64, 16384), "auto"),
             ("f16", F16, (256, 256, 256), "auto"), ("splitk8_f16", F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8")]
    if BF16 is not None:
        cases.append(("bf16", BF16, (96, 112, 80), "auto"))
    for name, dt, (m, n, k), variant in cases:
        a, b, a2, a3 = rnd((m, k), dt), rnd((k, n), dt), rnd((m, k), dt), rnd((m, k), dt)
        A, B = TL.to(a), TL.to(b)
        O = TL.full((m, n), NAN, dt)
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    G(A, B, out=O, variant=variant)
                    G(A, B, variant=variant)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                G(A, B, out=O, variant=variant)
                R = G(A, B, variant=variant)
        except Exception as e:  # noqa: BLE001
            parts.append(f"{name}: capture {type(e).__name__}: {one_line(e, 70)}")
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            continue
        ok = True
        for x in (a2, a3):
            A.copy_(TL.to(x))
            O.fill_(NAN)
            torch.cuda.synchronize()
            try:
                g.replay()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                wrong.append(f"{name}: replay raised {type(e).__name__}: {one_line(e, 80)}")
                ok = False
                break
            for which, res in (("out", O), ("new", R)):
                r = check_result(H(res), x, b)
                if not r.ok:
                    wrong.append(f"{name} {which}: {r.message[:80]}")
                    ok = False
        parts.append(f"{name}: ok" if ok else f"{name}: WRONG")
        del g
    if wrong:
        raise Fail("replayed graph gave wrong results: " + "; ".join(wrong))
    text = "; ".join(parts)
    report(Info(text) if "capture" in text else text)


def test_cupy_stream_capture(cupy_lib) -> None:
    m, k, n = 128, 96, 112
    parts = []
    for name, dt, variant in (("f32", F32, "auto"), ("f16", F16, "auto"), ("splitk8_f16", F16, "hgemm_v3_wgmma_pingpong:split_k=8")):
        kk = 8192 if "splitk" in name else k
        a, b, a2 = rnd((m, kk), dt), rnd((kk, n), dt), rnd((m, kk), dt)
        A, B, O = cp.asarray(a), cp.asarray(b), cp.full((m, n), np.nan, dt)
        s = cp.cuda.Stream(non_blocking=True)
        try:
            with s:
                G(A, B, out=O, variant=variant)
                s.synchronize()
                s.begin_capture()
                try:
                    G(A, B, out=O, variant=variant)
                finally:
                    graph = s.end_capture()
        except Exception as e:  # noqa: BLE001
            parts.append(f"{name}: capture {type(e).__name__}: {one_line(e, 70)}")
            try:
                cp.cuda.runtime.deviceSynchronize()
            except Exception:  # noqa: BLE001
                pass
            continue
        with s:
            cp.copyto(A, cp.asarray(a2))
            O.fill(np.nan)
            graph.launch(s)
            h = cp.asnumpy(O, stream=s)
            s.synchronize()
        r = check_result(h, a2, b)
        if not r.ok:
            raise Fail(f"{name}: replayed graph wrong: {r.message[:150]}")
        parts.append(f"{name}: ok")
    text = "; ".join(parts)
    report(Info(text) if "capture" in text else text)


def test_final_sanity() -> None:
    for L in LIBS:
        a, b = rnd((50, 40)), rnd((40, 30))
        chk(G(L.to(a), L.to(b)), a, b, what=f"{L.name} final call")
        L.sync()
    a, b = rnd((50, 40)), rnd((40, 30))
    chk(G(a, b), a, b, what="NumPy final call")
    report(f"{time.time() - T0:.0f} s so far")
