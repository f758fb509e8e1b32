"""Device arrays by their array interface: ``__cuda_array_interface__`` (CuPy, PyTorch, pycuda,
Numba) or ``__polygemm_array_interface__`` (other devices), their pointers and device index."""

from __future__ import annotations

import sys
from typing import Any

from ..errors import ArgumentError

__all__ = ["device_interface", "device_pointer", "device_index"]

def device_interface(obj: Any, name: str = "") -> tuple[str, dict] | None:
    """Return ``(residency, interface)`` for a device array, or None for host data.

    CUDA arrays are recognized by ``__cuda_array_interface__`` (pycuda, CuPy, PyTorch).
    Other devices' arrays expose ``__polygemm_array_interface__``: a dict with the same
    keys as the CUDA interface (``shape``, ``typestr``, ``strides``, ``data``) plus
    ``device``, the residency name (e.g. ``"musa"``). ``name`` (the argument's) leads the
    message of an interface that cannot be read.
    """
    try:
        iface = obj.__cuda_array_interface__
    except AttributeError:
        try:
            iface = getattr(obj, "__polygemm_array_interface__", None)
        except Exception as exc:  # e.g. an array whose memory was freed
            raise ArgumentError(f"{_who(name, obj)}: could not read its __polygemm_array_interface__: {exc}") from exc
        return None if iface is None else (str(iface["device"]), dict(iface))
    except Exception as exc:  # e.g. a torch tensor that needs grad
        raise ArgumentError(f"{_who(name, obj)}: could not read its __cuda_array_interface__: {exc}") from exc
    return "cuda", dict(iface)


def _who(name: str, obj: Any) -> str:
    """The argument an unreadable interface belongs to, as a message names it."""
    return f"{name} ({type(obj).__name__})" if name else type(obj).__name__


def device_pointer(obj: Any) -> int:
    """The device address of a device array polygemm allocated or was given (torch tensors by
    ``data_ptr``: their array interface refuses bfloat16)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and type(obj) is cupy.ndarray:  # its array interface builds a dict per read
        return int(obj.data.ptr) if obj.size else 0
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return int(obj.data_ptr())
    return int(obj.__cuda_array_interface__["data"][0] or 0)


def device_index(obj: Any) -> int | None:
    """The GPU a CuPy array (``.device.id``) or a torch tensor (``.device.index``) lives on;
    None for other objects (plans for those are checked against the device per call)."""
    dev = getattr(obj, "device", None)
    if dev is None or isinstance(dev, str):
        return None
    idx = getattr(dev, "id", None)
    if idx is None:
        idx = getattr(dev, "index", None)
    return idx if isinstance(idx, int) else None
