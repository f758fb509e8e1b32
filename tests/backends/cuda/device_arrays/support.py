"""What the device-array tests share: torch and CuPy behind one small interface (``Lib``), random operands,
host copies, the check of a result against the float64 reference (``chk``), the check of a new result's
kind, device, shape, dtype and layout (``meta``), the check of a refusal's type and the names it carries
(``refusal``), and a kernel that keeps a stream busy (``spin``)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import polygemm
from polygemm.testing import check_result

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



T0 = time.time()  # the session's start, for the final call's report


class Fail(AssertionError):
    """A wrong value, kind, dtype, device or shape, or a refusal that is not clear."""


Skip = pytest.skip.Exception


def report(detail: object) -> None:
    """A probe's detail (variants run, timings, the refusal's message): printed, shown with -s or -rP."""
    if detail:
        print(detail)


class Info(str):
    """A probe's return value printed as an info line."""


def need(cond: object, msg: str) -> None:
    if not cond:
        raise Fail(msg)


def one_line(s: object, n: int = 200) -> str:
    return " ".join(str(s).split())[:n]


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
