"""The arrays users hold: which library an operand belongs to, DLPack in, the same kind out.

* **Kinds.** An operand's kind is its library (``numpy``, ``cupy``, ``torch``, ``jax``,
  ``pycuda``, ...), read with ``array-api-compat`` where it knows the library and from the
  type's module otherwise. Python lists and scalars count as NumPy. One call takes one kind:
  CuPy ``a`` with a torch ``b`` is refused, naming both.
* **DLPack in.** An object that offers only ``__dlpack__``/``__dlpack_device__`` is read
  without a copy: CPU data through ``numpy.from_dlpack``, CUDA data by reading the capsule's
  ``DLTensor`` (pointer, shape, strides, dtype) into the ``__cuda_array_interface__`` form.
  bfloat16 comes this way too: torch's ``__cuda_array_interface__`` refuses it, so CUDA
  torch bfloat16 tensors are read through DLPack, and CPU bfloat16 data (which
  ``numpy.from_dlpack`` refuses) becomes an ``ml_dtypes.bfloat16`` view of the same memory.
* **Same kind out.** A result polygemm allocates is of the input's kind: device results are
  allocated by the input's own library (``xp.empty(..., device=...)``: CuPy's pool, torch's
  caching allocator, on the input's device); host results go back through the input's
  namespace ``from_dlpack`` (no copy). pycuda and unknown device kinds get a pycuda
  ``GPUArray``.
* **Streams.** torch publishes no stream in its array interface; its current stream is the
  one a torch user expects work on, so that is the stream a call on torch tensors names.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable

import numpy as np

from .errors import ArgumentError, DTypeError

__all__ = ["kind_of", "torch_negated", "torch_resolved", "torch_unwritable", "torch_written", "common_kind", "dlpack_interface", "allocator", "host_wrapper", "result_like", "torch_stream", "torch_view", "torch_views", "cupy_view", "cupy_views", "device_index",
           "torch_dlpack_only", "device_pointer", "raw_view", "made_whole"]

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_HOSTLIKE = ("numpy", "builtins")


def kind_of(obj: Any) -> str:
    """The library ``obj`` belongs to (``"numpy"`` for NumPy arrays, lists and scalars)."""
    if obj is None or isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".", 1)[0]
    if root in ("jaxlib", "jax"):
        return "jax"
    return "numpy" if root in _HOSTLIKE else root


def made_whole(x: Any, shape: tuple[int, ...] | None = None) -> Any:
    """``x`` (a CuPy array or a torch tensor), broadcast to ``shape`` when set, made contiguous
    by its own library on its current stream (the stream a polygemm call on it runs on); None
    for arrays of other kinds (polygemm does not copy those on their device)."""
    kind = kind_of(x)
    if kind == "cupy":
        import cupy

        return cupy.ascontiguousarray(x if shape is None else cupy.broadcast_to(x, shape))
    if kind == "torch":
        return (x if shape is None else x.expand(*shape)).contiguous()
    return None


#: libraries whose arrays polygemm returns in kind; arrays of others never conflict
KNOWN_KINDS = ("numpy", "cupy", "torch", "jax", "pycuda", "dask")


def common_kind(operands: list[tuple[str, Any]]) -> str:
    """The one kind of the given ``(name, object)`` operands; ArgumentError naming both
    when two known libraries differ (mixing them would leave the result's kind a guess).
    Objects of other libraries (device arrays exposing only an interface) take no side."""
    kinds = [(name, kind_of(obj), obj) for name, obj in operands if obj is not None]
    known = [k for k in kinds if k[1] in KNOWN_KINDS]
    if not known:
        return kinds[0][1]
    kinds = known
    first = kinds[0]
    for name, kind, obj in kinds[1:]:
        if kind != first[1]:
            raise ArgumentError(
                f"{first[0]} is a {_type_name(first[2])} and {name} a {_type_name(obj)}: pass operands of one library "
                f"(convert one, e.g. with {first[1]}'s asarray / from_dlpack)"
            )
    return first[1]


def _type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__.split('.', 1)[0]}.{t.__name__}" if t.__module__ not in _HOSTLIKE else t.__name__


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


def torch_dlpack_only(obj: Any) -> bool:
    """Whether ``obj`` is a CUDA torch tensor that torch's ``__cuda_array_interface__`` refuses
    (bfloat16): it is read through DLPack instead."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and obj.dtype == torch.bfloat16 and obj.is_cuda


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


def raw_view(arr: np.ndarray) -> np.ndarray:
    """``arr`` as bytes a buffer consumer can take: bfloat16 (whose ``ml_dtypes`` type has no
    buffer format, so memoryview and pycuda's copies refuse it) as uint16, others as they are."""
    return arr.view(np.uint16) if arr.dtype.name == "bfloat16" else arr


class _Foreign:
    """Memory of another library seen through ``__array_interface__``: the arrays NumPy makes
    from it keep this object, and so the producer and its capsule, alive."""

    def __init__(self, iface: dict, owner: Any) -> None:
        self.__array_interface__ = iface
        self.owner = owner


def _host_bfloat16(obj: Any, t: "_DLTensor", capsule: Any) -> np.ndarray:
    """CPU bfloat16 DLPack data as an ``ml_dtypes.bfloat16`` NumPy view of the same memory
    (NumPy's own from_dlpack refuses the dtype)."""
    from .problem import bfloat16

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
        raise ArgumentError(f"{name} ({_type_name(obj)}) has __dlpack__ but __dlpack_device__ failed: {exc}") from exc
    if dev_type in (_KDL_CPU, _KDL_CUDA_HOST):
        try:
            return "host", np.from_dlpack(obj), None
        except Exception as exc:
            capsule = _capsule(name, obj, None)
            t = None if capsule is None else _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
            if t is not None and t.dtype.code == _KDL_BFLOAT and t.dtype.bits == 16 and t.dtype.lanes == 1:
                return "host", _host_bfloat16(obj, t, capsule), None
            raise ArgumentError(f"{name} ({_type_name(obj)}) could not be read through DLPack: {exc}") from exc
    if dev_type not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        raise ArgumentError(f"{name} ({_type_name(obj)}) lives on DLPack device type {dev_type}; polygemm takes CPU and CUDA data")
    capsule = _capsule(name, obj, 1)  # its producer orders its work before the legacy default stream
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    bf16 = t.dtype.code == _KDL_BFLOAT and t.dtype.bits == 16
    if t.dtype.lanes != 1 or not (bf16 or t.dtype.code in _DL_CODES):
        raise DTypeError(f"{name} ({_type_name(obj)}) has DLPack dtype code {t.dtype.code} ({t.dtype.bits} bits); "
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
        raise ArgumentError(f"{name} ({_type_name(obj)}) could not be read through DLPack: {exc}") from exc


# -- same kind out ---------------------------------------------------------------------------------
def _namespace(like: Any) -> Any:
    """``like``'s array namespace (None: a library array-api-compat does not know). Without
    array-api-compat (a core dependency, missing only where polygemm is used from a source tree
    put on the path by hand) this raises rather than hand back a pycuda array for a CuPy or
    torch operand."""
    try:
        from array_api_compat import array_namespace
    except ImportError as exc:
        raise ImportError(f"polygemm returns {kind_of(like)} results of {type(like).__name__} "
                          "operands through array-api-compat, a dependency of polygemm that is not installed here: "
                          "pip install array-api-compat (or install polygemm with pip)") from exc
    try:
        return array_namespace(like)
    except TypeError:
        return None


def allocator(kind: str, like: Any) -> Callable[[tuple[int, ...], np.dtype], Any] | None:
    """``alloc(shape, dtype)`` making a C-ordered device array of ``like``'s library on its
    device, or None (pycuda and unknown kinds: the backend allocates its own)."""
    if kind in ("numpy", "pycuda"):
        return None
    xp = _namespace(like)
    if xp is None or not hasattr(xp, "empty"):
        return None
    from array_api_compat import device

    # CuPy and torch directly: the namespace's wrappers cost a small call several microseconds
    if kind == "cupy":
        import cupy

        current, ordinal = cupy.cuda.runtime.getDevice, int(like.device.id)

        def cupy_alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
            if current() == ordinal:
                return cupy.empty(shape, dtype)
            with cupy.cuda.Device(ordinal):
                return cupy.empty(shape, dtype)

        return cupy_alloc
    dev = device(like)
    if kind == "torch":
        import torch

        dtypes: dict[np.dtype, Any] = {}

        def torch_alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
            tdt = dtypes.get(dtype)
            if tdt is None:
                tdt = dtypes.setdefault(dtype, getattr(torch, dtype.name))  # torch has bfloat16 too
            if shape:  # the sizes as arguments: torch parses them faster than one tuple (2.4 against 4.6 µs on the H100's host)
                return torch.empty(*shape, dtype=tdt, device=dev)
            return torch.empty((), dtype=tdt, device=dev)

        return torch_alloc

    def alloc(shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return xp.empty(shape, dtype=getattr(xp, dtype.name), device=dev)

    return alloc


def result_like(a: Any, b: Any) -> Any:
    """The operand whose type the result takes: for NumPy subclasses (``np.matrix``) the one
    ``numpy.matmul`` would follow, the subclass of higher ``__array_priority__`` (``a`` on a
    tie); ``a`` otherwise."""
    subs = [x for x in (a, b) if isinstance(x, np.ndarray) and type(x) is not np.ndarray]
    if not subs:
        return a
    return max(subs, key=lambda x: float(getattr(x, "__array_priority__", 0.0)))  # max keeps the first of equals


def host_wrapper(kind: str, like: Any) -> Callable[[np.ndarray], Any] | None:
    """For host data of another library (torch CPU, JAX, ...): turn a NumPy result into that
    kind without a copy (``xp.from_dlpack``); for an ndarray subclass (``np.matrix``), that
    subclass through its ``__array_wrap__``, as ``numpy.matmul`` returns it; None for NumPy."""
    if kind == "numpy":
        if isinstance(like, np.ndarray) and type(like) is not np.ndarray:
            return like.__array_wrap__  # np.matrix makes a 1-D result a row, as numpy.matmul does
        return None
    xp = _namespace(like)
    if xp is None or not hasattr(xp, "from_dlpack"):
        return None
    if kind != "torch":
        def other(res: np.ndarray) -> Any:
            if res.dtype.name == "bfloat16":  # NumPy exports no bfloat16 through DLPack; JAX takes ml_dtypes' type itself
                return xp.asarray(res)
            return xp.from_dlpack(res)

        return other
    import torch

    def to_torch(res: np.ndarray) -> Any:
        if res.dtype.name == "bfloat16":  # NumPy exports no bfloat16 through DLPack: the same bits as int16
            return torch.from_numpy(res.view(np.int16)).view(torch.bfloat16)
        return xp.from_dlpack(res)

    return to_torch


def torch_stream(obj: Any) -> int | None:
    """The current stream of a CUDA torch tensor's device (torch's arrays name none)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor) or not obj.is_cuda:
        return None
    return _torch_current_stream(torch, obj.device.index)


def _torch_current_stream(torch: Any, index: int) -> int:
    """The current stream of CUDA device ``index`` as torch holds it (its raw handle)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.cuda.current_stream wraps, minus its Python
    if raw is not None:
        return int(raw(index))
    return int(torch.cuda.current_stream(index).cuda_stream)


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


_NO_VIEW: tuple[tuple[Any, ...], int, None] = ((), 0, None)  # operand_view(None)


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


_TORCH_TYPESTR: dict[Any, str] = {}


def _torch_one(obj: Any, device: int, stream: int | None) -> tuple[tuple[Any, ...], int, int | None]:
    typestr = _TORCH_TYPESTR.get(obj.dtype)
    if typestr is None:
        import torch

        typestr = _TORCH_TYPESTR.setdefault(obj.dtype, "bfloat16" if obj.dtype == torch.bfloat16 else obj.__cuda_array_interface__["typestr"])
    ptr = obj.data_ptr()
    # strides in elements (the typestr fixes the element's size): torch.Size is a tuple, stride() makes one
    key = ("cuda", obj.shape, obj.stride(), typestr, False, ptr % 16, type(obj), device)
    return key, ptr, stream


def _is_neg(t: Any) -> bool:
    """``t.is_neg()`` of a tensor (False where torch predates the negative bit, or a stand-in lacks it)."""
    f = getattr(t, "is_neg", None)
    return f is not None and bool(f())


def _is_inference(t: Any) -> bool:
    f = getattr(t, "is_inference", None)
    return f is not None and bool(f())


def torch_negated(obj: Any) -> bool:
    """Whether ``obj`` is a torch tensor with its negative bit set (see :func:`torch_resolved`)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor) and _is_neg(obj)


def torch_unwritable(out: Any) -> bool:
    """Whether ``out`` is a torch inference tensor and inference mode is off: torch allows no update of it then."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(out, torch.Tensor) and _is_inference(out) and not torch.is_inference_mode_enabled()


def torch_resolved(name: str, obj: Any, *, writable: bool = False) -> Any:
    """``obj``; for a torch tensor with its negative bit set (a lazy negation, such as ``z.conj().imag``) the
    tensor it stands for, materialized by torch (``resolve_neg``). DLPack and the array interfaces export the memory
    without the bit: such an operand's values had been read with their signs flipped, silently. An ``out`` (writable)
    with the bit, or an inference tensor written outside ``torch.inference_mode`` (torch refuses that update), is refused."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return obj
    if writable and torch_unwritable(obj):
        raise ArgumentError(f"{name} is an inference tensor (made under torch.inference_mode), which torch lets nobody update "
                            f"outside inference mode; call polygemm inside torch.inference_mode(), or omit {name} to get a new result")
    if not _is_neg(obj):
        return obj
    if writable:
        raise ArgumentError(f"{name} is a torch tensor with its negative bit set (a lazy negation, such as z.conj().imag): its "
                            f"memory holds the values' negatives, and polygemm writes memory as it is; pass a tensor without "
                            f"it ({name}.resolve_neg() is a new one), or omit {name} to get a new result")
    return obj.resolve_neg()


def torch_written(out: Any) -> None:
    """Tell torch's autograd that ``out`` (a torch tensor polygemm wrote) changed in place, as its own ``out=`` does:
    a graph that saved it for backward then raises "modified by an inplace operation" instead of computing
    gradients from the new values, silently. Nothing for other arrays."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor):
        bump = getattr(getattr(torch.autograd, "graph", None), "increment_version", None)
        if bump is not None:
            bump(out)


def torch_view(obj: Any) -> tuple[tuple[Any, ...], int, int | None] | None:
    """``operand_view`` of a CUDA torch tensor from its attributes (its ``__cuda_array_interface__``
    is Python-heavy): the same key fields, pointer and stream; None for anything else, or a
    tensor the full normalization must see (one that requires grad is refused there)."""
    torch = sys.modules.get("torch")
    if torch is None or type(obj) is not torch.Tensor or not obj.is_cuda or obj.requires_grad or _is_neg(obj):
        return None
    return _torch_one(obj, obj.device.index, torch_stream(obj))


def torch_views(a: Any, b: Any, c: Any, out: Any) -> tuple[Any, Any, Any, Any] | None:
    """``torch_view`` of ``a``, ``b``, ``c`` and ``out`` at once when all are CUDA tensors (c and
    out may be None) on one GPU, none requiring grad: the device's current stream read once for
    all; None otherwise (each operand is then viewed on its own)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    tensor = torch.Tensor
    if type(a) is not tensor or type(b) is not tensor or (c is not None and type(c) is not tensor) \
            or (out is not None and type(out) is not tensor):
        return None
    device = a.get_device()  # -1 on the CPU; an index on any other device (mps:0, xpu:0), not only CUDA
    for x in (a, b, c, out):
        if x is not None and (x.requires_grad or not x.is_cuda or x.get_device() != device or _is_neg(x)):
            return None  # (a lazy negation is resolved, or refused as out, by the full normalization)
    if device < 0:
        return None
    stream = _torch_current_stream(torch, device)
    return (_torch_one(a, device, stream), _torch_one(b, device, stream),
            _NO_VIEW if c is None else _torch_one(c, device, stream), _NO_VIEW if out is None else _torch_one(out, device, stream))


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
