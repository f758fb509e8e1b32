"""Broadcast batches, half-precision batches into float32, and ``matmul``'s vectors, on device arrays."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm

from .support import (
    BF16,
    chk,
    F16,
    F32,
    G,
    H,
    Lib,
    meta,
    NAN,
    need,
    rnd,
    SENT,
)

pytestmark = pytest.mark.cuda


def vcheck(got, x, y, what):
    x2 = x[None, :] if x.ndim == 1 else x
    y2 = y[:, None] if y.ndim == 1 else y
    full = tuple(np.broadcast_shapes(x2.shape[:-2], y2.shape[:-2])) + (x2.shape[-2], y2.shape[-1])
    chk(np.asarray(H(got)).reshape(full), x2, y2, what=what)


def test_batch_broadcast(L: Lib) -> None:
    m, k, n = 24, 16, 20
    for sa, sb in (((4, m, k), (k, n)), ((m, k), (4, k, n)), ((2, 1, m, k), (1, 3, k, n)), ((1, m, k), (5, k, n)),
                   ((2, 3, m, k), (3, k, n)), ((1, 1, m, k), (1, 1, k, n))):
        a, b = rnd(sa), rnd(sb)
        A, B = L.to(a), L.to(b)
        got = G(A, B)
        ref = L.matmul(A, B)
        meta(L, got, tuple(ref.shape), F32, f"{sa}@{sb}")
        chk(got, a, b, what=f"{sa}@{sb}")
        got = polygemm.matmul(A, B)
        meta(L, got, tuple(ref.shape), F32, f"matmul {sa}@{sb}")
        chk(got, a, b, what=f"matmul {sa}@{sb}")
    a, b, c = rnd((2, 1, m, k)), rnd((1, 3, k, n)), rnd((2, 3, m, n))
    out = L.full((2, 3, m, n), NAN, F32)
    need(G(L.to(a), L.to(b), L.to(c), alpha=-0.75, beta=0.5, out=out) is out, "4-D out not returned")
    chk(out, a, b, c, -0.75, 0.5, what="4-D broadcast with c and out")


def test_batch_half_4d_f32(L: Lib) -> None:
    m, k, n = 40, 72, 48
    for dt in ([F16, BF16] if (L.torch and BF16 is not None) else [F16]):
        a, b, c = rnd((2, 3, m, k), dt), rnd((3, k, n), dt), rnd((2, 3, m, n), F32)
        out = L.full((2, 3, m, n), NAN, F32)
        need(G(L.to(a), L.to(b), L.to(c), alpha=0.5, beta=1.0, out=out) is out, "out not returned")
        chk(out, a, b, c, 0.5, 1.0, out_dtype=F32, what=f"{dt.name} 4-D into f32 c/out")
        got = polygemm.matmul(L.to(a), L.to(b), out_dtype=L.tdt(F32))
        meta(L, got, (2, 3, m, n), F32, f"{dt.name} matmul 4-D out_dtype f32")
        chk(got, a, b, out_dtype=F32, what=f"{dt.name} matmul 4-D out_dtype f32")


def test_matmul_vectors(L: Lib) -> None:
    m, k, n, bt = 40, 33, 28, 3
    M2, v, Mb, S, S2 = rnd((m, k)), rnd((k,)), rnd((k, n)), rnd((bt, m, k)), rnd((bt, k, n))
    for name, x, y in (("v@v", v, v), ("M@v", M2, v), ("v@M", v, Mb), ("S@v", S, v), ("v@S", v, S2)):
        X, Y = L.to(x), L.to(y)
        got = polygemm.matmul(X, Y)
        ref = L.matmul(X, Y)
        meta(L, got, tuple(ref.shape), F32, name)
        vcheck(got, x, y, name)
    big = rnd((2 * k,))
    got = polygemm.matmul(L.to(M2), L.to(big)[::2])
    vcheck(got, M2, big[::2], "M @ strided v")
    o = L.full((m,), NAN, F32)
    need(polygemm.matmul(L.to(M2), L.to(v), out=o) is o, "1-D out not returned")
    vcheck(o, M2, v, "M@v into out")
    obig = L.full((2 * m,), SENT, F32)
    o2 = obig[::2]
    need(polygemm.matmul(L.to(M2), L.to(v), out=o2) is o2, "strided 1-D out not returned")
    vcheck(o2, M2, v, "M@v into out[::2]")
    need((H(obig)[1::2] == SENT).all(), "out[::2]: the elements between were written")
    o0 = L.full((), NAN, F32)
    need(polygemm.matmul(L.to(v), L.to(v), out=o0) is o0, "0-D out not returned")
    vcheck(o0, v, v, "v@v into 0-D out")
