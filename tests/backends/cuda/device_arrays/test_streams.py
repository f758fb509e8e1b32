"""The library's current stream: each call runs on it, never blocking the host or another stream."""

from __future__ import annotations

import time

import numpy as np
import pytest

import polygemm
from polygemm.testing import check_result

from .support import (
    BF16,
    BLOCKED_S,
    cp,
    CPL,
    F16,
    F32,
    Fail,
    G,
    Lib,
    NAN,
    one_line,
    report,
    rnd,
    Skip,
    spin,
)

pytestmark = pytest.mark.cuda


def _stream_cases(L: Lib, which: str):
    """(name, host arrays, call(d) on device arrays d, reference (a, b, c, alpha, beta, out_dtype))."""
    m, k, n = 192, 128, 160
    out = []

    def case(name, arrays, call, ref):
        out.append((name, arrays, call, ref))

    if which == "basic":
        a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
        o = np.full((m, n), np.nan, np.float32)
        case("new", {"a": a, "b": b}, lambda d: G(d["a"], d["b"]), (a, b, None, 1.0, 0.0, None))
        case("out", {"a": a, "b": b, "o": o}, lambda d: G(d["a"], d["b"], out=d["o"]), (a, b, None, 1.0, 0.0, None))
        case("c_beta", {"a": a, "b": b, "c": c}, lambda d: G(d["a"], d["b"], d["c"], alpha=0.5, beta=-1.0), (a, b, c, 0.5, -1.0, None))
        case("in_place", {"a": a, "b": b, "c": c}, lambda d: G(d["a"], d["b"], d["c"], alpha=0.5, beta=-1.0, out=d["c"]),
             (a, b, c, 0.5, -1.0, None))
        a16, b16 = rnd((m, k), F16), rnd((k, n), F16)
        case("f16_out_f32", {"a": a16, "b": b16, "c": c},
             lambda d: G(d["a"], d["b"], d["c"], beta=1.0, out_dtype=L.tdt(F32)), (a16, b16, c, 1.0, 1.0, F32))
        a0, b0 = np.zeros((m, 0), np.float32), np.zeros((0, n), np.float32)
        case("k0_beta", {"a": a0, "b": b0, "c": c}, lambda d: G(d["a"], d["b"], d["c"], beta=2.0), (a0, b0, c, 1.0, 2.0, None))
        if L.torch and BF16 is not None:
            ab, bb = rnd((m, k), BF16), rnd((k, n), BF16)
            case("bf16_out_f32", {"a": ab, "b": bb, "o": o}, lambda d: G(d["a"], d["b"], out=d["o"]), (ab, bb, None, 1.0, 0.0, F32))
        return out
    # "paths": batches, copies made by the library, skinny, split-K, stream-K, padded TMA, TMA store
    a3, b2, c3 = rnd((4, 64, 48)), rnd((48, 80)), rnd((4, 64, 80))
    case("batched_bcast", {"a": a3, "b": b2, "c": c3}, lambda d: G(d["a"], d["b"], d["c"], alpha=2.0, beta=0.5), (a3, b2, c3, 2.0, 0.5, None))
    aw, b = rnd((m, 2 * k)), rnd((k, n))
    case("strided_copy", {"a": aw, "b": b}, lambda d: G(d["a"][:, ::2], d["b"]), (aw[:, ::2], b, None, 1.0, 0.0, None))
    at, bt = rnd((k, m)), rnd((n, k))
    case("transposed", {"a": at, "b": bt}, lambda d: G(L.mT(d["a"]), L.mT(d["b"])), (at.T, bt.T, None, 1.0, 0.0, None))
    a, bias = rnd((m, k)), rnd((1, n))
    case("bias_expand", {"a": a, "b": b, "c": bias}, lambda d: G(d["a"], d["b"], L.expand(d["c"], (m, n)), beta=1.0),
         (a, b, np.broadcast_to(bias, (m, n)), 1.0, 1.0, None))
    for dt in (F32, F16):
        x, y = rnd((1, 4096), dt), rnd((4096, 512), dt)
        case(f"skinny_m1_{dt.name}", {"a": x, "b": y}, lambda d: G(d["a"], d["b"]), (x, y, None, 1.0, 0.0, None))
    x, y = rnd((64, 16384)), rnd((16384, 64))
    case("splitk_auto_f32", {"a": x, "b": y}, lambda d: G(d["a"], d["b"]), (x, y, None, 1.0, 0.0, None))
    for name, dt, (mm, nn, kk), variant in (
            ("splitk4_cm_v12_f32", F32, (128, 128, 8192), "cm_v12_cp_async:split_k=4"),
            ("splitk8_pingpong_f16", F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8"),
            ("streamk_f16", F16, (512, 512, 2048), "hgemm_v2_wgmma_tma_streamk"),
            ("tma_padded_f16", F16, (256, 264, 1004), "hgemm_v3_wgmma_pingpong")):
        x, y = rnd((mm, kk), dt), rnd((kk, nn), dt)
        case(name, {"a": x, "b": y}, lambda d, v=variant: G(d["a"], d["b"], variant=v), (x, y, None, 1.0, 0.0, None))
    x, y, z = rnd((256, 512), F16), rnd((512, 256), F16), rnd((256, 256), F16)
    case("tma_store_inplace_f16", {"a": x, "b": y, "c": z},
         lambda d: G(d["a"], d["b"], d["c"], beta=0.5, out=d["c"], variant="hgemm_v3_wgmma_pingpong_persistent_tma_store"),
         (x, y, z, 1.0, 0.5, None))
    return out

def stream_run(L: Lib, which: str, s=None, label: str = ""):
    s = L.new_stream() if s is None else s
    bad, blocked, na, done = [], [], [], 0
    for name, arrays, call, ref in _stream_cases(L, which):
        try:
            src = {key: L.to(v) for key, v in arrays.items()}
            dst = {key: L.full(v.shape, NAN, v.dtype) for key, v in arrays.items()}
            try:
                call(dst)  # warm-up on the default stream: kernels built and loaded
            except polygemm.UnsupportedProblemError as e:
                na.append(f"{name} ({one_line(e, 40)})")
                continue
            L.sync()
            for rnd_i in (0, 1):  # planned on the stream, then cached
                for key in dst:
                    L.fill_nan(dst[key])
                L.sync()
                if rnd_i == 0:
                    polygemm.clear_plan_cache()
                with L.ctx(s):
                    spin(L)
                    for key in dst:
                        L.copy_(dst[key], src[key])
                    t = time.perf_counter()
                    got = call(dst)
                    dt = time.perf_counter() - t
                    host = L.read_on(got, s)
                r = check_result(host, ref[0], ref[1], ref[2], ref[3], ref[4], out_dtype=ref[5])
                if not r.ok:
                    bad.append(f"{name}[{'planned' if rnd_i == 0 else 'cached'}]: {r.message[:90]}")
                    break
                if rnd_i == 1 and dt > BLOCKED_S:
                    blocked.append(f"{name} {dt * 1e3:.0f} ms")
            done += 1
        except Exception as e:  # noqa: BLE001
            bad.append(f"{name}: {type(e).__name__}: {one_line(e, 90)}")
            try:
                L.sync()
            except Exception:  # noqa: BLE001
                pass
    L.sync()
    if bad:
        raise Fail(f"{len(bad)} case(s) wrong{label}: " + "; ".join(bad))
    if blocked:
        raise Fail(f"call blocked the host while its stream was busy{label}: " + ", ".join(blocked))
    return f"{done} cases right read on the stream{label}" + (f"; n/a: {', '.join(na)}" if na else "")


def test_stream_basic(L: Lib) -> None:
    report(stream_run(L, "basic"))


def test_stream_paths(L: Lib) -> None:
    report(stream_run(L, "paths"))


def test_cupy_stream_ptds(cupy_lib) -> None:
    s = getattr(cp.cuda.Stream, "ptds", None)
    if s is None:
        raise Skip("this CuPy has no Stream.ptds")
    r1 = stream_run(CPL, "basic", s, " (per-thread default stream)")
    report(r1)
