"""What a repeated call reads of its operands: the plan cache's key of each, cheaply."""

from __future__ import annotations

from typing import Any

import sys

import numpy as np

from ..interop.cuda_array_interface import device_index
from ..interop.cupy import cupy_view
from ..interop.torch import torch_keyless, torch_stream, torch_view

__all__ = ["operand_view", "view_interface"]

def operand_view(obj: Any) -> tuple[tuple, int, Any] | None:
    """What a repeated call needs of one operand, read cheaply: ``(key, device pointer, stream)``.

    ``key`` holds everything a plan depends on (kind, shape, strides, dtype, read-only flag and,
    for device data, the pointer's 16-byte alignment class). None for objects that take the
    full normalization every time (anything but a NumPy array or a device array).
    """
    if type(obj) is np.ndarray:
        return ("host", obj.shape, obj.strides, obj.dtype, obj.flags.writeable), 0, None
    if obj is None:
        return (), 0, None
    tv = cupy_view(obj)
    if tv is None:
        tv = torch_view(obj)
    if tv is not None:
        return tv
    if torch_keyless(obj):  # a lazy negation (a subclass's too: torch_view passed it over) is resolved every call, and
        return None           # a dual tensor of forward AD refused: neither is its memory alone
    try:
        iface = obj.__cuda_array_interface__
        where = "cuda"
    except AttributeError:
        try:
            iface = getattr(obj, "__polygemm_array_interface__", None)
        except Exception:  # e.g. an array whose memory was freed: the full normalization names it
            return None
        if iface is None:
            return None
        where = iface.get("device")
    except Exception:  # e.g. a torch tensor that needs grad: the full normalization says so
        return None
    try:
        ptr, readonly = iface["data"]
        ptr = int(ptr or 0)
        strides = iface.get("strides")
        key = (where, tuple(iface["shape"]), None if strides is None else tuple(strides), iface["typestr"], bool(readonly), ptr % 16)
    except (KeyError, TypeError, ValueError):  # an interface not of the CUDA interface's keys: the full normalization says so
        return None
    stream = iface.get("stream")
    return key + (type(obj), device_index(obj)), ptr, stream if stream is not None else torch_stream(obj)


def view_interface(view: tuple[tuple, int, Any] | None) -> tuple[str, dict] | None:
    """The device interface an operand's view was read from, as
    :func:`~polygemm.interop.cuda_array_interface.device_interface` gives it: ``(residency,
    interface)``, from the facts the view already holds, so that normalizing a call whose cache
    key read its operands reads none of them again. None for host data, an absent operand, or no
    view (the operand is then read by normalization itself)."""
    if view is None:
        return None
    key, ptr, stream = view
    if len(key) < 8:  # ("host", ...) of a NumPy array, () of an absent operand
        return None
    where, shape, strides, dt, readonly = key[0], key[1], key[2], key[3], key[4]
    if isinstance(dt, np.dtype):  # cupy_view's: the dtype itself, strides in bytes
        typestr = dt.str
    else:
        typestr = dt
        torch = sys.modules.get("torch")
        if strides is not None and torch is not None and key[6] is torch.Tensor:  # torch_view's: strides in elements
            itemsize = 2 if typestr == "bfloat16" else np.dtype(typestr).itemsize
            strides = tuple(int(s) * itemsize for s in strides)
    iface = {"shape": tuple(shape), "typestr": typestr, "strides": None if strides is None else tuple(strides),
             "data": (ptr, bool(readonly)), "version": 3, "stream": stream}
    return str(where), iface
