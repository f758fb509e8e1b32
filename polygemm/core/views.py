"""What a repeated call reads of its operands: the plan cache's key of each, cheaply."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..interop.cuda_array_interface import device_index
from ..interop.cupy import cupy_view
from ..interop.torch import torch_negated, torch_stream, torch_view

__all__ = ["operand_view"]

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
    if torch_negated(obj):  # a lazy negation (a subclass's too: torch_view passed it over) is resolved every call
        return None
    try:
        iface = obj.__cuda_array_interface__
        where = "cuda"
    except AttributeError:
        iface = getattr(obj, "__polygemm_array_interface__", None)
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
    except (KeyError, TypeError):
        return None
    stream = iface.get("stream")
    return key + (type(obj), device_index(obj)), ptr, stream if stream is not None else torch_stream(obj)
