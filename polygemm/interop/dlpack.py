"""DLPack in: an object that offers only ``__dlpack__``/``__dlpack_device__`` (JAX, array-API
libraries) is read without a copy: CPU data through ``numpy.from_dlpack``, CUDA data by reading
the capsule's ``DLTensor`` (pointer, shape, strides, dtype) into the ``__cuda_array_interface__``
form. CPU bfloat16 data (which ``numpy.from_dlpack`` refuses) becomes an ``ml_dtypes.bfloat16``
view of the same memory."""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from ..core.dtypes import bfloat16
from ..errors import ArgumentError, DTypeError
from .kinds import type_name
from .torch import torch_stream

__all__ = ["dlpack_interface", "dlpack_wrapper"]

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13

# -- DLPack in --------------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


_DL_CODES = {0: "i", 1: "u", 2: "f"}  # kDLInt, kDLUInt, kDLFloat (complex is not read)


_KDL_BFLOAT = 4  # kDLBfloat: 16 bits is bfloat16 (the interface's typestr "bfloat16": no NumPy typestr says it)


class _Foreign:
    """Memory of another library seen through ``__array_interface__``: the arrays NumPy makes
    from it keep this object, and so the producer and its capsule, alive."""

    def __init__(self, iface: dict, owner: Any) -> None:
        self.__array_interface__ = iface
        self.owner = owner


def _host_bfloat16(obj: Any, t: "_DLTensor", capsule: Any) -> np.ndarray:
    """CPU bfloat16 DLPack data as an ``ml_dtypes.bfloat16`` NumPy view of the same memory
    (NumPy's own from_dlpack refuses the dtype)."""
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None if not t.strides else tuple(2 * int(t.strides[i]) for i in range(t.ndim))
    iface = {"shape": shape, "typestr": "<u2", "strides": strides, "data": ((t.data or 0) + t.byte_offset, False), "version": 3}
    return np.asarray(_Foreign(iface, (obj, capsule))).view(bfloat16())


def dlpack_interface(name: str, obj: Any) -> tuple[str, Any, dict | None]:
    """Read a DLPack-only object: ``("host", numpy array, None)`` for CPU data, or
    ``("cuda", capsule, interface)`` with a ``__cuda_array_interface__``-shaped dict for CUDA
    data (the capsule keeps the producer's memory alive while the call holds it)."""
    try:
        dev_type, _dev_id = obj.__dlpack_device__()
    except Exception as exc:
        raise ArgumentError(f"{name} ({type_name(obj)}) has __dlpack__ but __dlpack_device__ failed: {exc}") from exc
    if dev_type in (_KDL_CPU, _KDL_CUDA_HOST):
        try:
            return "host", np.from_dlpack(obj), None
        except Exception as exc:
            capsule = _capsule(name, obj, None)
            t = None if capsule is None else _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
            if t is not None and t.dtype.code == _KDL_BFLOAT and t.dtype.bits == 16 and t.dtype.lanes == 1:
                return "host", _host_bfloat16(obj, t, capsule), None
            raise ArgumentError(f"{name} ({type_name(obj)}) could not be read through DLPack: {exc}") from exc
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        raise ArgumentError(f"{name} ({type_name(obj)}) lives on DLPack device type {dev_type}; polygemm takes CPU and CUDA data")
    capsule = _capsule(name, obj, 1)  # its producer orders its work before the legacy default stream
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    bf16 = t.dtype.code == _KDL_BFLOAT and t.dtype.bits == 16
    if t.dtype.lanes != 1 or not (bf16 or t.dtype.code in _DL_CODES):
        raise DTypeError(f"{name} ({type_name(obj)}) has DLPack dtype code {t.dtype.code} ({t.dtype.bits} bits); "
                         f"polygemm supports float16, bfloat16, float32 and float64")
    itemsize = t.dtype.bits // 8
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None if not t.strides else tuple(int(t.strides[i]) * itemsize for i in range(t.ndim))
    typestr = "bfloat16" if bf16 else f"<{_DL_CODES[t.dtype.code]}{itemsize}"
    iface = {"shape": shape, "typestr": typestr, "strides": strides,
             "data": ((t.data or 0) + t.byte_offset, False), "version": 3, "stream": torch_stream(obj),
             "capsule": capsule}  # the capsule rides along: the producer's memory stays alive while the call holds it
    return "cuda", capsule, iface


def _capsule(name: str, obj: Any, stream: int | None) -> Any:
    """``obj.__dlpack__`` (for ``stream`` when the producer takes one); ArgumentError with the
    producer's reason when it refuses (a torch tensor that requires grad, say), None for a
    CPU producer that refuses (its from_dlpack error is the one to report)."""
    try:
        try:
            return obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
        except TypeError:
            return obj.__dlpack__()
    except Exception as exc:
        if stream is None:
            return None
        raise ArgumentError(f"{name} ({type_name(obj)}) could not be read through DLPack: {exc}") from exc


def dlpack_wrapper(xp: Any) -> Callable[[np.ndarray], Any]:
    """A NumPy result as an array of namespace ``xp`` (JAX, array-API libraries), through its
    ``from_dlpack`` (no copy); bfloat16, which NumPy exports through no DLPack, through ``asarray``
    (JAX takes ml_dtypes' type itself)."""
    def other(res: np.ndarray) -> Any:
        if res.dtype.name == "bfloat16":
            return xp.asarray(res)
        return xp.from_dlpack(res)

    return other
