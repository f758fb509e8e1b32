"""``c`` and ``beta`` forms, and alpha/beta given as device or CPU scalars."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import check_result

from .support import (
    chk,
    cp,
    F16,
    F32,
    Fail,
    G,
    H,
    Info,
    Lib,
    meta,
    NAN,
    need,
    one_line,
    refusal,
    report,
    rnd,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def _dev_scalar(L: Lib, v: float, shape=()):
    if L.torch:
        return torch.full(shape, v, device="cuda")
    return cp.full(shape, v, dtype=np.float32)


def test_c_beta_forms(L: Lib) -> None:
    m, k, n, bt = 48, 40, 56, 3
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    A, B = L.to(a), L.to(b)
    chk(G(A, B, L.mT(L.to(c.T)), alpha=2.0, beta=-0.5), a, b, c, 2.0, -0.5, what="transposed c")
    a16, b16 = rnd((m, k), F16), rnd((k, n), F16)
    got = G(L.to(a16), L.to(b16), L.to(c), alpha=np.float16(0.5), beta=np.float32(1.5), out_dtype=L.tdt(F32))
    meta(L, got, (m, n), F32, "f16 with f32 c")
    chk(got, a16, b16, c, 0.5, 1.5, out_dtype=F32, what="f16 inputs, f32 c, NumPy scalar alpha/beta")
    c16 = rnd((m, n), F16)
    chk(G(L.to(a16), L.to(b16), L.to(c16), beta=-1.0), a16, b16, c16, 1.0, -1.0, what="f16 c")
    bias = rnd((1, n))
    chk(G(A, B, L.expand(L.to(bias), (m, n)), beta=1.0), a, b, np.broadcast_to(bias, (m, n)), 1.0, 1.0, what="bias c (stride 0)")
    a3 = rnd((bt, m, k))
    c3v = L.expand(L.to(c)[None], (bt, m, n))
    chk(G(L.to(a3), B, c3v, beta=0.5), a3, b, np.broadcast_to(c, (bt, m, n)), 1.0, 0.5, what="c broadcast over the batch")
    chk(G(A, B, L.to(c), alpha=0.0, beta=1.0), a, b, c, 0.0, 1.0, what="alpha=0, beta=1")
    got = G(A, B, L.full((m, n), NAN, F32), alpha=0.0, beta=0.0)
    need(np.array_equal(H(got), np.zeros((m, n), np.float32)), "alpha=0, beta=0, NaN c: result not zeros")
    chk(G(A, B, L.to(c), alpha=-3, beta=2), a, b, c, -3.0, 2.0, what="int alpha/beta")


def test_c_2d_for_batch(L: Lib) -> None:
    m, k, n, bt = 20, 12, 16, 3
    A, B, Cc = L.to(rnd((bt, m, k))), L.to(rnd((k, n))), L.to(rnd((m, n)))
    report(Info(refusal(lambda: G(A, B, Cc, beta=1.0), names=["c"])))


def test_c_dtype_mismatch(L: Lib) -> None:
    m, k, n = 20, 12, 16
    A, B, Cc = L.to(rnd((m, k), F16)), L.to(rnd((k, n), F16)), L.to(rnd((m, n)))
    report(Info(refusal(lambda: G(A, B, Cc, beta=1.0), names=["c"])))


def test_alpha_device_0d(L: Lib) -> None:
    m, k, n = 24, 16, 20
    a, b = rnd((m, k)), rnd((k, n))
    al = _dev_scalar(L, 0.5)
    try:
        got = G(L.to(a), L.to(b), alpha=al)
    except (ValueError, TypeError) as e:
        msg = one_line(e, 400)
        need("float(alpha)" in msg, f"{type(e).__name__} does not name float(alpha): {msg[:200]}")
        report(Info(f"{type(e).__name__}: {msg[:200]}"))
        return
    ok = check_result(H(got), a, b, None, 0.5).ok
    raise Fail(f"accepted a 0-D device alpha (README: refused naming float(alpha)); result {'right' if ok else 'WRONG'}")


def test_beta_device_0d(L: Lib) -> None:
    m, k, n = 24, 16, 20
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    be = _dev_scalar(L, 2.0)
    try:
        got = G(L.to(a), L.to(b), L.to(c), beta=be)
    except (ValueError, TypeError) as e:
        msg = one_line(e, 400)
        need("float(beta)" in msg, f"{type(e).__name__} does not name float(beta): {msg[:200]}")
        report(Info(f"{type(e).__name__}: {msg[:200]}"))
        return
    ok = check_result(H(got), a, b, c, 1.0, 2.0).ok
    raise Fail(f"accepted a 0-D device beta (README: refused naming float(beta)); result {'right' if ok else 'WRONG'}")


def test_alpha_device_1elem(L: Lib) -> None:
    m, k, n = 24, 16, 20
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    al = _dev_scalar(L, 0.5, (1,))
    report(Info(refusal(lambda: G(A, B, alpha=al), names=["alpha"])))


def test_torch_alpha_cpu_tensors(torch_lib) -> None:
    m, k, n = 24, 16, 20
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    learnt = torch.tensor(-2.0, requires_grad=True)
    with pytest.raises(pg.ArgumentError, match="beta requires grad"):  # its gradient would be lost: refused, as an operand's
        G(TL.to(a), TL.to(b), TL.to(c), alpha=torch.tensor(0.5), beta=learnt)
    with torch.no_grad():
        got = G(TL.to(a), TL.to(b), TL.to(c), alpha=torch.tensor(0.5), beta=learnt)
    chk(got, a, b, c, 0.5, -2.0, what="CPU 0-D tensors as alpha, beta (beta requires grad, under no_grad)")
    got = G(TL.to(a), TL.to(b), alpha=torch.tensor(3, dtype=torch.int64))
    chk(got, a, b, None, 3.0, what="CPU int64 0-D tensor alpha")
    got = G(TL.to(a), TL.to(b), alpha=torch.tensor(0.25, dtype=torch.float16))
    chk(got, a, b, None, 0.25, what="CPU float16 0-D tensor alpha")
