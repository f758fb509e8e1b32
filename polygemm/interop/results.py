"""Same kind out: a result polygemm allocates is of the input's kind. Device results are
allocated by the input's own library (``xp.empty(..., device=...)``: CuPy's pool, torch's caching
allocator, on the input's device); host results go back through the input's namespace
``from_dlpack`` (no copy). pycuda and unknown device kinds get a pycuda ``GPUArray``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .cupy import cupy_allocator, cupy_whole
from .dlpack import dlpack_wrapper
from .kinds import kind_of, namespace
from .numpy import subclass_wrapper
from .torch import torch_allocator, torch_whole, torch_wrapper

__all__ = ["made_whole", "allocator", "host_wrapper"]


def made_whole(x: Any, shape: tuple[int, ...] | None = None) -> Any:
    """``x`` (a CuPy array or a torch tensor), broadcast to ``shape`` when set, made contiguous
    by its own library on its current stream (the stream a polygemm call on it runs on); None
    for arrays of other kinds (polygemm does not copy those on their device)."""
    kind = kind_of(x)
    if kind == "cupy":
        return cupy_whole(x, shape)
    if kind == "torch":
        return torch_whole(x, shape)
    return None


def allocator(kind: str, like: Any) -> Callable[[tuple[int, ...], np.dtype], Any] | None:
    """``alloc(shape, dtype)`` making a C-ordered device array of ``like``'s library on its
    device, or None (pycuda and unknown kinds: the backend allocates its own)."""
    if kind in ("numpy", "pycuda"):
        return None
    xp = namespace(like)
    if xp is None or not hasattr(xp, "empty"):
        return None
    # CuPy and torch directly: the namespace's wrappers cost a small call several microseconds
    if kind == "cupy":
        return cupy_allocator(like)
    from array_api_compat import device

    dev = device(like)
    if kind == "torch":
        return torch_allocator(dev)

    def alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return xp.empty(shape, dtype=getattr(xp, dtype.name), device=dev)

    return alloc


def host_wrapper(kind: str, like: Any) -> Callable[[np.ndarray], Any] | None:
    """For host data of another library (torch CPU, JAX, ...): turn a NumPy result into that
    kind without a copy (``xp.from_dlpack``), on ``like``'s device; for an ndarray subclass
    (``np.matrix``), that subclass, as ``numpy.matmul`` returns it; None for NumPy."""
    if kind == "numpy":
        return subclass_wrapper(like)
    xp = namespace(like)
    if xp is None or not hasattr(xp, "from_dlpack"):
        return None
    if kind == "torch":
        return torch_wrapper(xp)
    return dlpack_wrapper(xp, _host_device(like))


def _host_device(like: Any) -> Any:
    """The device ``like`` (host data of an array-API library) lives on, as its library names it
    for ``from_dlpack(..., device=)``; None where array-api-compat cannot say."""
    from array_api_compat import device

    try:
        return device(like)
    except Exception:  # noqa: BLE001 - a device of no name: the library places the result itself
        return None
