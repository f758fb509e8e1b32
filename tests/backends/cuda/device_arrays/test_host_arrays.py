"""NumPy operands (Fortran order, pinned memory, half types, threads) with ``device='cuda'``."""

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
    NAN,
    need,
    report,
    rnd,
    Skip,
    torch,
)

pytestmark = pytest.mark.cuda


def test_numpy_fortran_views() -> None:
    m, k, n = 70, 50, 60
    a, b = np.asfortranarray(rnd((m, k))), np.asfortranarray(rnd((k, n)))
    got = G(a, b)
    need(type(got) is np.ndarray and got.flags.c_contiguous and got.dtype == F32, f"result {type(got)} {got.dtype} C={got.flags.c_contiguous}")
    chk(got, a, b, what="Fortran a, b")
    aw, c = rnd((m, 2 * k)), rnd((n, m))
    out = np.asfortranarray(np.full((m, n), NAN, np.float32))
    need(G(aw[:, ::2], b, c.T, alpha=1.5, beta=-0.5, out=out) is out, "F-ordered out not returned")
    chk(out, aw[:, ::2], b, c.T, 1.5, -0.5, what="strided a, F b, transposed c, F out")
    chk(G(aw[::-1, :k], b[::-1].copy()), aw[::-1, :k], b[::-1].copy(), what="negative-stride host a")
    ro = rnd((m, k))
    ro.flags.writeable = False
    chk(G(ro, b), ro, b, what="read-only host a")


def test_numpy_pinned_cupyx(cupy_lib) -> None:
    try:
        import cupyx
    except Exception as e:  # noqa: BLE001
        raise Skip(f"cupyx unavailable ({type(e).__name__})") from None
    m, k, n = 64, 48, 56
    a, b = rnd((m, k)), rnd((k, n))
    pa, pb, po = cupyx.empty_pinned((m, k), np.float32), cupyx.empty_pinned((k, n), np.float32), cupyx.empty_pinned((m, n), np.float32)
    pa[...] = a
    pb[...] = b
    po[...] = np.nan
    got = G(pa, pb)
    need(type(got) is np.ndarray, f"pinned inputs gave {type(got)}")
    chk(got, a, b, what="pinned inputs")
    need(G(pa, pb, out=po) is po, "pinned out not returned")
    chk(po, a, b, what="pinned out")


def test_numpy_torch_cpu_pinned(torch_lib) -> None:
    m, k, n = 64, 48, 56
    a, b = rnd((m, k)), rnd((k, n))
    ta, tb = torch.from_numpy(a).pin_memory(), torch.from_numpy(b).pin_memory()
    got = G(ta, tb)
    need(isinstance(got, torch.Tensor) and got.device.type == "cpu", f"torch CPU pinned inputs gave {type(got)} on {getattr(got, 'device', '?')}")
    chk(got, a, b, what="torch CPU pinned")
    got = polygemm.gemm(ta, tb)  # device auto
    need(isinstance(got, torch.Tensor) and got.device.type == "cpu", "device=auto: not a CPU tensor")
    chk(got, a, b, what="torch CPU pinned, device auto")
    report(f"auto ran on {polygemm.last_plan().backend}")


def test_numpy_half_types() -> None:
    m, k, n = 64, 48, 56
    if BF16 is not None:
        a, b = rnd((m, k), BF16), rnd((k, n), BF16)
        got = G(a, b)
        need(got.dtype == BF16, f"bf16 NumPy gave {got.dtype}")
        chk(got, a, b, what="bf16 NumPy")
    a, b, c = rnd((m, k), F16), rnd((k, n), F16), rnd((m, n))
    got = G(a, b, c, beta=1.0, out_dtype=np.float32)
    need(got.dtype == F32, f"f16 out_dtype f32 gave {got.dtype}")
    chk(got, a, b, c, 1.0, 1.0, out_dtype=F32, what="f16 into f32 (host)")
    a3 = rnd((2, 1, m, k), F16)
    b3 = rnd((3, k, n), F16)
    chk(G(a3, b3), a3, b3, what="f16 4-D broadcast (host)")
