"""CuPy's memory pools and torch tensors that require grad or are Parameters."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from polygemm.testing import check_result

from .support import (
    chk,
    cp,
    CPL,
    F32,
    G,
    H,
    Info,
    meta,
    need,
    one_line,
    report,
    rnd,
    Skip,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def _pool_probe(make_pool, label):
    m, k, n = 96, 64, 80
    a, b = rnd((m, k)), rnd((k, n))
    try:
        pool = make_pool()
    except Exception as e:  # noqa: BLE001
        raise Skip(f"{label} unavailable: {type(e).__name__}: {one_line(e, 80)}") from None
    with cp.cuda.using_allocator(pool.malloc):
        A, B = cp.asarray(a), cp.asarray(b)
        inside = G(A, B)
        chk(inside, a, b, what=f"{label}: inputs and result in the pool")
        O = cp.full((m, n), np.nan, np.float32)
    outside = G(A, B)
    meta(CPL, outside, (m, n), F32, f"{label}: called outside the pool")
    chk(outside, a, b, what=f"{label}: called outside")
    G(A, B, out=O)
    chk(O, a, b, what=f"{label}: out from the pool")
    used = pool.used_bytes() if hasattr(pool, "used_bytes") else -1
    del inside, A, B, O
    gc.collect()
    return f"pool used {used} B while alive"


def test_cupy_other_pool(cupy_lib) -> None:
    report(_pool_probe(lambda: cp.cuda.MemoryPool(), "a second MemoryPool"))


def test_cupy_managed_pool(cupy_lib) -> None:
    report(_pool_probe(lambda: cp.cuda.MemoryPool(cp.cuda.malloc_managed), "managed MemoryPool"))


def test_cupy_async_pool(cupy_lib) -> None:
    report(_pool_probe(lambda: cp.cuda.MemoryAsyncPool(), "MemoryAsyncPool"))


def test_torch_requires_grad(torch_lib) -> None:
    m, k, n = 48, 32, 40
    a, b = rnd((m, k)), rnd((k, n))
    A, B = TL.to(a).requires_grad_(), TL.to(b)
    tm = torch.matmul(A, B)
    parts = [f"torch.matmul: requires_grad={tm.requires_grad}"]

    def nograd():
        with torch.no_grad():
            return G(A, B)

    for label, fn in (("a.requires_grad", lambda: G(A, B)), ("under no_grad", nograd),
                      ("non-leaf a*2", lambda: G(A * 2.0, B))):
        try:
            r = fn()
            scale = 2.0 if "a*2" in label else 1.0
            ok = check_result(H(r), a, b, None, scale).ok
            parts.append(f"{label}: ACCEPTED, result requires_grad={r.requires_grad}, values {'right' if ok else 'WRONG'}")
        except (ValueError, TypeError) as e:
            parts.append(f"{label}: refused, {type(e).__name__}: {one_line(e, 45)}")
        except Exception as e:  # noqa: BLE001
            parts.append(f"{label}: unexpected {type(e).__name__}: {one_line(e, 60)}")
    report(Info("; ".join(parts)))


def test_torch_parameter_nograd(torch_lib) -> None:
    m, k, n = 48, 32, 40
    a, b = rnd((m, k)), rnd((k, n))
    W = torch.nn.Parameter(TL.to(b), requires_grad=False)
    got = G(TL.to(a), W)
    need(type(got) is torch.Tensor, f"result is {type(got).__name__}, expected a plain torch.Tensor")
    meta(TL, got, (m, n), F32, "Parameter(requires_grad=False) b")
    chk(got, a, b, what="Parameter(requires_grad=False) b")
    with torch.inference_mode():
        r = G(TL.to(a), TL.to(b))
        chk(r, a, b, what="inside inference_mode")
