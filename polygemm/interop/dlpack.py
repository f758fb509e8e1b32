"""DLPack in: an object that offers only ``__dlpack__``/``__dlpack_device__`` (JAX, array-API
libraries) is read without a copy: CPU data through ``numpy.from_dlpack``, CUDA data by reading
the capsule's ``DLTensor`` (pointer, shape, strides, dtype) into the ``__cuda_array_interface__``
form. CPU bfloat16 data (which ``numpy.from_dlpack`` refuses) becomes an ``ml_dtypes.bfloat16``
view of the same memory, writeable only where a DLPack 1.0 export says its memory may be written
(JAX arrays are immutable, and the older export has no flag to say so)."""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from ..core.dtypes import bfloat16
from ..errors import ArgumentError, DTypeError
from .kinds import Foreign, type_name
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


class _DLManagedTensorVersioned(ctypes.Structure):
    """DLPack 1.0's export: a version, the producer's context and deleter, flags, then the tensor."""
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is.restype = ctypes.c_int
_capsule_is.argtypes = [ctypes.py_object, ctypes.c_char_p]

_FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY


_DL_CODES = {0: "i", 1: "u", 2: "f"}  # kDLInt, kDLUInt, kDLFloat (complex is not read)


_KDL_BFLOAT = 4  # kDLBfloat: 16 bits is bfloat16 (the interface's typestr "bfloat16": no NumPy typestr says it)


def _host_bfloat16(obj: Any, capsule: Any, t: "_DLTensor", writable: bool) -> np.ndarray:
    """CPU bfloat16 DLPack data as an ``ml_dtypes.bfloat16`` NumPy view of the same memory
    (NumPy's own from_dlpack refuses the dtype), read-only unless ``writable``."""
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None if not t.strides else tuple(2 * int(t.strides[i]) for i in range(t.ndim))
    iface = {"shape": shape, "typestr": "<u2", "strides": strides, "data": ((t.data or 0) + t.byte_offset, not writable),
             "version": 3}
    return np.asarray(Foreign(iface, obj, capsule)).view(bfloat16())


def _host_export(name: str, obj: Any) -> tuple[Any, "_DLTensor", bool] | None:
    """``obj``'s CPU DLPack export as ``(capsule, its DLTensor, whether its memory may be written)``:
    DLPack 1.0's, whose read-only flag says, where the producer offers it; else the older one,
    taken read-only (it has no flag, and its producer may hold immutable arrays, as JAX does).
    None when the producer refuses to export."""
    try:
        capsule = obj.__dlpack__(max_version=(1, 0))
    except TypeError:  # a producer of DLPack before 1.0: no max_version
        capsule = None
    except Exception:
        return None
    if capsule is not None and _capsule_is(capsule, b"dltensor_versioned"):
        head = _DLManagedTensorVersioned.from_address(_capsule_pointer(capsule, b"dltensor_versioned"))
        if head.major == 1:  # (a later major version may lay the struct out otherwise)
            return capsule, head.dl_tensor, not head.flags & _FLAG_READ_ONLY
        capsule = None
    if capsule is None or not _capsule_is(capsule, b"dltensor"):
        capsule = _capsule(name, obj, None)
        if capsule is None or not _capsule_is(capsule, b"dltensor"):
            return None
    return capsule, _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor")), False


def _is_bfloat16(t: "_DLTensor") -> bool:
    """Whether the DLTensor holds bfloat16 elements, one lane each."""
    return t.dtype.code == _KDL_BFLOAT and t.dtype.bits == 16 and t.dtype.lanes == 1


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
            export = _host_export(name, obj)
            if export is not None and _is_bfloat16(export[1]):
                return "host", _host_bfloat16(obj, *export), None
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


def dlpack_wrapper(xp: Any, device: Any = None) -> Callable[[np.ndarray], Any]:
    """A NumPy result as an array of namespace ``xp`` (JAX, array-API libraries) on ``device``
    (the inputs' device; None: where the library puts CPU data), through its ``from_dlpack`` (no
    copy where the library can keep NumPy's memory there); bfloat16, which NumPy exports through no
    DLPack, through ``asarray`` (JAX takes ml_dtypes' type itself). The device is read once, here:
    each call pays only the keyword."""
    def anywhere(res: np.ndarray) -> Any:
        if res.dtype.name == "bfloat16":
            return xp.asarray(res)
        return xp.from_dlpack(res)

    if device is None:
        return anywhere

    # every CPU array exports as device 0: without device=, a result of inputs on another CPU device (JAX's
    # --xla_force_host_platform_device_count, array_api_strict's Device('device1')) would land on device 0
    def placed(res: np.ndarray) -> Any:
        try:
            if res.dtype.name == "bfloat16":
                return xp.asarray(res, device=device)
            return xp.from_dlpack(res, device=device)
        except TypeError:  # a library of the array API before 2023.12, whose from_dlpack takes no device
            return anywhere(res)

    return placed
