"""Result kinds and dtypes (out_dtype included), and empty dimensions, of device arrays on the cuda backend."""

from __future__ import annotations

import os

import numpy as np
import pytest

import polygemm

from .support import (
    BF16,
    chk,
    cp,
    F16,
    F32,
    G,
    H,
    HAVE_CP,
    HAVE_T,
    Lib,
    meta,
    NAN,
    need,
    npdt,
    report,
    rnd,
    torch,
)

pytestmark = pytest.mark.cuda


def test_setup(any_lib) -> None:
    need(HAVE_T or HAVE_CP, "neither torch with CUDA nor CuPy is usable here")
    plan = polygemm.explain(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32), device="cuda")
    need(plan.backend == "cuda", f"explain(device='cuda') gave backend {plan.backend}")
    if HAVE_T:
        name = torch.cuda.get_device_name(0)
    else:
        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    report((f"{name}; polygemm {polygemm.__version__}, numpy {np.__version__}, torch {torch.__version__ if torch else '-'}"
            f" (cuda {HAVE_T}), cupy {cp.__version__ if cp else '-'}, ml_dtypes {BF16 is not None}; "
            f"POLYGEMM_KERNEL_DIR={os.environ.get('POLYGEMM_KERNEL_DIR', '-')}"))


def test_kinds(L: Lib) -> None:
    m, k, n = 96, 80, 112
    cases = [(F32, None), (F16, None), (F16, F32)]
    if L.torch and BF16 is not None:
        cases += [(BF16, None), (BF16, F32)]
    for dt, od in cases:
        what = f"{dt.name}" + (f"->out_dtype {od.name}" if od is not None else "")
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        A, B = L.to(a), L.to(b)
        kw = {} if od is None else {"out_dtype": L.tdt(od)}
        got = G(A, B, **kw)
        meta(L, got, (m, n), od or dt, what)
        if od is None:
            ref = L.matmul(A, B)
            need(npdt(ref) == npdt(got) and tuple(ref.shape) == tuple(got.shape),
                 f"{what}: {L.name}.matmul gives {ref.dtype} {tuple(ref.shape)}, polygemm {got.dtype} {tuple(got.shape)}")
        chk(got, a, b, out_dtype=od, what=what)
    a, b = rnd((m, k), F16), rnd((k, n), F16)
    got = G(L.to(a), L.to(b), out_dtype="float32")
    meta(L, got, (m, n), F32, "out_dtype='float32' (a string)")
    chk(got, a, b, out_dtype=F32, what="out_dtype string")
    got = polygemm.matmul(L.to(a), L.to(b), out_dtype=L.tdt(F32))
    meta(L, got, (m, n), F32, "matmul out_dtype")
    chk(got, a, b, out_dtype=F32, what="matmul out_dtype")
    report(f"{len(cases) + 2} dtype cases")


def test_empty_dims(L: Lib) -> None:
    k = 8
    for sa, sb in (((0, k), (k, 5)), ((6, k), (k, 0)), ((6, 0), (0, 5)), ((0, 4, k), (k, 5)), ((3, 4, 0), (3, 0, 5)),
                   ((2, 0, 4, k), (k, 5))):
        A, B = L.to(np.zeros(sa, np.float32)), L.to(np.zeros(sb, np.float32))
        got = G(A, B)
        ref = L.matmul(A, B)
        meta(L, got, tuple(ref.shape), F32, f"{sa}@{sb}")
        h = H(got)
        need(h.size == 0 or (h == 0).all(), f"{sa}@{sb}: K=0 result not zeros ({h.ravel()[:3]})")
    m, n = 33, 17
    for dt in (F32, F16):
        a0, b0, c = np.zeros((m, 0), dt), np.zeros((0, n), dt), rnd((m, n), dt)
        got = G(L.to(a0), L.to(b0), L.to(c), beta=2.5)
        meta(L, got, (m, n), dt, f"{dt.name} K=0 beta*c")
        chk(got, a0, b0, c, 1.0, 2.5, what=f"{dt.name} K=0 beta*c")
        out = L.full((m, n), NAN, dt)
        need(G(L.to(a0), L.to(b0), L.full((m, n), NAN, dt), beta=0.0, out=out) is out, "K=0 out not returned")
        need((H(out) == 0).all(), f"{dt.name} K=0, beta=0, NaN c: out not zeros")
    a0, b0, c32 = np.zeros((m, 0), F16), np.zeros((0, n), F16), rnd((m, n))
    got = G(L.to(a0), L.to(b0), L.to(c32), beta=-0.5, out_dtype=L.tdt(F32))
    meta(L, got, (m, n), F32, "f16 K=0 into f32")
    chk(got, a0, b0, c32, 1.0, -0.5, out_dtype=F32, what="f16 K=0 into f32")
    out = L.full((0, 5), NAN, F32)
    need(G(L.to(np.zeros((0, k), np.float32)), L.to(np.ones((k, 5), np.float32)), out=out) is out, "empty out not returned")
