"""CuPy: operands read from their attributes (the array interface builds a dict per read), results
allocated by CuPy on the operands' device, inputs made contiguous by CuPy."""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

__all__ = ["cupy_view", "cupy_views", "cupy_allocator", "cupy_whole"]

_NO_VIEW: tuple[tuple[Any, ...], int, None] = ((), 0, None)  # operand_view(None)

def _cupy_one(obj: Any, nd: Any, stream: int) -> tuple[tuple[Any, ...], int, int]:
    data = obj.data  # a MemoryPointer: its ptr and device_id are plain fields (obj.device makes a Device)
    ptr = data.ptr if obj.size else 0
    # the dtype itself (hashed in 40 ns) where dtype.str makes a new string to hash on every read (0.37 us)
    return ("cuda", obj.shape, obj.strides, obj.dtype, False, ptr % 16, nd, data.device_id), ptr, stream


def _cupy_stream(cupy: Any) -> int:
    """CuPy's current stream as the array interface names it (its null stream: 1, the legacy default stream)."""
    ptr = cupy.cuda.get_current_stream().ptr
    return int(ptr) if ptr else 1


def cupy_view(obj: Any) -> tuple[tuple[Any, ...], int, int] | None:
    """``operand_view`` of a CuPy array from its attributes: its ``__cuda_array_interface__``
    builds a dict (with the dtype's ``descr`` list) on every read, a few µs of a small call.
    The key holds the same facts (shape, strides, dtype, 16-byte class, device); the stream is
    the one that interface names, CuPy's current stream (its null stream as the legacy
    default stream, 1). None for anything but a ``cupy.ndarray``."""
    cupy = sys.modules.get("cupy")
    if cupy is None or type(obj) is not cupy.ndarray:
        return None
    return _cupy_one(obj, cupy.ndarray, _cupy_stream(cupy))


def cupy_views(a: Any, b: Any, c: Any, out: Any) -> tuple[Any, Any, Any, Any] | None:
    """``cupy_view`` of ``a``, ``b``, ``c`` and ``out`` at once when ``a`` and ``b`` are CuPy arrays
    and ``c`` and ``out`` are CuPy arrays or None (the common call of a CuPy user), CuPy's current
    stream read once for all; None otherwise (each operand is then viewed on its own)."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    nd = cupy.ndarray
    if type(a) is not nd or type(b) is not nd or (c is not None and type(c) is not nd) or (out is not None and type(out) is not nd):
        return None
    stream = _cupy_stream(cupy)
    return (_cupy_one(a, nd, stream), _cupy_one(b, nd, stream),
            _NO_VIEW if c is None else _cupy_one(c, nd, stream), _NO_VIEW if out is None else _cupy_one(out, nd, stream))


def cupy_allocator(like: Any) -> Callable[[tuple[int, ...], np.dtype], Any]:
    """``alloc(shape, dtype)``: a C-ordered CuPy array on ``like``'s GPU."""
    import cupy

    current, ordinal = cupy.cuda.runtime.getDevice, int(like.device.id)

    def cupy_alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        if current() == ordinal:
            return cupy.empty(shape, dtype)
        with cupy.cuda.Device(ordinal):
            return cupy.empty(shape, dtype)

    return cupy_alloc


def cupy_whole(x: Any, shape: tuple[int, ...] | None) -> Any:
    """``x`` broadcast to ``shape`` (when set) and made contiguous by CuPy, on its current stream."""
    import cupy

    return cupy.ascontiguousarray(x if shape is None else cupy.broadcast_to(x, shape))
