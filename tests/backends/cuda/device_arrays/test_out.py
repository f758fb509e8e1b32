"""``out=`` of device arrays: views written in place and returned, refusals that leave out untouched."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm
from polygemm.testing import check_result

from .support import (
    chk,
    cp,
    CPL,
    F16,
    F32,
    F64,
    Fail,
    G,
    H,
    Info,
    Lib,
    NAN,
    need,
    one_line,
    refusal,
    refused_untouched,
    report,
    rnd,
    same_bits,
    SENT,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def vendor_note(L: "Lib", A, B, make_out) -> str:
    """Whether the library's own matmul writes the out ``make_out()`` builds (said beside polygemm's refusal)."""
    try:
        o2 = make_out()
        (torch.matmul if L.torch else cp.matmul)(A, B, out=o2)
        return f"{L.name}.matmul writes it"
    except Exception as e:  # noqa: BLE001
        return f"{L.name}.matmul refuses it ({type(e).__name__})"


def test_out_col_slice(L: Lib) -> None:
    m, k, n = 50, 40, 60
    for dt in (F32, F16):
        a, b, c = rnd((m, k), dt), rnd((k, n), dt), rnd((m, n), dt)
        big = L.full((m, n + 5), SENT, dt)
        out = big[:, 3:3 + n]
        need(G(L.to(a), L.to(b), L.to(c), alpha=0.5, beta=2.0, out=out) is out, "out not returned")
        h = H(big)
        chk(h[:, 3:3 + n], a, b, c, 0.5, 2.0, what=f"{dt.name} out = big[:, 3:3+N]")
        need((h[:, :3] == SENT).all() and (h[:, 3 + n:] == SENT).all(), f"{dt.name}: out's buffer written outside the view")


def test_out_transposed_batched(L: Lib) -> None:
    m, k, n, bt = 36, 28, 44, 3
    for dt, od in ((F32, F32), (F16, F16), (F16, F32)):
        a, b = rnd((bt, m, k), dt), rnd((bt, k, n), dt)
        out = L.mT(L.full((bt, n, m), NAN, od))
        need(G(L.to(a), L.to(b), out=out) is out, "out not returned")
        chk(out, a, b, out_dtype=od, what=f"{dt.name}->{od.name} batched transposed out")
        out2 = L.mT(L.full((n, m), NAN, od))
        need(polygemm.matmul(L.to(a[0]), L.to(b[0]), out=out2) is out2, "matmul out not returned")
        chk(out2, a[0], b[0], out_dtype=od, what=f"{dt.name}->{od.name} matmul transposed out")


def test_out_inplace_c(L: Lib) -> None:
    bt, m, k, n = 3, 64, 48, 80
    a, b = rnd((bt, m, k), F16), rnd((bt, k, n), F16)
    c = rnd((bt, m, n), F32)
    A, B, Cc = L.to(a), L.to(b), L.to(c)
    for i, (al, be) in enumerate(((0.5, -1.0), (1.0, 1.0), (-0.25, 0.5))):
        before = H(Cc).copy()
        need(G(A, B, Cc, alpha=al, beta=be, out=Cc) is Cc, "out=c not returned")
        chk(Cc, a, b, before, al, be, out_dtype=F32, what=f"f16 into f32 c in place, call {i}")
    a2, b2, c2 = rnd((m, k)), rnd((k, n)), rnd((m, n))
    Cf = L.mT(L.to(c2.T))  # column-major c, updated in place
    need(G(L.to(a2), L.to(b2), Cf, alpha=2.0, beta=-1.0, out=Cf) is Cf, "out=c not returned")
    chk(Cf, a2, b2, c2, 2.0, -1.0, what="column-major c in place")
    Cv = L.to(c2)
    outv = Cv[:]  # another object over c's memory
    need(G(L.to(a2), L.to(b2), Cv, beta=0.75, out=outv) is outv, "out=c[:] not returned")
    chk(Cv, a2, b2, c2, 1.0, 0.75, what="out=c[:] in place")
    Cn = L.full((m, n), NAN, F32)
    G(L.to(a2), L.to(b2), Cn, beta=0.0, out=Cn)
    chk(Cn, a2, b2, what="out=c, NaN c, beta=0")


def test_out_wrong_dtype(L: Lib) -> None:
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    msgs = []
    for dt in (F16, F64, np.dtype(np.int32)):
        out = L.full((m, n), 7, dt)
        msgs.append(refused_untouched(L, lambda out=out: G(A, B, out=out), out, names=["out"]))
    A16, B16 = L.to(rnd((m, k), F16)), L.to(rnd((k, n), F16))
    o = L.full((m, n), 7, F32)
    msgs.append(refused_untouched(L, lambda: G(A16, B16, out=o, out_dtype=L.tdt(F16)), o))  # out and out_dtype disagree
    report(Info(f"[f16 out for f32] {msgs[0][:150]} | f64, int32, out/out_dtype clash: "
                + ", ".join(m_.split(":")[0] for m_ in msgs[1:]) + "; out untouched"))


def test_out_wrong_shape(L: Lib) -> None:
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    o1 = L.full((m, n + 1), 7, F32)
    msg = refused_untouched(L, lambda: G(A, B, out=o1), o1, names=["out"])
    o2 = L.full((n, m), 7, F32)
    refused_untouched(L, lambda: G(A, B, out=o2), o2, names=["out"])
    o3 = L.full((1, m, n), 7, F32)  # an extra batch axis numpy.matmul would refuse too
    refused_untouched(L, lambda: G(A, B, out=o3), o3)
    report(Info(msg))


def test_out_on_host(L: Lib) -> None:
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    host = np.full((m, n), SENT, np.float32)
    msg = refusal(lambda: G(A, B, out=host), names=["out"])
    need((host == SENT).all(), "refused but the host out was written")
    if L.torch:
        cpu = torch.full((m, n), SENT)
        refusal(lambda: G(A, B, out=cpu), names=["out"])
        need(bool((cpu == SENT).all()), "refused but the torch CPU out was written")
    report(Info(msg))


def test_out_other_library(L: Lib, both_libs) -> None:
    m, k, n = 20, 12, 16
    other = CPL if L.torch else TL
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    o = other.full((m, n), SENT, F32)
    report(refused_untouched(other, lambda: G(A, B, out=o), o))


def test_out_batch_stride0(L: Lib) -> None:
    m, k, n, bt = 20, 12, 16, 3
    A, B = L.to(rnd((bt, m, k))), L.to(rnd((bt, k, n)))
    base = L.full((1, m, n), SENT, F32)
    o = L.expand(base, (bt, m, n))
    report(refused_untouched(L, lambda: G(A, B, out=o), base, names=["out"]))


def test_out_overlapping_batches(L: Lib) -> None:
    """out's matrices overlap one another (as_strided): no result can be written there; torch.matmul refuses such an out."""
    m, k, n, bt = 20, 12, 16, 3
    a, b = rnd((bt, m, k)), rnd((bt, k, n))
    base = L.full(((m + bt - 1) * n,), SENT, F32)
    o = L.as_strided(base, (bt, m, n), (n, n, 1))
    before = H(base).copy()
    try:
        G(L.to(a), L.to(b), out=o)
    except (ValueError, TypeError) as e:
        L.sync()
        need(same_bits(before, H(base)), "refused but out's memory was modified")
        report(Info(f"{type(e).__name__}: {one_line(e)}"))
        return
    res = check_result(H(o), a, b)
    raise Fail("accepted an out whose matrices overlap each other (silently inconsistent): "
               + ("check " + ("passes?!" if res.ok else f"fails: {res.message[:150]}")))


def test_out_permuted_batch(L: Lib) -> None:
    """An out whose batch axes are swapped (strides no kernel writes) is written as numpy.matmul writes any out: the
    product goes into a C-ordered array of its library, then into out (explain and last_plan say so)."""
    m, k, n = 20, 12, 16
    a, b = rnd((2, 3, m, k)), rnd((2, 3, k, n))
    A, B = L.to(a), L.to(b)
    base = L.full((3, 2, m, n), SENT, F32)
    o = L.swap(base, 0, 1)
    got = G(A, B, out=o)
    need(got is o, "the out given is not what came back")
    L.sync()
    chk(H(o), a, b, what="permuted-batch out")
    need("C-ordered array" in " ".join(polygemm.last_plan().notes), "last_plan() does not say out was written through a C-ordered array")


def test_out_inner_stride2(L: Lib) -> None:
    """Every other column of a wider buffer as out: written through a C-ordered stand-in, the columns between them
    left as they were."""
    m, k, n = 20, 12, 16
    a, b = rnd((m, k)), rnd((k, n))
    A, B = L.to(a), L.to(b)
    big = L.full((m, 2 * n), SENT, F32)
    o = big[:, ::2]
    need(G(A, B, out=o) is o, "the out given is not what came back")
    L.sync()
    chk(H(o), a, b, what="stride-2 out")
    need(bool((H(big)[:, 1::2] == SENT).all()), "the columns between out's were written")


def test_torch_out_requires_grad(torch_lib) -> None:
    m, k, n = 20, 12, 16
    A, B = TL.to(rnd((m, k))), TL.to(rnd((k, n)))
    o = torch.zeros(m, n, device="cuda", requires_grad=True)
    msg = refusal(lambda: G(A, B, out=o))
    need(bool((o.detach() == 0).all()), "refused but the leaf out was written")
    try:
        torch.matmul(A, B, out=torch.zeros(m, n, device="cuda", requires_grad=True))
        tnote = "torch.matmul writes it"
    except Exception as e:  # noqa: BLE001
        tnote = f"torch.matmul refuses ({type(e).__name__})"
    report(Info(f"{tnote}; polygemm {msg}"))
