"""``explain``, ``last_plan`` (per thread, after a refusal) and the plan cache on device arrays."""

from __future__ import annotations

import threading

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
    G,
    H,
    Lib,
    LIBS,
    meta,
    NAN,
    need,
    one_line,
    refusal,
    report,
    rnd,
    same_bits,
    TL,
    torch,
)

pytestmark = pytest.mark.cuda


def test_explain(L: Lib) -> None:
    m, k, n = 64, 48, 80
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    A, B, Cc = L.to(a), L.to(b), L.to(c)
    O = L.full((m, n), NAN, F32)
    plan = polygemm.explain(A, B, Cc, alpha=0.5, beta=2.0, out=O, device="cuda")
    L.sync()
    need(np.isnan(H(O)).all(), "explain() wrote out")
    need(same_bits(H(Cc), c), "explain() changed c")
    need(plan.backend == "cuda", f"plan.backend {plan.backend}")
    need((plan.problem.m, plan.problem.n, plan.problem.k) == (m, n, k), f"plan problem {plan.problem.m}x{plan.problem.n}x{plan.problem.k}")
    text = str(plan)
    need("cuda" in text and plan.variant in text, "str(plan) does not name the backend and variant")
    need(G(A, B, Cc, alpha=0.5, beta=2.0, out=O) is O, "out not returned")
    chk(O, a, b, c, 0.5, 2.0, what="gemm after explain")
    lp = polygemm.last_plan()
    need(lp is not None and lp.variant == plan.variant, f"last_plan().variant {getattr(lp, 'variant', None)} != explain's {plan.variant}")
    need(lp.problem.alpha == 0.5 and lp.problem.beta == 2.0, f"last_plan alpha/beta {lp.problem.alpha}/{lp.problem.beta}")
    Aw = L.to(rnd((m, 2 * k)))
    copies = polygemm.explain(Aw[:, ::2], B, device="cuda").copies
    need(copies, "explain of a strided device a lists no copy")
    report(f"variant {plan.variant}; strided a: {one_line(copies[0], 70)}")


def test_last_plan_after_refusal(any_lib) -> None:
    L = LIBS[0]
    A, B = L.to(rnd((40, 24))), L.to(rnd((24, 36)))
    G(A, B)
    refusal(lambda: G(A, L.to(rnd((25, 36)))))
    lp = polygemm.last_plan()
    need(lp is not None and (lp.problem.m, lp.problem.n, lp.problem.k) == (40, 36, 24),
         f"after a refused call last_plan() describes {None if lp is None else (lp.problem.m, lp.problem.n, lp.problem.k)}")


def test_last_plan_thread_local(any_lib) -> None:
    L = LIBS[0]
    A, B = L.to(rnd((30, 20))), L.to(rnd((20, 10)))
    a2, b2 = rnd((12, 8)), rnd((8, 6))
    G(A, B)
    got: dict = {}

    def work():
        try:
            got["before"] = polygemm.last_plan()
            r = G(L.to(a2), L.to(b2))
            got["ok"] = check_result(H(r), a2, b2).ok
            got["after"] = polygemm.last_plan()
        except Exception as e:  # noqa: BLE001
            got["err"] = f"{type(e).__name__}: {one_line(e, 120)}"

    th = threading.Thread(target=work, daemon=True)
    th.start()
    th.join(30)
    need(not th.is_alive(), "thread still running after 30 s")
    need("err" not in got, f"in a thread: {got.get('err')}")
    need(got.get("before") is None, "a new thread's last_plan() is not None before its first call")
    need(got.get("ok"), "the thread's result is wrong")
    aft = got.get("after")
    need(aft is not None and aft.problem.m == 12, "the thread's last_plan() does not describe its call")
    mine = polygemm.last_plan()
    need(mine is not None and mine.problem.m == 30, "the main thread's last_plan() was changed by another thread's call")


def test_cache_new_pointers(L: Lib) -> None:
    notes = []
    for dt, (m, k, n) in ((F32, (100, 120, 90)), (F16, (256, 256, 256))):
        a1, b1, a2, b2 = rnd((m, k), dt), rnd((k, n), dt), rnd((m, k), dt), rnd((k, n), dt)
        A1, B1, A2, B2 = L.to(a1), L.to(b1), L.to(a2), L.to(b2)
        h0 = polygemm.plan_cache_info()["hits"]
        R1 = G(A1, B1)
        R2 = G(A2, B2)
        h1 = polygemm.plan_cache_info()["hits"]
        need(h1 >= h0 + 1, f"{dt.name}: the second call of the same shapes was no cache hit ({h0} -> {h1})")
        chk(R1, a1, b1, what=f"{dt.name} first pointers")
        chk(R2, a2, b2, what=f"{dt.name} second pointers (cached plan)")
        need(not same_bits(H(R1), H(R2)), f"{dt.name}: two different inputs gave the same result")
        L.copy_(A1, L.to(a2))  # same pointer, new contents
        chk(G(A1, B1), a2, b1, what=f"{dt.name} same pointers, new contents")
        O = L.full((m, n), NAN, dt)
        G(A1, B1, out=O)
        chk(O, a2, b1, what=f"{dt.name} out=, first")
        G(A2, B2, out=O)
        chk(O, a2, b2, what=f"{dt.name} same out, other inputs")
        polygemm.clear_plan_cache()
        chk(G(A2, B1), a2, b1, what=f"{dt.name} after clear_plan_cache")
        notes.append(polygemm.last_plan().variant)
    report("variants " + ", ".join(notes))


def test_cache_alignment(L: Lib) -> None:
    for dt, (m, k, n), offs in ((F16, (256, 256, 256), (0, 1, 8, 3, 0)), (F32, (128, 64, 96), (0, 1, 4, 3, 0))):
        base = rnd((m * k + 16,), dt)
        b = rnd((k, n), dt)
        dbase, B = L.to(base), L.to(b)
        for off in offs:
            A = dbase[off:off + m * k].reshape(m, k)
            chk(G(A, B), base[off:off + m * k].reshape(m, k), b, what=f"{dt.name} a at +{off} elements")
        Bv = L.to(np.concatenate([b, b], axis=1))[:, 1:n + 1]  # b whose rows start 1 element in
        chk(G(L.to(base[:m * k].reshape(m, k)), Bv), base[:m * k].reshape(m, k), np.concatenate([b, b], axis=1)[:, 1:n + 1],
            what=f"{dt.name} b offset by one element")


def test_cache_inplace_toggle(L: Lib) -> None:
    m, k, n = 48, 32, 40
    a, b = rnd((m, k)), rnd((k, n))
    A, B = L.to(a), L.to(b)
    c1, c2, c3 = rnd((m, n)), rnd((m, n)), rnd((m, n))
    C1, C2, C3 = L.to(c1), L.to(c2), L.to(c3)
    G(A, B, C1, beta=1.0, out=C1)
    chk(C1, a, b, c1, 1.0, 1.0, what="in place")
    O = L.full((m, n), NAN, F32)
    G(A, B, C2, beta=1.0, out=O)
    chk(O, a, b, c2, 1.0, 1.0, what="same shapes, separate out")
    need(same_bits(H(C2), c2), "c was written though out was separate")
    G(A, B, C3, beta=-1.0, out=C3[...])
    chk(C3, a, b, c3, 1.0, -1.0, what="in place through out=c[...]")
    chk(G(A, B, C2, beta=2.0), a, b, c2, 1.0, 2.0, what="new result after in-place calls")


def test_splitk_deterministic(L: Lib) -> None:
    notes = []
    for dt, (m, n, k) in ((F32, (64, 64, 16384)), (F16, (64, 64, 16384)), (F16, (128, 128, 8192))):
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        A, B = L.to(a), L.to(b)
        r1 = H(G(A, B))
        v = polygemm.last_plan().variant
        r2, r3 = H(G(A, B)), H(G(A, B))
        need(same_bits(r1, r2) and same_bits(r1, r3), f"{dt.name} {m}x{n}x{k} ({v}): repeated calls differ in bits")
        s = L.new_stream()
        with L.ctx(s):
            r4 = L.read_on(G(A, B), s)
        need(same_bits(r1, r4), f"{dt.name} {m}x{n}x{k} ({v}): a call on another stream differs in bits")
        chk(r1, a, b, what=f"{dt.name} {m}x{n}x{k} ({v})")
        notes.append(v)
    report("variants " + ", ".join(notes))


def test_device_forms(L: Lib) -> None:
    m, k, n = 32, 24, 40
    a, b = rnd((m, k)), rnd((k, n))
    A, B = L.to(a), L.to(b)
    forms = ["cuda", "cuda:0", None, "auto", A.device]
    if not L.torch:
        forms.append(cp.cuda.Device(0))
    else:
        forms.append(torch.device("cuda", 0))
    for f in forms:
        got = G(A, B, device=f) if f is not None else polygemm.gemm(A, B)
        meta(L, got, (m, n), F32, f"device={f!r}")
        chk(got, a, b, what=f"device={f!r}")


def test_recover_after_errors(L: Lib) -> None:
    m, k, n = 32, 24, 40
    a, b = rnd((m, k)), rnd((k, n))
    A, B = L.to(a), L.to(b)
    chk(G(A, B), a, b, what="before the errors")
    sq = L.to(rnd((k, k)))
    bad = [
        ("dtypes", lambda: G(A, L.to(b.astype(F16))), (ValueError, TypeError)),
        ("inner dim", lambda: G(A, L.to(rnd((k + 1, n)))), (ValueError, TypeError)),
        ("out is a", lambda: G(sq, sq, out=sq), (ValueError, TypeError)),
        ("variant", lambda: G(A, B, variant="no_such_variant"), (ValueError, TypeError)),
        ("alpha nan", lambda: G(A, B, alpha=NAN), (ValueError, TypeError)),
        ("beta no c", lambda: G(A, B, beta=1.0), (ValueError, TypeError)),
        ("1-D a", lambda: G(L.to(rnd((k,))), B), (ValueError, TypeError)),
        ("int32", lambda: G(L.to(a.astype("int32")), L.to(b.astype("int32"))), (ValueError, TypeError)),
        ("cuda:7", lambda: G(A, B, device="cuda:7"), (ValueError, TypeError, RuntimeError)),
        ("dtype=", lambda: G(A, B, dtype=L.tdt(F32)), (ValueError, TypeError)),
    ]
    if L.torch:
        bad.append(("requires_grad", lambda: G(A.clone().requires_grad_(), B), (ValueError, TypeError)))
    if len(LIBS) == 2:
        other = CPL if L.torch else TL
        bad.append(("mixed libs", lambda: G(A, other.to(b)), (ValueError, TypeError)))
    problems = []
    for name, fn, kinds in bad:
        try:
            fn()
            problems.append(f"{name}: accepted")
        except kinds:
            pass
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} {one_line(e, 60)}")
    chk(G(A, B), a, b, what="cached call after the errors")
    a2, b2 = rnd((17, 9)), rnd((9, 23))
    chk(G(L.to(a2), L.to(b2)), a2, b2, what="new shape after the errors")
    lp = polygemm.last_plan()
    need(lp is not None and lp.problem.m == 17, "last_plan() does not describe the last good call")
    need(not problems, "; ".join(problems))
    report(f"{len(bad)} refusals, then good calls right")
