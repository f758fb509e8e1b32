"""Where a small cached call's host time goes: ``polygemm.gemm(a, b, out=o)`` on CuPy and torch device arrays, split
into its parts (the operands' views, the cache key, bind, the backend's execute, prepare, the launcher), and the same
call with ``verify="raise"`` (on the stand-ins: its host work alone).

On a machine with CuPy, torch and a GPU it times the real path beside ``torch.matmul(out=)``,
``cupy.matmul(out=)`` and an empty CuPy RawKernel launch. Elsewhere (``--fake``, or no GPU) it
installs stand-ins: a ``cupy`` and a ``torch`` module whose arrays carry the attributes polygemm
reads, and a CUDA runtime whose driver calls (``cuLaunchKernelEx``, ``cuCtxGetCurrent``) return at
once; everything between the public call and the driver call is polygemm's own code, so the
Python overhead is measured here as on the GPU's host.

    python tools/call_cost.py [--fake] [--json PATH] [--profile]

``--json`` writes every figure (µs per call) to PATH ($OUT/call_cost.json on the GPU machine).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import struct
import sys
import threading
import time
import types
from typing import Any, Callable

import numpy as np

SIZES = (128, 256)
DTYPES = ("float16", "float32")


def _us(f: Callable[[], Any], n: int, repeat: int = 5, sync: Callable[[], Any] | None = None) -> float:
    """Best of ``repeat`` runs of ``n`` calls, µs per call (``sync`` after each run: device work included)."""
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            f()
        if sync is not None:
            sync()
        best = min(best, (time.perf_counter() - t) / n)
    return round(best * 1e6, 3)


# -- stand-ins for a machine without a GPU ---------------------------------------------------------------------------

def _install_fakes() -> dict[str, Any]:
    """A fake ``cupy``, a fake ``torch`` and a cuda backend on a runtime whose driver calls return at once."""
    import cffi

    from polygemm.backends.cuda import driver as drv_mod
    from polygemm.backends.cuda import tma
    from polygemm.backends.cuda.device import CudaRuntime
    from polygemm.backends.cuda.backend import CudaBackend

    os.environ.setdefault("POLYGEMM_TUNE_CACHE", "0")
    next_ptr = [0x7F0000000000]

    cupy = types.ModuleType("cupy")

    class _Mem:
        __slots__ = ("ptr", "device_id")

        def __init__(self, ptr: int) -> None:
            self.ptr, self.device_id = ptr, 0

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
            self.dtype = np.dtype(dtype)
            self.shape = tuple(shape)
            self.strides = (shape[1] * self.dtype.itemsize, self.dtype.itemsize)
            self.size = shape[0] * shape[1]
            self.data = _Mem(next_ptr[0])
            next_ptr[0] += -(-self.size * self.dtype.itemsize // 4096) * 4096 + 4096
            self.device = types.SimpleNamespace(id=0)

    ndarray.__cuda_array_interface__ = property(lambda self: {"typestr": self.dtype.str, "shape": self.shape, "strides": None,
                                                                "data": (self.data.ptr, False), "version": 3})
    ndarray.flags = types.SimpleNamespace(c_contiguous=True, f_contiguous=False)
    stream = types.SimpleNamespace(ptr=0)
    cupy.ndarray = ndarray
    cupy.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)
    cupy.empty = lambda shape, dtype: ndarray(shape, dtype)
    sys.modules["cupy"] = cupy

    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
            self.shape, self.dtype = tuple(shape), dtype
            self._stride = (shape[1], 1)
            self.ptr = next_ptr[0]
            next_ptr[0] += shape[0] * shape[1] * 4 + 4096
            self.requires_grad, self.is_cuda = False, True
            self.device = types.SimpleNamespace(type="cuda", index=0)

        def get_device(self) -> int:
            return 0

        def data_ptr(self) -> int:
            return self.ptr

        def stride(self) -> tuple[int, ...]:
            return self._stride

        def is_neg(self) -> bool:
            return False

        def is_conj(self) -> bool:
            return False

        def is_inference(self) -> bool:
            return False

        @property
        def __cuda_array_interface__(self) -> dict[str, Any]:
            typestr = "<f2" if self.dtype == "float16" else "<f4"
            return {"typestr": typestr, "shape": self.shape, "strides": None, "data": (self.ptr, False), "version": 2}

    torch.Tensor = Tensor
    torch.bfloat16 = object()
    torch.float16, torch.float32 = "float16", "float32"
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0)
    torch.is_inference_mode_enabled = lambda: False
    torch.is_grad_enabled = lambda: True
    torch.autograd = types.SimpleNamespace(graph=types.SimpleNamespace(increment_version=lambda t: None))
    sys.modules["torch"] = torch

    drv = drv_mod.Driver.__new__(drv_mod.Driver)
    drv.ffi = cffi.FFI()
    drv.ffi.cdef(drv_mod._CDEF)
    drv._local = threading.local()
    drv._streams = {}
    ctx = drv.ffi.cast("CUcontext", 0xC0)

    def current(out: Any) -> int:
        out[0] = ctx
        return 0

    def ordinal(out: Any, attribute: int, ptr: int) -> int:
        out[0] = 0
        return 0

    def ordinal_one(out: Any, fn: Any, threads: int, shared: int = 0) -> int:
        out[0] = 1
        return 0

    recorded: list[bytes] = []  # each launch's parameter bytes while recording is on (off while timing)

    def launch(cfg: Any, fn: Any, params: Any, extra: Any) -> int:
        if recording:
            recorded.append(drv.ffi.buffer(drv.ffi.cast("char *", extra[1]), drv.ffi.cast("size_t *", extra[3])[0])[:])
        return 0

    recording: list[bool] = []  # non-empty: record
    drv.lib = types.SimpleNamespace(cuLaunchKernelEx=launch, cuCtxGetCurrent=current,
                                    cuPointerGetAttribute=ordinal, cuOccupancyMaxActiveBlocksPerMultiprocessor=ordinal_one,
                                    cuOccupancyMaxActiveClusters=lambda out, fn, cfg: ordinal_one(out, 0, 0),
                                    cuMemsetD32Async=lambda *args: 0,
                                    cuCtxPushCurrent_v2=lambda c: 0, cuCtxPopCurrent_v2=lambda c: 0, cuCtxSynchronize=lambda: 0)

    class BenchKernel(drv_mod.Kernel):
        """A loaded kernel whose parameters lie where the formats place them (naturally aligned; tensor maps at 64)."""

        def struct_for(self, codes: Any) -> struct.Struct:
            self.params, self.param_bytes = drv_mod.natural_params(codes)
            return super().struct_for(codes)

    rt = CudaRuntime.__new__(CudaRuntime)
    rt.ordinal, rt.name, rt.cc, rt.sm, rt.arch = 0, "fake H100 (no GPU)", (9, 0), 90, "sm_90"
    rt.max_smem_per_block, rt.sms, rt.several = 232448, 132, False
    rt.cu, rt.ctx_handle, rt._ctx_cdata = drv, 0xC0, ctx
    rt.scratch = lambda nbytes, stream: 0x7E0000000000
    rt.release = rt.give_back = lambda *args: None
    rt.function = lambda source, entry, macros=None: BenchKernel(drv, entry, None, drv.ffi.NULL, ())
    # a verified call's copies, waits and read-back (returning at once, as the launches do)
    rt.mapped_zeros = lambda shape, dtype: (np.zeros(shape, dtype), 0)
    drv.copy_to_host_async = lambda host, ptr, stream: None
    drv.copy_device_async = lambda dst, src, nbytes, stream: None
    drv.synchronize_stream = lambda stream: None

    def ab(a: int, b: int, *args: Any, **kw: Any) -> tuple[Any, Any]:
        return np.frombuffer(struct.pack("<QQ", a, b) * 8, "V128")[0], np.frombuffer(struct.pack("<QQ", b, a) * 8, "V128")[0]

    tma.hgemm_v2_tensor_maps = ab
    tma.hgemm_v2_c_map = lambda c, *args, **kw: np.frombuffer(struct.pack("<QQ", c, c) * 8, "V128")[0]

    be = CudaBackend()
    be._rt = rt
    import polygemm.registry as registry

    registry.select = lambda problem, device, variant="auto", refused=None: (be, [])  # type: ignore[assignment]
    registry.get_backend = lambda name: be  # type: ignore[assignment]  # (the verified call's retry and copy ask by name)
    return {"cupy": cupy, "torch": torch, "backend": be, "recorded": recorded, "recording": recording}


# -- the measurement ---------------------------------------------------------------------------------------------------

def _check_launches(fakes: dict[str, Any], gemm: Callable[[], Any], entry: Any, call: Any) -> None:
    """The stand-in driver's record of repeated calls: each launch's parameters are what the full prepare packs."""
    launch = entry.plan.private.launch
    fakes["recording"].append(True)
    for _ in range(3):
        gemm()
    fakes["recording"].clear()
    stream = 0 if call.stream is None else call.stream
    prepared = launch.prepare(call.a_ptr, call.b_ptr, call.out_ptr, 1.0, 0.0, stream)
    want = prepared if type(prepared) is bytes else prepared.main
    got = fakes["recorded"]
    if len(got) != 3 or any(g != want for g in got):
        raise SystemExit(f"launched parameters differ from the plan's packing: {got!r} vs {want!r}")
    got.clear()


def measure(fake: bool, profile: bool, calls: int = 0) -> dict[str, Any]:
    fakes = _install_fakes() if fake else {}
    import polygemm as pg
    from polygemm import plan_cache
    from polygemm.interop.cupy import cupy_views
    from polygemm.interop.torch import torch_views

    cp, torch = sys.modules["cupy"], sys.modules["torch"]
    results: dict[str, Any] = {"fake": fake, "cases": []}
    if fake:
        sync: Callable[[], Any] | None = None
        n = calls or 5000
    else:
        sync = torch.cuda.synchronize
        n = calls or 3000
        results["device"] = torch.cuda.get_device_name()
    for dt in DTYPES:
        for s in SIZES:
            if fake:
                a, b, o = cp.ndarray((s, s), dt), cp.ndarray((s, s), dt), cp.ndarray((s, s), dt)
                ta, tb, to = torch.Tensor((s, s), dt), torch.Tensor((s, s), dt), torch.Tensor((s, s), dt)
            else:
                a = cp.random.standard_normal((s, s)).astype(dt)
                b = cp.random.standard_normal((s, s)).astype(dt)
                o = cp.empty((s, s), dt)
                ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
                to = torch.empty((s, s), dtype=getattr(torch, dt), device="cuda")
            for _ in range(300):
                pg.gemm(a, b, out=o)
                pg.gemm(ta, tb, out=to)
            if sync is not None:
                sync()
            case: dict[str, Any] = {"size": s, "dtype": dt, "variant": pg.last_plan().variant}
            case["gemm_cupy_out"] = _us(lambda: pg.gemm(a, b, out=o), n, sync=sync)
            # verify="raise": one bind, the product into scratch, the check's launches, its wait, the copy into out
            case["gemm_cupy_out_verified"] = _us(lambda: pg.gemm(a, b, out=o, verify="raise"), max(1, n // 4), sync=sync)
            case["gemm_torch_out"] = _us(lambda: pg.gemm(ta, tb, out=to), n, sync=sync)
            if not fake:
                # each call waited for (the floor of a verified call, which waits for its check)
                stream = cp.cuda.get_current_stream()
                case["gemm_cupy_out_waited"] = _us(lambda: (pg.gemm(a, b, out=o), stream.synchronize()), max(1, n // 4))
                case["torch_matmul_out"] = _us(lambda: torch.matmul(ta, tb, out=to), n, sync=sync)
                case["cupy_matmul_out"] = _us(lambda: cp.matmul(a, b, out=o), n, sync=sync)
                case["ratio_cupy_call_to_torch"] = round(case["gemm_cupy_out"] / case["torch_matmul_out"], 3)  # target <= 1.0
                case["ratio_torch_call_to_torch"] = round(case["gemm_torch_out"] / case["torch_matmul_out"], 3)
            entry, call, _, _ = plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", o)
            if fake:  # the cached calls' launches, CuPy's and torch's, checked against the plan's own packing
                _check_launches(fakes, lambda: pg.gemm(a, b, out=o), entry, call)
                _check_launches(fakes, lambda: pg.gemm(ta, tb, out=to), *plan_cache.bind(ta, tb, None, 1.0, 0.0, None, "auto", to)[:2])
            case["bind_cupy"] = _us(lambda: plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", o), 4 * n)
            case["bind_torch"] = _us(lambda: plan_cache.bind(ta, tb, None, 1.0, 0.0, None, "auto", to), 4 * n)
            case["key_cupy"] = _us(lambda: plan_cache._key(a, b, None, o, 1.0, 0.0, None, "auto"), 4 * n)
            case["cupy_views"] = _us(lambda: cupy_views(a, b, None, o), 4 * n)
            case["torch_views"] = _us(lambda: torch_views(ta, tb, None, to), 4 * n)
            be, plan = entry.backend, entry.plan
            case["execute"] = _us(lambda: be.execute(plan, call), n, sync=sync)
            launch = plan.private.launch
            stream = 0 if call.stream is None else call.stream
            if hasattr(launch, "prepare"):
                case["prepare"] = _us(lambda: launch.prepare(call.a_ptr, call.b_ptr, call.out_ptr, 1.0, 0.0, stream), 4 * n)
                prepared = launch.prepare(call.a_ptr, call.b_ptr, call.out_ptr, 1.0, 0.0, stream)
                case["launch_prepared"] = _us(lambda: launch.launch(prepared, stream), n, sync=sync)
            if sync is not None:
                sync()
            results["cases"].append(case)
            print(f"== {s}^3 {dt} {case['variant']}", flush=True)
            for k, v in case.items():
                if isinstance(v, float):
                    print(f"  {k:18s} {v:8.3f} us")
    if not fake:
        k = cp.RawKernel(r'extern "C" __global__ void nop(float* x, int n) {}', "nop")
        x = cp.empty(4, cp.float32)
        results["cupy_rawkernel_nop"] = _us(lambda: k((1,), (32,), (x, np.int32(4))), 5000, sync=sync)
        stream = cp.cuda.get_current_stream()
        # five launches and a wait: what a verified call's product and check launches cost the host alone
        results["cupy_rawkernel_nop5_waited"] = _us(lambda: ([k((1,), (32,), (x, np.int32(4))) for _ in range(5)],
                                                            stream.synchronize()), 1000)
        print(f"cupy RawKernel nop launch {results['cupy_rawkernel_nop']:.3f} us; five and a wait "
              f"{results['cupy_rawkernel_nop5_waited']:.3f} us")
    if profile:
        a = cp.ndarray((128, 128), "float16") if fake else cp.random.standard_normal((128, 128)).astype(cp.float16)
        b, o = (cp.ndarray((128, 128), "float16"), cp.ndarray((128, 128), "float16")) if fake else (a.copy(), cp.empty_like(a))
        pg.gemm(a, b, out=o)
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(5000):
            pg.gemm(a, b, out=o)
        pr.disable()
        text = io.StringIO()
        pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue()[:6000])
    return results


def _gpu_here() -> bool:
    try:
        import cupy
        import torch

        return bool(torch.cuda.is_available()) and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no torch, no device: the stand-ins
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake", action="store_true", help="stand-ins for CuPy, torch and the driver even where a GPU exists")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of 5000 cached 128^3 fp16 calls")
    ap.add_argument("--calls", type=int, default=0, help="calls per timing (default 5000 on the stand-ins, 3000 on a GPU)")
    args = ap.parse_args(argv)
    fake = args.fake or not _gpu_here()
    results = measure(fake, args.profile, args.calls)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
