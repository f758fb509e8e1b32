"""Awkward shapes (1x1x1, odd sizes, an LM head's x @ W.T, a skinny M) of device arrays on the cuda backend."""

from __future__ import annotations

import pytest

import polygemm

from .support import (
    BF16,
    chk,
    F16,
    F32,
    G,
    Lib,
    meta,
    need,
    npdt,
    report,
    rnd,
)

pytestmark = pytest.mark.cuda


SHAPES = [(1, 1, 1), (7, 13, 5), (4095, 4097, 33), (1, 50257, 768), (17, 4096, 4096)]  # M x N x K

_SD: dict = {}

def shape_data(m, n, k):
    key = (m, n, k)
    if key not in _SD:
        if n == 50257:  # an LM head: x @ W.T with W stored (N, K)
            _SD[key] = (rnd((m, k)), rnd((n, k)), True)
        else:
            _SD[key] = (rnd((m, k)), rnd((k, n)), False)
    return _SD[key]


@pytest.mark.parametrize(("m", "n", "k"), SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_shape(L: Lib, m, n, k) -> None:
    a32, bb32, trans = shape_data(m, n, k)
    cases = [(F32, None), (F16, None)] + ([(BF16, None)] if L.torch and BF16 is not None else []) + [(F16, F32)]
    used = []
    for dt, od in cases:
        what = f"{dt.name}" + (f"->{od.name}" if od is not None else "")
        a, bb = a32.astype(dt), bb32.astype(dt)
        A = L.to(a)
        if trans:
            B, b = L.mT(L.to(bb)), bb.T
        else:
            B, b = L.to(bb), bb
        kw = {} if od is None else {"out_dtype": L.tdt(od)}
        got = G(A, B, **kw)
        used.append(polygemm.last_plan().variant)
        meta(L, got, (m, n), od or dt, what)
        if od is None:
            ref = L.matmul(A, B)
            need(tuple(ref.shape) == (m, n) and npdt(ref) == npdt(got), f"{what}: {L.name}.matmul gives {ref.dtype} {tuple(ref.shape)}")
            del ref
        chk(got, a, b, out_dtype=od, what=what)
        del A, B, got
    report(("b = W.T view; " if trans else "") + "variants " + ", ".join(used))
