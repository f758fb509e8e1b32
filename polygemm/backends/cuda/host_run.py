"""The cuda backend's run of host (NumPy) operands: upload, the plan's launches, download."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend import store_result
from ...interop import raw_view
from ...problem import Call, GemmProblem
from .complex_plan import run_complex_host
from .decisions import CudaPlan
from .device import CudaRuntime

__all__ = ["run_host"]


def run_host(rt: CudaRuntime, p: GemmProblem, decided: CudaPlan, call: Call) -> Any:
    """A product of host (NumPy) operands: compact uploads in the plan's layouts, its launches on the null stream,
    the result copied back into ``out`` (or a new array); the device memory goes back on every path."""
    if p.dtype.kind == "c":
        return run_complex_host(rt, p, decided, call)
    layout = decided.result_layout
    shape = p.result_shape
    if p.empty:
        if p.k == 0 and call.c is not None and call.beta != 0.0:
            wide = np.float64 if p.out_dtype == np.float64 else np.float32  # the kernels' scalar type
            res = (wide(call.beta) * call.c.astype(wide)).astype(p.out_dtype)  # beta*c, rounded once
        else:
            res = np.zeros(shape, p.out_dtype)
        return store_result(res, call.out)
    drv = rt.drv
    launch = decided.launch
    assert launch is not None
    if launch.spec is not None:
        launch.kernel()  # built before any allocation
    sa, sb, sc, sd = decided.batch_bytes
    allocs: list[Any] = []
    try:
        def upload(host: np.ndarray, layout_: str, stride: int) -> int:
            if host.ndim > 2 and stride == 0:  # broadcast over the batch: one matrix
                host = host.reshape(host.shape[-2:])
            arr = np.ascontiguousarray(host if layout_ == "row" else np.swapaxes(host, -1, -2))
            buf = rt.allocate(arr.nbytes)
            allocs.append(buf)
            drv.memcpy_htod(buf, raw_view(arr))
            return int(buf)

        a = upload(call.a, p.a.layout, sa)
        b = upload(call.b, p.b.layout, sb)
        if call.c is not None and call.beta != 0.0:
            c = upload(call.c, layout, sc)
        else:
            buf = rt.allocate(p.count * p.m * p.n * p.out_dtype.itemsize)
            allocs.append(buf)
            c = int(buf)
        for i in range(1 if launch.lp.batch_count else p.count):  # a batched build takes all at once
            launch.queue(a + i * sa, b + i * sb, c + i * sd, call.alpha, call.beta, 0)
        out = call.out
        if layout == "row":
            res = np.empty(shape, p.out_dtype)
            direct = out is not None and out.flags.c_contiguous
        else:
            res = np.swapaxes(np.empty(p.batch + (p.n, p.m), p.out_dtype), -1, -2)
            direct = out is not None and np.swapaxes(out, -1, -2).flags.c_contiguous
        target = out if direct else res
        drv.memcpy_dtoh(raw_view(target if layout == "row" else np.swapaxes(target, -1, -2)), c)  # waits for the launches
    finally:
        for buf in allocs:
            buf.free()
    return out if direct else store_result(res, out)
