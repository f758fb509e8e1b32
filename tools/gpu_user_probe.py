#!/usr/bin/env python3
"""polygemm GPU probe: what a demanding CuPy / PyTorch user tries with device arrays (one GPU, cuda:0).

    python3 tools/gpu_user_probe.py       # PROBE_ONLY=substr runs the probes whose name contains it

One line per probe:
    ok <name>[: detail]          the behaviour is right (detail: what ran, timings)
    FAIL <name>: <reason>        a wrong value / kind / dtype / device / shape, a hang, or an unexpected error
    info <name>: <Type>: <msg>   a call whose expected behaviour is a clear refusal (a human judges the message)
    skip <name>: <why>
and a summary. Every result is checked against polygemm.testing.check_result (the float64 NumPy reference).
New probes start only while less than PROBE_BUDGET_S (140 s) has passed; a watchdog prints the summary and
exits after PROBE_HARD_S (172 s), so the run ends inside 3 minutes even if a call hangs.
"""

from __future__ import annotations

import gc
import os
import re
import threading
import time

T0 = time.time()
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "140"))
HARD_S = float(os.environ.get("PROBE_HARD_S", "172"))
ONLY = os.environ.get("PROBE_ONLY", "")

import numpy as np  # noqa: E402

import polygemm  # noqa: E402
from polygemm.testing import check_result  # noqa: E402

try:
    import torch

    HAVE_T = bool(torch.cuda.is_available())
except Exception:  # noqa: BLE001
    torch = None
    HAVE_T = False
try:
    import cupy as cp

    HAVE_CP = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001
    cp = None
    HAVE_CP = False
try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except Exception:  # noqa: BLE001
    BF16 = None

F32, F16, F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)
NAN = float("nan")
SENT = 7.0  # exact in every dtype used
SPIN_CYCLES = 100_000_000  # ~50 ms on an H100: long beside one call's host path
BLOCKED_S = 0.02  # a cached call that takes longer than this while its stream spins waited for the stream
RNG = np.random.default_rng(20240611)
if HAVE_T:
    torch.manual_seed(20240611)

# -- output -------------------------------------------------------------------------------------------------------------
COUNTS = {"ok": 0, "FAIL": 0, "info": 0, "skip": 0}
FAILED: list[str] = []
CURRENT = ["<setup>"]
_PRINT = threading.Lock()


def emit(kind: str, name: str, text: str = "") -> None:
    line = f"{kind} {name}" + (f": {text}" if text else "")
    line = " ".join(line.split())
    if len(line) > 300:
        line = line[:297] + "..."
    with _PRINT:
        COUNTS[kind] += 1
        if kind == "FAIL":
            FAILED.append(name)
        print(line, flush=True)


def summary() -> None:
    with _PRINT:
        print(f"SUMMARY: {COUNTS['ok']} ok, {COUNTS['FAIL']} FAIL, {COUNTS['info']} info, {COUNTS['skip']} skip "
              f"in {time.time() - T0:.0f} s", flush=True)
        if FAILED:
            text = "FAILED: " + ", ".join(FAILED)
            print(text if len(text) <= 300 else text[:297] + "...", flush=True)


def _watchdog() -> None:
    emit("FAIL", CURRENT[0], f"watchdog: still running {time.time() - T0:.0f} s after start (hang or too slow); exiting")
    summary()
    os._exit(3)


_WD = threading.Timer(max(HARD_S - (time.time() - T0), 1.0), _watchdog)
_WD.daemon = True
_WD.start()


class Fail(Exception):
    pass


class Skip(Exception):
    pass


class Info(str):
    """A probe's return value printed as an info line."""


def need(cond: object, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def one_line(s: object, n: int = 200) -> str:
    return " ".join(str(s).split())[:n]


# -- arrays -------------------------------------------------------------------------------------------------------------
def rnd(shape, dt=F32, scale: float = 1.0, rng=None) -> np.ndarray:
    g = RNG if rng is None else rng
    x = g.standard_normal(shape).astype(np.float32)
    if scale != 1.0:
        x *= np.float32(scale)
    return x.astype(dt)


def H(x) -> np.ndarray:
    """Host NumPy copy of a torch tensor / CuPy array (read on the current stream), or x itself."""
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach()
        if getattr(t, "is_neg", None) is not None and t.is_neg():
            t = t.resolve_neg()
        t = t.cpu()
        if t.dtype == torch.bfloat16:
            return t.contiguous().view(torch.int16).numpy().view(BF16)
        return t.numpy()
    if cp is not None and isinstance(x, cp.ndarray):
        return cp.asnumpy(x)
    return np.asarray(x)


def npdt(x) -> np.dtype:
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            return BF16
        return np.dtype(str(x.dtype).split(".")[-1])
    return np.dtype(x.dtype)


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.view(np.uint8).tobytes() == y.view(np.uint8).tobytes()


def chk(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None, what: str = "") -> None:
    h = got if isinstance(got, np.ndarray) else H(got)
    r = check_result(h, a, b, c, alpha, beta, out_dtype=out_dtype)
    if not r.ok:
        raise Fail(f"{what}: {r.message}")


def G(*args, **kw):
    kw.setdefault("device", "cuda")
    return polygemm.gemm(*args, **kw)


class Lib:
    """torch or CuPy behind one small interface."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.torch = name == "torch"
        self.tag = "t" if self.torch else "cp"

    def dtypes(self, half_too: bool = True):
        d = [F32, F16] if half_too else [F32]
        if self.torch and BF16 is not None and half_too:
            d.append(BF16)
        return d

    def tdt(self, dt):
        dt = np.dtype(dt)
        if not self.torch:
            return dt
        return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float64": torch.float64, "int32": torch.int32}[dt.name]

    def to(self, x):
        x = np.ascontiguousarray(x)
        if self.torch:
            if BF16 is not None and x.dtype == BF16:
                return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
            return torch.from_numpy(x).cuda()
        return cp.asarray(x)

    def full(self, shape, val, dt):
        if self.torch:
            return torch.full(tuple(shape), val, dtype=self.tdt(dt), device="cuda")
        return cp.full(tuple(shape), val, dtype=np.dtype(dt))

    def mT(self, x):
        return x.transpose(-1, -2) if self.torch else cp.swapaxes(x, -1, -2)

    def swap(self, x, i, j):
        return x.transpose(i, j) if self.torch else cp.swapaxes(x, i, j)

    def expand(self, x, shape):
        return x.expand(*shape) if self.torch else cp.broadcast_to(x, tuple(shape))

    def as_strided(self, base, shape, strides_el):
        if self.torch:
            return torch.as_strided(base, tuple(shape), tuple(strides_el))
        return cp.lib.stride_tricks.as_strided(base, shape=tuple(shape), strides=tuple(s * base.itemsize for s in strides_el))

    def matmul(self, a, b):
        return torch.matmul(a, b) if self.torch else cp.matmul(a, b)

    def sync(self) -> None:
        if self.torch:
            torch.cuda.synchronize()
        else:
            cp.cuda.runtime.deviceSynchronize()

    def mine(self, x) -> bool:
        return type(x) is torch.Tensor if self.torch else type(x) is cp.ndarray

    def contiguous(self, x) -> bool:
        return bool(x.is_contiguous()) if self.torch else bool(x.flags.c_contiguous)

    def on_dev0(self, x) -> bool:
        return bool(x.is_cuda and x.device.index == 0) if self.torch else int(x.device.id) == 0

    def new_stream(self):
        return torch.cuda.Stream() if self.torch else cp.cuda.Stream(non_blocking=True)

    def default_stream(self):
        return torch.cuda.default_stream() if self.torch else cp.cuda.Stream.null

    def ctx(self, s):
        return torch.cuda.stream(s) if self.torch else s

    def read_on(self, x, s) -> np.ndarray:
        """Host copy of x read on stream s (call inside L.ctx(s) for torch: .cpu() copies on the current stream)."""
        if self.torch:
            return H(x)
        h = cp.asnumpy(x, stream=s)
        s.synchronize()
        return h

    def copy_(self, dst, src) -> None:
        if self.torch:
            dst.copy_(src)
        else:
            cp.copyto(dst, src)

    def fill_nan(self, x) -> None:
        if self.torch:
            x.fill_(NAN)
        else:
            x.fill(np.nan)

    def mem_used(self) -> int:
        return int(torch.cuda.memory_allocated()) if self.torch else int(cp.get_default_memory_pool().used_bytes())

    def mem_free(self) -> int:
        return int(torch.cuda.mem_get_info()[0]) if self.torch else int(cp.cuda.runtime.memGetInfo()[0])


TL = Lib("torch") if HAVE_T else None
CPL = Lib("cupy") if HAVE_CP else None
LIBS = [x for x in (TL, CPL) if x is not None]


def meta(L: Lib, got, shape, dt, what: str = "") -> None:
    """Result kind, device, shape, dtype, C-contiguity (and no grad) as a new result must have them."""
    need(L.mine(got), f"{what}: result is {type(got).__module__}.{type(got).__name__}, expected {L.name}'s array")
    need(L.on_dev0(got), f"{what}: result on {getattr(got, 'device', '?')}, expected cuda:0")
    need(tuple(got.shape) == tuple(shape), f"{what}: result shape {tuple(got.shape)}, expected {tuple(shape)}")
    need(npdt(got) == np.dtype(dt), f"{what}: result dtype {got.dtype}, expected {np.dtype(dt).name}")
    need(L.contiguous(got), f"{what}: result not C-contiguous (strides {got.stride() if L.torch else got.strides})")
    if L.torch:
        need(not got.requires_grad, f"{what}: result requires grad")


def names_in(msg: str, names) -> bool:
    """Whether msg names one of ``names`` (identifiers as whole words: "c" is not any letter c)."""
    for n in names:
        if n.isidentifier():
            if re.search(rf"\b{re.escape(n)}\b", msg):
                return True
        elif n in msg:
            return True
    return False


def refusal(fn, names=None, kinds=(ValueError, TypeError)) -> str:
    """fn() must raise a clear ValueError/TypeError (naming one of ``names`` when given): 'Type: message'."""
    try:
        fn()
    except kinds as e:
        msg = one_line(e, 400)
        if names and not names_in(msg, names):
            raise Fail(f"{type(e).__name__} does not name {names}: {msg[:200]}") from None
        return f"{type(e).__name__}: {msg[:200]}"
    except Exception as e:  # noqa: BLE001
        raise Fail(f"raised {type(e).__name__} (not a ValueError/TypeError): {one_line(e)}") from None
    raise Fail("accepted (no error raised)")


def refused_untouched(L: Lib, fn, target, names=None) -> Info:
    before = H(target).copy()
    msg = refusal(fn, names)
    L.sync()
    need(same_bits(before, H(target)), f"refused ({msg[:80]}) but out/c was modified")
    return Info(msg)


_SPIN_SRC = r"""
extern "C" __global__ void probe_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""
_SPIN: dict = {}


def spin(L: Lib) -> None:
    """Hold the current stream busy (~50 ms) with one spinning thread."""
    if L.torch:
        torch.cuda._sleep(SPIN_CYCLES)
        return
    k = _SPIN.get("k")
    if k is None:
        try:
            k = cp.RawKernel(_SPIN_SRC, "probe_spin")
            if hasattr(k, "compile"):
                k.compile()
        except Exception:  # noqa: BLE001 - no NVRTC for CuPy: busy the stream with big GEMMs instead (~20 ms)
            k = False
        _SPIN["k"] = k
    if k is False:
        x = _SPIN.get("x")
        if x is None:
            x = _SPIN["x"] = cp.ones((4096, 4096), np.float32)
        for _ in range(8):
            cp.matmul(x, x)
        return
    k((1,), (1,), (np.int64(SPIN_CYCLES),))


# -- registry -----------------------------------------------------------------------------------------------------------
PROBES: list = []


def add(name: str, fn, *args) -> None:
    PROBES.append((name, (lambda: fn(*args)) if args else fn))


def per_lib(name: str, fn, libs=None) -> None:
    for L in (LIBS if libs is None else libs):
        add(f"{L.tag}_{name}", fn, L)


def run_all() -> None:
    for name, fn in PROBES:
        if ONLY and ONLY not in name and name != "setup":
            continue
        CURRENT[0] = name
        if time.time() - T0 > BUDGET_S:
            emit("skip", name, f"time budget ({BUDGET_S:.0f} s) spent")
            continue
        t = time.time()
        try:
            res = fn()
        except Skip as e:
            emit("skip", name, str(e))
            continue
        except Fail as e:
            emit("FAIL", name, str(e))
            continue
        except AssertionError as e:
            emit("FAIL", name, f"assertion: {e}")
            continue
        except Exception as e:  # noqa: BLE001
            emit("FAIL", name, f"unexpected {type(e).__name__}: {one_line(e, 250)}")
            try:
                for L in LIBS:
                    L.sync()
            except Exception as e2:  # noqa: BLE001
                emit("FAIL", name + "/sync", f"device sync after the error raised {type(e2).__name__}: {one_line(e2)}")
            continue
        dt = time.time() - t
        slow = f" [{dt:.1f} s]" if dt > 3 else ""
        if isinstance(res, Info):
            emit("info", name, str(res) + slow)
        else:
            emit("ok", name, (res or "") + slow)


# ======================================================================================================================
# probes
# ======================================================================================================================


def p_setup():
    need(HAVE_T or HAVE_CP, "neither torch with CUDA nor CuPy is usable here")
    plan = polygemm.explain(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32), device="cuda")
    need(plan.backend == "cuda", f"explain(device='cuda') gave backend {plan.backend}")
    if HAVE_T:
        name = torch.cuda.get_device_name(0)
    else:
        name = cp.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    return (f"{name}; polygemm {polygemm.__version__}, numpy {np.__version__}, torch {torch.__version__ if torch else '-'}"
            f" (cuda {HAVE_T}), cupy {cp.__version__ if cp else '-'}, ml_dtypes {BF16 is not None}; "
            f"POLYGEMM_KERNEL_DIR={os.environ.get('POLYGEMM_KERNEL_DIR', '-')}")


# -- kinds, empty dims ---------------------------------------------------------------------------------------------------


def p_kinds(L: Lib):
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
    return f"{len(cases) + 2} dtype cases"


def p_empty(L: Lib):
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
    return ""


# -- awkward shapes -------------------------------------------------------------------------------------------------------
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


def p_shape(L: Lib, m, n, k):
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
    return ("b = W.T view; " if trans else "") + "variants " + ", ".join(used)


# -- views --------------------------------------------------------------------------------------------------------------


def p_views_transposed(L: Lib):
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
    return ""


def p_views_sliced(L: Lib):
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
    return ""


def p_views_stride0(L: Lib):
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
    return ""


def p_views_permuted_batch(L: Lib):
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
    return ""


def p_views_overlapping_input(L: Lib):
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
    return ""


def p_views_batch_strides(L: Lib):
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
    return ""


def p_t_channels_last():
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
    return f"copies: {len(copies)} ({one_line(copies[0], 60) if copies else 'none'}); {o_note}; {t_note}"


def p_cp_views_negative():
    m, k, n = 40, 36, 44
    for dt in (F32, F16):
        ab, bb, cb = rnd((m, k), dt), rnd((k, n), dt), rnd((m, n), dt)
        A, B, Cc = cp.asarray(ab)[::-1], cp.asarray(bb)[:, ::-1], cp.asarray(cb)[::-1, ::-1]
        got = G(A, B, Cc, alpha=1.5, beta=-0.5)
        meta(CPL, got, (m, n), dt, f"{dt.name} negative strides")
        chk(got, ab[::-1], bb[:, ::-1], cb[::-1, ::-1], 1.5, -0.5, what=f"{dt.name} a[::-1], b[:, ::-1], c[::-1, ::-1]")
        chk(G(cp.asarray(ab)[::-1, ::-1], cp.asarray(bb)), ab[::-1, ::-1], bb, what=f"{dt.name} a[::-1, ::-1]")
        chk(G(cp.asarray(ab.T.copy()).T[::-1], cp.asarray(bb)), ab.T.copy().T[::-1], bb, what=f"{dt.name} column-major a reversed rows")
    return ""


def p_cp_batch_negative():
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
    return "; ".join(notes)


def p_cp_out_negative_stride():
    m, k, n = 20, 12, 16
    A, B = cp.asarray(rnd((m, k))), cp.asarray(rnd((k, n)))
    big = cp.full((m, n), SENT, np.float32)
    return refused_untouched(CPL, lambda: G(A, B, out=big[::-1]), big, names=["out"])


# -- out= ---------------------------------------------------------------------------------------------------------------


def p_out_col_slice(L: Lib):
    m, k, n = 50, 40, 60
    for dt in (F32, F16):
        a, b, c = rnd((m, k), dt), rnd((k, n), dt), rnd((m, n), dt)
        big = L.full((m, n + 5), SENT, dt)
        out = big[:, 3:3 + n]
        need(G(L.to(a), L.to(b), L.to(c), alpha=0.5, beta=2.0, out=out) is out, "out not returned")
        h = H(big)
        chk(h[:, 3:3 + n], a, b, c, 0.5, 2.0, what=f"{dt.name} out = big[:, 3:3+N]")
        need((h[:, :3] == SENT).all() and (h[:, 3 + n:] == SENT).all(), f"{dt.name}: out's buffer written outside the view")
    return ""


def p_out_transposed_batched(L: Lib):
    m, k, n, bt = 36, 28, 44, 3
    for dt, od in ((F32, F32), (F16, F16), (F16, F32)):
        a, b = rnd((bt, m, k), dt), rnd((bt, k, n), dt)
        out = L.mT(L.full((bt, n, m), NAN, od))
        need(G(L.to(a), L.to(b), out=out) is out, "out not returned")
        chk(out, a, b, out_dtype=od, what=f"{dt.name}->{od.name} batched transposed out")
        out2 = L.mT(L.full((n, m), NAN, od))
        need(polygemm.matmul(L.to(a[0]), L.to(b[0]), out=out2) is out2, "matmul out not returned")
        chk(out2, a[0], b[0], out_dtype=od, what=f"{dt.name}->{od.name} matmul transposed out")
    return ""


def p_out_inplace_c(L: Lib):
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
    return ""


def p_out_wrong_dtype(L: Lib):
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    msgs = []
    for dt in (F16, F64, np.dtype(np.int32)):
        out = L.full((m, n), 7, dt)
        msgs.append(refused_untouched(L, lambda out=out: G(A, B, out=out), out, names=["out"]))
    A16, B16 = L.to(rnd((m, k), F16)), L.to(rnd((k, n), F16))
    o = L.full((m, n), 7, F32)
    msgs.append(refused_untouched(L, lambda: G(A16, B16, out=o, out_dtype=L.tdt(F16)), o))  # out and out_dtype disagree
    return Info(f"[f16 out for f32] {msgs[0][:150]} | f64, int32, out/out_dtype clash: "
                + ", ".join(m_.split(":")[0] for m_ in msgs[1:]) + "; out untouched")


def p_out_wrong_shape(L: Lib):
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    o1 = L.full((m, n + 1), 7, F32)
    msg = refused_untouched(L, lambda: G(A, B, out=o1), o1, names=["out"])
    o2 = L.full((n, m), 7, F32)
    refused_untouched(L, lambda: G(A, B, out=o2), o2, names=["out"])
    o3 = L.full((1, m, n), 7, F32)  # an extra batch axis numpy.matmul would refuse too
    refused_untouched(L, lambda: G(A, B, out=o3), o3)
    return Info(msg)


def p_out_on_host(L: Lib):
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    host = np.full((m, n), SENT, np.float32)
    msg = refusal(lambda: G(A, B, out=host), names=["out"])
    need((host == SENT).all(), "refused but the host out was written")
    if L.torch:
        cpu = torch.full((m, n), SENT)
        refusal(lambda: G(A, B, out=cpu), names=["out"])
        need(bool((cpu == SENT).all()), "refused but the torch CPU out was written")
    return Info(msg)


def p_out_other_library(L: Lib):
    m, k, n = 20, 12, 16
    other = CPL if L.torch else TL
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    o = other.full((m, n), SENT, F32)
    return refused_untouched(other, lambda: G(A, B, out=o), o)


def p_out_batch_stride0(L: Lib):
    m, k, n, bt = 20, 12, 16, 3
    A, B = L.to(rnd((bt, m, k))), L.to(rnd((bt, k, n)))
    base = L.full((1, m, n), SENT, F32)
    o = L.expand(base, (bt, m, n))
    return refused_untouched(L, lambda: G(A, B, out=o), base, names=["out"])


def p_out_overlapping_batches(L: Lib):
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
        return Info(f"{type(e).__name__}: {one_line(e)}")
    res = check_result(H(o), a, b)
    raise Fail("accepted an out whose matrices overlap each other (silently inconsistent): "
               + ("check " + ("passes?!" if res.ok else f"fails: {res.message[:150]}")))


def vendor_note(L: "Lib", A, B, make_out) -> str:
    """Whether the library's own matmul writes the out ``make_out()`` builds (said beside polygemm's refusal)."""
    try:
        o2 = make_out()
        (torch.matmul if L.torch else cp.matmul)(A, B, out=o2)
        return f"{L.name}.matmul writes it"
    except Exception as e:  # noqa: BLE001
        return f"{L.name}.matmul refuses it ({type(e).__name__})"


def p_out_permuted_batch(L: Lib):
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((2, 3, m, k))), L.to(rnd((2, 3, k, n)))
    base = L.full((3, 2, m, n), SENT, F32)
    o = L.swap(base, 0, 1)
    msg = refused_untouched(L, lambda: G(A, B, out=o), base, names=["out"])
    lib_note = vendor_note(L, A, B, lambda: L.swap(L.full((3, 2, m, n), 0.0, F32), 0, 1))
    return Info(f"{lib_note}; polygemm {msg}")


def p_out_inner_stride2(L: Lib):
    m, k, n = 20, 12, 16
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    big = L.full((m, 2 * n), SENT, F32)
    o = big[:, ::2]
    msg = refused_untouched(L, lambda: G(A, B, out=o), big, names=["out"])
    lib_note = vendor_note(L, A, B, lambda: L.full((m, 2 * n), 0.0, F32)[:, ::2])
    return Info(f"{lib_note}; polygemm {msg}")


def p_t_out_requires_grad():
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
    return Info(f"{tnote}; polygemm {msg}")


# -- c, beta, scalars ---------------------------------------------------------------------------------------------------


def p_c_beta_forms(L: Lib):
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
    return ""


def p_c_2d_for_batch(L: Lib):
    m, k, n, bt = 20, 12, 16, 3
    A, B, Cc = L.to(rnd((bt, m, k))), L.to(rnd((k, n))), L.to(rnd((m, n)))
    return Info(refusal(lambda: G(A, B, Cc, beta=1.0), names=["c"]))


def p_c_dtype_mismatch(L: Lib):
    m, k, n = 20, 12, 16
    A, B, Cc = L.to(rnd((m, k), F16)), L.to(rnd((k, n), F16)), L.to(rnd((m, n)))
    return Info(refusal(lambda: G(A, B, Cc, beta=1.0), names=["c"]))


def _dev_scalar(L: Lib, v: float, shape=()):
    if L.torch:
        return torch.full(shape, v, device="cuda")
    return cp.full(shape, v, dtype=np.float32)


def p_alpha_device_0d(L: Lib):
    m, k, n = 24, 16, 20
    a, b = rnd((m, k)), rnd((k, n))
    al = _dev_scalar(L, 0.5)
    try:
        got = G(L.to(a), L.to(b), alpha=al)
    except (ValueError, TypeError) as e:
        msg = one_line(e, 400)
        need("float(alpha)" in msg, f"{type(e).__name__} does not name float(alpha): {msg[:200]}")
        return Info(f"{type(e).__name__}: {msg[:200]}")
    ok = check_result(H(got), a, b, None, 0.5).ok
    raise Fail(f"accepted a 0-D device alpha (README: refused naming float(alpha)); result {'right' if ok else 'WRONG'}")


def p_beta_device_0d(L: Lib):
    m, k, n = 24, 16, 20
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    be = _dev_scalar(L, 2.0)
    try:
        got = G(L.to(a), L.to(b), L.to(c), beta=be)
    except (ValueError, TypeError) as e:
        msg = one_line(e, 400)
        need("float(beta)" in msg, f"{type(e).__name__} does not name float(beta): {msg[:200]}")
        return Info(f"{type(e).__name__}: {msg[:200]}")
    ok = check_result(H(got), a, b, c, 1.0, 2.0).ok
    raise Fail(f"accepted a 0-D device beta (README: refused naming float(beta)); result {'right' if ok else 'WRONG'}")


def p_alpha_device_1elem(L: Lib):
    m, k, n = 24, 16, 20
    A, B = L.to(rnd((m, k))), L.to(rnd((k, n)))
    al = _dev_scalar(L, 0.5, (1,))
    return Info(refusal(lambda: G(A, B, alpha=al), names=["alpha"]))


def p_t_alpha_cpu_tensors():
    m, k, n = 24, 16, 20
    a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
    got = G(TL.to(a), TL.to(b), TL.to(c), alpha=torch.tensor(0.5), beta=torch.tensor(-2.0, requires_grad=True))
    chk(got, a, b, c, 0.5, -2.0, what="CPU 0-D tensors as alpha, beta (beta requires grad)")
    got = G(TL.to(a), TL.to(b), alpha=torch.tensor(3, dtype=torch.int64))
    chk(got, a, b, None, 3.0, what="CPU int64 0-D tensor alpha")
    got = G(TL.to(a), TL.to(b), alpha=torch.tensor(0.25, dtype=torch.float16))
    chk(got, a, b, None, 0.25, what="CPU float16 0-D tensor alpha")
    return ""


# -- batches, matmul ----------------------------------------------------------------------------------------------------


def p_batch_broadcast(L: Lib):
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
    return ""


def p_batch_f16_4d(L: Lib):
    m, k, n = 40, 72, 48
    for dt in ([F16, BF16] if (L.torch and BF16 is not None) else [F16]):
        a, b, c = rnd((2, 3, m, k), dt), rnd((3, k, n), dt), rnd((2, 3, m, n), F32)
        out = L.full((2, 3, m, n), NAN, F32)
        need(G(L.to(a), L.to(b), L.to(c), alpha=0.5, beta=1.0, out=out) is out, "out not returned")
        chk(out, a, b, c, 0.5, 1.0, out_dtype=F32, what=f"{dt.name} 4-D into f32 c/out")
        got = polygemm.matmul(L.to(a), L.to(b), out_dtype=L.tdt(F32))
        meta(L, got, (2, 3, m, n), F32, f"{dt.name} matmul 4-D out_dtype f32")
        chk(got, a, b, out_dtype=F32, what=f"{dt.name} matmul 4-D out_dtype f32")
    return ""


def vcheck(got, x, y, what):
    x2 = x[None, :] if x.ndim == 1 else x
    y2 = y[:, None] if y.ndim == 1 else y
    full = tuple(np.broadcast_shapes(x2.shape[:-2], y2.shape[:-2])) + (x2.shape[-2], y2.shape[-1])
    chk(np.asarray(H(got)).reshape(full), x2, y2, what=what)


def p_matmul_vectors(L: Lib):
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
    return ""


# -- explain, last_plan, plan cache ---------------------------------------------------------------------------------------


def p_explain(L: Lib):
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
    return f"variant {plan.variant}; strided a: {one_line(copies[0], 70)}"


def p_last_plan_after_refusal():
    L = LIBS[0]
    A, B = L.to(rnd((40, 24))), L.to(rnd((24, 36)))
    G(A, B)
    refusal(lambda: G(A, L.to(rnd((25, 36)))))
    lp = polygemm.last_plan()
    need(lp is not None and (lp.problem.m, lp.problem.n, lp.problem.k) == (40, 36, 24),
         f"after a refused call last_plan() describes {None if lp is None else (lp.problem.m, lp.problem.n, lp.problem.k)}")
    return ""


def p_last_plan_threads():
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
    return ""


def p_cache_pointers(L: Lib):
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
    return "variants " + ", ".join(notes)


def p_cache_alignment(L: Lib):
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
    return ""


def p_cache_inplace_toggle(L: Lib):
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
    return ""


def p_splitk_bits(L: Lib):
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
    return "variants " + ", ".join(notes)


def p_device_forms(L: Lib):
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
    return ""


def p_recover(L: Lib):
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
        ("float64", lambda: G(L.to(a.astype(F64)), L.to(b.astype(F64))), (ValueError, TypeError)),
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
    return f"{len(bad)} refusals, then good calls right"


# -- numerics -----------------------------------------------------------------------------------------------------------


def p_fp16_overflow(L: Lib):
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
    return ""


def p_nan_inf(L: Lib):
    m, k, n = 40, 32, 36
    for dt in (F32, F16):
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        a[3, 5] = np.nan
        b[7, 9] = np.inf
        a[:, 7] = np.where(a[:, 7] == 0, dt.type(1), a[:, 7])
        got = H(G(L.to(a), L.to(b)))
        need(np.isnan(got[3]).all(), f"{dt.name}: row with a NaN not all NaN")
        chk(got, a, b, what=f"{dt.name} NaN/inf propagation")
    return ""


# -- host (NumPy) path --------------------------------------------------------------------------------------------------


def p_np_fortran_views():
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
    return ""


def p_np_pinned_cupyx():
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
    return ""


def p_np_torch_cpu_pinned():
    m, k, n = 64, 48, 56
    a, b = rnd((m, k)), rnd((k, n))
    ta, tb = torch.from_numpy(a).pin_memory(), torch.from_numpy(b).pin_memory()
    got = G(ta, tb)
    need(isinstance(got, torch.Tensor) and got.device.type == "cpu", f"torch CPU pinned inputs gave {type(got)} on {getattr(got, 'device', '?')}")
    chk(got, a, b, what="torch CPU pinned")
    got = polygemm.gemm(ta, tb)  # device auto
    need(isinstance(got, torch.Tensor) and got.device.type == "cpu", "device=auto: not a CPU tensor")
    chk(got, a, b, what="torch CPU pinned, device auto")
    return f"auto ran on {polygemm.last_plan().backend}"


def p_np_half_types():
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
    return ""


# -- CuPy memory pools, torch specials -----------------------------------------------------------------------------------


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


def p_cp_other_pool():
    return _pool_probe(lambda: cp.cuda.MemoryPool(), "a second MemoryPool")


def p_cp_managed_pool():
    return _pool_probe(lambda: cp.cuda.MemoryPool(cp.cuda.malloc_managed), "managed MemoryPool")


def p_cp_async_pool():
    return _pool_probe(lambda: cp.cuda.MemoryAsyncPool(), "MemoryAsyncPool")


def p_t_requires_grad():
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
    return Info("; ".join(parts))


def p_t_parameter_nograd():
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
    return ""


# -- streams ------------------------------------------------------------------------------------------------------------


def _stream_cases(L: Lib, which: str):
    """(name, host arrays, call(d) on device arrays d, reference (a, b, c, alpha, beta, out_dtype))."""
    m, k, n = 192, 128, 160
    out = []

    def case(name, arrays, call, ref):
        out.append((name, arrays, call, ref))

    if which == "basic":
        a, b, c = rnd((m, k)), rnd((k, n)), rnd((m, n))
        o = np.full((m, n), np.nan, np.float32)
        case("new", {"a": a, "b": b}, lambda d: G(d["a"], d["b"]), (a, b, None, 1.0, 0.0, None))
        case("out", {"a": a, "b": b, "o": o}, lambda d: G(d["a"], d["b"], out=d["o"]), (a, b, None, 1.0, 0.0, None))
        case("c_beta", {"a": a, "b": b, "c": c}, lambda d: G(d["a"], d["b"], d["c"], alpha=0.5, beta=-1.0), (a, b, c, 0.5, -1.0, None))
        case("in_place", {"a": a, "b": b, "c": c}, lambda d: G(d["a"], d["b"], d["c"], alpha=0.5, beta=-1.0, out=d["c"]),
             (a, b, c, 0.5, -1.0, None))
        a16, b16 = rnd((m, k), F16), rnd((k, n), F16)
        case("f16_out_f32", {"a": a16, "b": b16, "c": c},
             lambda d: G(d["a"], d["b"], d["c"], beta=1.0, out_dtype=L.tdt(F32)), (a16, b16, c, 1.0, 1.0, F32))
        a0, b0 = np.zeros((m, 0), np.float32), np.zeros((0, n), np.float32)
        case("k0_beta", {"a": a0, "b": b0, "c": c}, lambda d: G(d["a"], d["b"], d["c"], beta=2.0), (a0, b0, c, 1.0, 2.0, None))
        if L.torch and BF16 is not None:
            ab, bb = rnd((m, k), BF16), rnd((k, n), BF16)
            case("bf16_out_f32", {"a": ab, "b": bb, "o": o}, lambda d: G(d["a"], d["b"], out=d["o"]), (ab, bb, None, 1.0, 0.0, F32))
        return out
    # "paths": batches, copies made by the library, skinny, split-K, stream-K, padded TMA, TMA store
    a3, b2, c3 = rnd((4, 64, 48)), rnd((48, 80)), rnd((4, 64, 80))
    case("batched_bcast", {"a": a3, "b": b2, "c": c3}, lambda d: G(d["a"], d["b"], d["c"], alpha=2.0, beta=0.5), (a3, b2, c3, 2.0, 0.5, None))
    aw, b = rnd((m, 2 * k)), rnd((k, n))
    case("strided_copy", {"a": aw, "b": b}, lambda d: G(d["a"][:, ::2], d["b"]), (aw[:, ::2], b, None, 1.0, 0.0, None))
    at, bt = rnd((k, m)), rnd((n, k))
    case("transposed", {"a": at, "b": bt}, lambda d: G(L.mT(d["a"]), L.mT(d["b"])), (at.T, bt.T, None, 1.0, 0.0, None))
    a, bias = rnd((m, k)), rnd((1, n))
    case("bias_expand", {"a": a, "b": b, "c": bias}, lambda d: G(d["a"], d["b"], L.expand(d["c"], (m, n)), beta=1.0),
         (a, b, np.broadcast_to(bias, (m, n)), 1.0, 1.0, None))
    for dt in (F32, F16):
        x, y = rnd((1, 4096), dt), rnd((4096, 512), dt)
        case(f"skinny_m1_{dt.name}", {"a": x, "b": y}, lambda d: G(d["a"], d["b"]), (x, y, None, 1.0, 0.0, None))
    x, y = rnd((64, 16384)), rnd((16384, 64))
    case("splitk_auto_f32", {"a": x, "b": y}, lambda d: G(d["a"], d["b"]), (x, y, None, 1.0, 0.0, None))
    for name, dt, (mm, nn, kk), variant in (
            ("splitk4_cm_v12_f32", F32, (128, 128, 8192), "cm_v12_cp_async:split_k=4"),
            ("splitk8_pingpong_f16", F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8"),
            ("streamk_f16", F16, (512, 512, 2048), "hgemm_v2_wgmma_tma_streamk"),
            ("tma_padded_f16", F16, (256, 264, 1004), "hgemm_v3_wgmma_pingpong")):
        x, y = rnd((mm, kk), dt), rnd((kk, nn), dt)
        case(name, {"a": x, "b": y}, lambda d, v=variant: G(d["a"], d["b"], variant=v), (x, y, None, 1.0, 0.0, None))
    x, y, z = rnd((256, 512), F16), rnd((512, 256), F16), rnd((256, 256), F16)
    case("tma_store_inplace_f16", {"a": x, "b": y, "c": z},
         lambda d: G(d["a"], d["b"], d["c"], beta=0.5, out=d["c"], variant="hgemm_v3_wgmma_pingpong_persistent_tma_store"),
         (x, y, z, 1.0, 0.5, None))
    return out


def stream_run(L: Lib, which: str, s=None, label: str = ""):
    s = L.new_stream() if s is None else s
    bad, blocked, na, done = [], [], [], 0
    for name, arrays, call, ref in _stream_cases(L, which):
        try:
            src = {key: L.to(v) for key, v in arrays.items()}
            dst = {key: L.full(v.shape, NAN, v.dtype) for key, v in arrays.items()}
            try:
                call(dst)  # warm-up on the default stream: kernels built and loaded
            except polygemm.UnsupportedProblemError as e:
                na.append(f"{name} ({one_line(e, 40)})")
                continue
            L.sync()
            for rnd_i in (0, 1):  # planned on the stream, then cached
                for key in dst:
                    L.fill_nan(dst[key])
                L.sync()
                if rnd_i == 0:
                    polygemm.clear_plan_cache()
                with L.ctx(s):
                    spin(L)
                    for key in dst:
                        L.copy_(dst[key], src[key])
                    t = time.perf_counter()
                    got = call(dst)
                    dt = time.perf_counter() - t
                    host = L.read_on(got, s)
                r = check_result(host, ref[0], ref[1], ref[2], ref[3], ref[4], out_dtype=ref[5])
                if not r.ok:
                    bad.append(f"{name}[{'planned' if rnd_i == 0 else 'cached'}]: {r.message[:90]}")
                    break
                if rnd_i == 1 and dt > BLOCKED_S:
                    blocked.append(f"{name} {dt * 1e3:.0f} ms")
            done += 1
        except Exception as e:  # noqa: BLE001
            bad.append(f"{name}: {type(e).__name__}: {one_line(e, 90)}")
            try:
                L.sync()
            except Exception:  # noqa: BLE001
                pass
    L.sync()
    if bad:
        raise Fail(f"{len(bad)} case(s) wrong{label}: " + "; ".join(bad))
    if blocked:
        raise Fail(f"call blocked the host while its stream was busy{label}: " + ", ".join(blocked))
    return f"{done} cases right read on the stream{label}" + (f"; n/a: {', '.join(na)}" if na else "")


def p_stream_basic(L: Lib):
    return stream_run(L, "basic")


def p_stream_paths(L: Lib):
    return stream_run(L, "paths")


def p_cp_stream_ptds():
    s = getattr(cp.cuda.Stream, "ptds", None)
    if s is None:
        raise Skip("this CuPy has no Stream.ptds")
    r1 = stream_run(CPL, "basic", s, " (per-thread default stream)")
    return r1


# -- loops, memory --------------------------------------------------------------------------------------------------------


def p_loop_1000(L: Lib):
    a, b = rnd((64, 64)), rnd((64, 64))
    A, B = L.to(a), L.to(b)
    for _ in range(20):
        r = G(A, B)
    chk(r, a, b, what="warm-up")
    del r
    L.sync()
    gc.collect()
    m0, f0 = L.mem_used(), L.mem_free()
    t = time.perf_counter()
    for _ in range(1000):
        r = G(A, B)
    L.sync()
    t_pg = (time.perf_counter() - t) / 1000
    chk(r, a, b, what="after 1000 calls")
    del r
    gc.collect()
    L.sync()
    m1, f1 = L.mem_used(), L.mem_free()
    t = time.perf_counter()
    for _ in range(1000):
        r = L.matmul(A, B)
    L.sync()
    t_lib = (time.perf_counter() - t) / 1000
    del r
    O = L.full((64, 64), NAN, F32)
    t = time.perf_counter()
    for i in range(1000):
        G(A, B, out=O)
    L.sync()
    t_out = (time.perf_counter() - t) / 1000
    chk(O, a, b, what="out= loop")
    need(m1 - m0 <= 0, f"allocated memory grew by {m1 - m0} B over 1000 calls")
    need(f0 - f1 < 64 << 20, f"device free memory fell by {(f0 - f1) / 2**20:.1f} MiB over 1000 calls")
    return (f"{t_pg * 1e6:.1f} us/call new result, {t_out * 1e6:.1f} us/call out=, {L.name}.matmul {t_lib * 1e6:.1f} us; "
            f"allocated {m1 - m0:+d} B, free {(f1 - f0) / 2**20:+.1f} MiB")


def p_t_loop_splitk_side_stream():
    notes = []
    s = torch.cuda.Stream()
    for dt, (m, n, k), variant in ((F32, (64, 64, 16384), "auto"), (F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8")):
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        A, B = TL.to(a), TL.to(b)
        try:
            with torch.cuda.stream(s):
                for _ in range(5):
                    r = G(A, B, variant=variant)
        except polygemm.UnsupportedProblemError as e:
            notes.append(f"{variant} n/a ({one_line(e, 40)})")
            continue
        torch.cuda.synchronize()
        gc.collect()
        f0, m0 = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
        with torch.cuda.stream(s):
            for _ in range(200):
                r = G(A, B, variant=variant)
            h = H(r)
        v = polygemm.last_plan().variant
        del r
        torch.cuda.synchronize()
        gc.collect()
        f1, m1 = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
        chk(h, a, b, what=f"{dt.name} {v}")
        need(f0 - f1 < 64 << 20, f"{v}: device free memory fell by {(f0 - f1) / 2**20:.1f} MiB over 200 calls on a side stream")
        need(m1 - m0 <= 0, f"{v}: torch allocated grew {m1 - m0} B")
        notes.append(f"{v}: free {(f1 - f0) / 2**20:+.1f} MiB")
    return "; ".join(notes)


def p_t_cache_eviction():
    info0 = polygemm.plan_cache_info()
    maxsize = int(info0["maxsize"])
    if maxsize <= 0 or maxsize > 600:
        raise Skip(f"plan cache maxsize {maxsize}")
    polygemm.clear_plan_cache()
    gc.collect()
    torch.cuda.synchronize()
    f0 = torch.cuda.mem_get_info()[0]
    count = maxsize + 24
    kk = 2048
    a_all, b = rnd((count + 8, kk)), rnd((kk, 64))
    A_all, B = TL.to(a_all), TL.to(b)
    for i in range(count):
        mm = 8 + i
        r = G(A_all[:mm], B)
        if i % 60 == 0 or i == count - 1:
            chk(r, a_all[:mm], b, what=f"shape {mm}x64x{kk}")
    info1 = polygemm.plan_cache_info()
    need(info1["size"] <= maxsize, f"plan cache holds {info1['size']} > maxsize {maxsize}")
    del r
    polygemm.clear_plan_cache()
    gc.collect()
    torch.cuda.synchronize()
    f1 = torch.cuda.mem_get_info()[0]
    chk(G(A_all[:8], B), a_all[:8], b, what="after clear")
    need(f0 - f1 < 256 << 20, f"device free memory fell by {(f0 - f1) / 2**20:.0f} MiB after {count} plans and a clear")
    return f"{count} shapes: cache size {info1['size']}/{maxsize}, misses {info1['misses']}; free {(f1 - f0) / 2**20:+.1f} MiB"


# -- threads --------------------------------------------------------------------------------------------------------------


def _thread_jobs(L):
    jobs = [("small_f32", 64, 64, 64, F32, "auto"), ("splitk_f32", 48, 40, 8192, F32, "auto"),
            ("mid_f16", 256, 256, 256, F16, "auto"), ("skinny_f16", 1, 512, 1024, F16, "auto"),
            ("splitk8_f16", 128, 128, 4096, F16, "hgemm_v3_wgmma_pingpong:split_k=8"),
            ("streamk_f16", 256, 256, 1024, F16, "hgemm_v2_wgmma_tma_streamk")]
    if L is not None and L.torch and BF16 is not None:
        jobs.append(("bf16", 96, 112, 80, BF16, "auto"))
    return jobs


def _threads(L, n_threads=8, iters=3):
    host = L is None
    jobs, na = [], []
    for job in _thread_jobs(L):
        name, m, n, k, dt, variant = job
        a, b = rnd((m, k), dt), rnd((k, n), dt)
        try:
            r = G(a, b, variant=variant) if host else G(L.to(a), L.to(b), variant=variant)
            chk(r, a, b, what=f"warm-up {name}")
            jobs.append(job)
        except polygemm.UnsupportedProblemError:
            na.append(name)
    if not host:
        L.sync()
    errors: list[str] = []
    barrier = threading.Barrier(n_threads)

    def worker(i):
        try:
            rng = np.random.default_rng(1000 + i)
            s = None if host else (L.default_stream() if i < 2 else L.new_stream())
            barrier.wait(timeout=30)
            for it in range(iters):
                for name, m, n, k, dt, variant in jobs:
                    a, b = rnd((m, k), dt, rng=rng), rnd((k, n), dt, rng=rng)
                    if host:
                        h = G(a, b, variant=variant)
                    else:
                        with L.ctx(s):
                            r = G(L.to(a), L.to(b), variant=variant)
                            h = L.read_on(r, s)
                    res = check_result(h, a, b)
                    if not res.ok:
                        errors.append(f"thread {i} {name} iter {it}: {res.message[:100]}")
            if polygemm.last_plan() is None:
                errors.append(f"thread {i}: last_plan() None after its calls")
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {one_line(e, 120)}")

    ths = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
    for t in ths:
        t.start()
    deadline = time.time() + 60
    for t in ths:
        t.join(max(deadline - time.time(), 0.1))
    hung = sum(t.is_alive() for t in ths)
    need(not hung, f"{hung} of {n_threads} threads still running after 60 s (hang?)")
    need(not errors, f"{len(errors)} errors; first: {errors[0] if errors else ''}")
    calls = n_threads * iters * len(jobs)
    return f"{n_threads} threads x {iters} x {len(jobs)} jobs = {calls} calls right" + (f"; n/a: {', '.join(na)}" if na else "")


def p_threads(L: Lib):
    return _threads(L)


def p_np_threads():
    return _threads(None)


# -- CUDA graphs ------------------------------------------------------------------------------------------------------------


def p_t_cuda_graph():
    parts, wrong = [], []
    cases = [("f32", F32, (96, 112, 80), "auto"), ("splitk_f32", F32, (64, 64, 16384), "auto"),
             ("f16", F16, (256, 256, 256), "auto"), ("splitk8_f16", F16, (128, 128, 8192), "hgemm_v3_wgmma_pingpong:split_k=8")]
    if BF16 is not None:
        cases.append(("bf16", BF16, (96, 112, 80), "auto"))
    for name, dt, (m, n, k), variant in cases:
        a, b, a2, a3 = rnd((m, k), dt), rnd((k, n), dt), rnd((m, k), dt), rnd((m, k), dt)
        A, B = TL.to(a), TL.to(b)
        O = TL.full((m, n), NAN, dt)
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    G(A, B, out=O, variant=variant)
                    G(A, B, variant=variant)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                G(A, B, out=O, variant=variant)
                R = G(A, B, variant=variant)
        except Exception as e:  # noqa: BLE001
            parts.append(f"{name}: capture {type(e).__name__}: {one_line(e, 70)}")
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            continue
        ok = True
        for x in (a2, a3):
            A.copy_(TL.to(x))
            O.fill_(NAN)
            torch.cuda.synchronize()
            try:
                g.replay()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                wrong.append(f"{name}: replay raised {type(e).__name__}: {one_line(e, 80)}")
                ok = False
                break
            for which, res in (("out", O), ("new", R)):
                r = check_result(H(res), x, b)
                if not r.ok:
                    wrong.append(f"{name} {which}: {r.message[:80]}")
                    ok = False
        parts.append(f"{name}: ok" if ok else f"{name}: WRONG")
        del g
    if wrong:
        raise Fail("replayed graph gave wrong results: " + "; ".join(wrong))
    text = "; ".join(parts)
    return Info(text) if "capture" in text else text


def p_cp_stream_capture():
    m, k, n = 128, 96, 112
    parts = []
    for name, dt, variant in (("f32", F32, "auto"), ("f16", F16, "auto"), ("splitk8_f16", F16, "hgemm_v3_wgmma_pingpong:split_k=8")):
        kk = 8192 if "splitk" in name else k
        a, b, a2 = rnd((m, kk), dt), rnd((kk, n), dt), rnd((m, kk), dt)
        A, B, O = cp.asarray(a), cp.asarray(b), cp.full((m, n), np.nan, dt)
        s = cp.cuda.Stream(non_blocking=True)
        try:
            with s:
                G(A, B, out=O, variant=variant)
                s.synchronize()
                s.begin_capture()
                try:
                    G(A, B, out=O, variant=variant)
                finally:
                    graph = s.end_capture()
        except Exception as e:  # noqa: BLE001
            parts.append(f"{name}: capture {type(e).__name__}: {one_line(e, 70)}")
            try:
                cp.cuda.runtime.deviceSynchronize()
            except Exception:  # noqa: BLE001
                pass
            continue
        with s:
            cp.copyto(A, cp.asarray(a2))
            O.fill(np.nan)
            graph.launch(s)
            h = cp.asnumpy(O, stream=s)
            s.synchronize()
        r = check_result(h, a2, b)
        if not r.ok:
            raise Fail(f"{name}: replayed graph wrong: {r.message[:150]}")
        parts.append(f"{name}: ok")
    text = "; ".join(parts)
    return Info(text) if "capture" in text else text


def p_final_sanity():
    for L in LIBS:
        a, b = rnd((50, 40)), rnd((40, 30))
        chk(G(L.to(a), L.to(b)), a, b, what=f"{L.name} final call")
        L.sync()
    a, b = rnd((50, 40)), rnd((40, 30))
    chk(G(a, b), a, b, what="NumPy final call")
    return f"{time.time() - T0:.0f} s so far"


# ======================================================================================================================
# order: core first, risky (threads, graphs) last
# ======================================================================================================================
add("setup", p_setup)
per_lib("kinds", p_kinds)
per_lib("empty_dims", p_empty)
per_lib("stream_basic", p_stream_basic)
per_lib("stream_paths", p_stream_paths)
if HAVE_CP:
    add("cp_stream_ptds", p_cp_stream_ptds)
per_lib("views_transposed", p_views_transposed)
per_lib("views_sliced_offset", p_views_sliced)
per_lib("views_stride0", p_views_stride0)
per_lib("views_permuted_batch", p_views_permuted_batch)
per_lib("views_overlapping_input", p_views_overlapping_input)
per_lib("views_batch_strides", p_views_batch_strides)
if HAVE_T:
    add("t_views_channels_last", p_t_channels_last)
if HAVE_CP:
    add("cp_views_negative_stride", p_cp_views_negative)
    add("cp_batch_negative_stride", p_cp_batch_negative)
    add("cp_out_negative_stride", p_cp_out_negative_stride)
per_lib("out_col_slice", p_out_col_slice)
per_lib("out_transposed_batched", p_out_transposed_batched)
per_lib("out_inplace_c", p_out_inplace_c)
per_lib("out_wrong_dtype", p_out_wrong_dtype)
per_lib("out_wrong_shape", p_out_wrong_shape)
per_lib("out_on_host", p_out_on_host)
if HAVE_T and HAVE_CP:
    per_lib("out_other_library", p_out_other_library)
per_lib("out_batch_stride0", p_out_batch_stride0)
per_lib("out_overlapping_batches", p_out_overlapping_batches)
per_lib("out_permuted_batch", p_out_permuted_batch)
per_lib("out_inner_stride2", p_out_inner_stride2)
if HAVE_T:
    add("t_out_requires_grad", p_t_out_requires_grad)
per_lib("c_beta_forms", p_c_beta_forms)
per_lib("c_2d_for_batch", p_c_2d_for_batch)
per_lib("c_dtype_mismatch", p_c_dtype_mismatch)
per_lib("alpha_device_0d", p_alpha_device_0d)
per_lib("beta_device_0d", p_beta_device_0d)
per_lib("alpha_device_1elem", p_alpha_device_1elem)
if HAVE_T:
    add("t_alpha_cpu_tensors", p_t_alpha_cpu_tensors)
    add("t_requires_grad", p_t_requires_grad)
    add("t_parameter_nograd", p_t_parameter_nograd)
per_lib("batch_broadcast", p_batch_broadcast)
per_lib("batch_half_4d_f32", p_batch_f16_4d)
per_lib("matmul_vectors", p_matmul_vectors)
per_lib("explain", p_explain)
if LIBS:
    add("last_plan_after_refusal", p_last_plan_after_refusal)
    add("last_plan_thread_local", p_last_plan_threads)
per_lib("cache_new_pointers", p_cache_pointers)
per_lib("cache_alignment", p_cache_alignment)
per_lib("cache_inplace_toggle", p_cache_inplace_toggle)
per_lib("splitk_deterministic", p_splitk_bits)
per_lib("device_forms", p_device_forms)
per_lib("recover_after_errors", p_recover)
per_lib("fp16_overflow_inf", p_fp16_overflow)
per_lib("nan_inf_propagation", p_nan_inf)
for _m, _n, _k in SHAPES:
    per_lib(f"shape_{_m}x{_n}x{_k}", lambda L, m=_m, n=_n, k=_k: p_shape(L, m, n, k))
add("np_fortran_views", p_np_fortran_views)
if HAVE_CP:
    add("np_pinned_cupyx", p_np_pinned_cupyx)
if HAVE_T:
    add("np_torch_cpu_pinned", p_np_torch_cpu_pinned)
add("np_half_types", p_np_half_types)
if HAVE_CP:
    add("cp_other_pool", p_cp_other_pool)
    add("cp_managed_pool", p_cp_managed_pool)
    add("cp_async_pool", p_cp_async_pool)
per_lib("loop_1000_memory", p_loop_1000)
if HAVE_T:
    add("t_loop_splitk_side_stream", p_t_loop_splitk_side_stream)
    add("t_cache_eviction", p_t_cache_eviction)
per_lib("threads_8_streams", p_threads)
add("np_threads_8_host", p_np_threads)
if HAVE_T:
    add("t_cuda_graph", p_t_cuda_graph)
if HAVE_CP:
    add("cp_stream_capture", p_cp_stream_capture)
add("final_sanity", p_final_sanity)


def main() -> int:
    print(f"# polygemm GPU probe: {len(PROBES)} probes, torch={HAVE_T} cupy={HAVE_CP} bf16={BF16 is not None}", flush=True)
    name, fn = PROBES[0]
    CURRENT[0] = name
    try:
        res = fn()
    except Exception as e:  # noqa: BLE001
        emit("FAIL", name, f"{type(e).__name__}: {one_line(e, 250)} -- nothing else can run")
        summary()
        return 2
    emit("ok", name, res or "")
    PROBES.pop(0)
    run_all()
    summary()
    return 1 if COUNTS["FAIL"] else 0


if __name__ == "__main__":
    rc = main()
    _WD.cancel()
    os._exit(rc)  # daemon threads that hung in a driver call must not keep the process alive
