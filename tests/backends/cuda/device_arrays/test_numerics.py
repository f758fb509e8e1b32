"""float16 overflow to inf, and NaN/inf propagation, on device arrays."""

from __future__ import annotations

import numpy as np
import pytest


from .support import (
    chk,
    F16,
    F32,
    G,
    H,
    Lib,
    need,
    rnd,
)

pytestmark = pytest.mark.cuda


def test_fp16_overflow_inf(L: Lib) -> None:
    m, k, n = 64, 512, 48
    a, b = rnd((m, k), F16), rnd((k, n), F16)
    a[:4] = 16
    b[:, :4] = 16  # the 4x4 corner is 16*16*512 = 131072 > 65504: inf in float16, exact in float32
    A, B = L.to(a), L.to(b)
    got = G(A, B)
    h = H(got)
    need(np.isinf(h[:4, :4]).all() and (h[:4, :4] > 0).all(), f"overflow corner not +inf: {h[0, :4]}")
    chk(h, a, b, what="f16 overflow")
    ref = H(L.matmul(A, B))
    need(np.isinf(ref[:4, :4]).all(), f"setup: {L.name}.matmul corner finite")
    got32 = G(A, B, out_dtype=L.tdt(F32))
    chk(got32, a, b, out_dtype=F32, what="f16 overflow into f32")
    need(float(H(got32)[0, 0]) == 131072.0, f"f32 corner {float(H(got32)[0, 0])}")


def test_nan_inf_propagation(L: Lib) -> None:
    m, k, n = 40, 32, 36
    for dt in (F32, F16):
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        a[3, 5] = np.nan
        b[7, 9] = np.inf
        a[:, 7] = np.where(a[:, 7] == 0, dt.type(1), a[:, 7])
        got = H(G(L.to(a), L.to(b)))
        need(np.isnan(got[3]).all(), f"{dt.name}: row with a NaN not all NaN")
        chk(got, a, b, what=f"{dt.name} NaN/inf propagation")
