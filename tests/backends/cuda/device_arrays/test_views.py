"""Device views as operands: transposed, sliced, broadcast (stride 0), permuted batches, overlapping inputs, negative strides."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm

from .support import (
    chk,
    cp,
    CPL,
    F16,
    F32,
    G,
    H,
    Lib,
    meta,
    NAN,
    need,
    one_line,
    report,
    rnd,
    same_bits,
    SENT,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def test_views_transposed(L: Lib) -> None:
    for dt, (m, k, n) in ((F32, (81, 67, 49)), (F16, (80, 64, 48)), (F16, (81, 67, 49))):
        what = f"{dt.name} {m}x{n}x{k}"
        a, b, c = rnd((m, k), dt), rnd((k, n), dt), rnd((m, n), dt)
        A, B, Cc = L.mT(L.to(a.T)), L.mT(L.to(b.T)), L.mT(L.to(c.T))
        out = L.mT(L.full((n, m), NAN, dt))
        need(G(A, B, Cc, alpha=0.5, beta=-1.0, out=out) is out, f"{what}: out not returned")
        chk(out, a, b, c, 0.5, -1.0, what=f"{what} all column-major, out transposed")
        got = G(A, B)
        meta(L, got, (m, n), dt, what)
        chk(got, a, b, what=f"{what} new result of column-major operands")
        got = G(A, L.to(b))
        chk(got, a, b, what=f"{what} a.T-view @ b")


def test_views_sliced_offset(L: Lib) -> None:
    m, k, n = 67, 45, 38
    for dt in (F32, F16):
        big_a, big_b = rnd((2 * m + 1, k + 3), dt), rnd((k + 1, n + 2), dt)
        dA, dB = L.to(big_a), L.to(big_b)
        a, b = big_a[1::2, 3:], big_b[1:, :n]
        A, B = dA[1::2, 3:], dB[1:, :n]
        got = G(A, B)
        meta(L, got, (m, n), dt, f"{dt.name} stepped/offset views")
        chk(got, a, b, what=f"{dt.name} stepped/offset views")
        # an odd element offset: the pointer is off 16 bytes (TMA rungs need 16)
        base = rnd((m * k + 8,), dt)
        dbase = L.to(base)
        for off in (1, 3):
            A2 = dbase[off:off + m * k].reshape(m, k)
            chk(G(A2, L.to(b)), base[off:off + m * k].reshape(m, k), b, what=f"{dt.name} pointer offset {off} elements")
        L.sync()
        need(same_bits(H(dA), big_a) and same_bits(H(dB), big_b) and same_bits(H(dbase), base), f"{dt.name}: an input was modified")


def test_views_stride0(L: Lib) -> None:
    m, k, n, bt = 48, 40, 56, 4
    for dt in (F32, F16):
        row, col, bias = rnd((1, k), dt), rnd((k, 1), dt), rnd((1, n), dt)
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        A0 = L.expand(L.to(row), (m, k))  # strides (0, 1)
        B0 = L.expand(L.to(col), (k, n))  # strides (1, 0)
        C0 = L.expand(L.to(bias), (m, n))  # the bias idiom: a @ b + bias
        hA0, hB0, hC0 = np.broadcast_to(row, (m, k)), np.broadcast_to(col, (k, n)), np.broadcast_to(bias, (m, n))
        got = G(A0, L.to(b), C0, beta=1.0)
        meta(L, got, (m, n), dt, f"{dt.name} row-expanded a, bias c")
        chk(got, hA0, b, hC0, 1.0, 1.0, what=f"{dt.name} row-expanded a + bias c")
        chk(G(L.to(a), B0), a, hB0, what=f"{dt.name} column-expanded b")
        a3 = L.expand(L.to(a)[None], (bt, m, k))
        b3 = rnd((bt, k, n), dt)
        chk(G(a3, L.to(b3)), np.broadcast_to(a, (bt, m, k)), b3, what=f"{dt.name} batch-expanded a")
        one = L.expand(L.to(rnd((1, 1), dt)), (m, k))  # every element the same memory
        chk(G(one, L.to(b)), H(one), b, what=f"{dt.name} fully expanded a")


def test_views_permuted_batch(L: Lib) -> None:
    m, k, n = 24, 16, 20
    base = rnd((3, 2, m, k))
    A = L.swap(L.to(base), 0, 1)  # (2, 3, m, k): a batch no single stride walks
    a = np.swapaxes(base, 0, 1)
    b = rnd((k, n))
    got = G(A, L.to(b))
    meta(L, got, (2, 3, m, n), F32, "permuted batch a")
    chk(got, a, b, what="permuted batch a")
    bb = rnd((k, 4, n))  # (K, B, N) -> (B, K, N): matrices interleaved, one batch stride walks them
    B3 = L.swap(L.to(bb), 0, 1)
    a3 = rnd((4, m, k))
    got = G(L.to(a3), B3)
    chk(got, a3, np.swapaxes(bb, 0, 1), what="interleaved batch b")
    cb = rnd((3, 2, m, n))
    Cc = L.swap(L.to(cb), 0, 1)
    got = G(A, L.to(b), Cc, beta=0.5)
    chk(got, a, b, np.swapaxes(cb, 0, 1), 1.0, 0.5, what="permuted batch a and c")


def test_views_overlapping_input(L: Lib) -> None:
    m, k, n, bt = 40, 30, 36, 3
    hb = rnd((m + k - 1,))
    isz = hb.itemsize
    A = L.as_strided(L.to(hb), (m, k), (1, 1))  # a Hankel matrix: rows overlap
    a = np.lib.stride_tricks.as_strided(hb, (m, k), (isz, isz))
    b = rnd((k, n))
    got = G(A, L.to(b))
    meta(L, got, (m, n), F32, "Hankel a")
    chk(got, a, b, what="Hankel a (strides (1, 1))")
    hb3 = rnd(((m + bt - 1) * k,))
    A3 = L.as_strided(L.to(hb3), (bt, m, k), (k, k, 1))  # sliding windows: batches share rows
    a3 = np.lib.stride_tricks.as_strided(hb3, (bt, m, k), (k * isz, k * isz, isz))
    chk(G(A3, L.to(b)), a3, b, what="overlapping batches of a")


def test_views_batch_strides(L: Lib) -> None:
    m, k, n, bt = 32, 24, 40, 3
    big_a = rnd((bt, m, k + 3))
    A = L.to(big_a)[:, :, :k]
    a = big_a[:, :, :k]
    big_b = rnd((2 * bt, k, n))
    B = L.to(big_b)[::2]
    b = big_b[::2]
    big_c = rnd((bt, m + 2, n))
    Cc = L.to(big_c)[:, 1:m + 1]
    c = big_c[:, 1:m + 1]
    big_o = L.full((bt, m, n + 5), SENT, F32)
    out = big_o[:, :, 2:2 + n]
    need(G(A, B, Cc, alpha=-1.5, beta=0.25, out=out) is out, "out not returned")
    h = H(big_o)
    chk(h[:, :, 2:2 + n], a, b, c, -1.5, 0.25, what="strided batches, out with a batch stride")
    need((h[:, :, :2] == SENT).all() and (h[:, :, 2 + n:] == SENT).all(), "out's buffer written outside the view")
    got = G(A, B)
    meta(L, got, (bt, m, n), F32, "strided batches")
    chk(got, a, b, what="strided batches new result")


def test_torch_views_channels_last(torch_lib) -> None:
    x = torch.randn(2, 3, 16, 24, device="cuda").to(memory_format=torch.channels_last)
    need(not x.is_contiguous(), "setup: channels_last tensor is contiguous")
    y = TL.to(rnd((24, 20)))
    got = G(x, y)
    ref = torch.matmul(x, y)
    meta(TL, got, tuple(ref.shape), F32, "channels_last a")
    chk(got, H(x), H(y), what="channels_last a")
    copies = list(polygemm.last_plan().copies)
    p = TL.to(rnd((2, 3, 10, 16)))
    y4 = torch.randn(2, 3, 16, 24, device="cuda").to(memory_format=torch.channels_last)
    chk(G(p, y4), H(p), H(y4), what="channels_last b")
    o = torch.full((2, 3, 16, 20), NAN, device="cuda").to(memory_format=torch.channels_last)
    try:
        G(x, y, out=o)
        chk(o, H(x), H(y), what="channels_last out")
        o_note = "channels_last out written"
    except (ValueError, TypeError) as e:
        o_note = f"channels_last out refused ({type(e).__name__})"
    try:
        torch.matmul(x, y, out=torch.empty(2, 3, 16, 20, device="cuda").to(memory_format=torch.channels_last))
        t_note = "torch.matmul takes it"
    except Exception as e:  # noqa: BLE001
        t_note = f"torch.matmul refuses it ({type(e).__name__})"
    report(f"copies: {len(copies)} ({one_line(copies[0], 60) if copies else 'none'}); {o_note}; {t_note}")


def test_cupy_views_negative_stride(cupy_lib) -> None:
    m, k, n = 40, 36, 44
    for dt in (F32, F16):
        ab, bb, cb = rnd((m, k), dt), rnd((k, n), dt), rnd((m, n), dt)
        A, B, Cc = cp.asarray(ab)[::-1], cp.asarray(bb)[:, ::-1], cp.asarray(cb)[::-1, ::-1]
        got = G(A, B, Cc, alpha=1.5, beta=-0.5)
        meta(CPL, got, (m, n), dt, f"{dt.name} negative strides")
        chk(got, ab[::-1], bb[:, ::-1], cb[::-1, ::-1], 1.5, -0.5, what=f"{dt.name} a[::-1], b[:, ::-1], c[::-1, ::-1]")
        chk(G(cp.asarray(ab)[::-1, ::-1], cp.asarray(bb)), ab[::-1, ::-1], bb, what=f"{dt.name} a[::-1, ::-1]")
        chk(G(cp.asarray(ab.T.copy()).T[::-1], cp.asarray(bb)), ab.T.copy().T[::-1], bb, what=f"{dt.name} column-major a reversed rows")


def test_cupy_batch_negative_stride(cupy_lib) -> None:
    m, k, n, bt = 24, 32, 40, 4
    notes = []
    for dt in (F32, F16):
        a3, b3, c3 = rnd((bt, m, k), dt), rnd((bt, k, n), dt), rnd((bt, m, n), dt)
        A3, B3, C3 = cp.asarray(a3), cp.asarray(b3), cp.asarray(c3)
        chk(G(A3[::-1], B3), a3[::-1], b3, what=f"{dt.name} a[::-1] (batch reversed)")
        chk(G(A3, B3[::-1]), a3, b3[::-1], what=f"{dt.name} b[::-1] (batch reversed)")
        chk(G(A3[::-1], B3[::-1], C3[::-1], beta=0.5), a3[::-1], b3[::-1], c3[::-1], 1.0, 0.5, what=f"{dt.name} a, b, c batch reversed")
        a4 = rnd((2, 3, m, k), dt)
        chk(G(cp.asarray(a4)[::-1, ::-1], cp.asarray(b3[0])), a4[::-1, ::-1], b3[0], what=f"{dt.name} two batch axes reversed")
        big = cp.full((bt, m, n), NAN, dt)
        out = big[::-1]
        try:
            r = G(A3, B3, out=out)
            need(r is out, "out not returned")
            chk(out, a3, b3, what=f"{dt.name} out batch reversed")
            notes.append(f"{dt.name} out[::-1] written right")
        except (ValueError, TypeError) as e:
            need(np.isnan(H(big)).all(), f"{dt.name} out[::-1] refused but written")
            notes.append(f"{dt.name} out[::-1] refused ({type(e).__name__})")
    report("; ".join(notes))


def test_cupy_out_negative_stride(cupy_lib) -> None:
    m, k, n = 20, 12, 16
    A, B = cp.asarray(rnd((m, k))), cp.asarray(rnd((k, n)))
    big = cp.full((m, n), SENT, np.float32)
    got = G(A, B, out=big[::-1])  # written through a C-ordered stand-in, as numpy.matmul writes any out
    cp.cuda.get_current_stream().synchronize()
    chk(H(got), H(A), H(B), what="out of negative row stride")
